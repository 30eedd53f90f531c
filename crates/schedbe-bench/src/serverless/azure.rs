//! The Azure Functions 2019 dataset's invocation files,
//! `invocations_per_function_md.anon.dNN.csv` (github.com/Azure/AzurePublicDataset,
//! AzureFunctionsDataset2019.md): a header
//! `HashOwner,HashApp,HashFunction,Trigger,1,2,...,1440`, then one row per
//! function with its invocation count in each minute of one day.
//!
//! The reader accepts 1 to 1440 minute columns (numbered 1..k in order), so
//! tests and the model's writer can use small files; the published files
//! have 1440. Errors name the line (1-based, the header is line 1) and the
//! minute. Nothing here panics on input.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Poisson};

use super::dist::stream_seed;
use super::model::{bands_by_rate, Workload};

/// Minutes in one file of the dataset.
pub const MINUTES_PER_DAY: usize = 1440;
const ID_COLUMNS: [&str; 4] = ["HashOwner", "HashApp", "HashFunction", "Trigger"];

/// One row: a function and its per-minute invocation counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub owner: String,
    pub app: String,
    pub function: String,
    pub trigger: String,
    pub counts: Vec<u64>,
}

impl Row {
    /// A short, stable name for the function: the first 8 characters of each hash.
    pub fn short_name(&self) -> String {
        let h = |s: &str| s.chars().take(8).collect::<String>();
        format!("{}.{}", h(&self.app), h(&self.function))
    }
}

/// Parse a whole file's text.
pub fn parse(text: &str) -> Result<Vec<Row>> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
    let Some((_, header)) = lines.next() else { bail!("empty file: no header line") };
    let minutes = parse_header(header).context("line 1 (header)")?;
    let mut rows = Vec::new();
    for (no, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        rows.push(parse_row(line, minutes).with_context(|| format!("line {no}"))?);
    }
    Ok(rows)
}

fn parse_header(header: &str) -> Result<usize> {
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    if cols.len() < ID_COLUMNS.len() + 1 || cols[..4] != ID_COLUMNS {
        bail!("expected {},1,2,...: got {:?}", ID_COLUMNS.join(","), header.chars().take(80).collect::<String>());
    }
    let minutes = &cols[4..];
    if minutes.len() > MINUTES_PER_DAY {
        bail!("{} minute columns: a file holds one day, at most {MINUTES_PER_DAY}", minutes.len());
    }
    for (i, c) in minutes.iter().enumerate() {
        if c.parse::<usize>().ok() != Some(i + 1) {
            bail!("minute column {} is named {c:?}, expected \"{}\"", i + 1, i + 1);
        }
    }
    Ok(minutes.len())
}

fn parse_row(line: &str, minutes: usize) -> Result<Row> {
    let f: Vec<&str> = line.split(',').collect();
    if f.len() != 4 + minutes {
        bail!("{} fields, the header has {}", f.len(), 4 + minutes);
    }
    let id = |i: usize| -> Result<String> {
        let s = f[i].trim();
        if s.is_empty() {
            bail!("{} is empty", ID_COLUMNS[i]);
        }
        Ok(s.to_string())
    };
    let mut counts = Vec::with_capacity(minutes);
    for (m, c) in f[4..].iter().enumerate() {
        let v: u64 = c.trim().parse().map_err(|_| anyhow::anyhow!("minute {}: {:?} is not a count", m + 1, c.trim()))?;
        counts.push(v);
    }
    Ok(Row { owner: id(0)?, app: id(1)?, function: id(2)?, trigger: id(3)?, counts })
}

/// Read and parse a file.
pub fn read(path: &Path) -> Result<Vec<Row>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&text).with_context(|| path.display().to_string())
}

/// Write rows in the dataset's format. All rows must have the same number
/// of minutes (1..=1440), and no id may hold a comma or a line break.
pub fn write(rows: &[Row], mut out: impl Write) -> Result<()> {
    let minutes = if rows.is_empty() { MINUTES_PER_DAY } else { minutes_of(rows)? };
    if !(1..=MINUTES_PER_DAY).contains(&minutes) {
        bail!("{minutes} minutes per row: expected 1..={MINUTES_PER_DAY}");
    }
    write!(out, "{}", ID_COLUMNS.join(","))?;
    for m in 1..=minutes {
        write!(out, ",{m}")?;
    }
    writeln!(out)?;
    for r in rows {
        let ids = [&r.owner, &r.app, &r.function, &r.trigger];
        if let Some(bad) = ids.iter().find(|s| s.is_empty() || s.contains([',', '\n', '\r'])) {
            bail!("id {bad:?} is empty or holds a comma or line break");
        }
        write!(out, "{},{},{},{}", r.owner, r.app, r.function, r.trigger)?;
        for c in &r.counts {
            write!(out, ",{c}")?;
        }
        writeln!(out)?;
    }
    out.flush()?;
    Ok(())
}

/// Rows for a model workload: each minute's count is a Poisson draw at the
/// function's rate (function i from stream i of `seed`); the ids are the
/// function names, the trigger "http" (ATC'20 Fig. 2: the commonest trigger).
pub fn rows_from_model(w: &Workload, minutes: usize, seed: u64) -> Result<Vec<Row>> {
    if !(1..=MINUTES_PER_DAY).contains(&minutes) {
        bail!("{minutes} minutes: expected 1..={MINUTES_PER_DAY}");
    }
    w.functions
        .iter()
        .map(|f| {
            let mut rng = StdRng::seed_from_u64(stream_seed(seed, f.id as u64));
            let per_min = f.rate_per_s * 60.0;
            let counts = if per_min > 0.0 {
                let p = Poisson::new(per_min).map_err(|e| anyhow::anyhow!("function {}: rate {per_min}/min: {e}", f.name))?;
                (0..minutes).map(|_| p.sample(&mut rng) as u64).collect()
            } else {
                vec![0; minutes]
            };
            Ok(Row { owner: "model".into(), app: "model".into(), function: f.name.clone(), trigger: "http".into(), counts })
        })
        .collect()
}

/// Which minutes and functions to take rates from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selection {
    /// Minutes `first..=last`, 1-based like the column names; all when None.
    pub window: Option<(usize, usize)>,
    /// Keep the N functions with the most invocations in the window (ties
    /// in file order); all when None.
    pub top: Option<usize>,
}

/// Parse a window `A-B` (or a single minute `A`).
pub fn parse_window(s: &str) -> Result<(usize, usize)> {
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let n = |x: &str| x.trim().parse::<usize>().with_context(|| format!("minute window {s:?}: {x:?} is not a minute number"));
    let (a, b) = (n(a)?, n(b)?);
    if a == 0 || b < a {
        bail!("minute window {s:?}: expected FIRST-LAST with 1 <= FIRST <= LAST");
    }
    Ok((a, b))
}

/// The common number of minutes of `rows` (0 for none); rows built by hand
/// rather than by [`parse`] may disagree, which is an error.
fn minutes_of(rows: &[Row]) -> Result<usize> {
    let minutes = rows.first().map_or(0, |r| r.counts.len());
    if let Some(r) = rows.iter().find(|r| r.counts.len() != minutes) {
        bail!("function {}: {} minutes, the first row has {minutes}", r.function, r.counts.len());
    }
    Ok(minutes)
}

/// Each selected function's mean arrival rate over the window, in
/// invocations per second, with its short name, most invoked first.
pub fn rates(rows: &[Row], sel: Selection) -> Result<Vec<(String, f64)>> {
    if rows.is_empty() {
        bail!("no functions in the file");
    }
    let minutes = minutes_of(rows)?;
    let (a, b) = sel.window.unwrap_or((1, minutes));
    if a == 0 || b < a || b > minutes {
        bail!("minute window {a}-{b} is outside the file's minutes 1-{minutes}");
    }
    let mut totals: Vec<(usize, u64)> = rows.iter().enumerate().map(|(i, r)| (i, r.counts[a - 1..b].iter().sum())).collect();
    totals.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    if let Some(n) = sel.top {
        if n == 0 {
            bail!("top 0 keeps no function");
        }
        totals.truncate(n);
    }
    let secs = (b - a + 1) as f64 * 60.0;
    Ok(totals.into_iter().map(|(i, t)| (rows[i].short_name(), t as f64 / secs)).collect())
}

/// Paper 003's banding over time: for each bucket of `bucket_minutes`
/// (5 in the paper), the demand band of every row by its invocations in that
/// bucket. Result: `[bucket][row]`; the last bucket may be shorter.
pub fn bands_per_bucket(rows: &[Row], bucket_minutes: usize, bands: usize) -> Result<Vec<Vec<usize>>> {
    if bucket_minutes == 0 || bands == 0 {
        bail!("bucket length and number of bands must be positive");
    }
    let minutes = minutes_of(rows)?;
    Ok((0..minutes)
        .step_by(bucket_minutes)
        .map(|start| {
            let end = (start + bucket_minutes).min(minutes);
            let demand: Vec<f64> = rows.iter().map(|r| r.counts[start..end].iter().sum::<u64>() as f64).collect();
            bands_by_rate(&demand, bands)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serverless::model::ModelParams;

    const SMALL: &str = "HashOwner,HashApp,HashFunction,Trigger,1,2,3\n\
        o1,appA,f1,http,1,2,3\n\
        o1,appA,f2,timer,0,0,1\r\n\
        \n\
        o2,appB,f3,queue,60,0,120\n";

    #[test]
    fn small_file_rates_hand_checked() {
        let rows = parse(SMALL).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].counts, [0, 0, 1]);
        let r = rates(&rows, Selection::default()).unwrap();
        // 180 invocations in 3 minutes = 1/s; 6 in 3 min = 1/30 s; 1 = 1/180 s.
        assert_eq!(r[0], ("appB.f3".to_string(), 1.0));
        assert!((r[1].1 - 1.0 / 30.0).abs() < 1e-12 && (r[2].1 - 1.0 / 180.0).abs() < 1e-12);
        let r = rates(&rows, Selection { window: Some((2, 2)), top: Some(2) }).unwrap();
        assert_eq!(r, [("appA.f1".to_string(), 2.0 / 60.0), ("appA.f2".to_string(), 0.0)]);
        assert!(rates(&rows, Selection { window: Some((2, 4)), top: None }).is_err());
        assert!(rates(&rows, Selection { window: None, top: Some(0) }).is_err());
        assert_eq!(parse_window("3-5").unwrap(), (3, 5));
        assert_eq!(parse_window("7").unwrap(), (7, 7));
        for bad in ["0-3", "5-3", "a-b", ""] {
            assert!(parse_window(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_files_name_the_line() {
        let cases = [
            ("", "empty file"),
            ("Owner,HashApp,HashFunction,Trigger,1\n", "line 1"),
            ("HashOwner,HashApp,HashFunction,Trigger,1,3\n", "minute column 2"),
            ("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,1\n", "line 2: 5 fields, the header has 6"),
            ("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,1,2\no,a,f,http,1,-2\n", "line 3: minute 2: \"-2\" is not a count"),
            ("HashOwner,HashApp,HashFunction,Trigger,1\no,,f,http,1\n", "line 2: HashApp is empty"),
            ("HashOwner,HashApp,HashFunction,Trigger,1\no,a,f,http,1.5\n", "not a count"),
        ];
        for (text, want) in cases {
            let e = format!("{:#}", parse(text).unwrap_err());
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let mut long = String::from("HashOwner,HashApp,HashFunction,Trigger");
        (1..=1441).for_each(|m| long.push_str(&format!(",{m}")));
        assert!(format!("{:#}", parse(&long).unwrap_err()).contains("1441 minute columns"));
    }

    #[test]
    fn model_round_trip_and_bands_per_bucket() {
        let p = ModelParams { functions: 20, ..Default::default() };
        let mut w = Workload::generate(&p, 5).unwrap();
        w.scale_to_util(2.0).unwrap();
        let rows = rows_from_model(&w, 30, 5).unwrap();
        let mut buf = Vec::new();
        write(&rows, &mut buf).unwrap();
        let back = parse(std::str::from_utf8(&buf).unwrap()).unwrap();
        assert_eq!(back, rows, "write then parse gives the same rows");
        // The busiest function's rate comes back within 5 standard deviations of a Poisson count.
        let top = w.functions.iter().max_by(|a, b| a.rate_per_s.total_cmp(&b.rate_per_s)).unwrap();
        let r = rates(&back, Selection { window: None, top: Some(1) }).unwrap();
        assert_eq!(r[0].0, format!("model.{}", top.name));
        let n = top.rate_per_s * 1800.0;
        assert!((r[0].1 * 1800.0 - n).abs() < 5.0 * n.sqrt() + 1.0, "{} vs {}", r[0].1, top.rate_per_s);
        let b = bands_per_bucket(&back, 5, 10).unwrap();
        assert_eq!(b.len(), 6);
        let top_idx = top.id;
        assert!(b.iter().all(|bucket| bucket[top_idx] == 9), "the busiest function is group-high in every bucket");
        let bad = [Row { function: "a,b".into(), ..rows[0].clone() }];
        assert!(write(&bad, Vec::new()).is_err());
        assert!(rows_from_model(&w, 0, 1).is_err());
    }
}
