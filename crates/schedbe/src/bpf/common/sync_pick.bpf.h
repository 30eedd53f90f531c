/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel's default CPU picker for a waking task above BE, for every
 * schedbe policy, without the one answer that breaks "BE stays below".
 *
 * For a synchronous wakeup (the waker says it is about to sleep: a pipe or
 * socket write, a futex wake with WF_SYNC) scx_bpf_select_cpu_dfl() may
 * answer with the waker's own CPU, busy, when that CPU's local queue is
 * empty and any CPU in the machine idles, and it reports that CPU as idle
 * (*is_idle). Every policy puts a task whose CPU was reported idle straight
 * into that CPU's local queue, to run when the waker sleeps. Behind a BE
 * waker that does not sleep (a batch job filling a pipe that an LC task
 * drains: a log shipper, a container's shim reading its stdout) the LC task
 * then waits in the local queue of a CPU running BE until the BE slice ends
 * (20 ms): the entry check never sees it, as it never went through
 * ops.enqueue, and neither does the BE tick, which looks at the LC queues,
 * while other CPUs idle (tests/test_lc_place.py checks it).
 *
 * So behind a BE waker the picker is asked again without the sync hint: an
 * idle CPU the task may use if there is one (the picker's usual order:
 * previous CPU, same LLC, any), else none, and ops.enqueue places the task
 * like any LC wakeup with no idle CPU (the entry check preempts BE).
 */
#ifndef __SCHEDBE_SYNC_PICK_BPF_H
#define __SCHEDBE_SYNC_PICK_BPF_H

#include <scx/common.bpf.h>

/* Needs from the policy (TASK_CTX_DEFINE() defines it, policy.bpf.h): */
/* whether the running task, the waker, was BE at the policy's last classification of it */
static __always_inline bool current_is_be(void);

/* Whether the picker's answer @cpu is the waker's own CPU, chosen for a sync wakeup. */
static __always_inline bool picked_sync_waker(s32 cpu, u64 wake_flags)
{
	return (wake_flags & SCX_WAKE_SYNC) && cpu == bpf_get_smp_processor_id();
}

/*
 * scx_bpf_select_cpu_dfl() for @p, a task above BE, unless it chose a BE
 * waker's CPU; then asked again without the sync hint. The waker's tier is
 * looked up only in that case (one task-storage read).
 */
static __always_inline s32 pick_cpu_dfl(struct task_struct *p, s32 prev_cpu, u64 wake_flags, bool *is_idle)
{
	s32 cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, is_idle);

	if (!*is_idle || !picked_sync_waker(cpu, wake_flags) || !current_is_be())
		return cpu;
	return scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags & ~SCX_WAKE_SYNC, is_idle);
}

#endif /* __SCHEDBE_SYNC_PICK_BPF_H */
