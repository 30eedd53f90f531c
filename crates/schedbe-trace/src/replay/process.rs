//! Applying one event to the replay state.

use super::occ::Occ;
use super::state::TState;
use super::wait::WaitCause;
use super::{CpuMask, Event, EventKind, Replay, SegmentEnd, Switch, Tier};

impl Replay {
    pub(super) fn process(&mut self, ev: Event) {
        self.processed += 1;
        let now = ev.ts;
        let cpu = ev.cpu as usize;
        match ev.kind {
            EventKind::Switch(sw) => {
                if cpu >= self.cpus.len() {
                    self.diag.bad_cpu_events += 1;
                    return;
                }
                self.on_switch(now, cpu, sw);
            }
            EventKind::Waking(w) => {
                self.set_tier(w.pid, w.tier, now);
                self.note_cgroup(w.pid, w.cgroup, now);
                match self.task(w.pid).state {
                    TState::Running(_) => self.task(w.pid).pending = Some((w.tier, w.mask)),
                    TState::Waiting => self.update_waiter(w.pid, now, None, Some(w.mask)),
                    TState::Sleeping | TState::Unknown => {
                        self.start_wait(w.pid, now, WaitCause::Wakeup, w.tier, w.mask, Some(w.task_cpu))
                    }
                }
            }
            EventKind::Wakeup { pid, task_cpu } => {
                if pid == 0 {
                    return;
                }
                match self.task(pid).state {
                    // the waking was absorbed: the task never left its CPU
                    TState::Running(_) => self.task(pid).pending = None,
                    TState::Waiting => self.set_queue_cpu(pid, task_cpu, now),
                    TState::Sleeping | TState::Unknown => {
                        // no sched_waking seen (lost, or it happened in a context the
                        // kernel does not trace): waiting from now, last known tier/mask
                        self.diag.wakeups_without_waking += 1;
                        let t = &self.tasks[&pid];
                        let (tier, mask) = (t.tier.unwrap_or(Tier::Lc), t.mask.clone());
                        self.start_wait(pid, now, WaitCause::Wakeup, tier, mask, Some(task_cpu))
                    }
                }
            }
            EventKind::WakeupNew(w) => {
                self.set_tier(w.pid, w.tier, now);
                self.note_cgroup(w.pid, w.cgroup, now);
                self.start_wait(w.pid, now, WaitCause::Wakeup, w.tier, w.mask, Some(w.task_cpu));
            }
            EventKind::Migrate { pid, dest, mask } => {
                if pid == 0 {
                    return;
                }
                match self.tasks.get(&pid).map(|t| t.state) {
                    Some(TState::Waiting) => {
                        self.update_waiter(pid, now, None, Some(mask));
                        self.set_queue_cpu(pid, dest, now);
                    }
                    Some(_) => {
                        let t = self.task(pid);
                        t.mask = mask;
                        t.last_cpu = Some(dest);
                    }
                    None => {}
                }
            }
            EventKind::InitCurr {
                pid,
                tier,
                on_cpu,
                cgroup,
            } => {
                let c = on_cpu as usize;
                if c >= self.cpus.len() {
                    self.diag.bad_cpu_events += 1;
                    return;
                }
                if self.cpus[c].switched {
                    return; // a real switch already told us more recently
                }
                self.advance_cpu(c, now);
                let occ = Occ {
                    pid,
                    tier: if pid == 0 { Tier::Idle } else { tier },
                    since: now,
                    cgroups: if pid == 0 { 0 } else { self.cgroups.set_of(cgroup) },
                };
                self.set_occupant(c, Some(occ), now, SegmentEnd::Unknown);
                if pid != 0 && !self.tasks.contains_key(&pid) {
                    let t = self.task(pid);
                    t.tier = Some(tier);
                    t.state = TState::Running(on_cpu);
                    t.last_cpu = Some(on_cpu);
                    t.cgroups = occ.cgroups;
                }
            }
            EventKind::InitRunnable(w) => {
                // Only tasks no event has told us about yet: they have been
                // runnable since before tracing started.
                if w.pid != 0 && !self.tasks.contains_key(&w.pid) {
                    self.note_cgroup(w.pid, w.cgroup, now);
                    self.start_wait(w.pid, now, WaitCause::Snapshot, w.tier, w.mask, Some(w.task_cpu));
                }
            }
            EventKind::Timer { late_ns, cgroup, .. } => {
                if self.in_window(now) {
                    let set = self.cgroups.set_of(cgroup);
                    self.cgroups.timer(set, late_ns);
                }
            }
            EventKind::AbsentBegin | EventKind::Absent { .. } if cpu >= self.cpus.len() => {
                self.diag.bad_cpu_events += 1;
            }
            EventKind::AbsentBegin => {
                if self.cpus[cpu].absent_since.is_none() {
                    self.cpus[cpu].absent_since = Some(now);
                    let set = self.cpus[cpu].occ.map_or(0, |o| o.cgroups);
                    self.cgroups.absent(set, true, now);
                }
            }
            EventKind::Absent { .. } => {
                if let Some(since) = self.cpus[cpu].absent_since.take() {
                    let d = self.clip(since, now);
                    let st = &mut self.cpus[cpu].stats;
                    st.absent_ns += d;
                    st.absences += u64::from(d > 0);
                    let set = self.cpus[cpu].occ.map_or(0, |o| o.cgroups);
                    self.cgroups.absent(set, false, now);
                }
            }
            EventKind::InitDone => {
                for i in 0..self.cfg.online.len() {
                    let c = self.cfg.online[i] as usize;
                    if c < self.cpus.len() && self.cpus[c].occ.is_none() {
                        self.cpus[c].seg = now;
                        self.cpus[c].occ = Some(Occ {
                            pid: 0,
                            tier: Tier::Idle,
                            since: now,
                            cgroups: 0,
                        });
                    }
                }
            }
        }
    }

    pub(super) fn on_switch(&mut self, now: u64, c: usize, sw: Switch) {
        let Switch { prev, prev_runnable, prev_dead, prev_tier, prev_mask, next, next_tier, next_cgroup } = sw;
        self.advance_cpu(c, now);
        // The old occupant stays in cpus[c] until replaced below (cgroup
        // counts change there); c is settled up to now, so nothing in between
        // accounts it again.
        let occ = self.cpus[c].occ;
        self.cpus[c].switched = true;
        if let Some(o) = occ {
            if o.pid != prev {
                self.diag.inconsistent_switches += 1;
            }
            if o.pid != 0 {
                let d = self.clip(o.since, now);
                let t = self.task(o.pid);
                t.run_ns += d;
                if t.state == TState::Running(c as u32) {
                    t.state = TState::Sleeping;
                }
            }
        }

        if prev != 0 {
            if let Some(tier) = prev_tier {
                self.set_tier(prev, tier, now);
            }
            let t = self.task(prev);
            t.last_cpu = Some(c as u32);
            let pending = t.pending.take();
            if matches!(t.state, TState::Running(_) | TState::Unknown) {
                t.state = TState::Sleeping;
            }
            let known_tier = t.tier;
            if prev_runnable {
                let tier = prev_tier.or(known_tier).unwrap_or(Tier::Lc);
                let mask = prev_mask.unwrap_or(CpuMask::ALL);
                self.start_wait(prev, now, WaitCause::Preempted, tier, mask, Some(c as u32));
            } else if let Some((tier, mask)) = pending {
                // woken while still switching out: runnable from now on
                self.start_wait(prev, now, WaitCause::Wakeup, tier, mask, Some(c as u32));
            } else if prev_dead
                && !self.cfg.per_task
                && self
                    .tasks
                    .get(&prev)
                    .is_some_and(|t| t.state != TState::Waiting)
            {
                self.tasks.remove(&prev);
            }
        }

        if next != 0 {
            self.set_tier(next, next_tier, now);
            match self.task(next).state {
                TState::Waiting => self.end_wait(next, now, c),
                TState::Running(other) if other != c as u32 => self.diag.inconsistent_switches += 1,
                _ => {}
            }
            // after end_wait: the wait ends in the cgroups it was counted in
            self.note_cgroup(next, next_cgroup, now);
            let t = self.task(next);
            t.state = TState::Running(c as u32);
            t.pending = None;
            t.last_cpu = Some(c as u32);
        }
        let tier = if next == 0 { Tier::Idle } else { next_tier };
        let cgroups = if next == 0 { 0 } else { self.cgroups.set_of(next_cgroup) };
        let occ = Occ {
            pid: next,
            tier,
            since: now,
            cgroups,
        };
        let how = if prev_runnable {
            SegmentEnd::Preempted
        } else if prev_dead {
            SegmentEnd::Exited
        } else {
            SegmentEnd::Blocked
        };
        self.set_occupant(c, Some(occ), now, how);
    }
}
