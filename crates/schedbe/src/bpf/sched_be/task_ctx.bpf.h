/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the SCHED_BE policy keeps per task, in task storage (task_ctx()),
 * and the tier it runs in now.
 */
#ifndef __SCHED_BE_TASK_CTX_BPF_H
#define __SCHED_BE_TASK_CTX_BPF_H

#include <scx/common.bpf.h>
#include "state.bpf.h"
#include "../common/policy.bpf.h"
#include "../common/tier_cache.bpf.h"
#include "../common/park_report.bpf.h"
#include "../common/cpumax.bpf.h"
#include "lc_weight.bpf.h"
#include "resv.bpf.h"
#include "lc_burst.bpf.h"

struct task_ctx {
	u64 started_at;		/* ops.running timestamp */
	u64 enq_at;		/* BE: when queued (starvation guard) */
	struct starve_win starve;	/* BE: the current starvation window (park_report.bpf.h) */
	u64 run_start;		/* when the current stint on a CPU began */
	u8 tier;		/* 0 LC, 1 BE: as classified at the last enqueue */
	u8 tier_valid;
	u8 guarded;		/* running on a guard slice */
	u8 freeze_boost;	/* BE by the rules, run as LC to reach the freezer trap */
	u8 rcu_boost;		/* preempted in an RCU read-side section: front of the LC queue, short slice */
	u64 rcu_debt;		/* LC vtime the boost skipped, charged back when it runs */
	struct tier_memo memo;	/* the LC/BE rules' answer (tier_cache.bpf.h) */
	struct lcw_memo lcw;	/* LC weight factor and batched load (lc_weight.bpf.h) */
	struct bw_task bw;	/* cpu.max: the task's limited cgroups (cpumax.bpf.h) */
	struct resv_memo resv;	/* its reservation slot, and the one it counts in (resv.bpf.h) */
	struct lc_burst burst;	/* how long it runs per wakeup, in either tier; LC preemption reads it (lc_burst.bpf.h) */
	u8 lc_q;		/* 1 + the LLC whose LC queue it was put in, until it runs; 0: none (lc_clock.bpf.h) */
};

/* BE as classified at the last enqueue */
#define TCTX_IS_BE(c)	((c)->tier_valid && (c)->tier == TIER_BE)

TASK_CTX_DEFINE(struct task_ctx, TCTX_IS_BE)

/* The tier @p is scheduled in right now (tier_runs_as_be()). */
static __always_inline bool sched_as_be(struct task_struct *p, struct task_ctx *tctx)
{
	return tier_runs_as_be(p, &tctx->memo);
}

#endif /* __SCHED_BE_TASK_CTX_BPF_H */
