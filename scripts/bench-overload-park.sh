#!/usr/bin/env bash
# Parking under LC overload (issue 4): LC demand at 100% of the CPUs for 60 s,
# schedbe with BE present (`schedbe-bench overload`, BE parked) against schedbe with no
# BE at all (`schedbe-bench lc-alone`), same arrivals (same seed, independent
# arrivals), interleaved, REPS repetitions in one boot. Compare the LC latency
# of the 60 s phase between the two (docs/results.md, "Overload and parking").
#
#   scripts/vm.sh --cpus 2 --timeout 1800 -- scripts/bench-overload-park.sh [REPS] [OUTDIR]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
reps=${1:-3} out=${2:-results/tmp/bench/overload-park}
bin=target/release/schedbe-bench
common=(--configs schedbe --util 1.0 --service fixed:5000 --lc-alone-secs 5 --be-secs 60
        --reps 1 --independent-arrivals --drain-timeout 300 --no-plot)
for ((r = 1; r <= reps; r++)); do
    "$bin" lc-alone "${common[@]}" --seed "$r" --out "$out/alone-r$r"
    "$bin" overload "${common[@]}" --tail-secs 15 --seed "$r" --out "$out/be-r$r"
done
/usr/bin/python3 - "$out" "$reps" <<'PY'
import json, statistics as st, sys
out, reps = sys.argv[1], int(sys.argv[2])
rows, rm, rp = [], [], []
for r in range(1, reps + 1):
    a = json.load(open(f"{out}/alone-r{r}/bench.json"))["aggregates"][0]
    b = json.load(open(f"{out}/be-r{r}/bench.json"))["aggregates"][0]
    ma, mb = a["mean_after_ms"]["median"], b["mean_after_ms"]["median"]
    pa, pb = a["p99_after_ms"]["median"], b["p99_after_ms"]["median"]
    rm.append(mb / ma); rp.append(pb / pa)
    rows.append(f"| {r} | {ma:.0f} | {mb:.0f} | {mb / ma:.3f} | {pa:.0f} | {pb:.0f} | {pb / pa:.3f} | {b['be_iters_per_s']['median']:.1f} |")
print("| rep | LC mean, no BE (ms) | LC mean, BE parked (ms) | ratio | p99, no BE | p99, BE parked | ratio | BE it/s during LC |")
print("|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
print(f"\nmean ratio median {st.median(rm):.3f} [{min(rm):.3f}-{max(rm):.3f}], "
      f"p99 ratio median {st.median(rp):.3f} [{min(rp):.3f}-{max(rp):.3f}]")
PY
