/* SPDX-License-Identifier: GPL-2.0 */
/*
 * LC/BE tier classification, shared by the scheduler (schedbe run) and the
 * independent tracer (schedbe trace). Each program that includes this header
 * gets its own be_cgroups map, filled by its own userspace from the same rules
 * (crates/schedbe-cgroup), so the tracer never reads the scheduler's state.
 *
 * A task is BE when any of these holds, checked at the moment of the call, so
 * policy changes, cpu.idle writes and cgroup moves take effect immediately:
 *   1. its policy is SCHED_IDLE;
 *   2. its cpu cgroup or any ancestor has cpu.idle=1 (task_group->idle);
 *   3. its cgroup v2 cgroup or any ancestor is in be_cgroups (configured path
 *      patterns; userspace inserts the matching cgroups, not their children).
 * Everything else is LC. Kernel threads are LC unless SCHED_IDLE.
 */
#ifndef __SCHEDBE_TIER_BPF_H
#define __SCHEDBE_TIER_BPF_H

#define SCHEDBE_SCHED_IDLE	5	/* uapi SCHED_IDLE */
#define SCHEDBE_MAX_CGRP_DEPTH	32	/* deeper levels are not inspected */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);	/* cgroup id (kernfs node id == directory inode) */
	__type(value, u8);
} be_cgroups SEC(".maps");

/*
 * A task's fields and cgroups, read with plain loads, not BPF_CORE_READ().
 * BPF_CORE_READ() makes one bpf_probe_read_kernel() call per pointer it
 * follows; through the BTF-typed task pointers these programs get, the
 * verifier checks a plain load at load time and makes it fault-safe
 * (PROBE_MEM: a bad pointer reads 0), with the same CO-RE relocation of the
 * offsets, for a fraction of the cost. These run several times per wakeup.
 *
 * What the policies remember per task is keyed by these numbers (ids,
 * serial numbers), not by pointers: a pointer read this way stays a pointer
 * to the verifier, while a key is a number.
 *
 * The ancestor walks below keep probe reads: they index ancestors[] by a
 * variable, which the verifier refuses on a typed pointer, and they run only
 * when a cache misses.
 */

/* The task's cgroup v2 cgroup id (kernfs node id, the directory's inode number; never reused); 0 if unreadable. */
static __always_inline u64 task_cgid(struct task_struct *p)
{
	return p->cgroups->dfl_cgrp->kn->id;
}

/* Its cpu task group's css serial number (unique for the boot, never reused); 0 if none. */
static __always_inline u64 task_tg_serial(struct task_struct *p)
{
	return p->sched_task_group->css.serial_nr;
}

/* cpu.idle=1 on the task's cpu cgroup or an ancestor. */
static __always_inline bool tier_tg_idle(struct task_struct *p)
{
	struct task_group *tg;
	int i;

	if (!bpf_core_field_exists(struct task_group, idle))
		return false;
	/*
	 * bpf_for (an open-coded iterator), not a constant-bound loop: the
	 * verifier checks the body once instead of once per level, which keeps
	 * load time down (this runs inlined in several callbacks).
	 */
	tg = p->sched_task_group;
	bpf_for(i, 0, SCHEDBE_MAX_CGRP_DEPTH) {
		if (!tg)
			break;
		if (tg->idle)
			return true;
		tg = tg->parent;
	}
	return false;
}

/*
 * The id of the outermost ancestor-or-self (not the root) of @p's cgroup v2
 * cgroup that is a key of the cgroup-id-keyed @map; 0 if none. Shared by
 * every map of cgroups a policy is given (BE paths here, LLF's sandboxes).
 */
static __always_inline u64 cgrp_outermost_in(struct task_struct *p, void *map)
{
	struct cgroup *cgrp, *anc;
	int level, i;
	u64 id;

	cgrp = BPF_CORE_READ(p, cgroups, dfl_cgrp);
	if (!cgrp)
		return 0;
	level = BPF_CORE_READ(cgrp, level);
	bpf_for(i, 1, SCHEDBE_MAX_CGRP_DEPTH) {
		if (i > level)
			break;
		anc = NULL;
		if (bpf_probe_read_kernel(&anc, sizeof(anc), &cgrp->ancestors[i]) || !anc)
			break;
		id = BPF_CORE_READ(anc, kn, id);
		if (bpf_map_lookup_elem(map, &id))
			return id;
	}
	return 0;
}

/* The task's cgroup v2 cgroup or an ancestor (not the root) is a configured BE path. */
static __always_inline bool tier_cgroup_listed(struct task_struct *p)
{
	return cgrp_outermost_in(p, &be_cgroups) != 0;
}

static __always_inline bool tier_task_is_be(struct task_struct *p)
{
	if (p->policy == SCHEDBE_SCHED_IDLE)
		return true;
	return tier_tg_idle(p) || tier_cgroup_listed(p);
}

#endif /* __SCHEDBE_TIER_BPF_H */
