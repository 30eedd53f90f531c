/* SPDX-License-Identifier: GPL-2.0 */
/* Types and constants shared by the LLF policy (llf.bpf.c) and userspace (llf/runtime.rs). */
#ifndef __LLF_INTF_H
#define __LLF_INTF_H

#include "../common/intf_types.h"

enum llf_consts {
	LLF_MAX_CPUS		= 1024,
	LLF_MAX_SANDBOXES	= 65536,
	LLF_LC_DSQ		= 0,
	LLF_BE_DSQ		= 1,
	/* a sandbox's load in the order key: CPUs x LLF_LOAD_ONE */
	LLF_LOAD_ONE		= 1 << 16,
};

/* Per-CPU counters, summed by userspace. */
struct llf_stats {
	u64 lc_dispatches;	/* LC tasks taken from the queue, least loaded sandbox first */
	u64 direct;		/* wakeups placed straight on an idle CPU */
	u64 floor_slices;	/* tasks of a heavy sandbox run by the floor (waited past floor_wait_ns) */
	u64 preempts;		/* a lighter sandbox's wakeup preempted a heavier one's task */
	u64 be_dispatches;
	u64 be_guards;		/* BE tasks run by the starvation guard */
	u64 kept;		/* a runnable task kept its CPU for another slice: nothing else could run there */
	u64 starved_reports;	/* parking: starved BE tasks reported (park_report.bpf.h) */
	u64 be_rescues;		/* queued BE tasks run because they must (dying, freezing) */
	u64 rt_evacuations;	/* local queues sent back when an RT/DL task took their CPU (rt_takeover.bpf.h) */
	u64 rt_rescues;		/* local queues stranded behind RT/DL tasks on other CPUs, sent back */
	/* cpu.max (cpumax.bpf.h) */
	u64 bw_holds;		/* tasks held because their cgroup was throttled */
	u64 bw_releases;	/* held tasks released at a period boundary */
	u64 bw_restarts;	/* a slot's limit (re)started with a full quota */
	u64 bw_forgiven_ns;	/* overrun forgiven (debt beyond BW_MAX_THROTTLE_NS) */
	u64 bw_unthrottles;
	u64 bw_late_ns;		/* how late the period timer fired, summed over unthrottles */
};

#endif /* __LLF_INTF_H */
