/* SPDX-License-Identifier: GPL-2.0 */
/*
 * When userspace must read cgroupfs again. Each policy's daemon walks the
 * cgroup tree every second for cgroups created or removed, and reads the
 * files of new ones (cpu.weight, cpu.max). Re-reading every cgroup's files
 * every second costs a large share of a CPU on a node of many cgroups, so
 * the ones it already knows are read again only when the kernel says
 * something changed:
 *  - a cgroup got or lost the cpu controller (ops.cgroup_init/exit: its
 *    cpu.weight and cpu.max appear or go);
 *  - cpu.weight was written (ops.cgroup_set_weight, the SCHED_BE policy's
 *    weights);
 *  - cpu.max was written: bw_rescan_req (cpumax.bpf.h, v6.17+; before,
 *    userspace reads cpu.max at every rescan);
 * and, as a backstop, every 30th rescan. Userspace clears the request when
 * it reads it (cgrp_watch.rs).
 */
#ifndef __SCHEDBE_CGRP_WATCH_BPF_H
#define __SCHEDBE_CGRP_WATCH_BPF_H

#include <scx/common.bpf.h>

u32 cgrp_reread_req;

static __always_inline void cgrp_reread(void)
{
	cgrp_reread_req = 1;
}

/* ops.cgroup_init and ops.cgroup_exit: a cgroup got or lost the cpu controller. */
#define CGRP_WATCH_OPS(init_name, exit_name)						\
s32 BPF_STRUCT_OPS(init_name, struct cgroup *cgrp, struct scx_cgroup_init_args *args)	\
{											\
	cgrp_reread();									\
	return 0;									\
}											\
											\
void BPF_STRUCT_OPS(exit_name, struct cgroup *cgrp)					\
{											\
	cgrp_reread();									\
}

#endif /* __SCHEDBE_CGRP_WATCH_BPF_H */
