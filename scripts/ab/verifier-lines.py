#!/usr/bin/env python3
"""Where the BPF verifier spends its walk: from a verifier log of level 2 or
more (`SCHEDBE_VERIFIER_STATS=6 schedbe run ... 2> LOG`, in the guest), the
instructions processed per program, split by the source function their line
belongs to (the log's "; ... @ file:line" annotations, matched against
crates/schedbe/src/bpf/ and its folders). A function walked tens of thousands of times is a
candidate for a global function (docs/testing.md, "Load time").

    /usr/bin/python3 scripts/ab/verifier-lines.py LOG [TOP]
"""
import collections
import os
import re
import sys

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "schedbe", "src", "bpf")
DEF = re.compile(r"^(?:static\s+|__weak\s+)?(?:__always_inline\s+|inline\s+)*[\w\s*]+?\b(\w+)\s*\(")
OPS = re.compile(r"^\w+ BPF_STRUCT_OPS(?:_SLEEPABLE)?\((\w+)")
_defs = {}


def find_source(fname):
    """FNAME below crates/schedbe/src/bpf/ (policy folders and common/): the path as the
    log gives it, else the file of that base name (None if there is none)."""
    path = os.path.join(SRC, fname)
    if os.path.exists(path):
        return path
    base = os.path.basename(fname)
    for d, _, files in sorted(os.walk(SRC)):
        if base in files:
            return os.path.join(d, base)
    return None


def function_at(fname, line):
    """The function of crates/schedbe/src/bpf/FNAME that line LINE is in ('?' if unknown)."""
    if fname not in _defs:
        found = []
        path = find_source(fname)
        if path:
            with open(path) as f:
                for i, text in enumerate(f, 1):
                    m = OPS.match(text) or (DEF.match(text) if not text[:1].isspace()
                                            and not text.startswith(("#", "/", "}"))
                                            and not text.rstrip().endswith(";") else None)
                    if m:
                        found.append((i, m.group(1)))
        _defs[fname] = found
    name = "?"
    for i, n in _defs[fname]:
        if i > line:
            break
        name = n
    return name


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    per = collections.defaultdict(collections.Counter)
    prog = loc = None
    with open(sys.argv[1], errors="replace") as f:
        for line in f:
            if (m := re.search(r"prog '(\w+)': -- BEGIN", line)):
                prog, loc = m.group(1), None
            elif (m := re.match(r"^; .* @ ([\w.]+):(\d+)", line)):
                loc = (m.group(1), int(m.group(2)))
            elif prog and loc and re.match(r"^\d+: \(", line):
                per[prog][loc] += 1
    if not per:
        sys.exit(f"{sys.argv[1]}: no instruction trace (log level 2 or more?)")
    for prog, lines in sorted(per.items(), key=lambda kv: -sum(kv[1].values())):
        byfn = collections.Counter()
        for (fname, ln), n in lines.items():
            byfn[f"{fname}:{function_at(fname, ln)}"] += n
        print(f"{prog}: {sum(lines.values())} instructions walked")
        for fn, n in byfn.most_common(top):
            print(f"  {n:7d} {fn}")


if __name__ == "__main__":
    main()
