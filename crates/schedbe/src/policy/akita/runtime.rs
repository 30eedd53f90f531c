//! `schedbe run --policy akita`: load akita.bpf.c, place the VMs of
//! vms.toml first-fit, keep the BPF maps in step with the VMs' cgroups, report
//! per-VM and per-CPU stats (printed, and served to `schedbe stats`), and
//! unload cleanly.
//!
//! A VM whose cgroup does not exist (yet, or any more) keeps its placement:
//! its vCPUs stay reserved, no task is on them, and when the cgroup appears
//! its tasks go on them within one rescan.

use std::collections::{BTreeMap, HashMap};
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use log::{info, warn};
use scx_utils::{Topology, UserExitInfo};

use super::bpf::intf;
use super::bpf::*;
use super::config::{self, AkitaConfig, Vcpus, VmSpec};
use super::control::{self, Reply, Request};
use super::placement::{Placement, VmRequest};
use super::report::{self, Snapshot};
use super::stats::Sample;
use super::servers::{self, Ids, ServerConf, MAX_PER_CPU};
use crate::cpumax::UnenforcedLimits;
use crate::loader;
use crate::park::{ParkOptions, Parker};
use schedbe_cgroup::{BeRules, IdSet, CGROUP_ROOT};

/// How often VM cgroups (and BE cgroups) are looked for.
const RESCAN: Duration = Duration::from_millis(500);
/// A removed server's queue is drained only after this (a wakeup that read it valid has inserted by then).
const DRAIN_GRACE: Duration = Duration::from_secs(1);
/// How soon SIGINT/SIGTERM or the kernel ejecting the scheduler is noticed.
const SHUTDOWN_POLL: Duration = Duration::from_millis(250);

/// How `schedbe run --policy akita` prints stats.
#[derive(Debug, Clone, Copy)]
pub struct StatsOut {
    pub interval: Option<Duration>,
    pub json: bool,
}

/// An admitted VM.
struct Vm {
    spec: VmSpec,
    /// With `vcpus = N`: its servers are base .. base+N-1.
    vcpus: u32,
    base: u32,
    /// With `vcpus = "threads"`: one server per thread, admitted as they appear.
    threads: Option<Threads>,
    /// Whether its cgroup was there at the last rescan (for the log).
    present: Option<bool>,
}

/// The vCPUs of a VM with `vcpus = "threads"`: each thread in its cgroup
/// (and below) is a vCPU of its own, placed first-fit when the daemon first
/// sees it and removed when it exits.
#[derive(Default)]
struct Threads {
    /// Admitted thread (tid, as BPF sees p->pid) -> its server id.
    admitted: BTreeMap<u32, u32>,
    /// Threads the EDF-VD test (or a limit) refused at the last rescan: host
    /// tasks, tried again at every rescan.
    refused: usize,
}

/// A thread's vCPU in the placement: VM names cannot contain '#'.
fn thread_key(vm: &str, tid: u32) -> String {
    format!("{vm}#{tid}")
}

pub struct Runtime<'a> {
    skel: AkitaSkel<'a>,
    link: Option<libbpf_rs::Link>,
    cfg: AkitaConfig,
    placement: Placement,
    ids: Ids,
    /// Admitted VMs by index (the index the BPF side counts them under);
    /// a removed VM leaves a hole, so the others keep their index.
    vms: Vec<Option<Vm>>,
    /// Servers of removed VMs whose queues may still hold tasks: (id, when
    /// removed). They stay on their CPU's list, invalid, until the BPF side
    /// has seen their queue empty (akita_server_run.queued) after a grace time.
    draining: Vec<(u32, Instant)>,
    /// The CPU of each draining server.
    drain_cpu: HashMap<u32, u32>,
    /// Calls from the control socket.
    control: Option<control::Control>,
    /// The server parameters last written, by server id.
    written: BTreeMap<u32, ServerConf>,
    /// The servers of each CPU last written.
    cpu_servers: BTreeMap<u32, Vec<u32>>,
    next_gen: u32,
    gens: HashMap<u32, u32>,
    /// vm_cgrps as last written: cgroup id -> (base, nr).
    cgrps: HashMap<u64, (u32, u32)>,
    rules: BeRules,
    be_ids: IdSet,
    started: Instant,
    nr_cpus: u32,
    /// Parking of starved BE cgroups (park.rs); None: off.
    parker: Option<Parker>,
    /// cpu.max limits this policy lifts, said once each.
    unenforced: UnenforcedLimits,
}

/// Plain-data BPF struct as the bytes a map update takes.
fn bytes<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: T is a bindgen repr(C) struct of integers, built from zeroed memory.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}

/// A map value as a plain-data BPF struct; None if too short.
pub(super) fn read<T: Copy>(v: &[u8]) -> Option<T> {
    (v.len() >= std::mem::size_of::<T>())
        // SAFETY: T is plain integers, any bit pattern is valid; the slice is long enough.
        .then(|| unsafe { std::ptr::read_unaligned(v.as_ptr() as *const T) })
}

/// Place a VM first-fit and give it server ids, or say why not (the
/// EDF-VD test's numbers on every CPU tried); nothing changes on refusal.
fn admit(placement: &mut Placement, ids: &mut Ids, spec: &VmSpec) -> Result<Vm, String> {
    let n = match spec.vcpus {
        Vcpus::Count(n) => n,
        Vcpus::Threads => {
            // The name and its `cpus` are checked now; the vCPUs come one per thread.
            let req = VmRequest { name: &spec.name, server: spec.server, vcpus: 0, cpus: spec.cpus.as_deref() };
            placement.add_vm(&req).map_err(|e| e.to_string())?;
            info!("vm {:?} ({}, /{}): one vCPU per thread, placed as they appear", spec.name, spec.server.crit(), spec.cgroup);
            return Ok(Vm { spec: spec.clone(), vcpus: 0, base: 0, threads: Some(Threads::default()), present: None });
        }
    };
    let req = VmRequest { name: &spec.name, server: spec.server, vcpus: n, cpus: spec.cpus.as_deref() };
    let (base, cpus) = place(placement, ids, &req)?;
    info!("vm {:?} ({}, /{}): vCPUs on CPUs {:?}", spec.name, spec.server.crit(), spec.cgroup, cpus);
    Ok(Vm { spec: spec.clone(), vcpus: n, base, threads: None, present: None })
}

/// Place thread `tid` of a `vcpus = "threads"` VM as a vCPU of its own: its server id.
fn admit_thread(placement: &mut Placement, ids: &mut Ids, spec: &VmSpec, tid: u32) -> Result<u32, String> {
    let key = thread_key(&spec.name, tid);
    let req = VmRequest { name: &key, server: spec.server, vcpus: 1, cpus: spec.cpus.as_deref() };
    place(placement, ids, &req).map(|(sid, _)| sid)
}

/// First-fit `req`'s vCPUs within the BPF side's limits: its first server
/// id and the CPU of each vCPU; nothing changes on refusal.
fn place(placement: &mut Placement, ids: &mut Ids, req: &VmRequest) -> Result<(u32, Vec<u32>), String> {
    let cpus = placement.add_vm(req).map_err(|e| e.to_string())?;
    if let Some(s) = placement.slots().iter().find(|s| s.vcpus.len() > MAX_PER_CPU) {
        let cpu = s.cpu;
        placement.remove_vm(req.name);
        return Err(format!("vm {:?} refused: CPU {cpu} would have more than {MAX_PER_CPU} vCPUs", req.name));
    }
    let Some(base) = ids.alloc(req.vcpus as usize) else {
        placement.remove_vm(req.name);
        return Err(format!("vm {:?} refused: more than {} vCPUs in all", req.name, servers::MAX_SERVERS));
    };
    Ok((base, cpus))
}

fn check_supported(cfg: &AkitaConfig, online: &[u32]) -> Result<()> {
    let missing: Vec<u32> = cfg.cpus.iter().copied().filter(|c| !online.contains(c)).collect();
    if !missing.is_empty() {
        bail!("cpus lists CPUs this machine does not have: {:?} (it has {})", missing, super::cpus::format(online));
    }
    Ok(())
}

impl<'a> Runtime<'a> {
    pub fn init(cfg: &AkitaConfig, socket: &Path, park: &ParkOptions, open_object: &'a mut MaybeUninit<OpenObject>) -> Result<Self> {
        let topo = Topology::new().context("cannot read the CPU topology")?;
        let online: Vec<u32> = topo.all_cpus.keys().map(|c| *c as u32).collect();
        check_supported(cfg, &online)?;

        // Admission first: nothing is loaded for a file whose VMs fit nowhere.
        let mut placement = Placement::new(&cfg.cpus);
        let mut ids = Ids::default();
        let mut vms = Vec::new();
        for spec in &cfg.vms {
            match admit(&mut placement, &mut ids, spec) {
                Ok(vm) => vms.push(Some(vm)),
                Err(e) => warn!("{e}; its tasks run as host tasks"),
            }
        }
        info!("idle CPUs (no vCPU placed): {}", super::cpus::format(&placement.idle_cpus()));

        let (mut skel, _kernel) = loader::open::<AkitaSkel>(open_object)?;
        let rodata = skel.maps.rodata_data.as_mut().context("BPF rodata missing")?;
        rodata.initial_temperature = cfg.initial_temperature;
        rodata.park_after_ns = park.window_ns;
        // Thaw what a previous run left parked before anything else changes.
        let parker = crate::park::start(park)?;
        let skel = loader::load(skel)?;

        let mut rt = Self {
            skel,
            link: None,
            cfg: cfg.clone(),
            placement,
            ids,
            vms,
            draining: Vec::new(),
            drain_cpu: HashMap::new(),
            control: None,
            written: BTreeMap::new(),
            cpu_servers: BTreeMap::new(),
            next_gen: 1,
            gens: HashMap::new(),
            cgrps: HashMap::new(),
            rules: BeRules::defaults(),
            be_ids: IdSet::default(),
            started: Instant::now(),
            nr_cpus: online.iter().max().map_or(1, |m| m + 1),
            parker,
            unenforced: UnenforcedLimits::new("akita"),
        };
        // Servers and cgroups before attaching: tasks are on their vCPUs from the first decision.
        rt.sync_servers()?;
        rt.rescan().context("initial cgroup scan failed")?;
        // The socket before attaching: once sched_ext reports akita enabled,
        // `schedbe akita add|remove|list` must already reach it, since a
        // caller may wait for exactly that.
        rt.control = Some(control::listen(socket).context("cannot open the control socket")?);
        rt.link = Some(loader::attach(&mut rt.skel)?);
        info!("control socket: {} (schedbe akita add|remove|list)", socket.display());
        info!("akita policy enabled: {} VMs on CPUs {}", rt.vms.iter().flatten().count(), super::cpus::format(&rt.cfg.cpus));
        rt.unenforced.check();
        Ok(rt)
    }

    /// The placement's names (VMs, and threads of `vcpus = "threads"` VMs)
    /// with their first server id and VM index, for servers::plan.
    fn bases(&self) -> BTreeMap<String, (u32, u32)> {
        let mut out = BTreeMap::new();
        for (i, vm) in (0u32..).zip(&self.vms) {
            let Some(vm) = vm else { continue };
            match &vm.threads {
                None => {
                    out.insert(vm.spec.name.clone(), (vm.base, i));
                }
                Some(th) => out.extend(th.admitted.iter().map(|(&tid, &sid)| (thread_key(&vm.spec.name, tid), (sid, i)))),
            }
        }
        out
    }

    /// Write every server whose parameters changed (a new generation resets
    /// its state on the BPF side), invalidate removed ones, and the CPUs' lists.
    fn sync_servers(&mut self) -> Result<()> {
        let (plan, per_cpu) = servers::plan(&self.placement, &self.bases());
        for (&sid, conf) in &plan {
            if self.written.get(&sid) == Some(conf) {
                continue;
            }
            // Same server, new deadline (x moved): keep its generation, so its period runs on.
            let same = self.written.get(&sid).is_some_and(|w| w.cpu == conf.cpu && w.budget_ns == conf.budget_ns && w.period_ns == conf.period_ns);
            let gen = match (same, self.gens.get(&sid)) {
                (true, Some(&g)) => g,
                _ => {
                    self.next_gen = self.next_gen.wrapping_add(1).max(1);
                    self.next_gen
                }
            };
            self.gens.insert(sid, gen);
            self.write_server(sid, conf, gen)?;
        }
        let gone: Vec<u32> = self.written.keys().copied().filter(|s| !plan.contains_key(s)).collect();
        for sid in gone {
            // Invalid from now on, but still on its CPU's list, where ops.dispatch
            // runs whatever its queue still holds as host tasks.
            let cpu = self.written[&sid].cpu;
            let mut c = self.written[&sid];
            c.budget_ns = 0;
            self.write_server_raw(sid, &c, 0, false)?;
            self.gens.remove(&sid);
            self.drain_cpu.insert(sid, cpu);
            self.draining.push((sid, Instant::now()));
        }
        for &cpu in &self.cfg.cpus {
            let mut list = per_cpu.get(&cpu).cloned().unwrap_or_default();
            list.extend(self.draining.iter().filter(|d| self.drain_cpu.get(&d.0) == Some(&cpu)).map(|d| d.0));
            if self.cpu_servers.get(&cpu) == Some(&list) {
                continue;
            }
            // SAFETY: all-zero is a valid akita_cpu_conf.
            let mut cc: intf::akita_cpu_conf = unsafe { std::mem::zeroed() };
            cc.nr = list.len().min(MAX_PER_CPU) as u32;
            for (slot, sid) in cc.servers.iter_mut().zip(&list) {
                *slot = *sid as u16;
            }
            self.skel.maps.akita_cpus.update(&cpu.to_ne_bytes(), bytes(&cc), MapFlags::ANY).context("cannot update akita_cpus")?;
            self.cpu_servers.insert(cpu, list);
        }
        self.written = plan;
        Ok(())
    }

    fn write_server(&mut self, sid: u32, conf: &ServerConf, gen: u32) -> Result<()> {
        self.write_server_raw(sid, conf, gen, true)
    }

    fn write_server_raw(&mut self, sid: u32, s: &ServerConf, gen: u32, valid: bool) -> Result<()> {
        // SAFETY: all-zero is a valid akita_server_conf.
        let mut c: intf::akita_server_conf = unsafe { std::mem::zeroed() };
        c.budget_ns = s.budget_ns;
        c.c_opt_ns = s.c_opt_ns;
        c.period_ns = s.period_ns;
        c.rel_deadline_ns = s.rel_deadline_ns;
        c.cpu = s.cpu;
        c.vm = s.vm;
        c.gen_ = gen;
        c.hi = u8::from(s.hi);
        c.valid = u8::from(valid);
        self.skel.maps.akita_servers.update(&sid.to_ne_bytes(), bytes(&c), MapFlags::ANY).context("cannot update akita_servers")
    }

    /// The vm_cgrps entries the VMs' cgroups call for now: a VM's libvirt
    /// `vcpuK` sub-cgroups if it has any (one server each; its other
    /// threads, such as QEMU's emulator threads, are host tasks), otherwise
    /// its cgroup, whose thread tid goes on server base + tid % vcpus.
    fn wanted_cgrps(&mut self) -> HashMap<u64, (u32, u32)> {
        let root = Path::new(CGROUP_ROOT);
        let mut want = HashMap::new();
        for vm in self.vms.iter_mut().flatten() {
            let dir = root.join(&vm.spec.cgroup);
            let Some(id) = schedbe_cgroup::cgroup_id(&dir) else {
                if vm.present != Some(false) {
                    warn!("vm {:?}: cgroup /{} does not exist; its vCPUs stay reserved until it does", vm.spec.name, vm.spec.cgroup);
                }
                vm.present = Some(false);
                continue;
            };
            if vm.present != Some(true) {
                info!("vm {:?}: cgroup /{} found", vm.spec.name, vm.spec.cgroup);
            }
            vm.present = Some(true);
            if vm.threads.is_some() {
                want.insert(id, (0, 0)); // nr 0: each thread by vm_threads
                continue;
            }
            let mut per_vcpu = Vec::new();
            for k in 0..vm.vcpus {
                let sub = ["libvirt/vcpu", "vcpu"].iter().find_map(|p| schedbe_cgroup::cgroup_id(&dir.join(format!("{p}{k}"))));
                if let Some(sub) = sub {
                    per_vcpu.push((sub, (vm.base + k, 1)));
                }
            }
            if per_vcpu.is_empty() {
                want.insert(id, (vm.base, vm.vcpus));
            } else {
                want.extend(per_vcpu);
            }
        }
        want
    }

    /// Bring vm_cgrps and be_cgroups in step with the cgroup tree.
    fn rescan(&mut self) -> Result<()> {
        let want = self.wanted_cgrps();
        let mut changed = false;
        for (id, v) in &want {
            if self.cgrps.get(id) != Some(v) {
                let e = intf::akita_vm_cgrp { base: v.0, nr: v.1 };
                self.skel.maps.vm_cgrps.update(&id.to_ne_bytes(), bytes(&e), MapFlags::ANY).context("cannot update vm_cgrps")?;
                changed = true;
            }
        }
        for id in self.cgrps.keys().filter(|id| !want.contains_key(id)) {
            let _ = self.skel.maps.vm_cgrps.delete(&id.to_ne_bytes());
            changed = true;
        }
        self.cgrps = want;
        changed |= self.sync_threads()?;

        let be_changed = crate::be_sync::sync_tree(&self.skel.maps.be_cgroups, Path::new(CGROUP_ROOT), &self.rules, &mut self.be_ids)?;
        let bss = self.skel.maps.bss_data.as_mut().context("BPF bss missing")?;
        if be_changed {
            bss.tier_gen = bss.tier_gen.wrapping_add(1);
        }
        if changed {
            bss.akita_gen = bss.akita_gen.wrapping_add(1);
        }
        Ok(())
    }

    /// One vCPU per thread of each `vcpus = "threads"` VM whose cgroup is
    /// there: admit the threads that appeared (each first-fit on its own;
    /// a refused one stays a host task and is tried again next time), drop
    /// the ones that exited. Returns whether vm_threads changed.
    fn sync_threads(&mut self) -> Result<bool> {
        let root = Path::new(CGROUP_ROOT);
        let (mut added, mut gone) = (Vec::new(), Vec::new());
        for vm in self.vms.iter_mut().flatten() {
            let Some(th) = vm.threads.as_mut() else { continue };
            let now = if vm.present == Some(true) { schedbe_cgroup::threads_below(&root.join(&vm.spec.cgroup)) } else { Vec::new() };
            let exited: Vec<u32> = th.admitted.keys().copied().filter(|t| now.binary_search(t).is_err()).collect();
            for tid in &exited {
                th.admitted.remove(tid);
                self.placement.remove_vm(&thread_key(&vm.spec.name, *tid));
            }
            let mut refused = Vec::new();
            let mut new = 0;
            let unplaced: Vec<u32> = now.iter().copied().filter(|t| !th.admitted.contains_key(t)).collect();
            for tid in unplaced {
                match admit_thread(&mut self.placement, &mut self.ids, &vm.spec, tid) {
                    Ok(sid) => {
                        th.admitted.insert(tid, sid);
                        added.push((tid, sid));
                        new += 1;
                    }
                    Err(e) => refused.push(e),
                }
            }
            if new > 0 || !exited.is_empty() {
                info!("vm {:?}: {new} threads placed, {} exited; {} vCPUs", vm.spec.name, exited.len(), th.admitted.len());
            }
            if refused.len() != th.refused {
                match refused.first() {
                    Some(first) => warn!("vm {:?}: {} threads run as host tasks: {first}", vm.spec.name, refused.len()),
                    None => info!("vm {:?}: every thread has a vCPU", vm.spec.name),
                }
                th.refused = refused.len();
            }
            gone.extend(exited);
        }
        if added.is_empty() && gone.is_empty() {
            return Ok(false);
        }
        // An exited thread's entry goes before its server is drained; a new
        // server is written (valid) before its thread's entry points at it.
        for tid in &gone {
            let _ = self.skel.maps.vm_threads.delete(&tid.to_ne_bytes());
        }
        self.sync_servers()?;
        for (tid, sid) in &added {
            self.skel.maps.vm_threads.update(&tid.to_ne_bytes(), &sid.to_ne_bytes(), MapFlags::ANY).context("cannot update vm_threads")?;
        }
        Ok(true)
    }

    /// Every server's and CPU's counters now.
    fn snapshot(&self) -> Snapshot {
        let mut servers = BTreeMap::new();
        for &sid in self.written.keys() {
            if let Ok(Some(v)) = self.skel.maps.akita_srun.lookup(&sid.to_ne_bytes(), MapFlags::ANY) {
                if let Some(r) = read::<intf::akita_server_run>(&v) {
                    servers.insert(sid, r);
                }
            }
        }
        let mut cpus = BTreeMap::new();
        for c in 0..self.nr_cpus {
            if let Ok(Some(v)) = self.skel.maps.akita_crun.lookup(&c.to_ne_bytes(), MapFlags::ANY) {
                if let Some(r) = read::<intf::akita_cpu_run>(&v) {
                    cpus.insert(c, r);
                }
            }
        }
        Snapshot { at: Instant::now(), mono_ns: crate::cpumax::monotonic_ns(), servers, cpus }
    }

    /// What the stats report: the VMs now and the counters since load.
    fn sample(&self) -> Sample {
        let parking = self.parker.as_ref().map(|p| p.counts()).unwrap_or_default();
        Sample { vms: self.vm_table(), snap: self.snapshot(), parking, started: self.started }
    }

    fn vm_table(&self) -> Vec<report::VmInfo> {
        self.vms.iter().flatten().map(|v| self.vm_info(v)).collect()
    }

    /// A VM's servers and the CPU of each, for stats and `list`.
    fn vm_info(&self, v: &Vm) -> report::VmInfo {
        let (servers, cpus) = match &v.threads {
            None => ((v.base..v.base + v.vcpus).collect(), self.placement.vm_cpus(&v.spec.name).unwrap_or_default().to_vec()),
            Some(th) => th
                .admitted
                .iter()
                .map(|(&tid, &sid)| (sid, self.placement.vm_cpus(&thread_key(&v.spec.name, tid)).and_then(|c| c.first().copied()).unwrap_or(0)))
                .unzip(),
        };
        report::VmInfo { name: v.spec.name.clone(), crit: v.spec.server.crit(), servers, cpus, server: v.spec.server }
    }

    /// `schedbe akita add`: admit the `[[vm]]` tables of `toml`, all or none.
    fn add(&mut self, toml: &str) -> Result<String> {
        let text = format!("cpus = \"{}\"\ninitial_temperature = {}\n{toml}", super::cpus::format(&self.cfg.cpus), self.cfg.initial_temperature);
        let new = AkitaConfig::parse(&text).context("invalid VM description")?.vms;
        if new.is_empty() {
            bail!("no [[vm]] table in the request");
        }
        let mut all: Vec<VmSpec> = self.vms.iter().flatten().map(|v| v.spec.clone()).collect();
        all.extend(new.iter().cloned());
        config::check_unique(&all)?;
        let (mut placement, mut ids) = (self.placement.clone(), self.ids.clone());
        let mut admitted = Vec::new();
        for spec in &new {
            admitted.push(admit(&mut placement, &mut ids, spec).map_err(|e| anyhow::anyhow!(e))?);
        }
        let mut msg = Vec::new();
        for vm in &admitted {
            let cpus = placement.vm_cpus(&vm.spec.name).unwrap_or_default();
            msg.push(format!("vm {:?} admitted: vCPUs on CPUs {:?}", vm.spec.name, cpus));
        }
        self.placement = placement;
        self.ids = ids;
        self.vms.extend(admitted.into_iter().map(Some));
        self.sync_servers()?;
        self.rescan()?;
        Ok(msg.join("\n"))
    }

    /// `schedbe akita remove`: its tasks become host tasks; the others stay where they are.
    fn remove(&mut self, name: &str) -> Result<String> {
        let Some(i) = self.vms.iter().position(|v| v.as_ref().is_some_and(|v| v.spec.name == name)) else {
            bail!("no VM named {name:?}");
        };
        self.placement.remove_vm(name);
        if let Some(th) = self.vms[i].as_ref().and_then(|v| v.threads.as_ref()) {
            for &tid in th.admitted.keys() {
                self.placement.remove_vm(&thread_key(name, tid));
                let _ = self.skel.maps.vm_threads.delete(&tid.to_ne_bytes());
            }
        }
        self.vms[i] = None;
        self.rescan()?;
        self.sync_servers()?;
        Ok(format!("vm {name:?} removed; its tasks run as host tasks"))
    }

    fn list(&self) -> String {
        let mut out = Vec::new();
        for v in self.vms.iter().flatten() {
            let vcpus = match &v.threads {
                None => v.vcpus.to_string(),
                Some(th) => format!("threads({})", th.admitted.len()),
            };
            let cpus = self.vm_info(v).cpus;
            out.push(format!("{} {} /{} vcpus={vcpus} cpus={cpus:?}", v.spec.name, v.spec.server.crit(), v.spec.cgroup));
        }
        if out.is_empty() {
            "no VMs".to_string()
        } else {
            out.join("\n")
        }
    }

    fn answer(&mut self, req: Request) -> Reply {
        let r = match req {
            Request::Add { toml } => self.add(&toml),
            Request::Remove { name } => self.remove(&name),
            Request::List => Ok(self.list()),
        };
        match r {
            Ok(message) => Reply { ok: true, message },
            Err(e) => Reply { ok: false, message: format!("{e:#}") },
        }
    }

    /// Drop removed servers whose queues the BPF side has seen empty, and free their ids.
    fn drain(&mut self) -> Result<()> {
        let mut done = Vec::new();
        for &(sid, since) in &self.draining {
            if since.elapsed() < DRAIN_GRACE {
                continue;
            }
            let queued = self
                .skel
                .maps
                .akita_srun
                .lookup(&sid.to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|v| read::<intf::akita_server_run>(&v))
                .map_or(0, |r| r.queued);
            if queued == 0 {
                done.push(sid);
            }
        }
        if done.is_empty() {
            return Ok(());
        }
        self.draining.retain(|d| !done.contains(&d.0));
        for sid in done {
            self.drain_cpu.remove(&sid);
            self.written.remove(&sid);
            self.ids.free(sid, 1);
        }
        // rewrite the CPU lists without them
        self.cpu_servers.clear();
        self.sync_servers()
    }

    /// Parking, as under the SCHED_BE policy: BE is below every VM and host
    /// task, so what starves it is sustained VM and host load.
    fn park_step(&mut self) {
        if let Some(p) = self.parker.as_mut() {
            p.step(&crate::park::take_reports(&self.skel.maps.starved_cgrps), &self.rules);
        }
    }

    /// Run until `shutdown` or until the kernel ejects the scheduler.
    pub fn run(&mut self, shutdown: Arc<AtomicBool>, out: StatsOut) -> Result<UserExitInfo> {
        let server = crate::stats_server::Server::launch(super::stats::server_data());
        let mut next_rescan = Instant::now() + RESCAN;
        let mut next_park = Instant::now();
        let mut next_stats = out.interval.map(|i| Instant::now() + i);
        let mut prev = self.sample();
        let mut rows = 0u64;
        while !shutdown.load(Ordering::Relaxed) && !loader::exited(&self.skel) {
            let now = Instant::now();
            if now >= next_rescan {
                if let Err(e) = self.rescan() {
                    warn!("cgroup rescan failed: {e:#}");
                }
                self.unenforced.check();
                if let Err(e) = self.drain() {
                    warn!("draining removed servers failed: {e:#}");
                }
                next_rescan = now + RESCAN;
            }
            if self.parker.is_some() && now >= next_park {
                self.park_step();
                next_park = now + crate::park::poll_interval(self.parker.as_ref().is_some_and(|p| p.any_parked()));
            }
            if let (Some(t), Some(intv)) = (next_stats, out.interval) {
                if now >= t {
                    let cur = self.sample();
                    let r = super::stats::report(&prev, &cur);
                    if out.json {
                        println!("{}", serde_json::to_string(&r)?);
                    } else {
                        print!("{}", r.render(rows == 0));
                    }
                    rows += 1;
                    prev = cur;
                    next_stats = Some(t + intv);
                }
            }
            let park_due = self.parker.is_some().then_some(next_park);
            let due = [Some(next_rescan), park_due, next_stats].into_iter().flatten().min().unwrap_or(now);
            let wait = due.saturating_duration_since(Instant::now()).min(SHUTDOWN_POLL);
            let calls = self.control.as_ref().map(|c| c.calls());
            if let Some(call) = server.wait_or(calls, wait, || Ok(self.sample()))? {
                let reply = self.answer(call.req);
                info!("control: {}", reply.message.replace('\n', "; "));
                let _ = call.reply.send(reply);
            }
        }
        // Thaw before unloading: BE must be runnable when EEVDF takes over.
        if let Some(p) = self.parker.as_mut() {
            p.unpark_all("schedbe is exiting");
        }
        let exit = loader::detach(&self.skel, self.link.take());
        let _ = self.control.take();
        exit
    }
}

/// `schedbe run --policy akita`: load, run until a signal, reload when the kernel asks.
pub fn run_policy(cfg: &AkitaConfig, socket: &Path, park: &ParkOptions, shutdown: Arc<AtomicBool>, out: StatsOut) -> Result<i32> {
    crate::lifecycle::run_until_stopped(&shutdown.clone(), |open_object| {
        let mut rt = Runtime::init(cfg, socket, park, open_object)?;
        rt.run(shutdown.clone(), out)
    })
}
