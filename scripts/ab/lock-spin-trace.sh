#!/bin/bash
# Time spent spinning on contended spinlocks during one command (a bench run),
# split by sched_ext state: function_graph on the qspinlock slow path, keeping
# only calls longer than THRESH us (default 2), with a marker written into the
# trace each time /sys/kernel/sched_ext/state changes. Summarise with
# scripts/ab/lock_spin_sum.py OUT/trace.txt. Run as root in the VM, e.g.
#   scripts/vm.sh --icount --cpus 2 --mem 2G --timeout 2200 -- 'scripts/ab/lock-spin-trace.sh \
#     results/tmp/spin1 -- target/release/schedbe-bench overhead --quick --reps 2 --lc-capacity \
#     --configs eevdf,schedbe --workloads lc --lc-utils 0.85 --lc-secs 5 --no-plot --no-bpf-stats \
#     --out results/tmp/spin1/bench'
# (docs/overhead-log-7.md, "2026-12-02 (fourth)"). The tracer itself slows every slow-path call.
set -uo pipefail
out=${1:?usage: lock-spin-trace.sh OUT -- CMD ARGS...}; shift
[[ ${1:-} == -- ]] && shift
(($#)) || { echo "lock-spin-trace.sh: no command after --" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "lock-spin-trace.sh: needs root (tracefs)" >&2; exit 1; }
T=/sys/kernel/tracing
fn=$(grep -oE '^(native_queued_spin_lock_slowpath|__pv_queued_spin_lock_slowpath|queued_spin_lock_slowpath)\b' \
    $T/available_filter_functions | head -1)
[[ -n $fn ]] || { echo "lock-spin-trace.sh: no qspinlock slow path in available_filter_functions" >&2; exit 1; }
mkdir -p "$out"
echo "slow path: $fn" | tee "$out/fn.txt"
poller= old_kb=$(awk '{print $1; exit}' $T/buffer_size_kb)  # it may read "1410 (expanded: 1408)"
cleanup() {
    [[ -n $poller ]] && kill "$poller" 2>/dev/null
    # put back what was set below, so a later tracefs user starts from the defaults
    # (the funcgraph options exist only while function_graph is the tracer)
    echo 0 > $T/tracing_on; echo 0 > $T/tracing_thresh
    echo nofuncgraph-abstime > $T/trace_options; echo nofuncgraph-proc > $T/trace_options
    echo nop > $T/current_tracer; echo > $T/set_ftrace_filter
    echo "$old_kb" > $T/buffer_size_kb
}
trap cleanup EXIT
echo 0 > $T/tracing_on
echo > $T/trace
echo function_graph > $T/current_tracer
echo "$fn" > $T/set_ftrace_filter
echo "${THRESH:-2}" > $T/tracing_thresh
echo funcgraph-abstime > $T/trace_options
echo funcgraph-proc > $T/trace_options
echo 60000 > $T/buffer_size_kb
echo 1 > $T/tracing_on
( last=; while :; do s=$(cat /sys/kernel/sched_ext/state 2>/dev/null || echo none)
  [[ $s != "$last" ]] && echo "SCXSTATE $s" > $T/trace_marker; last=$s; sleep 0.1; done ) & poller=$!
"$@" > "$out/cmd.log" 2>&1; rc=$?
echo "command rc $rc"
echo 0 > $T/tracing_on
cat $T/trace > "$out/trace.txt"
exit $rc
