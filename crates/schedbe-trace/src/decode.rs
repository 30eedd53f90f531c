//! Decoding of the BPF side's ring buffer records (struct sbt_event).

use crate::bpf::bpf_intf::*;
use crate::replay::{CpuMask, Event, EventKind, Switch, Tier, Wake};

// Upper-case aliases of the bindgen constants, usable as match patterns.
const TEV_SWITCH: u32 = sbt_event_type_TEV_SWITCH;
const TEV_WAKING: u32 = sbt_event_type_TEV_WAKING;
const TEV_WAKEUP: u32 = sbt_event_type_TEV_WAKEUP;
const TEV_WAKEUP_NEW: u32 = sbt_event_type_TEV_WAKEUP_NEW;
const TEV_MIGRATE: u32 = sbt_event_type_TEV_MIGRATE;
const TEV_INIT_CURR: u32 = sbt_event_type_TEV_INIT_CURR;
const TEV_INIT_RUNNABLE: u32 = sbt_event_type_TEV_INIT_RUNNABLE;
const TEV_TIMER: u32 = sbt_event_type_TEV_TIMER;
const TEV_ABSENT: u32 = sbt_event_type_TEV_ABSENT;
const TT_LC: u32 = sbt_tier_TT_LC;
const TT_BE: u32 = sbt_tier_TT_BE;
const TT_OTHER: u32 = sbt_tier_TT_OTHER;
const TT_IDLE: u32 = sbt_tier_TT_IDLE;

// The header the BPF side writes before the mask words (its _Static_assert
// checks the same on the C side).
const _: () = assert!(std::mem::offset_of!(sbt_event, mask) == TRACE_EVENT_HDR_SIZE as usize);

/// Decode one ring buffer record.
pub fn decode_event(data: &[u8]) -> Option<Event> {
    use std::mem::offset_of;
    const HDR: usize = TRACE_EVENT_HDR_SIZE as usize;
    if data.len() < HDR {
        return None;
    }
    let u32_at = |o: usize| u32::from_ne_bytes(data[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_ne_bytes(data[o..o + 8].try_into().expect("8 bytes"));
    let ts = u64_at(offset_of!(sbt_event, ts));
    let cpu = u32_at(offset_of!(sbt_event, cpu));
    let pid = u32_at(offset_of!(sbt_event, pid));
    let prev_pid = u32_at(offset_of!(sbt_event, prev_pid));
    let typ = data[offset_of!(sbt_event, type_)] as u32;
    let tier = tier_from_raw(data[offset_of!(sbt_event, tier)]);
    let prev_tier = tier_from_raw(data[offset_of!(sbt_event, prev_tier)]);
    let flags = data[offset_of!(sbt_event, flags)] as u32;
    let nr_words = (u32_at(offset_of!(sbt_event, nr_words)) as usize)
        .min(TRACE_MASK_WORDS as usize)
        .min((data.len() - HDR) / 8);
    let words: Vec<u64> = (0..nr_words)
        .map(|i| {
            u64::from_ne_bytes(
                data[HDR + 8 * i..HDR + 8 * i + 8]
                    .try_into()
                    .expect("8 bytes"),
            )
        })
        .collect();
    let mask = CpuMask::from_words(&words);
    let aux = u32_at(offset_of!(sbt_event, aux));
    let cgid = u64_at(offset_of!(sbt_event, cgid));
    let lc_or = |t: Option<Tier>| t.unwrap_or(Tier::Lc);
    let wake = || Wake {
        pid,
        tier: lc_or(tier),
        mask: mask.clone(),
        task_cpu: aux,
        cgroup: cgid,
    };
    let kind = match typ {
        TEV_SWITCH => EventKind::Switch(Switch {
            prev: prev_pid,
            prev_runnable: flags & sbt_event_flags_TEVF_PREV_RUNNABLE != 0,
            prev_dead: flags & sbt_event_flags_TEVF_PREV_DEAD != 0,
            prev_tier,
            prev_mask: (nr_words > 0).then(|| mask.clone()),
            next: pid,
            next_tier: if pid == 0 { Tier::Idle } else { lc_or(tier) },
            next_cgroup: cgid,
        }),
        TEV_WAKING => EventKind::Waking(wake()),
        TEV_WAKEUP => EventKind::Wakeup { pid, task_cpu: aux },
        TEV_WAKEUP_NEW => EventKind::WakeupNew(wake()),
        TEV_MIGRATE => EventKind::Migrate {
            pid,
            dest: aux,
            mask: mask.clone(),
        },
        TEV_INIT_CURR => EventKind::InitCurr {
            pid,
            tier: lc_or(tier),
            on_cpu: aux,
            cgroup: cgid,
        },
        TEV_INIT_RUNNABLE => EventKind::InitRunnable(wake()),
        TEV_TIMER => EventKind::Timer {
            pid,
            late_ns: aux as u64,
            cgroup: cgid,
        },
        TEV_ABSENT => EventKind::Absent { ns: aux as u64 },
        _ => return None,
    };
    Some(Event { ts, cpu, kind })
}

fn tier_from_raw(v: u8) -> Option<Tier> {
    match v as u32 {
        TT_LC => Some(Tier::Lc),
        TT_BE => Some(Tier::Be),
        TT_OTHER => Some(Tier::Other),
        TT_IDLE => Some(Tier::Idle),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(e: &sbt_event, words: usize) -> Vec<u8> {
        let len = TRACE_EVENT_HDR_SIZE as usize + 8 * words;
        // SAFETY: sbt_event is repr(C) plain data, len <= its size.
        unsafe { std::slice::from_raw_parts(e as *const sbt_event as *const u8, len) }.to_vec()
    }

    fn blank() -> sbt_event {
        sbt_event {
            ts: 0,
            cpu: 0,
            pid: 0,
            prev_pid: 0,
            type_: 0,
            tier: sbt_tier_TT_UNKNOWN as u8,
            prev_tier: sbt_tier_TT_UNKNOWN as u8,
            flags: 0,
            nr_words: 0,
            aux: 0,
            cgid: 0,
            mask: [0; TRACE_MASK_WORDS as usize],
        }
    }

    #[test]
    fn decode_switch_and_wakes() {
        let mut e = blank();
        e.ts = 123;
        e.cpu = 1;
        e.type_ = sbt_event_type_TEV_SWITCH as u8;
        e.prev_pid = 10;
        e.pid = 20;
        e.tier = sbt_tier_TT_BE as u8;
        e.prev_tier = sbt_tier_TT_LC as u8;
        e.flags = sbt_event_flags_TEVF_PREV_RUNNABLE as u8;
        e.nr_words = 1;
        e.mask[0] = 0b101;
        e.cgid = 0x1_0000_0042; // high word: kernfs id generation
        let ev = decode_event(&raw(&e, 1)).unwrap();
        assert_eq!(ev.ts, 123);
        assert_eq!(ev.cpu, 1);
        assert_eq!(
            ev.kind,
            EventKind::Switch(Switch {
                prev: 10,
                prev_runnable: true,
                prev_dead: false,
                prev_tier: Some(Tier::Lc),
                prev_mask: Some(CpuMask::Word(0b101)),
                next: 20,
                next_tier: Tier::Be,
                next_cgroup: 0x1_0000_0042,
            })
        );
        // blocking switch to idle: no mask
        e.flags = 0;
        e.nr_words = 0;
        e.pid = 0;
        e.tier = sbt_tier_TT_IDLE as u8;
        match decode_event(&raw(&e, 0)).unwrap().kind {
            EventKind::Switch(Switch {
                prev_mask: None,
                next_tier: Tier::Idle,
                prev_runnable: false,
                ..
            }) => {}
            k => panic!("{k:?}"),
        }
        // wide mask wakeup
        let mut w = blank();
        w.type_ = sbt_event_type_TEV_WAKING as u8;
        w.pid = 7;
        w.tier = sbt_tier_TT_OTHER as u8;
        w.nr_words = 2;
        w.mask[1] = 1;
        w.aux = 3;
        assert_eq!(
            decode_event(&raw(&w, 2)).unwrap().kind,
            EventKind::Waking(Wake {
                pid: 7,
                tier: Tier::Other,
                mask: CpuMask::Wide(vec![0, 1].into()),
                task_cpu: 3,
                cgroup: 0,
            })
        );
        // truncated or unknown records are rejected, never panic
        assert!(decode_event(&raw(&w, 2)[..20]).is_none());
        w.type_ = 99;
        assert!(decode_event(&raw(&w, 2)).is_none());
        // nr_words larger than the record: clamped to what is there
        w.type_ = sbt_event_type_TEV_WAKEUP_NEW as u8;
        w.nr_words = 16;
        assert!(
            matches!(decode_event(&raw(&w, 2)).unwrap().kind, EventKind::WakeupNew(Wake { mask: CpuMask::Wide(m), .. }) if m.len() == 2)
        );
        w.type_ = sbt_event_type_TEV_WAKEUP as u8;
        assert_eq!(
            decode_event(&raw(&w, 0)).unwrap().kind,
            EventKind::Wakeup {
                pid: 7,
                task_cpu: 3
            }
        );
    }

    #[test]
    fn decode_timer() {
        let mut e = blank();
        e.type_ = sbt_event_type_TEV_TIMER as u8;
        e.pid = 42;
        e.aux = u32::MAX;
        e.cgid = 77;
        assert_eq!(
            decode_event(&raw(&e, 0)).unwrap().kind,
            EventKind::Timer {
                pid: 42,
                late_ns: u32::MAX as u64,
                cgroup: 77
            }
        );
    }

    #[test]
    fn decode_absent() {
        let mut e = blank();
        e.type_ = sbt_event_type_TEV_ABSENT as u8;
        e.cpu = 3;
        e.pid = 9;
        e.aux = 40_000_000;
        let ev = decode_event(&raw(&e, 0)).unwrap();
        assert_eq!((ev.cpu, ev.kind), (3, EventKind::Absent { ns: 40_000_000 }));
    }

    #[test]
    fn decode_snapshot_and_cgroup_ids() {
        let mut e = blank();
        e.type_ = sbt_event_type_TEV_INIT_CURR as u8;
        e.pid = 5;
        e.tier = sbt_tier_TT_LC as u8;
        e.aux = 2;
        e.cgid = 77;
        // a record without mask words is exactly the header
        let r = raw(&e, 0);
        assert_eq!(r.len(), 40);
        let ev = decode_event(&r).unwrap();
        assert_eq!(
            ev.kind,
            EventKind::InitCurr {
                pid: 5,
                tier: Tier::Lc,
                on_cpu: 2,
                cgroup: 77
            }
        );
        assert_eq!(ev.cgroup(), Some(77));
        assert!(decode_event(&r[..39]).is_none(), "one byte short of the header");
        // tasks starting to run or to wait carry a cgroup; sched_wakeup does not
        for t in [sbt_event_type_TEV_WAKING, sbt_event_type_TEV_WAKEUP_NEW, sbt_event_type_TEV_INIT_RUNNABLE] {
            e.type_ = t as u8;
            assert_eq!(decode_event(&raw(&e, 0)).unwrap().cgroup(), Some(77), "type {t}");
        }
        e.type_ = sbt_event_type_TEV_WAKEUP as u8;
        assert_eq!(decode_event(&raw(&e, 0)).unwrap().cgroup(), None);
        e.type_ = sbt_event_type_TEV_SWITCH as u8;
        e.cgid = 0;
        assert_eq!(decode_event(&raw(&e, 0)).unwrap().cgroup(), None, "0: not recorded");
    }
}
