#!/bin/bash
# The LC client's own CPU time (its rusage, user and system) next to the
# server's and the whole machine's, at one load, EEVDF and schedbe alternated
# (docs/overhead-log-7.md). `schedbe-bench lc-server` and
# `schedbe-bench client` are run directly, with `schedbe run` loaded for the schedbe runs. In the VM:
#   scripts/vm.sh --icount --cpus 2 --mem 2G --timeout 1400 -- scripts/ab/client-cpu.sh
# Env: BIN (default target/release/schedbe), BENCH (default target/release/schedbe-bench), UTIL (offered load per CPU; 0.72),
# ORDER ("eevdf schedbe eevdf schedbe"), TRACE (seconds; default 0: off). With
# TRACE, the client's kernel functions are traced with function_graph for that
# long, about 9 s into each run (TRACE_KB: the ring buffer per CPU, 100000;
# DURATION: the client's run, 10 s, 25 s with TRACE), together with its sched_switch events, into
# P/NAME-fgraph.txt; summarise with scripts/ab/fgraph_oncpu.py. The tracer slows
# every traced call, so a traced run's rusage is not comparable to an untraced
# one's. Outputs in results/tmp/clientcpu/ (P).
cd "$(dirname "$0")/../.." || exit 1
dur=${DURATION:-10}; [[ ${TRACE:-0} != 0 ]] && dur=${DURATION:-25}
B=${BIN:-target/release/schedbe}; H=${BENCH:-target/release/schedbe-bench}; P=${P:-results/tmp/clientcpu}; i=0; T=/sys/kernel/tracing
fg_opts="funcgraph-abstime funcgraph-proc funcgraph-tail"  # the trace's format, as fgraph_oncpu.py reads it
mkdir -p "$P"
[[ $(id -u) == 0 ]] || { echo "client-cpu.sh: needs root (loads schedbe)" >&2; exit 1; }
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
trace_off() {  # back to tracefs's defaults (the funcgraph options exist only under function_graph)
  echo 0 > $T/tracing_on
  for o in $fg_opts; do echo no$o > $T/trace_options; done
  echo nop > $T/current_tracer; echo > $T/set_ftrace_pid; echo > $T/set_event_pid
  echo 0 > $T/events/sched/sched_switch/enable
}
# the ring buffer is sized once, here: allocating it takes seconds of guest time
[[ ${TRACE:-0} != 0 ]] && { old_kb=$(awk '{print $1; exit}' $T/buffer_size_kb)
  trap 'trace_off 2>/dev/null; echo "$old_kb" > $T/buffer_size_kb' EXIT
  echo "${TRACE_KB:-100000}" > $T/buffer_size_kb; }
# trace_client PID OUT: the client's kernel functions (its only thread) for TRACE s
trace_client() {
  echo 0 > $T/tracing_on; echo > $T/trace
  echo "$1" > $T/set_ftrace_pid; echo "$1" > $T/set_event_pid
  echo function_graph > $T/current_tracer  # patching every function: ~6 s of guest time
  sleep 2
  for o in $fg_opts; do echo $o > $T/trace_options; done
  echo 1 > $T/events/sched/sched_switch/enable
  local t0; t0=$(cut -d" " -f1 /proc/uptime)
  echo 1 > $T/tracing_on; sleep "$TRACE"; echo 0 > $T/tracing_on
  cat $T/trace > "$2"; trace_off
  echo "traced $1 from uptime $t0 s: $(wc -l < "$2") lines"
}
for c in ${ORDER:-eevdf schedbe eevdf schedbe}; do
  i=$((i + 1)); n=$c-$i; sp=
  if [ "$c" = schedbe ]; then
    "$B" run > "$P/$n-sched.log" 2>&1 & sp=$!
    for _ in $(seq 200); do [ "$(cat /sys/kernel/sched_ext/state)" = enabled ] && break; sleep 0.3; done
    [ "$(cat /sys/kernel/sched_ext/state)" = enabled ] || { echo "$n: schedbe did not load" >&2; kill "$sp"; exit 1; }
  fi
  "$H" lc-server --listen "unix:@client-cpu-$i" > "$P/$n-server.log" 2>&1 & srv=$!
  sleep 4   # its spin calibration
  s0=$(ticks $srv); st0=$(head -1 /proc/stat)
  # the client writes its own pid (sh, then exec) for the tracer
  /usr/bin/time -f "client user %U s, sys %S s, wall %e s" -o "$P/$n-time.txt" \
    sh -c 'echo $$ > "$0"; exec "$@"' "$P/$n-client.pid" "$H" client \
    --connect "unix:@client-cpu-$i" --util "${UTIL:-0.72}" --duration "$dur" --service fixed:2000 --server-cpus 2 \
    > "$P/$n-client.log" 2>&1 & tp=$!
  if [[ ${TRACE:-0} != 0 ]]; then
    sleep 1; cl=$(cat "$P/$n-client.pid" 2>/dev/null)
    [[ -n $cl ]] && trace_client "$cl" "$P/$n-fgraph.txt" || echo "$n: no client pid to trace" >&2
  fi
  wait "$tp"
  s1=$(ticks $srv); st1=$(head -1 /proc/stat)
  kill "$srv"; wait "$srv" 2>/dev/null
  [ -n "$sp" ] && { kill -INT "$sp"; wait "$sp"; }
  # /proc/stat's cpu line: user is field 2, system field 4 (USER_HZ ticks, all CPUs)
  echo "$n: $(cat "$P/$n-time.txt"); server $((s1 - s0)) ticks; machine user+sys" \
    "$(echo "$st0 $st1" | awk '{ print ($13 + $15) - ($2 + $4) }') ticks"
done
