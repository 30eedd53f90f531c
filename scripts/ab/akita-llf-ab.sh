#!/bin/bash
# One boot, two builds: Akita's HI share (schedbe-bench akita-share, 3 repetitions)
# and LLF at load 1.2 (schedbe-bench serverless, seeds 1 and 2), before and after
# 8e47319/4effc10 (docs/results-akita.md, docs/results-serverless.md).
# The binaries are copies made beforehand, so nothing rebuilds them mid-run:
#   results/tmp/ab/bin-ca8ec  a build of ca8ec66 (LLF and Akita code as before)
#   results/tmp/ab/bin-fix    a build of 4effc10
# One harness, BENCH (target/release/schedbe-bench), runs both.
# Run: scripts/vm.sh --cpus 2 --mem 2G --timeout 3000 -- scripts/ab/akita-llf-ab.sh
cd "$(dirname "$0")/../.." || exit 1
A=results/tmp/ab H=${BENCH:-target/release/schedbe-bench}
for b in fix ca8ec; do
  $H akita-share --reps 3 --out results/tmp/bench/akita-share-$b --schedbe-bin $A/bin-$b --no-plot || echo "akita-share $b failed"
done
for seed in 1 2; do
  for b in ca8ec fix; do
    $H serverless --configs llf --utils 1.2 --reps 1 --seed $seed --schedbe-bin $A/bin-$b --out results/tmp/sls-ab/$b-s$seed --no-plot || echo "serverless $b $seed failed"
  done
done
