/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Housekeeping of the BE queues (see sched_be.bpf.c, "no stall" and
 * "parking"): the starvation guard, the starved-task reports parking acts
 * on, and the rescue of queued BE tasks that are LC now. Run from
 * ops.dispatch, at most once per guard interval per CPU.
 */
#ifndef __SCHEDBE_BE_GUARD_BPF_H
#define __SCHEDBE_BE_GUARD_BPF_H

#include <scx/common.bpf.h>
#include "state.bpf.h"
#include "task_ctx.bpf.h"
#include "consume.bpf.h"	/* conc_admit() */
#include "../common/park_report.bpf.h"
#include "../common/task_state.bpf.h"

/* Per-CPU: next time this CPU may run the starvation guard. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} guard_next SEC(".maps");

/*
 * Housekeeping of the BE queues, at most once per guard interval per CPU:
 *  - a queued BE task that is no longer BE (cpu.idle=0 written, moved to an
 *    LC cgroup, policy changed, killed, or being frozen) is moved to this CPU
 *    and runs now; it is reclassified at its next enqueue. Without this it
 *    would sit in the BE queue behind LC until a guard slice.
 *  - parking: BE tasks starved over a park_after_ns window are reported.
 *  - starvation guard: one BE task queued longer than the limit gets a short
 *    slice on this CPU.
 */
static bool guard_rescue(s32 cpu)
{
	u64 now = bpf_ktime_get_ns(), *next;
	struct task_struct *p;
	struct task_ctx *tctx;
	u32 zero = 0, i;
	bool starving;

	next = bpf_map_lookup_elem(&guard_next, &zero);
	if (!next || time_before(now, *next))
		return false;
	*next = now + guard_interval_ns;

	bpf_for(i, 0, nr_llcs) {
		bpf_for_each(scx_dsq, p, be_dsq(i), 0) {
			tctx = task_ctx(p);
			if (!tctx)
				continue;
			if (starve_window_end(&tctx->starve, now) && report_starved(p, now))
				STAT_ADD(starved_reports, 1);
			if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
				continue;
			starving = waited(now, tctx->enq_at, starvation_limit_ns);
			if (!starving && sched_as_be(p, tctx))
				continue;
			/* concurrency mode: a guard slice does not lift its cgroup's cap */
			if (conc_admit(p, tctx, NULL, now) == CONC_NO)
				continue;
			scx_bpf_dsq_move_set_slice(BPF_FOR_EACH_ITER, starving ? guard_slice_ns : lc_slice_ns);
			if (!scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0))
				continue;	/* its tokens stay with it, see consume_dsq() */
			if (starving) {
				tctx->guarded = 1;
				STAT_ADD(guard_slices, 1);
			} else if (task_freezing(p)) {
				STAT_ADD(freeze_boosts, 1);
			} else {
				STAT_ADD(requeued_lc, 1);
			}
			return true;
		}
	}
	return false;
}

#endif /* __SCHEDBE_BE_GUARD_BPF_H */
