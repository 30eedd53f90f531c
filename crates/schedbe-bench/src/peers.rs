//! Peer sched_ext schedulers (scx_bpfland, scx_lavd) as configurations:
//! which exist, where their binaries are, and building them with
//! scripts/peers.sh (pinned versions from crates.io, into .cache/peers).
//! Loading and unloading them is crate::scx's.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The peers scripts/peers.sh builds (and the names a configuration may use).
pub const KNOWN: &[&str] = &["scx_bpfland", "scx_lavd"];

pub fn known(name: &str) -> Option<&'static str> {
    KNOWN.iter().copied().find(|k| *k == name)
}

/// <repo>/.cache/peers/bin, the repository found from scripts/peers.sh.
pub fn default_dir() -> Option<PathBuf> {
    let script = crate::scripts::find_script("peers.sh")?;
    let repo = script.parent()?.parent()?;
    Some(repo.join(".cache/peers/bin"))
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// The binary of peer @name: in @dir when given, else in the default
/// directory and then $PATH.
pub fn find(name: &str, dir: Option<&Path>) -> Result<PathBuf> {
    let mut looked: Vec<String> = Vec::new();
    let dirs: Vec<PathBuf> = match dir {
        Some(d) => vec![d.to_path_buf()],
        None => {
            let mut v: Vec<PathBuf> = default_dir().into_iter().collect();
            v.extend(std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default());
            v
        }
    };
    for d in &dirs {
        let c = d.join(name);
        if executable(&c) {
            return Ok(c);
        }
        looked.push(d.display().to_string());
    }
    let where_ = if dir.is_some() { looked.join(", ") } else { format!("{} or $PATH", looked.first().map(String::as_str).unwrap_or("<repo>/.cache/peers/bin")) };
    bail!("peer scheduler {name} not found (looked in {where_}): build the peers with scripts/peers.sh on the host (or pass --build-peers, or --peers-dir DIR)")
}

/// Run scripts/peers.sh (cargo install of the pinned versions; minutes).
pub fn build(dir: Option<&Path>) -> Result<()> {
    let script = crate::scripts::find_script("peers.sh").context("--build-peers: scripts/peers.sh not found (run from the repository)")?;
    let has_cargo = Command::new("cargo").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if !has_cargo {
        bail!("--build-peers: cargo not found; build the peers with scripts/peers.sh where Rust is installed");
    }
    let mut c = Command::new("bash");
    c.arg(&script);
    if let Some(d) = dir {
        // peers.sh installs into $SCHEDBE_PEERS_DIR/bin
        match (d.file_name(), d.parent()) {
            (Some(n), Some(parent)) if n == "bin" => {
                c.env("SCHEDBE_PEERS_DIR", parent);
            }
            _ => bail!("--build-peers with --peers-dir: the directory must end in /bin (scripts/peers.sh installs into DIR/bin), got {}", d.display()),
        }
    }
    eprintln!("bench: building the peer schedulers: {} (minutes)", script.display());
    let st = c.status().with_context(|| format!("run {}", script.display()))?;
    if !st.success() {
        bail!("{} failed ({st})", script.display());
    }
    Ok(())
}

/// The binaries of the peers @names, checked before any run: a missing
/// binary is built when @build_missing, else it is an error naming
/// scripts/peers.sh.
pub fn resolve(names: &[&str], dir: Option<&Path>, build_missing: bool) -> Result<Vec<PathBuf>> {
    if build_missing && names.iter().any(|n| find(n, dir).is_err()) {
        build(dir)?;
    }
    names.iter().map(|n| find(n, dir).with_context(|| format!("configuration {n}"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_in_a_directory_or_says_how_to_build() {
        let d = std::env::temp_dir().join(format!("schedbe-peers-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let e = find("scx_bpfland", Some(&d)).unwrap_err().to_string();
        assert!(e.contains("scripts/peers.sh") && e.contains(&d.display().to_string()), "{e}");
        let b = d.join("scx_bpfland");
        std::fs::write(&b, "#!/bin/sh\n").unwrap();
        assert!(find("scx_bpfland", Some(&d)).is_err(), "not executable");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&b, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find("scx_bpfland", Some(&d)).unwrap(), b);
        assert_eq!(resolve(&["scx_bpfland"], Some(&d), false).unwrap(), vec![b.clone()]);
        assert!(resolve(&["scx_bpfland", "scx_lavd"], Some(&d), false).is_err());
        std::fs::remove_dir_all(&d).unwrap();
        assert_eq!(known("scx_lavd"), Some("scx_lavd"));
        assert_eq!(known("scx_rusty"), None);
    }
}
