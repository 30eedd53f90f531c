#!/bin/bash
# The LC server alone under EEVDF and schedbe, alternately, one `schedbe-bench overhead`
# run each, with something recorded around every run (docs/overhead.md,
# "2026-12-02 (second)"). Run in the VM, e.g.
#   scripts/vm.sh --icount --cpus 2 --mem 2G --timeout 1800 -- 'WITH=irqs scripts/ab/lc-runs.sh'
# WITH=perf: each run inside `perf record -a -g -F HZ`; N-comm.txt, N-sym.txt and
#   N-graph.txt are its reports.
# WITH=irqs: the guest's interrupt counts (/proc/interrupts, summed over CPUs)
#   that changed over the run, in N-irqs.txt, and the client's per-request breakdown.
# Env: BIN (schedbe binary; default target/release/schedbe), BENCH (the harness;
# default target/release/schedbe-bench), UTIL (offered load per
# CPU; 0.707), ORDER ("eevdf schedbe eevdf schedbe"), HZ (perf's rate; 499).
# Outputs in results/tmp/lc-runs/: N/ (the bench's own output) and the files above,
# for each run N = CONFIG-INDEX.
cd "$(dirname "$0")/../.." || exit 1
case ${WITH:-} in perf|irqs) ;; *) echo "lc-runs.sh: set WITH=perf or WITH=irqs" >&2; exit 2 ;; esac
B=${BIN:-target/release/schedbe}; H=${BENCH:-target/release/schedbe-bench}; P=results/tmp/lc-runs; i=0
mkdir -p "$P"
irqs() { awk 'NR > 1 { s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; print $1, s }' /proc/interrupts; }
for c in ${ORDER:-eevdf schedbe eevdf schedbe}; do
  n=$c-$((++i))
  run=("$H" overhead --quick --reps 1 --configs "$c" --workloads lc --lc-utils "${UTIL:-0.707}" --lc-secs 5
       --no-plot --no-bpf-stats --out "$P/$n" --schedbe-bin "$B")
  if [ "$WITH" = perf ]; then
    perf record -a -g -F "${HZ:-499}" -o "/tmp/$n.data" -- "${run[@]}" > "$P/$n.log" 2>&1
    echo "$n rc $?"
    perf report -i "/tmp/$n.data" --no-children --sort comm --stdio 2>/dev/null | grep -v -e "^#" -e "^$" | head -30 > "$P/$n-comm.txt"
    perf report -i "/tmp/$n.data" --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v -e "^#" -e "^$" | head -80 > "$P/$n-sym.txt"
    perf report -i "/tmp/$n.data" --no-children --sort sym --stdio -G 2>/dev/null | head -400 > "$P/$n-graph.txt"
  else
    irqs > "/tmp/$n.before"
    "${run[@]}" > "$P/$n.log" 2>&1
    echo "$n rc $?"
    irqs > "/tmp/$n.after"
    join "/tmp/$n.before" "/tmp/$n.after" | awk '$3 != $2 { print $1, $3 - $2 }' > "$P/$n-irqs.txt"
    tr '\n' ' ' < "$P/$n-irqs.txt"; echo
    python3 scripts/lc_breakdown.py "$P/$n"/lc-*/raw/*/requests.csv | grep -E "total|worker cpu"
  fi
  grep -h "mean_ms\|p99_ms" "$P/$n/summary.md" | head -4
done
