/* SPDX-License-Identifier: GPL-2.0 */
/*
 * How long a task runs each time it wakes (its burst), averaged over
 * its recent wakeups. LC wakeup preemption (lc_place.bpf.h) uses it: a
 * victim's minimum run (lc_preempt_min_ns) keeps CPU hogs from preempting
 * each other at every wakeup; a wakee whose bursts are shorter than that
 * minimum costs the victim less than the minimum would, so it preempts at
 * once instead of waiting for it (a timer thread, an RPC handler behind a
 * hog that has just started).
 *
 * Charged where the task's run time is charged (ops.tick, ops.stopping:
 * charge()), in either tier, so that a BE task that turns LC (moved out of
 * a BE cgroup, boosted to reach the freezer) brings its real bursts;
 * folded into the average when it sleeps.
 */
#ifndef __SCHEDBE_LC_BURST_BPF_H
#define __SCHEDBE_LC_BURST_BPF_H

#include <scx/common.bpf.h>

struct lc_burst {
	u64 cur_ns;	/* run since it last woke */
	u64 avg_ns;	/* average burst; 0 until its first sleep */
};

static __always_inline void lc_burst_ran(struct lc_burst *b, u64 ran)
{
	b->cur_ns += ran;
}

/* It sleeps: its burst ends. A weight of 1/4 per burst, so a change of habit shows within a few wakeups. */
static __always_inline void lc_burst_slept(struct lc_burst *b)
{
	u64 burst = b->cur_ns ? b->cur_ns : 1;

	b->avg_ns = b->avg_ns ? b->avg_ns - (b->avg_ns >> 2) + (burst >> 2) : burst;
	b->cur_ns = 0;
}

/* Whether bursts averaging @avg_ns are shorter than @min_ns (a task yet to sleep once, avg 0, is not). */
static __always_inline bool lc_burst_short(u64 avg_ns, u64 min_ns)
{
	return avg_ns && avg_ns < min_ns;
}

/*
 * Whether a wakee whose bursts average @wakee_ns is to wait for a task that
 * has run @ran_ns of its current burst, its bursts averaging @avg_ns, rather
 * than preempt it: the task is expected to sleep before the wakee would
 * have run half its own burst. Its expected rest is its average minus what
 * it ran, or one more average once it has run past it (a guess that does
 * not let a task that overran by a hair look about to finish); a task
 * that never slept (a CPU hog) has no expected end, nor has a wakee with
 * no history. Preempting a task about to sleep delays it by the wakee's
 * whole burst to save the wakee less than that: request handlers of equal
 * demand preempting each other served each request later (shortest
 * remaining work first is what minimises waiting; EEVDF's wakeup
 * preemption likewise spares a task inside its slice request).
 */
static __always_inline bool lc_burst_outlasts(u64 wakee_ns, u64 avg_ns, u64 ran_ns)
{
	u64 rest;

	if (!wakee_ns || !avg_ns)
		return false;
	rest = ran_ns < avg_ns ? avg_ns - ran_ns : avg_ns;
	return wakee_ns >= rest / 2;
}

#endif /* __SCHEDBE_LC_BURST_BPF_H */
