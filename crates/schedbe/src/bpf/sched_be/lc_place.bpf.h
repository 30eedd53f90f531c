/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where an LC task runs when it is queued (see sched_be.bpf.c, "entry" and
 * "LC latency"): on an idle CPU; on a CPU running BE, which it preempts (the
 * entry check); on the waker's CPU for a synchronous wakeup; on a CPU
 * running a task of a cgroup above its fair share, when it woke in a cgroup
 * that one more CPU keeps within its claim (resv.bpf.h); or in the LC queue
 * by virtual time, preempting an LC task it is well behind only when it
 * woke with credit.
 */
#ifndef __SCHEDBE_LC_PLACE_BPF_H
#define __SCHEDBE_LC_PLACE_BPF_H

#include <scx/common.bpf.h>
#include "state.bpf.h"
#include "task_ctx.bpf.h"
#include "cpu_cur.bpf.h"
#include "resv.bpf.h"
#include "lc_burst.bpf.h"
#include "lc_clock.bpf.h"
#include "../common/rt_takeover.bpf.h"	/* rescue_available() */
#include "../common/cpumax_conc.bpf.h"
#include "../common/slice_expiry.bpf.h"
#include "../common/sync_pick.bpf.h"	/* picked_sync_waker() */

/*
 * Wake idle @cpu, claimed for @p just queued by ops.enqueue. No kick when
 * @cpu is the run queue this wakeup enqueues @p on (a pinned task woken on
 * its own idle CPU): the core already reschedules an idle CPU that an ext
 * task wakes onto (wakeup_preempt(): ext is above idle), and a kick adds an
 * irq_work, a self-IPI, which would double ops.enqueue's cost there
 * (docs/design.md, "Queues and the three checks"). An LC task woken so
 * goes to that CPU's local queue instead (lc_enqueue()); this serves
 * BE tasks, which must go through ops.dispatch, and an LC task refused its
 * cpu.max concurrency tokens there.
 */
static __always_inline void wake_idle_cpu(struct task_struct *p, s32 cpu, u64 enq_flags)
{
	if (!(enq_flags & SCX_ENQ_WAKEUP) || cpu != scx_bpf_task_cpu(p))
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	STAT_ADD(kick_idle, 1);
}

/*
 * LC wakeup preemption (see lc_preempt_victim()): a woken LC task that has
 * at least this much virtual-time credit over the LC task on a CPU preempts
 * it, once that task has run lc_preempt_min_ns. 0: LC never preempts LC.
 */
const volatile u64 lc_preempt_gran_ns = 400ULL * 1000;
const volatile u64 lc_preempt_min_ns = 200ULL * 1000;

/*
 * Full memory barrier. The entry check is a store-buffer pattern: the waker
 * queues LC then reads be_cpus; a CPU starting BE sets its be_cpus bit then
 * reads the LC queues. Without a full barrier on both sides each could miss
 * the other. A BPF atomic with fetch is fully ordered (lock xadd on x86).
 *
 * What it cannot close: the kernel inserts a task that ops.enqueue queued
 * only after ops.enqueue returns, so the waker's second look at be_cpus
 * comes a moment before its task is in the queue. A CPU that sets its bit
 * and reads the queues inside that moment misses it; the BE task it starts
 * then yields at the next tick (ops.tick sees LC queued). The tracer
 * measures what that costs (docs/results.md).
 */
static u64 barrier_word;
static __always_inline void full_barrier(void)
{
	__sync_fetch_and_add(&barrier_word, 0);
}

/*
 * Is an LC task queued in any LLC? The queue itself answers, as the count
 * (lc_clock.bpf.h) would also answer yes for a task held by cpu.max, which
 * must not keep BE off a CPU; the count only spares the kfunc for a queue
 * known to be empty.
 */
static bool lc_queued(void)
{
	u32 i;

	if (nr_llcs < 2)
		return lc_q_may_hold(0) && scx_bpf_dsq_nr_queued(lc_dsq(0));
	bpf_for(i, 0, nr_llcs) {
		if (lc_q_may_hold(i) && scx_bpf_dsq_nr_queued(lc_dsq(i)))
			return true;
	}
	return false;
}

/*
 * Whether a task was ever classified BE since load: until then no CPU can
 * run BE, and the entry check (kfunc calls, a barrier), the starvation guard
 * and the BE queues' consumption in ops.dispatch are skipped, which is all
 * of BE's cost on a machine without BE. Set by classify() before the task
 * can be in a BE queue; a waker that reads it a moment late misses a CPU
 * that starts BE at that moment, the race described at full_barrier().
 */
static bool be_seen;

static __always_inline void note_be_seen(void)
{
	if (!be_seen)
		be_seen = true;	/* read first: the line stays shared once set */
}

/*
 * Take a CPU that runs BE and that @p may use out of be_cpus, preferring
 * @p's previous CPU (warm cache). Clearing the bit is the claim: concurrent
 * wakeups take different CPUs. -1 if there is none.
 */
static s32 claim_be_cpu(struct task_struct *p)
{
	struct bpf_cpumask *be = be_cpus;
	s32 cpu, prev = scx_bpf_task_cpu(p);

	/* no CPU runs BE (no BE at all, most often): one call instead of three */
	if (!be_seen || !be || bpf_cpumask_empty(cast_mask(be)))
		return -1;
	if (bpf_cpumask_test_cpu(prev, p->cpus_ptr) &&
	    bpf_cpumask_test_and_clear_cpu(prev, be))
		return prev;
	cpu = bpf_cpumask_any_and_distribute(cast_mask(be), p->cpus_ptr);
	if (cpu >= scx_bpf_nr_cpu_ids() || !bpf_cpumask_test_and_clear_cpu(cpu, be))
		return -1;	/* no CPU runs BE, or another wakeup just claimed it */
	return cpu;
}

/* Count an entry-check preemption and remember when, to measure how long it takes to land. */
static void note_preempt(s32 cpu)
{
	struct cpu_cur *c = cpu_cur(cpu);

	STAT_ADD(preempt_be, 1);
	if (c)
		c->kick_at = bpf_ktime_get_ns();
}

/* The virtual time CPU @c's LC task has reached by @now (it is charged only at ticks). */
static __always_inline u64 cur_vtime(struct cpu_cur *c, u64 now)
{
	u64 ran = now > c->started_at ? now - c->started_at : 0;

	return c->vtime + ran * 100 / (c->weight ? c->weight : 1);
}

/* Whether CPU @cpu runs the task @pid now (an RCU read of its rq->curr). */
static __always_inline bool lc_cur_is(s32 cpu, s32 pid)
{
	struct task_struct *curr = __COMPAT_scx_bpf_cpu_curr(cpu);

	return curr && curr->pid == pid;
}

/* A preemption lc_preempt_victim() found due later: task @pid on @cpu at @at. */
struct lc_later {
	s32 cpu;	/* -1: none */
	s32 pid;
	u64 at;
	u64 now;	/* when it looked */
};

/*
 * Whether the LC task on CPU @c, which has run less than lc_preempt_min_ns,
 * will be far enough ahead of @vtime to be preempted once it has run that
 * long; if so, note it in @later. (The caller skips a remote candidate once
 * @later holds one, so the CPU the wakeup runs on is the one kept.)
 */
static __always_inline void lc_note_later(struct lc_later *later, struct cpu_cur *c, s32 cpu, u64 vtime, u64 now)
{
	u64 at = c->started_at + lc_preempt_min_ns;

	if (!time_before(vtime + lc_preempt_gran_ns, cur_vtime(c, at)))
		return;
	later->cpu = cpu;
	later->pid = c->pid;
	later->at = at;
	later->now = now;
}

/*
 * LC over LC, as EEVDF does at wakeup: every allowed CPU runs LC, and @p
 * (queued with @vtime) woke with credit, i.e. it slept. If the LC task on
 * @p's previous CPU, or on one other CPU picked at random among the rest,
 * is ahead of @p by more than lc_preempt_gran_ns of virtual time and has
 * run at least lc_preempt_min_ns, that CPU is the victim: it stops its task
 * and runs @p (or the front of the LC queue). Without this a woken task
 * waits for a slice to end (5 ms), which is what a latency-sensitive
 * sleeper behind CPU hogs sees. Two candidates, not a scan: the cost stays
 * constant with the CPU count. The second is drawn among the other CPUs,
 * so that on two CPUs both are looked at.
 *
 * A wakee whose bursts are short (@burst_ns, its average run each time it
 * wakes, lc_burst.bpf.h, below lc_preempt_min_ns) does not wait
 * for the minimum: it costs the victim less than the minimum would, so the
 * minimum, which keeps CPU hogs from preempting each other at every
 * wakeup, need not protect against it. EEVDF likewise lets a task with a
 * short request preempt at once (PREEMPT_SHORT). Nor does a wakee preempt
 * a task expected to sleep before it would have run half its own burst
 * (lc_burst_outlasts()): two request handlers of equal demand wait for
 * each other instead of each delaying the other's whole request.
 *
 * A candidate that qualifies but for its minimum run is not skipped for
 * good: @later gets the moment it will have run lc_preempt_min_ns, and
 * lc_enqueue() times the preemption for then (slice_expiry.bpf.h). Without
 * that the woken task would wait for the rest of the slice, up to 5 ms: a
 * timer thread woken on its CPU early in a CPU hog's stint would wait far
 * longer than under EEVDF (docs/design.md, "Queues and the three checks").
 *
 * The CPU this wakeup runs on, when it is @p's CPU and qualifies, is taken
 * without looking at the other: preempting it needs no IPI (see
 * lc_enqueue()), where a remote kick is an IPI the other CPU answers when
 * it can. EEVDF's wakeup preemption likewise looks only at the target run
 * queue's current task.
 *
 * Returns the victim, or -1 (and then in @later a victim due later, if any).
 *
 * A global function (__weak): the verifier checks it once, on its own;
 * inlined at lc_enqueue()'s two calls it would be half of what the verifier
 * does to load ops.enqueue (docs/testing.md, "Load time").
 */
__weak s32 lc_preempt_victim(struct task_struct *p __arg_trusted, u64 vtime, s32 here, u64 burst_ns,
			     struct lc_later *later __arg_nonnull)
{
	bool short_burst = lc_burst_short(burst_ns, lc_preempt_min_ns);
	u32 nr = scx_bpf_nr_cpu_ids();
	s32 prev = scx_bpf_task_cpu(p);
	/* the other candidate is never @p's CPU again: on two CPUs, both are looked at */
	s32 cand[2] = { prev, nr > 1 ? (prev + 1 + bpf_get_prandom_u32() % (nr - 1)) % nr : prev };
	s32 victim = -1;
	u64 now = bpf_ktime_get_ns(), best = vtime + lc_preempt_gran_ns, v;
	struct cpu_cur *c;
	bool young;
	int i;

	bpf_for(i, 0, nr > 1 ? 2 : 1) {
		s32 cpu = cand[i & 1];

		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr) || !(c = cpu_cur(cpu)) || c->tier != TIER_LC)
			continue;
		/* signed: started_at may come from a CPU whose clock read is a bit ahead */
		young = !short_burst && (s64)(now - c->started_at) < (s64)lc_preempt_min_ns;
		/* about to sleep: waiting for it costs @p less than preempting costs it */
		if (lc_burst_outlasts(burst_ns, c->burst_avg, c->burst_ran + (young ? lc_preempt_min_ns : now - c->started_at)))
			continue;
		if (young && cpu != here && later->cpu >= 0)
			continue;
		/*
		 * cpu_cur describes the last LC task that started there, and
		 * nothing clears it when that task stops (a write per switch): the
		 * CPU may run an RT task now, whose "LC task" looks far ahead and
		 * would take the kick from a CPU where it preempts something.
		 */
		if (!lc_cur_is(cpu, c->pid))
			continue;
		if (young) {
			lc_note_later(later, c, cpu, vtime, now);
			continue;
		}
		v = cur_vtime(c, now);
		if (cpu == here && time_before(vtime + lc_preempt_gran_ns, v))
			return here;	/* local: taken over a remote one further ahead */
		if (time_before(best, v)) {
			best = v;
			victim = cpu;
		}
	}
	return victim;
}

/* Whether @p's wakeup may preempt an LC task (lc_preempt_victim()): it slept, and LC preemption is on. */
static __always_inline bool lc_may_preempt(u64 vtime, u64 enq_flags)
{
	return lc_preempt_gran_ns && (enq_flags & SCX_ENQ_WAKEUP) && time_before(vtime, lc_vtime_now);
}

static __always_inline void count_lc_preempt(s32 victim, s32 here)
{
	STAT_ADD(lc_preempt, 1);
	if (victim == here)
		STAT_ADD(lc_preempt_local, 1);
}

/*
 * The direct entry check (straight into a CPU's local queue) only where a
 * task stranded there by an RT/DL takeover is rescued (rescue_stranded:
 * v7.1+). Elsewhere the LC task waits in the shared queue and the claimed
 * CPU is kicked: whichever CPU gets to it first runs it, and an RT task
 * taking the kicked CPU cannot strand it (without the rescue, the direct
 * check would leave LC tasks behind a whole RT burst).
 */
static __always_inline bool direct_entry(void)
{
	return rescue_available();
}

/*
 * Queue an LC task so that a CPU runs it as soon as possible:
 *  - an idle CPU: queue it and wake that CPU;
 *  - entry check: no idle CPU, one runs BE: put @p straight into that CPU's
 *    local queue with SCX_ENQ_PREEMPT (v7.1+, see direct_entry(); before,
 *    the shared queue and a preempting kick of that CPU). The migration happens here, so the
 *    preempted CPU neither runs ops.dispatch nor pulls @p from another run
 *    queue, which shortens the kick-to-LC-running time (docs/design.md,
 *    "Queues and the three checks");
 *  - otherwise every allowed CPU runs LC: queue it by virtual time.
 */
/*
 * cpu.max concurrency mode: a task goes straight into a CPU's local queue
 * only with its cgroups' tokens (cpumax.bpf.h), else through the queue.
 */
static __always_inline bool lc_direct_ok(struct task_struct *p)
{
	struct task_ctx *tctx = bw_conc_on() ? task_ctx(p) : NULL;

	return !tctx || bw_conc_take(p, &tctx->bw, bpf_ktime_get_ns());
}

static __always_inline void lc_direct_undo(struct task_struct *p)
{
	struct task_ctx *tctx = bw_conc_on() ? task_ctx(p) : NULL;

	if (tctx)
		bw_conc_put(p, &tctx->bw, false);
}

/* The reservation slot of a waking @p (resv.bpf.h); 0 for any other enqueue. */
static __always_inline u32 lc_wakeup_slot(struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx;

	if (!resv_on || !(enq_flags & SCX_ENQ_WAKEUP) || !(tctx = task_ctx(p)))
		return 0;
	return resv_task_slot(p, &tctx->resv);
}

/* Into LLC @llc's LC queue, counted there through @lc_q, the task's (lc_clock.bpf.h). */
static __always_inline void lc_queue_insert(struct task_struct *p, u32 llc, u64 vtime, u64 enq_flags, u8 *lc_q)
{
	scx_bpf_dsq_insert_vtime(p, lc_dsq(llc), lc_slice_ns, vtime, enq_flags);
	lc_q_join(lc_q, llc);
}

static void lc_enqueue(struct task_struct *p, u32 llc, u64 vtime, u64 enq_flags, u64 burst_ns, u8 *lc_q)
{
	s32 cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0), resv_kick = -1, victim = -1, here;
	struct lc_later later = { .cpu = -1 };
	bool preempt, looked = false;
	u32 slot;

	if (cpu >= 0) {
		/*
		 * Woken onto its own idle CPU (a pinned task: select_cpu is not
		 * called for it; cyclictest's timer threads): its local queue, as
		 * select_cpu's idle path does, so the CPU picks it without an
		 * ops.dispatch and a trip through the shared queue. Nothing else
		 * waits for an idle CPU, so no one is passed over.
		 */
		if ((enq_flags & SCX_ENQ_WAKEUP) && cpu == scx_bpf_task_cpu(p) && lc_direct_ok(p)) {
			scx_bpf_task_set_dsq_vtime(p, vtime);	/* floored, as the queue would have stored it */
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, lc_slice_ns, enq_flags);
			STAT_ADD(lc_direct, 1);
			return;
		}
		lc_queue_insert(p, llc, vtime, enq_flags, lc_q);
		wake_idle_cpu(p, cpu, enq_flags);
		return;
	}
	slot = lc_wakeup_slot(p, enq_flags);
	preempt = lc_may_preempt(vtime, enq_flags);
	here = bpf_get_smp_processor_id();
	if (direct_entry() && lc_direct_ok(p)) {
		cpu = claim_be_cpu(p);
		if (cpu >= 0) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, lc_slice_ns, enq_flags | SCX_ENQ_PREEMPT);
			note_preempt(cpu);
			return;
		}
		/*
		 * Reservations: a cgroup within its claim takes a CPU from one above
		 * its fair share. Straight into the local queue only of the CPU this
		 * wakeup runs on (preempted at once, no IPI); a remote victim is
		 * kicked below, the task waiting in the shared queue, so that any
		 * CPU that gets there first runs it (a kicked CPU answers when it
		 * can).
		 */
		if (slot && (cpu = resv_victim(p, slot)) >= 0) {
			if (cpu == here) {
				scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, lc_slice_ns, enq_flags | SCX_ENQ_PREEMPT);
				return;
			}
			resv_kick = cpu;
		}
		/*
		 * LC over LC on this CPU: straight into its local queue, which
		 * preempts its task with a flag set on the way out of this wakeup
		 * (no IPI, no ops.dispatch), as EEVDF's wakeup preemption does.
		 */
		if (resv_kick < 0 && preempt) {
			looked = true;
			victim = lc_preempt_victim(p, vtime, here, burst_ns, &later);
			if (victim == here && scx_bpf_task_cpu(p) == here) {
				/* the floored vtime, as the queue would have stored it (cpu_cur, charge) */
				scx_bpf_task_set_dsq_vtime(p, vtime);
				scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, lc_slice_ns, enq_flags | SCX_ENQ_PREEMPT);
				count_lc_preempt(victim, here);
				return;
			}
		}
		lc_direct_undo(p);
	}
	lc_queue_insert(p, llc, vtime, enq_flags, lc_q);
	/*
	 * A CPU may have started BE after claim_be_cpu() looked; it checks the
	 * LC queues after setting its be_cpus bit (ops.running), we look again
	 * after queueing (full_barrier() says how far that goes). Never any BE:
	 * nothing to look for.
	 */
	if (be_seen) {
		full_barrier();
		cpu = claim_be_cpu(p);
		if (cpu >= 0) {
			scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
			note_preempt(cpu);
			return;
		}
	}
	/* reservations, a remote victim (or any before v7.1): kicked, it takes the LC queue's front */
	if (resv_kick < 0 && slot && !direct_entry())
		resv_kick = resv_victim(p, slot);
	if (resv_kick >= 0) {
		scx_bpf_kick_cpu(resv_kick, SCX_KICK_PREEMPT);
		return;
	}
	if (!preempt)
		return;
	/* the victim chosen above (not this CPU, or no direct insert here), else now */
	if (!looked)
		victim = lc_preempt_victim(p, vtime, here, burst_ns, &later);
	if (victim >= 0) {
		scx_bpf_kick_cpu(victim, SCX_KICK_PREEMPT);
		count_lc_preempt(victim, here);
	} else if (later.cpu >= 0 && slice_expiry_arm_by(later.cpu, later.pid, later.at, later.now)) {
		/* @p waits in the queue; that CPU takes its front when the task has run its minimum */
		STAT_ADD(lc_preempt_later, 1);
	}
}

/*
 * A synchronous wakeup (the waker is about to sleep: a pipe, an RPC) for
 * which the kernel's default picker chose the waker's CPU: it does so only
 * when that CPU's local queue is empty, so the wakee runs there next, on a
 * warm cache, once the waker sleeps. Queueing it on the shared queue instead
 * would also wake an idle CPU to pull it across (an IPI and a migration per
 * message). Only behind an LC waker: behind BE it would wait a BE slice.
 * Here the picker found no idle CPU and returned @p's previous CPU, the
 * waker's; the case where it reports the waker's busy CPU idle is
 * pick_cpu_dfl()'s (sync_pick.bpf.h), which never keeps it behind BE.
 * Every sync wakeup is not forced onto the waker's CPU, as EEVDF's
 * wake_affine does: that costs pipe throughput (docs/overhead-log.md).
 */
static __always_inline bool sync_to_waker(s32 cpu, u64 wake_flags)
{
	struct task_ctx *wctx;

	if (!picked_sync_waker(cpu, wake_flags))
		return false;
	wctx = task_ctx(bpf_get_current_task_btf());
	return wctx && wctx->tier == TIER_LC;
}

/*
 * A synchronous wakeup whose wakee last ran on the waker's own CPU, and for
 * which the kernel's default picker chose that CPU again (it does while some
 * CPU idles and the waker's local queue is empty): left there, the pair
 * shares one CPU for good, because nothing in sched_ext pulls a task out of
 * a local queue (EEVDF's idle balance would, and its select_idle_sibling()
 * prefers an idle CPU to a busy waker's). The picker asked again without the
 * sync hint finds an idle CPU as it would for any wakeup (the waker's LLC
 * first, a whole idle core first); from then on each of the two wakes on its
 * own idle CPU, the picker's first choice for a sync wakeup too. With no idle
 * CPU the waker's stays. Call only from ops.select_cpu, with the picker's
 * choice @cpu.
 */
static __always_inline s32 sync_unstack(struct task_struct *p, s32 cpu, s32 prev_cpu, u64 wake_flags)
{
	bool is_idle = false;
	s32 idle;

	if (cpu != prev_cpu || !picked_sync_waker(cpu, wake_flags))
		return cpu;
	idle = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags & ~SCX_WAKE_SYNC, &is_idle);
	if (!is_idle)
		return cpu;
	STAT_ADD(sync_unstacks, 1);
	return idle;
}

#endif /* __SCHEDBE_LC_PLACE_BPF_H */
