/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Akita policy's state that its parts share (akita.bpf.c,
 * akita_server.bpf.h, akita_stint.bpf.h): the tunables userspace sets
 * before load, the servers' and CPUs' maps, and what it keeps per task.
 */
#ifndef __AKITA_STATE_BPF_H
#define __AKITA_STATE_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "../common/policy.bpf.h"
#include "../common/tier_cache.bpf.h"
#include "../common/park_report.bpf.h"

/* Tunables, set by userspace before load. */
const volatile u64 host_slice_ns = 5ULL * 1000 * 1000;
const volatile u64 inactive_slice_ns = 5ULL * 1000 * 1000;
const volatile u64 be_slice_ns = 20ULL * 1000 * 1000;
const volatile u64 guard_slice_ns = 2ULL * 1000 * 1000;
const volatile u64 starvation_limit_ns = 2ULL * 1000 * 1000 * 1000;
const volatile u32 initial_temperature = 5;

/* No slice is cut below this: a shorter one costs more in switching than it serves. */
#define AKITA_MIN_SLICE_NS	(50ULL * 1000)

/* Bumped by userspace after it changes servers or vm_cgrps: tasks are reclassified. */
u64 akita_gen;

static u64 host_vtime_now;

enum { KIND_HOST = 0, KIND_VCPU = 1, KIND_BE = 2 };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AKITA_MAX_SERVERS);
	__type(key, u32);
	__type(value, struct akita_server_conf);
} akita_servers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AKITA_MAX_SERVERS);
	__type(key, u32);
	__type(value, struct akita_server_run);
} akita_srun SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AKITA_MAX_CPUS);
	__type(key, u32);
	__type(value, struct akita_cpu_conf);
} akita_cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AKITA_MAX_CPUS);
	__type(key, u32);
	__type(value, struct akita_cpu_run);
} akita_crun SEC(".maps");

struct task_ctx {
	u64 run_start;		/* start of the stint being charged */
	u64 wake_at;		/* ops.runnable: CPU access latency starts */
	u64 cls_gen;		/* akita_gen the server was looked up at */
	u64 cls_cgrp;		/* the task's cgroup (id) then */
	s32 server;		/* its server by vm_cgrps; -1: in no VM */
	u8 kind;		/* KIND_*, as of the last classification */
	struct tier_memo memo;
	struct starve_win starve;	/* BE: parking's starvation window */
};

#define TCTX_IS_BE(c)	((c)->kind == KIND_BE)

TASK_CTX_DEFINE(struct task_ctx, TCTX_IS_BE)

static __always_inline struct akita_server_conf *sconf(s32 sid)
{
	u32 k = sid;
	return bpf_map_lookup_elem(&akita_servers, &k);
}

static __always_inline struct akita_server_run *srun(s32 sid)
{
	u32 k = sid;
	return bpf_map_lookup_elem(&akita_srun, &k);
}

static __always_inline struct akita_cpu_run *crun(s32 cpu)
{
	u32 k = cpu;
	return bpf_map_lookup_elem(&akita_crun, &k);
}

/* The counters STAT_ADD() adds to: this CPU's (each CPU writes only its own). */
static __always_inline struct akita_cpu_run *my_stats(void)
{
	return crun(bpf_get_smp_processor_id());
}

static __always_inline u64 server_dsq(s32 sid) { return AKITA_SERVER_DSQ_BASE + sid; }

#endif /* __AKITA_STATE_BPF_H */
