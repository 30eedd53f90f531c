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
 * The timer is pinned (BPF_F_TIMER_CPU_PIN), so in its callback `current`
 * is what runs on that CPU; re-arming replaces the previous expiry.
 */
#ifndef __SCHEDBE_SLICE_EXPIRY_BPF_H
#define __SCHEDBE_SLICE_EXPIRY_BPF_H

#ifndef SLICE_EXPIRY_MAX_CPUS
#define SLICE_EXPIRY_MAX_CPUS	1024
#endif

struct slice_expiry {
	struct bpf_timer timer;
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
	struct task_struct *cur = bpf_get_current_task_btf();

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
	bpf_timer_start(&e->timer, slice_ns, BPF_F_TIMER_CPU_PIN);
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
