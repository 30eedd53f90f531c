#!/usr/bin/env bash
# The CPU a policy's daemon (`schedbe run`) uses on a node of many cgroups,
# none of them busy: what the daemon's periodic work (the cgroup rescan, the
# weights' flattening, stats) costs per cgroup.
#
#   scripts/daemon-cpu.sh [--bin SCHEDBE] [--cgroups N] [--secs S] [--policies "sched-be llf"]
#
# Run as root where sched_ext is available (in the VM:
#   scripts/vm.sh --cpus 4 --mem 2G -- scripts/daemon-cpu.sh --cgroups 1000).
# Creates N empty cgroups (the cpu controller on) under /sys/fs/cgroup/daemon-cpu,
# starts each policy, waits until sched_ext says enabled plus 3 s (so BPF
# verification is not counted), then reads the daemon's threads' CPU time
# (schedstat's sum_exec_runtime) over S seconds. Prints one line per policy;
# removes the cgroups on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { printf 'daemon-cpu.sh: %s\n' "$*" >&2; exit 2; }

bin=$ROOT/target/release/schedbe n=1000 secs=15 policies="sched-be llf"
while (($#)); do
    case $1 in
        --bin) bin=${2:?}; shift 2 ;;
        --cgroups) n=${2:?}; shift 2 ;;
        --secs) secs=${2:?}; shift 2 ;;
        --policies) policies=${2:?}; shift 2 ;;
        *) die "unknown option $1 (usage: see the header of $0)" ;;
    esac
done
[[ $n =~ ^[0-9]+$ && $secs =~ ^[1-9][0-9]*$ ]] || die "--cgroups and --secs take whole numbers (--secs at least 1)"
[[ $(id -u) == 0 ]] || die "must run as root (cgroups, loading a scheduler)"
[[ -e /sys/kernel/sched_ext/state ]] || die "this kernel has no sched_ext (run it in scripts/vm.sh)"
[[ $(cat /sys/kernel/sched_ext/state) == disabled ]] || die "a sched_ext scheduler is already loaded"
[[ -x $bin ]] || die "$bin is not an executable (make build)"

cg=/sys/fs/cgroup/daemon-cpu
pid=
cleanup() {
    [[ -n $pid ]] && kill -INT "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    for ((i = 1; i <= n; i++)); do rmdir "$cg/c$i" 2>/dev/null || true; done
    rmdir "$cg" 2>/dev/null || true
}
trap cleanup EXIT
mkdir -p "$cg"
echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
echo +cpu > "$cg/cgroup.subtree_control"
for ((i = 1; i <= n; i++)); do mkdir -p "$cg/c$i"; done

cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }
for pol in $policies; do
    args=(run)
    [[ $pol == sched-be ]] || args+=(--policy "$pol")
    log=$(mktemp)
    "$bin" "${args[@]}" > "$log" 2>&1 & pid=$!
    for _ in $(seq 1 600); do
        [[ $(cat /sys/kernel/sched_ext/state) == enabled ]] && break
        kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; die "$pol: schedbe exited while loading"; }
        sleep 0.5
    done
    sleep 3
    a=$(cpu_ns "$pid"); sleep "$secs"; b=$(cpu_ns "$pid")
    kill -INT "$pid"; wait "$pid" || true; pid=
    rm -f "$log"
    echo "$pol: $n idle cgroups: daemon CPU $(echo "scale=2; ($b - $a) / 10000000 / $secs" | bc)% of one CPU over ${secs} s ($bin)"
    for _ in $(seq 1 60); do [[ $(cat /sys/kernel/sched_ext/state) == disabled ]] && break; sleep 0.5; done
done
