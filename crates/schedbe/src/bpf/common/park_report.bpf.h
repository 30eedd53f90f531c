/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Parking's BPF half, for every policy with a BE tier: which BE tasks are
 * starved, and the report userspace (park.rs) acts on by freezing their
 * cgroup.
 *
 * Starved: runnable for a whole park_after_ns window and given less than
 * 1/SCHEDBE_STARVED_DIV of it on a CPU. Under overload BE still gets crumbs
 * (guard slices, moments between higher-tier tasks), so "never ran" would
 * almost never hold; a BE task that gets a real share of a CPU, however it
 * is sliced, is not starved. A task that sleeps ends its window: sleeping
 * is not starving.
 *
 * Each policy keeps a struct starve_win per task and calls
 *   starve_open()   when it queues a BE task,
 *   starve_ran()    when the task leaves a CPU,
 *   starve_window_end() + report_starved() from a walk of its BE queue
 *                   (at most every few tens of ms per CPU); a policy whose
 *                   BE queue is one FIFO has that walk in fifo_be.bpf.h.
 */
#ifndef __SCHEDBE_PARK_REPORT_BPF_H
#define __SCHEDBE_PARK_REPORT_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"	/* SCHEDBE_STARVED_DIV, which park.rs reads too */
#include "tier.bpf.h"	/* task_cgid() */

/* The starvation window, set by userspace before load; 0: parking off, no window ever ends. */
const volatile u64 park_after_ns = 0;

/*
 * cgroup id -> when one of its BE tasks was last seen starved. Userspace
 * reads and deletes the entries.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u64);
	__type(value, u64);
} starved_cgrps SEC(".maps");

/* One task's current starvation window. */
struct starve_win {
	u64 since;	/* start of the window; 0: none (not queued as BE since it last slept) */
	u64 ran;	/* CPU time it got in the window */
};

/*
 * Has @limit passed between @since and @now? Signed: a task enqueued on
 * another CPU after @now was read has @since > @now, which must read as "no
 * wait yet", not as an unsigned wrap to a huge wait.
 */
static __always_inline bool waited(u64 now, u64 since, u64 limit)
{
	return (s64)(now - since) >= (s64)limit;
}

/* A BE task is queued: its window starts, unless one is open. */
static __always_inline void starve_open(struct starve_win *w, u64 now)
{
	if (!w->since)
		w->since = now;
}

/* A new window from @now (time held out of the queues, e.g. by cpu.max, is not starvation). */
static __always_inline void starve_restart(struct starve_win *w, u64 now)
{
	w->since = now;
	w->ran = 0;
}

/* The task leaves a CPU after running @ran ns; @runnable false: it sleeps, and its window ends. */
static __always_inline void starve_ran(struct starve_win *w, u64 ran, bool runnable)
{
	w->ran += ran;
	if (!runnable) {
		w->since = 0;
		w->ran = 0;
	}
}

/* Has the window ended by @now, starved? Either way an ended window gives way to the next. */
static __always_inline bool starve_window_end(struct starve_win *w, u64 now)
{
	bool starved;

	if (!park_after_ns || !w->since || !waited(now, w->since, park_after_ns))
		return false;
	starved = w->ran < park_after_ns / SCHEDBE_STARVED_DIV;
	starve_restart(w, now);
	return starved;
}

/* Tell userspace that @p's cgroup has a starved BE task. True if this is a new report. */
static bool report_starved(struct task_struct *p, u64 now)
{
	u64 cgid = task_cgid(p);

	if (bpf_map_lookup_elem(&starved_cgrps, &cgid))
		return false;	/* already reported, userspace has not read it yet */
	bpf_map_update_elem(&starved_cgrps, &cgid, &now, BPF_ANY);
	return true;
}

#endif /* __SCHEDBE_PARK_REPORT_BPF_H */
