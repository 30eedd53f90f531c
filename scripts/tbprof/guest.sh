#!/bin/bash
# In the guest, for scripts/tbprof/run.sh: run CMD, saving /proc/kallsyms at
# once (the kernel's symbols: enough for a run without a sched_ext scheduler,
# e.g. EEVDF's side of scripts/tbprof/syms.py) and again once a sched_ext
# scheduler is loaded (with the JITed BPF programs' addresses, which exist
# only while they are loaded).
#   scripts/tbprof/guest.sh KALLSYMS_OUT -- CMD...
set -u
out=${1:?usage: guest.sh KALLSYMS_OUT -- CMD...}; shift
[[ ${1:-} == -- ]] && shift
sysctl -q net.core.bpf_jit_kallsyms=1 kernel.kptr_restrict=0 || { echo "guest.sh: cannot expose BPF symbols" >&2; exit 2; }
cat /proc/kallsyms > "$out.tmp" && mv "$out.tmp" "$out"
(
    for _ in $(seq 1 300); do
        sleep 2
        if [[ -s /sys/kernel/sched_ext/root/ops ]]; then
            sleep 3    # the scheduler's programs are all attached by then
            cat /proc/kallsyms > "$out.tmp" && mv "$out.tmp" "$out"
            exit 0
        fi
    done
) &
watcher=$!
"$@"
rc=$?
# a scheduler loaded by CMD has been saved by now (or CMD ran none)
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
exit $rc
