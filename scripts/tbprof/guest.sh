#!/bin/bash
# In the guest, for scripts/tbprof/run.sh: run CMD and, while a sched_ext
# scheduler is loaded, save /proc/kallsyms once (with the JITed BPF programs'
# addresses, which exist only while they are loaded).
#   scripts/tbprof/guest.sh KALLSYMS_OUT -- CMD...
set -u
out=${1:?usage: guest.sh KALLSYMS_OUT -- CMD...}; shift
[[ ${1:-} == -- ]] && shift
sysctl -q net.core.bpf_jit_kallsyms=1 kernel.kptr_restrict=0 || { echo "guest.sh: cannot expose BPF symbols" >&2; exit 2; }
(
    for _ in $(seq 1 300); do
        sleep 2
        if [[ -s /sys/kernel/sched_ext/root/ops ]]; then
            sleep 3    # the scheduler's programs are all attached by then
            cat /proc/kallsyms > "$out.tmp" && mv "$out.tmp" "$out"
            exit 0
        fi
    done
    echo "guest.sh: no sched_ext scheduler was loaded within 10 min" >&2
) &
"$@"
rc=$?
wait
exit $rc
