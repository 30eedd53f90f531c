#!/usr/bin/env bash
# Run the test suite inside the sched_ext guest:  scripts/vm.sh -- tests/run-vm-suite.sh [PYTEST ARGS]
# (make test-vm does this). The harness runs SCHED_FIFO so the CPU hogs the tests
# start cannot starve it; -R (reset-on-fork) puts every process it starts back on
# SCHED_OTHER. A missing sched_ext or cgroup controller fails the run instead of
# skipping tests (SCHEDBE_REQUIRE_SCX=1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export SCHEDBE_REQUIRE_SCX=1
out=results/tmp/tests
mkdir -p "$out"
(($#)) || set -- tests
# bench_plot tests draw figures on the host afterwards (make test-bench-plot); host
# tests (offline checks, figures) ran in make test-host already.
exec chrt -f -R 50 /usr/bin/python3 -m pytest -p no:cacheprovider -v -rfEs -m "not bench_plot and not host" \
    --durations=0 --junitxml="$out/junit.xml" "$@"
