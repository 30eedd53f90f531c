/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The LC/BE rules of tier.bpf.h, remembered per task, for every schedbe
 * policy. The tracer keeps classifying afresh at every event, so it judges
 * this cache as well as the policy.
 *
 * Why: the rules walk the task's cgroup ancestry (cpu.idle on each cpu task
 * group; a hash lookup per cgroup v2 level for configured paths), and a
 * wakeup classifies in select_cpu and enqueue. The answer changes
 * only when
 *   - the task changes cgroup: its cgroup v2 id or its cpu task group's
 *     serial number differs from the one the answer was computed for;
 *   - userspace changes be_cgroups: it bumps tier_gen after the update;
 *   - cpu.idle is written: ops.cgroup_set_idle (v6.19+, called after the
 *     kernel stored the new value) bumps tier_gen.
 * Kernels without ops.cgroup_set_idle do not report cpu.idle writes, so there
 * the cpu.idle walk is never cached (tier_idle_cached false), and a write
 * still takes effect at the next decision. SCHED_IDLE is read live: it is one
 * load, and a policy change has no callback of its own.
 *
 * A bump that races with a walk leaves an answer tagged with the old
 * generation, which the next call recomputes: the cache can be late by one
 * decision, never stale for longer.
 */
#ifndef __SCHEDBE_TIER_CACHE_BPF_H
#define __SCHEDBE_TIER_CACHE_BPF_H

#include <scx/common.bpf.h>
#include "tier.bpf.h"
#include "task_state.bpf.h"

/* Bumped by userspace after be_cgroups changes, and by ops.cgroup_set_idle. */
u64 tier_gen;
/* Set by userspace when the kernel calls ops.cgroup_set_idle (v6.19+). */
const volatile bool tier_idle_cached = false;

/* One task's remembered answer; lives in the policy's task context. */
struct tier_memo {
	u64 gen;	/* tier_gen it was computed at */
	u64 cgrp;	/* the task's cgroup v2 cgroup id then */
	u64 tg;		/* its cpu task group's serial number then */
	u8 listed;	/* tier_cgroup_listed() */
	u8 idle;	/* tier_tg_idle(); used only when tier_idle_cached */
	u8 valid;
};

/* tier_task_is_be(), remembered in @m while its inputs are unchanged. */
static __always_inline bool tier_task_is_be_cached(struct task_struct *p, struct tier_memo *m)
{
	u64 gen, cg, tg;

	if (p->policy == SCHEDBE_SCHED_IDLE)
		return true;
	/* the generation first: a bump during the walk tags the answer old */
	gen = *(volatile u64 *)&tier_gen;
	cg = task_cgid(p);
	tg = task_tg_serial(p);
	if (!m->valid || m->gen != gen || m->cgrp != cg || m->tg != tg) {
		m->listed = tier_cgroup_listed(p);
		m->idle = tier_idle_cached && tier_tg_idle(p);
		m->gen = gen;
		m->cgrp = cg;
		m->tg = tg;
		m->valid = 1;
	}
	if (m->listed)
		return true;
	return tier_idle_cached ? m->idle : tier_tg_idle(p);
}

/*
 * Whether @p runs as BE now: BE by the rules, unless it is dying or on its
 * way to the freezer trap (both must get to run, task_state.bpf.h).
 */
static __always_inline bool tier_runs_as_be(struct task_struct *p, struct tier_memo *m)
{
	return tier_task_is_be_cached(p, m) && !task_dying(p) && !task_freezing(p);
}

/* cpu.idle was written somewhere: every remembered answer is recomputed. */
static __always_inline void tier_cache_invalidate(void)
{
	__sync_fetch_and_add(&tier_gen, 1);
}

/* ops.cgroup_set_idle (v6.19+; userspace leaves it out on older kernels): reclassify. */
#define TIER_SET_IDLE_OP(name)								\
void BPF_STRUCT_OPS(name, struct cgroup *cgrp, bool idle)				\
{											\
	tier_cache_invalidate();							\
}

#endif /* __SCHEDBE_TIER_CACHE_BPF_H */
