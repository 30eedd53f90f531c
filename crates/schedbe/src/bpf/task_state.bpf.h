/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Task states every schedbe policy must honour, whatever tier or VM a task
 * is in: a dying task and a task on its way to the freezer trap must get to
 * run, or a killed BE task would exit only on guard slices and parking could
 * not land (see main.bpf.c, "parking").
 */
#ifndef __SCHEDBE_TASK_STATE_BPF_H
#define __SCHEDBE_TASK_STATE_BPF_H

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
	       (BPF_CORE_READ(p, signal, flags) & SIGNAL_GROUP_EXIT);
}

/* The cgroup freezer asked @p to stop at its next return to user space. */
static __always_inline bool task_freezing(struct task_struct *p)
{
	return BPF_CORE_READ(p, jobctl) & SCHEDBE_JOBCTL_TRAP_FREEZE;
}

#endif /* __SCHEDBE_TASK_STATE_BPF_H */
