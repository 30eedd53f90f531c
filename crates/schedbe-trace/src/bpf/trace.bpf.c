/* SPDX-License-Identifier: GPL-2.0 */
/*
 * schedbe trace: the independent LC/BE inversion tracer, BPF side.
 *
 * Works under any scheduler (EEVDF, schedbe, another sched_ext scheduler):
 * it only attaches to the core scheduler tracepoints and never reads a
 * scheduler's own state. The userspace side (src/replay/) rebuilds, from
 * the events below, which task occupied each CPU and which tasks were
 * runnable but waiting, and measures inversions from that.
 *
 * What is recorded, one compact record per event into a ring buffer:
 *   sched_switch       ts, cpu, prev pid, next pid, tier of next (and, with
 *                      --cgroup, next's cgroup v2 id), and, when
 *                      prev stays runnable (preempted: preempt || prev_state
 *                      == TASK_RUNNING), prev's tier and allowed-CPU mask,
 *                      because prev then starts waiting; TASK_DEAD is flagged.
 *   sched_waking       pid, tier, mask (and, with --cgroup, its cgroup v2
 *                      id): the task becomes runnable (the earliest point
 *                      the kernel reports).
 *   sched_wakeup       pid, runqueue cpu: the task is on a runqueue now. Needed
 *                      to pair with sched_waking: a waking that lands while
 *                      the task is still on its CPU is either absorbed
 *                      (ttwu_runnable: a wakeup follows while still current)
 *                      or races with its switch-out (the task is runnable as
 *                      soon as it is off the CPU); userspace tells the two
 *                      apart by where the wakeup falls.
 *   sched_wakeup_new   pid, tier, mask (cgroup id): a new task is runnable.
 *   sched_migrate_task pid, dest cpu, mask: keeps the mask of a waiting task
 *                      current when its affinity changes.
 *   hrtimer_expire_entry  with --cgroup, for a task's sleep timer
 *                      (hrtimer_wakeup: nanosleep, clock_nanosleep, poll and
 *                      select timeouts) on CLOCK_MONOTONIC: the task, its
 *                      cgroup id and how late the timer fired (now - its
 *                      soft expiry). That part of a sleeper's latency comes
 *                      before the wakeup: the timer interrupt's, not the
 *                      scheduler's.
 *   sched_tick         with tick_ns set, a busy CPU's tick that comes more
 *                      than two ticks after the CPU's last tick or switch:
 *                      the CPU executed nothing in between (a host that did
 *                      not run this vCPU; or interrupts off that long), so
 *                      from one tick after that last event to now it was
 *                      *absent* (TEV_ABSENT, aux = how long). A busy CPU
 *                      ticks every tick_ns unless nohz_full, where the
 *                      tracer does not set tick_ns; an idle one may stop
 *                      ticking (NOHZ), so ticks finding the idle task are
 *                      not judged. A switch needs the CPU too, so it counts
 *                      as a sign of life.
 *   task iterator      a one-shot snapshot at start (the task on each CPU and
 *                      queued-but-not-running tasks, with their cgroup ids
 *                      under --cgroup) so the window does not start blind: tasks
 *                      already running or waiting before tracing started are
 *                      known.
 *
 * Tiers are computed here, at the event, with the shared rules of
 * schedbe-cgroup/bpf/tier.bpf.h (SCHED_IDLE, cpu.idle, be_cgroups, which this
 * program's own userspace fills) plus: pid 0 is idle, SCHED_FIFO/RR/DEADLINE
 * are "other" (above both tiers). Only what the replay needs is computed: the
 * tier of a task that starts running or starts waiting.
 *
 * cgroup ids (--cgroup) are recorded raw, for the task that starts running
 * or becomes runnable (a waiting task's cgroup is needed for the reservation
 * inversion); userspace maps them to the requested cgroups (a subtree walk),
 * so no ancestor walk happens here.
 *
 * Kept small on purpose: every handler runs in the scheduler's hot path with
 * IRQs off. No per-task state here; all reasoning happens in userspace.
 * Records are written without waking the reader (BPF_RB_NO_WAKEUP): userspace
 * polls every few milliseconds, so the tracer adds no wakeups per event.
 * A full ring buffer drops the record and counts it in nr_dropped.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "trace_intf.h"
#include "tier.bpf.h"

char _license[] SEC("license") = "GPL";

#define TASK_RUNNING	0x0000
#define TASK_DEAD	0x0080
#define SCHED_FIFO	1
#define SCHED_RR	2
#define SCHED_DEADLINE	6

_Static_assert(__builtin_offsetof(struct sbt_event, mask) == TRACE_EVENT_HDR_SIZE,
	       "sbt_event header size");

/* Set by userspace before load. */
const volatile u32 mask_words = 1;	/* ceil(nr_cpu_ids / 64), <= TRACE_MASK_WORDS */
const volatile bool record_comm;	/* --per-task: keep pid -> comm in comms */
const volatile bool record_cgroup;	/* --cgroup: fill sbt_event.cgid */
/* Address of hrtimer_wakeup (from kallsyms; 0: sleep timers not traced). */
const volatile u64 hrtimer_wakeup_fn;
/* 1e9 / CONFIG_HZ (0: CPU absence not traced). */
const volatile u64 tick_ns;

/* Flipped by userspace once every program is attached, so all start together. */
volatile u32 tracing_on;
/* Records lost because the ring buffer was full. */
u64 nr_dropped;
/* How many cgroup ids userspace keeps in be_cgroups (see task_is_be()). */
volatile u32 nr_be_cgroups;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20);	/* resized by userspace before load */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, struct sbt_comm);
} comms SEC(".maps");

/* Per CPU: when it last ticked or switched (CPU absence, tr_tick()). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} last_alive SEC(".maps");

/* Kernels that keep the cpu in task_struct instead of thread_info. */
struct task_struct___cpu {
	unsigned int cpu;
} __attribute__((preserve_access_index));

static __always_inline u32 task_cpu_of(struct task_struct *p)
{
	if (bpf_core_field_exists(p->thread_info.cpu))
		return BPF_CORE_READ(p, thread_info.cpu);
	return BPF_CORE_READ((struct task_struct___cpu *)p, cpu);
}

/*
 * tier_task_is_be() with one shortcut: while be_cgroups is empty (no cgroup
 * matches the BE patterns, the common case outside Kubernetes) its cgroup
 * rule cannot match, so skip that ancestor walk: it is about a third of the
 * cost of every event (measured ~350 ns of ~950 ns per sched_waking in a VM).
 * Keep the fallback in step with tier_task_is_be() in tier.bpf.h.
 */
static __always_inline bool task_is_be(struct task_struct *p)
{
	if (nr_be_cgroups)
		return tier_task_is_be(p);
	return BPF_CORE_READ(p, policy) == SCHEDBE_SCHED_IDLE || tier_tg_idle(p);
}

static __always_inline u8 tier_of(struct task_struct *p)
{
	int policy;

	if (!BPF_CORE_READ(p, pid))
		return TT_IDLE;
	policy = BPF_CORE_READ(p, policy);
	if (policy == SCHED_FIFO || policy == SCHED_RR || policy == SCHED_DEADLINE)
		return TT_OTHER;
	return task_is_be(p) ? TT_BE : TT_LC;
}

/* Words of allowed-CPU mask per record; a load-time constant for the verifier. */
static __always_inline u32 nr_mask_words(void)
{
	u32 n = mask_words;

	if (n < 1)
		n = 1;
	if (n > TRACE_MASK_WORDS)
		n = TRACE_MASK_WORDS;
	return n;
}

/*
 * Reserve a record in place (no stack copy): header plus room for the mask,
 * whether or not this event carries one. Counts a drop when the ring is full.
 */
static __always_inline struct sbt_event *reserve(u8 type)
{
	struct sbt_event *e;

	e = bpf_ringbuf_reserve(&events, TRACE_EVENT_HDR_SIZE + nr_mask_words() * sizeof(u64), 0);
	if (!e) {
		__sync_fetch_and_add(&nr_dropped, 1);
		return NULL;
	}
	e->ts = bpf_ktime_get_ns();
	e->cpu = bpf_get_smp_processor_id();
	e->pid = 0;
	e->prev_pid = 0;
	e->type = type;
	e->tier = TT_UNKNOWN;
	e->prev_tier = TT_UNKNOWN;
	e->flags = 0;
	e->nr_words = 0;
	e->aux = 0;
	e->cgid = 0;
	return e;
}

/* The record is read by a poller: no wakeup per event. */
static __always_inline void submit(struct sbt_event *e)
{
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* Copy p's effective allowed mask (cpus_ptr), first nr_mask_words() words. */
static __always_inline void fill_mask(struct sbt_event *e, struct task_struct *p)
{
	const struct cpumask *m = BPF_CORE_READ(p, cpus_ptr);
	u32 n = nr_mask_words();

	/* unreadable (never seen in practice): no words, which reads as all CPUs */
	e->nr_words = bpf_probe_read_kernel(e->mask, n * sizeof(u64), m) ? 0 : n;
}

static __always_inline void note_comm(struct task_struct *p)
{
	struct sbt_comm c;
	u32 pid;

	if (!record_comm)
		return;
	pid = BPF_CORE_READ(p, pid);
	if (!pid)
		return;
	__builtin_memset(&c, 0, sizeof(c));
	bpf_probe_read_kernel_str(c.comm, sizeof(c.comm), p->comm);
	bpf_map_update_elem(&comms, &pid, &c, BPF_ANY);
}

/* This CPU executes now (only switches and ticks say so; see tr_tick()). */
static __always_inline u64 note_alive(void)
{
	u32 zero = 0;
	u64 *last, prev = 0, now;

	if (!tick_ns)
		return 0;
	last = bpf_map_lookup_elem(&last_alive, &zero);
	if (!last)
		return 0;
	now = bpf_ktime_get_ns();
	prev = *last;
	*last = now;
	return prev;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(tr_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	struct sbt_event *e;

	if (!tracing_on)
		return 0;
	note_alive();
	e = reserve(TEV_SWITCH);
	if (!e)
		return 0;
	e->prev_pid = prev->pid;
	e->pid = next->pid;
	e->tier = tier_of(next);
	/* the idle task is never in a requested cgroup: skip the reads */
	if (record_cgroup && e->pid)
		e->cgid = task_cgid(next);
	/*
	 * A preempted prev stays on its runqueue: it waits from now on. The idle
	 * task never waits. prev_state is what __schedule() acted on (it is reset
	 * to TASK_RUNNING when a pending signal cancels the sleep).
	 */
	if (e->prev_pid && (preempt || prev_state == TASK_RUNNING)) {
		e->flags |= TEVF_PREV_RUNNABLE;
		e->prev_tier = tier_of(prev);
		fill_mask(e, prev);
	} else if (prev_state & TASK_DEAD) {
		e->flags |= TEVF_PREV_DEAD;
	}
	submit(e);
	note_comm(next);
	return 0;
}

/* sched_waking / sched_wakeup_new: the task becomes runnable; tier and mask needed. */
static __always_inline int wake_event(struct task_struct *p, u8 type)
{
	struct sbt_event *e;

	if (!tracing_on)
		return 0;
	e = reserve(type);
	if (!e)
		return 0;
	e->pid = p->pid;
	e->tier = tier_of(p);
	e->aux = task_cpu_of(p);
	if (record_cgroup)
		e->cgid = task_cgid(p);
	fill_mask(e, p);
	submit(e);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(tr_waking, struct task_struct *p)
{
	return wake_event(p, TEV_WAKING);
}

/*
 * sched_wakeup only tells where a sched_waking landed (see the header
 * comment): pid and runqueue; tier and mask come from the waking.
 */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(tr_wakeup, struct task_struct *p)
{
	struct sbt_event *e;

	if (!tracing_on)
		return 0;
	e = reserve(TEV_WAKEUP);
	if (!e)
		return 0;
	e->pid = p->pid;
	e->aux = task_cpu_of(p);
	submit(e);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(tr_wakeup_new, struct task_struct *p)
{
	return wake_event(p, TEV_WAKEUP_NEW);
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(tr_migrate, struct task_struct *p, int dest_cpu)
{
	struct sbt_event *e;

	if (!tracing_on)
		return 0;
	e = reserve(TEV_MIGRATE);
	if (!e)
		return 0;
	e->pid = p->pid;
	e->aux = dest_cpu;
	fill_mask(e, p);
	submit(e);
	return 0;
}

#define CLOCK_MONOTONIC	1
#define U32_MAX_NS	0xffffffffULL

/*
 * A sleep timer fired: how late, for whom. A raw tracepoint: the type of its
 * second argument (now) differs between kernels (ktime_t * in 6.12, ktime_t
 * in 7.3), so it is not read; bpf_ktime_get_ns() is CLOCK_MONOTONIC, the timer's clock here,
 * and taken when this timer's callback is about to run it also counts the
 * timers expired before it in the same interrupt, which the sleeper waits for.
 */
SEC("raw_tp/hrtimer_expire_entry")
int tr_timer(struct bpf_raw_tracepoint_args *ctx)
{
	struct hrtimer *t = (struct hrtimer *)ctx->args[0];
	struct task_struct *p;
	struct sbt_event *e;
	s64 late;

	if (!tracing_on || !record_cgroup || !hrtimer_wakeup_fn)
		return 0;
	if ((u64)BPF_CORE_READ(t, function) != hrtimer_wakeup_fn ||
	    BPF_CORE_READ(t, base, clockid) != CLOCK_MONOTONIC)
		return 0;
	p = BPF_CORE_READ((struct hrtimer_sleeper *)((void *)t - bpf_core_field_offset(struct hrtimer_sleeper, timer)), task);
	if (!p)
		return 0;
	late = (s64)(bpf_ktime_get_ns() - BPF_CORE_READ(t, _softexpires));
	e = reserve(TEV_TIMER);
	if (!e)
		return 0;
	e->pid = BPF_CORE_READ(p, pid);
	e->aux = late <= 0 ? 0 : (u64)late > U32_MAX_NS ? (u32)U32_MAX_NS : (u32)late;
	/* task_cgid() needs a typed pointer; here p is a plain address */
	e->cgid = BPF_CORE_READ(p, cgroups, dfl_cgrp, kn, id);
	submit(e);
	return 0;
}

/*
 * The scheduler tick of this CPU. No switch happened since the CPU's last
 * tick or switch (a switch would have moved last_alive), so the task running
 * now ran throughout. If it is not the idle task, the tick was due one
 * tick_ns after that last event, and a gap of more than two ticks means the
 * CPU took no interrupt meanwhile: counted absent from the missed tick on.
 * The replay then does not count that time as the task's (CPU budgets).
 */
SEC("fentry/sched_tick")
int BPF_PROG(tr_tick)
{
	struct task_struct *curr;
	struct sbt_event *e;
	u64 prev, now, gap;

	if (!tracing_on || !tick_ns)
		return 0;
	prev = note_alive();
	now = bpf_ktime_get_ns();
	if (!prev || now - prev <= 2 * tick_ns)
		return 0;
	curr = bpf_get_current_task_btf();
	if (!curr->pid)
		return 0;
	gap = now - prev - tick_ns;
	e = reserve(TEV_ABSENT);
	if (!e)
		return 0;
	e->pid = curr->pid;
	e->aux = gap > U32_MAX_NS ? (u32)U32_MAX_NS : (u32)gap;
	submit(e);
	return 0;
}

/*
 * One-shot snapshot, run by userspace right after tracing_on is set: which
 * task is on each CPU, and which tasks are already queued (runnable,
 * not running). Without it, the first moments of the window would not know
 * about LC tasks that started waiting before tracing started. Idle tasks are
 * not visited; a CPU nobody claims (and that has not switched yet) is idle.
 */
SEC("iter/task")
int tr_snapshot(struct bpf_iter__task *ctx)
{
	struct task_struct *p = ctx->task;
	struct sbt_event *e;
	u8 type;

	if (!p)
		return 0;
	note_comm(p);
	/*
	 * on_cpu rather than rq->curr: reading the per-CPU runqueues needs its
	 * address from kallsyms, which kernels without CONFIG_KALLSYMS_ALL do not
	 * export. on_cpu is also set for a task in the middle of being switched
	 * out; that switch is traced, and userspace lets real switches override
	 * snapshot claims.
	 */
	if (BPF_CORE_READ(p, on_cpu))
		type = TEV_INIT_CURR;
	else if (BPF_CORE_READ(p, on_rq) &&
		 !(bpf_core_field_exists(p->se.sched_delayed) &&
		   BPF_CORE_READ(p, se.sched_delayed)))
		/* queued and not a delayed-dequeue sleeper (EEVDF keeps those queued) */
		type = TEV_INIT_RUNNABLE;
	else
		return 0;
	e = reserve(type);
	if (!e)
		return 0;
	e->pid = BPF_CORE_READ(p, pid);
	e->aux = task_cpu_of(p);
	e->tier = tier_of(p);
	if (type == TEV_INIT_RUNNABLE)
		fill_mask(e, p);
	if (record_cgroup)
		e->cgid = task_cgid(p);
	submit(e);
	return 0;
}
