//! Per-CPU time accounting: settling a CPU's occupancy up to an instant,
//! with the inversion and idle-while-LC-waits figures that depend on the set
//! of waiting LC tasks.

use super::occ::Occ;
use super::{Pid, Replay, Tier};

impl Replay {
    /// The longest waiting LC task allowed on `cpu`: (waiting since, pid).
    pub(super) fn earliest_lc_waiter(&self, cpu: u32) -> Option<(u64, Pid)> {
        self.lc_waiting
            .iter()
            .find(|(_, pid)| self.tasks.get(pid).is_none_or(|t| t.mask.contains(cpu)))
            .copied()
    }

    /// Account CPU `c` from its last settlement up to `now`.
    pub(super) fn advance_cpu(&mut self, c: usize, now: u64) {
        let from = self.cpus[c].seg;
        if now <= from {
            return;
        }
        self.cpus[c].seg = now;
        let Some(occ) = self.cpus[c].occ else { return };
        let a = from.max(self.cfg.window_start);
        let b = now.min(self.cfg.window_end);
        if b <= a {
            return;
        }
        let waiter = if matches!(occ.tier, Tier::Be | Tier::Idle) {
            self.earliest_lc_waiter(c as u32)
        } else {
            None
        };
        let grace = self.cfg.grace_ns;
        // Where the waiter is queued: on this CPU (it waits for this CPU to
        // switch) or on another one (something there holds it up).
        let elsewhere = waiter.is_some_and(|(_, pid)| {
            self.tasks.get(&pid).and_then(|t| t.last_cpu) != Some(c as u32)
        });
        if let (Some((since, _)), Tier::Be) = (waiter, occ.tier) {
            for (g, acc) in self.cfg.extra_graces_ns.iter().zip(self.by_grace.iter_mut()) {
                let s = a.max(since.saturating_add(*g));
                *acc += b.saturating_sub(s);
            }
        }
        let d = b - a;
        self.cgroups.charge(occ.cgroups, occ.tier, d);
        let st = &mut self.cpus[c].stats;
        st.cpu_ns += d;
        match occ.tier {
            Tier::Lc => st.lc_ns += d,
            Tier::Be => st.be_ns += d,
            Tier::Other => st.other_ns += d,
            Tier::Idle => st.idle_ns += d,
        }
        if let Some((since, pid)) = waiter {
            let s = a.max(since.saturating_add(grace));
            if b > s {
                match occ.tier {
                    Tier::Be => {
                        st.inversion_ns += b - s;
                        if elsewhere {
                            st.inversion_elsewhere_ns += b - s;
                        }
                        self.task(pid).inversion_ns += b - s;
                    }
                    Tier::Idle => st.idle_while_lc_waits_ns += b - s,
                    _ => {}
                }
            }
        }
    }

    /// Settle every CPU whose accounting depends on the waiting LC set.
    pub(super) fn advance_be_idle(&mut self, now: u64) {
        for c in 0..self.cpus.len() {
            if matches!(
                self.cpus[c].occ,
                Some(Occ {
                    tier: Tier::Be | Tier::Idle,
                    ..
                })
            ) {
                self.advance_cpu(c, now);
            }
        }
    }
}
