#!/bin/bash
# A/B of schedbe builds or options in one boot, for `schedbe-bench overhead` (docs/overhead.md).
# Run in the VM, e.g.
#   scripts/vm.sh --cpus 2 --mem 2G --timeout 3600 -- \
#     'ROUNDS=4 VARIANTS="old new p0:--lc-preempt-us=0" CT=--lc-capacity scripts/ab/overhead-ab.sh'
# Each variant is NAME or NAME:ARG,ARG (ARGs passed to `schedbe run` through --schedbe-arg).
# NAME's binary is results/tmp/ab/bin-NAME (copy builds there first), else results/tmp/ab/cur;
# one harness, BENCH (target/release/schedbe-bench), runs them all.
# Every invocation runs eevdf and schedbe, the variants alternating round by round.
# Env: ROUNDS (3), REPS (1), WL (lc), LCU (0.6,0.85), LCS (5), TAG (o4), CT (extra bench
# options for all), CT_<NAME> (extra bench options for one variant).
# Outputs: results/tmp/ab/TAG-NAME-ROUND/ and TAG-l-NAME-ROUND.txt; summarise with
#   python3 scripts/ab/summary.py TAG NAME...
cd "$(dirname "$0")/../.."
R=results/tmp/ab H=${BENCH:-target/release/schedbe-bench}
for r in $(seq 1 "${ROUNDS:-3}"); do
  for v in $VARIANTS; do
    name=${v%%:*}; args=${v#*:}; extra=()
    [ "$args" != "$v" ] && for a in ${args//,/ }; do extra+=("--schedbe-arg=$a"); done
    bin=$R/bin-$name; [ -x "$bin" ] || bin=$R/cur
    vct=CT_$name; vct=${!vct}
    # shellcheck disable=SC2086  # CT and CT_<NAME> are option lists
    "$H" overhead --quick --reps "${REPS:-1}" --configs eevdf,schedbe --workloads "${WL:-lc}" \
      --lc-utils "${LCU:-0.6,0.85}" --lc-secs "${LCS:-5}" --cyclictest-secs 8 $CT $vct --no-plot \
      --out "$R/${TAG:-o4}-$name-$r" --schedbe-bin "$bin" "${extra[@]}" > "$R/${TAG:-o4}-l-$name-$r.txt" 2>&1
    echo "$name $r rc $?"
  done
done
