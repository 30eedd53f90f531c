//! The tracer's BPF object (src/bpf/trace.bpf.c, trace_intf.h): generated
//! bindings and skeleton, and helpers around its maps.

use std::path::Path;

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapMut};
use schedbe_cgroup::{BeRules, IdSet};

#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
pub(crate) mod bpf_intf {
    include!(concat!(env!("OUT_DIR"), "/trace_intf.rs"));
}

#[allow(clippy::all)]
pub(crate) mod bpf_skel {
    include!(concat!(env!("OUT_DIR"), "/trace_skel.rs"));
}

/// Ring buffer between the BPF programs and userspace. Read every
/// `POLL_NS` (10 ms); 32 MiB holds ~600k switch events (56 bytes each with
/// the ring buffer's own header, up to 64 CPUs), far more than a 10 ms burst
/// produces even on large machines.
pub(crate) const RINGBUF_BYTES: u32 = 32 << 20;

/// Bring the tracer's be_cgroups map in line with a fresh scan. Returns the
/// number of matching cgroups, which the caller stores in the BPF side's
/// `nr_be_cgroups` (0 lets it skip the cgroup walk).
pub(crate) fn sync_be_cgroups(map: &MapMut, root: &Path, rules: &BeRules, ids: &mut IdSet) -> Result<usize> {
    let cgs = schedbe_cgroup::scan(root, rules)?;
    let (add, del) = ids.update(cgs.iter().map(|c| c.id));
    for id in add {
        map.update(&id.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .with_context(|| format!("cannot add cgroup {id} to be_cgroups"))?;
    }
    for id in del {
        // already gone is fine
        let _ = map.delete(&id.to_ne_bytes());
    }
    Ok(ids.len())
}

pub(crate) fn bump_memlock() {
    let r = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: valid rlimit pointer. Failure is fine: kernels >= 5.11 charge BPF
    // memory to the cgroup instead.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &r) };
}

pub(crate) fn comm_of(map: &MapMut, pid: u32) -> String {
    if let Ok(Some(v)) = map.lookup(&pid.to_ne_bytes(), MapFlags::ANY) {
        let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
        if end > 0 {
            return String::from_utf8_lossy(&v[..end]).into_owned();
        }
    }
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}
