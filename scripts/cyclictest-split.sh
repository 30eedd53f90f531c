#!/usr/bin/env bash
# Where cyclictest's latency goes, from raw kernel tracepoints: each of its
# periods split into the sleep timer's lateness (hrtimer_expire_entry's now
# minus the timer's soft expiry), the wakeup (timer fired -> switched in) and
# its return to user space (switched in -> its next timer armed), with what
# both CPUs were doing at the timer's expiry. Schedulers alternate in one boot.
#
#   scripts/cyclictest-split.sh [--out DIR] [--secs S] [--load PCT] [--worst N] [--printk] SCHED...
#
# SCHED: eevdf (loads nothing) or a schedbe binary (run as `BIN run`), each
# run in the order given, e.g. `eevdf target/release/schedbe eevdf
# target/release/schedbe`. Run as root where sched_ext is available (in the
# VM: scripts/vm.sh --cpus 2 -- scripts/cyclictest-split.sh ...). cyclictest
# (SCHED_OTHER threads, one per CPU, 1 ms interval) runs under `stress-ng
# --cpu <CPUs> --cpu-load PCT` as `schedbe-bench overhead` runs it. Writes
# DIR/<k>-<name>.{trace,hist} and prints scripts/cyclictest_split.py's
# tables (--worst N: also each run's N longest wakeups, with what every CPU
# ran meanwhile). --printk also records bpf_printk() lines into each .trace,
# between the events they came with (for a debug build of the scheduler: the
# script's event list would otherwise drop them). `schedbe-bench overhead
# --cyclictest-trace` gives the same split through `schedbe trace`, without
# the per-event detail.
set -euo pipefail
out=results/tmp/cyclictest-split secs=8 load=50 worst=() printk=
while [[ $# -gt 0 ]]; do
    case $1 in
        --out) out=$2; shift 2 ;;
        --secs) secs=$2; shift 2 ;;
        --load) load=$2; shift 2 ;;
        --worst) worst=(--worst "$2"); shift 2 ;;
        --printk) printk=" bpf_trace:bpf_trace_printk"; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        -*) echo "cyclictest-split: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[[ $# -gt 0 ]] || { echo "cyclictest-split: name at least one scheduler (eevdf or a schedbe binary)" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "cyclictest-split: needs root (tracefs, sched_ext)" >&2; exit 1; }
for t in cyclictest stress-ng; do
    command -v $t >/dev/null || { echo "cyclictest-split: $t not found (scripts/setup.sh)" >&2; exit 1; }
done
TR=/sys/kernel/tracing
[[ -e $TR/set_event ]] || mount -t tracefs nodev $TR
mkdir -p "$out"
tmp=$(mktemp -d)
ncpus=$(nproc)
sched_pid= load_pid=
cleanup() {
    echo 0 > $TR/tracing_on; echo > $TR/set_event
    [[ -n $load_pid ]] && kill "$load_pid" 2>/dev/null || true
    [[ -n $sched_pid ]] && kill -INT "$sched_pid" 2>/dev/null && wait "$sched_pid" || true
    rm -rf "$tmp"
}
trap cleanup EXIT
k=0
files=()
for s in "$@"; do
    k=$((k + 1)); name=$k-$(basename "$s"); sched_pid=
    if [[ $s != eevdf ]]; then
        "$s" run > "$out/$name.sched.log" 2>&1 & sched_pid=$!
        for _ in $(seq 120); do [[ $(cat /sys/kernel/sched_ext/state) == enabled ]] && break; sleep 0.5; done
        [[ $(cat /sys/kernel/sched_ext/state) == enabled ]] || { echo "cyclictest-split: $s did not load" >&2; exit 1; }
    fi
    # stress-ng refuses a directory it cannot write
    (cd "$tmp" && exec stress-ng --cpu "$ncpus" --cpu-load "$load" --timeout $((secs + 30))s > /dev/null 2>&1) & load_pid=$!
    sleep 2
    echo 0 > $TR/tracing_on; echo > $TR/trace; echo 32768 > $TR/buffer_size_kb
    echo "sched:sched_switch sched:sched_waking timer:hrtimer_start timer:hrtimer_expire_entry$printk" > $TR/set_event
    echo 1 > $TR/tracing_on
    cyclictest -m -q --policy=other -t "$ncpus" --duration="$secs" --interval=1000 --histogram=20000 \
        --histfile="$out/$name.hist" > /dev/null
    echo 0 > $TR/tracing_on
    cat $TR/trace > "$out/$name.trace"
    echo > $TR/set_event
    kill "$load_pid"; wait "$load_pid" || true; load_pid=
    if [[ -n $sched_pid ]]; then kill -INT "$sched_pid"; wait "$sched_pid" || true; sched_pid=; fi
    files+=("$out/$name.trace")
    sleep 1
done
python3 "$(dirname "$0")/cyclictest_split.py" "${worst[@]}" "${files[@]}"
