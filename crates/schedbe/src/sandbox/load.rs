//! Per-sandbox load: the sandbox's CPU usage rate (in CPUs), smoothed by a
//! geometric decay in the manner of the kernel's PELT, with a ~4 s horizon.
//!
//! Why not PELT's own constants: PELT (kernel/sched/pelt.c) decays a task's
//! history by y per 1024 µs period with y^32 = 1/2, a half-life of 32 ms;
//! its sum saturates (LOAD_AVG_MAX) after ~345 periods, about 0.35 s. Paper
//! 003 describes CFS-LLF's load credit as "estimated over ~4 seconds", and an
//! agent naming hotspots for autoscaling wants a horizon of seconds, not a
//! scheduling tick's. So the decay has PELT's shape with a longer half-life:
//! h = 1 s by default, after which 4 s (4 half-lives) leave a past burst
//! 1/16 (6%) of its weight, so the load reflects roughly the last 4 s. In
//! PELT's terms this is y^32 = 1/2 over 31.25 ms periods instead of 1.024 ms.
//!
//! Update, between samples Δt apart in which the sandbox used ΔU µs of CPU:
//! rate r = ΔU/Δt, load ← load·d + r·(1 − d), d = 2^(−Δt/h). That is the
//! exact exponential filter of a rate that was constant over the interval,
//! so the result does not depend on how often its user samples (two steps
//! of Δt/2 at rate r give what one step of Δt gives).
//!
//! The first rate a sandbox shows initialises its load (no warm-up from 0,
//! which would hide a new hotspot for seconds). A sandbox whose usage goes
//! backwards, or whose cgroup id changed (the path was removed and made
//! again), starts over.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{bail, Result};

/// The decay factor for `dt_s` seconds at half-life `half_life_s`: 2^(−dt/h).
pub fn decay(dt_s: f64, half_life_s: f64) -> f64 {
    (-dt_s / half_life_s).exp2()
}

/// One reading of one sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// cgroup path relative to the cgroup root.
    pub rel: String,
    /// cgroup id (inode number): a recreated cgroup has a new one.
    pub id: u64,
    /// cpu.stat usage_usec.
    pub usage_us: u64,
}

#[derive(Debug, Clone)]
struct State {
    id: u64,
    t_ns: u64,
    usage_us: u64,
    load: Option<f64>,
}

/// Decaying loads of the sandboxes seen at the latest update.
#[derive(Debug, Clone)]
pub struct LoadTracker {
    half_life_s: f64,
    st: HashMap<String, State>,
}

impl LoadTracker {
    pub fn new(half_life: Duration) -> Result<Self> {
        let h = half_life.as_secs_f64();
        if !(0.01..=3600.0).contains(&h) {
            bail!("load half-life must be in [10 ms, 1 h], got {half_life:?}");
        }
        Ok(Self { half_life_s: h, st: HashMap::new() })
    }

    pub fn half_life_s(&self) -> f64 {
        self.half_life_s
    }

    /// Take readings made at monotonic time `t_ns`; returns each sample's
    /// load in CPUs, `None` until a sandbox has been seen twice. Sandboxes
    /// absent from `samples` are forgotten.
    pub fn update(&mut self, t_ns: u64, samples: &[Sample]) -> Vec<Option<f64>> {
        let mut next = HashMap::with_capacity(samples.len());
        let out = samples
            .iter()
            .map(|s| {
                let prev = self.st.remove(&s.rel).filter(|p| p.id == s.id && p.usage_us <= s.usage_us && p.t_ns <= t_ns);
                let st = match prev {
                    // Same instant (or a clock that did not move): nothing to learn.
                    Some(p) if p.t_ns == t_ns => p,
                    Some(p) => {
                        let dt_s = (t_ns - p.t_ns) as f64 * 1e-9;
                        let rate = (s.usage_us - p.usage_us) as f64 * 1e-6 / dt_s;
                        let load = match p.load {
                            Some(l) => {
                                let d = decay(dt_s, self.half_life_s);
                                l * d + rate * (1.0 - d)
                            }
                            None => rate,
                        };
                        State { id: s.id, t_ns, usage_us: s.usage_us, load: Some(load) }
                    }
                    None => State { id: s.id, t_ns, usage_us: s.usage_us, load: None },
                };
                let load = st.load;
                next.insert(s.rel.clone(), st);
                load
            })
            .collect();
        self.st = next;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn s(rel: &str, id: u64, usage_us: u64) -> Sample {
        Sample { rel: rel.into(), id, usage_us }
    }

    #[test]
    fn decay_hand_checked() {
        assert!((decay(1.0, 1.0) - 0.5).abs() < 1e-15);
        assert!((decay(4.0, 1.0) - 1.0 / 16.0).abs() < 1e-15, "the ~4 s horizon");
        // PELT: y^32 = 1/2 per 1024 µs period is a half-life of 32.768 ms.
        assert!((decay(32.0 * 1.024e-3, 32.768e-3) - 0.5).abs() < 1e-15);
    }

    #[test]
    fn load_follows_usage_with_a_one_second_half_life() {
        let mut t = LoadTracker::new(Duration::from_secs(1)).unwrap();
        assert_eq!(t.update(0, &[s("a", 1, 0)]), [None]);
        // 2 CPUs for 1 s: the first rate initialises the load.
        assert_eq!(t.update(S, &[s("a", 1, 2_000_000)]), [Some(2.0)]);
        // Idle for 1 s: half of it is left; 3 more idle seconds: 1/16.
        assert_eq!(t.update(2 * S, &[s("a", 1, 2_000_000)]), [Some(1.0)]);
        let l = t.update(5 * S, &[s("a", 1, 2_000_000)])[0].unwrap();
        assert!((l - 0.125).abs() < 1e-12, "{l}");
        // 1 CPU for 1 s from 0.125: 0.125/2 + 1/2.
        let l = t.update(6 * S, &[s("a", 1, 3_000_000)])[0].unwrap();
        assert!((l - 0.5625).abs() < 1e-12, "{l}");
    }

    #[test]
    fn sampling_rate_does_not_change_the_load() {
        let mut a = LoadTracker::new(Duration::from_millis(1500)).unwrap();
        let mut b = a.clone();
        a.update(0, &[s("x", 1, 0)]);
        b.update(0, &[s("x", 1, 0)]);
        a.update(S, &[s("x", 1, 500_000)]);
        b.update(S, &[s("x", 1, 500_000)]);
        // Then 1.5 CPUs for 2 s: one step, or four of 0.5 s.
        let one = a.update(3 * S, &[s("x", 1, 3_500_000)])[0].unwrap();
        let mut four = 0.0;
        for k in 1..=4u64 {
            four = b.update(S + k * S / 2, &[s("x", 1, 500_000 + k * 750_000)])[0].unwrap();
        }
        assert!((one - four).abs() < 1e-12, "{one} vs {four}");
    }

    #[test]
    fn recreated_or_reset_cgroups_start_over_and_gone_ones_are_forgotten() {
        let mut t = LoadTracker::new(Duration::from_secs(1)).unwrap();
        t.update(0, &[s("a", 1, 100), s("b", 2, 0)]);
        assert_eq!(t.update(S, &[s("a", 1, 50), s("b", 3, 10)]), [None, None], "usage went back; new id");
        assert_eq!(t.update(S, &[s("a", 1, 50)]), [None], "same instant");
        assert_eq!(t.update(2 * S, &[s("a", 1, 1_000_050)]), [Some(1.0)]);
        assert_eq!(t.update(3 * S, &[s("b", 3, 10)]), [None], "b was forgotten when absent");
        assert!(LoadTracker::new(Duration::ZERO).is_err());
    }
}
