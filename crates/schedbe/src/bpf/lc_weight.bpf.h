/* SPDX-License-Identifier: GPL-2.0 */
/*
 * LC weights that hold across CPUs (see flatten.rs): an LC task's effective
 * weight is its nice weight times its cgroup's factor, which userspace
 * computes by flattening the cgroup v2 cpu.weight hierarchy with the
 * runnable load this header accounts per cgroup.
 *
 * The includer defines struct task_ctx with lc_runnable, runnable_at and
 * acct_cgid, and task_cgid().
 */
#ifndef __SCHEDBE_LC_WEIGHT_BPF_H
#define __SCHEDBE_LC_WEIGHT_BPF_H

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

/*
 * Effective LC weight: nice weight (p->scx.weight, 100 at nice 0) times the
 * cgroup factor userspace computed. Unknown cgroups count as 1.0 until the
 * next flattening pass (at most one interval).
 */
static u64 lc_weight(struct task_struct *p)
{
	u64 cgid = task_cgid(p), f = SCHEDBE_FACTOR_ONE, w;
	u64 *fp = bpf_map_lookup_elem(&cgrp_factor, &cgid);

	if (fp)
		f = *fp;
	w = (u64)p->scx.weight * f / SCHEDBE_FACTOR_ONE;
	return w ? w : 1;
}

/* Add runnable time x weight of an LC task to its cgroup's load. */
static void acct_runnable(struct task_struct *p, struct task_ctx *tctx, u64 now)
{
	struct cgrp_acct *a, zero = {};
	u64 dt;

	if (!tctx->lc_runnable || now <= tctx->runnable_at)
		return;
	dt = now - tctx->runnable_at;
	tctx->runnable_at = now;
	a = bpf_map_lookup_elem(&cgrp_load, &tctx->acct_cgid);
	if (!a) {
		bpf_map_update_elem(&cgrp_load, &tctx->acct_cgid, &zero, BPF_NOEXIST);
		a = bpf_map_lookup_elem(&cgrp_load, &tctx->acct_cgid);
		if (!a)
			return;
	}
	__sync_fetch_and_add(&a->runnable_wns, dt * p->scx.weight);
}

#endif /* __SCHEDBE_LC_WEIGHT_BPF_H */
