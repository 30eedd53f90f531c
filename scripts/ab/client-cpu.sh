#!/bin/bash
# The LC client's own CPU time (its rusage, user and system) next to the
# server's and the whole machine's, at one load, EEVDF and schedbe alternated
# (docs/overhead.md, "2026-12-02 (fourth)"). `bench lc-server` and `bench
# client` are run directly, with `schedbe run` loaded for the schedbe runs. In the VM:
#   scripts/vm.sh --icount --cpus 2 --mem 2G --timeout 1400 -- scripts/ab/client-cpu.sh
# Env: BIN (default target/release/schedbe), UTIL (offered load per CPU; 0.72),
# ORDER ("eevdf schedbe eevdf schedbe"). Outputs in results/tmp/clientcpu/.
cd "$(dirname "$0")/../.." || exit 1
B=${BIN:-target/release/schedbe}; P=results/tmp/clientcpu; i=0
mkdir -p "$P"
[[ $(id -u) == 0 ]] || { echo "client-cpu.sh: needs root (loads schedbe)" >&2; exit 1; }
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
for c in ${ORDER:-eevdf schedbe eevdf schedbe}; do
  i=$((i + 1)); n=$c-$i; sp=
  if [ "$c" = schedbe ]; then
    "$B" run > "$P/$n-sched.log" 2>&1 & sp=$!
    for _ in $(seq 200); do [ "$(cat /sys/kernel/sched_ext/state)" = enabled ] && break; sleep 0.3; done
    [ "$(cat /sys/kernel/sched_ext/state)" = enabled ] || { echo "$n: schedbe did not load" >&2; kill "$sp"; exit 1; }
  fi
  "$B" bench lc-server --listen "unix:@client-cpu-$i" > "$P/$n-server.log" 2>&1 & srv=$!
  sleep 4   # its spin calibration
  s0=$(ticks $srv); st0=$(head -1 /proc/stat)
  /usr/bin/time -f "client user %U s, sys %S s, wall %e s" -o "$P/$n-time.txt" "$B" bench client \
    --connect "unix:@client-cpu-$i" --util "${UTIL:-0.72}" --duration 10 --service fixed:2000 --server-cpus 2 \
    > "$P/$n-client.log" 2>&1
  s1=$(ticks $srv); st1=$(head -1 /proc/stat)
  kill "$srv"; wait "$srv" 2>/dev/null
  [ -n "$sp" ] && { kill -INT "$sp"; wait "$sp"; }
  # /proc/stat's cpu line: user is field 2, system field 4 (USER_HZ ticks, all CPUs)
  echo "$n: $(cat "$P/$n-time.txt"); server $((s1 - s0)) ticks; machine user+sys" \
    "$(echo "$st0 $st1" | awk '{ print ($13 + $15) - ($2 + $4) }') ticks"
done
