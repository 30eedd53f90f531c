/* SPDX-License-Identifier: GPL-2.0 */
/*
 * RT/DL takeovers, for every schedbe policy. When an RT or deadline task
 * takes a CPU, what waits in that CPU's local queue would wait behind it for
 * the whole burst; it is sent back through ops.enqueue instead, which finds
 * it another CPU.
 *
 * Kernels before v6.19 say so through ops.cpu_release (the policy calls
 * rt_cpu_release() from it). v6.19 deprecates that callback and can
 * re-enqueue a local queue from any context, so there the sched_switch
 * tracepoint program below does it; userspace loads exactly one of the two
 * (evacuate_from_tp). On v7.1+ a CPU's tick also rescues tasks that landed in
 * another CPU's local queue just after an RT task took it (rescue_stranded).
 *
 * Lazy evacuation, built in where RT_LAZY_EVACUATION is 1 (SCHED_BE's
 * skeleton, a compiler flag set in build.rs), with the tick's rescue
 * available: a takeover leaves the preempted task where it is unless the
 * policy says otherwise (rt_evacuate_anyway()) or some CPU is idle and the
 * RT/DL task's last burst was long (at least SCHEDBE_RT_LONG_NS). Most RT
 * bursts (an RT client's send, a kernel thread) last tens of microseconds,
 * and sending the preempted task away costs two IRQ-work interrupts (the
 * deferred re-enqueue, then ops.enqueue's kick of the idle CPU), a wake-up
 * IPI and a migration each time (docs/design.md, "Failure behaviour"). A
 * burst that lasts anyway is cut short for what waits behind it after
 * SCHEDBE_RT_STRAND_NS: by the tick of any busy CPU (rescue_stranded()), by
 * the RT CPU's own tick (rt_strand_check(), for when every other CPU is
 * idle and does not tick), and at once by a CPU that runs out of work
 * (rt_rescue_before_idle(), from the policy's ops.dispatch).
 *
 * Userspace chooses the path (rt_takeover.rs) and sets evacuate_from_tp.
 */
#ifndef __SCHEDBE_RT_TAKEOVER_BPF_H
#define __SCHEDBE_RT_TAKEOVER_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"	/* SCHEDBE_MAX_CPUS */
#include "policy.bpf.h"	/* STAT_FN() */

#ifndef RT_LAZY_EVACUATION
#define RT_LAZY_EVACUATION 0
#endif

/* Needs from the policy (RT_TAKEOVER_STATS defines them over its my_stats()): */
/* add @v to this CPU's counters rt_evacuations and rt_rescues */
static __always_inline void stat_rt_evacuations(u64 v);
static __always_inline void stat_rt_rescues(u64 v);
#if RT_LAZY_EVACUATION
/*
 * Must a takeover evacuate at once anyway? SCHED_BE: once any task was BE,
 * since a task left behind the RT burst while another CPU runs BE would be
 * LC waiting below BE; evacuated, it preempts that BE.
 */
static __always_inline bool rt_evacuate_anyway(void);
#endif

#define RT_TAKEOVER_STATS STAT_FN(rt_evacuations) STAT_FN(rt_rescues)

/*
 * Set by userspace on kernels that re-enqueue a local queue from any context
 * (v6.19+), where ops.cpu_release is deprecated: userspace then leaves
 * cpu_release out and the sched_switch program below does its job.
 */
const volatile bool evacuate_from_tp = false;

/* Is a task stranded in a foreign local queue rescued here (v7.1+, tracepoint path)? */
static __always_inline bool rescue_available(void)
{
	/* the tracepoint path tracks rt_cpus; v7.1's kfunc empties a foreign local queue */
	return evacuate_from_tp && __COMPAT_has_generic_reenq();
}

/* prio below MAX_RT_PRIO: RT, DL, stop, or a task PI-boosted into RT. */
#define SCHEDBE_MAX_RT_PRIO	100
/* An RT/DL task that has held a CPU this long is not about to leave it. */
#define SCHEDBE_RT_STRAND_NS	(1000ULL * 1000)
/*
 * Lazy evacuation: an RT/DL task whose last burst lasted this long is
 * expected to hold the CPU long again, so what it preempts goes to an idle
 * CPU at once. Shorter, waiting costs less than moving, which has a cost of
 * its own (interrupts, a migration; docs/design.md, "Failure behaviour").
 */
#define SCHEDBE_RT_LONG_NS	(250ULL * 1000)

/* What a CPU runs, as the sched_switch program saw it last; tracepoint path only. */
struct rt_cpu {
	u64 since;	/* since when an RT/DL task runs there (0: none) */
	u32 reenqs;	/* its local queue's re-enqueues in this RT/DL span (rt_reenq_allowed()) */
	bool idle;	/* it runs its idle task */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCHEDBE_MAX_CPUS);
	__type(key, u32);
	__type(value, struct rt_cpu);
} rt_cpus SEC(".maps");

static s32 nr_rt_cpus;		/* CPUs with since set */
static s32 nr_idle_cpus;	/* CPUs with idle set (a CPU idle since before the attach is missed until it next idles) */

#if RT_LAZY_EVACUATION
/*
 * The length of the last burst (an RT/DL span of a CPU) that ended with
 * this task, kept only for tasks that had a long one: no entry, no lookup
 * cost at the next start beyond the miss, and a short guess.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, u64);
} rt_last_burst SEC(".maps");

/* @p ends a CPU's RT/DL span of @span_ns: remember it for its next takeover */
static __always_inline void rt_burst_ended(struct task_struct *p, u64 span_ns)
{
	bool is_long = span_ns >= SCHEDBE_RT_LONG_NS;
	u64 *last = bpf_task_storage_get(&rt_last_burst, p, 0, is_long ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);

	if (last)
		*last = span_ns;
}

static __always_inline bool rt_burst_long(struct task_struct *p)
{
	u64 *last = bpf_task_storage_get(&rt_last_burst, p, 0, 0);

	return last && *last >= SCHEDBE_RT_LONG_NS;
}
#endif

/*
 * Send a local queue away as @next, an RT/DL task, takes its CPU (see the
 * header)? "Some CPU is idle" is this program's own count, not the kernel's
 * idle cpumask: scx_bpf_get_idle_cpumask() from a tracepoint aborts the
 * scheduler while built-in idle tracking is off (as the scheduler is
 * enabled or disabled).
 */
static __always_inline bool evacuate_now(struct task_struct *next)
{
#if RT_LAZY_EVACUATION
	return !rescue_available() || rt_evacuate_anyway() || (nr_idle_cpus > 0 && rt_burst_long(next));
#else
	return true;
#endif
}

/*
 * A task that cannot leave a CPU stays in its local queue however often
 * that is re-enqueued: the kernel does not call ops.enqueue for a task with
 * migration disabled, it puts it straight back. The kernel (7.3) aborts
 * the scheduler when a task is re-enqueued 257 times without running
 * (SCX_EV_REENQ_REPEAT): a thread inside a BPF map batch syscall, preempted
 * by a long RT burst, would be sent back at every tick of another CPU
 * (docs/design.md, "Failure behaviour"). So a CPU's local queue is
 * re-enqueued at most this many times in one RT/DL span; past that, what
 * lands there waits out the burst. A span ends with the CPU running its
 * queue, the stuck task first.
 */
#define SCHEDBE_RT_REENQ_MAX	64

static __always_inline bool rt_reenq_allowed(struct rt_cpu *c)
{
	return !c || __sync_fetch_and_add(&c->reenqs, 1) < SCHEDBE_RT_REENQ_MAX;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(schedbe_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	u32 cpu = bpf_get_smp_processor_id();
	bool rt = next->prio < SCHEDBE_MAX_RT_PRIO;
	bool idle = next->pid == 0;	/* the idle task, pid 0 on every CPU */
	struct rt_cpu *c;

	if (!evacuate_from_tp || !(c = bpf_map_lookup_elem(&rt_cpus, &cpu)))
		return 0;
	if (rt != (c->since != 0)) {
		u64 now = bpf_ktime_get_ns();

		/* the span ends with @prev, the last RT/DL task to run in it */
#if RT_LAZY_EVACUATION
		if (!rt)
			rt_burst_ended(prev, now - c->since);
#endif
		c->since = rt ? now : 0;
		if (rt)
			c->reenqs = 0;
		__sync_fetch_and_add(&nr_rt_cpus, rt ? 1 : -1);
	}
	/* written only on a change: the count's line is shared by every CPU */
	if (RT_LAZY_EVACUATION && idle != c->idle) {
		c->idle = idle;
		__sync_fetch_and_add(&nr_idle_cpus, idle ? 1 : -1);
	}
	if (rt && scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) && evacuate_now(next) && rt_reenq_allowed(c) &&
	    !scx_bpf_reenqueue_local_from_anywhere())
		stat_rt_evacuations(1);
	return 0;
}

/* Has an RT/DL task held the CPU of @c for @min_ns or more (0: at all) by @now? */
static __always_inline bool rt_held_for(struct rt_cpu *c, u64 now, u64 min_ns)
{
	return c && c->since && (!min_ns || now - c->since >= min_ns);
}

/*
 * The evacuation above misses a task that lands in the local queue just
 * after the switch: an entry check that claimed the CPU a moment before the
 * RT task took it. That task would wait for the whole RT burst. So every
 * tick, a CPU sends back the local queues of
 * CPUs an RT/DL task has held for over SCHEDBE_RT_STRAND_NS. A foreign local
 * queue can be re-enqueued only with the generic kfunc of v7.1+; before, the
 * task waits until the RT task leaves (or the kernel's own server runs it).
 */
static void rescue_held_for(u32 self, u64 now, u64 min_ns)
{
	struct rt_cpu *c;
	u32 i;

	if (nr_rt_cpus <= 0 || !rescue_available())
		return;
	bpf_for(i, 0, scx_bpf_nr_cpu_ids()) {
		if (i == self || i >= SCHEDBE_MAX_CPUS)
			continue;
		c = bpf_map_lookup_elem(&rt_cpus, &i);
		if (!rt_held_for(c, now, min_ns))
			continue;
		if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | i) && rt_reenq_allowed(c)) {
			scx_bpf_dsq_reenq(SCX_DSQ_LOCAL_ON | i, 0);
			stat_rt_rescues(1);
		}
	}
}

static __always_inline void rescue_stranded(u32 self, u64 now)
{
	rescue_held_for(self, now, SCHEDBE_RT_STRAND_NS);
}

/*
 * Lazy evacuation (RT_LAZY_EVACUATION): this CPU found nothing to run and
 * is about to go idle, where it would not tick; a task left in the local
 * queue of a CPU an RT/DL task holds is sent back now, whatever the burst's
 * length so far, and lands here through ops.enqueue's idle pick.
 */
static __always_inline void rt_rescue_before_idle(u32 self)
{
	if (RT_LAZY_EVACUATION && nr_rt_cpus > 0)
		rescue_held_for(self, 0, 0);
}

#if RT_LAZY_EVACUATION
/*
 * Lazy evacuation's backstop on the RT CPU itself: at its scheduler tick
 * while an RT/DL task runs there, a local queue that the task has kept
 * waiting for over SCHEDBE_RT_STRAND_NS is sent back. The other CPUs'
 * ticks do the same (rescue_stranded()), but an idle CPU does not tick, and
 * the takeover evacuates at once only for a task known to hold CPUs long.
 *
 * Where the kernel's BTF has them, the hooks are the RT and deadline
 * classes' own task_tick (fentry), which run only at a tick of a CPU an
 * RT/DL task holds: a few calls a second, where the tracepoint below runs at
 * every timer expiry of every CPU (docs/design.md, "Failure behaviour").
 * The tick's rq lock is held there, as at sched_switch, where
 * the same re-enqueue runs. Userspace loads the fentry pair, or else the
 * tracepoint (rt_takeover.rs). A nohz_full CPU running a lone SCHED_FIFO
 * task may stop its tick; the other CPUs' ticks and their way to idle
 * (rt_rescue_before_idle()) still rescue.
 */
static __always_inline void rt_strand_check(void)
{
	u32 cpu;
	struct rt_cpu *c;

	if (nr_rt_cpus <= 0)	/* the common case: one load */
		return;
	cpu = bpf_get_smp_processor_id();
	c = bpf_map_lookup_elem(&rt_cpus, &cpu);
	if (!rt_held_for(c, bpf_ktime_get_ns(), SCHEDBE_RT_STRAND_NS))
		return;
	if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) && rt_reenq_allowed(c) && !scx_bpf_reenqueue_local_from_anywhere())
		stat_rt_rescues(1);
}

/* No argument is read: the prototypes are no part of this. */
SEC("?fentry/task_tick_rt")
int BPF_PROG(schedbe_rt_strand_rt)
{
	rt_strand_check();
	return 0;
}

SEC("?fentry/task_tick_dl")
int BPF_PROG(schedbe_rt_strand_dl)
{
	rt_strand_check();
	return 0;
}

/* The fallback, at every timer expiry (any of them may be the RT CPU's tick). */
SEC("?tp_btf/hrtimer_expire_entry")
int BPF_PROG(schedbe_rt_strand_tick)
{
	rt_strand_check();
	return 0;
}
#endif

/*
 * Does an RT/DL task hold @cpu (tracepoint path; false before v6.19, where
 * it is not tracked)? A task that can run only there and is put in its local
 * queue meanwhile would be sent back at every tick by rescue_stranded(), to
 * land there again: a policy asks this first and queues it elsewhere.
 */
static __always_inline bool rt_holds(s32 cpu)
{
	u32 key = cpu;
	struct rt_cpu *c;

	if (nr_rt_cpus <= 0)	/* the common case: no lookup */
		return false;
	c = bpf_map_lookup_elem(&rt_cpus, &key);
	return c && c->since;
}

/* ops.cpu_release (kernels before v6.19): an RT/DL task took this CPU. */
static __always_inline void rt_cpu_release(void)
{
	if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL))
		stat_rt_evacuations(1);
	scx_bpf_reenqueue_local();
}

/*
 * An RT/DL task took the CPU: what waits in its local queue would wait
 * behind it, so it goes back through ops.enqueue, which finds it another
 * CPU. Kernels before v6.19 say so through ops.cpu_release; newer ones
 * deprecate that callback, and the sched_switch program above does it
 * instead (userspace loads one of the two).
 */
#define RT_CPU_RELEASE_OP(name)								\
void BPF_STRUCT_OPS(name, s32 cpu, struct scx_cpu_release_args *args)			\
{											\
	rt_cpu_release();								\
}

#endif /* __SCHEDBE_RT_TAKEOVER_BPF_H */
