#!/bin/bash
# The LC server alone under EEVDF and schedbe, alternately, with the guest's
# interrupt counts (/proc/interrupts) and the workers' CPU per unit of service
# around each run (docs/overhead.md, "2026-12-02 (second)"). Run in the VM, e.g.
#   scripts/vm.sh --icount --cpus 2 --mem 2G --timeout 1800 -- scripts/ab/lc-irqs.sh
# Env: BIN (schedbe binary; default target/release/schedbe), UTIL (offered load per
# CPU; 0.707), ORDER ("eevdf schedbe eevdf schedbe").
# Outputs in results/tmp/irqs/: N/ (the bench's own output), N-irqs.txt (the
# interrupt counts that changed, summed over CPUs) for each run N = CONFIG-INDEX.
cd "$(dirname "$0")/../.." || exit 1
B=${BIN:-target/release/schedbe}; P=results/tmp/irqs; i=0
mkdir -p "$P"
irqs() { awk 'NR > 1 { s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; print $1, s }' /proc/interrupts; }
for c in ${ORDER:-eevdf schedbe eevdf schedbe}; do
  n=$c-$((++i))
  irqs > "/tmp/$n.before"
  "$B" bench overhead --quick --reps 1 --configs "$c" --workloads lc --lc-utils "${UTIL:-0.707}" --lc-secs 5 \
    --no-plot --no-bpf-stats --out "$P/$n" --schedbe-bin "$B" > "$P/$n.log" 2>&1
  echo "$n rc $?"
  irqs > "/tmp/$n.after"
  join "/tmp/$n.before" "/tmp/$n.after" | awk '$3 != $2 { print $1, $3 - $2 }' > "$P/$n-irqs.txt"
  tr '\n' ' ' < "$P/$n-irqs.txt"; echo
  python3 scripts/lc_breakdown.py "$P/$n"/lc-*/raw/*/requests.csv | grep -E "total|worker cpu"
done
