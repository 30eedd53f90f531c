/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Akita's periodic servers (akita.bpf.c): a server's budget, period,
 * deadline and temperature brought up to date on its own CPU, the CPU's mode,
 * and the choice of the server a CPU runs next.
 *
 * Everything here runs on the server's CPU (ops.dispatch, ops.running,
 * ops.stopping there), so a server's state has one writer and needs no lock.
 *
 * sync_server() and pick_server() are global functions (__weak): the
 * verifier checks each once, on its own. As static functions it would walk
 * them in every state of ops.dispatch's server loop, a large share of each
 * load (docs/testing.md, "Load time"; scripts/ab/verifier-cost.sh).
 */
#ifndef __AKITA_SERVER_BPF_H
#define __AKITA_SERVER_BPF_H

#include <scx/common.bpf.h>
#include "state.bpf.h"	/* the maps, sconf(), srun(), server_dsq() */

/*
 * Bring a server's state up to @now, on its own CPU: a new server starts a
 * period; at each period boundary the budget refills, the deadline moves,
 * throttled time is closed and a HI server cools (section 3.3).
 */
__weak int sync_server(const struct akita_server_conf *c __arg_nonnull, struct akita_server_run *r __arg_nonnull,
		       u64 now)
{
	u64 k, end, cool;

	if (r->gen != c->gen) {
		__builtin_memset(r, 0, sizeof(*r));
		r->gen = c->gen;
		/*
		 * Periods run on a grid of multiples of T on the monotonic
		 * clock: servers with the same period share deadlines, and ties
		 * go to the least recently run, so LO servers squeezed by a HI
		 * one in HI mode lose alike instead of by the phase of their
		 * first period.
		 */
		r->period_start = c->period_ns ? now - now % c->period_ns : now;
		r->deadline = r->period_start + c->rel_deadline_ns;
		return 0;
	}
	if (!c->period_ns || now - r->period_start < c->period_ns)
		return 0;
	k = (now - r->period_start) / c->period_ns;
	end = r->period_start + c->period_ns;
	if (r->exhausted_at && r->exhausted_at < end)
		r->throttled_ns += end - r->exhausted_at;
	if (r->used_ns)
		r->nr_periods++;
	if (c->hi && r->temperature) {
		cool = r->overran ? k - 1 : k;
		r->temperature = r->temperature > cool ? r->temperature - cool : 0;
	}
	/* CPU time per period, averaged over about eight periods (ties among equal deadlines) */
	r->avg_used_ns = (r->avg_used_ns * 7 + r->used_ns) / 8;
	if (k > 1)
		r->avg_used_ns = k > 16 ? 0 : r->avg_used_ns >> (k - 1) / 4;
	r->period_start += k * c->period_ns;
	r->deadline = r->period_start + c->rel_deadline_ns;
	r->used_ns = 0;
	r->exhausted_at = 0;
	r->overran = 0;
	return 0;
}

/* Active: budget left in this period (or a boundary passed, which refills it). */
static __always_inline bool server_active(const struct akita_server_conf *c,
					  const struct akita_server_run *r, u64 now)
{
	return r->gen != c->gen || now - r->period_start >= c->period_ns ||
	       r->used_ns < c->budget_ns;
}

static __always_inline u32 active_rank(const struct akita_server_conf *c, u32 mode)
{
	return mode == AKITA_MODE_HI && c->hi ? AKITA_RANK_HI_ACTIVE : AKITA_RANK_ACTIVE;
}

static void enter_hi_mode(struct akita_cpu_run *cr, u64 now)
{
	if (cr->mode == AKITA_MODE_HI)
		return;
	cr->mode = AKITA_MODE_HI;
	cr->hi_since = now;
	cr->mode_switches++;
}

/* What pick_server() found best. */
struct pick {
	s32 sid;
	u32 rank;
	u64 key;		/* active: deadline; inactive: last_run */
	u64 tie;		/* equal deadlines: the least used over the last periods first */
	u64 last_run;		/* then the least recently run */
};

/*
 * The best server of @cpu to run, in @best, after bringing each up to @now;
 * see the header's order. Returns a removed VM's server whose queue still
 * holds tasks (they run as host tasks), or -1.
 */
__weak s32 pick_server(s32 cpu, s32 prev_sid, u64 now, struct akita_cpu_run *cr __arg_nonnull,
		       struct pick *best __arg_nonnull)
{
	struct akita_cpu_conf *cc;
	struct akita_server_conf *c;
	struct akita_server_run *r;
	u32 i, nr, k = cpu, rank;
	u64 key, end, lr, tie, next_event = 0;
	bool warm = false;
	s32 sid, drain = -1;

	best->sid = -1;
	best->rank = AKITA_RANK_IDLE;
	best->key = ~0ULL;
	best->tie = ~0ULL;
	best->last_run = ~0ULL;
	if (!(cc = bpf_map_lookup_elem(&akita_cpus, &k)))
		return -1;
	nr = cc->nr;
	bpf_for(i, 0, nr) {
		if (i >= AKITA_MAX_PER_CPU)
			break;
		sid = cc->servers[i];
		if (sid >= AKITA_MAX_SERVERS || !(c = sconf(sid)) || !(r = srun(sid)))
			continue;
		if (c->cpu != cpu)
			continue;
		r->queued = scx_bpf_dsq_nr_queued(server_dsq(sid));
		if (!c->valid) {
			/* a removed VM's server: what its queue holds runs as host tasks */
			if (r->queued)
				drain = sid;
			continue;
		}
		sync_server(c, r, now);
		if (c->hi && r->temperature)
			warm = true;
		if (sid != prev_sid && !r->queued)
			continue;
		lr = sid == prev_sid ? now : r->last_run;
		if (r->used_ns < c->budget_ns) {
			rank = active_rank(c, cr->mode);
			key = r->deadline;
		} else {
			rank = AKITA_RANK_INACTIVE;
			key = lr;
			end = r->period_start + c->period_ns;
			if (!next_event || end < next_event)
				next_event = end;
		}
		/*
		 * Equal deadlines (same period, on the grid): the server that got
		 * less over the last periods first, then the least recently run,
		 * so that when the periods are squeezed (a HI server in HI mode)
		 * the LO servers lose alike, not always the same one.
		 */
		tie = r->avg_used_ns;
		if (rank < best->rank || (rank == best->rank && key < best->key) ||
		    (rank == best->rank && key == best->key &&
		     (tie < best->tie || (tie == best->tie && lr < best->last_run)))) {
			best->sid = sid;
			best->rank = rank;
			best->key = key;
			best->tie = tie;
			best->last_run = lr;
		}
	}
	cr->next_event = next_event;
	if (cr->mode == AKITA_MODE_HI && !warm) {
		cr->mode = AKITA_MODE_LO;
		cr->hi_ns += now - cr->hi_since;
	}
	/* The mode may have changed after ranks were given: HI vs LO ties are re-ranked at the next pick. */
	return drain;
}

#endif /* __AKITA_SERVER_BPF_H */
