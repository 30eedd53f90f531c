/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Interface between the tracer's BPF side (trace.bpf.c) and its userspace
 * (src/decode.rs reads the records, src/run.rs sets the rodata). Plain C
 * types only: bindgen turns this header into Rust (trace_intf.rs) without
 * vmlinux.h.
 */
#ifndef __SCHEDBE_TRACE_INTF_H
#define __SCHEDBE_TRACE_INTF_H

/*
 * Allowed-CPU mask words an event can carry: 16 x 64 = 1024 CPUs. Userspace
 * sets mask_words = ceil(nr_cpu_ids / 64) (capped here), so a 2..64 CPU machine
 * pays 8 bytes per mask. CPUs >= 1024 are treated as allowed for every task.
 */
#define TRACE_MASK_WORDS	16
/* Bytes before mask[]: an event is TRACE_EVENT_HDR_SIZE + 8 * nr_words long. */
#define TRACE_EVENT_HDR_SIZE	40
#define TRACE_COMM_LEN		16

enum sbt_event_type {
	TEV_SWITCH		= 1,	/* sched_switch: prev_pid -> pid on cpu */
	TEV_WAKING		= 2,	/* sched_waking(pid) */
	TEV_WAKEUP		= 3,	/* sched_wakeup(pid, aux = task_cpu): enqueued; no tier/mask */
	TEV_WAKEUP_NEW		= 4,	/* sched_wakeup_new(pid) */
	TEV_MIGRATE		= 5,	/* sched_migrate_task(pid, aux = dest cpu) */
	TEV_INIT_CURR		= 6,	/* snapshot: pid is rq->curr of cpu aux */
	TEV_INIT_RUNNABLE	= 7,	/* snapshot: pid is queued, not running, on cpu aux */
	TEV_TIMER		= 8,	/* pid's sleep timer fired, aux = its lateness in ns (capped) */
	TEV_ABSENT		= 9,	/* cpu ran nothing for aux ns before ts (capped): see trace.bpf.c */
};

enum sbt_tier {
	TT_LC		= 0,
	TT_BE		= 1,
	TT_OTHER	= 2,	/* SCHED_FIFO / SCHED_RR / SCHED_DEADLINE: above both tiers */
	TT_IDLE		= 3,	/* the per-CPU idle task (pid 0) */
	TT_UNKNOWN	= 255,	/* not computed for this event (not needed) */
};

enum sbt_event_flags {
	TEVF_PREV_RUNNABLE	= 1,	/* SWITCH: prev stays runnable (preempted / yielded) */
	TEVF_PREV_DEAD		= 2,	/* SWITCH: prev exited (TASK_DEAD) */
};

struct sbt_event {
	unsigned long long	ts;		/* bpf_ktime_get_ns() == CLOCK_MONOTONIC */
	unsigned int		cpu;		/* CPU the event happened on */
	unsigned int		pid;		/* the task (SWITCH: next) */
	unsigned int		prev_pid;	/* SWITCH: prev */
	unsigned char		type;		/* enum sbt_event_type */
	unsigned char		tier;		/* enum sbt_tier of pid */
	unsigned char		prev_tier;	/* SWITCH: tier of prev (only when runnable) */
	unsigned char		flags;		/* enum sbt_event_flags */
	unsigned int		nr_words;	/* mask words present in mask[] */
	unsigned int		aux;		/* MIGRATE: dest cpu; wakeups, INIT_*: task_cpu(); TIMER: ns late; ABSENT: ns; <= 2^32 - 1 */
	/*
	 * cgroup v2 id (kernfs node id == directory inode) of pid, recorded only
	 * with record_cgroup (--cgroup) and only for SWITCH (next), WAKING,
	 * WAKEUP_NEW, INIT_CURR, INIT_RUNNABLE and TIMER; 0 otherwise.
	 */
	unsigned long long	cgid;
	/* allowed CPUs of pid (SWITCH: of prev, when runnable), CPU i = bit i % 64 of word i / 64 */
	unsigned long long	mask[TRACE_MASK_WORDS];
};

struct sbt_comm {
	char comm[TRACE_COMM_LEN];
};

#endif /* __SCHEDBE_TRACE_INTF_H */
