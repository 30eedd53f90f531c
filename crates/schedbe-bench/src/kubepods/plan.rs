//! The plan: every cgroup of the tree with the values kubelet and the runtime
//! write into it, computed from a spec without touching cgroups.

use std::path::PathBuf;

use anyhow::Result;

use super::ids::{container_id_for, uid_for};
use super::paths::{container_path, kubepods_path, pod_path, qos_path};
use super::spec::{validate, Driver, Qos, Spec, WeightConversion};
use super::values::{
    milli_cpu_to_quota, milli_cpu_to_shares, pod_qos, pod_values, shares_to_weight_linear, ContainerCpu, CpuMax,
    MIN_SHARES,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelKind {
    Kubepods,
    /// The burstable or besteffort cgroup
    Qos,
    Pod,
    Container,
}

impl LevelKind {
    /// Pod and container cgroups belong to the spec; the others are shared.
    pub(super) fn shared(self) -> bool {
        matches!(self, LevelKind::Kubepods | LevelKind::Qos)
    }
}

/// One cgroup of the tree and what kubelet / the runtime writes into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    pub kind: LevelKind,
    /// Relative to the root
    pub rel: PathBuf,
    pub qos: Option<Qos>,
    pub pod: Option<String>,
    pub container: Option<String>,
    pub shares: u64,
    pub weight: u64,
    pub max: CpuMax,
}

/// Everything `apply` writes, parents before children.
#[derive(Debug, Clone)]
pub struct Plan {
    pub driver: Driver,
    pub conversion: WeightConversion,
    pub allocatable_milli: u64,
    pub levels: Vec<Level>,
}

/// The whole tree for a valid spec: pure, so it is tested without cgroups.
pub fn plan(spec: &Spec, driver: Driver, conversion: WeightConversion, allocatable_milli: u64) -> Result<Plan> {
    validate(spec)?;
    let kubelet = shares_to_weight_linear;
    let mut pods = Vec::new();
    let mut burstable_requests = 0;
    for p in &spec.pods {
        let cpus: Vec<ContainerCpu> = p.containers.iter().map(ContainerCpu::of).collect();
        let qos = pod_qos(&cpus);
        if qos == Qos::Burstable {
            burstable_requests += cpus.iter().map(|c| c.request).sum::<u64>();
        }
        pods.push((p, cpus, qos));
    }
    let unlimited = |kind, rel, qos, shares| Level {
        kind,
        rel,
        qos,
        pod: None,
        container: None,
        shares,
        weight: kubelet(shares),
        max: CpuMax::Unlimited,
    };
    let mut levels = vec![
        unlimited(LevelKind::Kubepods, kubepods_path(driver), None, milli_cpu_to_shares(allocatable_milli)),
        unlimited(
            LevelKind::Qos,
            qos_path(driver, Qos::Burstable),
            Some(Qos::Burstable),
            milli_cpu_to_shares(burstable_requests),
        ),
        unlimited(LevelKind::Qos, qos_path(driver, Qos::BestEffort), Some(Qos::BestEffort), MIN_SHARES),
    ];
    for (p, cpus, qos) in pods {
        let uid = p.uid.clone().unwrap_or_else(|| uid_for(&p.name));
        let (shares, quota) = pod_values(qos, &cpus);
        levels.push(Level {
            kind: LevelKind::Pod,
            rel: pod_path(driver, qos, &uid),
            qos: Some(qos),
            pod: Some(p.name.clone()),
            container: None,
            shares,
            weight: kubelet(shares),
            max: quota.map_or(CpuMax::Unlimited, CpuMax::Quota),
        });
        for (c, cpu) in p.containers.iter().zip(&cpus) {
            let shares = milli_cpu_to_shares(cpu.request);
            levels.push(Level {
                kind: LevelKind::Container,
                rel: container_path(driver, qos, &uid, &container_id_for(&uid, &c.name)),
                qos: Some(qos),
                pod: Some(p.name.clone()),
                container: Some(c.name.clone()),
                shares,
                weight: conversion.weight(shares),
                max: milli_cpu_to_quota(cpu.limit).map_or(CpuMax::Unlimited, CpuMax::Quota),
            });
        }
    }
    Ok(Plan { driver, conversion, allocatable_milli, levels })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubepods::fixtures::{c, pod, spec, EXAMPLE};

    /// The example spec, by hand: 4 CPUs allocatable -> 4096 shares -> 157;
    /// burstable holds service2's 1 CPU -> 1024 -> 39; besteffort 2 -> 1;
    /// service1 (Guaranteed, 2 CPUs) 2048 -> 79 with a 200 ms quota;
    /// service2 (Burstable, request 1, no limit) 1024 -> 39, no quota.
    #[test]
    fn kubepods_example_plan() {
        let s = Spec::parse(EXAMPLE).unwrap();
        for driver in [Driver::Systemd, Driver::Cgroupfs] {
            let p = plan(&s, driver, WeightConversion::Linear, 4000).unwrap();
            let got: Vec<(LevelKind, Option<Qos>, u64, u64, CpuMax)> =
                p.levels.iter().map(|l| (l.kind, l.qos, l.shares, l.weight, l.max)).collect();
            let (g, b, e) = (Some(Qos::Guaranteed), Some(Qos::Burstable), Some(Qos::BestEffort));
            let unl = CpuMax::Unlimited;
            assert_eq!(
                got,
                vec![
                    (LevelKind::Kubepods, None, 4096, 157, unl),
                    (LevelKind::Qos, b, 1024, 39, unl),
                    (LevelKind::Qos, e, 2, 1, unl),
                    (LevelKind::Pod, g, 2048, 79, CpuMax::Quota(200_000)),
                    (LevelKind::Container, g, 2048, 79, CpuMax::Quota(200_000)),
                    (LevelKind::Pod, b, 1024, 39, unl),
                    (LevelKind::Container, b, 1024, 39, unl),
                ],
                "{driver:?}"
            );
            // Parents come before children.
            for (i, l) in p.levels.iter().enumerate() {
                if let Some(parent) = l.rel.parent().filter(|p| !p.as_os_str().is_empty()) {
                    assert!(p.levels[..i].iter().any(|q| q.rel == parent), "{} before its parent", l.rel.display());
                }
            }
        }
        let q = plan(&s, Driver::Systemd, WeightConversion::Quadratic, 4000).unwrap();
        let weights: Vec<u64> = q.levels.iter().map(|l| l.weight).collect();
        // Only the containers change: the runtime converts, kubelet does not.
        assert_eq!(weights, vec![157, 39, 1, 79, 174, 39, 100]);
    }

    #[test]
    fn kubepods_besteffort_and_mixed() {
        let s = spec(vec![
            pod("be", vec![c("c", None, None)]),
            pod("mix", vec![c("a", Some(300), Some(600)), c("b", None, None)]),
            pod("lim", vec![c("a", Some(250), Some(500)), c("b", Some(0), Some(5))]),
        ]);
        let p = plan(&s, Driver::Cgroupfs, WeightConversion::Linear, 2000).unwrap();
        let row = |pod: &str, container: Option<&str>| {
            p.levels.iter().find(|l| l.pod.as_deref() == Some(pod) && l.container.as_deref() == container).unwrap()
        };
        assert!(row("be", None).rel.starts_with("kubepods/besteffort"));
        assert_eq!((row("be", None).shares, row("be", None).max), (2, CpuMax::Unlimited));
        assert_eq!((row("be", Some("c")).shares, row("be", Some("c")).weight), (2, 1));
        // 300m: 307 shares; the limit-less container b keeps the pod unlimited.
        assert_eq!((row("mix", None).shares, row("mix", None).max), (307, CpuMax::Unlimited));
        assert_eq!(row("mix", Some("a")).max, CpuMax::Quota(60_000));
        assert_eq!((row("mix", Some("b")).shares, row("mix", Some("b")).max), (2, CpuMax::Unlimited));
        // Every container limited: pod quota from the summed limits (505m).
        assert_eq!(row("lim", None).max, CpuMax::Quota(50_500));
        assert_eq!(row("lim", Some("b")).max, CpuMax::Quota(1000));
        // Burstable level: 300m + 250m = 550m -> 563 shares.
        assert_eq!(p.levels[1].shares, 563);
        assert_eq!(p.levels[0].shares, 2048);
    }
}
