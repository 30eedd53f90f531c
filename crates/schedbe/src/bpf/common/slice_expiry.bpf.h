/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A per-CPU timer that ends a slice on time, for every schedbe policy.
 *
 * sched_ext checks p->scx.slice only at scheduler ticks (every 4 ms at
 * HZ=250), so a slice cut short for a reason of the policy's own (the
 * runtime left under cpu.max, an Akita budget or period boundary) would
 * otherwise overrun by up to a tick. ops.running arms this CPU's timer for
 * the slice; when it fires and the task it was armed for still runs here,
 * the CPU is kicked with SCX_KICK_PREEMPT, which ends the slice now.
 *
 * The default policy also ends a run early from another wakeup's path: an
 * LC wakeup that may preempt a task once it has run its minimum
 * (lc_place.bpf.h) arms the expiry for that moment, maybe from another
 * CPU (slice_expiry_arm_by()).
 *
 * The timer is pinned (BPF_F_TIMER_CPU_PIN) to the CPU that armed it, most
 * often the CPU it is for; the callback looks at what runs on the CPU the
 * entry is for, wherever it fires. Re-arming replaces the previous expiry.
 * Two CPUs arming one entry at once may leave the timer with one's time
 * and the other's pid: the callback then finds that pid not running and
 * does nothing, and the task runs to the end of its slice, as without the
 * timer.
 *
 * Cost: where bpf_timer_start() is lock-free (kernel/bpf/helpers.c), a
 * start with interrupts disabled, as in every sched_ext callback, is
 * deferred to an IRQ work on this CPU: each arming costs a self-interrupt.
 * Only the paths named above arm.
 */
#ifndef __SCHEDBE_SLICE_EXPIRY_BPF_H
#define __SCHEDBE_SLICE_EXPIRY_BPF_H

#include <scx/common.bpf.h>

#ifndef SLICE_EXPIRY_MAX_CPUS
#define SLICE_EXPIRY_MAX_CPUS	1024
#endif

struct slice_expiry {
	struct bpf_timer timer;
	u64 at;			/* when it fires (bpf_ktime_get_ns()) */
	s32 pid;		/* the task it is armed for */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLICE_EXPIRY_MAX_CPUS);
	__type(key, u32);
	__type(value, struct slice_expiry);
} slice_expiry SEC(".maps");

static int slice_expiry_fn(void *map, int *key, struct slice_expiry *e)
{
	struct task_struct *cur = __COMPAT_scx_bpf_cpu_curr(*key);

	if (cur && cur->pid == e->pid)
		scx_bpf_kick_cpu(*key, SCX_KICK_PREEMPT);
	return 0;
}

/* @p starts (or keeps) @cpu with a slice of @slice_ns: make it end then. */
static void slice_expiry_arm(struct task_struct *p, s32 cpu, u64 slice_ns)
{
	struct slice_expiry *e;
	u32 key = cpu;

	if (!(e = bpf_map_lookup_elem(&slice_expiry, &key)))
		return;
	e->pid = p->pid;
	e->at = bpf_ktime_get_ns() + slice_ns;
	bpf_timer_start(&e->timer, slice_ns, BPF_F_TIMER_CPU_PIN);
}

/*
 * End the run of task @pid on @cpu at @at (> @now) at the latest: an
 * expiry already armed for @pid that comes sooner stays. True when the
 * timer was (re)armed.
 */
static __always_inline bool slice_expiry_arm_by(s32 cpu, s32 pid, u64 at, u64 now)
{
	struct slice_expiry *e;
	u32 key = cpu;

	if (cpu < 0 || !(e = bpf_map_lookup_elem(&slice_expiry, &key)))
		return false;
	if (e->pid == pid && time_before(now, e->at) && !time_before(at, e->at))
		return false;
	e->pid = pid;
	e->at = at;
	return !bpf_timer_start(&e->timer, at - now, BPF_F_TIMER_CPU_PIN);
}

/* ops.init: one timer per possible CPU. */
static s32 slice_expiry_init(void)
{
	struct slice_expiry *e;
	u32 i;
	s32 err;

	bpf_for(i, 0, scx_bpf_nr_cpu_ids()) {
		if (i >= SLICE_EXPIRY_MAX_CPUS || !(e = bpf_map_lookup_elem(&slice_expiry, &i)))
			break;
		err = bpf_timer_init(&e->timer, &slice_expiry, CLOCK_MONOTONIC);
		if (!err)
			err = bpf_timer_set_callback(&e->timer, slice_expiry_fn);
		if (err) {
			scx_bpf_error("failed to set up slice expiry timer %u: %d", i, err);
			return err;
		}
	}
	return 0;
}

#endif /* __SCHEDBE_SLICE_EXPIRY_BPF_H */
