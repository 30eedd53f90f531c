#!/usr/bin/env bash
# schedbe's BPF CPU share under the LC server alone, measured as docs/results.md
# ("lc-alone") measured the 5.5% that issue 13 starts from: kernel.bpf_stats_enabled,
# every program's run time read twice, WINDOW seconds apart, while
# `schedbe bench lc-alone --util UTIL --service fixed:5000` runs. Run as root
# where sched_ext is available (in the VM: scripts/vm.sh --cpus 2 -- scripts/bpf-cpu.sh).
#
#   scripts/bpf-cpu.sh [SCHEDBE_BINARY] [REPS] [UTIL]
#
# Prints one line per run: BPF % of (window x CPUs), calls, ns per call.
# The programs are found through /proc/PID/fdinfo of the scheduler process's
# BPF program fds (no bpftool needed).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(realpath "${1:-$ROOT/target/release/schedbe}")
REPS=${2:-3}
UTIL=${3:-0.67}
WINDOW=20
[[ $EUID -eq 0 ]] || { echo "bpf-cpu.sh: needs root (bpf_stats_enabled, the scheduler)" >&2; exit 1; }
[[ -x $BIN ]] || { echo "bpf-cpu.sh: no schedbe binary at $BIN" >&2; exit 1; }
COMM=$(basename "$BIN" | cut -c1-15)
OUT=$ROOT/results/tmp/bpf-cpu
old=$(cat /proc/sys/kernel/bpf_stats_enabled)
trap 'echo "$old" > /proc/sys/kernel/bpf_stats_enabled' EXIT
echo 1 > /proc/sys/kernel/bpf_stats_enabled

# run_time_ns, run_cnt and count of the BPF programs held by processes named $COMM
snap() {
    /usr/bin/python3 - "$COMM" <<'PY'
import os, sys
name, ns, cnt, seen = sys.argv[1], 0, 0, set()
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        if open(f'/proc/{pid}/comm').read().strip() != name:
            continue
        fds = os.listdir(f'/proc/{pid}/fd')
    except OSError:
        continue
    for fd in fds:
        try:
            if os.readlink(f'/proc/{pid}/fd/{fd}') != 'anon_inode:bpf-prog':
                continue
            info = dict(l.split(':', 1) for l in open(f'/proc/{pid}/fdinfo/{fd}') if ':' in l)
        except OSError:
            continue
        if info['prog_id'] in seen:
            continue
        seen.add(info['prog_id'])
        ns += int(info.get('run_time_ns', 0)); cnt += int(info.get('run_cnt', 0))
print(ns, cnt, len(seen))
PY
}

mkdir -p "$OUT"
for i in $(seq 1 "$REPS"); do
    "$BIN" bench lc-alone --configs schedbe --util "$UTIL" --service fixed:5000 --lc-alone-secs $WINDOW \
        --be-secs $WINDOW --reps 1 --no-plot --trace off --out "$OUT/r$i" --schedbe-bin "$BIN" > "$OUT/r$i.log" 2>&1 &
    bench=$!
    sleep $WINDOW    # calibration and the scheduler's load are over; the LC-alone phase runs
    read -r ns0 n0 _ < <(snap); t0=$(date +%s.%N)
    sleep $WINDOW
    read -r ns1 n1 progs < <(snap); t1=$(date +%s.%N)
    wait $bench || { echo "bpf-cpu.sh: run $i failed: $OUT/r$i.log" >&2; exit 1; }
    [[ $progs -gt 0 ]] || { echo "bpf-cpu.sh: no BPF programs found for a process named $COMM" >&2; exit 1; }
    /usr/bin/python3 -c "import sys; ns, n, c = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[5]); dt = float(sys.argv[4]) - float(sys.argv[3])
print(f'run $i: BPF {100 * ns / (dt * 1e9 * c):.2f}% of CPU over {dt:.1f} s x {c} CPUs, {n} calls, {ns / max(n, 1):.0f} ns/call ($progs programs)')" \
        $((ns1 - ns0)) $((n1 - n0)) "$t0" "$t1" "$(nproc)"
done
