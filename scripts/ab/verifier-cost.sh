#!/bin/bash
# What loading each policy costs: the kernel verifier's work per BPF program
# (SCHEDBE_VERIFIER_STATS=1, crates/schedbe/src/verifier_stats.rs) and the
# wall time from `schedbe run` to sched_ext enabled, ROUNDS times per policy.
# The binary is run from a copy in /tmp: in the VM the project is on a 9p
# share, from which exec and page faults cost seconds (docs/testing.md).
# Run: scripts/vm.sh --cpus 4 --mem 2G --timeout 900 -- scripts/ab/verifier-cost.sh
cd "$(dirname "$0")/../.." || exit 1
bin=/tmp/schedbe-verifier-cost
cp "${SCHEDBE_BIN:-target/release/schedbe}" "$bin" || exit 1
out=results/tmp/ab/verifier-cost
mkdir -p "$out"
state() { cat /sys/kernel/sched_ext/state; }
# sched-be twice: concurrency mode loads other code (its rodata switch)
for policy in ${POLICIES:-sched-be sched-be:concurrency llf akita}; do
  args=(run --policy "${policy%%:*}")
  [ "$policy" = akita ] && args+=(--vms examples/akita/vms.toml)
  [ "$policy" = sched-be:concurrency ] && args+=(--limit-mode concurrency)
  for r in $(seq 1 "${ROUNDS:-2}"); do
    t0=$(date +%s.%N)
    SCHEDBE_VERIFIER_STATS=1 "$bin" "${args[@]}" > "$out/${policy/:/-}-$r.log" 2>&1 & pid=$!
    until [ "$(state)" = enabled ]; do
      kill -0 $pid 2>/dev/null || { echo "$policy: schedbe run exited: $(grep -m1 "schedbe: error" "$out/${policy/:/-}-$r.log")"; continue 3; }
      sleep 0.05
    done
    t1=$(date +%s.%N)
    kill -INT $pid; wait $pid
    until [ "$(state)" = disabled ]; do sleep 0.05; done
    /usr/bin/python3 - "$out/${policy/:/-}-$r.log" "$policy" "$(echo "$t1 - $t0" | bc)" <<'PY'
import re, sys
progs, prog, usec = [], None, None
for line in open(sys.argv[1], errors="replace"):
    if (m := re.search(r"prog '(\w+)': -- BEGIN", line)):
        prog, usec = m.group(1), None
    elif (m := re.search(r"verification time (\d+) usec", line)):
        usec = int(m.group(1))
    elif (m := re.match(r"processed (\d+) insns", line)) and prog:
        progs.append((usec or 0, int(m.group(1)), prog))
top = ", ".join(f"{p} {n} insns {u / 1e6:.2f}s" for u, n, p in sorted(progs, reverse=True)[:3])
print(f"{sys.argv[2]}: enabled after {float(sys.argv[3]):.2f}s; verifier {sum(u for u, _, _ in progs) / 1e6:.2f}s, "
      f"{sum(n for _, n, _ in progs)} insns processed over {len(progs)} programs; most: {top}")
PY
  done
done
rm -f "$bin"
