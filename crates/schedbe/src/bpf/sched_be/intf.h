/* SPDX-License-Identifier: GPL-2.0 */
/* Types and constants shared by the BPF policy (main.bpf.c) and userspace. */
#ifndef __SCHEDBE_INTF_H
#define __SCHEDBE_INTF_H

#ifndef __VMLINUX_H__
typedef unsigned long long u64;
typedef unsigned int u32;
#endif

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

/* Per-cgroup LC runnable accounting: sum of runnable time x task weight. */
struct cgrp_acct {
	u64 runnable_wns;
};

#endif /* __SCHEDBE_INTF_H */
