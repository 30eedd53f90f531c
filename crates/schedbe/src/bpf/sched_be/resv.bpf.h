/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Reservations: cgroup weights held at every instant, not only on average.
 *
 * Userspace's flattening pass (flatten.rs, resv.rs) gives each cgroup that
 * competes with others two figures, in CPUs: its fair share, what its
 * cpu.weight gives it against the other active cgroups; and its claim,
 * what it would get wanting every CPU while the others want what they
 * used (water-filling by weight). On a Kubernetes node whose requests add
 * up to its CPUs, a pod's claim is at least its request. Here each such
 * cgroup has a slot counting the CPUs its LC tasks run on right now.
 *
 * Invariant (checked independently by `schedbe trace --cgroup PATH=REQ`,
 * "reservation inversion"): an LC task that wakes while one more CPU keeps
 * its cgroup within its claim, and finds no CPU idle or running BE,
 * preempts at once a task of a cgroup running on more CPUs than its fair
 * share, the one furthest above it (the waking CPU and the task's previous
 * CPU first). The vtime rule (lc_place.bpf.h, lc_preempt_victim) would make
 * it wait for the victim's minimum run and a vtime lead, and might take the
 * CPU of its own cgroup's task: a pod below its request must not wait for
 * a pod above its own.
 *
 * Only wakeups preempt this way: a task preempted here is not a wakeup when
 * it is queued again, so two cgroups cannot ping-pong a CPU. Long-run
 * fairness stays with virtual time. The root cgroup gets no slot, nor does
 * any cgroup while fewer than two compete (resv_on is then off), so their
 * context switches pay nothing.
 */
#ifndef __SCHEDBE_RESV_BPF_H
#define __SCHEDBE_RESV_BPF_H

#include <scx/common.bpf.h>
#include "tier.bpf.h"		/* task_cgid() */
#include "state.bpf.h"		/* TIER_LC, STAT_ADD() */
#include "cpu_cur.bpf.h"
#include "lc_weight.bpf.h"	/* factor_gen */

/* A claim on a victim CPU older than this is stale (the CPU never ran the claimant). */
#define RESV_CLAIM_NS	(10ULL * 1000 * 1000)
/*
 * How far past its claim (milli-CPUs) one more CPU may take a cgroup: a
 * Guaranteed pod of 1 CPU on a node whose requests fill it claims 0.99 of a
 * CPU once a daemon uses 1% of one, and must still get its CPU.
 */
#define RESV_SLACK_MILLI	50

/*
 * slot -> entitlement (struct resv_ent), written by userspace only; slot ->
 * CPUs running the slot's LC tasks now, written by BPF only (atomics). Two
 * maps, so that neither side's write can overwrite the other's.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCHEDBE_RESV_MAX_SLOTS);
	__type(key, u32);
	__type(value, struct resv_ent);
} resv_ents SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCHEDBE_RESV_MAX_SLOTS);
	__type(key, u32);
	__type(value, s32);
} resv_running SEC(".maps");

/* cgroup id -> slot (1..), from userspace; cached per task in struct resv_memo. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, u32);
} cgrp_resv SEC(".maps");

/* Set by userspace while at least one slot exists: otherwise nothing here runs. */
bool resv_on;

/* Per task: its cgroup's slot, remembered like the weight factor (factor_gen), and the slot it counts in. */
struct resv_memo {
	u64 cgrp;	/* the cgroup (id) slot is for; 0: none yet */
	u64 gen;	/* factor_gen it was read at */
	u32 slot;	/* its cgroup's slot; 0: none */
	u32 held;	/* the slot this task is counted in while it runs; 0: none */
};

static __always_inline s32 *resv_run(u32 slot)
{
	return slot ? bpf_map_lookup_elem(&resv_running, &slot) : NULL;
}

/* The CPUs running @slot's LC tasks now, x 1000, and its entitlement. */
static __always_inline struct resv_ent *resv_state(u32 slot, s64 *running_milli)
{
	struct resv_ent *ent = slot ? bpf_map_lookup_elem(&resv_ents, &slot) : NULL;
	s32 *run = resv_run(slot);
	s64 n;

	if (!ent || !run)
		return NULL;
	n = *(volatile s32 *)run;
	*running_milli = (n > 0 ? n : 0) * 1000;
	return ent;
}

/* @p's slot (0: none), looked up again only when its cgroup or factor_gen moved. */
static __always_inline u32 resv_task_slot(struct task_struct *p, struct resv_memo *m)
{
	u64 cg, gen = *(volatile u64 *)&factor_gen;
	u32 *sp;

	if (!resv_on)
		return 0;
	cg = task_cgid(p);
	if (m->cgrp != cg || m->gen != gen) {
		sp = bpf_map_lookup_elem(&cgrp_resv, &cg);
		m->slot = sp ? *sp : 0;
		m->cgrp = cg;
		m->gen = gen;
	}
	return m->slot;
}

/* ops.stopping (and ops.disable): the slot @held counted loses this CPU. */
static __always_inline void resv_stop(u32 *held, struct cpu_cur *c)
{
	s32 *run = resv_run(*held);

	if (c)
		c->resv_slot = 0;
	if (run)
		__sync_fetch_and_sub(run, 1);
	*held = 0;
}

/* ops.running of an LC task of @slot on @cpu: one more CPU for the slot. */
static __always_inline void resv_start(u32 slot, u32 *held, struct cpu_cur *c)
{
	s32 *run;

	if (*held)		/* counted already (no ops.stopping in between): never twice */
		resv_stop(held, NULL);
	run = resv_run(slot);
	if (c) {
		c->resv_slot = run ? slot : 0;
		c->resv_claim = 0;
	}
	if (!run)
		return;
	__sync_fetch_and_add(run, 1);
	*held = slot;
}

/*
 * How far @cpu's LC task's cgroup runs above its fair share, in milli-CPUs
 * (> 0: a victim @p may take), or 0 when @cpu is no candidate: not @p's,
 * not running LC of another slotted cgroup, or claimed by another wakeup.
 */
static __always_inline s64 resv_candidate(struct task_struct *p, u32 slot, s32 cpu, u64 now)
{
	struct cpu_cur *c = cpu_cur(cpu);
	struct resv_ent *e;
	s64 running;
	u64 claim;

	if (!c || c->tier != TIER_LC || !c->resv_slot || c->resv_slot == slot)
		return 0;
	claim = c->resv_claim;
	if (claim && now - claim < RESV_CLAIM_NS)
		return 0;
	if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr) || !(e = resv_state(c->resv_slot, &running)))
		return 0;
	return running > e->fair_milli ? running - e->fair_milli : 0;
}

/*
 * A CPU whose LC task belongs to a cgroup running above its fair share,
 * claimed for @p (so that concurrent wakeups pick different CPUs), when
 * @p's cgroup (@slot) would stay within its claim with one more CPU; -1
 * otherwise. "Within its claim" keeps weights: a cgroup may preempt its way
 * only to whole CPUs it is entitled to, the fractions are virtual time's.
 * The waking CPU and @p's previous CPU come first: preempting them needs
 * no IPI (the wakeup runs there, most often) and finds a warm cache.
 * Otherwise the CPU whose cgroup is furthest above, by a scan that runs
 * only for a wakeup that found every CPU busy with LC.
 */
static s32 resv_victim(struct task_struct *p, u32 slot)
{
	s32 here = bpf_get_smp_processor_id(), prev = scx_bpf_task_cpu(p), victim = -1;
	u32 n = scx_bpf_nr_cpu_ids(), start = bpf_get_prandom_u32(), i;
	u64 now = bpf_ktime_get_ns(), claim;
	struct resv_ent *e;
	struct cpu_cur *c;
	s64 best = 0, x;

	if (!(e = resv_state(slot, &x)) || x + 1000 > (s64)e->claim_milli + RESV_SLACK_MILLI)
		return -1;
	if (resv_candidate(p, slot, here, now) > 0) {
		victim = here;
	} else if (prev != here && resv_candidate(p, slot, prev, now) > 0) {
		victim = prev;
	} else {
		if (n > SCHEDBE_MAX_CPUS)
			n = SCHEDBE_MAX_CPUS;
		bpf_for(i, 0, n) {
			s32 cpu = (start + i) % n;

			if ((x = resv_candidate(p, slot, cpu, now)) > best) {
				best = x;
				victim = cpu;
			}
		}
	}
	if (victim < 0 || !(c = cpu_cur(victim)))
		return -1;
	claim = c->resv_claim;
	if (claim && now - claim < RESV_CLAIM_NS)
		return -1;
	if (__sync_val_compare_and_swap(&c->resv_claim, claim, now) != claim)
		return -1;	/* another wakeup claimed it first */
	STAT_ADD(resv_preempt, 1);
	return victim;
}

#endif /* __SCHEDBE_RESV_BPF_H */
