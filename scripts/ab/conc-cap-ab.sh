#!/bin/bash
# One boot: test_cpumax's concurrency-mode cap (time the limited pod ran on
# more than 2 CPUs at once, tracer) with several builds, ROUNDS rounds,
# builds alternated. BINS: names of copies in results/tmp/ab/bin-NAME
# ("cur" = target/release/schedbe). Prints one log line per run.
# Run: scripts/vm.sh --cpus 4 --mem 2G --timeout 2400 -- 'BINS="cur base2" ROUNDS=3 scripts/ab/conc-cap-ab.sh'
cd "$(dirname "$0")/../.." || exit 1
for r in $(seq 1 "${ROUNDS:-3}"); do
  for b in ${BINS:-cur}; do
    bin=$PWD/results/tmp/ab/bin-$b
    [ "$b" = cur ] && bin=$PWD/target/release/schedbe
    SCHEDBE_BIN=$bin tests/run-vm-suite.sh -q "tests/test_cpumax.py::test_concurrency_mode_caps_cpus_at_once" > /dev/null 2>&1
    echo "round $r $b rc $? $(grep 'cpumax: concurrency: limit' results/tmp/tests/log.txt | tail -1)"
  done
done
