//! The pod spec: its types (also the CLI's value enums), CPU quantities,
//! TOML parsing and validation.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::ids::uid_for;

/// Limits of a spec: enough for any experiment (the serverless bench's dense
/// node runs 1000 sandbox pods; kubelet's `--max-pods` defaults to 110 but
/// dense nodes raise it), small enough that a typo cannot make tens of
/// thousands of cgroups.
pub const MAX_PODS: usize = 1024;
pub const MAX_CONTAINERS: usize = 16;
/// 10000 CPUs, in millicores: keeps every sum far from overflow.
pub const MAX_MILLI: u64 = 10_000_000;

/// Which kubelet cgroup driver's naming to emulate.
#[derive(Deserialize, clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope
    Systemd,
    /// kubepods/burstable/pod<uid>/<id>
    Cgroupfs,
}

/// The OCI runtime's shares -> cpu.weight conversion (container level only;
/// kubelet's levels always use the linear one).
#[derive(Deserialize, clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WeightConversion {
    /// runc <= 1.3.1, crun < 1.23: 1 + (shares-2)*9999/262142
    Linear,
    /// runc >= 1.3.2, crun >= 1.23: ceil(10^((L^2+125L)/612 - 7/34)), L = log2(shares)
    Quadratic,
}

impl Driver {
    pub fn name(self) -> &'static str {
        match self {
            Driver::Systemd => "systemd",
            Driver::Cgroupfs => "cgroupfs",
        }
    }
}

impl WeightConversion {
    pub fn describe(self) -> &'static str {
        match self {
            WeightConversion::Linear => "linear (runc <= 1.3.1)",
            WeightConversion::Quadratic => "quadratic (runc >= 1.3.2, crun >= 1.23)",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl fmt::Display for Qos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Qos::Guaranteed => "Guaranteed",
            Qos::Burstable => "Burstable",
            Qos::BestEffort => "BestEffort",
        })
    }
}

/// A CPU amount in millicores. In TOML a string is a Kubernetes quantity
/// ("500m", "2", "1.5"; sub-millicore digits round up, as kubelet's
/// `MilliValue` does) and a bare integer is millicores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MilliCpu(pub u64);

impl fmt::Display for MilliCpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}m", self.0)
    }
}

impl std::str::FromStr for MilliCpu {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<MilliCpu> {
        parse_quantity(s).map(MilliCpu)
    }
}

/// Parse a CPU quantity ("500m", "2", "0.25") into millicores.
pub fn parse_quantity(s: &str) -> Result<u64> {
    let t = s.trim();
    if t.starts_with('-') {
        bail!("CPU amount {s:?} is negative");
    }
    let (num, milli) = match t.strip_suffix('m') {
        Some(n) => (n, true),
        None => (t, false),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    if !(digits(int) || (int.is_empty() && digits(frac))) || !(frac.is_empty() || digits(frac)) {
        bail!("CPU amount {s:?} is not a number of CPUs (\"2\", \"1.5\") or millicores (\"500m\")");
    }
    let too_big = || anyhow::anyhow!("CPU amount {s:?} is too large (at most {} CPUs)", MAX_MILLI / 1000);
    let int: u64 = if int.is_empty() { 0 } else { int.parse().map_err(|_| too_big())? };
    if int > MAX_MILLI {
        return Err(too_big());
    }
    // Digits kept in millicores, and whether anything finer remains (rounds up).
    let keep = if milli { 0 } else { 3.min(frac.len()) };
    let mut v = int * if milli { 1 } else { 1000 };
    let kept: u64 = if keep == 0 { 0 } else { frac[..keep].parse().unwrap_or(0) * 10u64.pow(3 - keep as u32) };
    v += kept;
    if frac[keep..].bytes().any(|b| b != b'0') {
        v += 1;
    }
    if v > MAX_MILLI {
        return Err(too_big());
    }
    Ok(v)
}

impl<'de> Deserialize<'de> for MilliCpu {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<MilliCpu, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = MilliCpu;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a CPU quantity string (\"500m\", \"2\", \"1.5\") or an integer number of millicores")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<MilliCpu, E> {
                if v < 0 {
                    return Err(E::custom(format!("CPU amount {v} is negative")));
                }
                self.visit_u64(v as u64)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<MilliCpu, E> {
                if v > MAX_MILLI {
                    return Err(E::custom(format!("CPU amount {v}m is too large (at most {} CPUs)", MAX_MILLI / 1000)));
                }
                Ok(MilliCpu(v))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<MilliCpu, E> {
                Err(E::custom(format!(
                    "CPU amount {v} is a bare number with a fraction: write CPUs as a string (\"{v}\") \
                     or an integer number of millicores"
                )))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<MilliCpu, E> {
                parse_quantity(v).map(MilliCpu).map_err(|e| E::custom(format!("{e:#}")))
            }
        }
        d.deserialize_any(V)
    }
}

/// The spec file (docs/examples/pods.toml).
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Default driver (`--driver` overrides; default systemd, kubeadm's default)
    #[serde(default)]
    pub driver: Option<Driver>,
    /// Container-level conversion (`--weight-conversion` overrides; default linear)
    #[serde(default)]
    pub weight_conversion: Option<WeightConversion>,
    /// Node allocatable CPU, for kubepods' weight (default: the online CPUs)
    #[serde(default)]
    pub allocatable_cpu: Option<MilliCpu>,
    #[serde(default)]
    pub pods: Vec<PodSpec>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct PodSpec {
    pub name: String,
    /// Pod UID; default: derived from the name, so apply and delete agree
    #[serde(default)]
    pub uid: Option<String>,
    #[serde(default)]
    pub containers: Vec<ContainerSpec>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ContainerSpec {
    pub name: String,
    #[serde(default)]
    pub cpu_request: Option<MilliCpu>,
    #[serde(default)]
    pub cpu_limit: Option<MilliCpu>,
}

impl Spec {
    /// Parse a spec; a TOML error becomes one line naming where it is.
    pub fn parse(text: &str) -> Result<Spec> {
        toml::from_str(text).map_err(|e| {
            let at = e.span().map(|sp| {
                let before = text.get(..sp.start).unwrap_or(text);
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!("line {line}, column {col}: ")
            });
            anyhow::anyhow!("{}{}", at.unwrap_or_default(), e.message().trim())
        })
    }

    pub fn load(path: &Path) -> Result<Spec> {
        let text = std::fs::read_to_string(path).with_context(|| format!("read pod spec {}", path.display()))?;
        Spec::parse(&text).with_context(|| format!("pod spec {}", path.display()))
    }
}

fn valid_name(s: &str) -> bool {
    // A DNS label, as Kubernetes requires of container names (pod names may
    // also have dots; here they only name things).
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !s.starts_with(['-', '.'])
        && !s.ends_with(['-', '.'])
}

fn valid_uid(s: &str) -> bool {
    // UUIDs, or the 32 hex digits of a static pod's UID: path-safe either way.
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b'-')
}

/// Check a spec for everything Kubernetes or this emulation would reject.
pub fn validate(spec: &Spec) -> Result<()> {
    if spec.pods.is_empty() {
        bail!("the spec has no pods (add [[pods]] tables)");
    }
    if spec.pods.len() > MAX_PODS {
        bail!("the spec has {} pods; at most {MAX_PODS}", spec.pods.len());
    }
    if spec.allocatable_cpu.is_some_and(|a| a.0 == 0) {
        bail!("allocatable_cpu must be more than 0");
    }
    let mut names = HashSet::new();
    let mut uids = HashSet::new();
    for p in &spec.pods {
        if !valid_name(&p.name) {
            bail!("pod name {:?} is not a DNS label (lowercase letters, digits, '-', '.', at most 63)", p.name);
        }
        if !names.insert(p.name.as_str()) {
            bail!("pod name {:?} appears twice", p.name);
        }
        let uid = p.uid.clone().unwrap_or_else(|| uid_for(&p.name));
        if !valid_uid(&uid) {
            bail!("pod {:?}: uid {uid:?} must be lowercase hex digits and '-' (a UUID), at most 64", p.name);
        }
        if !uids.insert(uid.clone()) {
            bail!("pod {:?}: uid {uid} is used by another pod", p.name);
        }
        if p.containers.is_empty() {
            bail!("pod {:?} has no containers (add [[pods.containers]] tables)", p.name);
        }
        if p.containers.len() > MAX_CONTAINERS {
            bail!("pod {:?} has {} containers; at most {MAX_CONTAINERS}", p.name, p.containers.len());
        }
        let mut cnames = HashSet::new();
        for c in &p.containers {
            if !valid_name(&c.name) {
                bail!("pod {:?}: container name {:?} is not a DNS label", p.name, c.name);
            }
            if !cnames.insert(c.name.as_str()) {
                bail!("pod {:?}: container name {:?} appears twice", p.name, c.name);
            }
            if let (Some(r), Some(l)) = (c.cpu_request, c.cpu_limit) {
                if l.0 > 0 && r.0 > l.0 {
                    bail!(
                        "pod {:?} container {:?}: cpu_request {r} is above cpu_limit {l} (Kubernetes rejects that)",
                        p.name,
                        c.name
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubepods::fixtures::{c, pod, spec};

    #[test]
    fn kubepods_quantities() {
        assert_eq!(parse_quantity("500m").unwrap(), 500);
        assert_eq!(parse_quantity("2").unwrap(), 2000);
        assert_eq!(parse_quantity("1.5").unwrap(), 1500);
        assert_eq!(parse_quantity(" 0.25 ").unwrap(), 250);
        assert_eq!(parse_quantity(".5").unwrap(), 500);
        assert_eq!(parse_quantity("0.0005").unwrap(), 1); // rounds up, like MilliValue
        assert_eq!(parse_quantity("0.5m").unwrap(), 1);
        assert_eq!(parse_quantity("0").unwrap(), 0);
        assert_eq!(parse_quantity("10000").unwrap(), MAX_MILLI);
        assert_eq!(parse_quantity("1.").unwrap(), 1000);
        // The last two would overflow u64 in millicores.
        let huge = ["18446744073709551.999", "99999999999999999999"];
        for bad in ["", "m", ".", "-1", "1e3", "+1", "two", "1.2.3", "5 m", "10001"].iter().chain(&huge) {
            assert!(parse_quantity(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn kubepods_spec_amounts() {
        let s = Spec::parse(
            "[[pods]]\nname = \"a\"\n[[pods.containers]]\nname = \"c\"\ncpu_request = 250\ncpu_limit = \"1\"\n",
        )
        .unwrap();
        assert_eq!(s.pods[0].containers[0].cpu_request, Some(MilliCpu(250)));
        assert_eq!(s.pods[0].containers[0].cpu_limit, Some(MilliCpu(1000)));
        for (v, want) in [("-5", "negative"), ("1.5", "string"), ("\"lots\"", "not a number"), ("true", "CPU quantity")]
        {
            let text = format!("[[pods]]\nname = \"a\"\n[[pods.containers]]\nname = \"c\"\ncpu_request = {v}\n");
            let e = format!("{:#}", Spec::parse(&text).unwrap_err());
            assert!(e.contains(want), "{v}: {e}");
        }
        let e = format!("{:#}", Spec::parse("[[pods]]\nname = \"a\"\nmemory = 1\n").unwrap_err());
        assert!(e.starts_with("line 3, column 1: ") && e.contains("memory") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn kubepods_validation() {
        let ok = || pod("a", vec![c("c", Some(100), None)]);
        let msg = |s: Spec| format!("{:#}", validate(&s).unwrap_err());
        assert!(validate(&spec(vec![ok()])).is_ok());
        assert!(msg(spec(vec![])).contains("no pods"));
        assert!(msg(spec(vec![ok(), ok()])).contains("appears twice"));
        assert!(msg(spec(vec![pod("a", vec![])])).contains("no containers"));
        assert!(msg(spec(vec![pod("a", vec![c("c", None, None), c("c", None, None)])])).contains("appears twice"));
        assert!(msg(spec(vec![pod("a", vec![c("c", Some(2000), Some(1000))])])).contains("above cpu_limit"));
        assert!(msg(spec(vec![pod("A_b", vec![c("c", None, None)])])).contains("DNS label"));
        assert!(msg(spec(vec![pod("a", vec![c("../x", None, None)])])).contains("DNS label"));
        let mut bad_uid = ok();
        bad_uid.uid = Some("../../etc".into());
        assert!(msg(spec(vec![bad_uid])).contains("uid"));
        let mut same_uid = pod("b", vec![c("c", None, None)]);
        same_uid.uid = Some(uid_for("a"));
        assert!(msg(spec(vec![ok(), same_uid])).contains("used by another pod"));
        let many: Vec<PodSpec> = (0..=MAX_PODS).map(|i| pod(&format!("p{i}"), vec![c("c", None, None)])).collect();
        assert!(msg(spec(many)).contains("at most 1024"));
        let wide = pod("a", (0..=MAX_CONTAINERS).map(|i| c(&format!("c{i}"), None, None)).collect());
        assert!(msg(spec(vec![wide])).contains("at most 16"));
    }
}
