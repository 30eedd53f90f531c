/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The FIFO BE tier, for every policy whose BE tasks wait in one FIFO queue
 * below everything else (Akita, LLF): the enqueue, the starvation guard's
 * look at the queue, and parking's walk of it. The SCHED_BE policy's BE
 * queues are ordered by virtual time and walked by its own housekeeping
 * (sched_be/be_guard.bpf.h).
 *
 * A FIFO queue ignores p->scx.dsq_vtime, so the time a task was queued is
 * kept there (fifo_note_enqueue()): the queue's head is its oldest task, and
 * one look at the head says whether any task has waited past a limit,
 * without task storage.
 */
#ifndef __SCHEDBE_FIFO_BE_BPF_H
#define __SCHEDBE_FIFO_BE_BPF_H

#include <scx/common.bpf.h>
#include "park_report.bpf.h"
#include "task_state.bpf.h"

/* Needs from the policy: */
/* @p's parking window (struct starve_win), or NULL when it has no context */
static __always_inline struct starve_win *task_starve(struct task_struct *p);

/* How often a CPU walks the BE queue (parking's reports, tasks that must run). */
#define FIFO_BE_WALK_NS	(50ULL * 1000 * 1000)

/* ops.enqueue, before inserting @p into a FIFO queue. */
static __always_inline void fifo_note_enqueue(struct task_struct *p, u64 now)
{
	scx_bpf_task_set_dsq_vtime(p, now);
}

/*
 * ops.enqueue of a BE task: its parking window @w opens, it joins FIFO
 * queue @dsq for @slice_ns, and an idle CPU is woken (it will still run
 * every higher tier first).
 */
static __always_inline void fifo_be_enqueue(struct task_struct *p, struct starve_win *w, u64 dsq,
					    u64 slice_ns, u64 enq_flags, u64 now)
{
	s32 cpu;

	starve_open(w, now);
	fifo_note_enqueue(p, now);
	scx_bpf_dsq_insert(p, dsq, slice_ns, enq_flags);
	cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (cpu >= 0)
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}

/* The oldest task of FIFO queue @dsq has waited more than @limit_ns. */
static bool fifo_head_waited(u64 dsq, u64 now, u64 limit_ns)
{
	struct task_struct *p;

	bpf_for_each(scx_dsq, p, dsq, 0) {
		return now - p->scx.dsq_vtime > limit_ns;
	}
	return false;
}

/*
 * Walk FIFO queue @dsq:
 *  - report the tasks whose window ended starved (counted in *@reports);
 *  - move the first task that must run now (dying, or with a freeze
 *    pending, which parking waits for: the freezer stops a task only on its
 *    way back to user space) and may run on @cpu to this CPU, for
 *    @slice_ns. Without that it would wait below everything else for a
 *    guard slice, and a parked cgroup would not finish freezing until then.
 * Returns true when it moved one. Every CPU walks, so each task is visited
 * a few times per window; starve_window_end() reports it once per window.
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

/*
 * From ops.dispatch: parking's walk of @dsq, at most every FIFO_BE_WALK_NS
 * per CPU (*@next: when this CPU may walk again). A task it moves here runs
 * for @slice_ns and is counted in *@rescues; its next enqueue classifies it
 * anew.
 */
static __always_inline bool fifo_be_walk(u64 dsq, s32 cpu, u64 now, u64 slice_ns, u64 *next,
					 u64 *reports, u64 *rescues)
{
	if (time_before(now, *next))
		return false;
	*next = now + FIFO_BE_WALK_NS;
	if (!park_walk_fifo(dsq, cpu, now, slice_ns, reports))
		return false;
	(*rescues)++;
	return true;
}

#endif /* __SCHEDBE_FIFO_BE_BPF_H */
