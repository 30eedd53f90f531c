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
# The binaries the tests run, copied into the guest's memory: the project is on
# a 9p share, from which each exec and its page faults took 2-4 s of every
# `schedbe run` start (about 110 starts in the suite; docs/testing.md). The
# same files: the tests still run what was built. schedbe-bench re-executes
# itself for its helpers, and finds the copied schedbe next to it.
tmpdir=$(mktemp -d)
# readable and runnable by all, as target/release is: tests run them unprivileged too
chmod 755 "$tmpdir"
bin=${SCHEDBE_BIN:-target/release/schedbe}
if [[ -x $bin ]]; then
    cp "$bin" "$tmpdir/schedbe"
    export SCHEDBE_BIN=$tmpdir/schedbe
fi
bench=${SCHEDBE_BENCH_BIN:-target/release/schedbe-bench}
if [[ -x $bench ]]; then
    cp "$bench" "$tmpdir/schedbe-bench"
    export SCHEDBE_BENCH_BIN=$tmpdir/schedbe-bench
fi
# Transparent huge pages only where asked for (madvise): with Debian's
# "always", khugepaged's scans and collapses of the harness's and workers'
# memory took 0.03-0.54 of a CPU in measurement windows under emulation
# (tl.who_ran, 2026-11-29; 0.54 failed test_quota's work conservation), time
# a test then reads as its load's or schedbe's. Inside the guest only.
thp=/sys/kernel/mm/transparent_hugepage/enabled
if [[ ${SCHEDBE_IN_VM:-0} == 1 && -w $thp ]]; then echo madvise >"$thp"; fi
# bench_plot tests draw figures on the host afterwards (make test-bench-plot); host
# tests (offline checks, figures) ran in make test-host already.
rc=0
chrt -f -R 50 /usr/bin/python3 -m pytest -p no:cacheprovider -v -rfEs -m "not bench_plot and not host" \
    --durations=0 --junitxml="$out/junit.xml" "$@" || rc=$?
rm -rf "$tmpdir"
exit $rc
