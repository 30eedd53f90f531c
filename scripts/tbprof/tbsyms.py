"""A tbprof profile (tbprof.c's "vaddr n_insns executions" lines) named with
the guest's /proc/kallsyms: shared by bpf-insns.py and syms.py."""
import bisect
import collections
import re


def load_symbols(path):
    """(address, name, is_bpf) sorted by address; BPF program names lose their
    bpf_prog_<tag>_ prefix (the tag is the same in every boot, the address is not)."""
    syms = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3:
                continue
            addr = int(parts[0], 16)
            if addr:
                bpf = len(parts) > 3 and parts[3] == "[bpf]"
                name = re.sub(r"^bpf_prog_[0-9a-f]+_", "", parts[2]) if bpf else parts[2]
                syms.append((addr, name, bpf))
    syms.sort()
    return syms


def blocks(profile, syms):
    """Each block of `profile` as (symbol name, is_bpf, vaddr, n_insns,
    executions), charged to the symbol it starts in; blocks before the first
    symbol are skipped."""
    starts = [s[0] for s in syms]
    with open(profile) as f:
        for line in f:
            va, n, execs = line.split()
            va, n, execs = int(va, 16), int(n), int(execs)
            i = bisect.bisect_right(starts, va) - 1
            if i >= 0:
                yield syms[i][1], syms[i][2], va, n, execs


def insns_by_symbol(profile, syms):
    """Instructions executed per symbol: a Counter, and the set of BPF names."""
    insns, bpf_names = collections.Counter(), set()
    for name, bpf, _va, n, execs in blocks(profile, syms):
        insns[name] += n * execs
        if bpf:
            bpf_names.add(name)
    return insns, bpf_names
