/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cgroup v2 cpu.max, enforced by schedbe itself, for the SCHED_BE and LLF
 * policies (LLF in quota mode only).
 *
 * The kernel's CFS bandwidth control does not apply to sched_ext tasks, so
 * loading a sched_ext scheduler would silently lift every CPU limit. This
 * header enforces cpu.max with the kernel's semantics:
 *  - quota per period: a cgroup's tasks run at most quota_ns of CPU time,
 *    summed over all CPUs, in each period_ns;
 *  - hierarchical: CPU time is charged to every limited ancestor-or-self,
 *    and a task runs only while none of them is throttled, so a child never
 *    exceeds its parent;
 *  - cpu.max.burst: unused quota carries over, up to quota + burst;
 *  - throttling: a cgroup that used its runtime is throttled until a period
 *    boundary refills it. Its tasks wait in the slot's holding queue
 *    (bw_dsq(slot)), not in the policy's run queues, and a timer at the
 *    period boundary releases them;
 *  - overrun: a limited task starts with its slice cut to the runtime its
 *    cgroups have left, and because sched_ext checks slices only at ticks, a
 *    per-CPU timer preempts it when that runtime ends (slice_expiry.bpf.h). What
 *    still overruns (usage is charged at ticks and stops) is paid from the
 *    next periods, as CFS's runtime_remaining goes negative, so the long-run
 *    rate is exact. Debt beyond BW_MAX_THROTTLE_NS of throttling is forgiven,
 *    so a held task never waits long enough to trip the sched_ext watchdog;
 *  - dying tasks and tasks on their way to the freezer are never held: they
 *    must get to run (task_state.bpf.h).
 *
 * Concurrency mode (bw_conc_mode, `--limit-mode concurrency`, the paper's
 * reading of a limit): a cgroup whose cpu.max amounts to N CPUs also runs on
 * at most ceil(N) CPUs at any instant; the fraction stays a quota per period.
 * Each limited slot has ceil(quota / period) tokens. A task takes one token
 * of every limited cgroup of its chain when a CPU is given to it (moved or
 * inserted into a local queue) and gives them back when its CPU has switched
 * away from it (the sched_switch tracepoint, bw_conc_switched(): ops.stopping
 * comes before the switch, and a token given back there let another CPU start
 * the next task while this one was still on its CPU), or when it leaves a
 * local queue without running (ops.enqueue, ops.quiescent); a CPU
 * that took them for a queued task another CPU then took leaves them with
 * the task (struct bw_task's tok_state). A task
 * that cannot take them all stays in its run queue and the CPU looks at the
 * next one: tokens are held by tasks on CPUs only, never by queued tasks, so
 * a cgroup at its cap does not keep CPUs it cannot use.
 *
 * Who writes what: userspace (cpumax.rs) gives each cgroup with the cpu
 * controller a slot, writes bw_slot_of (cgroup id -> slot) and bw_conf (the
 * slot's cpu.max; quota 0 = no limit), and bumps bw_gen when chains may have
 * changed. ops.cgroup_set_bandwidth (v6.17+) updates a slot's bw_conf the
 * moment cpu.max is written, and asks userspace to rescan (bw_rescan_req)
 * for a cgroup that has no slot yet. bw_state and bw_stats are BPF's.
 *
 * Invariants:
 *  - a task is held only while a slot of its chain is throttled, and after
 *    every hold and every throttle the slot's timer is armed on this CPU, so
 *    every held task is looked at again (the insert completes before this
 *    CPU can take the timer's softirq);
 *  - a held task is in no run queue: the starvation guard and the parking
 *    scan never see it, so a throttled BE task is neither starved nor parked;
 *  - unloading needs nothing: the kernel takes every task, held or not,
 *    back to the fair class;
 *  - concurrency mode: a slot's running count is the number of tasks of its
 *    subtree that hold its token, and it never exceeds its cap (taken by
 *    compare-and-swap, so two CPUs cannot both take the last token); the
 *    tokens themselves are in cpumax_conc.bpf.h, which a policy includes
 *    only if it offers that mode.
 */
#ifndef __SCHEDBE_CPUMAX_BPF_H
#define __SCHEDBE_CPUMAX_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"	/* SCHEDBE_BW_*, struct bw_conf, struct bw_stat */
#include "policy.bpf.h"	/* STAT_FN() */
#include "tier.bpf.h"	/* SCHEDBE_MAX_CGRP_DEPTH */
#include "task_state.bpf.h"
#include "slice_expiry.bpf.h"

/* Needs from the policy: */
/*
 * The run queue and virtual time a task leaving a holding queue goes to
 * (*@fifo: a FIFO queue, inserted in arrival order with @vtime in
 * dsq_vtime); false: it stays held.
 */
static bool bw_release_to(struct task_struct *p, u64 *dsq, u64 *vtime, bool *fifo);
/* wake a CPU for @p, just released into @dsq */
static void bw_released(struct task_struct *p, u64 dsq);
/* add @v to this CPU's cpu.max counters (CPUMAX_STATS defines them over its my_stats()) */
static __always_inline void stat_bw_holds(u64 v);
static __always_inline void stat_bw_releases(u64 v);
static __always_inline void stat_bw_restarts(u64 v);
static __always_inline void stat_bw_forgiven_ns(u64 v);
static __always_inline void stat_bw_unthrottles(u64 v);
static __always_inline void stat_bw_late_ns(u64 v);

#define CPUMAX_STATS									\
	STAT_FN(bw_holds) STAT_FN(bw_releases) STAT_FN(bw_restarts)			\
	STAT_FN(bw_forgiven_ns) STAT_FN(bw_unthrottles) STAT_FN(bw_late_ns)

/* Debt that would throttle longer than this is forgiven (the watchdog's limit is 30 s). */
#define BW_MAX_THROTTLE_NS	(10000ULL * 1000 * 1000)
/* A limited task's slice is never cut below this (a cut slice is a context switch). */
#define BW_MIN_SLICE_NS		(100ULL * 1000)
/* cpu.max "max" arrives as RUNTIME_INF in µs-or-more; anything this large is unlimited. */
#define BW_QUOTA_INF_US		(1ULL << 50)

/*
 * A task's tokens (concurrency mode). Several CPUs may look at one queued
 * task at once, so its token record changes only under BW_TOK_BUSY, taken
 * by compare-and-swap: one CPU takes the tokens, and a CPU whose move of the
 * task then fails leaves them with the task, whoever runs it gives them back.
 */
enum { BW_TOK_NONE, BW_TOK_BUSY, BW_TOK_HELD, BW_TOK_LEAVING };
/*
 * BW_TOK_LEAVING: the task stopped (ops.stopping) on a CPU that has not
 * switched away from it yet; that CPU's sched_switch gives the tokens back,
 * unless the task is given a CPU again first and keeps them (bw_conc_take):
 * a running task whose properties change (affinity, nice, cgroup) passes
 * through ops.stopping and ops.running without ever leaving its CPU.
 */

/* Per task: its limited ancestors-or-self, cached until its cgroup or bw_gen changes. */
struct bw_task {
	u64 exec_seen;		/* p->se.sum_exec_runtime when last charged */
	u64 cgid;
	u32 gen;
	u8 nr;
	u8 tok_nr;		/* concurrency mode: tokens held, of the slots in tok_slots */
	u32 tok_state;		/* BW_TOK_*: who may change tok_nr/tok_slots */
	u16 slots[SCHEDBE_BW_MAX_DEPTH];
	u16 tok_slots[SCHEDBE_BW_MAX_DEPTH];	/* as taken: the chain may change before they go back */
};

struct bw_state {
	struct bpf_timer timer;
	s64 runtime_ns;		/* left in this period; negative: debt */
	u64 period_start;
	u64 armed_end;		/* when the timer was last armed to fire */
	u64 quota_ns, period_ns, burst_ns;	/* the bw_conf this state runs */
	u32 throttled;
	u32 used;		/* ran in the current period (cpu.stat nr_periods) */
	s32 cap;		/* concurrency mode: ceil(quota / period) tokens; 0: no cap */
	s32 running;		/* concurrency mode: tokens held */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SCHEDBE_BW_MAX_SLOTS);
	__type(key, u64);	/* cgroup id */
	__type(value, u32);	/* slot */
} bw_slot_of SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCHEDBE_BW_MAX_SLOTS);
	__type(key, u32);
	__type(value, struct bw_conf);
} bw_conf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCHEDBE_BW_MAX_SLOTS);
	__type(key, u32);
	__type(value, struct bw_state);
} bw_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCHEDBE_BW_MAX_SLOTS);
	__type(key, u32);
	__type(value, struct bw_stat);
} bw_stats SEC(".maps");

/* Set by userspace before load: cap concurrency as well as quota (see above). */
const volatile bool bw_conc_mode;

/* Written by userspace (and set_bandwidth), read on the hot path. */
u32 bw_gen;		/* bumped when a cgroup's chain may have changed */
bool bw_on;		/* some slot has a limit: when false, nothing here costs anything */
u32 bw_rescan_req;	/* set_bandwidth saw a cgroup userspace has not given a slot */
static u32 bw_nr_throttled;	/* slots throttled now */

static __always_inline u64 bw_dsq(u32 slot) { return SCHEDBE_BW_DSQ_BASE + slot; }

/*
 * Look up @p's limited ancestors-or-self (innermost first) and cache them in @bt.
 *
 * A global function (__weak): the verifier checks it once, on its own,
 * where a static one is checked again at every call site in every state
 * its caller reaches there; with this loop, that was half of what the
 * verifier did to load ops.dispatch.
 */
__weak int bw_resolve(struct task_struct *p __arg_trusted, struct bw_task *bt __arg_nonnull, u64 cgid)
{
	struct cgroup *cgrp = BPF_CORE_READ(p, cgroups, dfl_cgrp), *anc;
	struct bw_conf *c;
	u32 *slot, nr = 0;
	int level, i;
	u64 id;

	bt->gen = bw_gen;	/* before the walk: a concurrent bump re-resolves later */
	bt->cgid = cgid;
	bt->nr = 0;
	/* charging starts now: what ran in another cgroup is not this one's */
	bt->exec_seen = p->se.sum_exec_runtime;
	if (!cgrp)
		return 0;
	level = BPF_CORE_READ(cgrp, level);
	bpf_for(i, 0, SCHEDBE_MAX_CGRP_DEPTH) {
		if (i >= level || nr >= SCHEDBE_BW_MAX_DEPTH)
			break;
		anc = NULL;
		if (bpf_probe_read_kernel(&anc, sizeof(anc), &cgrp->ancestors[level - i]) || !anc)
			break;
		id = BPF_CORE_READ(anc, kn, id);
		slot = bpf_map_lookup_elem(&bw_slot_of, &id);
		if (!slot)
			continue;
		c = bpf_map_lookup_elem(&bw_conf, slot);
		if (!c || !c->quota_ns)
			continue;
		bt->slots[nr & (SCHEDBE_BW_MAX_DEPTH - 1)] = *slot;
		nr++;
	}
	bt->nr = nr;
	return 0;
}

/* @p's chain of limited cgroups, or NULL when none limits it. */
static __always_inline struct bw_task *bw_chain(struct task_struct *p, struct bw_task *bt)
{
	u64 cgid;

	if (!bw_on)
		return NULL;
	/*
	 * Probe reads, not task_cgid()'s plain loads: with those, ops.select_cpu
	 * of concurrency mode (this and bw_conc_take()'s nested loops) went past
	 * the verifier's limit on pending branches. Only where a limit exists.
	 */
	cgid = BPF_CORE_READ(p, cgroups, dfl_cgrp, kn, id);
	if (bt->cgid != cgid || bt->gen != bw_gen)
		bw_resolve(p, bt, cgid);
	return bt->nr ? bt : NULL;
}

/* Add the periods that have ended since period_start: quota each, capped at quota + burst. */
static void bw_refill(struct bw_state *s, u32 slot, u64 now)
{
	u64 start = s->period_start, n, cap = s->quota_ns + s->burst_ns;
	struct bw_stat *st;
	s64 old, new;
	u32 i;

	if ((s64)(now - start) < (s64)s->period_ns)
		return;
	n = (now - start) / s->period_ns;
	/* one CPU refills a given period */
	if (__sync_val_compare_and_swap(&s->period_start, start, start + n * s->period_ns) != start)
		return;
	/* cpu.stat counts periods in which the cgroup ran or stayed throttled */
	st = bpf_map_lookup_elem(&bw_stats, &slot);
	if (st && (s->used || s->throttled))
		__sync_fetch_and_add(&st->nr_periods, s->throttled ? n : 1);
	s->used = 0;
	bpf_for(i, 0, 4) {
		old = s->runtime_ns;
		new = n > 1000 ? (s64)cap : old + (s64)(n * s->quota_ns);
		if (new > (s64)cap)
			new = cap;
		if (__sync_val_compare_and_swap(&s->runtime_ns, old, new) == old)
			break;
	}
}

/* The debt that takes BW_MAX_THROTTLE_NS of throttling to pay (at least one quota). */
static __always_inline s64 bw_max_debt(struct bw_state *s)
{
	u64 periods = BW_MAX_THROTTLE_NS / s->period_ns;

	return (s64)(s->quota_ns * (periods ? periods : 1));
}

/* The state of @slot, brought up to @now; NULL when the slot has no limit. */
static struct bw_state *bw_slot(u32 slot, u64 now)
{
	struct bw_conf *c = bpf_map_lookup_elem(&bw_conf, &slot);
	struct bw_state *s = bpf_map_lookup_elem(&bw_state, &slot);

	if (!c || !s || !c->quota_ns || !c->period_ns)
		return NULL;
	if (s->quota_ns != c->quota_ns || s->period_ns != c->period_ns || s->burst_ns != c->burst_ns) {
		/*
		 * A new or changed limit starts with a full quota, in the period of
		 * a grid aligned to multiples of period_ns since boot. The kernel's
		 * period timers do the same (they start at expiry 0 and are only
		 * ever forwarded by whole periods), so cgroups with equal periods
		 * share boundaries: a pod and its container limited alike throttle
		 * together. On grids of their own each would cut the bursts that
		 * straddle the other's boundary, and the pod would be throttled
		 * far more than its container of the same limit and usage.
		 */
		s->quota_ns = c->quota_ns;
		s->period_ns = c->period_ns;
		s->burst_ns = c->burst_ns;
		s->runtime_ns = c->quota_ns;
		s->period_start = now - now % c->period_ns;
		/* running is not reset: tasks on CPUs still hold their tokens */
		s->cap = bw_conc_mode ? (s32)((c->quota_ns + c->period_ns - 1) / c->period_ns) : 0;
		stat_bw_restarts(1);
	}
	bw_refill(s, slot, now);
	return s;
}

/*
 * Arm @slot's timer on this CPU for the end of its current period, or to
 * fire at once when the slot is due already: bw_slot() refills lazily, so a
 * throttled slot whose timer is late can already be in the next period with
 * runtime, and the end of *that* period is a whole period too late (a
 * cgroup would stay throttled a whole period with a full quota).
 */
static void bw_arm(u32 slot, struct bw_state *s, u64 now)
{
	u64 end = s->period_start + s->period_ns;

	if (end <= now || s->runtime_ns > 0)
		end = now + 1000;
	s->armed_end = end;
	bpf_timer_start(&s->timer, end - now, BPF_F_TIMER_CPU_PIN);
}

static void bw_throttle(u32 slot, struct bw_state *s, u64 now)
{
	struct bw_stat *st;

	if (__sync_val_compare_and_swap(&s->throttled, 0, 1) != 0)
		return;
	__sync_fetch_and_add(&bw_nr_throttled, 1);
	st = bpf_map_lookup_elem(&bw_stats, &slot);
	if (st) {
		__sync_fetch_and_add(&st->nr_throttled, 1);
		st->throttled_since = now;
	}
	bw_arm(slot, s, now);
}

static void bw_unthrottle(u32 slot, struct bw_state *s, u64 now)
{
	struct bw_stat *st;

	if (__sync_val_compare_and_swap(&s->throttled, 1, 0) != 1)
		return;
	__sync_fetch_and_sub(&bw_nr_throttled, 1);
	st = bpf_map_lookup_elem(&bw_stats, &slot);
	if (st && st->throttled_since) {
		__sync_fetch_and_add(&st->throttled_ns, now - st->throttled_since);
		st->throttled_since = 0;
	}
}

/*
 * The first throttled slot of chain @ch, or -1. Global (__weak), checked
 * once by the verifier: inlined, its loop over bw_slot() was checked again
 * at each of ops.dispatch's queue looks.
 */
__weak s32 bw_first_throttled(struct bw_task *ch __arg_nonnull, u64 now)
{
	struct bw_state *s;
	u32 i, slot;

	bpf_for(i, 0, SCHEDBE_BW_MAX_DEPTH) {
		if (i >= ch->nr)
			break;
		slot = ch->slots[i & (SCHEDBE_BW_MAX_DEPTH - 1)];
		s = bw_slot(slot, now);
		if (s && s->throttled)
			return slot;
	}
	return -1;
}

/*
 * Charge the CPU time @p used since it was last charged to its limited
 * cgroups. True when one of them is throttled now: the caller ends @p's
 * slice. The time is the kernel's own account of it (sum_exec_runtime, what
 * cpu.stat's usage_usec adds up), not ops.running..ops.stopping: that window
 * misses the context switches around it, so a small limit would use more
 * than its quota by cpu.stat.
 */
static bool bw_charge(struct task_struct *p, struct bw_task *bt, u64 now)
{
	struct bw_task *ch = bw_chain(p, bt);
	struct bw_state *s;
	struct bw_stat *st;
	bool throttled = false;
	u64 sum, ran;
	u32 i, slot;
	s64 left;

	if (!ch)
		return false;
	sum = p->se.sum_exec_runtime;
	ran = sum > ch->exec_seen ? sum - ch->exec_seen : 0;
	ch->exec_seen = sum;
	if (!ran)
		return bw_first_throttled(ch, now) >= 0;
	bpf_for(i, 0, SCHEDBE_BW_MAX_DEPTH) {
		if (i >= ch->nr)
			break;
		slot = ch->slots[i & (SCHEDBE_BW_MAX_DEPTH - 1)];
		s = bw_slot(slot, now);
		if (!s)
			continue;
		s->used = 1;
		st = bpf_map_lookup_elem(&bw_stats, &slot);
		if (st)
			__sync_fetch_and_add(&st->usage_ns, ran);
		left = __sync_fetch_and_add(&s->runtime_ns, -(s64)ran) - (s64)ran;
		if (left < -bw_max_debt(s)) {
			stat_bw_forgiven_ns(-bw_max_debt(s) - left);
			s->runtime_ns = -bw_max_debt(s);
		}
		if (left <= 0)
			bw_throttle(slot, s, now);
		if (s->throttled)
			throttled = true;
	}
	return throttled;
}

/* The slot of the first throttled cgroup of @p's chain, or -1 (dying and freezing tasks: -1). */
static s32 bw_throttled_slot(struct task_struct *p, struct bw_task *bt, u64 now)
{
	struct bw_task *ch;

	if (!bw_nr_throttled || !(ch = bw_chain(p, bt)) || task_dying(p) || task_freezing(p))
		return -1;
	return bw_first_throttled(ch, now);
}

/* The runtime @p's most limited cgroup has left; U64_MAX when none limits it. */
static u64 bw_runtime_left(struct task_struct *p, struct bw_task *bt, u64 now)
{
	struct bw_task *ch = bw_chain(p, bt);
	u64 left = (u64)-1;
	struct bw_state *s;
	u32 i;

	if (!ch)
		return left;
	bpf_for(i, 0, SCHEDBE_BW_MAX_DEPTH) {
		if (i >= ch->nr)
			break;
		s = bw_slot(ch->slots[i & (SCHEDBE_BW_MAX_DEPTH - 1)], now);
		if (s && s->runtime_ns < (s64)left)
			left = s->runtime_ns > 0 ? s->runtime_ns : 0;
	}
	return left;
}

/* A timer due later than this after a hold's insert is sure to see the held task. */
#define BW_ARM_MARGIN_NS	(50ULL * 1000)

/*
 * ops.enqueue: hold @p, whose cgroup @slot is throttled, until the slot's
 * timer releases it. The timer stays where the throttle armed it (a CPU the
 * cgroup ran on) when it is still due comfortably after this insert: the
 * enqueue runs on the waking CPU, which may be one the cgroup never runs on,
 * and a timer moved there fires late whenever that CPU is busy or its vCPU
 * preempted. Otherwise (the
 * timer fired or is about to, or the slot was just unthrottled) it is armed
 * here, so every held task is looked at again.
 */
static void bw_hold(struct task_struct *p, s32 slot, u64 enq_flags, u64 now)
{
	struct bw_state *s;
	u32 key = slot;

	scx_bpf_dsq_insert_vtime(p, bw_dsq(key), SCX_SLICE_DFL, p->scx.dsq_vtime, enq_flags);
	stat_bw_holds(1);
	if (!(s = bpf_map_lookup_elem(&bw_state, &key)))
		return;
	/* a clock read after the insert: a timer due after it iterates after the insert */
	now = bpf_ktime_get_ns();
	if (s->throttled && s->runtime_ns <= 0 && s->armed_end > now + BW_ARM_MARGIN_NS)
		return;
	bw_arm(key, s, now);
}

/* ops.dispatch: move a queued @p whose cgroup @slot got throttled to its holding queue. */
static void bw_hold_queued(struct bpf_iter_scx_dsq *it, struct task_struct *p, s32 slot, u64 now)
{
	struct bw_state *s;
	u32 key = slot;

	if (!scx_bpf_dsq_move_vtime(it, p, bw_dsq(key), 0))
		return;
	stat_bw_holds(1);
	if ((s = bpf_map_lookup_elem(&bw_state, &key)))
		bw_arm(key, s, now);
}

/*
 * The slot's timer, at a period boundary (or just after a hold): refill,
 * unthrottle once runtime is positive (or the limit is gone), and release
 * every held task; a slot still in debt waits for the next boundary.
 */
static int bw_timer_fn(void *map, int *key, struct bw_state *s)
{
	u64 now = bpf_ktime_get_ns(), dsq, vtime;
	bool fifo, moved;
	/* when this firing was due, to report the timer's lateness at a release */
	u64 due = s->armed_end;
	bool was_throttled = s->throttled;
	struct task_struct *p;
	u32 slot = *key;

	if (slot >= SCHEDBE_BW_MAX_SLOTS)
		return 0;
	if (!bw_slot(slot, now) || s->runtime_ns > 0)
		bw_unthrottle(slot, s, now);
	if (was_throttled && !s->throttled) {
		stat_bw_unthrottles(1);
		if (now > due)
			stat_bw_late_ns(now - due);
	}
	if (s->throttled) {
		bw_arm(slot, s, now);
		return 0;
	}
	bpf_for_each(scx_dsq, p, bw_dsq(slot), 0) {
		fifo = false;
		if (!bw_release_to(p, &dsq, &vtime, &fifo))
			continue;
		/* a FIFO queue keeps @vtime in dsq_vtime too (fifo_be.bpf.h), ordered by arrival */
		scx_bpf_dsq_move_set_vtime(BPF_FOR_EACH_ITER, vtime);
		moved = fifo ? scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, dsq, 0) :
			       scx_bpf_dsq_move_vtime(BPF_FOR_EACH_ITER, p, dsq, 0);
		if (moved) {
			stat_bw_releases(1);
			bw_released(p, dsq);
		}
	}
	return 0;
}

/* ops.init: one holding queue and one timer per slot, one expiry timer per CPU. */
static s32 bw_init(void)
{
	struct bw_state *s;
	u32 i;
	s32 err;

	err = slice_expiry_init();
	if (err)
		return err;

	bpf_for(i, 0, SCHEDBE_BW_MAX_SLOTS) {
		err = scx_bpf_create_dsq(bw_dsq(i), -1);
		if (err) {
			scx_bpf_error("failed to create cpu.max holding queue %u: %d", i, err);
			return err;
		}
		s = bpf_map_lookup_elem(&bw_state, &i);
		if (!s)
			return -ENOENT;
		err = bpf_timer_init(&s->timer, &bw_state, CLOCK_MONOTONIC);
		if (!err)
			err = bpf_timer_set_callback(&s->timer, bw_timer_fn);
		if (err) {
			scx_bpf_error("failed to set up cpu.max timer %u: %d", i, err);
			return err;
		}
	}
	return 0;
}

/*
 * ops.cgroup_set_bandwidth (v6.17+): cpu.max or cpu.max.burst was written.
 * Takes effect at once for a cgroup that has a slot; userspace is asked to
 * rescan for one that has none yet (created since its last scan).
 */
static void bw_set(u64 cgid, u64 period_us, u64 quota_us, u64 burst_us)
{
	u32 *slot = bpf_map_lookup_elem(&bw_slot_of, &cgid);
	struct bw_conf *c = slot ? bpf_map_lookup_elem(&bw_conf, slot) : NULL;
	bool was_limited;

	bw_rescan_req = 1;
	if (!c)
		return;
	was_limited = c->quota_ns;
	c->period_ns = period_us * 1000;
	c->burst_ns = burst_us * 1000;
	c->quota_ns = quota_us >= BW_QUOTA_INF_US ? 0 : quota_us * 1000;
	if (c->quota_ns)
		bw_on = true;
	if (was_limited != !!c->quota_ns)
		__sync_fetch_and_add(&bw_gen, 1);
}

/* ops.cgroup_set_bandwidth: cpu.max or cpu.max.burst written (v6.17+; userspace leaves it out on older kernels). */
#define BW_SET_BANDWIDTH_OP(name)							\
void BPF_STRUCT_OPS(name, struct cgroup *cgrp, u64 period_us, u64 quota_us, u64 burst_us)	\
{											\
	bw_set(BPF_CORE_READ(cgrp, kn, id), period_us, quota_us, burst_us);		\
}

#endif /* __SCHEDBE_CPUMAX_BPF_H */
