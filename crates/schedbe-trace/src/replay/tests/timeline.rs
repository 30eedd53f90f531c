//! Run segments for the per-CPU timeline (`--timeline`).

use super::*;

use Segment as S;

/// CPU0: LC 1 (cgroup 10) 0..2 ms, idle, BE 2 from 3 ms to past the end;
/// CPU1: other 3 1..4 ms, preempted by LC 4 (cgroup 20) until 6 ms.
fn events() -> Vec<Event> {
    vec![
        sw_cg(0, 0, 0, 1, Tier::Lc, 10),
        sw(MS, 1, 0, 3, Tier::Other),
        sw(2 * MS, 0, 1, 0, Tier::Idle),
        sw(3 * MS, 0, 0, 2, Tier::Be),
        preempt(4 * MS, 1, 3, Tier::Other, 1, 4, Tier::Lc),
        sw(6 * MS, 1, 4, 0, Tier::Idle),
    ]
}

fn segments(timeline: Option<(u64, u64)>, window: (u64, u64)) -> Vec<Segment> {
    let mut c = cfg(2);
    c.timeline = timeline;
    (c.window_start, c.window_end) = window;
    let mut r = super::cgroups::run_cg(c, 2, &[(10, 0b01), (20, 0b10)], {
        let mut e = events();
        if let EventKind::Switch(s) = &mut e[4].kind {
            s.next_cgroup = 20;
        }
        e
    });
    r.segments.sort_by_key(|s| (s.cpu, s.start));
    r.segments
}

#[test]
fn every_run_segment_without_idle_and_closed_at_the_window_end() {
    assert_eq!(
        segments(Some((0, 10 * MS)), (0, 10 * MS)),
        vec![
            S::at(0, 0, 2 * MS, 1, Tier::Lc, 0b01),
            S::at(0, 3 * MS, 10 * MS, 2, Tier::Be, 0).ended(SegmentEnd::Cut),
            S::at(1, MS, 4 * MS, 3, Tier::Other, 0).ended(SegmentEnd::Preempted),
            S::at(1, 4 * MS, 6 * MS, 4, Tier::Lc, 0b10),
        ]
    );
}

#[test]
fn segments_are_cut_to_the_timeline_range_and_the_window() {
    // range 1.5..5 ms
    assert_eq!(
        segments(Some((1500 * US, 5 * MS)), (0, 10 * MS)),
        vec![
            S::at(0, 1500 * US, 2 * MS, 1, Tier::Lc, 0b01),
            S::at(0, 3 * MS, 5 * MS, 2, Tier::Be, 0).ended(SegmentEnd::Cut),
            S::at(1, 1500 * US, 4 * MS, 3, Tier::Other, 0).ended(SegmentEnd::Preempted),
            S::at(1, 4 * MS, 5 * MS, 4, Tier::Lc, 0b10).ended(SegmentEnd::Cut),
        ]
    );
    // a range past the window is cut at the window's end
    assert_eq!(
        segments(Some((5 * MS, 20 * MS)), (0, 8 * MS)),
        vec![
            S::at(0, 5 * MS, 8 * MS, 2, Tier::Be, 0).ended(SegmentEnd::Cut),
            S::at(1, 5 * MS, 6 * MS, 4, Tier::Lc, 0b10)
        ]
    );
}

#[test]
fn no_timeline_no_segments() {
    assert!(segments(None, (0, 10 * MS)).is_empty());
}

#[test]
fn an_exit_ends_its_segment_as_exited() {
    let mut c = cfg(1);
    c.timeline = Some((0, 10 * MS));
    (c.window_start, c.window_end) = (0, 10 * MS);
    let mut exit = sw(2 * MS, 0, 1, 0, Tier::Idle);
    if let EventKind::Switch(s) = &mut exit.kind {
        s.prev_dead = true;
    }
    let r = run(c, vec![sw(0, 0, 0, 1, Tier::Lc), exit]);
    assert_eq!(r.segments, vec![S::at(0, 0, 2 * MS, 1, Tier::Lc, 0).ended(SegmentEnd::Exited)]);
}
