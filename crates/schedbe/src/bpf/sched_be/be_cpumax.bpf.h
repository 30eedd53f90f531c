/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The SCHED_BE policy's side of cpu.max (cpumax.bpf.h holds the limits
 * themselves): which tier queue a task released from its holding queue goes
 * back to and which CPU is woken for it, a slice cut to the runtime the
 * task's cgroups have left, and a runnable prev kept for another slice only
 * with its concurrency tokens. bw_release_to() and bw_released() are what
 * cpumax.bpf.h needs from the policy.
 */
#ifndef __SCHEDBE_BE_CPUMAX_BPF_H
#define __SCHEDBE_BE_CPUMAX_BPF_H

#include <scx/common.bpf.h>
#include "state.bpf.h"
#include "task_ctx.bpf.h"
#include "lc_clock.bpf.h"	/* lc_q_join() */
#include "lc_place.bpf.h"	/* claim_be_cpu(), note_preempt() */
#include "../common/park_report.bpf.h"
#include "../common/cpumax_conc.bpf.h"
#include "../common/slice_expiry.bpf.h"

/*
 * cpu.max: a task leaving its cgroup's holding queue goes back to its tier's
 * queue with the sleeper floor (time held is not credit). A BE task starts a
 * new starvation window: time held is not starvation.
 */
static bool bw_release_to(struct task_struct *p, u64 *dsq, u64 *vtime, bool *fifo)
{
	struct task_ctx *tctx = task_ctx(p);
	u32 llc = llc_of(scx_bpf_task_cpu(p));
	u64 floor;

	*vtime = p->scx.dsq_vtime;
	if (tctx && tctx->tier == TIER_BE) {
		tctx->enq_at = bpf_ktime_get_ns();
		starve_restart(&tctx->starve, tctx->enq_at);
		*dsq = be_dsq(llc);
		floor = be_vtime_now - be_slice_ns;
	} else {
		*dsq = lc_dsq(llc);
		/* counted from here: should the move fail, it only counts over (lc_clock.bpf.h) */
		lc_q_join(tctx ? &tctx->lc_q : NULL, llc);
		floor = lc_vtime_now - lc_wake_credit_ns;
	}
	if (time_before(*vtime, floor))
		*vtime = floor;
	return true;
}

/* cpu.max: wake a CPU for a released task, as ops.enqueue would (entry check for LC). */
static void bw_released(struct task_struct *p, u64 dsq)
{
	s32 cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);

	if (cpu >= 0) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		return;
	}
	if (dsq < SCHEDBE_BE_DSQ_BASE && (cpu = claim_be_cpu(p)) >= 0) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
		note_preempt(cpu);
	}
}

/*
 * Give @p a slice of @slice_ns on @cpu, cut to the runtime its cgroups have
 * left under cpu.max, with the expiry timer armed for a cut slice (sched_ext
 * checks slices only at ticks).
 */
static void fit_slice(struct task_struct *p, struct task_ctx *tctx, s32 cpu, u64 slice_ns)
{
	/* no cpu.max anywhere (the common case): no clock read */
	u64 left = bw_on ? bw_runtime_left(p, &tctx->bw, bpf_ktime_get_ns()) : (u64)-1;

	if (left >= slice_ns) {
		if (p->scx.slice != slice_ns)
			scx_bpf_task_set_slice(p, slice_ns);
		return;
	}
	left = left > BW_MIN_SLICE_NS ? left : BW_MIN_SLICE_NS;
	scx_bpf_task_set_slice(p, left);
	slice_expiry_arm(p, cpu, left);
}

/*
 * ops.dispatch: @prev keeps @cpu for another slice (ops.running is not
 * called again), unless in concurrency mode it gave its tokens to a task
 * that then did not come here and cannot take them back.
 */
static bool keep_prev(struct task_struct *prev, s32 cpu, u64 slice_ns)
{
	struct task_ctx *tctx = bw_on ? task_ctx(prev) : NULL;

	if (!tctx) {
		scx_bpf_task_set_slice(prev, slice_ns);
		return true;
	}
	if (!bw_conc_take(prev, &tctx->bw, bpf_ktime_get_ns()))
		return false;
	fit_slice(prev, tctx, cpu, slice_ns);
	return true;
}

#endif /* __SCHEDBE_BE_CPUMAX_BPF_H */
