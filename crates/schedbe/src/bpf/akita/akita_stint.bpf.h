/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Akita's stints (akita.bpf.c): what the time a task runs on a CPU is
 * charged to (its server's period, or the CPU's host or BE time), with the
 * mode switch and exhaustion that charge decides, and the slice a task gets
 * when it starts on a CPU.
 *
 * Runs on the task's CPU (ops.dispatch, ops.running, ops.stopping), like
 * akita_server.bpf.h, which it builds on.
 */
#ifndef __AKITA_STINT_BPF_H
#define __AKITA_STINT_BPF_H

#include <scx/common.bpf.h>
#include "state.bpf.h"	/* task_ctx, KIND_*, sconf(), srun(), crun(), the slice tunables */
#include "akita_server.bpf.h"
#include "../common/slice_expiry.bpf.h"

/*
 * Charge @d ns, ending at @now, to server @r's current period. A vCPU that
 * used its budget while still runnable is throttled for the period; a HI
 * vCPU that used C_opt while still runnable needs C_pes: it gets hot and its
 * CPU enters HI mode at once (section 3.3).
 */
static __always_inline void charge_period(const struct akita_server_conf *c, struct akita_server_run *r,
					   struct akita_cpu_run *cr, u64 d, u64 now, bool runnable)
{
	/* the part beyond the budget (timer and IPI latency, or slack) is not budget */
	u64 in_budget = r->used_ns < c->budget_ns ? c->budget_ns - r->used_ns : 0;

	if (in_budget > d)
		in_budget = d;
	r->active_ns += in_budget;
	r->slack_ns += d - in_budget;
	r->used_ns += d;
	if (!runnable)
		return;
	if (r->used_ns >= c->budget_ns && !r->exhausted_at) {
		r->exhausted_at = now;
		r->nr_throttled++;
	}
	if (c->hi && r->used_ns >= c->c_opt_ns && !r->overran) {
		r->overran = 1;
		r->overruns++;
		r->temperature = initial_temperature;
		enter_hi_mode(cr, now);
	}
}

/*
 * Charge @p's CPU time since its stint began: to its CPU's host or BE
 * counter, or to its server. A stint that crossed the server's period
 * boundary (the slice ends there, but the timer and the IPI take a moment)
 * is split: the part after the boundary belongs to the new period, or the
 * server would get that much more than its budget in it.
 */
static void charge(struct task_struct *p, struct task_ctx *tctx, s32 cpu, u64 now, bool runnable)
{
	struct akita_server_conf *c;
	struct akita_server_run *r;
	struct akita_cpu_run *cr = crun(cpu);
	u64 start = tctx->run_start, d = now - start, end;

	tctx->run_start = now;
	if (!cr)
		return;
	if (tctx->kind == KIND_HOST) {
		cr->host_ns += d;
		return;
	}
	if (tctx->kind == KIND_BE) {
		cr->be_ns += d;
		return;
	}
	if (tctx->server < 0 || !(c = sconf(tctx->server)) || !(r = srun(tctx->server)))
		return;
	if (c->cpu != cpu || r->gen != c->gen)
		return;		/* moved or replaced while it ran: nothing to charge to */
	end = r->period_start + c->period_ns;
	if (c->period_ns && now > end) {
		if (start < end)
			charge_period(c, r, cr, end - start, end, runnable);
		sync_server(c, r, now);
		d = now - (start > r->period_start ? start : r->period_start);
	}
	charge_period(c, r, cr, d, now, runnable);
}

/*
 * The slice @p gets on @cpu now, and what it runs as there: an active
 * vCPU up to its budget (in LO mode, a HI one up to C_opt, where the mode
 * switch is decided) and its period's end; every task up to the CPU's
 * next_event.
 */
static void start_stint(struct task_struct *p, struct task_ctx *tctx, s32 cpu, u64 now)
{
	struct akita_cpu_run *cr = crun(cpu);
	struct akita_server_conf *c;
	struct akita_server_run *r;
	u64 slice, base, left;
	u32 rank = AKITA_RANK_HOST;
	bool timed = false;

	if (!cr)
		return;
	base = tctx->kind == KIND_BE ? be_slice_ns : host_slice_ns;
	slice = base;
	cr->cur_deadline = 0;
	if (tctx->kind == KIND_BE)
		rank = AKITA_RANK_BE;
	if (tctx->kind == KIND_VCPU && tctx->server >= 0 &&
	    (c = sconf(tctx->server)) && (r = srun(tctx->server)) && c->cpu == cpu) {
		sync_server(c, r, now);
		if (r->used_ns < c->budget_ns) {
			rank = active_rank(c, cr->mode);
			cr->cur_deadline = r->deadline;
			/*
			 * The budget's end is the policy's, not the tick's: timed.
			 * Untimed, a vCPU would run up to a tick past its budget
			 * while other VMs under theirs wait.
			 */
			slice = c->budget_ns - r->used_ns;
			timed = true;
			if (c->hi && cr->mode == AKITA_MODE_LO && r->used_ns < c->c_opt_ns)
				slice = c->c_opt_ns - r->used_ns;
		} else {
			rank = AKITA_RANK_INACTIVE;
			slice = base = inactive_slice_ns;
		}
		left = r->period_start + c->period_ns - now;
		if (left < slice)
			slice = left;
	}
	if (cr->next_event > now && cr->next_event - now < slice)
		slice = cr->next_event - now;
	if (slice < AKITA_MIN_SLICE_NS)
		slice = AKITA_MIN_SLICE_NS;
	cr->cur_rank = rank;
	if (rank == AKITA_RANK_HOST)
		cr->host_last = now;
	scx_bpf_task_set_slice(p, slice);
	/*
	 * A slice cut short, or ending at the budget, must end on time:
	 * sched_ext looks at slices only at ticks.
	 */
	if (timed || slice < base)
		slice_expiry_arm(p, cpu, slice);
}

#endif /* __AKITA_STINT_BPF_H */
