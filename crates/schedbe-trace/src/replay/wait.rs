//! Task state transitions around waiting: a task starts waiting, its tier,
//! mask or runqueue changes while it waits, it is switched in.

use super::latency::Latency;
use super::state::TState;
use super::{CpuMask, Pid, Replay, Tier};

/// How a wait began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WaitCause {
    /// Woken (sched_waking, or sched_wakeup without one) or new
    /// (sched_wakeup_new): waiting from now; counts for the wakeup latency.
    Wakeup,
    /// Switched out while still runnable: waiting from now.
    Preempted,
    /// Found queued by the start-up snapshot: waiting since tracing started
    /// at the latest.
    Snapshot,
}

impl Replay {
    /// Task `pid` starts waiting at `now` (if it was not already).
    pub(super) fn start_wait(
        &mut self,
        pid: Pid,
        now: u64,
        cause: WaitCause,
        tier: Tier,
        mask: CpuMask,
        cpu: Option<u32>,
    ) {
        if self.task(pid).state == TState::Waiting {
            self.update_waiter(pid, now, Some(tier), Some(mask));
            if let Some(c) = cpu {
                self.set_queue_cpu(pid, c, now);
            }
            return;
        }
        let since = match cause {
            WaitCause::Snapshot => self.cfg.trace_start.min(now),
            WaitCause::Wakeup | WaitCause::Preempted => now,
        };
        if tier == Tier::Lc {
            self.advance_be_idle(now);
            self.lc_waiting.insert((since, pid));
        }
        let t = self.task(pid);
        t.state = TState::Waiting;
        t.since = since;
        t.woken = cause == WaitCause::Wakeup;
        t.tier = Some(tier);
        t.mask = mask;
        if cpu.is_some() {
            t.last_cpu = cpu;
        }
        let set = t.cgroups;
        self.cgroups.wait_change((pid, since), 0, set, now);
    }

    /// Task `pid` is in cgroup `id` (0: not recorded, nothing changes). A
    /// waiting task then waits in the requested cgroups of `id`.
    pub(super) fn note_cgroup(&mut self, pid: Pid, id: u64, now: u64) {
        if id == 0 || pid == 0 {
            return;
        }
        let set = self.cgroups.set_of(id);
        let t = self.task(pid);
        let (old, waiting, since) = (t.cgroups, t.state == TState::Waiting, t.since);
        t.cgroups = set;
        if waiting {
            self.cgroups.wait_change((pid, since), old, set, now);
        }
    }

    /// Tier and/or mask of an already waiting task changed.
    pub(super) fn update_waiter(&mut self, pid: Pid, now: u64, tier: Option<Tier>, mask: Option<CpuMask>) {
        let (since, old_tier, old_mask_differs) = {
            let t = &self.tasks[&pid];
            (t.since, t.tier, mask.as_ref().is_some_and(|m| *m != t.mask))
        };
        let new_tier = tier.or(old_tier);
        let was_lc = old_tier == Some(Tier::Lc);
        let is_lc = new_tier == Some(Tier::Lc);
        if (was_lc || is_lc) && (was_lc != is_lc || old_mask_differs) {
            self.advance_be_idle(now);
        }
        if was_lc && !is_lc {
            self.lc_waiting.remove(&(since, pid));
        } else if !was_lc && is_lc {
            self.lc_waiting.insert((since, pid));
        }
        let t = self.task(pid);
        t.tier = new_tier;
        if let Some(m) = mask {
            t.mask = m;
        }
    }

    /// A waiting task is now queued on `cpu`'s runqueue. Where an LC waiter
    /// is queued splits the inversion of the CPUs running BE, so they are
    /// settled first.
    pub(super) fn set_queue_cpu(&mut self, pid: Pid, cpu: u32, now: u64) {
        let t = self.task(pid);
        if t.last_cpu == Some(cpu) {
            return;
        }
        if t.state == TState::Waiting && t.tier == Some(Tier::Lc) {
            self.advance_be_idle(now);
        }
        self.task(pid).last_cpu = Some(cpu);
    }

    pub(super) fn set_tier(&mut self, pid: Pid, tier: Tier, now: u64) {
        if self.task(pid).state == TState::Waiting {
            self.update_waiter(pid, now, Some(tier), None);
        } else {
            self.task(pid).tier = Some(tier);
        }
    }

    /// The waiting task `pid` is switched in on `cpu` at `now`.
    pub(super) fn end_wait(&mut self, pid: Pid, now: u64, cpu: usize) {
        let (since, tier, woken) = {
            let t = &self.tasks[&pid];
            (t.since, t.tier, t.woken)
        };
        let d = self.clip(since, now);
        if tier == Some(Tier::Lc) {
            self.advance_be_idle(now);
            self.lc_waiting.remove(&(since, pid));
            self.cpus[cpu].stats.lc_wait_ns += d;
            if self.in_window(now) {
                let w = now.saturating_sub(since);
                self.cpus[cpu].stats.lc_waits += 1;
                // auto-resizing histogram: recording cannot fail for u64 values
                let _ = self.hist.record(w.max(1));
                self.wait_sum_ns += w as u128;
                self.wait_max_ns = self.wait_max_ns.max(w);
            }
        }
        let t = self.task(pid);
        t.wait_ns += d;
        t.state = TState::Sleeping;
        t.woken = false;
        let set = t.cgroups;
        self.cgroups.wait_change((pid, since), set, 0, now);
        if woken && self.in_window(now) {
            let w = now.saturating_sub(since);
            if set != 0 {
                self.cgroups.wakeup(set, w);
            }
            if self.cfg.per_task {
                let t = self.task(pid);
                t.wakeups.get_or_insert_with(|| Box::new(Latency::per_task())).record(w);
            }
        }
    }
}
