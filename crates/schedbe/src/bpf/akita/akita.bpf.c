/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Akita (shared/papers/004) on sched_ext: mixed-criticality VMs as periodic
 * servers, EDF-VD per CPU, mode switches and temperatures (section 3).
 *
 * A VM is a cgroup; each of its vCPUs is a periodic server with a budget and
 * a period T, placed on one CPU by userspace (first-fit under the EDF-VD
 * test, akita/placement.rs). A vCPU's tasks are its threads: those of a
 * libvirt vcpuK sub-cgroup, or thread tid of the VM cgroup on server
 * tid % vcpus (vm_cgrps), or, for a VM with vcpus = "threads", the server
 * userspace admitted for that thread (vm_threads; a thread not admitted yet,
 * or refused by the EDF-VD test, is a host task). Every other task is a host
 * task, or BE by the shared tier rules (tier.bpf.h).
 *
 * What a CPU runs, best first (enum AKITA_RANK_*):
 *   1. active vCPUs placed on it, earliest deadline first; in HI mode the
 *      active HI vCPUs before the active LO ones;
 *   2. host tasks (one global queue, weighted virtual time);
 *   3. inactive vCPUs placed on it (out of budget), least recently run
 *      first: the policy is work conserving;
 *   4. BE tasks (one global FIFO queue).
 *
 * Invariants:
 *  budgets:  a server runs as active for at most its budget per period
 *            (C_pes for HI, C_opt for LO, section 3.2); its slice is cut to
 *            what is left and a per-CPU timer ends it on time
 *            (slice_expiry.bpf.h). Budgets refill on a fixed grid of
 *            periods; the deadline of a period is its start + x*T (HI) or
 *            + T (LO), x being the CPU's EDF-VD factor (equation 5).
 *  mode:     a CPU enters HI mode when a HI vCPU has used C_opt in the
 *            period and is still runnable (its slice is cut at C_opt in LO
 *            mode, so this is seen at once), and returns to LO mode when no
 *            HI vCPU on it is warm. Needing C_pes sets a vCPU's temperature
 *            to initial_temperature; each period that ends without it
 *            cools it by one (section 3.3).
 *  pinning:  a vCPU runs only on its CPU. A task whose affinity excludes
 *            that CPU is scheduled as a host task.
 *  host:     tasks in no VM run before any vCPU out of budget, so the
 *            host gets at least the CPU time the budgets leave, and a VM
 *            gets at least its budget whatever the host does.
 *  BE:       below everything; a BE task queued longer than
 *            starvation_limit_ns gets one guard slice, and so does a host
 *            task when a CPU has served none for that long (one pinned
 *            there may wait for nothing else), so the sched_ext watchdog
 *            never fires (a vCPU waits at most one period, capped at 10 s).
 *            A per-CPU kernel thread goes to the head of its CPU's local
 *            queue: it runs when the current slice ends.
 *  parking: a BE task runnable for a whole park_after_ns window with
 *            under 1/32 of it on a CPU is reported (park_report.bpf.h) and
 *            userspace freezes its BE cgroup (park.rs), as under the
 *            SCHED_BE policy. A queued BE task that is dying or has a freeze
 *            pending runs at the next walk of the BE queue (be_walk): the
 *            freezer stops it only on its way to user space.
 *  activation: a vCPU whose budget refills while a lower rank runs on its
 *            CPU preempts it at the period boundary: that CPU's running
 *            slice is cut to the earliest boundary of a queued inactive
 *            server (next_event), and a server queued later kicks it.
 *
 * Who writes what: userspace writes akita_servers (per server), akita_cpus
 * (the servers of each CPU), vm_cgrps and vm_threads, and bumps akita_gen
 * after any change; BPF writes akita_srun and akita_crun, each only from the
 * CPU the state belongs to (a server's state from its CPU), so they need no locks.
 * Enqueue on another CPU only reads them, to decide whether to kick.
 *
 * Shared with the other policies (common/): policy.bpf.h (task context,
 * ops.exit), tier_cache.bpf.h (BE rules), task_state.bpf.h (dying and
 * freezing tasks run), slice_expiry.bpf.h, fifo_be.bpf.h (the FIFO BE tier:
 * its queue, starvation guard and parking's walk), park_report.bpf.h
 * (parking's starvation windows and reports), sync_pick.bpf.h (the kernel's
 * CPU picker, never a BE waker's busy CPU), rt_takeover.bpf.h (what waits in
 * the local queue of a CPU an RT/DL task takes goes back through
 * ops.enqueue: a host task finds another CPU).
 * This policy's own parts (this folder): state.bpf.h (tunables, maps, what
 * it keeps per task), akita_server.bpf.h (budgets, periods, modes, and the
 * server a CPU runs next), akita_stint.bpf.h (what a task's time on a CPU
 * is charged to, and how long it may run there).
 * Not here (docs/akita.md): cpu.max, LO vCPUs borrowing other idle CPUs.
 */
#include <scx/common.bpf.h>
#include "intf.h"
#include "state.bpf.h"
#include "akita_server.bpf.h"
#include "akita_stint.bpf.h"
#include "../common/policy.bpf.h"
#include "../common/tier_cache.bpf.h"
#include "../common/task_state.bpf.h"
#include "../common/fifo_be.bpf.h"
#include "../common/slice_expiry.bpf.h"
#include "../common/park_report.bpf.h"
#include "../common/sync_pick.bpf.h"
#include "../common/rt_takeover.bpf.h"

/* The counters rt_takeover.bpf.h adds to: this CPU's struct akita_cpu_run. */
RT_TAKEOVER_STATS

/*
 * vm_cgrps: a VM's cgroup (or a libvirt vcpuK cgroup) -> its servers.
 * Written by userspace, with akita_gen bumped after.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u64);	/* cgroup id */
	__type(value, struct akita_vm_cgrp);
} vm_cgrps SEC(".maps");

/*
 * The threads of VMs with vcpus = "threads" (vm_cgrps nr == 0): tid -> the
 * server userspace admitted for it. A server is written valid before its
 * thread's entry, so a lookup never finds a server that is not there yet.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AKITA_MAX_SERVERS);
	__type(key, u32);	/* tid */
	__type(value, u32);	/* server id */
} vm_threads SEC(".maps");

/* A thread of a vcpus = "threads" VM: its own server, or -1 (a host task) until admitted. */
static s32 thread_server(struct task_struct *p)
{
	u32 tid = p->pid, *sid;

	sid = bpf_map_lookup_elem(&vm_threads, &tid);
	return sid ? (s32)*sid : -1;
}

/*
 * The server @p's cgroup puts it on: the deepest ancestor-or-self in
 * vm_cgrps (a libvirt vcpuK cgroup lies below its VM's cgroup). -1: none.
 */
static s32 vm_server_of(struct task_struct *p)
{
	struct cgroup *cgrp, *anc;
	struct akita_vm_cgrp *v;
	int level, i;
	u64 id;

	cgrp = BPF_CORE_READ(p, cgroups, dfl_cgrp);
	if (!cgrp)
		return -1;
	level = BPF_CORE_READ(cgrp, level);
	bpf_for(i, 0, SCHEDBE_MAX_CGRP_DEPTH) {
		if (level - i < 1)
			break;
		anc = NULL;
		if (bpf_probe_read_kernel(&anc, sizeof(anc), &cgrp->ancestors[level - i]) || !anc)
			break;
		id = BPF_CORE_READ(anc, kn, id);
		v = bpf_map_lookup_elem(&vm_cgrps, &id);
		if (v)
			return v->nr ? v->base + (v->nr > 1 ? (u32)p->pid % v->nr : 0) : thread_server(p);
	}
	return -1;
}

/*
 * KIND_BE by the shared rules (unless it must run: dying, freezing);
 * KIND_VCPU if its VM's server is valid and it may run on the server's
 * CPU; otherwise KIND_HOST. The VM lookup is remembered until the task
 * changes cgroup or userspace bumps akita_gen; affinity is read live.
 */
static u8 classify(struct task_struct *p, struct task_ctx *tctx)
{
	struct akita_server_conf *c;
	u64 gen, cg;
	u8 kind = KIND_HOST;

	if (tier_runs_as_be(p, &tctx->memo)) {
		kind = KIND_BE;
		goto out;
	}
	gen = *(volatile u64 *)&akita_gen;
	cg = task_cgid(p);
	if (tctx->cls_gen != gen || tctx->cls_cgrp != cg) {
		tctx->server = vm_server_of(p);
		tctx->cls_gen = gen;
		tctx->cls_cgrp = cg;
	}
	if (tctx->server < 0 || !(c = sconf(tctx->server)) || !c->valid)
		goto out;
	if (!bpf_cpumask_test_cpu(c->cpu, p->cpus_ptr))
		goto out;
	if (is_migration_disabled(p) && scx_bpf_task_cpu(p) != c->cpu)
		goto out;
	kind = KIND_VCPU;
out:
	/*
	 * A BE task's dsq_vtime is when it was queued (fifo_note_enqueue), not
	 * virtual time: leaving BE (killed, being frozen, reclassified) it
	 * starts at the host clock, as a new task would.
	 */
	if (tctx->kind == KIND_BE && kind != KIND_BE)
		p->scx.dsq_vtime = host_vtime_now;
	tctx->kind = kind;
	return kind;
}

s32 BPF_STRUCT_OPS(akita_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	struct akita_server_conf *c;
	bool is_idle = false;
	s32 cpu;

	if (!tctx)
		return prev_cpu;
	switch (classify(p, tctx)) {
	case KIND_VCPU:
		/* pinned: it wakes on its CPU, and ops.enqueue decides whether it preempts */
		c = sconf(tctx->server);
		return c ? c->cpu : prev_cpu;
	case KIND_BE:
		/* BE goes through ops.dispatch, which takes everything else first */
		return prev_cpu;
	}
	/* never a BE waker's busy CPU reported idle (sync_pick.bpf.h) */
	cpu = pick_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	if (is_idle)
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, host_slice_ns, 0);
	return cpu;
}

/* A host task is queued and no CPU was idle: preempt a CPU running an inactive vCPU or BE. */
static void host_kick(struct task_struct *p)
{
	struct akita_cpu_run *cr;
	s32 cpu;
	u32 i;

	cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (cpu >= 0) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		return;
	}
	bpf_for(i, 0, scx_bpf_nr_cpu_ids()) {
		if (i >= AKITA_MAX_CPUS)
			break;
		if (!bpf_cpumask_test_cpu(i, p->cpus_ptr) || !(cr = crun(i)))
			continue;
		if (cr->cur_rank == AKITA_RANK_INACTIVE || cr->cur_rank == AKITA_RANK_BE) {
			scx_bpf_kick_cpu(i, SCX_KICK_PREEMPT);
			return;
		}
	}
}

/*
 * A vCPU is queued on its CPU: kick it if the vCPU outranks what runs there
 * (ties among active vCPUs go by deadline), or if its period boundary comes
 * before that CPU's next_event (so the CPU re-arms its slice for it).
 * Reads state another CPU writes: a stale read costs one needless kick or
 * a preemption at the next boundary, never a lost task.
 */
static void vcpu_kick(s32 sid, u64 now)
{
	struct akita_server_conf *c = sconf(sid);
	struct akita_server_run *r = srun(sid);
	struct akita_cpu_run *cr;
	u64 dl, end;
	u32 rank;

	if (!c || !r || !(cr = crun(c->cpu)))
		return;
	if (cr->cur_rank == AKITA_RANK_IDLE) {
		scx_bpf_kick_cpu(c->cpu, SCX_KICK_IDLE);
		return;
	}
	if (server_active(c, r, now)) {
		rank = active_rank(c, cr->mode);
		dl = r->gen == c->gen && now - r->period_start < c->period_ns ?
			r->deadline : now - now % c->period_ns + c->rel_deadline_ns;
		if (rank < cr->cur_rank || (rank == cr->cur_rank && dl < cr->cur_deadline))
			scx_bpf_kick_cpu(c->cpu, SCX_KICK_PREEMPT);
		return;
	}
	end = r->period_start + c->period_ns;
	if (cr->cur_rank > AKITA_RANK_ACTIVE && (!cr->next_event || end < cr->next_event))
		scx_bpf_kick_cpu(c->cpu, SCX_KICK_PREEMPT);
}

void BPF_STRUCT_OPS(akita_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	u64 now = bpf_ktime_get_ns(), vtime, floor;
	s32 cpu;
	u8 kind = tctx ? classify(p, tctx) : KIND_HOST;

	if (kind == KIND_VCPU) {
		scx_bpf_dsq_insert(p, server_dsq(tctx->server), inactive_slice_ns, enq_flags);
		vcpu_kick(tctx->server, now);
		return;
	}
	if (kind == KIND_BE) {
		fifo_be_enqueue(p, &tctx->starve, AKITA_BE_DSQ, be_slice_ns, enq_flags, now);
		return;
	}
	/*
	 * A per-CPU kernel thread (kworker, ksoftirqd) can run nowhere else, and
	 * budgets may fill its CPU: it goes to the head of that CPU's local
	 * queue and runs when the current slice ends (the kernel's own work
	 * comes first, as the hypervisor's does in Xen). Not while an RT/DL
	 * task holds that CPU: rescue_stranded() would send it back at every
	 * tick of another CPU; in the host queue it waits for
	 * that CPU's next dispatch, as it would have waited there.
	 */
	if ((p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1) {
		cpu = scx_bpf_task_cpu(p);
		if (!rt_holds(cpu)) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, host_slice_ns, enq_flags | SCX_ENQ_HEAD);
			return;
		}
	}
	/* A sleeper keeps at most one slice of credit. */
	vtime = p->scx.dsq_vtime;
	floor = host_vtime_now - host_slice_ns;
	if (time_before(vtime, floor))
		vtime = floor;
	scx_bpf_dsq_insert_vtime(p, AKITA_HOST_DSQ, host_slice_ns, vtime, enq_flags);
	host_kick(p);
}

/*
 * Parking's walk of the BE queue (fifo_be.bpf.h). A task it moves here runs
 * for a BE slice; its next enqueue classifies it a host task (classify()).
 */
static bool be_walk(s32 cpu, u64 now, struct akita_cpu_run *cr)
{
	return fifo_be_walk(AKITA_BE_DSQ, cpu, now, be_slice_ns, &cr->be_walk_next, &cr->starved_reports,
			    &cr->be_rescues);
}

/*
 * The starvation guard: one slice for a BE task queued too long, or for a
 * host task when this CPU has served no host task for too long (a task
 * pinned here may wait for nothing else: the budgets may fill the CPU).
 */
static bool guard(s32 cpu, u64 now, struct akita_cpu_run *cr)
{
	bool host = scx_bpf_dsq_nr_queued(AKITA_HOST_DSQ) > 0 &&
		    now - cr->host_last > starvation_limit_ns;

	if (be_walk(cpu, now, cr))
		return true;

	if (host) {
		/* whether or not one may run here, look again only after another limit */
		cr->host_last = now;
		if (scx_bpf_dsq_move_to_local(AKITA_HOST_DSQ, 0)) {
			cr->be_guards++;
			return true;
		}
	}
	if (!fifo_head_waited(AKITA_BE_DSQ, now, starvation_limit_ns) || !scx_bpf_dsq_move_to_local(AKITA_BE_DSQ, 0))
		return false;
	cr->be_guards++;
	return true;
}

/* Run server @sid's next task here, or keep @prev (of that server) if none is queued. */
static bool run_server(s32 sid, s32 cpu, struct task_struct *prev, s32 prev_sid, u64 now)
{
	struct task_ctx *tctx;

	if (scx_bpf_dsq_move_to_local(server_dsq(sid), 0))
		return true;
	if (sid != prev_sid || !prev || !(tctx = task_ctx(prev)))
		return false;
	start_stint(prev, tctx, cpu, now);
	return true;
}

static bool keep_prev(struct task_struct *prev, bool prev_runnable, u8 kind, s32 cpu, u64 now)
{
	struct task_ctx *tctx;

	if (!prev_runnable || !(tctx = task_ctx(prev)) || tctx->kind != kind)
		return false;
	start_stint(prev, tctx, cpu, now);
	return true;
}

void BPF_STRUCT_OPS(akita_dispatch, s32 cpu, struct task_struct *prev)
{
	bool prev_runnable = prev && (prev->scx.flags & SCX_TASK_QUEUED);
	struct task_ctx *ptctx = prev ? task_ctx(prev) : NULL;
	struct akita_cpu_run *cr = crun(cpu);
	u64 now = bpf_ktime_get_ns();
	s32 prev_sid = -1, drain;
	struct pick best;

	if (!cr)
		return;
	/* prev has run since its stint began; charge it first (mode switch, exhaustion) */
	if (prev_runnable && ptctx) {
		charge(prev, ptctx, cpu, now, true);
		if (ptctx->kind == KIND_VCPU)
			prev_sid = ptctx->server;
	}
	if (guard(cpu, now, cr))
		return;
	drain = pick_server(cpu, prev_sid, now, cr, &best);
	if (best.rank <= AKITA_RANK_ACTIVE && run_server(best.sid, cpu, prev, prev_sid, now))
		return;
	if (drain >= 0 && scx_bpf_dsq_move_to_local(server_dsq(drain), 0))
		return;
	if (scx_bpf_dsq_move_to_local(AKITA_HOST_DSQ, 0))
		return;
	if (keep_prev(prev, prev_runnable, KIND_HOST, cpu, now))
		return;
	if (best.rank == AKITA_RANK_INACTIVE && run_server(best.sid, cpu, prev, prev_sid, now))
		return;
	if (scx_bpf_dsq_move_to_local(AKITA_BE_DSQ, 0))
		return;
	keep_prev(prev, prev_runnable, KIND_BE, cpu, now);
}

void BPF_STRUCT_OPS(akita_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = task_ctx(p);

	if (tctx)
		tctx->wake_at = bpf_ktime_get_ns();
}

/* CPU access latency (section 2: wakeup to running), per server. */
static void record_cal(struct task_ctx *tctx, s32 cpu, u64 now)
{
	struct akita_server_conf *c;
	struct akita_server_run *r;
	u64 lat;

	if (!tctx->wake_at)
		return;
	lat = now - tctx->wake_at;
	tctx->wake_at = 0;
	if (tctx->kind != KIND_VCPU || tctx->server < 0 ||
	    !(c = sconf(tctx->server)) || !(r = srun(tctx->server)) || c->cpu != cpu)
		return;
	r->cal_sum_ns += lat;
	r->cal_n++;
	if (lat > r->cal_max_ns)
		r->cal_max_ns = lat;
	if (lat > c->period_ns)
		r->cal_over_period++;
}

void BPF_STRUCT_OPS(akita_running, struct task_struct *p)
{
	struct task_ctx *tctx = task_ctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	u64 now = bpf_ktime_get_ns();

	if (!tctx)
		return;
	tctx->run_start = now;
	if (tctx->kind == KIND_HOST && time_before(host_vtime_now, p->scx.dsq_vtime))
		host_vtime_now = p->scx.dsq_vtime;
	start_stint(p, tctx, cpu, now);
	record_cal(tctx, cpu, now);
}

void BPF_STRUCT_OPS(akita_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *tctx = task_ctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	struct akita_server_run *r;
	struct akita_cpu_run *cr;
	u64 now = bpf_ktime_get_ns(), d;

	if (!tctx)
		return;
	d = now - tctx->run_start;
	charge(p, tctx, cpu, now, runnable);
	starve_ran(&tctx->starve, d, runnable);
	if (tctx->kind == KIND_HOST && p->scx.weight)
		p->scx.dsq_vtime += d * 100 / p->scx.weight;
	if (tctx->kind == KIND_VCPU && tctx->server >= 0 && (r = srun(tctx->server)))
		r->last_run = now;
	if ((cr = crun(cpu)))
		cr->cur_rank = AKITA_RANK_IDLE;
}

/* Per tick: rescue tasks stranded behind an RT/DL task on another CPU (v7.1+). */
void BPF_STRUCT_OPS(akita_tick, struct task_struct *p)
{
	if (nr_rt_cpus > 0)	/* no clock read while no RT/DL task holds a CPU */
		rescue_stranded(bpf_get_smp_processor_id(), bpf_ktime_get_ns());
}

RT_CPU_RELEASE_OP(akita_cpu_release)

void BPF_STRUCT_OPS(akita_enable, struct task_struct *p)
{
	p->scx.dsq_vtime = host_vtime_now;
}

s32 BPF_STRUCT_OPS(akita_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct task_ctx *tctx;

	tctx = task_ctx_create(p);
	if (!tctx)
		return -ENOMEM;
	tctx->server = -1;
	tctx->cls_gen = ~0ULL;
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(akita_init)
{
	struct akita_cpu_run *cr;
	u32 i;
	/* a queue per server, the host queue, the BE queue */
	s32 err = create_dsqs(AKITA_SERVER_DSQ_BASE, AKITA_MAX_SERVERS);

	if (!err)
		err = create_dsq(AKITA_HOST_DSQ);
	if (!err)
		err = create_dsq(AKITA_BE_DSQ);
	if (err)
		return err;
	bpf_for(i, 0, AKITA_MAX_CPUS) {
		if ((cr = crun(i)))
			cr->cur_rank = AKITA_RANK_IDLE;
	}
	return slice_expiry_init();
}

TIER_SET_IDLE_OP(akita_cgroup_set_idle)
EXIT_OP(akita_exit)

SCX_OPS_DEFINE(akita_ops,
	       .select_cpu	= (void *)akita_select_cpu,
	       .enqueue		= (void *)akita_enqueue,
	       .dispatch	= (void *)akita_dispatch,
	       .runnable	= (void *)akita_runnable,
	       .running		= (void *)akita_running,
	       .stopping	= (void *)akita_stopping,
	       .tick		= (void *)akita_tick,
	       .cpu_release	= (void *)akita_cpu_release,
	       .enable		= (void *)akita_enable,
	       .init_task	= (void *)akita_init_task,
	       .init		= (void *)akita_init,
	       .exit		= (void *)akita_exit,
	       .cgroup_set_idle	= (void *)akita_cgroup_set_idle,
	       .name		= "schedbe_akita");
