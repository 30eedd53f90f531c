/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A QEMU TCG plugin: how many guest instructions each translation block
 * executed, by the block's guest virtual address. Written at QEMU's exit as
 * "vaddr n_insns executions" lines; scripts/tbprof/bpf-insns.py names them
 * with the guest's /proc/kallsyms, BPF programs included.
 *
 * Why: under emulation the kernel's BPF run-time statistics measure wall
 * time, which the emulator's own costs dominate and which moves by tens of
 * percent from boot to boot; perf's cpu-clock samples cannot land in the
 * scheduler's callbacks (interrupts are off there). Executed instructions
 * are exact and the same in every boot for the same work.
 *
 * Only the plugin API's stable calls are used, declared here, so no QEMU
 * headers are needed. Usage: qemu ... -plugin libtbprof.so,out=FILE
 * (scripts/tbprof/run.sh does this through scripts/vm.sh).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct {
	const char *target_name;
	struct { int min, cur; } version;
	bool system_emulation;
} qemu_info_t;
struct qemu_plugin_tb;
typedef void (*tb_trans_cb_t)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*vcpu_udata_cb_t)(unsigned int, void *);
typedef void (*udata_cb_t)(qemu_plugin_id_t, void *);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb_t);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *, vcpu_udata_cb_t, int, void *);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_cb_t, void *);

__attribute__((visibility("default"))) int qemu_plugin_version = 4;

/* One entry per (address, length): a block translated again reuses its entry. */
struct tb_count {
	uint64_t vaddr, n_insns, execs;
};

#define NR_SLOTS (1u << 22)
static struct tb_count *slots;
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *out_path = "tbprof.out";

static void tb_exec(unsigned int vcpu, void *udata)
{
	__atomic_fetch_add(&((struct tb_count *)udata)->execs, 1, __ATOMIC_RELAXED);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t va = qemu_plugin_tb_vaddr(tb), n = qemu_plugin_tb_n_insns(tb);
	uint64_t h = (va * 0x9E3779B97F4A7C15ull) >> 42;
	struct tb_count *e = NULL;

	pthread_mutex_lock(&slots_lock);
	for (uint32_t i = 0; i < NR_SLOTS && !e; i++) {
		struct tb_count *c = &slots[(h + i) & (NR_SLOTS - 1)];

		if (!c->vaddr) {
			c->vaddr = va;
			c->n_insns = n;
		}
		if (c->vaddr == va && c->n_insns == n)
			e = c;
	}
	pthread_mutex_unlock(&slots_lock);
	/* a full table drops new blocks; 4M slots hold a whole boot many times over */
	if (e)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, 0 /* no registers */, e);
}

static void at_exit(qemu_plugin_id_t id, void *unused)
{
	FILE *f = fopen(out_path, "w");

	if (!f) {
		perror(out_path);
		return;
	}
	for (uint32_t i = 0; i < NR_SLOTS; i++)
		if (slots[i].execs)
			fprintf(f, "%lx %lu %lu\n", (unsigned long)slots[i].vaddr,
				(unsigned long)slots[i].n_insns, (unsigned long)slots[i].execs);
	fclose(f);
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			out_path = argv[i] + 4;
	slots = calloc(NR_SLOTS, sizeof(*slots));
	if (!slots)
		return 1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
