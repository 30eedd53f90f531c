/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The SCHED_BE policy's side of cpu.max (cpumax.bpf.h holds the limits
 * themselves): a slice cut to the runtime the task's cgroups have left, and
 * a runnable prev kept for another slice only with its concurrency tokens.
 * (What cpumax.bpf.h needs from the policy, bw_release_to() and
 * bw_released(), is in sched_be.bpf.c.)
 */
#ifndef __SCHEDBE_BE_CPUMAX_BPF_H
#define __SCHEDBE_BE_CPUMAX_BPF_H

#include <scx/common.bpf.h>
#include "state.bpf.h"
#include "task_ctx.bpf.h"
#include "../common/cpumax_conc.bpf.h"
#include "../common/slice_expiry.bpf.h"

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
