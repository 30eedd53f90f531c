#!/usr/bin/env bash
# Where a scheduler's time goes under one workload: a system-wide perf profile
# (cpu-clock sampling, which works under emulation where there is no PMU) plus
# the kernel's BPF program statistics (run count and run time per callback).
#
#   scripts/profile-sched.sh [--sched eevdf|"CMD ARGS"] [--out DIR] -- WORKLOAD...
#
# Run as root where sched_ext is available (in the VM:
#   scripts/vm.sh --cpus 4 -- scripts/profile-sched.sh -- perf bench sched pipe -l 5000).
# --sched: the scheduler's command line (default "target/release/schedbe run"), e.g.
# .cache/peers/bin/scx_bpfland; eevdf loads nothing.
# Writes DIR/report.txt (flat, by symbol), DIR/callers.txt (the
# BPF programs' callees), DIR/bpf-stats.txt and DIR/workload.out; prints the
# report's head. DIR defaults to results/tmp/profile/<sched>.
# cpu-clock samples are taken by a timer interrupt, so none lands in code run
# with interrupts off: the sched_ext callbacks (under the run-queue lock) are
# charged to where interrupts come back on, mostly finish_task_switch. Their
# cost is bpf-stats.txt's, not the profile's.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { printf 'profile-sched.sh: %s\n' "$*" >&2; exit 2; }

sched="$ROOT/target/release/schedbe run" out=
while (($#)); do
    case $1 in
        --sched) sched=${2:?}; shift 2 ;;
        --out) out=${2:?}; shift 2 ;;
        --) shift; break ;;
        *) die "unknown option $1 (usage: see the header of $0)" ;;
    esac
done
(($#)) || die "no workload given after --"
[[ $(id -u) == 0 ]] || die "must run as root (perf -a, bpf_stats, loading a scheduler)"
command -v perf >/dev/null || die "perf not found (Debian package linux-perf; scripts/setup.sh)"
read -r -a sched_cmd <<< "$sched"
out=${out:-$ROOT/results/tmp/profile/$(basename "${sched_cmd[0]}")}
mkdir -p "$out"

# perf.data in local temporary storage: perf record fails writing it to the
# guest's shared results directory.
data=$(mktemp -d)/perf.data
pid=
stats_old=$(cat /proc/sys/kernel/bpf_stats_enabled)
cleanup() {
    [[ -n $pid ]] && kill -INT "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    echo "$stats_old" > /proc/sys/kernel/bpf_stats_enabled
}
trap cleanup EXIT

echo 1 > /proc/sys/kernel/bpf_stats_enabled
if [[ $sched != eevdf ]]; then
    [[ -x ${sched_cmd[0]} ]] || die "${sched_cmd[0]}: not an executable"
    "${sched_cmd[@]}" >"$out/sched.log" 2>&1 & pid=$!
fi
if [[ -n $pid ]]; then
    for _ in $(seq 120); do
        [[ $(cat /sys/kernel/sched_ext/state 2>/dev/null) == enabled ]] && break
        kill -0 "$pid" 2>/dev/null || { cat "$out/sched.log" >&2; die "$sched exited before it loaded"; }
        sleep 0.5
    done
    [[ $(cat /sys/kernel/sched_ext/state) == enabled ]] || die "$sched did not load in 60 s"
    echo "loaded: $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)"
fi

# BPF statistics: everything loaded, before and after, as bpftool would show them.
bpfstats() {
    for f in /proc/[0-9]*/fdinfo/*; do
        awk '/^prog_tag:/{tag=$2} /^prog_id:/{id=$2} /^run_time_ns:/{t=$2} /^run_cnt:/{c=$2}
             END{if(id!="")print id"/"tag, c, t}' "$f" 2>/dev/null || true
    done | sort -u -k1,1
    return 0
}
bpfstats > "$out/bpf-before.txt"
perf record -q -a -g -e cpu-clock -F 2000 -o "$data" -- "$@" >"$out/workload.out" 2>&1 \
    || { cat "$out/workload.out" >&2; die "workload or perf failed"; }
bpfstats > "$out/bpf-after.txt"
# program names from kallsyms (bpf_prog_<tag>_<name>), by tag
grep -o 'bpf_prog_[0-9a-f]\{16\}_[A-Za-z0-9_]*' /proc/kallsyms | sed 's/^bpf_prog_\([0-9a-f]*\)_/\1 /' | sort -u > "$out/prog-names.txt" || true
join "$out/bpf-before.txt" "$out/bpf-after.txt" | while read -r idtag c0 t0 c1 t1; do
    c=$((c1 - c0)) t=$((t1 - t0)) tag=${idtag#*/}
    ((c > 0)) || continue
    name=$(awk -v t="$tag" '$1 == t {print $2; exit}' "$out/prog-names.txt")
    printf '%-24s %8d runs %8d ns/run %9.1f ms\n' "${name:-$idtag}" "$c" $((t / c)) "$(echo "$t / 1000000" | bc -l)"
done | sort -k6 -n -r > "$out/bpf-stats.txt"

perf report -i "$data" --stdio --no-children --sort sym --percent-limit 0.3 2>/dev/null \
    | grep -v '^$' > "$out/report.txt"
perf report -i "$data" --stdio --children --sort sym --percent-limit 0.5 -g none 2>/dev/null \
    | grep -v '^$' > "$out/children.txt"
perf report -i "$data" --stdio --no-children --sort sym -g caller,0.5,callee --percent-limit 0.5 \
    --symbol-filter=bpf_prog 2>/dev/null > "$out/callers.txt" || true
echo "workload: $*"
tail -5 "$out/workload.out"
echo "--- BPF programs run during the workload"
cat "$out/bpf-stats.txt"
echo "--- top symbols (self time), $out/report.txt"
grep -v '^#' "$out/report.txt" | head -40
echo "--- inclusive time, $out/children.txt"
grep -v '^#' "$out/children.txt" | grep -i 'bpf\|scx\|schedule\|pick\|enqueue\|dispatch' | head -30
