//! `schedbe-bench pods`: build the cgroup v2 tree kubelet and the OCI runtime
//! would build for a small spec of pods, with no kubelet, so experiments (and
//! schedbe's kubelet BestEffort patterns) see "pods" named and weighted as
//! kubelet would.
//!
//! This is an emulation of the *writes*, not of kubelet. What it reproduces,
//! and from where:
//!
//! - Names, both cgroup drivers: kubelet's `CgroupName` and its systemd form
//!   (pkg/kubelet/cm/cgroup_manager_linux.go: `-` in a pod UID becomes `_`,
//!   every level is a slice named after its ancestors) and containerd's
//!   container cgroup (`cri-containerd-<id>.scope` with systemd, `<id>` with
//!   cgroupfs). Guaranteed pods sit directly under kubepods.
//! - Requests to shares, limits to quota: kubelet's `MilliCPUToShares`
//!   (min 2, max 262144) and `MilliCPUToQuota` (period 100 ms, min 1 ms) in
//!   pkg/kubelet/cm/helpers_linux.go; pod level from `ResourceConfigForPod`
//!   (sum of the containers' requests; a quota only when every container has
//!   a limit; BestEffort pods get 2 shares).
//! - QoS levels (pkg/kubelet/cm/qos_container_manager_linux.go): burstable
//!   gets `MilliCPUToShares(sum of the Burstable pods' requests)`, besteffort
//!   2 shares; kubepods itself `MilliCPUToShares(node allocatable CPU)`
//!   (node_container_manager_linux.go).
//! - Shares to `cpu.weight`. Kubepods, QoS and pod levels: kubelet's own
//!   `getCPUWeight` (cgroup_manager_linux.go), `1 + (shares-2)*9999/262142`,
//!   10000 from 262144 shares up. Container level: the OCI runtime converts
//!   the shares kubelet passes in the CRI request. [`WeightConversion::Linear`]
//!   (the default) is the same formula, `ConvertCPUSharesToCgroupV2Value` in
//!   runc <= 1.3.1 (libcontainer/cgroups/utils.go in runc 1.2, utils.go of
//!   github.com/opencontainers/cgroups v0.0.1 in runc 1.3.0/1.3.1).
//!   [`WeightConversion::Quadratic`] is its 2025 replacement in
//!   opencontainers/cgroups >= v0.0.3 utils.go (runc >= 1.3.2, crun >= 1.23):
//!   `ceil(10^((L^2 + 125 L)/612 - 7/34))`, `L = log2(shares)`, so that 1024
//!   shares map to weight 100. 2 CPUs requested = 2048 shares give 79 with
//!   the first and 174 with the second.
//! - `cpu.max` is written `"<quota> 100000"`, or `"max 100000"` where kubelet
//!   sets no quota (containers without a limit, pods where some container has
//!   none, BestEffort pods, QoS levels and kubepods).
//!
//! Not emulated: memory (Guaranteed is decided on CPU alone, as if every
//! container's memory request equalled its limit whenever its CPU request
//! does), cpuset, pids, hugetlb, init containers, pod overhead, the pause
//! (sandbox) container's cgroup, CPU manager static pinning, and the
//! systemd driver's rounding of a quota up to 10 ms per CPU-second
//! (opencontainers/cgroups >= v0.0.2, runc >= 1.3.2; only limits that are
//! not a multiple of 10m differ). The
//! slices and scopes are plain directories: systemd does not know them, so
//! on a systemd host build the tree under a subtree of its own (`--root`).
//! The QoS-level values reflect the pods of one spec: apply one spec per root.
//!
//! Ownership: pod and container cgroups belong to the spec (named by its pod
//! UIDs) and `delete` removes them, killing what runs there, as kubelet does.
//! The shared levels (kubepods and the QoS cgroups) are marked with an xattr
//! when `apply` creates them; one that existed unmarked (a real kubelet's) is
//! used as it is, gets no values written, and is left in place by `delete`.
//!
//! Layout: the spec's types, parsing and validation in `spec.rs`; kubelet's
//! and the runtime's formulas in `values.rs`; cgroup names in `paths.rs`; pod UIDs and container ids in `ids.rs`; the
//! pure plan of the tree in `plan.rs`; the cgroupfs writes in `tree.rs`; the
//! command line in `cli.rs`. Everything public is re-exported here.

mod cli;
mod ids;
mod paths;
mod plan;
mod spec;
mod tree;
mod values;

pub use cli::{cli, plan_from_opts, render_table, PodsArgs, PodsCmd, PodsOpts};
pub use ids::{container_id_for, uid_for};
pub use paths::{container_path, kubepods_path, pod_path, qos_path};
pub use plan::{plan, Level, LevelKind, Plan};
pub use spec::{
    parse_quantity, validate, ContainerSpec, Driver, MilliCpu, PodSpec, Qos, Spec, WeightConversion, MAX_CONTAINERS,
    MAX_MILLI, MAX_PODS,
};
pub use tree::{apply, check_root, container_cgroups, delete, Applied, AppliedTree, ContainerCgroup, Removed};
pub use values::{
    milli_cpu_to_quota, milli_cpu_to_shares, pod_qos, pod_values, shares_to_weight_linear, shares_to_weight_quadratic,
    ContainerCpu, CpuMax, MAX_SHARES, MIN_QUOTA_US, MIN_SHARES, QUOTA_PERIOD_US, SHARES_PER_CPU,
};

pub const DEFAULT_ROOT: &str = "/sys/fs/cgroup";

/// Spec builders shared by the submodules' tests.
#[cfg(test)]
mod fixtures {
    use super::{ContainerSpec, MilliCpu, PodSpec, Spec};

    pub(super) const EXAMPLE: &str = include_str!("../../../../docs/examples/pods.toml");

    pub(super) fn c(name: &str, req: Option<u64>, lim: Option<u64>) -> ContainerSpec {
        ContainerSpec { name: name.into(), cpu_request: req.map(MilliCpu), cpu_limit: lim.map(MilliCpu) }
    }

    pub(super) fn pod(name: &str, containers: Vec<ContainerSpec>) -> PodSpec {
        PodSpec { name: name.into(), uid: None, containers }
    }

    pub(super) fn spec(pods: Vec<PodSpec>) -> Spec {
        Spec { pods, ..Default::default() }
    }
}
