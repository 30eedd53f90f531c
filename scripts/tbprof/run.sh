#!/bin/bash
# Executed guest instructions per translation block (a QEMU TCG plugin,
# tbprof.c), for one run of CMD in a scripts/vm.sh guest, named with the
# guest's symbols; bpf-insns.py then reports the instructions of the loaded
# scheduler's BPF programs per task stint, and syms.py the instructions of
# every symbol per operation, from two runs of different lengths.
#
#   scripts/tbprof/run.sh NAME [--cpus N] -- CMD...
#
# Writes results/tmp/tbprof/NAME.out (vaddr n_insns executions) and
# NAME.kallsyms, then prints `bpf-insns.py` for them when CMD loaded a
# sched_ext scheduler (e.g. `schedbe-bench lc-alone --configs schedbe ...`).
# The plugin slows the guest by about a third. docs/overhead-log-8.md, "2026-12-04
# (second)", has the figures it gave.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
die() { printf 'tbprof/run.sh: %s\n' "$*" >&2; exit 2; }
name=${1:-}; [[ -n $name && $name != -* ]] || die "usage: run.sh NAME [--cpus N] -- CMD..."; shift
[[ $name =~ ^[A-Za-z0-9._-]+$ ]] || die "NAME: letters, digits, . _ - only"
cpus=2
while (($#)); do
    case $1 in
        --cpus) cpus=${2:?}; shift 2 ;;
        --) shift; break ;;
        *) die "unknown option $1" ;;
    esac
done
(($#)) || die "no command given after --"
cc=${CC:-$(command -v gcc || command -v clang-19 || command -v clang || true)}
[[ -n $cc ]] || die "no C compiler (gcc or clang; make setup installs clang-19)"
out=$ROOT/results/tmp/tbprof
mkdir -p "$out"
"$cc" -O2 -shared -fPIC -o "$out/libtbprof.so" "$ROOT/scripts/tbprof/tbprof.c"
rm -f "$out/$name.out" "$out/$name.kallsyms"
# vm.sh runs CMD from the project's root in the guest; a quoted command line
printf -v cmd '%q ' "$@"
SCHEDBE_VM_QEMU_OPTS="${SCHEDBE_VM_QEMU_OPTS:-} -plugin $out/libtbprof.so,out=$out/$name.out" \
    "$ROOT/scripts/vm.sh" --cpus "$cpus" --mem 2G --timeout 1500 -- \
    "scripts/tbprof/guest.sh results/tmp/tbprof/$name.kallsyms -- $cmd"
[[ -s $out/$name.out ]] || die "the plugin wrote no profile ($out/$name.out)"
[[ -s $out/$name.kallsyms ]] || die "the guest saved no kallsyms"
if grep -q '\[bpf\]' "$out/$name.kallsyms"; then
    python3 "$ROOT/scripts/tbprof/bpf-insns.py" "$out/$name.out" "$out/$name.kallsyms"
else
    echo "tbprof/run.sh: no BPF programs were loaded; scripts/tbprof/syms.py names the kernel's instructions"
fi
