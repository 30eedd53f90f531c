//! `--timeline FILE`: the replay's run segments as CSV, one row per
//! interval a task occupied a CPU, for scripts/plot-timeline.py.
//!
//! Columns ([`HEADER`]): `cpu`, `start_ns` and `end_ns` (ns from the
//! window's start), `pid`, `comm` (the task's name as last recorded: the BPF
//! side keeps it for every task switched in, so after an exec the new
//! name), `tier` (`lc`, `be`, `other`: as the tracer classified the task
//! when switched in), `cgroup_index` and `cgroup` (the innermost `--cgroup`
//! the task was in when switched in: its index in the order given, from 0,
//! and its key as given; both empty when in none), `ended` (how the
//! interval ended: `preempted` when the task left the CPU still runnable,
//! preempted or yielding; `blocked`; `exited`; `cut` at the end of the
//! range or window; empty when not known). Rows are sorted by CPU,
//! then start. Fields are quoted as RFC 4180 says when they hold a comma, a
//! quote or a line break (a comm may).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};

use crate::replay::{bits, CgroupSet, Pid, Segment};

pub(crate) const HEADER: &str = "cpu,start_ns,end_ns,pid,comm,tier,cgroup_index,cgroup,ended";

/// A `--cgroup` as the timeline names it.
#[derive(Clone, Debug)]
pub(crate) struct Label {
    /// Its key (the path as given).
    pub(crate) key: String,
    /// Components of its directory's path: the requested cgroups a task is
    /// in lie on one path from the root, so the deepest is the innermost.
    pub(crate) depth: usize,
}

/// The innermost requested cgroup in `set` (lowest index among equals).
fn innermost(set: CgroupSet, labels: &[Label]) -> Option<usize> {
    bits(set)
        .filter(|&i| i < labels.len())
        .max_by_key(|&i| (labels[i].depth, std::cmp::Reverse(i)))
}

/// `s` as one CSV field.
fn field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// Write `segments` as CSV, times relative to `origin`; `comm` names a pid
/// (asked once per pid). Returns the number of rows.
pub(crate) fn write_csv(
    out: &mut impl Write,
    segments: &[Segment],
    origin: u64,
    labels: &[Label],
    comm: &mut dyn FnMut(Pid) -> String,
) -> std::io::Result<usize> {
    let mut rows: Vec<&Segment> = segments.iter().collect();
    rows.sort_by_key(|s| (s.cpu, s.start, s.end));
    let mut comms: HashMap<Pid, String> = HashMap::new();
    writeln!(out, "{HEADER}")?;
    for s in &rows {
        let name = comms.entry(s.pid).or_insert_with(|| comm(s.pid));
        let (index, key) = match innermost(s.cgroups, labels) {
            Some(i) => (i.to_string(), field(&labels[i].key)),
            None => (String::new(), "".into()),
        };
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{}",
            s.cpu,
            s.start.saturating_sub(origin),
            s.end.saturating_sub(origin),
            s.pid,
            field(name),
            s.tier.as_str(),
            index,
            key,
            s.ended.as_str()
        )?;
    }
    out.flush()?;
    Ok(rows.len())
}

/// [`write_csv`] to `path` (created or truncated).
pub(crate) fn write_file(
    path: &Path,
    segments: &[Segment],
    origin: u64,
    labels: &[Label],
    comm: &mut dyn FnMut(Pid) -> String,
) -> Result<usize> {
    let f = File::create(path)
        .with_context(|| format!("cannot create the timeline {}", path.display()))?;
    write_csv(&mut BufWriter::new(f), segments, origin, labels, comm)
        .with_context(|| format!("cannot write the timeline {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::{SegmentEnd, Tier};

    use Segment as S;

    fn labels() -> Vec<Label> {
        vec![
            Label { key: "kubepods.slice".into(), depth: 4 },
            Label { key: "kubepods.slice/pod,1".into(), depth: 5 },
            Label { key: "other.slice".into(), depth: 4 },
        ]
    }

    fn csv(segments: &[Segment], origin: u64) -> (String, Vec<Pid>) {
        let mut out = Vec::new();
        let mut asked = Vec::new();
        let mut comm = |pid: Pid| {
            asked.push(pid);
            match pid {
                7 => "say \"hi\", x".to_string(),
                _ => format!("task{pid}"),
            }
        };
        let n = write_csv(&mut out, segments, origin, &labels(), &mut comm).unwrap();
        assert_eq!(n, segments.len());
        (String::from_utf8(out).unwrap(), asked)
    }

    #[test]
    fn rows_sorted_relative_and_quoted() {
        let segs = vec![
            S::at(1, 1_500, 2_000, 5, Tier::Lc, 0b011).ended(SegmentEnd::Cut),
            S::at(0, 1_200, 1_300, 7, Tier::Be, 0).ended(SegmentEnd::Exited),
            S::at(0, 1_000, 1_200, 5, Tier::Other, 0b001).ended(SegmentEnd::Unknown),
            S::at(1, 1_000, 1_500, 9, Tier::Lc, 0b100).ended(SegmentEnd::Preempted),
        ];
        let (text, asked) = csv(&segs, 1_000);
        assert_eq!(
            text,
            "cpu,start_ns,end_ns,pid,comm,tier,cgroup_index,cgroup,ended\n\
             0,0,200,5,task5,other,0,kubepods.slice,\n\
             0,200,300,7,\"say \"\"hi\"\", x\",be,,,exited\n\
             1,0,500,9,task9,lc,2,other.slice,preempted\n\
             1,500,1000,5,task5,lc,1,\"kubepods.slice/pod,1\",cut\n"
        );
        assert_eq!(asked, vec![5, 7, 9], "one look-up per pid");
    }

    #[test]
    fn empty_timeline_is_a_header() {
        let (text, asked) = csv(&[], 0);
        assert_eq!(text, format!("{HEADER}\n"));
        assert!(asked.is_empty());
    }

    #[test]
    fn innermost_is_the_deepest_given_cgroup() {
        let l = labels();
        assert_eq!(innermost(0, &l), None);
        assert_eq!(innermost(0b011, &l), Some(1));
        assert_eq!(innermost(0b101, &l), Some(0), "equal depth: the first given");
        assert_eq!(innermost(1 << 40, &l), None, "bits past the labels are ignored");
    }

    #[test]
    fn file_errors_name_the_file() {
        let e = write_file(Path::new("/nonexistent-dir/t.csv"), &[], 0, &[], &mut |_| String::new())
            .unwrap_err();
        assert!(format!("{e:#}").contains("/nonexistent-dir/t.csv"), "{e:#}");
        let p = std::env::temp_dir().join(format!("schedbe-timeline-{}.csv", std::process::id()));
        let n = write_file(&p, &[S::at(0, 5, 9, 3, Tier::Lc, 0)], 5, &[], &mut |_| "c".into()).unwrap();
        assert_eq!(n, 1);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), format!("{HEADER}\n0,0,4,3,c,lc,,,blocked\n"));
        std::fs::remove_file(&p).unwrap();
    }
}
