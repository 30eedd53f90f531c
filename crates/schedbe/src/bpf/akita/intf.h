/* SPDX-License-Identifier: GPL-2.0 */
/* Types and constants shared by the Akita policy (akita.bpf.c) and userspace (akita/runtime.rs). */
#ifndef __AKITA_INTF_H
#define __AKITA_INTF_H

#include "../common/intf_types.h"

enum akita_consts {
	AKITA_MAX_CPUS		= 1024,
	/* periodic servers (vCPUs) in all VMs; one dispatch queue each */
	AKITA_MAX_SERVERS	= 1024,
	/* servers placed on one CPU (the EDF-VD test keeps this small) */
	AKITA_MAX_PER_CPU	= 32,
	/* DSQ ids: server s queues in AKITA_SERVER_DSQ_BASE + s */
	AKITA_SERVER_DSQ_BASE	= 0,
	AKITA_HOST_DSQ		= 1 << 16,
	AKITA_BE_DSQ		= (1 << 16) + 1,
	/* CPU modes */
	AKITA_MODE_LO		= 0,
	AKITA_MODE_HI		= 1,
	/* what a CPU runs, best first (enqueue compares against it to preempt) */
	AKITA_RANK_HI_ACTIVE	= 0,	/* an active HI vCPU while the CPU is in HI mode */
	AKITA_RANK_ACTIVE	= 1,	/* an active vCPU (any, in LO mode; LO, in HI mode) */
	AKITA_RANK_HOST		= 2,	/* a task in no VM */
	AKITA_RANK_INACTIVE	= 3,	/* a vCPU out of budget (work conservation) */
	AKITA_RANK_BE		= 4,
	AKITA_RANK_IDLE		= 5,
};

/* A periodic server (one vCPU), written by userspace. */
struct akita_server_conf {
	u64 budget_ns;		/* per period: C_pes for HI, C_opt for LO (section 3.2) */
	u64 c_opt_ns;		/* a HI vCPU that used this and is still runnable switches its CPU to HI mode */
	u64 period_ns;		/* T */
	u64 rel_deadline_ns;	/* x*T for HI, T for LO (equation 5, x of the server's CPU) */
	u32 cpu;		/* its CPU (first-fit placement) */
	u32 vm;			/* index of its VM in userspace's table (stats) */
	u32 gen;		/* bumped by userspace whenever this slot gets a new server */
	u8 hi;
	u8 valid;
};

/* The servers placed on one CPU, written by userspace. */
struct akita_cpu_conf {
	u32 nr;
	u16 servers[AKITA_MAX_PER_CPU];
};

/* A VM cgroup (or a libvirt vcpuK cgroup): its tasks belong to servers base .. base+nr-1. */
struct akita_vm_cgrp {
	u32 base;
	u32 nr;			/* >1: thread tid goes to server base + tid % nr; 0: vcpus = "threads", by vm_threads */
};

/* A server's run-time state and counters, written by BPF only (on the server's CPU). */
struct akita_server_run {
	u32 gen;		/* the akita_server_conf.gen this state is for */
	u32 temperature;	/* HI: > 0 while it recently needed C_pes (section 3.3) */
	u64 period_start;	/* start of the current period (periods follow a fixed grid) */
	u64 deadline;		/* absolute (virtual, for HI) deadline of the current period */
	u64 used_ns;		/* CPU time in the current period */
	u64 avg_used_ns;	/* CPU time per period, averaged over ~8 periods (ties among equal deadlines) */
	u64 exhausted_at;	/* when it ran out of budget while runnable, this period; 0: not */
	u64 last_run;		/* when it last stopped: inactive servers take turns, oldest first */
	u8 overran;		/* HI: used C_opt this period and was still runnable */
	u8 pad[3];
	u32 queued;		/* tasks in its queue when its CPU last looked (userspace drains removed servers by it) */
	/* counters since load */
	u64 active_ns;		/* ran within its budget */
	u64 slack_ns;		/* ran out of budget, on time no active vCPU or host task wanted */
	u64 throttled_ns;	/* runnable, out of budget, until the period ended (closed periods) */
	u64 nr_periods;		/* periods in which it ran */
	u64 nr_throttled;	/* periods in which it ran out of budget while runnable */
	u64 overruns;		/* HI: periods in which it needed more than C_opt */
	u64 cal_sum_ns;		/* CPU access latency: wakeup -> running */
	u64 cal_n;
	u64 cal_max_ns;
	u64 cal_over_period;	/* wakeups that waited longer than the period */
};

/* A CPU's mode and counters, written by BPF only. */
struct akita_cpu_run {
	u32 mode;		/* AKITA_MODE_* */
	u32 cur_rank;		/* AKITA_RANK_* of what runs now */
	u64 cur_deadline;	/* deadline of the running active vCPU */
	u64 next_event;		/* earliest period end of a queued inactive server; 0: none */
	u64 hi_since;		/* when it entered HI mode */
	u64 mode_switches;	/* LO -> HI */
	u64 hi_ns;		/* time in HI mode (closed spans) */
	u64 host_ns;		/* CPU time of tasks in no VM */
	u64 be_ns;		/* CPU time of BE tasks */
	u64 be_guards;		/* BE or host tasks run by the starvation guard */
	u64 host_last;		/* when it last ran a host task (or looked for one to guard) */
	u64 be_walk_next;	/* when it may next walk the BE queue (be_walk) */
	u64 starved_reports;	/* parking: starved BE tasks reported from here */
	u64 be_rescues;		/* queued BE tasks run here because they must (dying, freezing) */
	u64 rt_evacuations;	/* its local queue sent back when an RT/DL task took it (rt_takeover.bpf.h) */
	u64 rt_rescues;		/* other CPUs' local queues stranded behind RT/DL tasks, sent back from here */
};

#endif /* __AKITA_INTF_H */
