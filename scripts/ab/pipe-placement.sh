#!/bin/bash
# perf bench sched pipe under EEVDF and sched_ext schedulers, unpinned and with both
# tasks on one CPU (taskset -c 1), 3 rounds alternating, with perf stat's counts of
# migrations, wakeups and context switches: where the two tasks run decides pipe's
# throughput under emulation (docs/overhead.md, "2026-12-06 (fourth)"). Counted per
# task, perf's sched_wakeup sees only activations run while one of the two is on a
# CPU, i.e. on the waker's: few when the wakee sits on another, idle CPU and the
# kernel hands it the activation (queued wakeups), all when the two share a CPU or
# wakeups are not queued (printed as on_waker=). Run in the VM:
#   scripts/vm.sh --prompt-timers --cpus 2 --mem 2G --timeout 900 -- scripts/ab/pipe-placement.sh
# SCHEDS lists the sched_ext schedulers (default "schedbe"): schedbe is `B run` (B, the
# binary, default target/release/schedbe), LABEL=PATH another schedbe build's `PATH run`,
# any other name a peer from .cache/peers/bin (scripts/peers.sh builds them), e.g.
# SCHEDS="schedbe new=results/tmp/ab/bin-new scx_bpfland scx_lavd"; ROUNDS (3).
cd "$(dirname "$0")/../.."
B=${B:-target/release/schedbe}
SCHEDS=${SCHEDS:-schedbe}
ROUNDS=${ROUNDS:-3}
one() {  # label
  for pin in "" "taskset -c 1"; do
    out=$(perf stat -x, -e sched:sched_migrate_task,sched:sched_wakeup,context-switches -- $pin perf bench sched pipe -l 5000 2>&1)
    ops=$(echo "$out" | grep -o '[0-9]* ops/sec' | head -1)
    n() { echo "$out" | awk -F, -v e="$1" '$3 == e { print $1 }'; }
    echo "$1 pin=${pin:-none} $ops | migrations=$(n sched:sched_migrate_task) on_waker=$(n sched:sched_wakeup) switches=$(n context-switches)"
  done
}
for r in $(seq "$ROUNDS"); do
  one eevdf
  for s in $SCHEDS; do
    case $s in
      schedbe) cmd=("$B" run) ;;
      *=*) cmd=("${s#*=}" run); s=${s%%=*} ;;
      *) cmd=(".cache/peers/bin/$s") ;;
    esac
    "${cmd[@]}" > "/tmp/$s.log" 2>&1 & pid=$!
    for i in $(seq 50); do grep -q enabled /sys/kernel/sched_ext/state 2>/dev/null && break; sleep 0.2; done
    sleep 1
    one "$s"
    kill -INT $pid; wait $pid
    for i in $(seq 50); do grep -q disabled /sys/kernel/sched_ext/state 2>/dev/null && break; sleep 0.2; done
  done
done
