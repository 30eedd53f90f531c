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
 * The includer defines STAT_ADD(field, v) over its per-CPU counters (with
 * rt_evacuations and rt_rescues) and the rodata flag evacuate_from_tp;
 * userspace chooses the path (rt_takeover.rs).
 */
#ifndef __SCHEDBE_RT_TAKEOVER_BPF_H
#define __SCHEDBE_RT_TAKEOVER_BPF_H

/* Is a task stranded in a foreign local queue rescued here (v7.1+, tracepoint path)? */
static __always_inline bool rescue_available(void)
{
	/* the tracepoint path tracks rt_since; v7.1's kfunc empties a foreign local queue */
	return evacuate_from_tp && __COMPAT_has_generic_reenq();
}

/* prio below MAX_RT_PRIO: RT, DL, stop, or a task PI-boosted into RT. */
#define SCHEDBE_MAX_RT_PRIO	100
/* An RT/DL task that has held a CPU this long is not about to leave it. */
#define SCHEDBE_RT_STRAND_NS	(1000ULL * 1000)

/* CPU -> since when an RT/DL task runs there (0: none); tracepoint path only. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCHEDBE_MAX_CPUS);
	__type(key, u32);
	__type(value, u64);
} rt_since SEC(".maps");

static s32 nr_rt_cpus;	/* CPUs with rt_since set */

SEC("tp_btf/sched_switch")
int BPF_PROG(schedbe_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	u32 cpu = bpf_get_smp_processor_id();
	bool rt = next->prio < SCHEDBE_MAX_RT_PRIO;
	u64 *since;

	if (!evacuate_from_tp || !(since = bpf_map_lookup_elem(&rt_since, &cpu)))
		return 0;
	if (rt != (*since != 0)) {
		*since = rt ? bpf_ktime_get_ns() : 0;
		__sync_fetch_and_add(&nr_rt_cpus, rt ? 1 : -1);
	}
	if (rt && scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) &&
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
static void rescue_stranded(u32 self, u64 now)
{
	u64 *since;
	u32 i;

	if (nr_rt_cpus <= 0 || !rescue_available())
		return;
	bpf_for(i, 0, scx_bpf_nr_cpu_ids()) {
		if (i == self || i >= SCHEDBE_MAX_CPUS)
			continue;
		since = bpf_map_lookup_elem(&rt_since, &i);
		if (!since || !*since || now - *since < SCHEDBE_RT_STRAND_NS)
			continue;
		if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | i)) {
			scx_bpf_dsq_reenq(SCX_DSQ_LOCAL_ON | i, 0);
			STAT_ADD(rt_rescues, 1);
		}
	}
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
	u64 *since;

	if (nr_rt_cpus <= 0)	/* the common case: no lookup */
		return false;
	since = bpf_map_lookup_elem(&rt_since, &key);
	return since && *since;
}

/* ops.cpu_release (kernels before v6.19): an RT/DL task took this CPU. */
static __always_inline void rt_cpu_release(void)
{
	if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL))
		STAT_ADD(rt_evacuations, 1);
	scx_bpf_reenqueue_local();
}

#endif /* __SCHEDBE_RT_TAKEOVER_BPF_H */
