#!/usr/bin/env bash
# The demo, run inside the sched_ext guest by `make demo`
# (scripts/vm.sh -- scripts/demo.sh):
#
#   LC: 8 duty-cycled stress-ng threads (~60% of 4 CPUs) in schedbe-demo/lc
#   BE: one busy loop pinned to every CPU in schedbe-demo/be
#
# First under schedbe (live stats every second) while the independent tracer
# watches for DEMO_SECS (15) seconds, then under the kernel's own scheduler (EEVDF)
# with cgroup weights 10000 (LC) : 1 (BE) for DEMO_EEVDF_SECS (10) seconds. Prints
# the tracer's verdict for both. The BE cgroup is BE to schedbe and to the tracer by
# a path pattern (--be-cgroup schedbe-demo/be). The verdict is informative: the demo
# fails only when something does not run; the test suite asserts the bounds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BIN=${SCHEDBE_BIN:-target/release/schedbe}
SECS=${DEMO_SECS:-15}
EEVDF_SECS=${DEMO_EEVDF_SECS:-10}
OUT=results/tmp/demo
CG=/sys/fs/cgroup/schedbe-demo
PAT=schedbe-demo/be
NCPU=$(nproc)
mkdir -p "$OUT"

say() { printf '\n== %s\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

[[ -x $BIN ]] || die "$BIN not built (make build)"
[[ -e /sys/kernel/sched_ext/state ]] || die "this kernel has no sched_ext (run it with scripts/vm.sh)"
"$BIN" trace --help >/dev/null 2>&1 || die "$BIN has no 'trace' subcommand yet"
[[ $(cat /sys/kernel/sched_ext/state) == disabled ]] || die "a sched_ext scheduler is already loaded"

# The orchestration must not be starved by the load it starts.
chrt -f -p 50 $$ >/dev/null

load_pids=() sched_pid=
stop_load() {
    ((${#load_pids[@]})) && kill -KILL "${load_pids[@]}" 2>/dev/null || true
    [[ -e $CG/lc/cgroup.kill ]] && { echo 1 >"$CG/lc/cgroup.kill"; echo 1 >"$CG/be/cgroup.kill"; } || true
    wait "${load_pids[@]}" 2>/dev/null || true
    load_pids=()
}
cleanup() {
    stop_load
    [[ -n $sched_pid ]] && kill -INT "$sched_pid" 2>/dev/null && wait "$sched_pid" 2>/dev/null || true
    for d in lc be ""; do rmdir "$CG/$d" 2>/dev/null || true; done
}
trap cleanup EXIT

grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p "$CG"
echo +cpu >"$CG/cgroup.subtree_control"
mkdir -p "$CG/lc" "$CG/be"
echo 10000 >"$CG/lc/cpu.weight"
echo 1 >"$CG/be/cpu.weight"

start_load() {
    local c
    for ((c = 0; c < NCPU; c++)); do  # BE first: BE cannot exec quickly under LC load
        (echo $BASHPID >"$CG/be/cgroup.procs"; exec chrt -o 0 taskset -c "$c" sh -c 'while :; do :; done') &
        load_pids+=($!)
    done
    (echo $BASHPID >"$CG/lc/cgroup.procs"; cd /tmp
     exec chrt -o 0 stress-ng --cpu $((2 * NCPU)) --cpu-load 30 --cpu-load-slice 10 -t 0 >/dev/null 2>&1) &
    load_pids+=($!)
}

trace() { # $1 = seconds, $2 = output
    "$BIN" trace --duration "$1" --be-cgroup "$PAT" --output "$2" >/dev/null
}

say "schedbe: loading (LC = $CG/lc, BE = $CG/be), live stats every second"
chrt -o 0 "$BIN" run --be-cgroup "$PAT" --stats 1 &
sched_pid=$!
for _ in $(seq 600); do
    [[ $(cat /sys/kernel/sched_ext/state) == enabled ]] && break
    kill -0 "$sched_pid" 2>/dev/null || die "schedbe run exited while loading"
    sleep 0.1
done
[[ $(cat /sys/kernel/sched_ext/state) == enabled ]] || die "schedbe did not load within 60 s"
start_load
sleep 2
say "tracing ${SECS}s under schedbe"
trace "$SECS" "$OUT/trace-schedbe.json"
stop_load
kill -INT "$sched_pid"
rc=0; wait "$sched_pid" || rc=$?
sched_pid=
((rc == 0)) || die "schedbe run exited with $rc"
[[ $(cat /sys/kernel/sched_ext/state) == disabled ]] || sleep 1

say "EEVDF (no BPF scheduler), cgroup cpu.weight LC 10000 : BE 1, tracing ${EEVDF_SECS}s"
start_load
sleep 2
trace "$EEVDF_SECS" "$OUT/trace-eevdf.json"
stop_load

say "the tracer's verdict"
/usr/bin/python3 - "$OUT/trace-schedbe.json" "$OUT/trace-eevdf.json" <<'PY'
import json, sys
s, e = (json.load(open(p)) for p in sys.argv[1:3])
def row(name, f):
    print(f"  {name:34s} {f(s):>12s} {f(e):>12s}")
def frac(k):
    return lambda r: f"{r['totals'][k] / r['totals']['cpu_ns'] * 100:.1f}%"
def us(k):
    return lambda r: f"{r['lc_wait_us'][k]:.0f} us"
print(f"  {'':34s} {'schedbe':>12s} {'EEVDF 10000:1':>12s}")
row("LC CPU time", frac("lc_ns"))
row("BE CPU time", frac("be_ns"))
row("idle", frac("idle_ns"))
row("inversion (BE runs, LC waits)", lambda r: f"{r['inversion_frac'] * 100:.3f}%")
row("idle while LC waits", lambda r: f"{r['idle_while_lc_waits_frac'] * 100:.3f}%")
row("LC wait p50", us("p50"))
row("LC wait p99", us("p99"))
row("LC wait max", us("max"))
row("dropped trace events", lambda r: str(r["dropped_events"]))
inv = s["inversion_frac"]
ok = inv <= 0.001
print(f"\nverdict: under schedbe LC waited behind BE for {inv * 100:.3f}% of CPU time "
      f"({'PASS' if ok else 'FAIL'}: bound 0.1%); EEVDF with weights 10000:1: "
      f"{e['inversion_frac'] * 100:.3f}%")
PY
