//! vms.toml: the VMs Akita schedules (docs/akita.md has the format).
//!
//! The file is parsed into `Raw*` structs that mirror it (unknown keys are
//! errors), then resolved and checked into `AkitaConfig`, whose every value
//! is valid: Table 1 defaults filled in, times in whole microseconds,
//! C_opt <= C_pes <= T, names and cgroups unique. Errors name the VM and
//! the field.

use std::fmt;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Deserialize;

use super::cpus;
use super::edfvd::{Crit, Server};
use super::table1::{self, VmType};

/// Longest period: a vCPU out of budget may wait most of a period while
/// others run, and the sched_ext watchdog ejects the scheduler when a task
/// waits 30 s; 10 s keeps well clear of it.
pub const MAX_PERIOD_MS: f64 = 10_000.0;
/// The finest time vms.toml can express: budgets and periods are kept in µs.
const MIN_MS: f64 = 0.001;
/// More vCPUs than this in one VM is a typo rather than a VM.
pub const MAX_VCPUS: u32 = 1024;
/// A HI vCPU cools by one degree per period without overrun (section 3.3);
/// above 1000 periods (100 s at T = 100 ms) a CPU would all but stay in HI mode.
pub const MAX_TEMPERATURE: u32 = 1000;
const MAX_NAME: usize = 64;

/// How many vCPUs a VM has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vcpus {
    Count(u32),
    /// One vCPU per thread of the VM's cgroup, known only at runtime: the
    /// daemon admits them as they appear, `akita check` cannot.
    Threads,
}

/// A VM, resolved and valid.
#[derive(Debug, Clone, PartialEq)]
pub struct VmSpec {
    pub name: String,
    /// Relative to /sys/fs/cgroup.
    pub cgroup: String,
    /// The Table 1 type its defaults came from, if any.
    pub vm_type: Option<u32>,
    /// Budgets and period every vCPU of the VM inherits (section 3.1).
    pub server: Server,
    pub vcpus: Vcpus,
    /// The CPUs its vCPUs may be placed on; None: any of the global list.
    pub cpus: Option<Vec<u32>>,
}

/// vms.toml, resolved and valid.
#[derive(Debug, Clone, PartialEq)]
pub struct AkitaConfig {
    /// CPUs available to VMs, sorted; first-fit tries them in this order.
    pub cpus: Vec<u32>,
    /// The temperature a HI vCPU gets when it needs C_pes (section 3.3).
    pub initial_temperature: u32,
    /// In file order, which is the order of admission.
    pub vms: Vec<VmSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    cpus: String,
    initial_temperature: i64,
    #[serde(default)]
    vm: Vec<RawVm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVm {
    name: String,
    cgroup: String,
    criticality: Crit,
    #[serde(rename = "type")]
    vm_type: Option<i64>,
    c_opt_ms: Option<f64>,
    c_pes_ms: Option<f64>,
    period_ms: Option<f64>,
    vcpus: Vcpus,
    cpus: Option<String>,
}

impl AkitaConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("invalid VM file {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        // The full toml error: it shows the line, so the VM, of a bad key.
        let raw: RawFile = toml::from_str(text).map_err(|e| anyhow!("{e}"))?;
        let cpus = cpus::parse(&raw.cpus).context("cpus")?;
        let initial_temperature = temperature(raw.initial_temperature)?;
        let mut vms = Vec::with_capacity(raw.vm.len());
        for (i, v) in raw.vm.iter().enumerate() {
            let vm = resolve_vm(v, &cpus).with_context(|| format!("vm {:?} (entry {} of [[vm]])", v.name, i + 1))?;
            vms.push(vm);
        }
        check_unique(&vms)?;
        Ok(Self { cpus, initial_temperature, vms })
    }
}

fn temperature(t: i64) -> Result<u32> {
    match u32::try_from(t) {
        Ok(t @ 1..=MAX_TEMPERATURE) => Ok(t),
        _ => bail!("initial_temperature = {t} is out of range [1, {MAX_TEMPERATURE}]"),
    }
}

fn resolve_vm(v: &RawVm, avail: &[u32]) -> Result<VmSpec> {
    check_name(&v.name)?;
    check_cgroup(&v.cgroup)?;
    let ty = match v.vm_type {
        Some(id) => Some(table_type(id, v.criticality)?),
        None => None,
    };
    let server = server(v, ty)?;
    if let Vcpus::Count(n) = v.vcpus {
        if !(1..=MAX_VCPUS).contains(&n) {
            bail!("vcpus = {n} is out of range [1, {MAX_VCPUS}]");
        }
    }
    let cpus = v.cpus.as_deref().map(|s| vm_cpus(s, avail)).transpose()?;
    Ok(VmSpec {
        name: v.name.clone(),
        cgroup: v.cgroup.clone(),
        vm_type: ty.map(|t| t.id),
        server,
        vcpus: v.vcpus,
        cpus,
    })
}

fn check_name(name: &str) -> Result<()> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(ok_char) {
        bail!("name must be 1-{MAX_NAME} characters of A-Z a-z 0-9 - _ .");
    }
    Ok(())
}

/// A path below /sys/fs/cgroup, written relative to it, without tricks.
fn check_cgroup(cg: &str) -> Result<()> {
    if cg.starts_with('/') {
        bail!("cgroup {cg:?} must be relative to /sys/fs/cgroup (no leading /)");
    }
    let bad = |c: &str| c.is_empty() || c == "." || c == ".." || c.contains(|ch: char| ch.is_control());
    if cg.split('/').any(bad) {
        bail!("cgroup {cg:?} must be a path like \"akita/vm1\": no empty, \".\" or \"..\" components, no control characters");
    }
    Ok(())
}

/// Table 1 type `id`, which must exist and agree with the VM's criticality.
fn table_type(id: i64, crit: Crit) -> Result<&'static VmType> {
    let ty = u32::try_from(id).ok().and_then(table1::vm_type);
    let ty = ty.with_context(|| format!("type = {id}: Table 1 has types 1-{}", table1::TABLE1.len()))?;
    if ty.crit != crit {
        bail!(
            "criticality {crit} contradicts type {id}, which is {} in Table 1; drop `type` and give c_opt_ms and period_ms (and c_pes_ms for HI)",
            ty.crit
        );
    }
    Ok(ty)
}

/// The VM's budgets and period: explicit values over the type's defaults.
fn server(v: &RawVm, ty: Option<&VmType>) -> Result<Server> {
    let pick = |field: &str, own: Option<f64>, dflt: Option<f64>| -> Result<u64> {
        let ms = own.or(dflt).with_context(|| format!("{field} is missing (give it, or a `type` from Table 1)"))?;
        ms_to_us(field, ms)
    };
    let period_us = pick("period_ms", v.period_ms, ty.map(|t| t.period_ms))?;
    let c_opt_us = pick("c_opt_ms", v.c_opt_ms, ty.map(|t| t.c_opt_ms))?;
    if c_opt_us > period_us {
        bail!("c_opt_ms = {} is above period_ms = {} (need C_opt <= T)", ms(c_opt_us), ms(period_us));
    }
    match v.criticality {
        Crit::Lo => {
            if v.c_pes_ms.is_some() {
                bail!("c_pes_ms is set, but a LO VM has no pessimistic budget (section 4: only HI VMs have C_pes)");
            }
            Ok(Server::Lo { c_opt_us, period_us })
        }
        Crit::Hi => {
            let c_pes_us = pick("c_pes_ms", v.c_pes_ms, ty.and_then(|t| t.c_pes_ms))?;
            if c_opt_us > c_pes_us || c_pes_us > period_us {
                bail!(
                    "need C_opt <= C_pes <= T, got c_opt_ms = {}, c_pes_ms = {}, period_ms = {}",
                    ms(c_opt_us),
                    ms(c_pes_us),
                    ms(period_us)
                );
            }
            Ok(Server::Hi { c_opt_us, c_pes_us, period_us })
        }
    }
}

/// Milliseconds as written to whole microseconds, within (0, MAX_PERIOD_MS].
fn ms_to_us(field: &str, v: f64) -> Result<u64> {
    if !v.is_finite() || !(MIN_MS..=MAX_PERIOD_MS).contains(&v) {
        bail!("{field} = {v} is out of range [{MIN_MS}, {MAX_PERIOD_MS}] ms");
    }
    let us = (v * 1000.0).round();
    if (v * 1000.0 - us).abs() > 1e-6 {
        bail!("{field} = {v} is not a whole number of microseconds");
    }
    Ok(us as u64)
}

/// Microseconds as milliseconds, for messages ("25", "0.5").
pub fn ms(us: u64) -> String {
    (us as f64 / 1000.0).to_string()
}

/// A VM's own CPU list, which must lie within the global one.
fn vm_cpus(s: &str, avail: &[u32]) -> Result<Vec<u32>> {
    let list = cpus::parse(s).context("cpus")?;
    let outside: Vec<u32> = list.iter().copied().filter(|c| !avail.contains(c)).collect();
    if !outside.is_empty() {
        bail!("cpus = {s:?}: CPU {} not in the global cpus ({})", cpus::format(&outside), cpus::format(avail));
    }
    Ok(list)
}

/// Names are how the API and reports refer to VMs; a cgroup says which
/// tasks are whose, so one cgroup cannot hold two VMs, not even nested.
pub fn check_unique(vms: &[VmSpec]) -> Result<()> {
    for (i, a) in vms.iter().enumerate() {
        for b in &vms[..i] {
            if a.name == b.name {
                bail!("vm {:?}: the name is used twice", a.name);
            }
            if a.cgroup == b.cgroup {
                bail!("vm {:?}: cgroup {:?} is already vm {:?}'s", a.name, a.cgroup, b.name);
            }
            let (outer, inner) = if a.cgroup.len() < b.cgroup.len() { (a, b) } else { (b, a) };
            if inner.cgroup.starts_with(&format!("{}/", outer.cgroup)) {
                bail!(
                    "vm {:?}: cgroup {:?} is inside vm {:?}'s cgroup {:?}; a task must belong to one VM",
                    inner.name,
                    inner.cgroup,
                    outer.name,
                    outer.cgroup
                );
            }
        }
    }
    Ok(())
}

impl<'de> Deserialize<'de> for Vcpus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(VcpusVisitor)
    }
}

/// `vcpus = 4` or `vcpus = "threads"`; the count's range is checked later,
/// where the error can name the VM.
struct VcpusVisitor;

impl Visitor<'_> for VcpusVisitor {
    type Value = Vcpus;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a vCPU count or \"threads\"")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Vcpus, E> {
        u32::try_from(v).map(Vcpus::Count).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Vcpus, E> {
        u32::try_from(v).map(Vcpus::Count).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Vcpus, E> {
        match v {
            "threads" => Ok(Vcpus::Threads),
            _ => Err(E::invalid_value(Unexpected::Str(v), &self)),
        }
    }
}
