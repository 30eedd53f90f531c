#!/usr/bin/env bash
# Run a command in a virtme-ng guest booted with the cached sched_ext kernel.
#
#   scripts/vm.sh [--cpus N] [--mem SIZE] [--timeout SECS] [--rwdir DIR]...
#                 [--allow-console REGEX] [--icount] [--prompt-timers] -- CMD [ARGS...]
#   scripts/vm.sh --shell [--cpus N] [--mem SIZE]     (interactive guest shell)
#
# CMD with ARGS is executed as an argument vector; a single CMD argument is a shell
# command line (`scripts/vm.sh -- 'make foo && ./bar'`). The guest shares the host's
# root file system read-only (writes to /etc, /usr, /var, /tmp, /home, /opt stay in
# the guest), runs as root in the current directory, and can write to
# results/tmp/ of this project plus any --rwdir.
#
# --icount: the guest's clock counts instructions (QEMU -icount shift=0,sleep=off):
# 1 ns of guest time per guest instruction, idle time skipped, vCPUs run one at a
# time. A timing is then an instruction count: repeatable from run to run and
# untouched by the host's load, so small differences in cost show. It models no
# parallelism (N busy vCPUs share one timeline, each at 1/N speed) and every
# instruction costs the same, cache misses and atomics included: a cost measure,
# not a latency one (docs/overhead-log-5.md, "2026-11-29: the instruction clock"). Sets
# SCHEDBE_VM_ICOUNT=1 in the guest (benchmarks note it in their reports).
#
# --prompt-timers: QEMU's main-loop thread, which raises the guest's timer interrupts
# under TCG, runs SCHED_FIFO (priority 1, reset on fork) on the host once the vCPU
# threads exist, so a timer fires on time even when every vCPU thread is busy on a
# host core. Without it the main loop waits behind busy vCPU threads in the host's
# scheduler (up to a slice, milliseconds), and a guest timer's lateness grows with how
# busy the guest keeps its CPUs, which costs a real machine's timers nothing
# (docs/overhead-log-9.md, "2026-12-06"). Host root only. Once it is in force, the file
# $SCHEDBE_VM_RUN/prompt-timers exists in the guest (benchmarks note it in their
# reports); until then, and if it fails, it does not.
#
# Exit status: CMD's. When the guest console shows a kernel error (BUG:, WARNING:,
# Oops, a panic, "runnable task stall", a sched_ext error exit; patterns in
# scripts/console-errors.ere, clocksource watchdog noise excepted) the run fails
# (status 1 if CMD succeeded) and the offending lines are printed with the console
# log's path. A guest that never reports CMD's status (crash, hang) fails too, with
# 124 on timeout. When the first kernel error is "Oops: int3" (the x86 kernel's
# text-patching race, an upstream bug that static-key flips under load can hit;
# docs/testing.md), or the guest died or hung before it started CMD, the status is
# 75 (EX_TEMPFAIL), so a caller may boot again.
#
# CMD's stdout and stderr come through live on vm.sh's stdout and stderr. The guest
# console, vm.sh's own record and CMD's output are kept under
# results/tmp/vm/<run>/ (the last 20 runs are kept).
#
# Environment:
#   SCHEDBE_VM_KVM=1     use KVM instead of software emulation (TCG); nested KVM is
#                        broken on the dev/CI machines, so TCG is the default.
#   SCHEDBE_VM_NATIVE=1  run CMD natively (default when the host kernel itself has
#                        sched_ext, i.e. /sys/kernel/sched_ext exists);
#                        SCHEDBE_VM_NATIVE=0 forces the VM. Natively, new kernel log
#                        lines (dmesg) are checked instead of the console.
#   SCHEDBE_VM_UDEV=1    let the guest run udev (slower boot; only needed for an
#                        interactive console). By default udevd is hidden from the
#                        guest in a private mount namespace, which saves ~10 s a boot.
#   SCHEDBE_KERNEL_SERIES=6.12  boot the newest cached or fetchable kernel of that
#                        series instead of the default (newest) one.
#   SCHEDBE_VM_BOOT_TIMEOUT=SECS  a guest that has not started CMD after this long
#                        (default 240; boots take 8-20 s under TCG) is stopped and
#                        the status is 75. Under TCG the kernel has hung in early
#                        boot (after "HugeTLB: registered", before ACPI), in about
#                        1 boot of 20 on the dev machine and in CI, where it
#                        otherwise held the whole --timeout.
#   SCHEDBE_VM_LOCK=FILE hold an exclusive flock on FILE for the guest's lifetime, so
#                        guests started by several people or jobs on one small host
#                        run one at a time instead of distorting each other's timing.
#   SCHEDBE_VM_QEMU_OPTS=OPTS  extra QEMU options (vng --qemu-opts).
#   SCHEDBE_*, RUST_BACKTRACE, RUST_LOG, PATH are passed into the guest.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROG=vm.sh
die() { printf '%s: %s\n' "$PROG" "$*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

cpus=4 mem=2G timeout=1800 allow= rwdirs=() shell=0
while (($#)); do
    case $1 in
        --cpus) cpus=${2:?}; shift 2 ;;
        --cpus=*) cpus=${1#*=}; shift ;;
        --mem|--memory) mem=${2:?}; shift 2 ;;
        --mem=*|--memory=*) mem=${1#*=}; shift ;;
        --timeout) timeout=${2:?}; shift 2 ;;
        --timeout=*) timeout=${1#*=}; shift ;;
        --rwdir) rwdirs+=("$(realpath -m "${2:?}")"); shift 2 ;;
        --rwdir=*) rwdirs+=("$(realpath -m "${1#*=}")"); shift ;;
        --allow-console) allow=${2:?}; shift 2 ;;
        --allow-console=*) allow=${1#*=}; shift ;;
        --shell) shell=1; shift ;;
        --icount) export SCHEDBE_VM_ICOUNT=1; shift ;;
        --prompt-timers) export SCHEDBE_VM_PROMPT_TIMERS=1; shift ;;
        -h|--help) usage ;;
        --) shift; break ;;
        *) break ;;
    esac
done
(($#)) || ((shell)) || usage
[[ $cpus =~ ^[0-9]+$ && $timeout =~ ^[0-9]+$ ]] || die "--cpus and --timeout take numbers"
# --icount's QEMU options, for the guest and the interactive shell alike
icount_opts=
if [[ ${SCHEDBE_VM_ICOUNT:-0} == 1 ]]; then
    [[ ${SCHEDBE_VM_KVM:-0} == 1 ]] && die "--icount needs software emulation (TCG), not KVM"
    icount_opts="-icount shift=0,sleep=off"
fi
prompt_timers=0
if [[ ${SCHEDBE_VM_PROMPT_TIMERS:-0} == 1 ]]; then
    [[ ${SCHEDBE_VM_KVM:-0} == 1 ]] && die "--prompt-timers is for software emulation (TCG), not KVM"
    [[ ${SCHEDBE_VM_ICOUNT:-0} == 1 ]] && die "--prompt-timers and --icount do not mix (icount's clock is the instruction count)"
    (($(id -u) == 0)) || die "--prompt-timers needs root on the host (SCHED_FIFO for QEMU's main loop)"
    command -v chrt >/dev/null || die "--prompt-timers needs chrt (util-linux)"
    prompt_timers=1
fi
boot_timeout=${SCHEDBE_VM_BOOT_TIMEOUT:-240}
[[ $boot_timeout =~ ^[0-9]+$ ]] || die "SCHEDBE_VM_BOOT_TIMEOUT takes a number of seconds"

if [[ -n ${SCHEDBE_VM_LOCK:-} ]]; then
    exec 9>>"$SCHEDBE_VM_LOCK" || die "cannot open lock file $SCHEDBE_VM_LOCK"
    if ! flock -n 9; then
        echo "$PROG: waiting for $SCHEDBE_VM_LOCK (another guest is running)" >&2
        flock 9
    fi
fi

# The command as a shell line for the guest script.
cmdline=
if (($# == 1)); then cmdline=$1; elif (($#)); then cmdline=$(printf '%q ' "$@"); fi

RESULTS=$ROOT/results/tmp
RUNS=$RESULTS/vm
mkdir -p "$RUNS"
run=$RUNS/$(date +%Y%m%d-%H%M%S).$$
mkdir -p "$run"
# keep the last 20 runs
ls -1d "$RUNS"/*/ 2>/dev/null | sort | head -n -20 | xargs -r rm -rf

scan_log() { # $1 = log file; prints offending lines ("N: text"), most relevant first
    local pats=$ROOT/scripts/console-errors.ere ign=$ROOT/scripts/console-ignore.ere
    tr -d '\r' <"$1" | grep -naE -f "$pats" | grep -vE -f "$ign" \
        | { if [[ -n $allow ]]; then grep -vE -- "$allow"; else cat; fi; } | head -n 20 || true
}
report_console() { # $1 = log file, $2 = offending lines; names the test running then
    local first
    printf '%s: FAIL: the kernel log shows errors (full log: %s):\n' "$PROG" "$1" >&2
    printf '%s\n' "$2" | sed 's/^/    /' >&2
    first=${2%%:*}
    # tests write "schedbe-test: BEGIN <name>" into the kernel log
    local marker
    marker=$(head -n "$first" "$1" | tr -d '\r' | grep -aoE 'schedbe-test: BEGIN .*' | tail -n 1 || true)
    [[ -n $marker ]] && printf '%s: the first error came during: %s\n' "$PROG" "${marker#schedbe-test: BEGIN }" >&2
    return 0
}

# ---------------------------------------------------------------- native mode
native=${SCHEDBE_VM_NATIVE:-auto}
if [[ $native == auto ]]; then
    [[ -d /sys/kernel/sched_ext ]] && native=1 || native=0
fi
if [[ $native == 1 ]]; then
    [[ -d /sys/kernel/sched_ext ]] || die "SCHEDBE_VM_NATIVE=1 but this kernel has no sched_ext"
    [[ ${SCHEDBE_VM_ICOUNT:-0} == 1 ]] && die "--icount counts a guest's instructions: run in the VM (SCHEDBE_VM_NATIVE=0)"
    printf '%s: host kernel has sched_ext: running natively\n' "$PROG" >&2
    ((prompt_timers)) && printf '%s: --prompt-timers: nothing to do natively (no emulated timers)\n' "$PROG" >&2
    ((shell)) && exec "${SHELL:-/bin/bash}"
    before=$(dmesg 2>/dev/null | wc -l) || before=
    export SCHEDBE_VM_RUN=$run SCHEDBE_IN_VM=0
    rc=0
    timeout -k 15 "$timeout" bash -c "$cmdline" || rc=$?
    ((rc == 124)) && printf '%s: FAIL: timed out after %ss\n' "$PROG" "$timeout" >&2
    if [[ -n $before ]]; then
        dmesg | tail -n +"$((before + 1))" >"$run/dmesg.log" || true
        errs=$(scan_log "$run/dmesg.log")
        if [[ -n $errs ]]; then report_console "$run/dmesg.log" "$errs"; ((rc)) || rc=1; fi
    else
        printf '%s: cannot read dmesg; kernel log not checked\n' "$PROG" >&2
    fi
    exit "$rc"
fi

# ---------------------------------------------------------------- the guest
VENV=/opt/schedbe-venv
export PATH=$VENV/bin:$PATH
command -v vng >/dev/null && command -v qemu-system-x86_64 >/dev/null \
    || die "virtme-ng or qemu missing: run 'sudo scripts/setup.sh' (or make setup)"

K=$ROOT/.cache/kernel/current
if [[ -n ${SCHEDBE_KERNEL_SERIES:-} ]]; then
    K=$("$ROOT/scripts/fetch-kernel.sh") || die "cannot fetch a $SCHEDBE_KERNEL_SERIES sched_ext kernel"
elif [[ ! -e $K/vmlinuz || ! -s $K/release ]]; then
    printf '%s: no cached kernel, fetching one\n' "$PROG" >&2
    K=$("$ROOT/scripts/fetch-kernel.sh") || die "cannot fetch a sched_ext kernel"
fi
K=$(readlink -f "$K")
REL=$(cat "$K/release")
# libbpf reads the running kernel's config from /boot/config-<release>; the guest
# sees the host's /boot.
if ! cmp -s "$K/config" "/boot/config-$REL" 2>/dev/null; then
    if [[ -w /boot ]]; then cp "$K/config" "/boot/config-$REL"
    else printf '%s: warning: cannot write /boot/config-%s (not root?); libbpf may fail in the guest\n' "$PROG" "$REL" >&2
    fi
fi

if ((shell)); then
    [[ -t 0 ]] || die "--shell needs a terminal"
    args=(-r "$K/vmlinuz" --cpus "$cpus" -m "$mem" --rwdir "$RESULTS")
    [[ ${SCHEDBE_VM_KVM:-0} == 1 ]] || args+=(--disable-kvm)
    [[ -n $icount_opts ]] && args+=(--qemu-opts="$icount_opts")
    exec vng "${args[@]}"
fi

# The pid of the guest's QEMU among the descendants of process $1, breadth first:
# a qemu-system process with vng's `-name virtme-ng`, not a probe vng runs first
# (qemu-system-x86_64 --version...). Fails when there is none (yet).
guest_qemu_under() {
    local pids=$1 p
    while [[ -n $pids ]]; do
        # (pgrep fails on a childless process)
        pids=$(for p in $pids; do pgrep -P "$p" || true; done 2>/dev/null | tr '\n' ' ')
        for p in $pids; do
            [[ $(cat "/proc/$p/comm" 2>/dev/null) == qemu-system* ]] || continue
            tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- '-name virtme-ng' && { echo "$p"; return 0; }
        done
    done
    return 1
}

# --prompt-timers: find the QEMU process under $1, wait for its $2 vCPU threads, then
# make its main thread (tid == pid: the main loop, which fires the emulated timers)
# SCHED_FIFO 1 and write file $3. Not before: threads inherit the policy of the thread that creates
# them, and the vCPU threads must stay SCHED_OTHER. --reset-on-fork keeps the
# threads it creates later (9p's worker pool) SCHED_OTHER too.
prompt_timers_when_up() {
    local root=$1 want=$2 flag=$3 q= n i
    for ((i = 0; i < 1200; i++)); do
        kill -0 "$root" 2>/dev/null || return 0
        [[ -z $q ]] && { q=$(guest_qemu_under "$root") || q=; }
        # a QEMU that has gone (it failed to start) is looked for again
        [[ -n $q && ! -d /proc/$q ]] && q=
        if [[ -n $q ]]; then
            n=$(grep -lE '^CPU [0-9]+/(TCG|KVM)$' /proc/"$q"/task/*/comm 2>/dev/null | wc -l || true)
            if ((n >= want)); then
                if chrt --reset-on-fork -f -p 1 "$q"; then
                    echo "QEMU pid $q main loop SCHED_FIFO 1" >"$flag"
                    printf '%s: --prompt-timers: QEMU (pid %s) main loop SCHED_FIFO 1, after its %s vCPU threads started\n' "$PROG" "$q" "$n" >&2
                else
                    printf '%s: warning: --prompt-timers: chrt failed on QEMU pid %s\n' "$PROG" "$q" >&2
                fi
                return 0
            fi
        fi
        sleep 0.1
    done
    printf '%s: warning: --prompt-timers: QEMU or its vCPU threads not found in 120 s\n' "$PROG" >&2
}

# What the guest writes to its console as it starts CMD: the boot watchdog and
# the boot-failure check below look for it.
start_marker='schedbe-vm: starting the command'

# The guest script: runs CMD with output into files of the shared run directory
# (streamed to the host below) and records CMD's exit status there. This does not
# depend on virtme's virtio-serial ports, which need udev in the guest.
{
    echo '#!/bin/bash'
    echo "# generated by scripts/vm.sh"
    for v in PATH LANG LC_ALL TERM RUST_BACKTRACE RUST_LOG $(compgen -e | grep '^SCHEDBE_' || true); do
        [[ -n ${!v+x} ]] && printf 'export %s=%q\n' "$v" "${!v}"
    done
    printf 'export SCHEDBE_IN_VM=1 SCHEDBE_VM_RUN=%q PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1\n' "$run"
    printf 'cd %q || exit 1\n' "$PWD"
    printf 'exec </dev/null >>%q 2>>%q\n' "$run/stdout" "$run/stderr"
    printf 'echo %q >/dev/kmsg 2>/dev/null\n' "$start_marker"
    printf '(\n%s\n)\n' "$cmdline"
    echo 'rc=$?'
    echo 'echo "schedbe-vm: the command exited with $rc" >/dev/kmsg 2>/dev/null'
    printf 'echo $rc >%q.tmp && mv %q.tmp %q\n' "$run/status" "$run/status" "$run/status"
    echo 'sync'
} >"$run/guest.sh"
chmod +x "$run/guest.sh"
: >"$run/stdout"; : >"$run/stderr"

vng_args=(-v --force-9p -r "$K/vmlinuz" --cpus "$cpus" -m "$mem" --rwdir "$RESULTS")
[[ ${SCHEDBE_VM_KVM:-0} == 1 ]] || vng_args+=(--disable-kvm)
qemu_opts="${SCHEDBE_VM_QEMU_OPTS:-} $icount_opts"
# --prompt-timers tells the vCPU threads by name ("CPU 0/TCG")
((prompt_timers)) && qemu_opts+=" -name virtme-ng,debug-threads=on"
[[ -n ${qemu_opts// } ]] && vng_args+=(--qemu-opts="$qemu_opts")
for d in "${rwdirs[@]}"; do
    [[ $d == "$RESULTS" || $d == "$RESULTS"/* ]] && continue
    mkdir -p "$d"; vng_args+=(--rwdir "$d")
done

launcher=()
if [[ ${SCHEDBE_VM_UDEV:-0} != 1 && $(id -u) == 0 ]] && command -v unshare >/dev/null; then
    # Hide systemd-udevd from the guest: a tmpfs over /usr/lib/systemd (and
    # /lib/systemd when that is a separate directory) in a private mount namespace.
    # virtme-ng-init then skips udev (~10 s of boot under TCG).
    launcher=(unshare -m --propagation private sh -c '
        for d in /usr/lib/systemd /lib/systemd; do
            [ -e "$d/systemd-udevd" ] && mount -t tmpfs -o size=64k,mode=755 schedbe-noudev "$d"
        done
        exec "$@"' sh)
fi

printf '%s: booting %s (%s vCPUs, %s, %s), run dir %s\n' "$PROG" "$REL" "$cpus" "$mem" \
    "$([[ ${SCHEDBE_VM_KVM:-0} == 1 ]] && echo KVM || echo TCG)$([[ ${SCHEDBE_VM_ICOUNT:-0} == 1 ]] && echo ', icount')" \
    "${run#"$ROOT"/}" >&2
start=$(date +%s)
"${launcher[@]}" timeout -k 20 "$timeout" vng "${vng_args[@]}" -- "bash $run/guest.sh" \
    >"$run/console.log" 2>&1 </dev/null &
vpid=$!
trap 'kill -TERM $vpid 2>/dev/null; wait $vpid 2>/dev/null; exit 130' INT TERM
((prompt_timers)) && prompt_timers_when_up "$vpid" "$cpus" "$run/prompt-timers" &
tail --pid=$vpid -s 0.2 -n +1 -f "$run/stdout" &
t1=$!
tail --pid=$vpid -s 0.2 -n +1 -f "$run/stderr" >&2 &
t2=$!
# Boot watchdog: the guest writes its marker to the console as it starts CMD.
boot_hung=0
while kill -0 $vpid 2>/dev/null; do
    grep -aqF "$start_marker" "$run/console.log" && break
    if (($(date +%s) - start >= boot_timeout)); then
        boot_hung=1
        printf '%s: FAIL: the guest has not started the command after %ss (boot hang); console tail (%s):\n' \
            "$PROG" "$boot_timeout" "$run/console.log" >&2
        tail -n 5 "$run/console.log" | tr -d '\r' | sed 's/^/    /' >&2
        # timeout(1) passes TERM on to vng. Its QEMU is found first, while it is
        # still a descendant (its command line does not name the guest script:
        # vng encodes the command), and killed should it outlive vng.
        qemu=$(guest_qemu_under "$vpid") || qemu=
        kill -TERM $vpid 2>/dev/null || true
        for _ in $(seq 30); do kill -0 $vpid 2>/dev/null || break; sleep 1; done
        if [[ -n $qemu && $(cat "/proc/$qemu/comm" 2>/dev/null) == qemu-system* ]]; then
            printf '%s: QEMU (pid %s) outlived vng; killing it\n' "$PROG" "$qemu" >&2
            kill -KILL "$qemu" 2>/dev/null || true
        fi
        break
    fi
    sleep 1
done
vrc=0
wait $vpid || vrc=$?
wait $t1 $t2 2>/dev/null || true
trap - INT TERM
elapsed=$(($(date +%s) - start))

if ((boot_hung)); then
    printf '%s: the guest never started the command (boot hang); exit 75 (temporary)\n' "$PROG" >&2
    rc=75
elif [[ -s $run/status ]]; then
    rc=$(cat "$run/status")
elif ((vrc == 124 || vrc == 137)); then
    printf '%s: FAIL: timed out after %ss (console: %s)\n' "$PROG" "$timeout" "$run/console.log" >&2
    rc=124
else
    printf '%s: FAIL: the guest stopped without reporting the command'"'"'s status (vng exit %s); console tail (%s):\n' \
        "$PROG" "$vrc" "$run/console.log" >&2
    tail -n 25 "$run/console.log" | tr -d '\r' | sed 's/^/    /' >&2
    rc=1
    # QEMU itself has died during boot without a word (seen once in CI): the guest
    # never got to start CMD, so nothing of ours ran yet.
    if ! grep -aqF "$start_marker" "$run/console.log"; then
        printf '%s: the guest never started the command (boot failure); exit 75 (temporary)\n' "$PROG" >&2
        rc=75
    fi
fi

errs=$(scan_log "$run/console.log")
if [[ -n $errs ]]; then
    report_console "$run/console.log" "$errs"
    ((rc)) || rc=1
    if [[ ${errs%%$'\n'*} == *"Oops: int3"* ]]; then
        printf '%s: the first error is "Oops: int3": the kernel text-patching race (docs/testing.md), not a schedbe failure; exit 75 (temporary)\n' "$PROG" >&2
        rc=75
    fi
fi
printf '%s: exit %s after %ss (console: %s)\n' "$PROG" "$rc" "$elapsed" "${run#"$ROOT"/}/console.log" >&2
exit "$rc"
