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
 * With RT_LAZY_EVACUATION defined to 1 by the includer (SCHED_BE, which then
 * defines rt_evacuate_anyway()) and the tick's rescue available, the
 * sched_switch program evacuates at once only when some CPU is idle, which
 * then takes the task straight away, or the includer says so. With every
 * CPU busy the task stays where it is: most RT bursts (an RT client's
 * send, a kernel thread) last tens of microseconds, and sending the
 * preempted task away costs an IRQ-work interrupt and a migration each time
 * (docs/overhead.md, 2026-12-02); busy CPUs tick, so a longer burst is
 * rescued by rescue_stranded() after SCHEDBE_RT_STRAND_NS, and a CPU that
 * runs out of work rescues it at once (rt_rescue_before_idle(), from the
 * policy's ops.dispatch).
 *
 * The includer defines STAT_ADD(field, v) over its per-CPU counters (with
 * rt_evacuations and rt_rescues) and the rodata flag evacuate_from_tp;
 * userspace chooses the path (rt_takeover.rs).
 */
#ifndef __SCHEDBE_RT_TAKEOVER_BPF_H
#define __SCHEDBE_RT_TAKEOVER_BPF_H

#ifndef RT_LAZY_EVACUATION
#define RT_LAZY_EVACUATION 0
#endif

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

/* What a CPU runs, as the sched_switch program saw it last; tracepoint path only. */
struct rt_cpu {
	u64 since;	/* since when an RT/DL task runs there (0: none) */
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
 * The includer's: must a takeover evacuate at once anyway? SCHED_BE: once
 * any task was BE, since a task left behind the RT burst while another CPU
 * runs BE would be LC waiting below BE; evacuated, it preempts that BE.
 */
static __always_inline bool rt_evacuate_anyway(void);
#endif

/*
 * Send a local queue away as an RT/DL task takes its CPU (see the header)?
 * "Some CPU is idle" is this program's own count, not the kernel's idle
 * cpumask: scx_bpf_get_idle_cpumask() from a tracepoint aborts the scheduler
 * while built-in idle tracking is off (as the scheduler is enabled or
 * disabled), as CI saw on 2026-12-02 (reverted in cf952a9).
 */
static __always_inline bool evacuate_now(void)
{
#if RT_LAZY_EVACUATION
	return !rescue_available() || rt_evacuate_anyway() || nr_idle_cpus > 0;
#else
	return true;
#endif
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
		c->since = rt ? bpf_ktime_get_ns() : 0;
		__sync_fetch_and_add(&nr_rt_cpus, rt ? 1 : -1);
	}
	/* written only on a change: the count's line is shared by every CPU */
	if (RT_LAZY_EVACUATION && idle != c->idle) {
		c->idle = idle;
		__sync_fetch_and_add(&nr_idle_cpus, idle ? 1 : -1);
	}
	if (rt && scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) && evacuate_now() &&
	    !scx_bpf_reenqueue_local_from_anywhere())
		STAT_ADD(rt_evacuations, 1);
	return 0;
}

/*
 * The evacuation above misses a task that lands in the local queue just
 * after the switch: an entry check that claimed the CPU a moment before the
 * RT task took it. That task would wait for the whole RT burst (seen: 324 ms
 * behind a 300 ms burst). So every tick, a CPU sends back the local queues of
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
		if (!c || !c->since || (min_ns && now - c->since < min_ns))
			continue;
		if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | i)) {
			scx_bpf_dsq_reenq(SCX_DSQ_LOCAL_ON | i, 0);
			STAT_ADD(rt_rescues, 1);
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
		STAT_ADD(rt_evacuations, 1);
	scx_bpf_reenqueue_local();
}

#endif /* __SCHEDBE_RT_TAKEOVER_BPF_H */
