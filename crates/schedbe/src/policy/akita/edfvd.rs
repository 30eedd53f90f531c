//! Akita's per-CPU schedulability test: EDF-VD (shared/papers/004, section 3.5,
//! equations 1-6; EDF-VD itself is the paper's reference [8], Baruah et al.,
//! ESA 2011).
//!
//! Each vCPU is a periodic server (section 3.2) with an implicit deadline
//! equal to its period T. X = 1 is LO criticality, X = 2 is HI. On one CPU:
//!
//! - (1) U1(1) = sum over LO vCPUs of C_opt / T
//! - (2) U2(1) = sum over HI vCPUs of C_opt / T
//! - (3) U2(2) = sum over HI vCPUs of C_pes / T
//! - (4) x = U2(1) / (1 - U1(1))
//! - (5) VD = now + x*T for a HI vCPU, now + T for a LO one
//! - (6) x*U1(1) + U2(2) <= 1: "If condition (6) holds for a task set, the
//!   task set is MC-schedulable."
//!
//! What the paper leaves implicit, and what we do:
//!
//! - Equation 4 needs U1(1) < 1, and EDF-VD needs 0 <= x <= 1 (a virtual
//!   deadline is never later than the real one), i.e. U1(1) + U2(1) <= 1: the
//!   EDF bound of LO mode, where every vCPU gets C_opt. Taken literally,
//!   condition 6 alone would admit any LO load on a CPU without HI vCPUs
//!   (x = 0) and any U1(1) > 1 (x < 0). So the test checks U1(1) + U2(1) <= 1
//!   first, then condition 6. For U1(1) < 1 the first check adds nothing:
//!   C_opt <= C_pes gives U2(2) >= U2(1) = x*(1 - U1(1)), hence
//!   x*U1(1) + U2(2) >= x, so (6) already forces x <= 1.
//! - No HI vCPU: U2(1) = U2(2) = 0, x = 0 (nothing to shrink; also for
//!   U1(1) = 1, where (4) would be 0/0). The test reduces to U1(1) <= 1, EDF.
//! - HI vCPUs and U1(1) >= 1: x is undefined (reported as None) and the CPU
//!   fails the LO-mode bound.
//! - EDF-VD as usually stated runs plain EDF (x = 1) when
//!   U1(1) + U2(2) <= 1 (from memory of [8], not checked against its text).
//!   Akita's equation 4 always gives x = U2(1)/(1 - U1(1)); we report that
//!   x. The verdict is the same either way: U1(1) + U2(2) <= 1 implies
//!   x <= 1, hence x*U1(1) + U2(2) <= U1(1) + U2(2) <= 1.
//!
//! Arithmetic: budgets and periods are whole microseconds (config.rs); the
//! utilisations are f64 and both comparisons allow EPS = 1e-9. Summing a
//! few thousand terms errs by ~1e-13, so a set whose exact value is 1 (a
//! boundary like 0.3*0.2 + 0.94) is admitted however the floats round; the
//! price is that a set over by less than 1e-9 of a CPU (1 ns per second) is
//! admitted too, far below what a scheduler can enforce.

use serde::{Deserialize, Serialize};

/// Tolerance of both comparisons (see the header).
pub const EPS: f64 = 1e-9;

/// A vCPU's criticality: X = 1 (LO) or X = 2 (HI) in the paper's notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Crit {
    #[serde(rename = "HI", alias = "hi")]
    Hi,
    #[serde(rename = "LO", alias = "lo")]
    Lo,
}

impl std::fmt::Display for Crit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Crit::Hi => "HI",
            Crit::Lo => "LO",
        })
    }
}

/// A vCPU as a periodic server (section 3.2), times in microseconds. Only a
/// HI vCPU has a pessimistic budget (section 4: "LO-crit VMs do not have
/// pessimistic budgets").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "criticality")]
pub enum Server {
    #[serde(rename = "HI")]
    Hi { c_opt_us: u64, c_pes_us: u64, period_us: u64 },
    #[serde(rename = "LO")]
    Lo { c_opt_us: u64, period_us: u64 },
}

impl Server {
    pub fn crit(&self) -> Crit {
        match self {
            Server::Hi { .. } => Crit::Hi,
            Server::Lo { .. } => Crit::Lo,
        }
    }
}

/// The three sums of equations 1-3 for the vCPUs of one CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Utilisation {
    /// (1) LO vCPUs, C_opt/T.
    pub u1_1: f64,
    /// (2) HI vCPUs, C_opt/T.
    pub u2_1: f64,
    /// (3) HI vCPUs, C_pes/T.
    pub u2_2: f64,
    /// Whether any HI vCPU is counted (U2(1) > 0 says the same, but a
    /// count cannot be lost to rounding).
    #[serde(skip)]
    pub has_hi: bool,
}

impl Utilisation {
    /// Equations 1-3 over `servers`.
    pub fn of<'a>(servers: impl IntoIterator<Item = &'a Server>) -> Self {
        servers.into_iter().fold(Self::default(), |u, s| u.with(s))
    }

    /// These sums with `s` added.
    pub fn with(mut self, s: &Server) -> Self {
        match *s {
            Server::Hi { c_opt_us, c_pes_us, period_us } => {
                self.u2_1 += c_opt_us as f64 / period_us as f64;
                self.u2_2 += c_pes_us as f64 / period_us as f64;
                self.has_hi = true;
            }
            Server::Lo { c_opt_us, period_us } => self.u1_1 += c_opt_us as f64 / period_us as f64,
        }
        self
    }
}

/// Which condition decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// U1(1) + U2(1) <= 1 and condition 6 hold.
    Fits,
    /// U1(1) + U2(1) > 1: not even the optimistic budgets fit (EDF bound).
    LoModeOverload,
    /// Condition 6 fails: x*U1(1) + U2(2) > 1.
    Condition6,
}

/// The test's numbers for one CPU, as reported to the user.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Test {
    #[serde(flatten)]
    pub util: Utilisation,
    /// Equation 4; None when undefined (HI vCPUs and U1(1) >= 1).
    pub x: Option<f64>,
    /// The left side of condition 6, x*U1(1) + U2(2); None when x is.
    pub value: Option<f64>,
    pub verdict: Verdict,
}

impl Test {
    pub fn fits(&self) -> bool {
        self.verdict == Verdict::Fits
    }
}

/// Equation 4, with the edge cases of the header.
pub fn x_factor(u: &Utilisation) -> Option<f64> {
    if !u.has_hi {
        return Some(0.0);
    }
    let slack = 1.0 - u.u1_1;
    (slack > 0.0).then(|| u.u2_1 / slack)
}

/// The EDF-VD test of one CPU: the LO-mode bound, then condition 6.
pub fn test(util: Utilisation) -> Test {
    let x = x_factor(&util);
    let value = x.map(|x| x * util.u1_1 + util.u2_2);
    let verdict = if util.u1_1 + util.u2_1 > 1.0 + EPS {
        Verdict::LoModeOverload
    } else if value.is_none_or(|v| v > 1.0 + EPS) {
        // value is None only for U1(1) >= 1 with HI vCPUs, which the branch
        // above has refused already (their U2(1) > EPS); kept for safety.
        Verdict::Condition6
    } else {
        Verdict::Fits
    };
    Test { util, x, value, verdict }
}

/// Equation 5: a vCPU's relative (virtual) deadline in µs on a CPU whose
/// factor is `x` (servers.rs hands these to the BPF side).
pub fn relative_deadline_us(s: &Server, x: f64) -> u64 {
    match *s {
        Server::Hi { period_us, .. } => (x * period_us as f64).round() as u64,
        Server::Lo { period_us, .. } => period_us,
    }
}
