//! Loading a policy's BPF scheduler, the same way for every policy:
//!
//! 1. [`open`]: the skeleton opened (scx_ops_open!), the kernel's optional
//!    features probed once ([`Kernel`]), and what depends on them chosen:
//!    the RT/DL takeover path (rt_takeover.rs; exactly one is loaded), and
//!    ops.cgroup_set_idle and ops.cgroup_set_bandwidth left out where the
//!    kernel lacks them;
//! 2. the policy sets its own read-only data and programs;
//! 3. [`load`]: the verifier's statistics when asked for (verifier_stats.rs),
//!    then scx_ops_load!;
//! 4. the policy fills its maps, then [`attach`]; its loop watches
//!    [`exited`], and [`detach`] unloads and says why it stopped.
//!
//! Reloading when the kernel asks is lifecycle.rs's, around all of this.
//!
//! The skeletons are different generated types, and the scx_utils macros
//! name their fields; [`Skeleton`] is what the loader needs of one, written
//! for each policy by [`skeleton!`] next to the include of its skeleton.

use std::mem::MaybeUninit;

use anyhow::Result;
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{Link, OpenObject};
use scx_utils::UserExitInfo;

use crate::{rt_takeover, verifier_stats};

/// What the running kernel offers that a policy's load depends on.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    /// How RT/DL takeovers are handled (rt_takeover.rs).
    pub rt: rt_takeover::Paths,
    /// ops.cgroup_set_bandwidth (v6.17+): cpu.max writes reach the BPF side
    /// when made; without it, a policy that enforces cpu.max reads it at
    /// every rescan.
    pub set_bandwidth: bool,
    /// ops.cgroup_set_idle (v6.19+): cpu.idle writes reach the BPF side, so
    /// the cpu.idle part of a task's tier can be remembered
    /// (tier_cache.bpf.h); without it, it is walked at every decision.
    pub set_idle: bool,
}

impl Kernel {
    pub fn probe() -> Self {
        let has = |field| scx_utils::compat::struct_has_field("sched_ext_ops", field).unwrap_or(false);
        Self { rt: rt_takeover::probe(), set_bandwidth: has("cgroup_set_bandwidth"), set_idle: has("cgroup_set_idle") }
    }
}

/// The programs a policy loads only on some kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Optional {
    /// ops.cpu_release: the RT/DL takeover path before v6.19.
    CpuRelease,
    /// The sched_switch tracepoint: the RT/DL takeover path from v6.19.
    SchedSwitch,
    /// ops.cgroup_set_bandwidth, of the policies that enforce cpu.max.
    CgroupSetBandwidth,
    /// ops.cgroup_set_idle.
    CgroupSetIdle,
}

/// The read-only data every policy's BPF side has.
pub struct SharedRodata<'a> {
    /// rt_takeover.bpf.h: the sched_switch path is loaded, not ops.cpu_release.
    pub evacuate_from_tp: &'a mut bool,
    /// tier_cache.bpf.h: ops.cgroup_set_idle is loaded.
    pub tier_idle_cached: &'a mut bool,
}

/// A policy's generated skeleton as the loader drives it: the scx_utils
/// macros, written out for one skeleton type ([`skeleton!`]).
pub trait Skeleton<'obj>: Sized {
    /// The skeleton opened, not loaded yet.
    type Open: OpenSkel<'obj, Output = Self>;
    /// scx_ops_open!
    fn ops_open(obj: &'obj mut MaybeUninit<OpenObject>) -> Result<Self::Open>;
    fn shared_rodata(open: &mut Self::Open) -> Result<SharedRodata<'_>>;
    /// Leave `prog` out of the load; nothing for a program the policy does not have.
    fn leave_out(open: &mut Self::Open, prog: Optional);
    /// scx_ops_load!
    fn ops_load(open: Self::Open) -> Result<Self>;
    /// scx_ops_attach!
    fn ops_attach(&mut self) -> Result<Link>;
    /// uei_exited!
    fn uei_exited(&self) -> bool;
    /// uei_report!
    fn uei_report(&self) -> Result<UserExitInfo>;
}

/// Open a policy's skeleton for the running kernel (step 1 above): what the
/// policy then sets is its own; it loads it with [`load`].
pub fn open<'obj, S: Skeleton<'obj>>(obj: &'obj mut MaybeUninit<OpenObject>) -> Result<(S::Open, Kernel)> {
    scx_utils::try_set_rlimit_infinity();
    let mut open = S::ops_open(obj)?;
    let kernel = Kernel::probe();
    let rodata = S::shared_rodata(&mut open)?;
    *rodata.evacuate_from_tp = kernel.rt.from_tracepoint;
    *rodata.tier_idle_cached = kernel.set_idle;
    S::leave_out(&mut open, if kernel.rt.from_tracepoint { Optional::CpuRelease } else { Optional::SchedSwitch });
    rt_takeover::log_path(kernel.rt.from_tracepoint);
    if !kernel.set_idle {
        S::leave_out(&mut open, Optional::CgroupSetIdle);
    }
    if !kernel.set_bandwidth {
        S::leave_out(&mut open, Optional::CgroupSetBandwidth);
    }
    Ok((open, kernel))
}

/// Load the opened skeleton: through the verifier, with its statistics
/// when `SCHEDBE_VERIFIER_STATS` asks for them. Nothing is scheduled yet.
pub fn load<'obj, S: Skeleton<'obj>>(mut open: S::Open) -> Result<S> {
    verifier_stats::request(open.open_object_mut());
    S::ops_load(open)
}

/// Attach: from here on the policy schedules. The link is the scheduler's
/// life; [`detach`] drops it.
pub fn attach<'obj, S: Skeleton<'obj>>(skel: &mut S) -> Result<Link> {
    skel.ops_attach()
}

/// Whether the kernel ejected the scheduler (or the BPF side exited).
pub fn exited<'obj, S: Skeleton<'obj>>(skel: &S) -> bool {
    skel.uei_exited()
}

/// Unload: the kernel goes back to its default scheduler. Then why the
/// scheduler stopped, the kernel's reason printed when it was not asked to
/// (lifecycle.rs reloads on a restart request).
pub fn detach<'obj, S: Skeleton<'obj>>(skel: &S, link: Option<Link>) -> Result<UserExitInfo> {
    drop(link);
    skel.uei_report()
}

/// [`Skeleton`] for a policy's generated skeleton: its type, open type,
/// builder and struct_ops map, then the names of its programs that load
/// only on some kernels ([`Optional`]; `cgroup_set_bandwidth` only for a
/// policy that enforces cpu.max).
macro_rules! skeleton {
    ($skel:ident, $open:ident, $builder:ident, $ops:ident {
        cpu_release: $cpu_release:ident,
        sched_switch: $sched_switch:ident,
        cgroup_set_idle: $set_idle:ident,
        $(cgroup_set_bandwidth: $set_bw:ident,)?
    }) => {
        impl<'obj> $crate::loader::Skeleton<'obj> for $skel<'obj> {
            type Open = $open<'obj>;

            fn ops_open(obj: &'obj mut ::std::mem::MaybeUninit<::libbpf_rs::OpenObject>) -> ::anyhow::Result<Self::Open> {
                use ::scx_utils::scx_ops_open;
                let builder = $builder::default();
                scx_ops_open!(builder, obj, $ops, None::<::libbpf_rs::libbpf_sys::bpf_object_open_opts>)
            }

            fn shared_rodata(open: &mut Self::Open) -> ::anyhow::Result<$crate::loader::SharedRodata<'_>> {
                use ::anyhow::Context;
                let rodata = open.maps.rodata_data.as_mut().context("BPF rodata missing")?;
                Ok($crate::loader::SharedRodata {
                    evacuate_from_tp: &mut rodata.evacuate_from_tp,
                    tier_idle_cached: &mut rodata.tier_idle_cached,
                })
            }

            fn leave_out(open: &mut Self::Open, prog: $crate::loader::Optional) {
                use $crate::loader::Optional;
                ::scx_utils::paste! {
                    match prog {
                        Optional::CpuRelease => {
                            open.struct_ops.[<$ops _mut>]().cpu_release = ::std::ptr::null_mut();
                            open.progs.$cpu_release.set_autoload(false);
                        }
                        Optional::SchedSwitch => {
                            open.progs.$sched_switch.set_autoload(false);
                        }
                        Optional::CgroupSetIdle => {
                            open.struct_ops.[<$ops _mut>]().cgroup_set_idle = ::std::ptr::null_mut();
                            open.progs.$set_idle.set_autoload(false);
                        }
                        Optional::CgroupSetBandwidth => {
                            $(
                                open.struct_ops.[<$ops _mut>]().cgroup_set_bandwidth = ::std::ptr::null_mut();
                                open.progs.$set_bw.set_autoload(false);
                            )?
                        }
                    }
                }
            }

            fn ops_load(mut open: Self::Open) -> ::anyhow::Result<Self> {
                use ::scx_utils::scx_ops_load;
                scx_ops_load!(open, $ops, uei)
            }

            fn ops_attach(&mut self) -> ::anyhow::Result<::libbpf_rs::Link> {
                use ::scx_utils::scx_ops_attach;
                scx_ops_attach!(self, $ops)
            }

            fn uei_exited(&self) -> bool {
                ::scx_utils::uei_exited!(self, uei)
            }

            fn uei_report(&self) -> ::anyhow::Result<::scx_utils::UserExitInfo> {
                ::scx_utils::uei_report!(self, uei)
            }
        }
    };
}
pub(crate) use skeleton;
