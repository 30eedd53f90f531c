//! The Kubernetes experiments of shared/papers/001 ("Burstable pods affect
//! Guaranteed pods", "Guaranteed pods affect other Guaranteed pods"):
//! `schedbe-bench k8s-lc-burst` and `schedbe-bench k8s-lc-guar`.
//!
//! Two pods, built as kubelet and the OCI runtime would build them (the
//! `kubepods` emulation, systemd driver, linear shares-to-weight) under the
//! harness's cgroup (`/sys/fs/cgroup/schedbe-bench/kubepods.slice/...`):
//!
//! - **service1**, the LC server (the harness's `lc-server`, one thread per
//!   connection), in a Guaranteed pod with request = limit = half the node
//!   in whole CPUs (the paper: 2 of 4 cores). Its client sends at
//!   `--util` of that limit throughout.
//! - **service2**, "a simple CPU-bound server": one always-runnable
//!   SCHED_OTHER worker thread per node CPU (the harness's CPU burn,
//!   `be-worker`, here not BE at all: its pod is Burstable or Guaranteed,
//!   so it is LC to schedbe). It starts midway, as the paper's service2's
//!   load does. k8s-lc-burst: a Burstable pod with a request of a quarter of
//!   the node and no limit (the paper: 1 of 4). k8s-lc-guar: Guaranteed,
//!   like service1.
//!
//! The node is the CPUs the experiment may use (at least 2). The tracer is
//! given both pods with their requests (`--cgroup PATH=REQ`): CPU time per
//! pod, the most CPUs each ran on at once, and service1's reservation
//! inversion (time it ran below its request with a thread waiting while
//! service2 ran above its own); and a per-CPU timeline of a slice of each
//! phase.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::kubepods::{self, ContainerSpec, Driver, MilliCpu, PodSpec, Spec, WeightConversion};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// service2 Burstable (request a quarter of the node, no limit)
    Burst,
    /// service2 Guaranteed like service1
    Guar,
}

/// The pods of one experiment, as the runner uses them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PodRun {
    pub node_cpus: usize,
    /// The node's CPUs when `--cpus` named them (empty: every CPU): the
    /// harness's client may be on others, which the pods cannot use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_cpu_list: Vec<u32>,
    /// service1: request = limit, in milli-CPUs
    pub service1_milli: u64,
    pub service2_request_milli: u64,
    pub service2_limit_milli: Option<u64>,
    /// The container cgroups the processes start in (absolute)
    pub service1_container: PathBuf,
    pub service2_container: PathBuf,
    /// The pod cgroups, relative to /sys/fs/cgroup: the tracer's keys
    pub service1_pod: String,
    pub service2_pod: String,
    /// The slice of each traced phase drawn as a timeline (seconds from
    /// the trace window's start, START:END)
    pub timeline_window: String,
}

/// What a run needs from `--cpus`: at least 2 CPUs, since service1 gets
/// half of them in whole CPUs.
pub fn check_node(node_cpus: usize) -> Result<()> {
    if node_cpus < 2 {
        bail!("the Kubernetes experiments need a node of at least 2 CPUs (service1 gets half of it in whole CPUs), this one has {node_cpus}");
    }
    Ok(())
}

/// service1's request and limit: half the node in whole CPUs.
pub fn service1_milli(node_cpus: usize) -> u64 {
    (node_cpus as u64 / 2).max(1) * 1000
}

/// The two pods' spec for a node of `node_cpus` CPUs.
pub fn spec(s: Scenario, node_cpus: usize) -> Spec {
    let s1 = service1_milli(node_cpus);
    let (req2, lim2) = match s {
        Scenario::Burst => (node_cpus as u64 * 1000 / 4, None),
        Scenario::Guar => (s1, Some(s1)),
    };
    let pod = |name: &str, req: u64, lim: Option<u64>| PodSpec {
        name: name.into(),
        uid: None,
        containers: vec![ContainerSpec { name: name.into(), cpu_request: Some(MilliCpu(req)), cpu_limit: lim.map(MilliCpu) }],
    };
    Spec {
        driver: Some(Driver::Systemd),
        weight_conversion: Some(WeightConversion::Linear),
        allocatable_cpu: Some(MilliCpu(node_cpus as u64 * 1000)),
        pods: vec![pod("service1", s1, Some(s1)), pod("service2", req2, lim2)],
    }
}

/// The slice of each traced phase drawn as a per-CPU timeline, in seconds
/// from the trace window's start: half a second, as the paper's outtake.
pub const TIMELINE_WINDOW: &str = "1:1.5";

/// The tree, applied: what the runner needs and the plan to delete it with.
pub struct Pods {
    pub run: PodRun,
    pub root: PathBuf,
    pub plan: kubepods::Plan,
}

/// `rel` of `path` under /sys/fs/cgroup (the tracer's --cgroup form).
fn under_cgroupfs(path: &Path) -> Result<String> {
    let rel = path.strip_prefix(crate::cgroup::ROOT).with_context(|| format!("{} is not under {}", path.display(), crate::cgroup::ROOT))?;
    Ok(rel.display().to_string())
}

/// The node the pods run on.
#[derive(Clone, Copy, Debug)]
pub enum Node<'a> {
    /// Every CPU of the machine, this many.
    Whole(usize),
    /// The CPUs `--cpus` named (the harness's client may be on others).
    Cpus(&'a [u32]),
}

/// Build the two pods' tree under `root` (the harness's cgroup) for `node`.
pub fn apply(s: Scenario, node: Node, root: &Path, timeline_window: &str) -> Result<Pods> {
    let (node_cpus, node_cpu_list) = match node {
        Node::Whole(n) => (n, &[][..]),
        Node::Cpus(l) => (l.len(), l),
    };
    check_node(node_cpus)?;
    let spec = spec(s, node_cpus);
    let plan = kubepods::plan(&spec, Driver::Systemd, WeightConversion::Linear, node_cpus as u64 * 1000)?;
    kubepods::apply(root, &plan).context("building the pods' cgroups")?;
    let find = |pod: &str, kind: kubepods::LevelKind| -> Result<PathBuf> {
        let l = plan.levels.iter().find(|l| l.kind == kind && l.pod.as_deref() == Some(pod)).with_context(|| format!("no {kind:?} cgroup for {pod}"))?;
        Ok(root.join(&l.rel))
    };
    use kubepods::LevelKind::{Container, Pod};
    let c = |p: &PodSpec| p.containers[0].clone();
    let (c1, c2) = (c(&spec.pods[0]), c(&spec.pods[1]));
    let run = PodRun {
        node_cpus,
        node_cpu_list: node_cpu_list.to_vec(),
        service1_milli: c1.cpu_request.map_or(0, |m| m.0),
        service2_request_milli: c2.cpu_request.map_or(0, |m| m.0),
        service2_limit_milli: c2.cpu_limit.map(|m| m.0),
        service1_container: find("service1", Container)?,
        service2_container: find("service2", Container)?,
        service1_pod: under_cgroupfs(&find("service1", Pod)?)?,
        service2_pod: under_cgroupfs(&find("service2", Pod)?)?,
        timeline_window: timeline_window.into(),
    };
    Ok(Pods { run, root: root.to_path_buf(), plan })
}

impl Pods {
    /// The tracer's arguments for the pods: each with its request.
    pub fn tracer_args(&self) -> Vec<String> {
        let r = &self.run;
        vec![
            "--cgroup".into(),
            format!("{}={}m", r.service1_pod, r.service1_milli),
            "--cgroup".into(),
            format!("{}={}m", r.service2_pod, r.service2_request_milli),
        ]
    }

}

/// The tree goes when the experiment ends, however it ends (processes
/// still in it are killed, as kubelet does).
impl Drop for Pods {
    fn drop(&mut self) {
        if let Err(e) = kubepods::delete(&self.root, &self.plan) {
            eprintln!("bench: warning: removing the pods' cgroups: {e:#}");
        }
    }
}

/// The kernel's `cpu.stat` of a pod: usage is exact under any scheduler;
/// the throttling counters are CFS bandwidth control's, so they move only
/// when the kernel enforces cpu.max (EEVDF), not under a sched_ext scheduler
/// (schedbe reports its own, `schedbe run --stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuStat {
    pub usage_usec: u64,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_usec: u64,
}

impl CpuStat {
    pub fn parse(text: &str) -> CpuStat {
        let mut c = CpuStat::default();
        for l in text.lines() {
            let mut it = l.split_whitespace();
            let (Some(k), Some(v)) = (it.next(), it.next().and_then(|v| v.parse::<u64>().ok())) else { continue };
            match k {
                "usage_usec" => c.usage_usec = v,
                "nr_periods" => c.nr_periods = v,
                "nr_throttled" => c.nr_throttled = v,
                "throttled_usec" => c.throttled_usec = v,
                _ => {}
            }
        }
        c
    }

    /// None when the file cannot be read (the pod is gone).
    pub fn read(cgroup: &Path) -> Option<CpuStat> {
        std::fs::read_to_string(cgroup.join("cpu.stat")).ok().map(|t| CpuStat::parse(&t))
    }

    pub fn since(&self, earlier: &CpuStat) -> CpuStat {
        CpuStat {
            usage_usec: self.usage_usec.saturating_sub(earlier.usage_usec),
            nr_periods: self.nr_periods.saturating_sub(earlier.nr_periods),
            nr_throttled: self.nr_throttled.saturating_sub(earlier.nr_throttled),
            throttled_usec: self.throttled_usec.saturating_sub(earlier.throttled_usec),
        }
    }
}

/// Both pods' cpu.stat over each phase of a run: "before" from the
/// client's start to service2's, "after" from there to the client's end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PodsCpuStat {
    pub service1_before: CpuStat,
    pub service1_after: CpuStat,
    pub service2_after: CpuStat,
}

/// The pods' cpu.stat at one instant (service1, service2).
pub fn snapshot(p: &PodRun) -> Option<(CpuStat, CpuStat)> {
    let pod = |rel: &str| CpuStat::read(&Path::new(crate::cgroup::ROOT).join(rel));
    Some((pod(&p.service1_pod)?, pod(&p.service2_pod)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_sized_as_the_papers_shares_of_the_node() {
        let p = kubepods::plan(&spec(Scenario::Burst, 4), Driver::Systemd, WeightConversion::Linear, 4000).unwrap();
        let pod = |n: &str| p.levels.iter().find(|l| l.kind == kubepods::LevelKind::Pod && l.pod.as_deref() == Some(n)).unwrap();
        // The paper's 4-core node: service1 Guaranteed 2 CPUs, service2 Burstable 1 CPU.
        assert_eq!((pod("service1").qos, pod("service1").max), (Some(kubepods::Qos::Guaranteed), kubepods::CpuMax::Quota(200_000)));
        assert_eq!((pod("service2").qos, pod("service2").max, pod("service2").shares), (Some(kubepods::Qos::Burstable), kubepods::CpuMax::Unlimited, 1024));
        let g = kubepods::plan(&spec(Scenario::Guar, 2), Driver::Systemd, WeightConversion::Linear, 2000).unwrap();
        let guar: Vec<_> = g.levels.iter().filter(|l| l.kind == kubepods::LevelKind::Pod).map(|l| (l.qos, l.max)).collect();
        assert_eq!(guar, vec![(Some(kubepods::Qos::Guaranteed), kubepods::CpuMax::Quota(100_000)); 2]);
        assert_eq!(service1_milli(3), 1000);
        let a = CpuStat::parse("usage_usec 1000\nuser_usec 900\nnr_periods 10\nnr_throttled 3\nthrottled_usec 250\nnr_bursts 0\n");
        assert_eq!(a, CpuStat { usage_usec: 1000, nr_periods: 10, nr_throttled: 3, throttled_usec: 250 });
        let b = CpuStat::parse("usage_usec 4000\nnr_periods 30\nnr_throttled 5\nthrottled_usec 950\n");
        assert_eq!(b.since(&a), CpuStat { usage_usec: 3000, nr_periods: 20, nr_throttled: 2, throttled_usec: 700 });
        assert!(check_node(1).is_err() && check_node(2).is_ok());
    }
}
