#!/bin/bash
# perf bench sched pipe under EEVDF and `schedbe run`, unpinned and with both tasks on
# one CPU (taskset -c 1), 3 rounds alternating, with perf stat's counts of migrations,
# wakeups and context switches: where the two tasks run decides pipe's
# throughput under emulation (docs/overhead.md, "2026-12-06 (third)"). Run in the VM:
#   scripts/vm.sh --prompt-timers --cpus 2 --mem 2G --timeout 900 -- scripts/ab/pipe-placement.sh
# B=path picks the schedbe binary (default target/release/schedbe).
cd "$(dirname "$0")/../.."
B=${B:-target/release/schedbe}
one() {  # label
  for pin in "" "taskset -c 1"; do
    out=$(perf stat -x, -e sched:sched_migrate_task,sched:sched_wakeup,context-switches -- $pin perf bench sched pipe -l 5000 2>&1)
    ops=$(echo "$out" | grep -o '[0-9]* ops/sec' | head -1)
    echo "$1 pin=${pin:-none} $ops | $(echo "$out" | grep -E 'sched_|context' | cut -d, -f1,3 | tr '\n' ' ')"
  done
}
for r in 1 2 3; do
  one eevdf
  $B run > /tmp/sb.log 2>&1 & pid=$!
  for i in $(seq 50); do grep -q enabled /sys/kernel/sched_ext/state 2>/dev/null && break; sleep 0.2; done
  sleep 1
  one schedbe
  kill -INT $pid; wait $pid
done
