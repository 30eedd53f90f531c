/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Task states every schedbe policy must honour, whatever tier or VM a task
 * is in: a dying task and a task on its way to the freezer trap must get to
 * run, or a killed BE task would exit only on guard slices and parking could
 * not land (see sched_be.bpf.c, "parking"); a task preempted inside an RCU
 * read-side critical section must get to run, or RCU stalls.
 */
#ifndef __SCHEDBE_TASK_STATE_BPF_H
#define __SCHEDBE_TASK_STATE_BPF_H

#include <scx/common.bpf.h>

#ifndef PF_EXITING
#define PF_EXITING	0x00000004
#endif
#ifndef SIGNAL_GROUP_EXIT
#define SIGNAL_GROUP_EXIT	0x00000004
#endif
/* include/linux/sched/jobctl.h; bit 23 since v5.2 (cgroup v2 freezer). */
#define SCHEDBE_JOBCTL_TRAP_FREEZE	(1UL << 23)

/*
 * A task that is dying must get to run: a killed BE task would otherwise
 * exit only on guard slices. Exiting tasks and tasks of a group being killed
 * are scheduled as LC (this CPU time shows up as BE in the tracer, which
 * classifies by the configured rules only).
 */
static __always_inline bool task_dying(struct task_struct *p)
{
	return (p->flags & PF_EXITING) ||
	       (p->signal->flags & SIGNAL_GROUP_EXIT);
}

/* The cgroup freezer asked @p to stop at its next return to user space. */
static __always_inline bool task_freezing(struct task_struct *p)
{
	return p->jobctl & SCHEDBE_JOBCTL_TRAP_FREEZE;
}

/*
 * @p was preempted inside an RCU read-side critical section (PREEMPT_RCU):
 * every grace period, and all that waits for one (synchronize_rcu(), and
 * unloading this scheduler), waits until @p runs again. The kernel's remedy,
 * RCU priority boosting, is often not built (Debian's kernels lack
 * CONFIG_RCU_BOOST): a task of a low-weight cgroup preempted next to
 * heavy hogs would hold up every grace period, and the scheduler's own
 * unload, for as long as it waits. So such a task runs soon, whatever its
 * tier or weight.
 *
 * The test is rcu_blocked_node, set by rcu_note_context_switch() when a
 * reader is switched out and cleared when it leaves the section, not
 * rcu_read_lock_nesting: for the task being switched out, which is current,
 * the nesting count includes the rcu_read_lock() the BPF trampoline holds
 * around this very program.
 */
static __always_inline bool task_in_rcu_read(struct task_struct *p)
{
	if (!bpf_core_field_exists(p->rcu_blocked_node))
		return false;	/* no preemptible RCU: readers are never preempted */
	return p->rcu_blocked_node != NULL;
}

#endif /* __SCHEDBE_TASK_STATE_BPF_H */
