/* SPDX-License-Identifier: GPL-2.0 */
/*
 * schedbe: SCHED_BE on sched_ext.
 *
 * Two tiers, strictly ordered. Best-effort (BE) tasks are those the rules in
 * tier.bpf.h select (SCHED_IDLE, cpu.idle=1 cgroups, configured cgroup
 * paths); every other task is latency-critical (LC). The scheduler runs in
 * full-switch mode and schedules both tiers, because partial mode cannot
 * implement the entry check (fair's wakeup path does not see a CPU running
 * ext tasks as idle).
 *
 * Queues: per LLC, one LC and one BE dispatch queue, both ordered by virtual
 * time. LC tasks are placed in a per-CPU local queue only on a CPU that was
 * idle at wakeup or that they preempt BE on; BE tasks never are, except by
 * the starvation guard.
 *
 * Invariants (checked independently by `schedbe trace`):
 *  local: a CPU never starts a BE task while an LC task it may run is queued:
 *         ops.dispatch drains every LC queue (all LLCs) before any BE queue,
 *         and a CPU whose LC task is still runnable keeps it over BE.
 *  entry: an LC task that is enqueued and finds no idle CPU preempts a CPU
 *         running BE: it goes straight into that CPU's local queue with
 *         SCX_ENQ_PREEMPT (v7.1+; on older kernels it is queued and that
 *         CPU is kicked, see direct_entry()). CPUs running BE are kept in
 *         be_cpus, so this is a cpumask AND, not a scan. A claimed CPU is
 *         cleared from be_cpus so concurrent wakeups preempt different CPUs.
 *  exit:  a CPU about to run BE first takes an LC task waiting in any LLC's
 *         queue (same drain order as "local").
 *  LC fairness: LC virtual time advances by runtime / effective weight,
 *         where effective weight = nice weight x the task's cgroup factor.
 *         Userspace flattens the cgroup v2 cpu.weight hierarchy into those
 *         factors from measured runnable load (see flatten.rs), so weights
 *         hold across CPUs, not per runqueue.
 *  LC latency: an LC task that wakes with virtual-time credit (it slept)
 *         and finds every allowed CPU running LC preempts the LC task that
 *         is furthest ahead of it among two candidates, the one of the CPU
 *         the wakeup runs on first (no IPI), once that task has run
 *         lc_preempt_min_ns (lc_preempt_victim(); at that moment, by the
 *         CPU's slice-expiry timer, if it has not yet; at once if the woken
 *         task's bursts are shorter than that, lc_burst.bpf.h; never when
 *         that task is expected to sleep before the woken one would have
 *         run half its burst, lc_burst_outlasts()); a synchronous wakeup
 *         behind an LC waker that the kernel's picker placed on the
 *         waker's CPU stays there (sync_to_waker()); behind a BE waker
 *         never (sync_pick.bpf.h: the picker reports the waker's busy CPU
 *         idle, and BE does not sleep on cue).
 *  no stall: a BE task queued longer than starvation_limit_ns gets one
 *         guard slice, so the sched_ext watchdog never fires; the CPU time
 *         this costs LC is counted (guard_ns).
 *  parking: a BE task starved for park_after_ns is reported (its cgroup id,
 *         in starved_cgrps) to userspace, which freezes its BE cgroup
 *         (park.rs). Starved: runnable for a whole park_after_ns window and
 *         given less than 1/32 of it on a CPU. Under LC overload BE still
 *         gets crumbs (it starts and yields at once when LC shows up), so
 *         "never ran" would almost never hold; a BE task that gets a real
 *         share of a CPU, however it is sliced, is not starved. A frozen
 *         task is not runnable, so it costs neither CPU nor watchdog. The freezer stops a task only on its way
 *         back to user space, so a task with a freeze pending
 *         (JOBCTL_TRAP_FREEZE) is scheduled as LC until it gets there: that
 *         bounds the freeze and lets it release kernel locks first.
 *  reservations: an LC wakeup whose cgroup one more CPU keeps within its
 *         claim (the CPUs its weight gives it against what the others
 *         use), finding no CPU idle or running BE, preempts a task of a
 *         cgroup running on more CPUs than its fair share (resv.bpf.h).
 *  cpu.max: a task whose cgroup (or a limited ancestor) has used its quota
 *         for the period is held out of both tiers' queues until the period
 *         ends (cpumax.bpf.h), whatever its tier: a limit caps LC and BE alike.
 *
 * Shared with the other policies (common/): policy.bpf.h (task context,
 * counters, ops.exit), tier.bpf.h (LC/BE rules) and tier_cache.bpf.h (those
 * rules remembered per task), task_state.bpf.h (dying, freezing),
 * rt_takeover.bpf.h (RT/DL takeovers; built here with lazy evacuation,
 * RT_LAZY_EVACUATION), cpumax.bpf.h and cpumax_conc.bpf.h (cpu.max, both
 * modes), park_report.bpf.h (starvation windows and parking's reports),
 * cgrp_watch.bpf.h (when userspace reads cgroup files again), sync_pick.bpf.h
 * (the kernel's CPU picker, never a BE waker's busy CPU).
 * This policy's own parts (this folder): state.bpf.h (tunables, clocks,
 * counters), task_ctx.bpf.h (what it keeps per task), lc_weight.bpf.h
 * (cgroup weight factors, runnable load), cpu_cur.bpf.h (what each CPU
 * runs), resv.bpf.h (reservations), lc_burst.bpf.h (bursts per wakeup),
 * lc_clock.bpf.h (the LC clock and queue lengths), lc_place.bpf.h (where a
 * queued LC task runs), consume.bpf.h (ops.dispatch taking tasks from the
 * queues), be_guard.bpf.h (starvation guard, parking reports),
 * be_cpumax.bpf.h (this policy's side of cpu.max: cut slices, a kept
 * prev; what cpumax.bpf.h needs from it, where a released task goes, is
 * below).
 */
#include <scx/common.bpf.h>
#include "intf.h"
#include "state.bpf.h"
#include "task_ctx.bpf.h"
#include "lc_weight.bpf.h"
#include "cpu_cur.bpf.h"
#include "resv.bpf.h"
#include "lc_burst.bpf.h"
#include "lc_clock.bpf.h"
#include "lc_place.bpf.h"
#include "consume.bpf.h"
#include "be_guard.bpf.h"
#include "be_cpumax.bpf.h"
#include "../common/policy.bpf.h"
#include "../common/tier_cache.bpf.h"
#include "../common/task_state.bpf.h"
#include "../common/park_report.bpf.h"
#include "../common/rt_takeover.bpf.h"
#include "../common/cpumax_conc.bpf.h"
#include "../common/cgrp_watch.bpf.h"
#include "../common/sync_pick.bpf.h"

/* The counters the shared parts add to: this policy's struct cpu_stats. */
RT_TAKEOVER_STATS
CPUMAX_STATS

/* the slice of a task preempted inside an RCU read-side section (task_in_rcu_read) */
#define RCU_BOOST_SLICE_NS	(500ULL * 1000)

/* rt_takeover.bpf.h's lazy evacuation holds only while there is no BE */
static __always_inline bool rt_evacuate_anyway(void)
{
	return be_seen;
}


/*
 * Classify @p now and remember the result. A task that changes tier restarts
 * on the new tier's clock: the two clocks are unrelated.
 */
static u8 classify(struct task_struct *p, struct task_ctx *tctx)
{
	bool rule_be = tier_task_is_be_cached(p, &tctx->memo), freezing = rule_be && task_freezing(p);
	bool rcu = task_in_rcu_read(p);
	u8 tier = rule_be && !freezing && !rcu && !task_dying(p) ? TIER_BE : TIER_LC;

	tctx->freeze_boost = freezing;
	tctx->rcu_boost = rcu;
	/* before the task can be in a BE queue, by whatever path (ops.enqueue, cpu.max's release) */
	if (tier == TIER_BE)
		note_be_seen();

	if (tctx->tier_valid && tctx->tier != tier)
		scx_bpf_task_set_dsq_vtime(p, tier == TIER_BE ? be_vtime_now : lc_vtime_now);
	tctx->tier = tier;
	tctx->tier_valid = 1;
	return tier;
}

/*
 * What cpumax.bpf.h needs from the policy. A task leaving its cgroup's
 * holding queue goes back to its tier's queue with the sleeper floor (time
 * held is not credit). A BE task starts a new starvation window: time held
 * is not starvation.
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

s32 BPF_STRUCT_OPS(schedbe_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	bool is_idle = false;
	s32 cpu;

	/* BE never claims a CPU here: it must go through ops.dispatch (exit check). */
	if (!tctx || classify(p, tctx) == TIER_BE)
		return prev_cpu;

	/* never a BE waker's busy CPU reported idle (sync_pick.bpf.h) */
	cpu = pick_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	if (is_idle)
		cpu = sync_unstack(p, cpu, prev_cpu, wake_flags);
	if (!is_idle && !sync_to_waker(cpu, wake_flags))
		return cpu;
	/*
	 * A task of a throttled cgroup goes through ops.enqueue, which holds it;
	 * one whose cgroup is on its concurrency cap waits in its run queue.
	 */
	if (!bw_on ||
	    (bw_throttled_slot(p, &tctx->bw, bpf_ktime_get_ns()) < 0 &&
	     bw_conc_take(p, &tctx->bw, bpf_ktime_get_ns()))) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, lc_slice_ns, 0);
		STAT_ADD(lc_direct, 1);
		lcw_queued(p, &tctx->lcw);	/* ops.enqueue is not called for it */
	}
	return cpu;
}

void BPF_STRUCT_OPS(schedbe_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	u32 llc = llc_of(scx_bpf_task_cpu(p));
	/* the clock only where cpu.max or BE needs it: an LC enqueue without limits reads none */
	u64 vtime, floor, now = bw_on ? bpf_ktime_get_ns() : 0;
	s32 cpu, slot;
	/* classify() first: a task that changes tier moves to the new tier's clock */
	u8 tier = tctx ? classify(p, tctx) : TIER_LC;

	vtime = p->scx.dsq_vtime;
	/* queued again (wherever it goes now): it no longer counts in the LC queue it was put in */
	if (tctx)
		lc_q_leave(&tctx->lc_q);
	/* LC runnable load counts from here, time held by cpu.max included */
	if (tctx && tier == TIER_LC)
		lcw_queued(p, &tctx->lcw);

	/*
	 * Concurrency mode: back from a local queue without having run. Sent
	 * back by an RT/DL takeover (SCX_ENQ_REENQ), it is off its CPU even when
	 * the re-enqueue runs at the sched_switch tracepoint, where on_cpu is
	 * still set: deferring to the switch would leave the tokens with a
	 * queued task when our switch program has already run.
	 */
	if (tctx && (enq_flags & SCX_ENQ_REENQ))
		bw_conc_release(p, &tctx->bw, BW_TOK_HELD, true);
	else if (tctx)
		bw_conc_put(p, &tctx->bw, true);
	/* cpu.max: a task of a throttled cgroup waits for the next period */
	if (tctx && now && (slot = bw_throttled_slot(p, &tctx->bw, now)) >= 0) {
		bw_hold(p, slot, enq_flags, now);
		return;
	}
	/*
	 * The last runnable task of a CPU whose dispatch found nothing to run
	 * (SCX_OPS_ENQ_LAST, set so a throttled task is not kept running) is
	 * queued like any other; this CPU is kicked so that, once idle, it
	 * dispatches again and finds it.
	 */
	if (enq_flags & SCX_ENQ_LAST)
		scx_bpf_kick_cpu(scx_bpf_task_cpu(p), 0);

	if (tier == TIER_LC) {
		if (tctx && tctx->freeze_boost)
			STAT_ADD(freeze_boosts, 1);
		/* A sleeper keeps at most lc_wake_credit_ns of credit (one slice by default). */
		floor = lc_vtime_now - lc_wake_credit_ns;
		if (time_before(vtime, floor)) {
			vtime = floor;
		} else if (tctx && tctx->rcu_boost) {
			/* RCU waits for it (task_state.bpf.h): the front now, its debt kept for later */
			tctx->rcu_debt += vtime - floor;
			vtime = floor;
			STAT_ADD(rcu_boosts, 1);
		}
		lc_enqueue(p, llc, vtime, enq_flags, tctx ? tctx->burst.avg_ns : 0, tctx ? &tctx->lc_q : NULL);
		return;
	}

	tctx->enq_at = now ? now : bpf_ktime_get_ns();
	starve_open(&tctx->starve, tctx->enq_at);
	floor = be_vtime_now - be_slice_ns;
	if (time_before(vtime, floor))
		vtime = floor;
	scx_bpf_dsq_insert_vtime(p, be_dsq(llc), be_slice_ns, vtime, enq_flags);
	/* Wake an idle CPU; it will still take LC first if any shows up. */
	cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (cpu >= 0)
		wake_idle_cpu(p, cpu, enq_flags);
}

/*
 * Charge the time @p ran since it started or was last charged: per-tier CPU
 * time, guard cost, virtual time, and cpu.max runtime (true when a cgroup of
 * @p is throttled now). Called at stopping, and at a tick under cpu.max or
 * once the task has gone TICK_CHARGE_NS uncharged, because a task that
 * keeps its CPU never reaches ops.stopping.
 * The tier clocks are not set to a charged vtime here: they follow the vtime
 * of tasks as they start (ops.running), i.e. the front of the queue, and the
 * LC clock V's rate (lc_clock_served()). Setting them to a charged vtime
 * would let the sleeper floor in enqueue erase the weight differences
 * between tasks that are always runnable.
 */
static bool charge(struct task_struct *p, struct task_ctx *tctx, u64 now)
{
	u64 ran = now > tctx->started_at ? now - tctx->started_at : 0;

	tctx->started_at = now;
	/* both tiers: a BE task that turns LC brings its real bursts (lc_burst.bpf.h) */
	lc_burst_ran(&tctx->burst, ran);
	if (tctx->tier == TIER_BE) {
		STAT_ADD(be_ns, ran);
		if (tctx->guarded)
			STAT_ADD(guard_ns, ran);
		scx_bpf_task_set_dsq_vtime(p, p->scx.dsq_vtime + scale_by_task_weight_inverse(p, ran));
	} else {
		u64 dv = ran * 100 / lc_weight(p, &tctx->lcw);

		STAT_ADD(lc_ns, ran);
		scx_bpf_task_set_dsq_vtime(p, p->scx.dsq_vtime + dv);
		acct_runnable(p, &tctx->lcw, now);
		lc_clock_served(scx_bpf_task_cpu(p), dv);
	}
	return bw_charge(p, &tctx->bw, now);
}

static __always_inline bool is_be_task(struct task_struct *p)
{
	struct task_ctx *tctx = task_ctx(p);

	return tctx && tctx->tier == TIER_BE;
}

void BPF_STRUCT_OPS(schedbe_dispatch, s32 cpu, struct task_struct *prev)
{
	bool prev_runnable = prev && (prev->scx.flags & SCX_TASK_QUEUED);
	/* no task was ever BE: no lookup */
	bool prev_be = be_seen && prev && is_be_task(prev);
	struct bpf_cpumask *be;
	struct task_ctx *pctx = prev_runnable && bw_on ? task_ctx(prev) : NULL;
	/* concurrency mode: the leaving task, runnable or not, may hand its tokens on (pctx when runnable) */
	struct task_ctx *cctx = prev && bw_conc_on() ? (pctx ? pctx : task_ctx(prev)) : NULL;
	u64 now;

	/*
	 * cpu.max: charge a limited prev now (its expiry kick brought us here,
	 * before ops.stopping charges it); a throttled prev does not keep the
	 * CPU: it is held when it is enqueued.
	 */
	if (pctx && bw_chain(prev, &pctx->bw)) {
		now = bpf_ktime_get_ns();
		if (charge(prev, pctx, now) || bw_throttled_slot(prev, &pctx->bw, now) >= 0)
			prev_runnable = false;
	}

	/* LC may be runnable everywhere, so the guard must go first or never run. No BE yet: nothing to guard. */
	if (be_seen && guard_rescue(cpu))
		return;

	/* local + exit: any waiting LC task, from any LLC, before BE. */
	if (consume_tier(SCHEDBE_LC_DSQ_BASE, cpu, cctx)) {
		STAT_ADD(lc_dispatches, 1);
		if (prev_be && prev_runnable)
			STAT_ADD(exit_takes, 1);
		return;
	}

	/* An LC prev that is still runnable keeps the CPU over any BE task. */
	if (prev_runnable && !prev_be && keep_prev(prev, cpu, lc_slice_ns))
		return;

	if (be_seen && consume_tier(SCHEDBE_BE_DSQ_BASE, cpu, cctx)) {
		STAT_ADD(be_dispatches, 1);
		return;
	}

	/*
	 * Nothing queued: a runnable BE prev keeps running (a fresh slice here,
	 * not through SCX_ENQ_LAST). Re-advertise the CPU in be_cpus, which an
	 * entry-check kick may have cleared.
	 */
	if (prev_runnable && prev_be && keep_prev(prev, cpu, be_slice_ns)) {
		be = be_cpus;
		if (be)
			bpf_cpumask_set_cpu(cpu, be);
	}
	/* no LC here: one left behind an RT burst elsewhere comes here now */
	rt_rescue_before_idle(cpu);
}

void BPF_STRUCT_OPS(schedbe_running, struct task_struct *p)
{
	struct task_ctx *tctx = task_ctx(p);
	struct bpf_cpumask *be = be_cpus;
	s32 cpu = scx_bpf_task_cpu(p);

	if (!tctx)
		return;
	tctx->started_at = bpf_ktime_get_ns();
	tctx->run_start = tctx->started_at;
	lc_q_leave(&tctx->lc_q);
	/*
	 * Concurrency mode, a backstop: every path that gives @p a CPU took its
	 * tokens; should one not have, @p takes them now or gives the CPU back.
	 */
	if (bw_conc_on() && !bw_conc_take(p, &tctx->bw, tctx->started_at)) {
		STAT_ADD(bw_conc_yields, 1);
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	}
	/*
	 * cpu.max: run no longer than the runtime the task's cgroups have left.
	 * A task boosted out of an RCU read-side section needs only a moment.
	 * Neither (the common case): the slice stands, and the two calls above
	 * and here, 80 instructions a pipe message (docs/overhead.md), are not made.
	 */
	if (bw_on || tctx->rcu_boost)
		fit_slice(p, tctx, cpu, tctx->rcu_boost && p->scx.slice > RCU_BOOST_SLICE_NS ? RCU_BOOST_SLICE_NS : p->scx.slice);
	if (tctx->tier == TIER_BE) {
		struct cpu_cur *c = cpu_cur(cpu);

		if (c)
			c->tier = TIER_BE;
		if (be)
			bpf_cpumask_set_cpu(cpu, be);
		if (time_before(be_vtime_now, p->scx.dsq_vtime))
			be_vtime_now = p->scx.dsq_vtime;
		/*
		 * Close the race with an LC enqueue that read be_cpus before our
		 * bit was set: if LC is queued now, give the CPU back at once.
		 * Guard slices are exempt (they exist to run despite LC).
		 */
		full_barrier();
		if (!tctx->guarded && lc_queued()) {
			scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
			STAT_ADD(running_yields, 1);
		}
	} else {
		struct cpu_cur *c = cpu_cur(cpu);
		/* a set bit means this CPU's last task was BE (only ops.running of BE sets it, then dispatch keeps it) */
		bool was_be = !c || c->tier == TIER_BE;
		u64 t0;

		if (c) {
			/* Entry-check latency: kick sent -> an LC task runs on that CPU. */
			if ((t0 = c->kick_at)) {
				c->kick_at = 0;
				STAT_ADD(kick_lat_ns, tctx->started_at - t0);
				STAT_ADD(kick_lat_n, 1);
			}
			c->vtime = p->scx.dsq_vtime;
			c->started_at = tctx->started_at;
			c->weight = p->scx.weight;	/* nice only: a cheap estimate is enough here */
			c->pid = p->pid;
			c->tier = TIER_LC;
			c->burst_avg = tctx->burst.avg_ns;
			c->burst_ran = tctx->burst.cur_ns;
		}
		resv_start(resv_task_slot(p, &tctx->resv), &tctx->resv.held, c);
		/* read before write: the mask is shared by every CPU, and is mostly clear */
		if (was_be && be && bpf_cpumask_test_cpu(cpu, cast_mask(be)))
			bpf_cpumask_clear_cpu(cpu, be);
		if (time_before(lc_vtime_now, p->scx.dsq_vtime))
			lc_vtime_now = p->scx.dsq_vtime;
		/* after the clock and c->vtime: they follow the queue's front, which it was */
		if (tctx->rcu_debt) {
			scx_bpf_task_set_dsq_vtime(p, p->scx.dsq_vtime + tctx->rcu_debt);
			tctx->rcu_debt = 0;
		}
	}
}

void BPF_STRUCT_OPS(schedbe_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *tctx = task_ctx(p);
	struct bpf_cpumask *be = be_cpus;
	u64 now = bpf_ktime_get_ns();
	s32 cpu;

	if (!tctx)
		return;
	cpu = scx_bpf_task_cpu(p);
	/* only a BE task's CPU has its bit set (ops.running); read before write */
	if (tctx->tier == TIER_BE && be && bpf_cpumask_test_cpu(cpu, cast_mask(be)))
		bpf_cpumask_clear_cpu(cpu, be);
	if (tctx->resv.held)
		resv_stop(&tctx->resv.held, cpu_cur(cpu));
	charge(p, tctx, now);
	/*
	 * Concurrency mode: the tokens go back once this CPU has switched away
	 * (schedbe_conc_switch). A task preempted by an RT/DL task with slice
	 * left goes back to the head of its local queue without ops.enqueue and
	 * resumes there, so it keeps them (an evacuation gives them back in
	 * ops.enqueue).
	 */
	if (!runnable || !p->scx.slice)
		bw_conc_leave(&tctx->bw);
	tctx->guarded = 0;
	if (!runnable) {
		lcw_stopped(p, &tctx->lcw, now);
		lc_burst_slept(&tctx->burst);
	}
	/* Parking: CPU time in this starvation window; a task that sleeps is not starved. */
	starve_ran(&tctx->starve, now - tctx->run_start, runnable);
}

/*
 * cpu.max concurrency mode: a task's tokens go back when its CPU has switched
 * away from it, the instant the tracer sees it leave, not at ops.stopping,
 * which comes first (cpumax.bpf.h, BW_TOK_LEAVING). Loaded in that mode only.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(schedbe_conc_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct task_ctx *tctx = task_ctx(prev);

	if (tctx)
		bw_conc_switched(prev, &tctx->bw);
	return 0;
}

/*
 * cpu.max concurrency mode: a task that left a local queue without running
 * gives back the tokens it took for it. Loaded in that mode only: it is a
 * callback per sleep, and LC load accounting does without it (lcw_stopped()).
 */
void BPF_STRUCT_OPS(schedbe_quiescent, struct task_struct *p, u64 deq_flags)
{
	struct task_ctx *tctx = task_ctx(p);

	if (tctx)
		bw_conc_put(p, &tctx->bw, true);
}

/*
 * A task that keeps its CPU (ops.dispatch's keep_prev(): nothing else
 * queued) reaches ops.stopping only when it stops, so the tick charges one
 * that has gone this long uncharged (twice the load batch, lc_weight.bpf.h;
 * 15.6 ms at the default flattening interval): its cgroup's runnable load and
 * the stats stay current to within this. Any other task is charged at its
 * ops.stopping, within a slice. Nothing reads a running task's charged
 * virtual time before then: the LC preemption check extrapolates from
 * ops.running's cpu_cur (cur_vtime()), and a task's burst is its charged
 * run plus what it ran since (lc_burst.bpf.h). Under cpu.max every tick
 * charges, since a throttled task must stop at the tick. Charging at every
 * tick would double the tick's cost (docs/design.md, "LC fairness across
 * cores: flattened weights").
 */
#define TICK_CHARGE_NS	(2 * lcw_flush_ns)

/*
 * Per tick: rescue tasks stranded behind an RT/DL task on another CPU,
 * charge the running task (ending its slice if its cgroup is now
 * throttled), and, as a backstop for a lost entry kick, make a
 * BE task yield when LC is queued in any LLC.
 */
void BPF_STRUCT_OPS(schedbe_tick, struct task_struct *p)
{
	struct task_ctx *tctx = task_ctx(p);
	u64 now = bpf_ktime_get_ns();

	rescue_stranded(bpf_get_smp_processor_id(), now);
	if (!tctx)
		return;
	/* cpu.max: a throttled task stops now; ops.enqueue holds it */
	if ((bw_on || now - tctx->started_at >= TICK_CHARGE_NS) && charge(p, tctx, now)) {
		scx_bpf_task_set_slice(p, 0);
		return;
	}
	if (tctx->tier == TIER_BE && !tctx->guarded && lc_queued()) {
		scx_bpf_task_set_slice(p, 0);
		STAT_ADD(tick_yields, 1);
	}
}

/* An RT/DL task took the CPU: an LC task that preempted BE here, or a guard slice, goes elsewhere. */
RT_CPU_RELEASE_OP(schedbe_cpu_release)

/* Hotplug needs no state change (queues are per LLC); handling it keeps us loaded. */
void BPF_STRUCT_OPS(schedbe_cpu_online, s32 cpu) {}

void BPF_STRUCT_OPS(schedbe_cpu_offline, s32 cpu)
{
	struct bpf_cpumask *be = be_cpus;
	struct cpu_cur *c = cpu_cur(cpu);

	/* never a preemption victim (lc_preempt_victim) until it runs a task again */
	if (c)
		c->tier = TIER_NONE;

	if (be)
		bpf_cpumask_clear_cpu(cpu, be);
}

void BPF_STRUCT_OPS(schedbe_enable, struct task_struct *p)
{
	scx_bpf_task_set_dsq_vtime(p, lc_vtime_now);
}

/*
 * @p leaves sched_ext (exit, RT/DL): cpu.max concurrency tokens and a
 * reservation count it holds go back; its LC load stops counting, and it
 * no longer counts in an LC queue.
 */
void BPF_STRUCT_OPS(schedbe_disable, struct task_struct *p)
{
	struct task_ctx *tctx = task_ctx(p);

	if (!tctx)
		return;
	bw_conc_drop(p, &tctx->bw);
	lc_q_leave(&tctx->lc_q);
	lcw_stopped(p, &tctx->lcw, bpf_ktime_get_ns());
	if (tctx->resv.held)
		resv_stop(&tctx->resv.held, NULL);
}

s32 BPF_STRUCT_OPS(schedbe_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	if (!task_ctx_create(p))
		return -ENOMEM;
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(schedbe_init)
{
	struct bpf_cpumask *mask;
	s32 err;

	/* one LC and one BE queue per LLC */
	err = create_dsqs(SCHEDBE_LC_DSQ_BASE, nr_llcs);
	if (!err)
		err = create_dsqs(SCHEDBE_BE_DSQ_BASE, nr_llcs);
	if (err)
		return err;
	mask = bpf_cpumask_create();
	if (!mask)
		return -ENOMEM;
	mask = bpf_kptr_xchg(&be_cpus, mask);
	if (mask)
		bpf_cpumask_release(mask);
	return bw_init();
}

BW_SET_BANDWIDTH_OP(schedbe_cgroup_set_bandwidth)
TIER_SET_IDLE_OP(schedbe_cgroup_set_idle)
CGRP_WATCH_OPS(schedbe_cgroup_init, schedbe_cgroup_exit)

/* cpu.weight written: the weights are read again (cgrp_watch.bpf.h). */
void BPF_STRUCT_OPS(schedbe_cgroup_set_weight, struct cgroup *cgrp, u32 weight)
{
	cgrp_reread();
}

EXIT_OP(schedbe_exit)

SCX_OPS_DEFINE(schedbe_ops,
	       .select_cpu	= (void *)schedbe_select_cpu,
	       .enqueue		= (void *)schedbe_enqueue,
	       .dispatch	= (void *)schedbe_dispatch,
	       .tick		= (void *)schedbe_tick,
	       .running		= (void *)schedbe_running,
	       .stopping	= (void *)schedbe_stopping,
	       .quiescent	= (void *)schedbe_quiescent,
	       .cpu_release	= (void *)schedbe_cpu_release,
	       .cpu_online	= (void *)schedbe_cpu_online,
	       .cpu_offline	= (void *)schedbe_cpu_offline,
	       .enable		= (void *)schedbe_enable,
	       .disable		= (void *)schedbe_disable,
	       .init_task	= (void *)schedbe_init_task,
	       .init		= (void *)schedbe_init,
	       .exit		= (void *)schedbe_exit,
	       .cgroup_set_bandwidth = (void *)schedbe_cgroup_set_bandwidth,
	       .cgroup_set_idle	= (void *)schedbe_cgroup_set_idle,
	       .cgroup_init	= (void *)schedbe_cgroup_init,
	       .cgroup_exit	= (void *)schedbe_cgroup_exit,
	       .cgroup_set_weight = (void *)schedbe_cgroup_set_weight,
	       /* so a throttled last task is enqueued (and held), not kept running */
	       .flags		= SCX_OPS_ENQ_LAST,
	       .name		= "schedbe");
