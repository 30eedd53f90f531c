//! `schedbe run`: load the BPF policy, keep its maps in step with the cgroup
//! tree, report stats, and unload cleanly.

use std::collections::{HashMap, HashSet};
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use log::{debug, info, warn};
use scx_utils::{Topology, UserExitInfo};

use super::bpf::*;
use super::config::Config;
use super::flatten::{self, Node};
use super::resv::Reservations;
use super::stats::Metrics;
use crate::bpf_intf;
use crate::cpumax::{BwMaps, CpuMax};
use crate::loader;
use crate::park::{self, Parker};
use schedbe_cgroup::{BeRules, IdSet, CGROUP_ROOT};

/// Every how many rescans stale cgrp_load entries are removed.
const LOAD_GC_EVERY: u64 = 10;
/// Longest sleep of the main loop: how soon SIGINT/SIGTERM or the kernel
/// ejecting the scheduler is noticed.
const SHUTDOWN_POLL: Duration = Duration::from_millis(250);

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
    cpumax: CpuMax,
    load_prev: HashMap<u64, u64>,
    factor_ids: HashSet<u64>,
    /// The cgroup tree as of the last rescan: (id, rel, has cpu controller, cpu.weight).
    tree: Vec<(u64, String, bool, u32)>,
    factors: HashMap<u64, u64>,
    /// Entitlement slots (None: --no-reservations)
    resv: Option<Reservations>,
    /// cgroup id -> relative path, as of the last rescan.
    id_rel: HashMap<u64, String>,
    /// Cgroups matching the BE path patterns (relative paths).
    be_rels: HashSet<String>,
    parker: Option<Parker>,
    last_flatten: Instant,
    rescans: u64,
    /// cpu.max writes are not reported (no ops.cgroup_set_bandwidth, before v6.17): read it at every rescan.
    poll_cpu_max: bool,
    started: Instant,
    nr_cpus: u64,
}

impl<'a> Scheduler<'a> {
    pub fn init(cfg: &Config, open_object: &'a mut MaybeUninit<OpenObject>) -> Result<Self> {
        let rules = cfg.rules()?;
        let topo = Topology::new().context("cannot read the CPU topology")?;

        let (mut skel, kernel) = loader::open::<BpfSkel>(open_object)?;
        let rodata = skel.maps.rodata_data.as_mut().context("BPF rodata missing")?;
        rodata.lc_slice_ns = cfg.lc_slice_us * 1000;
        rodata.lc_preempt_gran_ns = cfg.lc_preempt_us * 1000; // 0: LC never preempts LC
        rodata.lc_preempt_min_ns = cfg.lc_preempt_min_us * 1000;
        rodata.lc_wake_credit_ns = cfg.lc_wake_credit_us.unwrap_or(cfg.lc_slice_us) * 1000;
        rodata.be_slice_ns = cfg.be_slice_us * 1000;
        rodata.guard_slice_ns = cfg.guard_slice_us * 1000;
        rodata.starvation_limit_ns = cfg.starvation_limit_ms * 1_000_000;
        rodata.park_after_ns = cfg.park_options().window_ns;
        // LC load reaches the cgroup counters in batches of 1/32 of the interval flatten() reads them at.
        rodata.lcw_flush_ns = (cfg.flatten_ms * 1_000_000 / 32).clamp(1_000_000, 8_000_000);
        let conc_mode = cfg.limit_mode == super::config::LimitMode::Concurrency;
        rodata.bw_conc_mode = conc_mode;
        // LLC ids may be sparse; number them densely for the DSQ ids.
        let llc_index: HashMap<usize, u32> =
            topo.all_llcs.keys().enumerate().map(|(i, id)| (*id, i as u32)).collect();
        let nr_llcs = llc_index.len().clamp(1, bpf_intf::schedbe_consts_SCHEDBE_MAX_LLCS as usize);
        rodata.nr_llcs = nr_llcs as u32;
        for cpu in topo.all_cpus.values() {
            if cpu.id < bpf_intf::schedbe_consts_SCHEDBE_MAX_CPUS as usize {
                let idx = llc_index.get(&cpu.llc_id).copied().unwrap_or(0);
                let idx = if (idx as usize) < nr_llcs { idx } else { 0 };
                rodata.cpu_llc[cpu.id] = idx;
                rodata.llc_nr_cpus[idx as usize] += 1;
            }
        }
        info!("{} CPUs, {} LLC queue pairs", topo.all_cpus.len(), nr_llcs);

        // Lazy evacuation's backstop on the RT CPU (rt_takeover.bpf.h), with
        // the tracepoint path only: the RT CPU's own tick where the kernel's
        // BTF has the RT/DL classes' tick functions, else every timer expiry
        // (off by default: "?" sections).
        if kernel.rt.from_tracepoint {
            let class_tick = kernel.rt.strand_on_class_tick;
            skel.progs.schedbe_rt_strand_rt.set_autoload(class_tick);
            skel.progs.schedbe_rt_strand_dl.set_autoload(class_tick);
            skel.progs.schedbe_rt_strand_tick.set_autoload(!class_tick);
            info!("RT strand backstop at {}", if class_tick { "the RT/DL classes' tick" } else { "every timer expiry" });
        }

        // Concurrency mode gives a task's tokens back at the sched_switch
        // tracepoint (cpumax_conc.bpf.h); without that mode nothing holds tokens.
        // So does ops.quiescent, which only gives back tokens taken for a
        // task that then slept in a local queue (one callback per sleep saved).
        if !conc_mode {
            skel.progs.schedbe_conc_switch.set_autoload(false);
            skel.struct_ops.schedbe_ops_mut().quiescent = std::ptr::null_mut();
            skel.progs.schedbe_quiescent.set_autoload(false);
        }

        info!(
            "cpu.max enforced by schedbe; changes apply {}",
            if kernel.set_bandwidth { "when written (ops.cgroup_set_bandwidth)" } else { "at the next cgroup rescan" }
        );

        // Queued wakeups (v6.15+; EEVDF's TTWU_QUEUE): a wakeup onto another CPU
        // that is idle hands the task's enqueue to that CPU (an IPI, or nothing
        // when it polls) instead of the waker taking its run queue's lock and
        // running the enqueue itself. ops.enqueue then runs there, sometimes
        // without ops.select_cpu before it (a wakee still switching out), which
        // it handles as it handles every task select_cpu did not place.
        skel.struct_ops.schedbe_ops_mut().flags |= *scx_utils::compat::SCX_OPS_ALLOW_QUEUED_WAKEUP;

        // Thaw what a previous run left parked before anything else changes.
        let parker = park::start(&cfg.park_options())?;

        let skel = loader::load(skel)?;

        let mut sched = Self {
            struct_ops: None,
            cfg: cfg.clone(),
            rules,
            be_ids: IdSet::default(),
            cpumax: CpuMax::default(),
            load_prev: HashMap::new(),
            factor_ids: HashSet::new(),
            tree: Vec::new(),
            factors: HashMap::new(),
            resv: cfg.reservations.then(Reservations::default),
            id_rel: HashMap::new(),
            be_rels: HashSet::new(),
            parker,
            last_flatten: Instant::now(),
            rescans: 0,
            poll_cpu_max: !kernel.set_bandwidth,
            started: Instant::now(),
            nr_cpus: topo.all_cpus.len() as u64,
            skel,
        };
        // Fill the BE cgroup map before attaching, so tasks are classified
        // correctly from the first scheduling decision.
        sched.rescan(true).context("initial cgroup scan failed")?;
        sched.struct_ops = Some(loader::attach(&mut sched.skel)?);
        info!("scheduler enabled (BE patterns: {})", sched.rules.patterns().join(", "));
        Ok(sched)
    }

    /// Walk the cgroup tree once: sync the BE cgroup map with the path
    /// patterns, warn about cpu.max, and cache ids and weights for flattening.
    ///
    /// The files of cgroups seen before (cpu.weight, cpu.max) are read again
    /// only when `reread` (cpu.max was written) or cgrp_watch::reread_due()
    /// says so; the walk itself runs each time.
    fn rescan(&mut self, reread: bool) -> Result<()> {
        let root = Path::new(CGROUP_ROOT);
        let all = schedbe_cgroup::walk(root)?;
        let bss = self.skel.maps.bss_data.as_mut().context("BPF bss missing")?;
        let reread = crate::cgrp_watch::reread_due(&mut bss.cgrp_reread_req, reread, self.poll_cpu_max, self.rescans);
        let known: HashMap<u64, (String, bool, u32)> =
            if reread { HashMap::new() } else { self.tree.drain(..).map(|(id, rel, h, w)| (id, (rel, h, w))).collect() };
        self.tree = all
            .iter()
            .map(|c| match known.get(&c.id) {
                Some((rel, has_cpu, w)) if *rel == c.rel => (c.id, c.rel.clone(), *has_cpu, *w),
                _ => {
                    let has_cpu = c.rel.is_empty() || root.join(&c.rel).join("cpu.weight").exists();
                    (c.id, c.rel.clone(), has_cpu, schedbe_cgroup::cpu_weight(root, &c.rel))
                }
            })
            .collect();
        let found: Vec<_> = schedbe_cgroup::be_matches(&all, &self.rules).collect();
        self.id_rel = all.iter().map(|c| (c.id, c.rel.clone())).collect();
        self.be_rels = found.iter().map(|c| c.rel.clone()).collect();
        let (add, del) = self.be_ids.update(found.iter().map(|c| c.id));
        let changed = !add.is_empty() || !del.is_empty();
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
        if changed {
            self.bump_tier_gen()?;
        }

        let limitable: Vec<(u64, &str)> =
            self.tree.iter().filter(|c| c.2 && !c.1.is_empty()).map(|c| (c.0, c.1.as_str())).collect();
        let m = &self.skel.maps;
        let maps = BwMaps { slot_of: &m.bw_slot_of, conf: &m.bw_conf, stats: &m.bw_stats };
        let g = self.cpumax.sync(&maps, root, &limitable, reread).context("cannot update the cpu.max slots")?;
        let bss = self.skel.maps.bss_data.as_mut().context("BPF bss missing")?;
        bss.bw_on = g.on;
        if g.bump_gen {
            bss.bw_gen = bss.bw_gen.wrapping_add(1);
        }

        // Drop the load counters of removed cgroups now and then, so pod churn
        // cannot fill cgrp_load (a full key scan walks every hash bucket).
        self.rescans += 1;
        if self.rescans.is_multiple_of(LOAD_GC_EVERY) {
            let dead: Vec<Vec<u8>> = self
                .skel
                .maps
                .cgrp_load
                .keys()
                .filter(|k| k.len() >= 8 && !self.id_rel.contains_key(&u64::from_ne_bytes(k[..8].try_into().unwrap_or_default())))
                .collect();
            for k in dead {
                let _ = self.skel.maps.cgrp_load.delete(&k);
            }
        }
        Ok(())
    }

    /// Was cpu.max written (ops.cgroup_set_bandwidth)? (Clears the request.)
    fn bw_rescan_requested(&mut self) -> bool {
        self.skel.maps.bss_data.as_mut().is_some_and(|b| crate::cpumax::take_rescan_request(&mut b.bw_rescan_req))
    }

    /// be_cgroups changed: make the BPF side recompute every task's remembered
    /// tier (tier_cache.bpf.h). Atomic, because ops.cgroup_set_idle bumps it too.
    fn bump_tier_gen(&mut self) -> Result<()> {
        let bss = self.skel.maps.bss_data.as_mut().context("BPF bss missing")?;
        // SAFETY: tier_gen is an aligned u64 in the mmapped BPF bss, which
        // lives as long as the skeleton; BPF updates it with atomic adds only.
        unsafe { AtomicU64::from_ptr(&mut bss.tier_gen) }.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Parking: act on the cgroups the BPF side reported starved, then
    /// check whether LC has left enough idle capacity to unpark.
    fn park_step(&mut self) -> Result<()> {
        if self.parker.is_none() {
            return Ok(());
        }
        let starved = park::take_reports(&self.skel.maps.starved_cgrps);
        if starved.iter().any(|id| !self.id_rel.contains_key(id)) {
            self.rescan(false)?; // a cgroup created since the last rescan
        }
        for id in starved {
            let Some(rel) = self.id_rel.get(&id).cloned() else { continue };
            let be = park::be_subtree(&rel, |p| self.be_rels.contains(p));
            if let Some(p) = self.parker.as_mut() {
                p.on_starved(&rel, be);
            }
        }
        if let Some(p) = self.parker.as_mut() {
            p.tick();
        }
        Ok(())
    }

    /// Recompute the flattened LC cgroup weight factors from measured load.
    fn flatten(&mut self) -> Result<()> {
        let dt = self.last_flatten.elapsed().as_nanos().max(1) as f64;
        self.last_flatten = Instant::now();

        // One batched read of the map (the kernel walks its 16384 buckets),
        // not a lookup syscall per cgroup: on a node of 1000 pods' cgroups
        // that would be 4000 syscalls a second.
        let load_now: HashMap<u64, u64> = self
            .skel
            .maps
            .cgrp_load
            .lookup_batch(1024, MapFlags::ANY, MapFlags::ANY)
            .context("cannot read cgrp_load")?
            .filter_map(|(k, v)| Some((u64::from_ne_bytes(k.get(..8)?.try_into().ok()?), u64::from_ne_bytes(v.get(..8)?.try_into().ok()?))))
            .collect();
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
        let mut changed = false;
        let flat = flatten::flatten_full(&nodes, self.nr_cpus);
        if log::log_enabled!(log::Level::Debug) {
            log_flat(&nodes, &flat);
        }
        if let Some(r) = self.resv.as_mut() {
            let root = self.tree.iter().find(|c| c.1.is_empty()).map_or(0, |c| c.0);
            changed |= r.update(&mut self.skel, &flat, root, self.nr_cpus)?;
        }
        for (id, f) in flat.iter().map(|(id, f)| (*id, f.factor)) {
            // Only write factors that changed by more than 1%: map updates are syscalls.
            let old = self.factors.get(&id).copied().unwrap_or(0);
            if old == 0 || f.abs_diff(old) * 100 > old {
                self.skel.maps.cgrp_factor.update(&id.to_ne_bytes(), &f.to_ne_bytes(), MapFlags::ANY)?;
                self.factors.insert(id, f);
                changed = true;
            }
            self.factor_ids.insert(id);
        }
        // Forget cgroups that are gone.
        for id in self.factor_ids.iter().filter(|id| !live.contains(id)).copied().collect::<Vec<_>>() {
            let _ = self.skel.maps.cgrp_factor.delete(&id.to_ne_bytes());
            self.factor_ids.remove(&id);
            self.factors.remove(&id);
            changed = true;
        }
        // Tasks remember their factor and slot until this moves (lc_weight.bpf.h, resv.bpf.h).
        if changed {
            let bss = self.skel.maps.bss_data.as_mut().context("BPF bss missing")?;
            bss.factor_gen = bss.factor_gen.wrapping_add(1);
        }
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
            t.sync_unstacks += s.sync_unstacks;
            t.be_dispatches += s.be_dispatches;
            t.preempt_be += s.preempt_be;
            t.kick_lat_ns += s.kick_lat_ns;
            t.kick_lat_n += s.kick_lat_n;
            t.kick_idle += s.kick_idle;
            t.lc_preempt += s.lc_preempt;
            t.lc_preempt_local += s.lc_preempt_local;
            t.lc_preempt_later += s.lc_preempt_later;
            t.resv_preempt += s.resv_preempt;
            t.bw_conc_yields += s.bw_conc_yields;
            t.exit_takes += s.exit_takes;
            t.tick_yields += s.tick_yields;
            t.running_yields += s.running_yields;
            t.guard_slices += s.guard_slices;
            t.guard_ns += s.guard_ns;
            t.requeued_lc += s.requeued_lc;
            t.freeze_boosts += s.freeze_boosts;
            t.rcu_boosts += s.rcu_boosts;
            t.starved_reports += s.starved_reports;
            t.rt_evacuations += s.rt_evacuations;
            t.rt_rescues += s.rt_rescues;
            t.bw_holds += s.bw_holds;
            t.bw_releases += s.bw_releases;
            t.bw_restarts += s.bw_restarts;
            t.bw_forgiven_ns += s.bw_forgiven_ns;
            t.bw_unthrottles += s.bw_unthrottles;
            t.bw_late_ns += s.bw_late_ns;
        }
        let pc = self.parker.as_ref().map(|p| p.counts()).unwrap_or_default();
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
            lc_preempt: t.lc_preempt,
            lc_preempt_local: t.lc_preempt_local,
            lc_preempt_later: t.lc_preempt_later,
            resv_preempt: t.resv_preempt,
            resv_groups: self.resv.as_ref().map_or(0, |r| r.len() as u64),
            bw_conc_yields: t.bw_conc_yields,
            lc_direct: t.lc_direct,
            sync_unstacks: t.sync_unstacks,
            lc_dispatches: t.lc_dispatches,
            be_dispatches: t.be_dispatches,
            guard_slices: t.guard_slices,
            guard_ms: t.guard_ns as f64 / 1e6,
            requeued_lc: t.requeued_lc,
            freeze_boosts: t.freeze_boosts,
            rcu_boosts: t.rcu_boosts,
            starved_reports: t.starved_reports,
            rt_evacuations: t.rt_evacuations,
            rt_rescues: t.rt_rescues,
            parked_cgroups: pc.parked_cgroups,
            parked_tasks: pc.parked_tasks,
            park_events: pc.park_events,
            unpark_events: pc.unpark_events,
            be_cgroups: self.be_ids.len() as u64,
            cpu_max_cgroups: self.cpumax.limited() as u64,
            bw_holds: t.bw_holds,
            bw_releases: t.bw_releases,
            bw_restarts: t.bw_restarts,
            bw_forgiven_ms: t.bw_forgiven_ns as f64 / 1e6,
            bw_unthrottles: t.bw_unthrottles,
            bw_late_ms: t.bw_late_ns as f64 / 1e6,
            cgroups: self.cpumax.stats(&self.skel.maps.bw_stats),
        })
    }

    /// Run until `shutdown` or until the kernel ejects the scheduler.
    pub fn run(&mut self, shutdown: Arc<AtomicBool>, out: StatsOut) -> Result<UserExitInfo> {
        let server = crate::stats_server::Server::launch(super::stats::server_data());
        let rescan_every = Duration::from_millis(self.cfg.rescan_ms);
        let flatten_every = Duration::from_millis(self.cfg.flatten_ms);
        let now = Instant::now();
        // Fixed-rate deadlines from one origin, so jobs with commensurate
        // periods fall due together and share a wakeup.
        let (mut next_rescan, mut next_flatten, mut next_park) = (now + rescan_every, now + flatten_every, now);
        let mut next_stats = out.interval.map(|i| now + i);
        let mut prev = self.metrics()?;
        let mut rows = 0u64;

        while !shutdown.load(Ordering::Relaxed) && !loader::exited(&self.skel) {
            let now = Instant::now();
            // A cpu.max written on a cgroup created since the last rescan.
            if crate::cpumax::rescan_step(now >= next_rescan, self.bw_rescan_requested(), |bw| self.rescan(bw)) {
                next_rescan = advance(next_rescan, rescan_every, now);
            }
            if now >= next_flatten {
                if let Err(e) = self.flatten() {
                    warn!("weight flattening failed: {e:#}");
                }
                next_flatten = advance(next_flatten, flatten_every, now);
            }
            if now >= next_park {
                if let Err(e) = self.park_step() {
                    warn!("parking step failed: {e:#}");
                }
                let parked = self.parker.as_ref().is_some_and(|p| p.any_parked());
                next_park = advance(next_park, park::poll_interval(parked), now);
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
                        if rows.is_multiple_of(20) {
                            println!("{}", Metrics::HEADER);
                        }
                        d.format_row(&mut so)?;
                    }
                    rows += 1;
                    next_stats = Some(advance(t, intv, now));
                }
            }
            // Sleep until the next job is due (capped so shutdown and the
            // kernel's exit are noticed within SHUTDOWN_POLL), or a stats
            // client asks.
            let due = [Some(next_rescan), Some(next_flatten), Some(next_park), next_stats].into_iter().flatten().min().unwrap_or(now);
            let wait = due.saturating_duration_since(Instant::now()).min(SHUTDOWN_POLL);
            server.wait(wait, || self.metrics())?;
        }

        // Thaw before unloading: BE must be runnable when EEVDF takes over.
        if let Some(p) = self.parker.as_mut() {
            p.unpark_all("schedbe is exiting");
        }
        loader::detach(&self.skel, self.struct_ops.take())
    }
}

/// `schedbe run --policy sched-be`: load, run until a signal, reload when the kernel asks.
pub fn run_policy(cfg: &Config, shutdown: Arc<AtomicBool>, out: StatsOut) -> Result<i32> {
    crate::lifecycle::run_until_stopped(&shutdown.clone(), |open_object| {
        let mut s = Scheduler::init(cfg, open_object)?;
        s.run(shutdown.clone(), out)
    })
}

/// The next deadline of a periodic job that was due at `due`: one period
/// later, or one period from `now` if the loop fell behind.
fn advance(due: Instant, period: Duration, now: Instant) -> Instant {
    let next = due + period;
    if next > now {
        next
    } else {
        now + period
    }
}

/// `schedbe run -v`: the root's factor and the active groups', once a pass.
fn log_flat(nodes: &[flatten::Node], flat: &HashMap<u64, flatten::Flat>) {
    let one = flatten::FACTOR_ONE as f64;
    let mut active: Vec<(f64, &str, f64)> = nodes
        .iter()
        .filter_map(|n| flat.get(&n.id).filter(|f| f.active && f.group == n.id).map(|f| (f.factor as f64 / one, n.rel.as_str(), n.load)))
        .collect();
    active.sort_by(|a, b| a.0.total_cmp(&b.0));
    let root = nodes.iter().find(|n| n.rel.is_empty()).and_then(|n| flat.get(&n.id)).map_or(0.0, |f| f.factor as f64 / one);
    let show = |v: &[(f64, &str, f64)]| v.iter().map(|(f, r, l)| format!("/{r} x{f:.3} (load {l:.0})")).collect::<Vec<_>>().join(", ");
    let n = active.len();
    debug!("flatten: root x{root:.3}; {n} active groups, lowest {}; highest {}", show(&active[..n.min(3)]), show(&active[n.saturating_sub(3)..]));
}

