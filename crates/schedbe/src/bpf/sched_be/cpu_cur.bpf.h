/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What each CPU runs, readable by the other CPUs: the entry check's kick
 * time, the LC task's virtual time (LC wakeup preemption, lc_place.bpf.h)
 * and its reservation slot (resv.bpf.h).
 */
#ifndef __SCHEDBE_CPU_CUR_BPF_H
#define __SCHEDBE_CPU_CUR_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"	/* SCHEDBE_MAX_CPUS */

/*
 * Per CPU, readable by the others: when an entry-check kick was sent to it
 * (0: none pending), and what it runs (for LC wakeup preemption).
 */
struct cpu_cur {
	u64 kick_at;
	u64 vtime;		/* the running task's vtime when it started */
	u64 started_at;
	u64 weight;		/* its nice weight (~ its vtime rate) */
	u64 burst_avg;		/* its average burst (lc_burst.bpf.h); 0: it never slept */
	u64 burst_ran;		/* what it had run of its current burst when it started */
	u64 resv_claim;		/* when a reservation wakeup claimed it as its victim; 0: none (resv.bpf.h) */
	u32 resv_slot;		/* the running LC task's reservation slot; 0: none */
	s32 pid;		/* the LC task ops.running last started here (stale once it stopped) */
	u8 tier;		/* TIER_LC, TIER_BE; TIER_NONE while offline */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCHEDBE_MAX_CPUS);
	__type(key, u32);
	__type(value, struct cpu_cur);
} cpu_curs SEC(".maps");

static __always_inline struct cpu_cur *cpu_cur(s32 cpu)
{
	u32 key = cpu;

	return bpf_map_lookup_elem(&cpu_curs, &key);
}

#endif /* __SCHEDBE_CPU_CUR_BPF_H */
