//! `SCHEDBE_VERIFIER_STATS=1`: the kernel verifier's statistics for each BPF
//! program of a policy as it loads (instructions processed, states, the
//! verification time), printed on stderr; `=6` prints the whole instruction
//! trace as well (tens of MB: which source lines the verifier walks most,
//! scripts/ab/verifier-lines.py). A developer's knob for keeping load time
//! in check, since the verifier is most of what `schedbe run` costs before
//! it schedules (docs/testing.md, "Load time"; scripts/ab/verifier-cost.sh).
//! Off by default, and nothing else changes.

use libbpf_rs::{OpenObject, PrintLevel};

/// BPF_LOG_STATS: the summary lines only, not the instruction trace.
const LOG_STATS: u32 = 4;

/// Ask for the statistics of every program of @obj, when the variable is set.
pub fn request(obj: &mut OpenObject) {
    let Some(v) = std::env::var_os("SCHEDBE_VERIFIER_STATS") else {
        return;
    };
    // "1" (or anything not a log level): the summary; a log level: that level's log, whole
    let level = v.to_str().and_then(|v| v.parse::<u32>().ok()).filter(|l| *l > 1).unwrap_or(LOG_STATS);
    libbpf_rs::set_print(Some((PrintLevel::Debug, if level == LOG_STATS { print_summary } else { print_all })));
    for mut prog in obj.progs_mut() {
        prog.set_log_level(level);
    }
}

/// libbpf's warnings as before; of its debug output, the verifier's summary.
fn print_summary(level: PrintLevel, msg: String) {
    let summary = ["BEGIN PROG LOAD LOG", "processed ", "verification time"];
    if !matches!(level, PrintLevel::Debug) || summary.iter().any(|s| msg.contains(s)) {
        eprint!("{msg}");
    }
}

fn print_all(_level: PrintLevel, msg: String) {
    eprint!("{msg}");
}
