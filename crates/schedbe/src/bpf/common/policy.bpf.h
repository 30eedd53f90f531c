/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What every policy defines alike, written once: the license, the exit
 * record userspace reads (uei), the task context in task storage, the
 * per-CPU counters and ops.exit. The types are the policy's, so the parts
 * that need them are macros, expanded in the policy's own compilation unit
 * (docs/design.md, "BPF layout").
 *
 * A policy:
 *  - defines its struct task_ctx and expands TASK_CTX_DEFINE(struct
 *    task_ctx, IS_BE): the task storage map task_ctxs, task_ctx(p),
 *    task_ctx_create(p) (for ops.init_task), current_is_be() (what
 *    sync_pick.bpf.h needs; IS_BE(c) is the policy's test of a context's
 *    last classification) and task_starve(p) (what fifo_be.bpf.h needs:
 *    every policy keeps a struct starve_win starve per task);
 *  - keeps its counters in a struct of its intf.h, reached by my_stats():
 *    PERCPU_STATS_DEFINE(T) defines a per-CPU array "stats" of T and
 *    my_stats() over it (a policy whose counters live elsewhere defines
 *    my_stats() itself). STAT_ADD(field, v) adds to this CPU's counter. A
 *    shared part that counts declares stat_<field>() at its top; the policy
 *    defines them by expanding that part's STAT_FN() group
 *    (RT_TAKEOVER_STATS, CPUMAX_STATS);
 *  - creates its dispatch queues in ops.init with create_dsq(s)() and names
 *    its ops.exit with EXIT_OP(name).
 */
#ifndef __SCHEDBE_POLICY_BPF_H
#define __SCHEDBE_POLICY_BPF_H

#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

#define TASK_CTX_DEFINE(T, IS_BE)							\
struct {										\
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);					\
	__uint(map_flags, BPF_F_NO_PREALLOC);						\
	__type(key, int);								\
	__type(value, T);								\
} task_ctxs SEC(".maps");								\
											\
static __always_inline T *task_ctx(struct task_struct *p)				\
{											\
	return bpf_task_storage_get(&task_ctxs, p, 0, 0);				\
}											\
											\
static __always_inline T *task_ctx_create(struct task_struct *p)			\
{											\
	return bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);	\
}											\
											\
/* the waker's tier as last classified (BE wakers do not sleep on cue) */		\
static __always_inline bool current_is_be(void)						\
{											\
	T *__wctx = task_ctx(bpf_get_current_task_btf());				\
											\
	return __wctx && IS_BE(__wctx);							\
}											\
											\
/* @p's parking window (fifo_be.bpf.h's need): T has a struct starve_win starve */	\
static __always_inline struct starve_win *task_starve(struct task_struct *p)		\
{											\
	T *__tctx = task_ctx(p);							\
											\
	return __tctx ? &__tctx->starve : NULL;						\
}

#define PERCPU_STATS_DEFINE(T)								\
struct {										\
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);					\
	__uint(max_entries, 1);								\
	__type(key, u32);								\
	__type(value, T);								\
} stats SEC(".maps");									\
											\
static __always_inline T *my_stats(void)						\
{											\
	u32 zero = 0;									\
	return bpf_map_lookup_elem(&stats, &zero);					\
}

#define STAT_ADD(field, v) do {								\
	__auto_type __s = my_stats();							\
	if (__s)									\
		__s->field += (v);							\
} while (0)

/* stat_<field>(v): how a shared part adds to the policy's counter <field>. */
#define STAT_FN(field)									\
static __always_inline void stat_##field(u64 v)						\
{											\
	STAT_ADD(field, v);								\
}

/* ops.init: create dispatch queue @id. */
static __always_inline s32 create_dsq(u64 id)
{
	s32 err = scx_bpf_create_dsq(id, -1);

	if (err)
		scx_bpf_error("failed to create dispatch queue %llu: %d", id, err);
	return err;
}

/* ops.init: create the @nr dispatch queues @base .. @base + @nr - 1. */
static __always_inline s32 create_dsqs(u64 base, u32 nr)
{
	u32 i;
	s32 err;

	bpf_for(i, 0, nr) {
		if ((err = create_dsq(base + i)))
			return err;
	}
	return 0;
}

#define EXIT_OP(name)									\
void BPF_STRUCT_OPS(name, struct scx_exit_info *ei)					\
{											\
	UEI_RECORD(uei, ei);								\
}

#endif /* __SCHEDBE_POLICY_BPF_H */
