/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cpu.max concurrency mode (bw_conc_mode, `--limit-mode concurrency`): a
 * cgroup whose cpu.max amounts to N CPUs also runs on at most ceil(N) CPUs
 * at any instant, by tokens (the rules are in cpumax.bpf.h's header comment;
 * the token record is struct bw_task's tok_* fields).
 *
 * Invariants:
 *  - a slot's running count is the number of tasks of its subtree holding
 *    its token (HELD or LEAVING), and never exceeds its cap: a token is taken
 *    by compare-and-swap, and a task's record changes only under BW_TOK_BUSY;
 *  - a task's tokens go back after its CPU has switched away from it
 *    (bw_conc_switched, at the sched_switch tracepoint the tracer also
 *    reads), so a cgroup is never seen on more CPUs than it has tokens;
 *  - tokens pass from one task to another of the same cgroup on the same
 *    CPU without the count dropping (bw_conc_hand_over), so no other CPU
 *    can slip in between.
 *
 * Builds on cpumax.bpf.h (bw_chain(), bw_slot(), its maps); only a policy
 * that offers the mode includes it (SCHED_BE).
 */
#ifndef __SCHEDBE_CPUMAX_CONC_BPF_H
#define __SCHEDBE_CPUMAX_CONC_BPF_H

#include <scx/common.bpf.h>
#include "cpumax.bpf.h"
#include "task_state.bpf.h"

static __always_inline bool bw_conc_on(void)
{
	return bw_conc_mode && bw_on;
}

/*
 * Concurrency mode: give @bt's tokens back if they are in state @from. With
 * @kick (and @p, whose CPUs are looked at), wake an idle CPU when a slot was
 * at its cap: a task of it may be queued, passed over.
 */
static void bw_conc_release(struct task_struct *p, struct bw_task *bt, u32 from, bool kick)
{
	bool was_full = false;
	struct bw_state *s;
	u32 i, slot;
	s32 cpu;

	if (bt->tok_state != from ||
	    __sync_val_compare_and_swap(&bt->tok_state, from, BW_TOK_BUSY) != from)
		return;
	bpf_for(i, 0, SCHEDBE_BW_MAX_DEPTH) {
		if (i >= bt->tok_nr)
			break;
		slot = bt->tok_slots[i & (SCHEDBE_BW_MAX_DEPTH - 1)];
		s = bpf_map_lookup_elem(&bw_state, &slot);
		if (s && __sync_fetch_and_sub(&s->running, 1) >= s->cap)
			was_full = true;
	}
	bt->tok_nr = 0;
	__sync_lock_test_and_set(&bt->tok_state, BW_TOK_NONE);
	if (kick && p && was_full && (cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0)) >= 0)
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}

/* ops.stopping: the tokens go back when this CPU switches away (bw_conc_switched). */
static __always_inline void bw_conc_leave(struct bw_task *bt)
{
	if (bt->tok_state == BW_TOK_HELD)
		__sync_val_compare_and_swap(&bt->tok_state, BW_TOK_HELD, BW_TOK_LEAVING);
}

/*
 * The task left a local queue without running: its tokens go back now. A
 * task still on its CPU (ops.enqueue of a task being switched out, or an
 * entry-check insert undone for it) keeps them until the switch.
 */
static __always_inline void bw_conc_put(struct task_struct *p, struct bw_task *bt, bool kick)
{
	if (p->on_cpu)
		bw_conc_leave(bt);
	else
		bw_conc_release(p, bt, BW_TOK_HELD, kick);
}

/*
 * ops.disable: @p leaves sched_ext (it exits, or becomes RT/DL), so no
 * switch or stopping of ours may come for it again: whatever it holds goes
 * back now. Without this a task that held tokens when it left would keep
 * its cgroup below its cap for good.
 */
static __always_inline void bw_conc_drop(struct task_struct *p, struct bw_task *bt)
{
	bw_conc_release(p, bt, BW_TOK_HELD, true);
	bw_conc_release(p, bt, BW_TOK_LEAVING, true);
}

/* sched_switch: @p is off its CPU, as the tracer sees it too; its tokens go back. */
static __always_inline void bw_conc_switched(struct task_struct *p, struct bw_task *bt)
{
	bw_conc_release(p, bt, BW_TOK_LEAVING, true);
}

/* Give back the first @n tokens of @slots (a take that failed part way). */
static void bw_conc_undo(u16 *slots, u32 n)
{
	struct bw_state *s;
	u32 i, slot;

	bpf_for(i, 0, SCHEDBE_BW_MAX_DEPTH) {
		if (i >= n)
			break;
		slot = slots[i & (SCHEDBE_BW_MAX_DEPTH - 1)];
		if ((s = bpf_map_lookup_elem(&bw_state, &slot)))
			__sync_fetch_and_sub(&s->running, 1);
	}
}

/* One token of @slot's state @s, unless all are taken. */
static bool bw_conc_take_one(struct bw_state *s)
{
	s32 cur;
	u32 i;

	bpf_for(i, 0, 8) {
		cur = s->running;
		if (cur >= s->cap)
			return false;
		if (__sync_val_compare_and_swap(&s->running, cur, cur + 1) == cur)
			return true;
	}
	return false;	/* contended eight times: treated as full, the next dispatch retries */
}

/*
 * Concurrency mode: may @p be given a CPU? Takes a token of every capped
 * cgroup of its chain, all or none. True without taking anything when @p
 * already holds them (or stopped and keeps them), when nothing caps it, and for dying and freezing
 * tasks, which must get to run. False also while another CPU is taking or
 * giving back @p's tokens (it will run @p, or @p is leaving the queue).
 */
static bool bw_conc_take(struct task_struct *p, struct bw_task *bt, u64 now)
{
	struct bw_task *ch;
	struct bw_state *s;
	struct bw_stat *st;
	u32 i, slot, n = 0;

	if (!bw_conc_on() || bt->tok_state == BW_TOK_HELD)
		return true;
	/* stopped, its CPU not switched yet: it keeps them (see BW_TOK_LEAVING) */
	if (bt->tok_state == BW_TOK_LEAVING &&
	    __sync_val_compare_and_swap(&bt->tok_state, BW_TOK_LEAVING, BW_TOK_HELD) == BW_TOK_LEAVING)
		return true;
	if (!(ch = bw_chain(p, bt)) || task_dying(p) || task_freezing(p))
		return true;
	if (__sync_val_compare_and_swap(&bt->tok_state, BW_TOK_NONE, BW_TOK_BUSY) != BW_TOK_NONE)
		return bt->tok_state == BW_TOK_HELD;
	bpf_for(i, 0, SCHEDBE_BW_MAX_DEPTH) {
		if (i >= ch->nr)
			break;
		slot = ch->slots[i & (SCHEDBE_BW_MAX_DEPTH - 1)];
		s = bw_slot(slot, now);
		if (!s || s->cap <= 0)
			continue;
		if (!bw_conc_take_one(s)) {
			if ((st = bpf_map_lookup_elem(&bw_stats, &slot)))
				__sync_fetch_and_add(&st->conc_waits, 1);
			bw_conc_undo(bt->tok_slots, n);
			__sync_lock_test_and_set(&bt->tok_state, BW_TOK_NONE);
			return false;
		}
		bt->tok_slots[n & (SCHEDBE_BW_MAX_DEPTH - 1)] = slot;
		n++;
	}
	bt->tok_nr = n;
	__sync_lock_test_and_set(&bt->tok_state, n ? BW_TOK_HELD : BW_TOK_NONE);
	return true;
}

/*
 * Concurrency mode, ops.dispatch: @bt's task could not take its tokens; may
 * the task leaving this CPU (@pbt: runnable, or stopped on its way to sleep,
 * its tokens then "leaving") hand it the tokens it holds? Only within one
 * cgroup, whose chain of capped slots is the one @pbt's tokens were taken
 * for (a cheap test: it runs inside ops.dispatch's queue walk; the callers
 * look at @pbt's state themselves).
 */
static __always_inline bool bw_conc_may_hand_over(struct bw_task *bt, struct bw_task *pbt)
{
	return pbt->tok_nr && bt->nr && pbt->cgid == bt->cgid && pbt->gen == bt->gen;
}

/*
 * Concurrency mode, ops.dispatch: would tokens of @pbt's task help @bt's? When
 * both chains end in the same limited cgroup (the pod; chains list the
 * innermost first): giving them back for a task of another pod would only
 * open a window for another CPU, and help nobody.
 */
static __always_inline bool bw_conc_same_outer(struct bw_task *bt, struct bw_task *pbt)
{
	return bt->nr && pbt->tok_nr &&
	       bt->slots[(bt->nr - 1) & (SCHEDBE_BW_MAX_DEPTH - 1)] ==
	       pbt->tok_slots[(pbt->tok_nr - 1) & (SCHEDBE_BW_MAX_DEPTH - 1)];
}

/*
 * Concurrency mode, ops.dispatch: @pbt's task, leaving this CPU, hands its
 * tokens straight to @bt's task, of the same cgroup, just moved here
 * (threads of one pod taking turns on a CPU). The slots' running counts do
 * not change, so no other CPU can take the token between one giving it up
 * and the other taking it, as a give-back followed by a take would allow.
 * @bt's chain is as its failed take resolved it. False, nothing changed,
 * when the chains or either record no longer allow it.
 */
static bool bw_conc_hand_over(struct bw_task *bt, struct bw_task *pbt)
{
	struct bw_state *s;
	u32 i, n = 0, slot, st;

	if (!bw_conc_may_hand_over(bt, pbt))
		return false;
	bpf_for(i, 0, SCHEDBE_BW_MAX_DEPTH) {
		if (i >= bt->nr)
			break;
		slot = bt->slots[i & (SCHEDBE_BW_MAX_DEPTH - 1)];
		s = bpf_map_lookup_elem(&bw_state, &slot);
		if (!s || s->cap <= 0)
			continue;
		/* n is compared, so the verifier tracks it exactly: bound it */
		if (n >= SCHEDBE_BW_MAX_DEPTH || n >= pbt->tok_nr ||
		    pbt->tok_slots[n & (SCHEDBE_BW_MAX_DEPTH - 1)] != slot)
			return false;
		n++;
	}
	if (n != pbt->tok_nr)
		return false;
	/* HELD (runnable, leaving this CPU) or LEAVING (stopped: going to sleep) */
	st = pbt->tok_state;
	if ((st != BW_TOK_HELD && st != BW_TOK_LEAVING) ||
	    __sync_val_compare_and_swap(&pbt->tok_state, st, BW_TOK_BUSY) != st)
		return false;
	if (__sync_val_compare_and_swap(&bt->tok_state, BW_TOK_NONE, BW_TOK_BUSY) != BW_TOK_NONE) {
		__sync_lock_test_and_set(&pbt->tok_state, st);
		return false;
	}
	bpf_for(i, 0, SCHEDBE_BW_MAX_DEPTH) {
		if (i >= n)
			break;
		bt->tok_slots[i & (SCHEDBE_BW_MAX_DEPTH - 1)] = pbt->tok_slots[i & (SCHEDBE_BW_MAX_DEPTH - 1)];
	}
	bt->tok_nr = n;
	pbt->tok_nr = 0;
	__sync_lock_test_and_set(&pbt->tok_state, BW_TOK_NONE);
	__sync_lock_test_and_set(&bt->tok_state, BW_TOK_HELD);
	return true;
}

#endif /* __SCHEDBE_CPUMAX_CONC_BPF_H */
