//! `schedbe run`'s command line: the options every policy takes, SCHED_BE's
//! (the default policy's), and a subcommand for each other policy with its
//! own, so that clap itself refuses an option of another policy.
//!
//! Usage errors are one `schedbe: error:` line, as every other error of
//! schedbe is (scripts and the tests read the first line of stderr).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Args, Command, Subcommand};

/// `schedbe run`: SCHED_BE unless a policy subcommand names another.
#[derive(Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "The policy comes right after `run`: schedbe run akita --vms FILE, schedbe run llf. \
                  The flag form of earlier versions, --policy sched-be|akita|llf, is still accepted."
)]
pub struct RunArgs {
    #[command(subcommand)]
    pub policy: Option<PolicyCmd>,
    /// Only a policy name this version does not know reaches clap as a flag
    /// (`legacy_policy_flag` turns the others into the subcommand), and
    /// clap then lists the ones it knows.
    #[arg(long = "policy", value_name = "POLICY", value_enum, hide = true)]
    pub unknown_policy: Option<LegacyPolicy>,
    #[command(flatten)]
    pub sched_be: SchedBeArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The policies other than SCHED_BE.
#[derive(Subcommand, Debug)]
pub enum PolicyCmd {
    /// Akita: mixed-criticality VMs with budgets and EDF-VD, from --vms (docs/akita.md)
    Akita(AkitaArgs),
    /// Least-loaded-first among sandboxes (--sandbox patterns) for dense serverless nodes (docs/serverless.md)
    Llf(LlfArgs),
}

/// The values of the `--policy` flag of earlier versions.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LegacyPolicy {
    SchedBe,
    Akita,
    Llf,
}

/// SCHED_BE's options (`schedbe run` without a policy subcommand).
#[derive(Args, Debug)]
#[command(next_help_heading = "SCHED_BE options")]
pub struct SchedBeArgs {
    /// TOML config file (see docs/design.md); flags override it
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Extra BE cgroup path pattern, glob relative to /sys/fs/cgroup (repeatable)
    #[arg(long = "be-cgroup")]
    pub be_cgroups: Vec<String>,
    /// Do not treat kubelet BestEffort cgroups as BE by default
    #[arg(long)]
    pub no_default_be_cgroups: bool,
    /// LC time slice in µs [default 5000]
    #[arg(long)]
    pub lc_slice_us: Option<u64>,
    /// LC wakeup preemption: a woken LC task this far (µs of virtual time) behind the LC task on a busy CPU preempts it; 0 turns it off [default 400]
    #[arg(long)]
    pub lc_preempt_us: Option<u64>,
    /// Turn reservations off: a cgroup below its cpu.weight entitlement then waits for virtual time like any other (docs/design.md)
    #[arg(long)]
    pub no_reservations: bool,
    /// BE time slice in µs (LC preempts BE whenever it needs the CPU, so this can be long) [default 20000]
    #[arg(long)]
    pub be_slice_us: Option<u64>,
    /// A BE task waiting longer than this gets one guard slice (keeps the watchdog away)
    #[arg(long)]
    pub starvation_limit_ms: Option<u64>,
    /// Length in µs of the guard slice a starved BE task gets [default 2000]
    #[arg(long)]
    pub guard_slice_us: Option<u64>,
    /// How cpu.max is enforced: quota (the kernel's semantics) or concurrency
    /// (also at most ceil(quota/period) CPUs at once, the paper's reading) [default quota]
    #[arg(long, value_enum)]
    pub limit_mode: Option<crate::policy::sched_be::config::LimitMode>,
}

/// `schedbe run akita`.
#[derive(Args, Debug)]
pub struct AkitaArgs {
    /// The VM file (vms.toml, docs/akita.md)
    #[arg(long, value_name = "FILE")]
    pub vms: PathBuf,
}

/// `schedbe run llf`.
#[derive(Args, Debug)]
pub struct LlfArgs {
    /// A sandbox cgroup path pattern, glob relative to /sys/fs/cgroup (repeatable) [default: each kubelet pod]
    #[arg(long = "sandbox", value_name = "PATTERN")]
    pub sandboxes: Vec<String>,
    /// Half-life of a sandbox's decaying load, in seconds (4 half-lives leave a burst 6%) [default 1]
    #[arg(long, value_name = "SECS")]
    pub load_half_life_s: Option<f64>,
}

/// What every policy takes: parking of starved BE cgroups and the output.
/// Global, so they may come before or after the policy subcommand.
#[derive(Args, Debug)]
#[command(next_help_heading = "Every policy")]
pub struct CommonArgs {
    /// Never park (freeze) starved BE cgroups; only the starvation guard serves them
    #[arg(long, global = true)]
    pub no_park: bool,
    /// Park a BE cgroup once one of its tasks was runnable this long with less than 1/32 of it on a CPU, and the cgroup then gets less than 1/32 of a CPU for half as long again [default 3000]
    #[arg(long, global = true)]
    pub park_after_ms: Option<u64>,
    /// Thaw parked cgroups once LC has left idle capacity this long
    #[arg(long, global = true)]
    pub unpark_after_ms: Option<u64>,
    /// State file recording parked cgroups
    #[arg(long, global = true)]
    pub state_file: Option<String>,
    /// Print stats every SECS seconds
    #[arg(long, value_name = "SECS", global = true)]
    pub stats: Option<f64>,
    /// Print stats as one JSON object per line
    #[arg(long, global = true)]
    pub json: bool,
    /// More log output
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

/// Parse the process's arguments, or exit: help and version as clap prints
/// them, a usage error as one line (status 2).
pub fn parse<P: clap::Parser>() -> P {
    let cmd = P::command();
    let argv = legacy_policy_flag(&cmd, std::env::args_os().collect());
    match P::try_parse_from(argv) {
        Ok(p) => p,
        Err(e) => match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
            _ => {
                eprintln!("schedbe: error: {}", one_line(&e, &cmd));
                std::process::exit(2);
            }
        },
    }
}

/// `schedbe run ... --policy X ...` (or `--policy=X`) as `schedbe run X ...`:
/// the subcommand form of the policy, so that command lines written for the
/// flag keep working. `--policy sched-be` is the default and just goes away.
/// A value that is no policy is left for clap to refuse.
pub fn legacy_policy_flag(cmd: &Command, mut argv: Vec<OsString>) -> Vec<OsString> {
    let Some(run) = cmd.find_subcommand("run") else { return argv };
    if argv.get(1).and_then(|a| a.to_str()) != Some("run") {
        return argv;
    }
    // options whose value is the next argument: that value is no flag
    let mut takes_value: Vec<String> = Vec::new();
    for c in std::iter::once(run).chain(run.get_subcommands()) {
        for a in c.get_arguments().filter(|a| a.get_action().takes_values()) {
            takes_value.extend(a.get_long().map(|l| format!("--{l}")));
        }
    }
    let mut i = 2;
    while i < argv.len() {
        let Some(arg) = argv[i].to_str().map(str::to_string) else {
            i += 1;
            continue;
        };
        if arg == "--" {
            break;
        }
        if i == 2 && run.find_subcommand(&arg).is_some() {
            return argv; // already the subcommand form
        }
        let (value, width) = match arg.strip_prefix("--policy=") {
            Some(v) => (Some(v.to_string()), 1),
            None if arg == "--policy" => (argv.get(i + 1).and_then(|v| v.to_str()).map(str::to_string), 2),
            None => (None, 0),
        };
        if let Some(v) = value {
            if !["sched-be", "akita", "llf"].contains(&v.as_str()) {
                return argv;
            }
            argv.drain(i..i + width);
            if v != "sched-be" {
                argv.insert(2, OsString::from(v));
            }
            return argv;
        }
        i += if takes_value.contains(&arg) { 2 } else { 1 };
    }
    argv
}

/// A clap error as one line: its message, the usage of the command it is
/// about and, for an option of another policy, the command that takes it.
fn one_line(e: &clap::Error, cmd: &Command) -> String {
    let text = e.render().to_string();
    let (mut msg, mut usage): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    let mut in_usage = false;
    for line in text.lines() {
        let l = line.trim();
        // the usage is its line and the indented alternatives below it
        in_usage = l.starts_with("Usage:") || (in_usage && line.starts_with(' ') && !l.is_empty());
        if in_usage {
            usage.push(l.trim_start_matches("Usage:").trim());
        } else if !l.is_empty() && !l.starts_with("tip:") && !l.starts_with("For more information") {
            msg.push(l.strip_prefix("error:").map_or(l, str::trim));
        }
    }
    let mut out = msg.join(" ");
    if let Some(h) = other_policy_hint(e, cmd) {
        out = format!("{out} ({h})");
    }
    if !usage.is_empty() {
        out = format!("{out}; usage: {}", usage.join(" | "));
    }
    out
}

/// For an argument `schedbe run` (or one of its policies) does not take:
/// which policy's command takes it, or where the policy goes.
fn other_policy_hint(e: &clap::Error, cmd: &Command) -> Option<String> {
    let run = cmd.find_subcommand("run")?;
    let right_after = |p: &str| format!("the policy comes right after `run`: schedbe run {p} [OPTIONS]");
    if let Some(ContextValue::String(sub)) = e.get(ContextKind::InvalidSubcommand) {
        return run.find_subcommand(sub).map(|_| right_after(sub));
    }
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return None };
    if run.find_subcommand(arg).is_some() {
        return Some(right_after(arg));
    }
    let long = arg.strip_prefix("--")?.split('=').next()?;
    let has = |c: &Command| c.get_arguments().any(|a| a.get_long() == Some(long) && !a.is_global_set());
    if has(run) {
        return Some(format!("{arg} is an option of the SCHED_BE policy: schedbe run {arg} ..."));
    }
    let owner = run.get_subcommands().find(|c| has(c))?;
    Some(format!("{arg} is an option of `schedbe run {}`", owner.get_name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser, Debug)]
    struct Top {
        #[command(subcommand)]
        cmd: Sub,
    }

    #[derive(Subcommand, Debug)]
    enum Sub {
        Run(RunArgs),
    }

    fn argv(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    fn rewrite(s: &str) -> String {
        let out = legacy_policy_flag(&Top::command(), argv(s));
        out.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
    }

    fn parse(s: &str) -> Result<RunArgs, String> {
        let cmd = Top::command();
        match Top::try_parse_from(legacy_policy_flag(&cmd, argv(s))) {
            Ok(Top { cmd: Sub::Run(a) }) => Ok(a),
            Err(e) => Err(one_line(&e, &cmd)),
        }
    }

    #[test]
    fn policy_flag_becomes_the_subcommand() {
        assert_eq!(rewrite("s run --policy akita --vms f"), "s run akita --vms f");
        assert_eq!(rewrite("s run --stats 1 --policy=llf --sandbox x"), "s run llf --stats 1 --sandbox x");
        assert_eq!(rewrite("s run --policy sched-be --lc-slice-us 5"), "s run --lc-slice-us 5");
        // the value of an option is not the flag
        assert_eq!(rewrite("s run --state-file --policy"), "s run --state-file --policy");
        assert_eq!(rewrite("s run --policy foo"), "s run --policy foo");
        assert_eq!(rewrite("s run llf --sandbox x"), "s run llf --sandbox x");
        assert_eq!(rewrite("s exec --policy akita"), "s exec --policy akita");
    }

    #[test]
    fn todays_command_lines_parse() {
        let a = parse("s run").unwrap();
        assert!(a.policy.is_none());
        let a = parse("s run --policy sched-be --lc-slice-us 5 --no-park").unwrap();
        assert_eq!((a.sched_be.lc_slice_us, a.common.no_park), (Some(5), true));
        let a = parse("s run --policy akita --vms f --stats 1 --json").unwrap();
        assert!(matches!(a.policy, Some(PolicyCmd::Akita(ref k)) if k.vms == PathBuf::from("f")));
        assert_eq!((a.common.stats, a.common.json), (Some(1.0), true));
        let a = parse("s run --stats 2 --policy llf --sandbox x/* --park-after-ms 900").unwrap();
        assert!(matches!(a.policy, Some(PolicyCmd::Llf(ref l)) if l.sandboxes == ["x/*"]));
        assert_eq!((a.common.stats, a.common.park_after_ms), (Some(2.0), Some(900)));
        let a = parse("s run llf --no-park -v").unwrap();
        assert!(a.common.no_park && a.common.verbose);
    }

    #[test]
    fn another_policys_option_is_refused() {
        let e = parse("s run --policy akita --vms f --lc-slice-us 5").unwrap_err();
        assert!(e.contains("'--lc-slice-us'") && e.contains("SCHED_BE") && e.contains("usage: s run akita"), "{e}");
        let e = parse("s run --vms f").unwrap_err();
        assert!(e.contains("'--vms'") && e.contains("schedbe run akita"), "{e}");
        let e = parse("s run --sandbox x").unwrap_err();
        assert!(e.contains("schedbe run llf"), "{e}");
        let e = parse("s run llf --vms f").unwrap_err();
        assert!(e.contains("schedbe run akita"), "{e}");
        let e = parse("s run --lc-slice-us 5 akita --vms f").unwrap_err();
        assert!(e.contains("right after `run`"), "{e}");
        let e = parse("s run --policy akita").unwrap_err();
        assert!(e.contains("--vms <FILE>") && !e.contains('\n'), "{e}");
        let e = parse("s run --policy bogus").unwrap_err();
        assert!(e.contains("bogus") && e.contains("akita"), "{e}");
    }
}
