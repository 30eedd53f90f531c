//! The repository's scripts the bench runs: finding them (from the cwd or the
//! workspace the binary was built in) and running the plotting scripts with a
//! Python that has matplotlib. Used by every experiment and by peers.rs, so it
//! depends on none of them.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Locate scripts/plot.py: $SCHEDBE_PLOT, or as [`find_script`] does.
fn find_plot_script() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SCHEDBE_PLOT") {
        return Some(PathBuf::from(p));
    }
    find_script("plot.py")
}

/// Locate scripts/NAME under the cwd or under an ancestor of this binary
/// (the workspace).
pub(crate) fn find_script(name: &str) -> Option<PathBuf> {
    let rel = Path::new("scripts").join(name);
    let mut cands = vec![rel.clone()];
    if let Ok(exe) = std::env::current_exe() {
        cands.extend(exe.ancestors().skip(1).map(|d| d.join(&rel)));
    }
    cands.into_iter().find(|p| p.is_file())
}

/// Run scripts/plot.py on an output directory with a Python that has matplotlib.
pub fn plot(dir: &Path) -> Result<Vec<String>> {
    let script = find_plot_script().context("scripts/plot.py not found (set SCHEDBE_PLOT)")?;
    run_plot_script(&script, dir)
}

/// Run a plotting script on @dir with a Python that has matplotlib; the
/// PNG file names it prints.
pub fn run_plot_script(script: &Path, dir: &Path) -> Result<Vec<String>> {
    let mut last_err = String::new();
    for py in ["python3", "/usr/bin/python3"] {
        let ok = Command::new(py).args(["-c", "import matplotlib"]).output().map(|o| o.status.success()).unwrap_or(false);
        if !ok {
            last_err = format!("{py}: no matplotlib");
            continue;
        }
        let out = Command::new(py).arg(script).arg(dir).output().with_context(|| format!("run {py} {}", script.display()))?;
        if !out.status.success() {
            // the traceback's last line names the error; the error stays one line
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
            bail!("{} {} failed: {}", script.display(), dir.display(), last.trim());
        }
        return Ok(String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.ends_with(".png")).map(|l| l.trim().to_string()).collect());
    }
    bail!("no Python with matplotlib ({last_err}); install python3-matplotlib (scripts/setup.sh)")
}
