#!/usr/bin/env bash
# The demo, run inside the sched_ext guest by `make demo`
# (scripts/vm.sh --cpus 2 -- scripts/demo.sh):
#
#   the papers' srv-bg experiment (docs/bench.md, docs/results.md): an LC server
#   at ~85% utilization alone, then BE image resizing starts; LC latency before and
#   after, for cgroup weights 10000:1, SCHED_IDLE and schedbe, one boot, with the
#   independent tracer measuring inversion (BE running while LC waits).
#
# Prints the summary table; `make demo` then draws the figures on the host
# (`schedbe-bench plot`) and prints where they are. The numbers
# are informative (one repetition in an emulated VM); docs/results.md has the
# repeated measurements. Environment: DEMO_REPS (1), DEMO_SECS (15: seconds per
# phase), DEMO_UTIL, DEMO_SERVICE, DEMO_OUT; extra arguments go to `schedbe-bench srv-bg`.
# SCHEDBE_BENCH_BIN and SCHEDBE_BIN name other builds of the two binaries.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BENCH=${SCHEDBE_BENCH_BIN:-target/release/schedbe-bench}
export SCHEDBE_BIN=${SCHEDBE_BIN:-target/release/schedbe}
REPS=${DEMO_REPS:-1}
SECS=${DEMO_SECS:-15}
# The setting documented in docs/results.md (2 vCPUs on 2 host cores).
UTIL=${DEMO_UTIL:-0.67}
SERVICE=${DEMO_SERVICE:-fixed:5000}
OUT=${DEMO_OUT:-results/tmp/demo/srv-bg}

die() { printf 'demo: %s\n' "$*" >&2; exit 1; }
for b in "$BENCH" "$SCHEDBE_BIN"; do [[ -x $b ]] || die "$b not built (make build)"; done
[[ -e /sys/kernel/sched_ext/state ]] || die "this kernel has no sched_ext (run it with scripts/vm.sh)"
[[ $(cat /sys/kernel/sched_ext/state) == disabled ]] || die "a sched_ext scheduler is already loaded"

rm -rf "$OUT"
mkdir -p "$OUT"
printf '== srv-bg: LC at %s of %s CPUs (service %s), %s s alone then %s s with BE; weights, sched-idle, schedbe; %s repetition(s)\n' \
    "$UTIL" "$(nproc)" "$SERVICE" "$SECS" "$SECS" "$REPS"
# schedbe-bench runs itself at SCHED_FIFO (reset-on-fork) so the load cannot starve it.
"$BENCH" srv-bg --configs weights,sched-idle,schedbe --reps "$REPS" \
    --util "$UTIL" --service "$SERVICE" --lc-alone-secs "$SECS" --be-secs "$SECS" \
    --no-plot --out "$OUT" "$@" >"$OUT/table.txt"

echo
echo "== summary (median over repetitions; ratio = after BE starts / before)"
sed -n '/^| config | runs ok/,/^$/p' "$OUT/summary.md"
echo "mean/p99 ratio: LC latency after BE started / before; inversion: % of CPU time BE ran while"
echo "an LC task waited (independent tracer); BE % of leftover: BE CPU / CPU that LC left."
echo
echo "summary: $OUT/summary.md (figures: drawn on the host next, by make demo:"
echo "target/release/schedbe-bench plot $OUT; matplotlib is very slow under emulation)"
