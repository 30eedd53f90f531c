#!/usr/bin/env python3
"""Instructions the loaded scheduler's BPF programs executed, from a tbprof profile.

Usage: scripts/tbprof/bpf-insns.py PROFILE KALLSYMS [--kernel SYM...] [--top N]

PROFILE: tbprof.c's output (vaddr n_insns executions per translation block);
KALLSYMS: the guest's /proc/kallsyms saved while the scheduler was loaded
(scripts/tbprof/guest.sh). Each block is charged to the symbol it starts in.
Prints the BPF programs' instructions in all, per task stint (one stint per
ops.running call: executions of the first block of the struct_ops
trampoline bpf__sched_ext_ops_running), and per program with its calls
(executions of its first block; for a subprogram the compiler also inlined
somewhere, that counts only its real calls). --kernel adds kernel functions
the same way (e.g. __htab_map_lookup_elem, bpf_task_storage_get).
"""
import argparse
import sys

from tbsyms import blocks, load_symbols


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("kallsyms")
    ap.add_argument("--kernel", nargs="*", default=[], metavar="SYM")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    syms = load_symbols(a.kallsyms)
    if not any(bpf for _, _, bpf in syms):
        sys.exit(f"bpf-insns.py: {a.kallsyms} lists no BPF programs (saved while none was loaded?)")
    kernel = set(a.kernel)
    insns, first = {}, {}
    for name, bpf, va, n, execs in blocks(a.profile, syms):
        if not bpf and name not in kernel:
            continue
        insns[name] = insns.get(name, 0) + n * execs
        # a block translated again with another length is another entry at the same address
        if name not in first or va < first[name][0]:
            first[name] = (va, execs)
        elif va == first[name][0]:
            first[name] = (va, first[name][1] + execs)
    stints = first.get("bpf__sched_ext_ops_running", (0, 0))[1]
    bpf_total = sum(w for name, w in insns.items() if name not in kernel)
    print(f"BPF programs: {bpf_total / 1e6:.2f} M instructions; {stints} stints (ops.running calls)"
          + (f"; {bpf_total / stints:.0f} per stint" if stints else ""))
    programs = sorted(((name, w) for name, w in insns.items() if name not in kernel), key=lambda x: -x[1])
    for name, w in programs[:max(a.top, 0)]:
        calls = first[name][1]
        print(f"  {name:32s} {w / 1e6:8.2f} M  {calls:9d} calls  {w / max(calls, 1):7.0f} a call")
    for name in a.kernel:
        w, calls = insns.get(name, 0), first.get(name, (0, 0))[1]
        per = f"; {calls / stints:.2f} calls per stint" if stints else ""
        print(f"kernel {name:32s} {w / 1e6:8.2f} M  {calls:9d} calls{per}")


if __name__ == "__main__":
    main()
