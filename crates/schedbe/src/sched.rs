//! `schedbe run`: load the BPF policy, keep its maps in step with the cgroup
//! tree, report stats, and unload cleanly.

use std::collections::{HashMap, HashSet};
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use log::{info, warn};
use scx_stats::prelude::*;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report, Topology, UserExitInfo};

use crate::bpf_intf;
use crate::bpf_skel::*;
use crate::config::Config;
use crate::flatten::{self, Node};
use crate::stats::Metrics;
use schedbe_cgroup::{BeRules, IdSet, CGROUP_ROOT};

/// How `schedbe run` prints stats.
#[derive(Debug, Clone, Copy)]
pub struct StatsOut {
    pub interval: Option<Duration>,
    pub json: bool,
}

pub struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    struct_ops: Option<libbpf_rs::Link>,
    cfg: Config,
    rules: BeRules,
    be_ids: IdSet,
    warned_cpu_max: HashSet<String>,
    cpu_max_count: u64,
    load_prev: HashMap<u64, u64>,
    factor_ids: HashSet<u64>,
    /// The cgroup tree as of the last rescan: (id, rel, has cpu controller, cpu.weight).
    tree: Vec<(u64, String, bool, u32)>,
    factors: HashMap<u64, u64>,
    last_flatten: Instant,
    started: Instant,
    nr_cpus: u64,
}

impl<'a> Scheduler<'a> {
    pub fn init(cfg: &Config, open_object: &'a mut MaybeUninit<OpenObject>) -> Result<Self> {
        let rules = cfg.rules()?;
        scx_utils::try_set_rlimit_infinity();
        let topo = Topology::new().context("cannot read the CPU topology")?;

        let builder = BpfSkelBuilder::default();
        let mut skel = scx_ops_open!(builder, open_object, schedbe_ops, None::<libbpf_rs::libbpf_sys::bpf_object_open_opts>)?;

        let rodata = skel.maps.rodata_data.as_mut().context("BPF rodata missing")?;
        rodata.lc_slice_ns = cfg.lc_slice_us * 1000;
        rodata.be_slice_ns = cfg.be_slice_us * 1000;
        rodata.guard_slice_ns = cfg.guard_slice_us * 1000;
        rodata.starvation_limit_ns = cfg.starvation_limit_ms * 1_000_000;
        // LLC ids may be sparse; number them densely for the DSQ ids.
        let llc_index: HashMap<usize, u32> =
            topo.all_llcs.keys().enumerate().map(|(i, id)| (*id, i as u32)).collect();
        let nr_llcs = llc_index.len().clamp(1, bpf_intf::schedbe_consts_SCHEDBE_MAX_LLCS as usize);
        rodata.nr_llcs = nr_llcs as u32;
        for cpu in topo.all_cpus.values() {
            if cpu.id < bpf_intf::schedbe_consts_SCHEDBE_MAX_CPUS as usize {
                let idx = llc_index.get(&cpu.llc_id).copied().unwrap_or(0);
                rodata.cpu_llc[cpu.id] = if (idx as usize) < nr_llcs { idx } else { 0 };
            }
        }
        info!("{} CPUs, {} LLC queue pairs", topo.all_cpus.len(), nr_llcs);

        let skel = scx_ops_load!(skel, schedbe_ops, uei)?;

        let mut sched = Self {
            struct_ops: None,
            cfg: cfg.clone(),
            rules,
            be_ids: IdSet::default(),
            warned_cpu_max: HashSet::new(),
            cpu_max_count: 0,
            load_prev: HashMap::new(),
            factor_ids: HashSet::new(),
            tree: Vec::new(),
            factors: HashMap::new(),
            last_flatten: Instant::now(),
            started: Instant::now(),
            nr_cpus: topo.all_cpus.len() as u64,
            skel,
        };
        // Fill the BE cgroup map before attaching, so tasks are classified
        // correctly from the first scheduling decision.
        sched.rescan().context("initial cgroup scan failed")?;
        sched.struct_ops = Some(scx_ops_attach!(sched.skel, schedbe_ops)?);
        info!("scheduler enabled (BE patterns: {})", sched.rules.patterns().join(", "));
        Ok(sched)
    }

    /// Walk the cgroup tree once: sync the BE cgroup map with the path
    /// patterns, warn about cpu.max, and cache ids and weights for flattening.
    fn rescan(&mut self) -> Result<()> {
        let root = Path::new(CGROUP_ROOT);
        let all = schedbe_cgroup::walk(root)?;
        self.tree = all
            .iter()
            .map(|c| {
                let has_cpu = c.rel.is_empty() || root.join(&c.rel).join("cpu.weight").exists();
                (c.id, c.rel.clone(), has_cpu, schedbe_cgroup::cpu_weight(root, &c.rel))
            })
            .collect();
        let found: Vec<_> = schedbe_cgroup::be_matches(&all, &self.rules).collect();
        let (add, del) = self.be_ids.update(found.iter().map(|c| c.id));
        for id in add {
            self.skel.maps.be_cgroups.update(&id.to_ne_bytes(), &[1u8], MapFlags::ANY)
                .context("cannot update be_cgroups map")?;
            if let Some(c) = found.iter().find(|c| c.id == id) {
                info!("BE cgroup: /{}", c.rel);
            }
        }
        for id in del {
            let _ = self.skel.maps.be_cgroups.delete(&id.to_ne_bytes());
        }

        let limits = schedbe_cgroup::cpu_max_of(root, &all);
        self.cpu_max_count = limits.len() as u64;
        for l in &limits {
            if self.warned_cpu_max.insert(l.rel.clone()) {
                warn!(
                    "WARNING: cgroup /{} has cpu.max = \"{}\", which is NOT enforced while schedbe is loaded (schedbe does not enforce cpu.max yet)",
                    l.rel, l.value
                );
            }
        }
        self.warned_cpu_max.retain(|r| limits.iter().any(|l| &l.rel == r));
        Ok(())
    }

    /// Recompute the flattened LC cgroup weight factors from measured load.
    fn flatten(&mut self) -> Result<()> {
        let dt = self.last_flatten.elapsed().as_nanos().max(1) as f64;
        self.last_flatten = Instant::now();

        let mut load_now: HashMap<u64, u64> = HashMap::new();
        for key in self.skel.maps.cgrp_load.keys() {
            if let Some(v) = self.skel.maps.cgrp_load.lookup(&key, MapFlags::ANY)? {
                let id = u64::from_ne_bytes(key[..8].try_into()?);
                load_now.insert(id, u64::from_ne_bytes(v[..8].try_into()?));
            }
        }
        let live: HashSet<u64> = self.tree.iter().map(|c| c.0).collect();
        let nodes: Vec<Node> = self
            .tree
            .iter()
            .map(|(id, rel, has_cpu, weight)| {
                let cur = load_now.get(id).copied().unwrap_or(0);
                let prev = self.load_prev.get(id).copied().unwrap_or(cur);
                Node { id: *id, rel: rel.clone(), has_cpu: *has_cpu, weight: *weight, load: cur.saturating_sub(prev) as f64 / dt }
            })
            .collect();
        for (id, f) in flatten::flatten(&nodes) {
            // Only write factors that changed by more than 1%: map updates are syscalls.
            let old = self.factors.get(&id).copied().unwrap_or(0);
            if old == 0 || f.abs_diff(old) * 100 > old {
                self.skel.maps.cgrp_factor.update(&id.to_ne_bytes(), &f.to_ne_bytes(), MapFlags::ANY)?;
                self.factors.insert(id, f);
            }
            self.factor_ids.insert(id);
        }
        // Forget cgroups that are gone.
        for id in self.factor_ids.iter().filter(|id| !live.contains(id)).copied().collect::<Vec<_>>() {
            let _ = self.skel.maps.cgrp_factor.delete(&id.to_ne_bytes());
            self.factor_ids.remove(&id);
            self.factors.remove(&id);
        }
        for id in load_now.keys().filter(|id| !live.contains(id)) {
            let _ = self.skel.maps.cgrp_load.delete(&id.to_ne_bytes());
        }
        load_now.retain(|id, _| live.contains(id));
        self.load_prev = load_now;
        Ok(())
    }

    /// Cumulative metrics since load.
    fn metrics(&self) -> Result<Metrics> {
        let vals = self
            .skel
            .maps
            .stats
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?
            .context("stats map is empty")?;
        // SAFETY: all-zero is a valid cpu_stats (plain u64 fields).
        let mut t: bpf_intf::cpu_stats = unsafe { std::mem::zeroed() };
        for v in vals {
            if v.len() < std::mem::size_of::<bpf_intf::cpu_stats>() {
                continue;
            }
            // SAFETY: cpu_stats is plain u64 fields; the slice is at least that long.
            let s: bpf_intf::cpu_stats = unsafe { std::ptr::read_unaligned(v.as_ptr() as *const _) };
            t.lc_ns += s.lc_ns;
            t.be_ns += s.be_ns;
            t.lc_dispatches += s.lc_dispatches;
            t.lc_direct += s.lc_direct;
            t.be_dispatches += s.be_dispatches;
            t.preempt_be += s.preempt_be;
            t.kick_lat_ns += s.kick_lat_ns;
            t.kick_lat_n += s.kick_lat_n;
            t.kick_idle += s.kick_idle;
            t.exit_takes += s.exit_takes;
            t.tick_yields += s.tick_yields;
            t.running_yields += s.running_yields;
            t.guard_slices += s.guard_slices;
            t.guard_ns += s.guard_ns;
            t.requeued_lc += s.requeued_lc;
        }
        Ok(Metrics {
            interval_ms: self.started.elapsed().as_secs_f64() * 1e3,
            nr_cpus: self.nr_cpus,
            lc_ms: t.lc_ns as f64 / 1e6,
            be_ms: t.be_ns as f64 / 1e6,
            lc_pct: 0.0,
            be_pct: 0.0,
            preempt_be: t.preempt_be,
            kick_lat_ms_sum: t.kick_lat_ns as f64 / 1e6,
            kick_lat_n: t.kick_lat_n,
            kick_lat_us: 0.0,
            exit_takes: t.exit_takes,
            tick_yields: t.tick_yields,
            running_yields: t.running_yields,
            kick_idle: t.kick_idle,
            lc_direct: t.lc_direct,
            lc_dispatches: t.lc_dispatches,
            be_dispatches: t.be_dispatches,
            guard_slices: t.guard_slices,
            guard_ms: t.guard_ns as f64 / 1e6,
            requeued_lc: t.requeued_lc,
            be_cgroups: self.be_ids.len() as u64,
            cpu_max_unenforced: self.cpu_max_count,
        })
    }

    fn exited(&mut self) -> bool {
        uei_exited!(&self.skel, uei)
    }

    /// Run until `shutdown` or until the kernel ejects the scheduler.
    pub fn run(&mut self, shutdown: Arc<AtomicBool>, out: StatsOut) -> Result<UserExitInfo> {
        let server = StatsServer::new(crate::stats::server_data()).launch();
        let chans = match &server {
            Ok(s) => Some(s.channels()),
            Err(e) => {
                warn!("stats server not started: {e:#}");
                None
            }
        };
        let rescan_every = Duration::from_millis(self.cfg.rescan_ms);
        let flatten_every = Duration::from_millis(self.cfg.flatten_ms);
        let (mut next_rescan, mut next_flatten) = (Instant::now() + rescan_every, Instant::now() + flatten_every);
        let mut next_stats = out.interval.map(|i| Instant::now() + i);
        let mut prev = self.metrics()?;
        let mut rows = 0u64;

        while !shutdown.load(Ordering::Relaxed) && !self.exited() {
            let now = Instant::now();
            if now >= next_rescan {
                if let Err(e) = self.rescan() {
                    warn!("cgroup rescan failed: {e:#}");
                }
                next_rescan = now + rescan_every;
            }
            if now >= next_flatten {
                if let Err(e) = self.flatten() {
                    warn!("weight flattening failed: {e:#}");
                }
                next_flatten = now + flatten_every;
            }
            if let (Some(t), Some(intv)) = (next_stats, out.interval) {
                if now >= t {
                    let cur = self.metrics()?;
                    let d = cur.delta(&prev);
                    prev = cur;
                    if out.json {
                        println!("{}", serde_json::to_string(&d)?);
                    } else {
                        let mut so = std::io::stdout();
                        if rows % 20 == 0 {
                            println!("{}", Metrics::HEADER);
                        }
                        d.format_row(&mut so)?;
                    }
                    rows += 1;
                    next_stats = Some(now + intv);
                }
            }
            match &chans {
                Some((res_ch, req_ch)) => match req_ch.recv_timeout(Duration::from_millis(50)) {
                    Ok(()) => res_ch.send(self.metrics()?)?,
                    Err(crossbeam::channel::RecvTimeoutError::Timeout) => {}
                    Err(e) => return Err(e.into()),
                },
                None => std::thread::sleep(Duration::from_millis(50)),
            }
        }

        let _ = self.struct_ops.take();
        uei_report!(&self.skel, uei)
    }
}
