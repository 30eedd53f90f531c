/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Types and constants that the shared parts (common/) share with userspace,
 * whatever the policy: queue ids and array sizes, cpu.max's slots, parking's
 * threshold. SCHED_BE's intf.h includes this header, so the Rust side reads
 * all of it in bpf_intf.rs.
 *
 * One enum, schedbe_consts, for every size and queue id range of SCHED_BE
 * and the shared parts: the ranges are seen side by side (cpu.max's holding
 * queues must not meet a policy's queues), and userspace reads them under
 * one name.
 */
#ifndef __SCHEDBE_COMMON_INTF_H
#define __SCHEDBE_COMMON_INTF_H

#include "intf_types.h"

enum schedbe_consts {
	SCHEDBE_MAX_CPUS	= 1024,
	SCHEDBE_MAX_LLCS	= 64,
	/* DSQ ids: one LC and one BE queue per LLC */
	SCHEDBE_LC_DSQ_BASE	= 0,
	SCHEDBE_BE_DSQ_BASE	= 1 << 16,
	/* fixed-point 1.0 for per-cgroup weight factors */
	SCHEDBE_FACTOR_ONE	= 1 << 16,
	/* parking: "starved" is under 1/SCHEDBE_STARVED_DIV of the time on a CPU */
	SCHEDBE_STARVED_DIV	= 32,
	/* cpu.max (cpumax.bpf.h): cgroups with a slot, limited levels per task, holding queues */
	SCHEDBE_BW_MAX_SLOTS	= 4096,
	SCHEDBE_BW_MAX_DEPTH	= 8,	/* a power of two: indexes are masked */
	SCHEDBE_BW_DSQ_BASE	= 2 << 16,
	/* reservations (resv.bpf.h): cgroups with an entitlement slot (slot 0: none) */
	SCHEDBE_RESV_MAX_SLOTS	= 4096,
};

/* cpu.max of one slot, written by userspace (and ops.cgroup_set_bandwidth). */
struct bw_conf {
	u64 cgid;		/* the cgroup this slot is for */
	u64 quota_ns;		/* 0: no limit */
	u64 period_ns;
	u64 burst_ns;
};

/* Per-slot throttling counters, as cgroup cpu.stat reports them for CFS. */
struct bw_stat {
	u64 nr_periods;		/* periods in which the cgroup ran or stayed throttled */
	u64 nr_throttled;	/* times it was throttled */
	u64 throttled_ns;	/* time spent throttled (closed spans) */
	u64 throttled_since;	/* start of the current throttled span; 0: not throttled */
	u64 usage_ns;		/* CPU time charged */
	u64 conc_waits;		/* concurrency mode: times a task was passed over, its cgroup on its cap */
};

#endif /* __SCHEDBE_COMMON_INTF_H */
