#!/bin/bash
# BPF CPU of schedbe at a steady LC load (`schedbe-bench lc-alone --util 0.67 --service fixed:5000 --bpf-stats`),
# schedbe builds alternated in one boot (docs/overhead.md). In the VM:
#   scripts/vm.sh --cpus 2 --mem 2G --timeout 1500 -- 'ORDER="old new" scripts/ab/bpf-at-issue-load.sh'
# Builds are results/tmp/ab/bin-NAME; BENCH (default: target/release/schedbe-bench) runs the
# bench, so only the scheduler varies. Env: ROUNDS ("1 2"), ORDER (names). Outputs results/tmp/bpfab-NAME-ROUND/;
# the figure is bench.json's runs[0].bpf_lc_phase.cpu_pct.
cd "$(dirname "$0")/../.."
R=results/tmp/ab
: "${ORDER:?ORDER: the builds to alternate}"
H=${BENCH:-target/release/schedbe-bench}
for i in ${ROUNDS:-1 2}; do for b in $ORDER; do
  "$H" lc-alone --configs schedbe --util 0.67 --service fixed:5000 --lc-alone-secs 20 --be-secs 20 \
    --reps 1 --no-plot --trace off --bpf-stats --schedbe-bin "$R/bin-$b" --out "results/tmp/bpfab-$b-$i" \
    > "results/tmp/bpfab-$b-$i.log" 2>&1
  echo "$b $i rc $?"
done; done
