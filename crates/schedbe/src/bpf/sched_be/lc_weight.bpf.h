/* SPDX-License-Identifier: GPL-2.0 */
/*
 * LC weights that hold across CPUs (see flatten.rs): an LC task's effective
 * weight is its nice weight times its cgroup's factor, which userspace
 * computes by flattening the cgroup v2 cpu.weight hierarchy with the
 * runnable load this header accounts per cgroup.
 *
 * Hot-path cost: both halves run at every charge (tick, stopping) and at
 * every LC enqueue and sleep, so neither does a map operation there in the
 * common case:
 *  - the factor is remembered per task (struct lcw_memo) with the cgroup it
 *    was looked up for and factor_gen, which userspace bumps after each
 *    flattening pass that changed or dropped a factor;
 *  - runnable load is summed per task and added to the cgroup's counter
 *    once at least lcw_flush_ns of runnable time has gathered (or the task
 *    changes cgroup). Userspace reads the counters once per flattening
 *    interval and sets lcw_flush_ns to 1/32 of it (1-8 ms; 7.8 ms at the
 *    default 250 ms), so what a sleeping task still holds is noise; it is
 *    counted when the task runs again, not lost. Much smaller, nearly every
 *    charge of a request handler would flush (a hash lookup and an atomic
 *    add on a line every CPU of the cgroup writes; docs/design.md, "LC
 *    fairness across cores: flattened weights").
 */
#ifndef __SCHEDBE_LC_WEIGHT_BPF_H
#define __SCHEDBE_LC_WEIGHT_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"	/* SCHEDBE_FACTOR_ONE, struct cgrp_acct */
#include "tier.bpf.h"	/* task_cgid() */

/* Set by userspace from the flattening interval (sched.rs). */
const volatile u64 lcw_flush_ns = 1000ULL * 1000;

/* cgroup id -> LC weight factor (SCHEDBE_FACTOR_ONE = 1.0), from userspace. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, u64);
} cgrp_factor SEC(".maps");

/* cgroup id -> LC runnable load, read by userspace to flatten weights. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, struct cgrp_acct);
} cgrp_load SEC(".maps");

/* Bumped by userspace after it changed or deleted entries of cgrp_factor. */
u64 factor_gen;

/* Per task: the remembered factor and the runnable load not yet added to its cgroup. */
struct lcw_memo {
	u64 factor;		/* cgrp_factor of factor_cgrp, or SCHEDBE_FACTOR_ONE */
	u64 factor_cgrp;	/* the cgroup (id) it is for; 0: none yet */
	u64 factor_gen;		/* factor_gen it was read at */
	u64 runnable_at;	/* start of unaccounted runnable time */
	u64 acct_cgid;		/* cgroup charged with that runnable time */
	u64 pending_wns;	/* runnable time x weight not yet added to acct_cgid */
	u64 pending_ns;		/* the runnable time in it */
	u8 runnable;		/* accounting active (LC and runnable) */
};

/*
 * Effective LC weight: nice weight (p->scx.weight, 100 at nice 0) times the
 * cgroup factor userspace computed. Unknown cgroups count as 1.0 until the
 * next flattening pass (at most one interval).
 */
static u64 lc_weight(struct task_struct *p, struct lcw_memo *m)
{
	u64 cg = task_cgid(p), gen = *(volatile u64 *)&factor_gen;
	u64 w, *fp;

	if (m->factor_cgrp != cg || m->factor_gen != gen) {
		fp = bpf_map_lookup_elem(&cgrp_factor, &cg);
		m->factor = fp ? *fp : SCHEDBE_FACTOR_ONE;
		m->factor_cgrp = cg;
		m->factor_gen = gen;
	}
	w = (u64)p->scx.weight * m->factor / SCHEDBE_FACTOR_ONE;
	return w ? w : 1;
}

/* Add what @m gathered to its cgroup's counter. */
static void lcw_flush(struct lcw_memo *m)
{
	struct cgrp_acct *a, zero = {};

	if (!m->pending_wns)
		return;
	a = bpf_map_lookup_elem(&cgrp_load, &m->acct_cgid);
	if (!a) {
		bpf_map_update_elem(&cgrp_load, &m->acct_cgid, &zero, BPF_NOEXIST);
		a = bpf_map_lookup_elem(&cgrp_load, &m->acct_cgid);
	}
	if (a)
		__sync_fetch_and_add(&a->runnable_wns, m->pending_wns);
	m->pending_wns = 0;
	m->pending_ns = 0;
}

/* Count runnable time x weight of an LC task up to @now. */
static void acct_runnable(struct task_struct *p, struct lcw_memo *m, u64 now)
{
	u64 dt;

	if (!m->runnable || now <= m->runnable_at)
		return;
	dt = now - m->runnable_at;
	m->runnable_at = now;
	m->pending_wns += dt * p->scx.weight;
	m->pending_ns += dt;
	if (m->pending_ns >= lcw_flush_ns)
		lcw_flush(m);
}

/*
 * An LC task was queued (ops.enqueue, or ops.select_cpu's path straight to
 * a CPU): accounting starts, charged to its cgroup. This is ops.runnable's
 * job done where the task is classified anyway: a callback per wakeup for it
 * alone costs more than the work it would do. A task queued again while
 * runnable (slice end, preemption) goes on
 * accounting, unless it moved to another cgroup.
 */
static void lcw_queued(struct task_struct *p, struct lcw_memo *m)
{
	u64 cgid = task_cgid(p), now;

	if (m->runnable && cgid == m->acct_cgid)
		return;
	now = bpf_ktime_get_ns();
	acct_runnable(p, m, now);	/* up to the move, to the old cgroup */
	if (cgid != m->acct_cgid)
		lcw_flush(m);	/* what it gathered belongs to the old cgroup */
	m->acct_cgid = cgid;
	m->runnable = 1;
	m->runnable_at = now;
}

/*
 * @p is no longer runnable (ops.stopping of a task going to sleep;
 * ops.disable): accounting stops, what is pending stays for later. A queued
 * task leaves only to be queued again (affinity, cgroup moves) or through
 * ops.disable, never to sleep, so ops.quiescent is not needed for this.
 */
static void lcw_stopped(struct task_struct *p, struct lcw_memo *m, u64 now)
{
	acct_runnable(p, m, now);
	m->runnable = 0;
}

#endif /* __SCHEDBE_LC_WEIGHT_BPF_H */
