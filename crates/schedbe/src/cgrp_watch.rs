//! When a policy's daemon reads cgroup files again (cpu.weight, cpu.max),
//! beyond the new cgroups its walk finds: the BPF side is cgrp_watch.bpf.h,
//! which sets a request when the kernel reports a change.

use crate::cpumax::take_rescan_request;

/// Every how many rescans the files of every cgroup are read again, whatever
/// the kernel reported.
const REREAD_EVERY: u64 = 30;

/// Must rescan number `nr` (0: the first) read every cgroup's files again?
/// `req`: the policy's cgrp_reread_req, cleared here; `asked`: the caller
/// knows cpu.max was written (bw_rescan_req); `poll_cpu_max`: cpu.max writes
/// are not reported (no ops.cgroup_set_bandwidth, before v6.17).
pub fn reread_due(req: &mut u32, asked: bool, poll_cpu_max: bool, nr: u64) -> bool {
    // cleared whatever else says yes, so a report is not read twice
    let told = take_rescan_request(req);
    told || asked || poll_cpu_max || nr.is_multiple_of(REREAD_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reread_when_told_asked_polling_or_backstop() {
        let mut req = 0;
        assert!(reread_due(&mut req, false, false, 0), "the first rescan reads everything");
        assert!(!reread_due(&mut req, false, false, 1));
        req = 1;
        assert!(reread_due(&mut req, false, false, 1));
        assert_eq!(req, 0, "the request is cleared");
        assert!(!reread_due(&mut req, false, false, 2));
        req = 1;
        assert!(reread_due(&mut req, true, false, 2));
        assert_eq!(req, 0, "cleared even when asked anyway");
        assert!(reread_due(&mut req, false, true, 2));
        assert!(reread_due(&mut req, false, false, REREAD_EVERY));
        assert!(!reread_due(&mut req, false, false, REREAD_EVERY + 1));
    }
}
