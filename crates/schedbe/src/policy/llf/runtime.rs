//! `schedbe run --policy llf`: load llf.bpf.c, keep each sandbox's order key
//! (its decaying load, from the CPU time the BPF side sums per sandbox) up
//! to date, serve and print stats, unload cleanly.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use log::{info, warn};
use scx_utils::UserExitInfo;

use super::bpf::intf;
use super::bpf::*;
use super::stats::{self, LlfStats};
use crate::cpumax::{BwMaps, CpuMax};
use crate::loader;
use crate::park::{ParkOptions, Parker};
use crate::sandbox::discover::{self, Sandbox};
use crate::sandbox::load::{LoadTracker, Sample};
use schedbe_cgroup::{BeRules, IdSet, CGROUP_ROOT};

/// How often loads are measured and keys written.
const UPDATE: Duration = Duration::from_millis(200);
/// How often the sandboxes are looked for.
const RESCAN: Duration = Duration::from_secs(1);
const SHUTDOWN_POLL: Duration = Duration::from_millis(250);

/// What `schedbe run --policy llf` was asked.
#[derive(Debug, Clone)]
pub struct LlfOptions {
    /// Sandbox path patterns (globs under /sys/fs/cgroup); empty: kubelet pods.
    pub patterns: Vec<String>,
    pub half_life: Duration,
    pub stats: Option<Duration>,
    pub json: bool,
    /// Parking of starved BE cgroups, as under the other policies.
    pub park: ParkOptions,
}

struct Runtime<'a> {
    skel: LlfSkel<'a>,
    link: Option<libbpf_rs::Link>,
    opts: LlfOptions,
    pats: schedbe_cgroup::PathPatterns,
    sandboxes: Vec<Sandbox>,
    loads: LoadTracker,
    /// The keys last written, by sandbox cgroup id.
    keys: HashMap<u64, u64>,
    rules: BeRules,
    be_ids: IdSet,
    parker: Option<Parker>,
    /// cpu.max, enforced in quota mode (cpumax.bpf.h, cpumax.rs).
    cpumax: CpuMax,
    /// Which cgroups have the cpu controller (cpu.weight exists), by id: (path, yes).
    has_cpu: HashMap<u64, (String, bool)>,
    /// cpu.max writes are not reported (no ops.cgroup_set_bandwidth, before v6.17): read it at every rescan.
    poll_cpu_max: bool,
    rescans: u64,
}

impl<'a> Runtime<'a> {
    fn init(opts: &LlfOptions, open_object: &'a mut MaybeUninit<OpenObject>) -> Result<Self> {
        let pats = discover::patterns(&opts.patterns)?;
        let loads = LoadTracker::new(opts.half_life)?;
        let (mut skel, kernel) = loader::open::<LlfSkel>(open_object)?;
        let rodata = skel.maps.rodata_data.as_mut().context("BPF rodata missing")?;
        // host tasks' own loads decay as the sandboxes' do
        rodata.half_life_ns = opts.half_life.as_nanos().min(u128::from(u64::MAX)) as u64;
        rodata.park_after_ns = opts.park.window_ns;
        // the daemon goes first: the order is only as fresh as the loads it publishes
        rodata.daemon_tgid = i32::try_from(std::process::id()).context("pid out of range")?;
        // Thaw what a previous run left parked before anything else changes.
        let parker = crate::park::start(&opts.park)?;
        let skel = loader::load(skel)?;
        let mut rt = Self {
            skel,
            link: None,
            opts: opts.clone(),
            pats,
            sandboxes: Vec::new(),
            loads,
            keys: HashMap::new(),
            rules: BeRules::defaults(),
            be_ids: IdSet::default(),
            parker,
            cpumax: CpuMax::default(),
            has_cpu: HashMap::new(),
            poll_cpu_max: !kernel.set_bandwidth,
            rescans: 0,
        };
        rt.rescan(true).context("initial cgroup scan failed")?;
        rt.update_keys()?;
        rt.link = Some(loader::attach(&mut rt.skel)?);
        info!("llf policy enabled: {} sandboxes (patterns: {})", rt.sandboxes.len(), rt.pats.patterns().join(", "));
        if rt.sandboxes.is_empty() {
            warn!(
                "no cgroup under {CGROUP_ROOT} matches the sandbox patterns ({}): every task is ordered by its own load, as a host task, until one appears",
                rt.pats.patterns().join(", ")
            );
        }
        Ok(rt)
    }

    /// Find the sandboxes and the BE cgroups; drop the keys of sandboxes that are gone.
    ///
    /// The files of cgroups seen before are read again only when `reread`
    /// (cpu.max was written) or cgrp_watch::reread_due() says so; the walk
    /// itself runs each time.
    fn rescan(&mut self, reread: bool) -> Result<()> {
        let root = Path::new(CGROUP_ROOT);
        // one walk of the tree for both the sandboxes and the BE cgroups
        let all = schedbe_cgroup::walk(root)?;
        let found = discover::select(&all, &self.pats);
        let before = self.sandboxes.len();
        let live: std::collections::HashSet<u64> = found.iter().map(|s| s.cgroup.id).collect();
        let gone: Vec<u64> = self.keys.keys().copied().filter(|id| !live.contains(id)).collect();
        let mut changed = !gone.is_empty();
        for id in gone {
            let _ = self.skel.maps.sandbox_key.delete(&id.to_ne_bytes());
            let _ = self.skel.maps.sandbox_ran.delete(&id.to_ne_bytes());
            self.keys.remove(&id);
        }
        for s in &found {
            if !self.keys.contains_key(&s.cgroup.id) {
                let id = s.cgroup.id.to_ne_bytes();
                // its CPU time is counted from here (BPF adds to existing entries only)
                self.skel.maps.sandbox_ran.update(&id, &0u64.to_ne_bytes(), MapFlags::ANY).context("cannot update sandbox_ran")?;
                // a new sandbox starts with no load: its first requests go first
                self.skel.maps.sandbox_key.update(&id, &0u64.to_ne_bytes(), MapFlags::ANY).context("cannot update sandbox_key")?;
                self.keys.insert(s.cgroup.id, 0);
                changed = true;
            }
        }
        self.sandboxes = found;
        if self.sandboxes.len() != before {
            info!("{} sandboxes", self.sandboxes.len());
        }
        let be_changed = crate::be_sync::sync(&self.skel.maps.be_cgroups, &all, &self.rules, &mut self.be_ids)?;
        let bss = self.skel.maps.bss_data.as_mut().context("BPF bss missing")?;
        let reread = crate::cgrp_watch::reread_due(&mut bss.cgrp_reread_req, reread, self.poll_cpu_max, self.rescans);
        self.rescans += 1;
        // cpu.max: every cgroup with the cpu controller gets a slot (the root has no cpu.max)
        let known = if reread { HashMap::new() } else { std::mem::take(&mut self.has_cpu) };
        self.has_cpu = all
            .iter()
            .filter(|c| !c.rel.is_empty())
            .map(|c| match known.get(&c.id) {
                Some((rel, yes)) if *rel == c.rel => (c.id, (c.rel.clone(), *yes)),
                _ => (c.id, (c.rel.clone(), root.join(&c.rel).join("cpu.weight").exists())),
            })
            .collect();
        let limitable: Vec<(u64, &str)> =
            self.has_cpu.iter().filter(|(_, (_, yes))| *yes).map(|(id, (rel, _))| (*id, rel.as_str())).collect();
        let m = &self.skel.maps;
        let maps = BwMaps { slot_of: &m.bw_slot_of, conf: &m.bw_conf, stats: &m.bw_stats };
        let bw = self.cpumax.sync(&maps, root, &limitable, reread).context("cannot update the cpu.max slots")?;
        let bss = self.skel.maps.bss_data.as_mut().context("BPF bss missing")?;
        if be_changed {
            bss.tier_gen = bss.tier_gen.wrapping_add(1);
        }
        if changed {
            bss.llf_gen = bss.llf_gen.wrapping_add(1);
        }
        bss.bw_on = bw.on;
        if bw.bump_gen {
            bss.bw_gen = bss.bw_gen.wrapping_add(1);
        }
        Ok(())
    }

    /// Every sandbox's CPU time as the BPF side counted it (sandbox_ran), µs,
    /// by cgroup id: one batched read of the map, not a syscall per sandbox
    /// (on a node of 1000 sandboxes, 5000 syscalls a second).
    fn ran_us(&self) -> Result<HashMap<u64, u64>> {
        let it = self.skel.maps.sandbox_ran.lookup_batch(1024, MapFlags::ANY, MapFlags::ANY).context("cannot read sandbox_ran")?;
        Ok(it
            .filter_map(|(k, v)| {
                let k: [u8; 8] = k.get(..8)?.try_into().ok()?;
                let v: [u8; 8] = v.get(..8)?.try_into().ok()?;
                Some((u64::from_ne_bytes(k), u64::from_ne_bytes(v) / 1000))
            })
            .collect())
    }

    /// Measure every sandbox's load and write the keys that moved.
    fn update_keys(&mut self) -> Result<()> {
        let t = crate::cpumax::monotonic_ns();
        let ran = self.ran_us()?;
        let samples: Vec<Sample> = self
            .sandboxes
            .iter()
            .filter_map(|s| ran.get(&s.cgroup.id).map(|&usage_us| Sample { rel: s.cgroup.rel.clone(), id: s.cgroup.id, usage_us }))
            .collect();
        let loads = self.loads.update(t, &samples);
        for (s, load) in samples.iter().zip(loads) {
            let Some(load) = load else { continue };
            let key = (load.max(0.0) * f64::from(intf::llf_consts_LLF_LOAD_ONE)).round() as u64;
            let old = self.keys.get(&s.id).copied().unwrap_or(u64::MAX);
            // a map update is a syscall: only when the key moved by more than 1/256 CPU
            if old == u64::MAX || key.abs_diff(old) > u64::from(intf::llf_consts_LLF_LOAD_ONE) / 256 {
                self.skel.maps.sandbox_key.update(&s.id.to_ne_bytes(), &key.to_ne_bytes(), MapFlags::ANY).context("cannot update sandbox_key")?;
                self.keys.insert(s.id, key);
            }
        }
        Ok(())
    }

    fn counters(&self) -> intf::llf_stats {
        // SAFETY: all-zero is a valid llf_stats (plain u64 fields).
        let mut t: intf::llf_stats = unsafe { std::mem::zeroed() };
        if let Ok(Some(vals)) = self.skel.maps.stats.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY) {
            for v in vals.iter().filter(|v| v.len() >= std::mem::size_of::<intf::llf_stats>()) {
                // SAFETY: llf_stats is plain u64 fields; the slice is at least that long.
                let s: intf::llf_stats = unsafe { std::ptr::read_unaligned(v.as_ptr() as *const _) };
                t.lc_dispatches += s.lc_dispatches;
                t.direct += s.direct;
                t.floor_slices += s.floor_slices;
                t.preempts += s.preempts;
                t.be_dispatches += s.be_dispatches;
                t.be_guards += s.be_guards;
                t.kept += s.kept;
                t.starved_reports += s.starved_reports;
                t.be_rescues += s.be_rescues;
                t.rt_evacuations += s.rt_evacuations;
                t.rt_rescues += s.rt_rescues;
            }
        }
        t
    }

    /// The state to report, counters cumulative since load.
    fn sample(&self, started: Instant) -> stats::Sample {
        let unit = f64::from(intf::llf_consts_LLF_LOAD_ONE);
        let mut top: Vec<(String, f64)> =
            self.sandboxes.iter().filter_map(|s| self.keys.get(&s.cgroup.id).map(|k| (s.cgroup.rel.clone(), *k as f64 / unit))).collect();
        top.sort_by(|a, b| b.1.total_cmp(&a.1));
        top.truncate(5);
        stats::Sample {
            uptime_s: started.elapsed().as_secs_f64(),
            sandboxes: self.sandboxes.len(),
            top: top.into_iter().collect(),
            counters: self.counters(),
            parking: self.parker.as_ref().map(|p| p.counts()).unwrap_or_default(),
            cgroups: self.cpumax.stats(&self.skel.maps.bw_stats),
        }
    }

    /// Did ops.cgroup_set_bandwidth see a cgroup that has no slot yet? (Clears the request.)
    fn bw_rescan_requested(&mut self) -> bool {
        self.skel.maps.bss_data.as_mut().is_some_and(|b| crate::cpumax::take_rescan_request(&mut b.bw_rescan_req))
    }

    fn run(&mut self, shutdown: Arc<AtomicBool>) -> Result<UserExitInfo> {
        let started = Instant::now();
        let server = crate::stats_server::Server::launch(stats::server_data());
        let (mut next_update, mut next_rescan, mut next_park) = (started + UPDATE, started + RESCAN, started);
        let mut next_stats = self.opts.stats.map(|i| started + i);
        // SAFETY: all-zero is a valid llf_stats.
        let mut prev: intf::llf_stats = unsafe { std::mem::zeroed() };
        while !shutdown.load(Ordering::Relaxed) && !loader::exited(&self.skel) {
            let now = Instant::now();
            // also when ops.cgroup_set_bandwidth saw a limit on a cgroup created since the last rescan
            if crate::cpumax::rescan_step(now >= next_rescan, self.bw_rescan_requested(), |bw| self.rescan(bw)) {
                next_rescan = now + RESCAN;
            }
            if now >= next_update {
                if let Err(e) = self.update_keys() {
                    warn!("sandbox load update failed: {e:#}");
                }
                next_update = now + UPDATE;
            }
            if let Some(p) = self.parker.as_mut() {
                if now >= next_park {
                    p.step(&crate::park::take_reports(&self.skel.maps.starved_cgrps), &self.rules);
                    next_park = now + crate::park::poll_interval(p.any_parked());
                }
            }
            if let (Some(t), Some(intv)) = (next_stats, self.opts.stats) {
                if now >= t {
                    let cur = self.sample(started);
                    let row = LlfStats::between(&prev, &cur);
                    prev = cur.counters;
                    if self.opts.json {
                        println!("{}", serde_json::to_string(&row)?);
                    } else {
                        println!("{}", row.format_row());
                    }
                    next_stats = Some(t + intv);
                }
            }
            let park_due = self.parker.is_some().then_some(next_park);
            let due = [Some(next_update), Some(next_rescan), park_due, next_stats].into_iter().flatten().min().unwrap_or(now);
            server.wait(due.saturating_duration_since(Instant::now()).min(SHUTDOWN_POLL), || Ok(self.sample(started)))?;
        }
        // Thaw before unloading: BE must be runnable when EEVDF takes over.
        if let Some(p) = self.parker.as_mut() {
            p.unpark_all("schedbe is exiting");
        }
        loader::detach(&self.skel, self.link.take())
    }
}

/// `schedbe run --policy llf`.
pub fn run_policy(opts: &LlfOptions, shutdown: Arc<AtomicBool>) -> Result<i32> {
    crate::lifecycle::run_until_stopped(&shutdown.clone(), |open_object| {
        let mut rt = Runtime::init(opts, open_object)?;
        rt.run(shutdown.clone())
    })
}
