#!/bin/bash
# One boot: the whole of tests/test_cpumax.py, ROUNDS times (the concurrency
# cap's rare over-cap events showed only when the file ran whole, not with
# that test alone: scripts/ab/conc-cap-ab.sh). Prints per round the exit
# status, the time, the concurrency test's log line and, when the pod was
# seen on 3+ CPUs, the intervals with their run segments; keeps each round's
# pytest output and the concurrency run's timeline in results/tmp/cpumax-repeat/.
# Run: scripts/vm.sh --cpus 4 --mem 2G --timeout 3000 -- 'ROUNDS=4 scripts/ab/cpumax-repeat.sh'
cd "$(dirname "$0")/../.." || exit 1
out=results/tmp/cpumax-repeat
mkdir -p "$out"
for r in $(seq 1 "${ROUNDS:-4}"); do
  t0=$(date +%s)
  n0=$(wc -l 2>/dev/null < results/tmp/tests/log.txt || echo 0)   # log.txt is appended to: this round's lines only
  tests/run-vm-suite.sh -q tests/test_cpumax.py > "$out/round-$r.out" 2>&1
  rc=$?
  new=$(tail -n +$((n0 + 1)) results/tmp/tests/log.txt)
  echo "round $r rc $rc $(( $(date +%s) - t0 ))s $(grep 'cpumax: concurrency: limit' <<< "$new")"
  grep -E '^FAILED' "$out/round-$r.out"
  grep 'on 3+ CPUs' <<< "$new"
  cp results/tmp/tests/cpumax-conc-cap.timeline.csv "$out/timeline-$r.csv" 2>/dev/null
done
