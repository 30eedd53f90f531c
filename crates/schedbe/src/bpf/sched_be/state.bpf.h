/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The SCHED_BE policy's state that its parts share (sched_be.bpf.c and the
 * headers of this folder): the tunables userspace sets before load, the two
 * tiers' clocks and queues, the CPUs running BE, and the per-CPU counters.
 */
#ifndef __SCHED_BE_STATE_BPF_H
#define __SCHED_BE_STATE_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "../common/policy.bpf.h"

/* Tunables, set by userspace before load: the machine's LLCs, */
const volatile u32 nr_llcs = 1;
const volatile u32 cpu_llc[SCHEDBE_MAX_CPUS];	/* CPU -> LLC index */
const volatile u32 llc_nr_cpus[SCHEDBE_MAX_LLCS];	/* LLC index -> its CPUs at load */
/* the slices, the sleeper floor, the starvation guard. */
const volatile u64 lc_slice_ns = 5ULL * 1000 * 1000;
/* the most virtual-time credit an LC sleeper keeps (the sleeper floor) */
const volatile u64 lc_wake_credit_ns = 5ULL * 1000 * 1000;
const volatile u64 be_slice_ns = 20ULL * 1000 * 1000;
const volatile u64 guard_slice_ns = 2ULL * 1000 * 1000;
const volatile u64 starvation_limit_ns = 5ULL * 1000 * 1000 * 1000;
const volatile u64 guard_interval_ns = 50ULL * 1000 * 1000;

/* Virtual-time clocks of the two tiers. */
static u64 lc_vtime_now, be_vtime_now;

/* CPUs currently running a BE task. */
private(SCHEDBE) struct bpf_cpumask __kptr *be_cpus;

PERCPU_STATS_DEFINE(struct cpu_stats)

enum { TIER_LC = 0, TIER_BE = 1, TIER_NONE = 2 };

static __always_inline u32 llc_of(s32 cpu)
{
	if (cpu < 0 || cpu >= SCHEDBE_MAX_CPUS)
		return 0;
	return cpu_llc[cpu] < nr_llcs ? cpu_llc[cpu] : 0;
}

static __always_inline u64 lc_dsq(u32 llc) { return SCHEDBE_LC_DSQ_BASE + llc; }
static __always_inline u64 be_dsq(u32 llc) { return SCHEDBE_BE_DSQ_BASE + llc; }

#endif /* __SCHED_BE_STATE_BPF_H */
