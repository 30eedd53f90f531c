//! RT/DL takeovers (rt_takeover.bpf.h): what waits in the local queue of a
//! CPU that an RT or deadline task takes is sent back through ops.enqueue.
//! Kernels up to v6.18 say so through ops.cpu_release; v6.19 deprecates it
//! (the kernel warns when a scheduler has it) and can re-enqueue a local
//! queue from any context, so there the sched_switch tracepoint does it.
//! A policy loads exactly one of the two.

use log::info;

use libbpf_rs::btf::{types, Btf, ReferencesType};

/// What the running kernel offers for RT/DL takeovers, read from vmlinux's
/// BTF in one parse: parsing it is the slow part, so not once per question.
#[derive(Clone, Copy, Debug, Default)]
pub struct Paths {
    /// Whether the running kernel can re-enqueue a local DSQ from any
    /// context, so the sched_switch tracepoint handles takeovers:
    /// `scx_bpf_dsq_reenq` (v7.1+) or a `scx_bpf_reenqueue_local` returning
    /// void (v6.19+; before, it returned the count and worked only in
    /// cpu_release). The BPF side's compat wrapper resolves the same kfuncs
    /// the same way.
    pub from_tracepoint: bool,
    /// Whether the RT CPU's own tick can be hooked where it runs only while
    /// an RT/DL task holds the CPU: fentry on the RT and deadline classes'
    /// `task_tick` (rt_takeover.bpf.h's lazy-evacuation backstop). pahole
    /// puts into vmlinux's BTF only functions that ftrace can patch, so a
    /// function found there can be attached to. Else the backstop runs at
    /// every timer expiry (tp_btf/hrtimer_expire_entry).
    pub strand_on_class_tick: bool,
}

/// Both answers from one read of vmlinux's BTF; no BTF, neither.
pub fn probe() -> Paths {
    let Ok(btf) = Btf::from_vmlinux() else { return Paths::default() };
    Paths { from_tracepoint: reenq_from_anywhere(&btf), strand_on_class_tick: class_ticks(&btf) }
}

/// [`Paths::from_tracepoint`]
fn reenq_from_anywhere(btf: &Btf) -> bool {
    if btf.type_by_name::<types::Func>("scx_bpf_dsq_reenq").is_some() {
        return true;
    }
    let Some(f) = btf.type_by_name::<types::Func>("scx_bpf_reenqueue_local") else { return false };
    match types::FuncProto::try_from(f.referenced_type()) {
        Ok(proto) => u32::from(proto.referenced_type_id()) == 0,
        Err(_) => false,
    }
}

/// [`Paths::strand_on_class_tick`]
fn class_ticks(btf: &Btf) -> bool {
    ["task_tick_rt", "task_tick_dl"].iter().all(|f| btf.type_by_name::<types::Func>(f).is_some())
}

/// The log line tests/test_rt.py looks for.
pub fn log_path(from_tp: bool) {
    info!("RT/DL takeovers handled by {}", if from_tp { "the sched_switch tracepoint" } else { "ops.cpu_release" });
}
