/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ops.dispatch's queue consumption: take the first task of a tier's queues
 * (this CPU's LLC first) that may run here. While some cgroup is throttled
 * (cpu.max), queued tasks of throttled cgroups go to their holding queues on
 * the way; in concurrency mode a task whose cgroup is on its cap is passed
 * over, or gets the tokens of the task leaving this CPU (cpumax_conc.bpf.h).
 * With no limit anywhere this is one kfunc call per queue, none for an LC
 * queue known to be empty (lc_clock.bpf.h).
 *
 * Invariant: a task is moved to this CPU only with its cgroups' tokens, or
 * with the leaving task's, handed over right after the move.
 */
#ifndef __SCHEDBE_CONSUME_BPF_H
#define __SCHEDBE_CONSUME_BPF_H

#include <scx/common.bpf.h>
#include "state.bpf.h"
#include "task_ctx.bpf.h"
#include "lc_clock.bpf.h"	/* lc_q_may_hold() */
#include "../common/cpumax_conc.bpf.h"

/* conc_admit()'s answers */
enum { CONC_NO, CONC_YES, CONC_PREV };

/*
 * Concurrency mode: may @p have this CPU? CONC_YES when it holds or took its
 * cgroups' tokens (or needs none). When its cgroup is on its cap and the
 * task leaving this CPU (@pctx's: runnable with no slice left, as a task
 * that has one keeps its CPU without ops.dispatch; or going to sleep, its
 * tokens "leaving" since ops.stopping) holds tokens, @p takes its turn on
 * this CPU with them (a server thread that finished a request hands the
 * pod's token to the next one waiting, instead of this CPU running
 * another pod's task and the token coming back with nobody to take it):
 *  - of the same cgroup (threads of one container): CONC_PREV, the tokens
 *    are handed over once @p is moved here (bw_conc_hand_over), and no
 *    other CPU can take them in between;
 *  - of another cgroup of the same pod (sibling containers with limits of
 *    their own under a capped pod): the leaving task gives its tokens back
 *    at once and @p takes its own (for a task of another pod they would not
 *    help, and are kept). Another CPU may take a token in that instant, which is
 *    what the tracer can then see as one CPU too many until this CPU's
 *    switch; without it the leaving task would keep the CPU slice after
 *    slice and its sibling would wait for a period boundary.
 * A task found in a queue that is no longer runnable (the iterator's view
 * is a moment old) is passed over: tokens taken for it would stay with it
 * while it sleeps.
 */
static int conc_admit(struct task_struct *p, struct task_ctx *tctx, struct task_ctx *pctx, u64 now)
{
	u32 st;

	if (!tctx || !bw_conc_on())
		return CONC_YES;
	if (!(p->scx.flags & SCX_TASK_QUEUED))
		return CONC_NO;
	if (bw_conc_take(p, &tctx->bw, now))
		return CONC_YES;
	if (!pctx)
		return CONC_NO;
	/* keeps the compiler from computing &pctx->bw before the NULL test (the verifier refuses it) */
	barrier_var(pctx);
	st = pctx->bw.tok_state;
	if (st != BW_TOK_HELD && st != BW_TOK_LEAVING)
		return CONC_NO;
	if (bw_conc_may_hand_over(&tctx->bw, &pctx->bw))
		return CONC_PREV;
	if (!bw_conc_same_outer(&tctx->bw, &pctx->bw))
		return CONC_NO;
	bw_conc_release(NULL, &pctx->bw, st, false);
	return bw_conc_take(p, &tctx->bw, now) ? CONC_YES : CONC_NO;
}

/*
 * Hand @pbt's tokens to @bt's task, just moved here, retrying while another
 * CPU holds either record (BW_TOK_BUSY): one walking its queue still tries
 * to take tokens for @bt's task, which fails at the cap and lets go at once.
 * Without the retry that moment failed the hand-over: the moved task runs
 * without tokens until ops.running's backstop preempts it, while the
 * leaving task's go back at the switch and an idle CPU may take them, one
 * CPU over the cap until the backstop's kick lands (a vCPU preempted by its
 * host stretches the moment). Stops once @bt's task holds tokens of its own
 * (that take succeeded: the leaving task's go back at the switch).
 */
static __always_inline void conc_hand_over_retry(struct bw_task *bt, struct bw_task *pbt)
{
	u32 i;

	bpf_for(i, 0, 64) {
		if (bw_conc_hand_over(bt, pbt) || bt->tok_state == BW_TOK_HELD)
			return;
		if (bt->tok_state != BW_TOK_BUSY && pbt->tok_state != BW_TOK_BUSY)
			return;
	}
}

/*
 * Move the first task of @dsq that may run here to this CPU. While some
 * cgroup is throttled (cpu.max), queued tasks of throttled cgroups are moved
 * to their holding queues on the way, and in concurrency mode tasks whose
 * cgroup is on its cap are passed over; otherwise this is one kfunc call.
 * @pctx: the task leaving this CPU (concurrency mode), or NULL.
 */
static bool consume_dsq(u64 dsq, s32 cpu, struct task_ctx *pctx)
{
	struct task_ctx *tctx, *handed = NULL;
	struct task_struct *p;
	bool moved = false;
	u64 now;
	s32 slot;
	int adm;

	if (!bw_nr_throttled && !bw_conc_on())
		return scx_bpf_dsq_move_to_local(dsq, 0);
	now = bpf_ktime_get_ns();
	bpf_for_each(scx_dsq, p, dsq, 0) {
		tctx = task_ctx(p);
		if (tctx && (slot = bw_throttled_slot(p, &tctx->bw, now)) >= 0) {
			bw_hold_queued(BPF_FOR_EACH_ITER, p, slot, now);
			continue;
		}
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		adm = conc_admit(p, tctx, pctx, now);
		if (adm == CONC_NO)
			continue;
		/* a failed move leaves @p's tokens with @p: the CPU that got it runs it */
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
			if (adm == CONC_PREV)
				handed = tctx;
			moved = true;
			break;
		}
	}
	/*
	 * Out of the queue walk, where it would multiply the verifier's states.
	 * Should the hand-over fail even when retried, @p gets or gives back
	 * its CPU in ops.running's backstop.
	 */
	if (handed && pctx)
		conc_hand_over_retry(&handed->bw, &pctx->bw);
	return moved;
}

/*
 * Take the first task of a tier from this CPU's LLC, then from any other
 * LLC. @pctx: the task leaving this CPU (concurrency mode), or NULL.
 */
static bool consume_tier(u32 base, s32 cpu, struct task_ctx *pctx)
{
	u32 mine = llc_of(cpu), i;
	/* an LC queue known to be empty is not looked up (lc_q_may_hold()) */
	bool lc = base == SCHEDBE_LC_DSQ_BASE;

	if ((!lc || lc_q_may_hold(mine)) && consume_dsq(base + mine, cpu, pctx))
		return true;
	/* one LLC (most machines): no loop, whose iterator is three kfunc calls (rodata: pruned at load) */
	if (nr_llcs < 2)
		return false;
	bpf_for(i, 0, nr_llcs) {
		if (i != mine && (!lc || lc_q_may_hold(i)) && consume_dsq(base + i, cpu, pctx))
			return true;
	}
	return false;
}

#endif /* __SCHEDBE_CONSUME_BPF_H */
