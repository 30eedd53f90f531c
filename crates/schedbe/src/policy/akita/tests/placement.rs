//! First-fit placement (section 3.6): one CPU, two CPUs, refusals, and the
//! incremental API.

use super::super::edfvd::{Server, Verdict};
use super::super::placement::{AdmitError, Placement, VmRequest};
use super::{close, hi, lo, type1, type2};

fn req(name: &str, server: Server, vcpus: u32) -> VmRequest<'_> {
    VmRequest { name, server, vcpus, cpus: None }
}

/// Where each VM's vCPUs went, per CPU: ["memcached/0 lb1/0", ...].
fn layout(p: &Placement) -> Vec<String> {
    let slot = |s: &super::super::placement::CpuSlot| {
        let v: Vec<String> = s.vcpus.iter().map(|v| format!("{}/{}", v.vm, v.index)).collect();
        v.join(" ")
    };
    p.slots().iter().map(slot).collect()
}

fn refusal(e: AdmitError) -> super::super::placement::Refusal {
    match e {
        AdmitError::Refused(r) => r,
        other => panic!("not a refusal: {other}"),
    }
}

#[test]
fn fig5_fits_on_the_first_cpu_and_leaves_three_idle() {
    let mut p = Placement::new(&[0, 1, 2, 3]);
    assert_eq!(p.add_vm(&req("memcached", type1(), 1)), Ok(vec![0]));
    for n in ["lb1", "lb2", "lb3"] {
        assert_eq!(p.add_vm(&req(n, type2(), 1)), Ok(vec![0]));
    }
    assert_eq!(layout(&p), ["memcached/0 lb1/0 lb2/0 lb3/0", "", "", ""]);
    assert_eq!(p.idle_cpus(), [1, 2, 3]);
    // HI is pinned, LO only has a home CPU.
    let pins: Vec<bool> = p.slots()[0].vcpus.iter().map(|v| v.pinned).collect();
    assert_eq!(pins, [true, false, false, false]);
    // CPU 0: U1(1) = 0.75, x = 0.2, value = 0.4 (see tests/edfvd.rs)
    assert!(close(p.slots()[0].test().value.unwrap(), 0.4));
}

#[test]
fn section_4_3_five_lookbusy_need_a_second_cpu() {
    // Type 1 + 5x type 2. lb4 on CPU 0 would make U1(1) = 1.0,
    // U1(1)+U2(1) = 1.05 > 1, so it opens CPU 1; lb5 likewise, and joins it
    // (CPU 1: U1(1) = 0.5).
    let mut p = Placement::new(&[0, 1]);
    p.add_vm(&req("memcached", type1(), 1)).unwrap();
    for n in ["lb1", "lb2", "lb3", "lb4", "lb5"] {
        p.add_vm(&req(n, type2(), 1)).unwrap();
    }
    assert_eq!(layout(&p), ["memcached/0 lb1/0 lb2/0 lb3/0", "lb4/0 lb5/0"]);
    assert!(close(p.slots()[1].test().util.u1_1, 0.5));
    assert_eq!(p.vm_cpus("lb5"), Some(&[1u32][..]));
}

#[test]
fn a_vm_that_fits_nowhere_is_refused_with_the_numbers() {
    // One CPU, type 1 + 3x type 2, then a fourth type 2: U1(1) = 1.0,
    // U2(1) = 0.05 -> LO-mode overload, x undefined.
    let mut p = Placement::new(&[0]);
    p.add_vm(&req("memcached", type1(), 1)).unwrap();
    for n in ["lb1", "lb2", "lb3"] {
        p.add_vm(&req(n, type2(), 1)).unwrap();
    }
    let before = p.clone();
    let e = p.add_vm(&req("lb4", type2(), 1)).unwrap_err();
    assert_eq!(p, before, "a refusal changes nothing");
    let msg = e.to_string();
    assert!(msg.starts_with("vm \"lb4\" refused: its vCPU 0 (of 1) fits on no CPU in 0"), "{msg}");
    assert!(
        msg.contains("cpu 0: U1(1) = 1.0000, U2(1) = 0.0500, U2(2) = 0.2500, x = -, x*U1(1)+U2(2) = -: U1(1)+U2(1) = 1.0500 > 1"),
        "{msg}"
    );
    assert_eq!(refusal(e).tried[0].test.verdict, Verdict::LoModeOverload);
}

#[test]
fn a_condition_6_refusal_shows_x_and_the_value() {
    // CPU 0 has LO 50/100; HI 40/90/100 gives x = 0.4/0.5 = 0.8 and
    // 0.8*0.5 + 0.9 = 1.3. CPU 1 has LO 80/100: U1(1)+U2(1) = 1.2 > 1;
    // x = 0.4/0.2 = 2 and 2*0.8 + 0.9 = 2.5 are shown all the same.
    let mut p = Placement::new(&[0, 1]);
    p.add_vm(&req("a", lo(50, 100), 1)).unwrap();
    p.add_vm(&req("b", lo(80, 100), 1)).unwrap();
    let msg = p.add_vm(&req("h", hi(40, 90, 100), 1)).unwrap_err().to_string();
    assert!(msg.contains("cpu 0: U1(1) = 0.5000, U2(1) = 0.4000, U2(2) = 0.9000, x = 0.8000, x*U1(1)+U2(2) = 1.3000: > 1, condition 6 fails"), "{msg}");
    let cpu1 = "cpu 1: U1(1) = 0.8000, U2(1) = 0.4000, U2(2) = 0.9000, x = 2.0000, x*U1(1)+U2(2) = 2.5000: U1(1)+U2(1) = 1.2000 > 1";
    assert!(msg.contains(cpu1), "{msg}");
}

#[test]
fn admission_is_all_or_nothing() {
    // Three vCPUs of LO 60/100 on two CPUs: vCPU 0 -> CPU 0, vCPU 1 -> CPU 1
    // (CPU 0 would be 1.2), vCPU 2 fits nowhere (1.2 on both): nothing stays.
    let mut p = Placement::new(&[0, 1]);
    let r = refusal(p.add_vm(&req("big", lo(60, 100), 3)).unwrap_err());
    assert_eq!((r.vcpu, r.vcpus), (2, 3));
    assert!(r.tried.iter().all(|c| close(c.test.util.u1_1, 1.2)), "{r:?}");
    assert_eq!(p.idle_cpus(), [0, 1]);
    assert_eq!(p.vm_cpus("big"), None);
    // Two of them fit, one per CPU.
    assert_eq!(p.add_vm(&req("big", lo(60, 100), 2)), Ok(vec![0, 1]));
}

#[test]
fn vcpus_of_one_vm_may_share_a_cpu() {
    // First-fit per vCPU: 2x 25/100 both fit on CPU 0 (U1(1) = 0.5).
    let mut p = Placement::new(&[0, 1]);
    assert_eq!(p.add_vm(&req("two", type2(), 2)), Ok(vec![0, 0]));
}

#[test]
fn a_cpu_list_restricts_first_fit() {
    let mut p = Placement::new(&[0, 1, 2]);
    let only2 = [2u32];
    let r = VmRequest { name: "pinned", server: type1(), vcpus: 1, cpus: Some(&only2) };
    assert_eq!(p.add_vm(&r), Ok(vec![2]));
    let bad = [2u32, 7, 8];
    let r = VmRequest { name: "x", server: type2(), vcpus: 1, cpus: Some(&bad) };
    let e = p.add_vm(&r).unwrap_err();
    assert_eq!(e.to_string(), "vm \"x\" asks for CPU 7-8 that the placement does not have");
}

#[test]
fn removing_a_vm_frees_its_share_and_moves_nobody() {
    let mut p = Placement::new(&[0, 1]);
    p.add_vm(&req("memcached", type1(), 1)).unwrap();
    for n in ["lb1", "lb2", "lb3", "lb4"] {
        p.add_vm(&req(n, type2(), 1)).unwrap();
    }
    assert_eq!(layout(&p), ["memcached/0 lb1/0 lb2/0 lb3/0", "lb4/0"]);
    assert_eq!(p.add_vm(&req("lb1", type2(), 1)), Err(AdmitError::Duplicate("lb1".into())));
    assert_eq!(p.remove_vm("lb2"), Some(vec![0]));
    assert_eq!(p.remove_vm("lb2"), None);
    // lb4 stays on CPU 1; a new type 2 takes lb2's place on CPU 0.
    assert_eq!(p.add_vm(&req("lb5", type2(), 1)), Ok(vec![0]));
    assert_eq!(layout(&p), ["memcached/0 lb1/0 lb3/0 lb5/0", "lb4/0"]);
    // Emptying CPU 1 makes it idle again.
    p.remove_vm("lb4");
    assert_eq!(p.idle_cpus(), [1]);
}
