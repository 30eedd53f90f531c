//! CPU lists as vms.toml and the reports write them ("0-3,6").

use anyhow::Result;

/// Parse a kernel-style CPU list into sorted, distinct CPU ids. The shared
/// parser already bounds ids (< 4096), sorts, dedups and refuses empty lists.
pub fn parse(s: &str) -> Result<Vec<u32>> {
    let cpus = schedbe_cgroup::parse_cpu_list(s)?;
    // Ids are < 4096, so the conversion cannot fail.
    Ok(cpus.into_iter().filter_map(|c| u32::try_from(c).ok()).collect())
}

/// Sorted CPU ids back to the short form: [0, 1, 2, 3, 6] -> "0-3,6".
pub fn format(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && end.checked_add(1) == Some(cpus[i + 1]) {
            i += 1;
            end = cpus[i];
        }
        parts.push(if end == start { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}
