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
};

/* Per-CPU counters, summed by userspace. Times in ns. */
struct cpu_stats {
	u64 lc_ns;		/* CPU time of LC tasks */
	u64 be_ns;		/* CPU time of BE tasks (guard slices included) */
	u64 lc_dispatches;	/* LC tasks taken from a shared LC queue */
	u64 lc_direct;		/* LC wakeups placed straight on an idle CPU */
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
	u64 starved_reports;	/* BE tasks reported to userspace as starved (park candidates) */
	u64 rt_evacuations;	/* local queues sent back to enqueue: an RT/DL task took the CPU */
	u64 rt_rescues;		/* local queues of CPUs held by RT/DL sent back from another CPU */
};

/* Per-cgroup LC runnable accounting: sum of runnable time x task weight. */
struct cgrp_acct {
	u64 runnable_wns;
};

#endif /* __SCHEDBE_INTF_H */
