/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Least-loaded-first among sandboxes (shared/papers/003, CFS-LLF) on
 * sched_ext, for dense serverless nodes.
 *
 * A sandbox is a cgroup userspace matched by pattern (each kubelet pod by
 * default). Its tasks' CPU time is summed here (sandbox_ran, at every
 * ops.stopping); userspace reads it, smooths it into a load with a ~4 s
 * horizon (agent/load.rs), and writes that as the sandbox's order key
 * (sandbox_key: cgroup id -> load in 1/65536 CPU). Reading one map entry
 * per sandbox costs far less than opening each sandbox's cpu.stat: on a
 * node of 1000 sandboxes that is 5000 file reads a second. A task in no
 * sandbox (the host's: kubelet, the runtime, this scheduler's own daemon)
 * is ordered by its own load, kept here with the same decay, as if it were
 * a sandbox of its own (host_key()): a mostly idle host daemon goes first,
 * one that walks the cgroup tree for a quarter of a CPU does not.
 *
 * Order: one LC queue ordered by (sandbox key, time queued): the least
 * loaded sandbox's work first, and within a sandbox (or among equal loads)
 * first come first served, a slice each. BE tasks (the shared tier rules)
 * have a FIFO queue below it. This scheduler's own daemon is keyed 0
 * (daemon_tgid): the order is only as fresh as the loads it publishes.
 *
 * Invariants:
 *  order:    a CPU takes the LC task of the least loaded sandbox queued
 *            (loads as of its enqueue), except for the floor below.
 *  daemon:   the daemon's tasks (daemon_tgid) go first, as the lightest
 *            sandbox's do. Were it ordered by its own load, an overload
 *            that started while every sandbox was still at its start key 0
 *            would queue the daemon behind all of them, and the keys it
 *            should publish would stay at 0 while it waited for the floor,
 *            for seconds. It takes a small share of a CPU.
 *  entry:    an LC wakeup that finds no idle CPU preempts a CPU running
 *            BE (its previous CPU first), as SCHED_BE's entry check does.
 *  preempt:  an LC wakeup that finds no idle CPU nor BE preempts the CPU whose
 *            task belongs to the most loaded sandbox, if that sandbox is
 *            more loaded than the waking one by preempt_margin and its task
 *            has run min_run_ns: light functions do not wait a slice for
 *            a heavy one.
 *  floor:    every floor_interval_ns each CPU looks at the tail of the LC
 *            queue (the most loaded sandboxes, LLF_FLOOR_SCAN tasks) and
 *            runs the one that has waited longest past floor_wait_ns, for
 *            floor_slice_ns (short, so light work waits little for it): a
 *            task among them waits at most about floor_wait_ns plus its
 *            turn, longest waiter first, one per CPU per interval (with 32
 *            and 4 CPUs, about a second), never long enough for the
 *            sched_ext watchdog. The documented floor:
 *            a sandbox whose tasks waited through a second ran at least
 *            floor_slice_ns (1 ms) in it. The floor alone guarantees that
 *            while few tasks starve at once (those deeper in the queue
 *            than LLF_FLOOR_SCAN wait their turn there); the
 *            loads' decay gives far more in practice, since a sandbox that
 *            gets nothing soon becomes the least loaded of the heavy ones.
 *            `schedbe-bench serverless` checks the floor from the tracer,
 *            not from this policy's counters.
 *  BE:       below every LC task; a BE task queued longer than
 *            starvation_limit_ns gets one slice (guard).
 *  cpu.max:  a task whose cgroup (or a limited ancestor) has used its quota
 *            for the period waits in that cgroup's holding queue until the
 *            period ends (cpumax.bpf.h, quota mode), LC and BE alike; a
 *            queued task whose cgroup got throttled is moved there when a
 *            CPU looks at it (consume()), never run.
 *  parking:  a BE task runnable for a whole park_after_ns window with under
 *            1/32 of it on a CPU is reported, and userspace freezes its BE
 *            cgroup (park.rs); a queued BE task that is dying or has a
 *            freeze pending runs at the next walk of the BE queue
 *            (fifo_be.bpf.h, as in Akita).
 *
 * Shared with the other policies (common/): policy.bpf.h (task context,
 * counters, ops.exit), tier_cache.bpf.h (BE rules; tier.bpf.h's
 * cgrp_outermost_in() finds a task's sandbox too), task_state.bpf.h (dying
 * and freezing tasks run as LC), fifo_be.bpf.h (the FIFO BE tier: its
 * queue, starvation guard and parking's walk), park_report.bpf.h (parking's
 * starvation windows and reports), sync_pick.bpf.h (the kernel's CPU picker,
 * never a BE waker's busy CPU), rt_takeover.bpf.h (what waits in the local
 * queue of a CPU an RT/DL task takes goes back through ops.enqueue and finds
 * another CPU), cpumax.bpf.h (cpu.max, quota mode), cgrp_watch.bpf.h (when
 * userspace reads cgroup files again).
 */
#include <scx/common.bpf.h>
#include "intf.h"
#include "../common/policy.bpf.h"
#include "../common/tier_cache.bpf.h"
#include "../common/task_state.bpf.h"
#include "../common/fifo_be.bpf.h"
#include "../common/park_report.bpf.h"
#include "../common/sync_pick.bpf.h"
#include "../common/rt_takeover.bpf.h"
#include "../common/cpumax.bpf.h"
#include "../common/cgrp_watch.bpf.h"

const volatile u64 slice_ns = 5ULL * 1000 * 1000;
const volatile u64 be_slice_ns = 20ULL * 1000 * 1000;
const volatile u64 floor_interval_ns = 100ULL * 1000 * 1000;
const volatile u64 floor_wait_ns = 200ULL * 1000 * 1000;
const volatile u64 floor_slice_ns = 1ULL * 1000 * 1000;
const volatile u64 starvation_limit_ns = 2ULL * 1000 * 1000 * 1000;
const volatile u64 min_run_ns = 100ULL * 1000;
const volatile u64 preempt_margin = LLF_LOAD_ONE / 16;
/* The scheduler's own process (userspace sets it): keyed 0, see "daemon" above. */
const volatile s32 daemon_tgid = -1;
/* The loads' half-life (userspace sets it from --load-half-life-s). */
const volatile u64 half_life_ns = 1000ULL * 1000 * 1000;

/* Tail entries the floor looks at per visit (bounds the verifier's work). */
#define LLF_FLOOR_SCAN	32

/* Bumped by userspace when the sandbox set changes: tasks look theirs up again. */
u64 llf_gen;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LLF_MAX_SANDBOXES);
	__type(key, u64);	/* sandbox cgroup id */
	__type(value, u64);	/* its load, the order key */
} sandbox_key SEC(".maps");

/* CPU time of each sandbox's tasks, ns; userspace creates and removes the entries. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LLF_MAX_SANDBOXES);
	__type(key, u64);	/* sandbox cgroup id */
	__type(value, u64);
} sandbox_ran SEC(".maps");

PERCPU_STATS_DEFINE(struct llf_stats)

/* The counters the shared parts add to: this policy's struct llf_stats. */
RT_TAKEOVER_STATS
CPUMAX_STATS

/* What each CPU runs: the key of its task's sandbox, and since when. */
struct cpu_state {
	u64 key;
	u64 started;
	u64 floor_last;
	u64 be_walk_next;	/* when it may next walk the BE queue (be_walk) */
	u8 lc;
	u8 be;			/* it runs a BE task (entry: an LC wakeup preempts it) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LLF_MAX_CPUS);
	__type(key, u32);
	__type(value, struct cpu_state);
} cpu_states SEC(".maps");

struct task_ctx {
	u64 enq_at;		/* LC: when queued (the floor) */
	u64 host_load;		/* outside every sandbox: its own load, CPUs x LLF_LOAD_ONE */
	u64 host_at;		/* when host_load was last brought up to date */
	u64 sb;			/* its sandbox's cgroup id; 0: none */
	u64 cls_gen;
	u64 cls_cgrp;
	u8 be;
	struct tier_memo memo;
	struct starve_win starve;	/* BE: parking's starvation window */
	struct bw_task bw;	/* cpu.max: the task's limited cgroups (cpumax.bpf.h) */
};

#define TCTX_IS_BE(c)	((c)->be)

TASK_CTX_DEFINE(struct task_ctx, TCTX_IS_BE)

static __always_inline struct cpu_state *cpu_state(s32 cpu)
{
	u32 k = cpu;
	return bpf_map_lookup_elem(&cpu_states, &k);
}

/* BE by the shared rules (unless it must run); otherwise LC in its sandbox. */
static bool classify(struct task_struct *p, struct task_ctx *tctx)
{
	u64 gen = *(volatile u64 *)&llf_gen, cg = task_cgid(p);

	tctx->be = tier_runs_as_be(p, &tctx->memo);
	if (tctx->cls_gen != gen || tctx->cls_cgrp != cg) {
		tctx->sb = cgrp_outermost_in(p, &sandbox_key);
		tctx->cls_gen = gen;
		tctx->cls_cgrp = cg;
	}
	return tctx->be;
}

/*
 * 2^(-dt / half_life) in 1/LLF_LOAD_ONE: whole half-lives as shifts, the
 * rest of one linearly (1 - x/2 for x in [0, 1): exact at both ends, 6% off
 * in the middle; the order key needs no more).
 */
static __always_inline u64 decay_fp(u64 dt)
{
	u64 h = half_life_ns ? half_life_ns : 1, k = dt / h, rem = dt % h;

	if (k >= 32)
		return 0;
	return ((u64)LLF_LOAD_ONE >> k) * (2 * h - rem) / (2 * h);
}

/*
 * A host task's load: the filter userspace applies to sandboxes
 * (agent/load.rs), load = load * d + rate * (1 - d) over the time since the
 * last update, with rate = @ran / that time (@ran = 0 when only decaying).
 */
static u64 host_key(struct task_ctx *tctx, u64 now, u64 ran)
{
	u64 dt = now > tctx->host_at ? now - tctx->host_at : 0, d, rate;

	if (!dt)
		return tctx->host_load;
	d = decay_fp(dt);
	rate = ran >= dt ? LLF_LOAD_ONE : ran * LLF_LOAD_ONE / dt;
	return (tctx->host_load * d + rate * (LLF_LOAD_ONE - d)) / LLF_LOAD_ONE;
}

/*
 * The order key of @p: its sandbox's load, or its own outside every sandbox;
 * 0 for the daemon.
 */
static __always_inline u64 key_of(struct task_struct *p, struct task_ctx *tctx, u64 now)
{
	u64 *k;

	if (!tctx || p->tgid == daemon_tgid)
		return 0;
	if (!tctx->sb)
		return host_key(tctx, now, 0);
	if (!(k = bpf_map_lookup_elem(&sandbox_key, &tctx->sb)))
		return 0;
	return *k;
}

s32 BPF_STRUCT_OPS(llf_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	bool is_idle = false;
	s32 cpu;

	if (!tctx || classify(p, tctx))
		return prev_cpu;	/* BE goes through ops.dispatch, after LC */
	/* never a BE waker's busy CPU reported idle (sync_pick.bpf.h) */
	cpu = pick_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	/* a task of a throttled cgroup goes through ops.enqueue, which holds it */
	if (is_idle && (!bw_on || bw_throttled_slot(p, &tctx->bw, bpf_ktime_get_ns()) < 0)) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
		STAT_ADD(direct, 1);
	}
	return cpu;
}

/*
 * No CPU was idle for an LC task of load @key: preempt a CPU running BE
 * (entry; @p's previous CPU first, else the first found), else the CPU whose
 * task's sandbox is the most loaded, if it is heavier by preempt_margin and
 * has run min_run_ns (so two light sandboxes do not ping-pong). Two wakeups
 * may pick the same BE CPU; the second task then waits in the queue for the
 * next CPU that dispatches (a slice end, a sleep).
 */
static void preempt_heaviest(struct task_struct *p, u64 key, u64 now)
{
	struct cpu_state *cs;
	u64 best_key = key + preempt_margin;
	s32 best = -1, prev = scx_bpf_task_cpu(p);
	u32 i;

	if ((cs = cpu_state(prev)) && cs->be && bpf_cpumask_test_cpu(prev, p->cpus_ptr)) {
		scx_bpf_kick_cpu(prev, SCX_KICK_PREEMPT);
		STAT_ADD(preempts, 1);
		return;
	}
	bpf_for(i, 0, scx_bpf_nr_cpu_ids()) {
		if (i >= LLF_MAX_CPUS)
			break;
		if (!(cs = cpu_state(i)) || !bpf_cpumask_test_cpu(i, p->cpus_ptr))
			continue;
		if (cs->be) {
			best = i;
			break;
		}
		if (!cs->lc)
			continue;
		if (cs->key > best_key && now - cs->started >= min_run_ns) {
			best_key = cs->key;
			best = i;
		}
	}
	if (best >= 0) {
		scx_bpf_kick_cpu(best, SCX_KICK_PREEMPT);
		STAT_ADD(preempts, 1);
	}
}

void BPF_STRUCT_OPS(llf_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	u64 now = bpf_ktime_get_ns(), key;
	s32 cpu, slot;
	bool be = tctx && classify(p, tctx);

	/* cpu.max: a task of a throttled cgroup waits for the next period */
	if (tctx && (slot = bw_throttled_slot(p, &tctx->bw, now)) >= 0) {
		bw_hold(p, slot, enq_flags, now);
		return;
	}
	/*
	 * The last runnable task of a CPU whose dispatch found nothing else
	 * (SCX_OPS_ENQ_LAST, so that a throttled one is held, not kept
	 * running): ops.dispatch keeps any other (keep_prev()), so this is a
	 * backstop; it is queued like any other and its CPU kicked.
	 */
	if (enq_flags & SCX_ENQ_LAST)
		scx_bpf_kick_cpu(scx_bpf_task_cpu(p), 0);
	if (be) {
		fifo_be_enqueue(p, &tctx->starve, LLF_BE_DSQ, be_slice_ns, enq_flags, now);
		return;
	}
	key = key_of(p, tctx, now);
	if (tctx)
		tctx->enq_at = now;
	/* (load, time queued in 64 us units): FIFO among equal loads */
	scx_bpf_dsq_insert_vtime(p, LLF_LC_DSQ, slice_ns, (key << 32) | ((now >> 16) & 0xffffffff), enq_flags);
	cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (cpu >= 0)
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	else
		preempt_heaviest(p, key, now);
}

/* May the floor run @p on @cpu now: waited past floor_wait_ns, runnable here? */
static __always_inline bool floor_due(struct task_struct *p, struct task_ctx *tctx, s32 cpu, u64 now)
{
	if (!tctx || now - tctx->enq_at < floor_wait_ns)
		return false;
	/* throttled (cpu.max): consume() moves it to its holding queue */
	if (bw_throttled_slot(p, &tctx->bw, now) >= 0)
		return false;
	/* moving a task to a CPU it may not run on is a scheduler error */
	return bpf_cpumask_test_cpu(cpu, p->cpus_ptr);
}

/*
 * The floor: of the LLF_FLOOR_SCAN tasks at the tail (the most loaded
 * sandboxes), the one that has waited longest past floor_wait_ns, run here
 * now. Once per floor_interval_ns per CPU. Longest first, not nearest the
 * tail: the tasks the floor serves are queued again at the tail, so taking
 * the nearest would serve the same few while one just ahead of them (a
 * host kthread with a small load of its own, while every sandbox still has
 * key 0) waits on, past the RCU stall detector's limit.
 */
static bool floor_slice(s32 cpu, u64 now)
{
	struct cpu_state *cs = cpu_state(cpu);
	struct task_struct *p;
	u64 oldest = 0;
	s32 pid = -1;
	u32 seen = 0;

	if (!cs || now - cs->floor_last < floor_interval_ns)
		return false;
	cs->floor_last = now;
	bpf_for_each(scx_dsq, p, LLF_LC_DSQ, SCX_DSQ_ITER_REV) {
		struct task_ctx *tctx = task_ctx(p);

		if (++seen > LLF_FLOOR_SCAN)
			break;
		if (tctx && floor_due(p, tctx, cpu, now) && (pid < 0 || tctx->enq_at < oldest)) {
			oldest = tctx->enq_at;
			pid = p->pid;
		}
	}
	if (pid < 0)
		return false;
	/* the same walk again to move it (another CPU may have taken it meanwhile) */
	seen = 0;
	bpf_for_each(scx_dsq, p, LLF_LC_DSQ, SCX_DSQ_ITER_REV) {
		if (++seen > LLF_FLOOR_SCAN)
			break;
		if (p->pid != pid)
			continue;
		/* a short slice: the floor must not make light work wait long */
		scx_bpf_dsq_move_set_slice(BPF_FOR_EACH_ITER, floor_slice_ns);
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
			STAT_ADD(floor_slices, 1);
			return true;
		}
		break;
	}
	return false;
}

/* Parking's walk of the BE queue (fifo_be.bpf.h). */
static bool be_walk(s32 cpu, u64 now)
{
	struct cpu_state *cs = cpu_state(cpu);
	struct llf_stats *st = my_stats();

	return cs && st &&
	       fifo_be_walk(LLF_BE_DSQ, cpu, now, be_slice_ns, &cs->be_walk_next, &st->starved_reports, &st->be_rescues);
}

/*
 * Move the first task of @dsq that may run here to this CPU. While some
 * cgroup is throttled (cpu.max), queued tasks of throttled cgroups go to
 * their holding queues on the way; otherwise this is one kfunc call.
 */
static bool consume(u64 dsq, s32 cpu, u64 now)
{
	struct task_struct *p;
	struct task_ctx *tctx;
	s32 slot;

	if (!bw_nr_throttled)
		return scx_bpf_dsq_move_to_local(dsq, 0);
	bpf_for_each(scx_dsq, p, dsq, 0) {
		tctx = task_ctx(p);
		if (tctx && (slot = bw_throttled_slot(p, &tctx->bw, now)) >= 0) {
			bw_hold_queued(BPF_FOR_EACH_ITER, p, slot, now);
			continue;
		}
		if (bpf_cpumask_test_cpu(cpu, p->cpus_ptr) &&
		    scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0))
			return true;
	}
	return false;
}

/*
 * cpu.max: cut @p's slice to the runtime its cgroups have left, with the
 * expiry timer armed (sched_ext checks slices only at ticks).
 */
static void fit_slice(struct task_struct *p, struct task_ctx *tctx, u64 now)
{
	u64 left = bw_runtime_left(p, &tctx->bw, now);

	if (left >= p->scx.slice)
		return;
	left = left > BW_MIN_SLICE_NS ? left : BW_MIN_SLICE_NS;
	scx_bpf_task_set_slice(p, left);
	slice_expiry_arm(p, scx_bpf_task_cpu(p), left);
}

/* The start of a stint on a CPU: what preemption reads, and the slice cpu.max leaves. */
static void stint_start(struct task_struct *p, struct task_ctx *tctx, struct cpu_state *cs, u64 now)
{
	cs->started = now;
	cs->lc = tctx && !tctx->be;
	cs->be = tctx && tctx->be;
	cs->key = key_of(p, tctx, now);
	if (tctx && bw_on)
		fit_slice(p, tctx, now);
}

/*
 * The CPU time of the stint since cs->started, to the task's sandbox (or its
 * own load), its starvation window and cpu.max. True when a cgroup of its
 * is throttled now.
 */
static bool stint_charge(struct task_struct *p, struct task_ctx *tctx, struct cpu_state *cs, u64 now, bool runnable)
{
	u64 *ran, stint = now - cs->started;

	if (!tctx)
		return false;
	starve_ran(&tctx->starve, stint, runnable);
	if (!tctx->sb) {
		tctx->host_load = host_key(tctx, now, stint);
		tctx->host_at = now;
	} else if ((ran = bpf_map_lookup_elem(&sandbox_ran, &tctx->sb))) {
		__sync_fetch_and_add(ran, stint);
	}
	return bw_charge(p, &tctx->bw, now);
}

/*
 * ops.dispatch found nothing else for this CPU and @prev is still runnable:
 * it keeps the CPU for another slice. Without this, its slice's end would
 * take the SCX_ENQ_LAST path (ops.enqueue, a kick, the CPU idle until it
 * dispatches again), which leaves CPUs idle beside runnable hogs.
 * ops.stopping and ops.running are not called for a
 * kept task, so its stint is charged and started again here. A throttled
 * prev does not keep the CPU: ops.enqueue holds it.
 */
static bool keep_prev(struct task_struct *prev, struct task_ctx *tctx, u64 slice, u64 now)
{
	struct cpu_state *cs = cpu_state(scx_bpf_task_cpu(prev));
	bool throttled;

	if (!cs)
		return false;
	throttled = stint_charge(prev, tctx, cs, now, true);
	cs->started = now;	/* charged up to now, whatever follows */
	/* bw_throttled_slot() lets a dying or freezing task run on */
	if (throttled && bw_throttled_slot(prev, &tctx->bw, now) >= 0)
		return false;
	scx_bpf_task_set_slice(prev, slice);
	stint_start(prev, tctx, cs, now);
	STAT_ADD(kept, 1);
	return true;
}

void BPF_STRUCT_OPS(llf_dispatch, s32 cpu, struct task_struct *prev)
{
	u64 now = bpf_ktime_get_ns();
	struct task_ctx *pctx = prev && (prev->scx.flags & SCX_TASK_QUEUED) ? task_ctx(prev) : NULL;

	if (fifo_head_waited(LLF_BE_DSQ, now, starvation_limit_ns) && consume(LLF_BE_DSQ, cpu, now)) {
		STAT_ADD(be_guards, 1);
		return;
	}
	if (be_walk(cpu, now) || floor_slice(cpu, now))
		return;
	if (consume(LLF_LC_DSQ, cpu, now)) {
		STAT_ADD(lc_dispatches, 1);
		return;
	}
	/* a runnable LC prev keeps the CPU over any BE task */
	if (pctx && !pctx->be && keep_prev(prev, pctx, slice_ns, now))
		return;
	if (consume(LLF_BE_DSQ, cpu, now)) {
		STAT_ADD(be_dispatches, 1);
		return;
	}
	if (pctx && pctx->be)
		keep_prev(prev, pctx, be_slice_ns, now);
}

void BPF_STRUCT_OPS(llf_running, struct task_struct *p)
{
	struct cpu_state *cs = cpu_state(scx_bpf_task_cpu(p));

	if (cs)
		stint_start(p, task_ctx(p), cs, bpf_ktime_get_ns());
}

void BPF_STRUCT_OPS(llf_stopping, struct task_struct *p, bool runnable)
{
	struct cpu_state *cs = cpu_state(scx_bpf_task_cpu(p));

	if (!cs)
		return;
	cs->lc = 0;
	cs->be = 0;
	stint_charge(p, task_ctx(p), cs, bpf_ktime_get_ns(), runnable);
}

/* Per tick: rescue tasks stranded behind an RT/DL task on another CPU (v7.1+); charge cpu.max. */
void BPF_STRUCT_OPS(llf_tick, struct task_struct *p)
{
	struct task_ctx *tctx;

	if (nr_rt_cpus > 0)	/* no clock read while no RT/DL task holds a CPU */
		rescue_stranded(bpf_get_smp_processor_id(), bpf_ktime_get_ns());
	/* cpu.max: a task that keeps its CPU is charged here; throttled, it stops now (ops.enqueue holds it) */
	if (bw_on && (tctx = task_ctx(p)) && bw_charge(p, &tctx->bw, bpf_ktime_get_ns()))
		scx_bpf_task_set_slice(p, 0);
}

RT_CPU_RELEASE_OP(llf_cpu_release)

s32 BPF_STRUCT_OPS(llf_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct task_ctx *tctx = task_ctx_create(p);

	if (!tctx)
		return -ENOMEM;
	tctx->cls_gen = ~0ULL;
	tctx->host_at = bpf_ktime_get_ns();
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(llf_init)
{
	s32 err = create_dsq(LLF_LC_DSQ);

	if (!err)
		err = create_dsq(LLF_BE_DSQ);
	return err ? err : bw_init();
}

BW_SET_BANDWIDTH_OP(llf_cgroup_set_bandwidth)

/*
 * cpu.max: a task leaving its cgroup's holding queue goes back to its queue:
 * BE to the FIFO queue, as if queued now (time held is not starvation); LC
 * by its sandbox's load, as if queued now.
 */
static bool bw_release_to(struct task_struct *p, u64 *dsq, u64 *vtime, bool *fifo)
{
	struct task_ctx *tctx = task_ctx(p);
	u64 now = bpf_ktime_get_ns();

	if (tctx && tctx->be) {
		starve_restart(&tctx->starve, now);
		*dsq = LLF_BE_DSQ;
		*vtime = now;	/* fifo_note_enqueue() */
		*fifo = true;
		return true;
	}
	if (tctx)
		tctx->enq_at = now;
	*dsq = LLF_LC_DSQ;
	*vtime = (key_of(p, tctx, now) << 32) | ((now >> 16) & 0xffffffff);
	return true;
}

/* cpu.max: wake an idle CPU for a released task. */
static void bw_released(struct task_struct *p, u64 dsq)
{
	s32 cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);

	if (cpu >= 0)
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}

TIER_SET_IDLE_OP(llf_cgroup_set_idle)
CGRP_WATCH_OPS(llf_cgroup_init, llf_cgroup_exit)
EXIT_OP(llf_exit)

SCX_OPS_DEFINE(llf_ops,
	       .select_cpu	= (void *)llf_select_cpu,
	       .enqueue		= (void *)llf_enqueue,
	       .dispatch	= (void *)llf_dispatch,
	       .running		= (void *)llf_running,
	       .stopping	= (void *)llf_stopping,
	       .tick		= (void *)llf_tick,
	       .cpu_release	= (void *)llf_cpu_release,
	       .init_task	= (void *)llf_init_task,
	       .init		= (void *)llf_init,
	       .exit		= (void *)llf_exit,
	       .cgroup_set_idle	= (void *)llf_cgroup_set_idle,
	       .cgroup_init	= (void *)llf_cgroup_init,
	       .cgroup_exit	= (void *)llf_cgroup_exit,
	       .cgroup_set_bandwidth = (void *)llf_cgroup_set_bandwidth,
	       /* so a throttled last task is enqueued (and held), not kept running */
	       .flags		= SCX_OPS_ENQ_LAST,
	       .name		= "schedbe_llf");
