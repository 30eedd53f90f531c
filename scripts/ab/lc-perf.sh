#!/bin/bash
# The LC server alone under EEVDF and schedbe, alternately, each run inside a
# whole-system profile (docs/overhead.md, "2026-12-02 (second)"). Run in the VM, e.g.
#   scripts/vm.sh --icount --cpus 2 --mem 2G --timeout 1800 -- scripts/ab/lc-perf.sh
# Env: BIN (schedbe binary; default target/release/schedbe), UTIL (offered load per
# CPU; 0.707), ORDER ("eevdf schedbe eevdf schedbe"), HZ (perf's rate; 499).
# Outputs in results/tmp/prof/: N-comm.txt, N-sym.txt, N-graph.txt (perf report),
# N/ (the bench's own output) for each run N = CONFIG-INDEX.
cd "$(dirname "$0")/../.." || exit 1
B=${BIN:-target/release/schedbe}; P=results/tmp/prof; i=0
mkdir -p "$P"
for c in ${ORDER:-eevdf schedbe eevdf schedbe}; do
  n=$c-$((++i))
  perf record -a -g -F "${HZ:-499}" -o "/tmp/$n.data" -- "$B" bench overhead --quick --reps 1 --configs "$c" \
    --workloads lc --lc-utils "${UTIL:-0.707}" --lc-secs 5 --no-plot --no-bpf-stats --out "$P/$n" --schedbe-bin "$B" \
    > "$P/$n.log" 2>&1
  echo "$n rc $?"
  perf report -i "/tmp/$n.data" --no-children --sort comm --stdio 2>/dev/null | grep -v -e "^#" -e "^$" | head -30 > "$P/$n-comm.txt"
  perf report -i "/tmp/$n.data" --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v -e "^#" -e "^$" | head -80 > "$P/$n-sym.txt"
  perf report -i "/tmp/$n.data" --no-children --sort sym --stdio -G 2>/dev/null | head -400 > "$P/$n-graph.txt"
  grep -h "mean_ms\|p99_ms" "$P/$n/summary.md" | head -4
done
