//! kubelet's and the OCI runtime's arithmetic: requests to shares, limits to
//! quota, shares to cpu.weight, a pod's QoS class and its pod-level values.

use std::fmt;

use super::spec::{ContainerSpec, Qos, WeightConversion};

// kubelet, pkg/kubelet/cm/helpers_linux.go
pub const MIN_SHARES: u64 = 2;
pub const MAX_SHARES: u64 = 262_144;
pub const SHARES_PER_CPU: u64 = 1024;
pub const QUOTA_PERIOD_US: u64 = 100_000;
pub const MIN_QUOTA_US: u64 = 1000;

/// kubelet's `MilliCPUToShares`: 0 (no request) and anything below 2 give 2.
pub fn milli_cpu_to_shares(milli: u64) -> u64 {
    (milli * SHARES_PER_CPU / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// kubelet's `MilliCPUToQuota` at the 100 ms period: None for no limit.
pub fn milli_cpu_to_quota(milli: u64) -> Option<u64> {
    (milli > 0).then(|| (milli * QUOTA_PERIOD_US / 1000).max(MIN_QUOTA_US))
}

/// kubelet's `getCPUWeight` and runc <= 1.3.1's `ConvertCPUSharesToCgroupV2Value`.
pub fn shares_to_weight_linear(shares: u64) -> u64 {
    if shares >= MAX_SHARES {
        return 10_000;
    }
    1 + shares.saturating_sub(2) * 9999 / 262_142
}

/// opencontainers/cgroups >= v0.0.3 `ConvertCPUSharesToCgroupV2Value` (runc >= 1.3.2).
pub fn shares_to_weight_quadratic(shares: u64) -> u64 {
    if shares <= 2 {
        return 1;
    }
    if shares >= MAX_SHARES {
        return 10_000;
    }
    let l = (shares as f64).log2();
    let exponent = (l * l + 125.0 * l) / 612.0 - 7.0 / 34.0;
    10f64.powf(exponent).ceil() as u64
}

impl WeightConversion {
    pub fn weight(self, shares: u64) -> u64 {
        match self {
            WeightConversion::Linear => shares_to_weight_linear(shares),
            WeightConversion::Quadratic => shares_to_weight_quadratic(shares),
        }
    }
}

/// A container's CPU after the API server's defaulting (a limit without a
/// request requests the limit); 0 means none (kubelet ignores zero amounts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerCpu {
    pub request: u64,
    pub limit: u64,
}

impl ContainerCpu {
    pub fn of(c: &ContainerSpec) -> ContainerCpu {
        let limit = c.cpu_limit.map_or(0, |m| m.0);
        let request = c.cpu_request.map_or(limit, |m| m.0);
        ContainerCpu { request, limit }
    }
}

/// The pod's QoS class as `GetPodQOS` derives it, on CPU alone.
pub fn pod_qos(containers: &[ContainerCpu]) -> Qos {
    if containers.iter().all(|c| c.request == 0 && c.limit == 0) {
        Qos::BestEffort
    } else if containers.iter().all(|c| c.limit > 0 && c.request == c.limit) {
        Qos::Guaranteed
    } else {
        Qos::Burstable
    }
}

/// A pod's cgroup values: `ResourceConfigForPod`.
pub fn pod_values(qos: Qos, containers: &[ContainerCpu]) -> (u64, Option<u64>) {
    if qos == Qos::BestEffort {
        return (MIN_SHARES, None);
    }
    let requests: u64 = containers.iter().map(|c| c.request).sum();
    let all_limited = containers.iter().all(|c| c.limit > 0);
    let quota = if all_limited { milli_cpu_to_quota(containers.iter().map(|c| c.limit).sum()) } else { None };
    (milli_cpu_to_shares(requests), quota)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuMax {
    Unlimited,
    Quota(u64),
}

impl fmt::Display for CpuMax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuMax::Unlimited => write!(f, "max {QUOTA_PERIOD_US}"),
            CpuMax::Quota(q) => write!(f, "{q} {QUOTA_PERIOD_US}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubepods::fixtures::c;

    #[test]
    fn kubepods_shares_and_quota() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(500), 512);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_shares(2000), 2048);
        assert_eq!(milli_cpu_to_shares(300_000), MAX_SHARES);
        assert_eq!(milli_cpu_to_quota(0), None);
        assert_eq!(milli_cpu_to_quota(5), Some(1000)); // 500 us, raised to the 1 ms minimum
        assert_eq!(milli_cpu_to_quota(250), Some(25_000));
        assert_eq!(milli_cpu_to_quota(2000), Some(200_000));
        assert_eq!(CpuMax::Quota(200_000).to_string(), "200000 100000");
        assert_eq!(CpuMax::Unlimited.to_string(), "max 100000");
    }

    #[test]
    fn kubepods_weights() {
        // By hand: 1 + (2048-2)*9999/262142 = 1 + 20457954/262142 = 1 + 78 = 79;
        // the paper measured 79 for 2 CPUs and 157 for 4.
        for (shares, want) in [(2, 1), (3, 1), (512, 20), (1024, 39), (2000, 77), (2048, 79), (4096, 157), (8192, 313)]
        {
            assert_eq!(shares_to_weight_linear(shares), want, "linear {shares}");
        }
        assert_eq!(shares_to_weight_linear(MAX_SHARES), 10_000);
        assert_eq!(shares_to_weight_linear(MAX_SHARES - 1), 9999);
        // Reference values from the Go code (opencontainers/cgroups utils.go);
        // 2000 -> 170 is runc issue #4896's example.
        for (shares, want) in [
            (2, 1),
            (3, 2),
            (51, 11),
            (102, 17),
            (512, 59),
            (1024, 100),
            (2000, 170),
            (2048, 174),
            (4096, 303),
            (8192, 532),
            (262_143, 10_000),
            (262_144, 10_000),
        ] {
            assert_eq!(shares_to_weight_quadratic(shares), want, "quadratic {shares}");
        }
    }

    #[test]
    fn kubepods_qos() {
        let cpu = |r, l| ContainerCpu { request: r, limit: l };
        assert_eq!(pod_qos(&[cpu(2000, 2000)]), Qos::Guaranteed);
        assert_eq!(pod_qos(&[cpu(2000, 2000), cpu(100, 100)]), Qos::Guaranteed);
        assert_eq!(pod_qos(&[cpu(2000, 2000), cpu(0, 0)]), Qos::Burstable);
        assert_eq!(pod_qos(&[cpu(1000, 0)]), Qos::Burstable);
        assert_eq!(pod_qos(&[cpu(500, 1000)]), Qos::Burstable);
        assert_eq!(pod_qos(&[cpu(0, 0), cpu(0, 0)]), Qos::BestEffort);
        // A limit without a request requests the limit (API defaulting): Guaranteed.
        assert_eq!(ContainerCpu::of(&c("x", None, Some(700))), cpu(700, 700));
        assert_eq!(ContainerCpu::of(&c("x", Some(0), Some(700))), cpu(0, 700));
        assert_eq!(pod_qos(&[ContainerCpu::of(&c("x", None, Some(700)))]), Qos::Guaranteed);
        // Pod level: sums; a quota only when every container has a limit.
        assert_eq!(pod_values(Qos::Guaranteed, &[cpu(2000, 2000), cpu(500, 500)]), (2560, Some(250_000)));
        assert_eq!(pod_values(Qos::Burstable, &[cpu(500, 1000), cpu(250, 0)]), (768, None));
        assert_eq!(pod_values(Qos::Burstable, &[cpu(500, 1000), cpu(0, 3)]), (512, Some(100_300)));
        assert_eq!(pod_values(Qos::BestEffort, &[cpu(0, 0)]), (2, None));
    }
}
