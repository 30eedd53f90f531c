/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Parking's walk of a FIFO BE queue, for the policies whose BE tasks wait in
 * one (Akita, LLF). The SCHED_BE policy's BE queues are ordered by virtual
 * time and walked by its own housekeeping (be_guard.bpf.h).
 */
#ifndef __SCHEDBE_PARK_FIFO_BPF_H
#define __SCHEDBE_PARK_FIFO_BPF_H

/*
 * For a policy whose BE tasks wait in one FIFO queue (Akita, LLF), called
 * from ops.dispatch at most every few tens of ms per CPU: walk @dsq,
 *  - report the tasks whose window ended starved (counted in *@reports);
 *  - move the first task that must run now (dying, or with a freeze
 *    pending, which parking waits for: the freezer stops a task only on its
 *    way back to user space) and may run on @cpu to this CPU, for
 *    @slice_ns. Without that it would wait below everything else for a
 *    guard slice, and a parked cgroup would not finish freezing until then.
 * Returns true when it moved one. Every CPU walks, so each task is visited
 * a few times per window; starve_window_end() reports it once per window.
 * The includer defines task_starve(p): @p's struct starve_win, or NULL, and
 * includes task_state.bpf.h and park_report.bpf.h first.
 */
static __always_inline bool park_walk_fifo(u64 dsq, s32 cpu, u64 now, u64 slice_ns, u64 *reports)
{
	struct task_struct *p;
	struct starve_win *w;

	bpf_for_each(scx_dsq, p, dsq, 0) {
		if (!(w = task_starve(p)))
			continue;
		if (starve_window_end(w, now) && report_starved(p, now))
			(*reports)++;
		if ((!task_dying(p) && !task_freezing(p)) || !bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		scx_bpf_dsq_move_set_slice(BPF_FOR_EACH_ITER, slice_ns);
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0))
			return true;
	}
	return false;
}

#endif /* __SCHEDBE_PARK_FIFO_BPF_H */
