/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The LC clock's rate as the LC queue is served (lc_clock_served()), and
 * the LC queue length per LLC it reads, kept by the tasks themselves.
 *
 * Why a count of our own: scx_bpf_dsq_nr_queued() looks a user queue up by
 * id (a hash table) at each call, and the clock needs the length at every
 * LC charge (ops.stopping, ops.tick), where the kfunc would add a
 * noticeable share to both callbacks' cost (docs/design.md, "LC fairness
 * across cores: flattened weights"). The count costs one atomic add when a
 * task is put in the queue and one when it starts to run.
 *
 * Invariant: lc_qlens[l].n is the number of tasks whose lc_q is l + 1
 * (plus any queued there without a context, counted for good). A
 * task's lc_q is set where it is put in LLC l's LC queue (ops.enqueue,
 * cpu.max's release) and cleared when it runs (ops.running), is queued
 * again (ops.enqueue, whatever it does next) or leaves sched_ext
 * (ops.disable). Every way out of the queue passes one of these, so the
 * count never falls below the queue's length; it counts over it only for a
 * task moved to a CPU's local queue (or a cpu.max holding queue) that has
 * not run yet. Counting over only slows the clock, which must never run
 * ahead of V. A task's lc_q is written under its run queue's lock, or by
 * cpu.max's timer while it sits in a holding queue; should a property change
 * (affinity, cgroup) dequeue it at that instant, the two writers can count
 * it twice, and the extra count stays: it too only slows the clock, and
 * makes the kfunc be asked again for that LLC.
 *
 * The count also spares ops.dispatch the kfunc on an empty queue
 * (lc_q_may_hold()).
 */
#ifndef __SCHEDBE_LC_CLOCK_BPF_H
#define __SCHEDBE_LC_CLOCK_BPF_H

#include <scx/common.bpf.h>
#include "state.bpf.h"	/* lc_vtime_now, llc_nr_cpus, llc_of() */

/* one cache line per LLC: its CPUs write it, the others' would only bounce it */
struct lc_qlen {
	u64 n;
	u64 pad[7];
};

struct lc_qlen lc_qlens[SCHEDBE_MAX_LLCS];

/* LLC @llc's count (the mask keeps the verifier's bounds check cheap). */
static __always_inline u64 *lc_qlen(u32 llc)
{
	return &lc_qlens[llc & (SCHEDBE_MAX_LLCS - 1)].n;
}

/* The task whose @lc_q this is no longer counts in a queue. */
static __always_inline void lc_q_leave(u8 *lc_q)
{
	u32 l = *lc_q;

	if (!l)
		return;
	*lc_q = 0;
	__sync_fetch_and_sub(lc_qlen(l - 1), 1);
}

/*
 * The task whose @lc_q this is was put in LLC @llc's LC queue. A task
 * without a context (@lc_q NULL) is counted for good: nothing could take it
 * back down, and the count must never fall below the queue's length.
 */
static __always_inline void lc_q_join(u8 *lc_q, u32 llc)
{
	llc &= SCHEDBE_MAX_LLCS - 1;
	if (!lc_q) {
		__sync_fetch_and_add(lc_qlen(llc), 1);
		return;
	}
	if (*lc_q == llc + 1)
		return;
	lc_q_leave(lc_q);
	*lc_q = llc + 1;
	__sync_fetch_and_add(lc_qlen(llc), 1);
}

/*
 * May LLC @llc's LC queue hold a task? False only when it is empty: the
 * count is raised before a task enters the queue (ops.enqueue's inserts
 * take effect after it returns; cpu.max's release counts before its move)
 * and lowered after it left. ops.dispatch and lc_queued() ask before the
 * queue's kfunc, which looks the queue up by id even to find it empty. A
 * task queued just after the read waits as it would had the kfunc looked a
 * moment earlier: the enqueue path kicks an idle CPU, and ops.running of BE
 * looks again.
 */
static __always_inline bool lc_q_may_hold(u32 llc)
{
	return *(volatile s64 *)lc_qlen(llc) > 0;
}

/*
 * The LC clock also advances as the LC queue is served, at EEVDF's rate for
 * its average vruntime V: @dv, the vtime just charged on @cpu, over the tasks
 * sharing the CPUs (those queued in the LLC, and one running on each of its
 * CPUs). Otherwise the clock moves only when a task ahead of it starts; while
 * every waking task starts at the sleeper floor it stands still, and the
 * queue orders request handlers by how much they ran, not by when they woke
 * (docs/design.md, "LC fairness across cores: flattened weights"). Counting
 * every CPU as running LC
 * overestimates the sharers, so the clock never runs ahead of V and the floor
 * does not erase the weights of tasks that are always runnable (the LLC's
 * CPUs are counted at load: one that goes offline only slows it). Nothing is
 * written while the queue is empty; a racing update lost only slows it.
 */
static __always_inline void lc_clock_served(s32 cpu, u64 dv)
{
	u32 llc = llc_of(cpu) & (SCHEDBE_MAX_LLCS - 1);
	s64 q = *(volatile s64 *)lc_qlen(llc);

	if (q > 0)
		lc_vtime_now += dv / (q + (llc_nr_cpus[llc] ?: 1));
}

#endif /* __SCHEDBE_LC_CLOCK_BPF_H */
