/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Types and constants shared by the SCHED_BE policy (sched_be.bpf.c) and
 * userspace; what every policy shares with it is in common/intf.h.
 */
#ifndef __SCHEDBE_INTF_H
#define __SCHEDBE_INTF_H

#include "../common/intf.h"

/*
 * Reservations (resv.bpf.h): what one cgroup is entitled to, written by
 * userspace's flattening pass. CPUs x 1000.
 */
struct resv_ent {
	u32 claim_milli;	/* it may preempt while one more CPU keeps it within this */
	u32 fair_milli;		/* it may be preempted while it runs on more than this */
};

/* Per-CPU counters, summed by userspace. Times in ns. */
struct cpu_stats {
	u64 lc_ns;		/* CPU time of LC tasks */
	u64 be_ns;		/* CPU time of BE tasks (guard slices included) */
	u64 lc_dispatches;	/* LC tasks taken from a shared LC queue */
	u64 lc_direct;		/* LC wakeups placed straight on an idle CPU */
	u64 sync_unstacks;	/* sync wakeups sent to an idle CPU, not stacked on the waker's (lc_place.bpf.h) */
	u64 be_dispatches;	/* BE tasks taken from a BE queue */
	u64 preempt_be;		/* entry check: LC wakeup preempted a CPU running BE */
	u64 kick_idle;		/* LC/BE enqueue woke an idle CPU */
	u64 kick_lat_ns;	/* sum of entry-check latencies: kick sent -> LC running there */
	u64 kick_lat_n;
	u64 exit_takes;		/* exit check: a CPU that would run BE took a waiting LC task */
	u64 running_yields;	/* BE gave its CPU back as it started: LC was queued (race closed) */
	u64 tick_yields;	/* backstop: BE yielded at a tick because LC was queued */
	u64 guard_slices;	/* starvation guard: BE slices given while LC was runnable */
	u64 guard_ns;		/* CPU time those guard slices took from LC */
	u64 requeued_lc;	/* queued BE tasks found to be LC now (cpu.idle=0, moved, killed) */
	u64 freeze_boosts;	/* BE tasks run as LC so they reach the freezer trap (parking) */
	u64 rcu_boosts;		/* tasks preempted in an RCU read-side section, queued at the front (any tier) */
	u64 starved_reports;	/* BE tasks reported to userspace as starved (park candidates) */
	u64 rt_evacuations;	/* local queues sent back to enqueue: an RT/DL task took the CPU */
	u64 rt_rescues;		/* local queues of CPUs held by RT/DL sent back from another CPU */
	u64 bw_holds;		/* cpu.max: tasks put in a throttled cgroup's holding queue */
	u64 bw_releases;	/* cpu.max: held tasks released at a period boundary */
	u64 bw_restarts;	/* cpu.max: a slot's limit (re)started with a full quota */
	u64 bw_forgiven_ns;	/* cpu.max: overrun forgiven (debt beyond BW_MAX_THROTTLE_NS) */
	u64 bw_unthrottles;	/* cpu.max: throttled cgroups released by their timer */
	u64 bw_late_ns;		/* cpu.max: summed lateness of the timer at those releases (firing past when due) */
	u64 bw_conc_yields;	/* concurrency mode: a task got a CPU without its cgroups' tokens and gave it back */
	u64 lc_preempt;		/* LC wakeup preempted an LC task that had run its share (no CPU idle or BE) */
	u64 resv_preempt;	/* LC wakeup of a cgroup within its claim preempted one above its fair share */
	u64 lc_preempt_local;	/* of lc_preempt: the CPU the wakeup ran on (no IPI) */
	u64 lc_preempt_later;	/* LC wakeup: the task it may preempt once that has run lc_preempt_min_ns, timed to then */
};

/* Per-cgroup LC runnable accounting: sum of runnable time x task weight. */
struct cgrp_acct {
	u64 runnable_wns;
};

#endif /* __SCHEDBE_INTF_H */
