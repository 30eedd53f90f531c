//! Equations 1-6 on the paper's own CPU loads (section 4) and on the edges.

use super::super::edfvd::{relative_deadline_us, test, x_factor, Server, Utilisation, Verdict};
use super::{close, hi, lo, type1, type2};

fn run(servers: &[Server]) -> super::super::edfvd::Test {
    test(Utilisation::of(servers))
}

#[test]
fn fig5_memcached_and_three_lookbusy_share_one_cpu() {
    // Section 4.2: type 1 (HI 5/25/100) + 3x type 2 (LO 25/100).
    // U1(1) = 3*0.25 = 0.75; U2(1) = 0.05; U2(2) = 0.25
    // x = 0.05/(1-0.75) = 0.2; x*U1(1) + U2(2) = 0.15 + 0.25 = 0.4
    let t = run(&[type1(), type2(), type2(), type2()]);
    assert!(close(t.util.u1_1, 0.75) && close(t.util.u2_1, 0.05) && close(t.util.u2_2, 0.25), "{t:?}");
    assert!(close(t.x.unwrap(), 0.2) && close(t.value.unwrap(), 0.4), "{t:?}");
    assert!(t.fits());
}

#[test]
fn section_4_4_type6_with_three_type2() {
    // Type 6 (HI 10/50/100) + 3x type 2: U1(1) = 0.75, U2(1) = 0.1, U2(2) = 0.5
    // x = 0.1/0.25 = 0.4; 0.4*0.75 + 0.5 = 0.8 <= 1
    let t = run(&[hi(10, 50, 100), type2(), type2(), type2()]);
    assert!(close(t.x.unwrap(), 0.4) && close(t.value.unwrap(), 0.8), "{t:?}");
    assert!(t.fits());
}

#[test]
fn section_4_2_three_hi_memcached_and_one_lo() {
    // 3x type 1 + 1x type 2: U1(1) = 0.25, U2(1) = 0.15, U2(2) = 0.75
    // x = 0.15/0.75 = 0.2; 0.2*0.25 + 0.75 = 0.8
    let t = run(&[type1(), type1(), type1(), type2()]);
    assert!(close(t.x.unwrap(), 0.2) && close(t.value.unwrap(), 0.8), "{t:?}");
    assert!(t.fits());
}

#[test]
fn section_4_1_four_lo_types_is_plain_edf() {
    // Types 2, 3, 4, 5: U1(1) = 0.25 + 0.5 + 5/50 + 10/100 = 0.95; no HI: x = 0
    let t = run(&[type2(), lo(50, 100), lo(5, 50), lo(10, 100)]);
    assert!(close(t.util.u1_1, 0.95), "{t:?}");
    assert_eq!((t.x, t.value), (Some(0.0), Some(0.0)));
    assert!(t.fits());
}

#[test]
fn exactly_one_is_admitted_and_a_microsecond_more_is_not() {
    // LO 50/100 + HI 25/75/100: U1(1) = 0.5, U2(1) = 0.25, U2(2) = 0.75
    // x = 0.25/0.5 = 0.5; 0.5*0.5 + 0.75 = 1.0 exactly
    let t = run(&[lo(50, 100), hi(25, 75, 100)]);
    assert_eq!((t.x, t.value), (Some(0.5), Some(1.0)));
    assert!(t.fits());
    // C_pes 75.001 ms: U2(2) = 0.75001, value 1.00001 > 1 + 1e-9
    let over = Server::Hi { c_opt_us: 25_000, c_pes_us: 75_001, period_us: 100_000 };
    let t = run(&[lo(50, 100), over]);
    assert!(close(t.value.unwrap(), 1.00001), "{t:?}");
    assert_eq!(t.verdict, Verdict::Condition6);
}

#[test]
fn exactly_one_with_inexact_floats_is_admitted() {
    // LO 30/100 + HI 14/94/100: x = 0.14/0.7 = 0.2; 0.2*0.3 + 0.94 = 1.0,
    // which f64 may round either side of 1: EPS absorbs it.
    let t = run(&[lo(30, 100), hi(14, 94, 100)]);
    assert!(close(t.value.unwrap(), 1.0), "{t:?}");
    assert!(t.fits());
}

#[test]
fn condition_6_fails_while_the_lo_mode_bound_holds() {
    // LO 50/100 + HI 40/90/100: U1(1)+U2(1) = 0.9 <= 1
    // x = 0.4/0.5 = 0.8; 0.8*0.5 + 0.9 = 1.3 > 1
    let t = run(&[lo(50, 100), hi(40, 90, 100)]);
    assert!(close(t.x.unwrap(), 0.8) && close(t.value.unwrap(), 1.3), "{t:?}");
    assert_eq!(t.verdict, Verdict::Condition6);
}

#[test]
fn lo_mode_overload_with_hi_leaves_x_undefined() {
    // Type 1 + 4x type 2: U1(1) = 1.0, so (4) divides by 0; U1(1)+U2(1) = 1.05
    let t = run(&[type1(), type2(), type2(), type2(), type2()]);
    assert_eq!((t.x, t.value), (None, None));
    assert_eq!(t.verdict, Verdict::LoModeOverload);
    // U1(1) = 1.5 > 1 with HI 10/50/100: literally x = 0.1/(1-1.5) = -0.2 and
    // (6) = -0.2*1.5 + 0.5 = 0.2 <= 1 would pass. The LO-mode bound refuses.
    let t = run(&[lo(50, 100), lo(50, 100), lo(50, 100), hi(10, 50, 100)]);
    assert_eq!(t.x, None);
    assert_eq!(t.verdict, Verdict::LoModeOverload);
}

#[test]
fn lo_only_is_edf_up_to_exactly_one() {
    // U1(1) = 0.5 + 0.5 = 1: EDF's bound, admitted; x = 0 (no HI, not 0/0)
    let t = run(&[lo(50, 100), lo(50, 100)]);
    assert_eq!((t.x, t.value), (Some(0.0), Some(0.0)));
    assert!(t.fits());
    // U1(1) = 0.5 + 0.51 = 1.01: (6) literally reads 0*1.01 + 0 <= 1; refused
    let t = run(&[lo(50, 100), lo(51, 100)]);
    assert_eq!(t.verdict, Verdict::LoModeOverload);
}

#[test]
fn empty_and_hi_only_cpus() {
    let t = run(&[]);
    assert_eq!((t.x, t.value, t.verdict), (Some(0.0), Some(0.0), Verdict::Fits));
    // HI 20/100/100 alone: x = 0.2/1 = 0.2; value = 0 + 1.0 = 1: fits
    let t = run(&[hi(20, 100, 100)]);
    assert!(close(t.x.unwrap(), 0.2) && t.fits(), "{t:?}");
    // Two of them: U2(2) = 2 > 1 although U2(1) = 0.4
    let t = run(&[hi(20, 100, 100), hi(20, 100, 100)]);
    assert_eq!(t.verdict, Verdict::Condition6);
}

#[test]
fn virtual_deadlines_of_equation_5() {
    // Fig. 5's CPU: x = 0.2, so memcached's VD is 0.2*100 ms = 20 ms; LO keeps T.
    let x = x_factor(&Utilisation::of(&[type1(), type2(), type2(), type2()])).unwrap();
    assert_eq!(relative_deadline_us(&type1(), x), 20_000);
    assert_eq!(relative_deadline_us(&type2(), x), 100_000);
}

#[test]
fn plain_edf_feasible_sets_pass_and_condition_6_bounds_x() {
    // The header's two claims, over a grid of one LO and one HI vCPU (ms of 100):
    // U1(1)+U2(2) <= 1 implies a fit, and a fit implies x <= 1.
    for c_lo in (0..=100).step_by(5) {
        for c_opt in (5..=100).step_by(5) {
            for c_pes in (c_opt..=100).step_by(5) {
                let set: Vec<Server> = [(c_lo > 0).then(|| lo(c_lo, 100)), Some(hi(c_opt, c_pes, 100))].into_iter().flatten().collect();
                let t = run(&set);
                if c_lo + c_pes <= 100 {
                    assert!(t.fits(), "{c_lo} {c_opt} {c_pes}: {t:?}");
                }
                if t.fits() {
                    assert!(t.x.unwrap() <= 1.0 + 1e-9, "{c_lo} {c_opt} {c_pes}: {t:?}");
                }
            }
        }
    }
}
