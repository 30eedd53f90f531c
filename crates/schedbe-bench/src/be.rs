//! `schedbe-bench be-worker`: the best-effort workload. N threads resize
//! synthesized RGBA images (Lanczos3 convolution, fast_image_resize) in a
//! loop and record the completion time of every iteration; throughput per
//! second is computed afterwards from those times, so a starved reporter
//! cannot distort it.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use fast_image_resize::images::Image;
use fast_image_resize::{CpuExtensions, FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use serde::{Deserialize, Serialize};

use crate::sys::{self, monotonic_ns, Policy};

#[derive(clap::Args, Debug, Clone)]
pub struct BeArgs {
    /// Worker threads (default: one per CPU this process may use)
    #[arg(long)]
    pub threads: Option<usize>,
    /// Scheduling policy of every worker thread: normal, batch, idle
    #[arg(long, default_value = "normal")]
    pub policy: String,
    /// Join this cgroup (v2 directory) before starting any thread
    #[arg(long)]
    pub cgroup: Option<PathBuf>,
    /// Restrict to these CPUs
    #[arg(long)]
    pub cpus: Option<String>,
    /// Source image size WxH
    #[arg(long, default_value = "960x540")]
    pub src: String,
    /// Destination image size WxH
    #[arg(long, default_value = "400x225")]
    pub dst: String,
    /// SIMD: auto (best the CPU has) or none (scalar code)
    #[arg(long, default_value = "auto")]
    pub simd: String,
    /// Stop after this many seconds (also stops on SIGINT/SIGTERM)
    #[arg(long, default_value_t = 3600.0)]
    pub duration: f64,
    /// Stop after this many iterations per thread (0: no limit)
    #[arg(long, default_value_t = 0)]
    pub iterations: u64,
    /// Completion times, one line "thread,t_ns" per iteration (CSV)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Summary (JSON); default stdout
    #[arg(long)]
    pub summary: Option<PathBuf>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct BeSummary {
    pub threads: usize,
    pub policy: String,
    pub thread_policy: String,
    pub src: String,
    pub dst: String,
    pub simd: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub iterations: u64,
    pub iterations_per_s: f64,
    /// Mean wall time of one iteration over the whole run, per thread, in ms.
    pub mean_iteration_ms: f64,
}

pub fn parse_size(s: &str) -> Result<(u32, u32)> {
    let (w, h) = s.split_once('x').with_context(|| format!("size {s:?}: expected WxH"))?;
    let w: u32 = w.parse().with_context(|| format!("size {s:?}: bad width"))?;
    let h: u32 = h.parse().with_context(|| format!("size {s:?}: bad height"))?;
    if !(1..=16384).contains(&w) || !(1..=16384).contains(&h) {
        bail!("size {s:?}: width and height must be in 1..=16384");
    }
    Ok((w, h))
}

/// A deterministic "photo-like" RGBA image: gradients plus noise.
pub fn synth_image(w: u32, h: u32, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; w as usize * h as usize * 4];
    let mut x = seed | 1;
    for y in 0..h {
        for col in 0..w {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (y as usize * w as usize + col as usize) * 4;
            let n = (x & 0x1f) as u32;
            v[i] = ((col * 255 / w.max(1)) + n).min(255) as u8;
            v[i + 1] = ((y * 255 / h.max(1)) + n).min(255) as u8;
            v[i + 2] = (((col + y) * 127 / (w + h).max(1)) + (x >> 8 & 0x3f) as u32).min(255) as u8;
            v[i + 3] = 255;
        }
    }
    v
}

/// One resizer with its images; `step()` is one iteration of work.
pub struct ResizeJob {
    src: Image<'static>,
    dst: Image<'static>,
    resizer: Resizer,
    opts: ResizeOptions,
}

impl ResizeJob {
    pub fn new(src: (u32, u32), dst: (u32, u32), simd: &str, seed: u64) -> Result<Self> {
        let img = Image::from_vec_u8(src.0, src.1, synth_image(src.0, src.1, seed), PixelType::U8x4)
            .map_err(|e| anyhow::anyhow!("source image: {e}"))?;
        let mut resizer = Resizer::new();
        match simd {
            "auto" => {}
            // SAFETY: "no SIMD" is supported by every CPU.
            "none" => unsafe { resizer.set_cpu_extensions(CpuExtensions::None) },
            s => bail!("--simd {s:?}: expected auto or none"),
        }
        Ok(ResizeJob {
            src: img,
            dst: Image::new(dst.0, dst.1, PixelType::U8x4),
            resizer,
            opts: ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3)),
        })
    }

    pub fn step(&mut self) -> Result<()> {
        self.resizer.resize(&self.src, &mut self.dst, &self.opts).map_err(|e| anyhow::anyhow!("resize: {e}"))
    }

    /// One step of a dependent chain (the park-resume job): resize, fold the
    /// output into `acc` (FNV-1a), and let the result perturb one source byte,
    /// so each step depends on every step before it: a lost, repeated or
    /// corrupted step changes the final value.
    pub fn chain_step(&mut self, acc: u64) -> Result<u64> {
        self.step()?;
        let mut h = acc ^ 0xcbf2_9ce4_8422_2325;
        for &b in self.dst.buffer() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        let src = self.src.buffer_mut();
        let i = (h % src.len() as u64) as usize;
        src[i] ^= (h >> 56) as u8 | 1;
        Ok(h)
    }

    pub fn cpu_extensions(&self) -> String {
        format!("{:?}", self.resizer.cpu_extensions())
    }
}

pub fn run(a: &BeArgs) -> Result<()> {
    let policy: Policy = a.policy.parse()?;
    if policy.is_rt() {
        bail!("--policy {policy}: a BE worker must not run real-time");
    }
    let src = parse_size(&a.src)?;
    let dst = parse_size(&a.dst)?;
    if !(a.duration.is_finite() && a.duration > 0.0) {
        bail!("--duration must be positive");
    }
    if let Some(cg) = &a.cgroup {
        crate::server::join_cgroup(cg)?;
    }
    if let Some(c) = &a.cpus {
        sys::set_affinity(&sys::parse_cpu_list(c)?)?;
    }
    let threads = match a.threads {
        Some(0) => bail!("--threads must be at least 1"),
        Some(n) => n,
        None => sys::allowed_cpus()?.len().max(1),
    };
    sys::stop::install();
    let probe = ResizeJob::new((8, 8), (4, 4), &a.simd, 1)?;
    let simd = probe.cpu_extensions();
    drop(probe);
    let deadline = monotonic_ns() + (a.duration * 1e9) as u64;
    let start_ns = monotonic_ns();
    let mut handles = Vec::new();
    for t in 0..threads {
        let simd = a.simd.clone();
        let max_iter = a.iterations;
        handles.push(
            std::thread::Builder::new()
                .name(format!("be-resize-{t}"))
                .spawn(move || -> Result<(Vec<u64>, String)> {
                    policy.apply_to_current_thread(false)?;
                    let desc = sys::current_policy_desc();
                    let mut job = ResizeJob::new(src, dst, &simd, t as u64 + 1)?;
                    let mut times = Vec::with_capacity(4096);
                    while !sys::stop::requested() && monotonic_ns() < deadline {
                        job.step()?;
                        times.push(monotonic_ns());
                        if max_iter > 0 && times.len() as u64 >= max_iter {
                            break;
                        }
                    }
                    Ok((times, desc))
                })
                .context("spawn BE thread")?,
        );
    }
    // Wait (the threads check the stop flag after every iteration).
    while handles.iter().any(|h| !h.is_finished()) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let end_ns = monotonic_ns();
    let mut per_thread = Vec::new();
    let mut thread_policy = String::new();
    for h in handles {
        let (t, d) = h.join().map_err(|_| anyhow::anyhow!("BE thread panicked"))??;
        thread_policy = d;
        per_thread.push(t);
    }
    let iterations: u64 = per_thread.iter().map(|t| t.len() as u64).sum();
    let secs = (end_ns - start_ns) as f64 / 1e9;
    let summary = BeSummary {
        threads,
        policy: policy.to_string(),
        thread_policy,
        src: a.src.clone(),
        dst: a.dst.clone(),
        simd,
        start_ns,
        end_ns,
        iterations,
        iterations_per_s: if secs > 0.0 { iterations as f64 / secs } else { 0.0 },
        mean_iteration_ms: if iterations > 0 { secs * 1000.0 * threads as f64 / iterations as f64 } else { f64::NAN },
    };
    if let Some(p) = &a.out {
        write_times(p, &per_thread)?;
    }
    let js = serde_json::to_string_pretty(&summary)?;
    match &a.summary {
        Some(p) => std::fs::write(p, js + "\n").with_context(|| format!("write {}", p.display()))?,
        None => println!("{js}"),
    }
    Ok(())
}

fn write_times(p: &Path, per_thread: &[Vec<u64>]) -> Result<()> {
    let f = std::fs::File::create(p).with_context(|| format!("create {}", p.display()))?;
    let mut w = BufWriter::new(f);
    writeln!(w, "thread,t_ns")?;
    for (i, ts) in per_thread.iter().enumerate() {
        for t in ts {
            writeln!(w, "{i},{t}")?;
        }
    }
    w.flush().with_context(|| format!("write {}", p.display()))
}

/// Completion times from a `--out` file, sorted.
pub fn read_times(p: &Path) -> Result<Vec<u64>> {
    let f = std::fs::File::open(p).with_context(|| format!("open {}", p.display()))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line?;
        if i == 0 || line.trim().is_empty() {
            continue;
        }
        let t = line
            .split_once(',')
            .and_then(|(_, t)| t.trim().parse::<u64>().ok())
            .with_context(|| format!("{}:{}: bad line {line:?}", p.display(), i + 1))?;
        out.push(t);
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("640x480").unwrap(), (640, 480));
        for bad in ["640", "0x5", "ax5", "5x99999"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn resize_runs_and_is_deterministic() {
        assert_eq!(synth_image(4, 3, 7), synth_image(4, 3, 7));
        assert_eq!(synth_image(4, 3, 7).len(), 48);
        let mut j = ResizeJob::new((64, 48), (20, 15), "none", 1).unwrap();
        j.step().unwrap();
        j.step().unwrap();
        assert!(ResizeJob::new((8, 8), (4, 4), "sse9", 1).is_err());
    }
}
