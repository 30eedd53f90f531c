/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The starvation guard of a FIFO queue, for every policy whose BE tasks
 * wait in one (Akita, LLF): the queue's head is its oldest task, so one
 * look at the head says whether any task has waited past a limit.
 *
 * A FIFO queue ignores p->scx.dsq_vtime, so the time a task was queued is
 * kept there (fifo_note_enqueue()), and the check needs no task storage.
 */
#ifndef __SCHEDBE_FIFO_GUARD_BPF_H
#define __SCHEDBE_FIFO_GUARD_BPF_H

/* ops.enqueue, before inserting @p into a FIFO queue. */
static __always_inline void fifo_note_enqueue(struct task_struct *p, u64 now)
{
	scx_bpf_task_set_dsq_vtime(p, now);
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

#endif /* __SCHEDBE_FIFO_GUARD_BPF_H */
