"""scripts/tbprof/bpf-insns.py on a small synthetic profile, on the host: each
block's instructions go to the symbol it starts in, BPF program names lose
their tag, a program's calls are its first block's executions (summed over
blocks translated again at that address), stints are the ops.running
trampoline's calls, and kallsyms without BPF programs is an error."""

import subprocess
import sys

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.host

SCRIPT = tl.ROOT / "scripts" / "tbprof" / "bpf-insns.py"

KALLSYMS = """\
ffffffff81000000 T __htab_map_lookup_elem
ffffffff81000100 T some_other_kernel_fn
ffffffffc0400000 t bpf_prog_0123456789abcdef_schedbe_running\t[bpf]
ffffffffc0400200 t bpf_prog_fedcba9876543210_charge\t[bpf]
ffffffffc0400400 t bpf__sched_ext_ops_running\t[bpf]
"""

# vaddr n_insns executions
PROFILE = """\
ffffffff81000000 10 50
ffffffff81000020 5 50
ffffffff81000100 1000 1000
ffffffffc0400000 20 100
ffffffffc0400000 4 10
ffffffffc0400040 30 110
ffffffffc0400200 100 40
ffffffffc0400400 8 110
"""


def run(tmp_path, profile, kallsyms, *args):
    (tmp_path / "p").write_text(profile)
    (tmp_path / "k").write_text(kallsyms)
    return subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "p"), str(tmp_path / "k"), *args],
                          capture_output=True, text=True)


def test_instructions_calls_and_stints(tmp_path):
    r = run(tmp_path, PROFILE, KALLSYMS, "--kernel", "__htab_map_lookup_elem")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # BPF: running 20*100 + 4*10 + 30*110 = 5340, charge 4000, trampoline 880: 10220
    assert "0.01 M instructions; 110 stints" in out, out
    assert "93 per stint" in out, out  # 10220 / 110
    line = next(l for l in out.splitlines() if l.strip().startswith("schedbe_running"))
    assert "110 calls" in line and "49 a call" in line, line  # 5340 / (100 + 10)
    charge = next(l for l in out.splitlines() if l.strip().startswith("charge"))
    assert "40 calls" in charge and "100 a call" in charge, charge
    assert "some_other_kernel_fn" not in out
    k = next(l for l in out.splitlines() if l.startswith("kernel __htab_map_lookup_elem"))
    assert "50 calls" in k and "0.45 calls per stint" in k, k  # 750 insns, 50 / 110


def test_kallsyms_without_bpf_programs_is_an_error(tmp_path):
    r = run(tmp_path, PROFILE, "ffffffff81000000 T __htab_map_lookup_elem\n")
    assert r.returncode != 0
    assert "lists no BPF programs" in r.stderr


SYMS = tl.ROOT / "scripts" / "tbprof" / "syms.py"


def write_run(tmp_path, name, base, blocks, bpf=False):
    """A run's profile and kallsyms, its kernel at `base` (KASLR: each boot its own)."""
    ks = [f"{base:x} T pipe_write", f"{base + 0x100:x} T set_next_task_scx", f"{base + 0x200:x} T do_check"]
    if bpf:
        ks.append("ffffffffc0400000 t bpf_prog_0123456789abcdef_schedbe_enqueue\t[bpf]")
    (tmp_path / f"{name}.kallsyms").write_text("\n".join(ks) + "\n")
    lines = []
    for sym, n, execs in blocks:
        va = {"pipe_write": base, "scx": base + 0x100, "verifier": base + 0x200, "bpf": 0xffffffffc0400000}[sym]
        lines.append(f"{va:x} {n} {execs}")
    (tmp_path / f"{name}.out").write_text("\n".join(lines) + "\n")
    return str(tmp_path / name)


def test_syms_per_operation_and_difference(tmp_path):
    """(long - short) / ops per symbol, matched by name across boots; boot and
    load-time work (here the verifier's do_check) cancel out."""
    # A (EEVDF): pipe_write 100 insns an op; 1000 and 400 ops
    a_long = write_run(tmp_path, "a-long", 0xffffffff81000000, [("pipe_write", 10, 10 * 1000 + 7)])
    a_short = write_run(tmp_path, "a-short", 0xffffffff82000000, [("pipe_write", 10, 10 * 400 + 7)])
    # B: the same pipe_write, plus 30 scx and 50 BPF insns an op, and a verifier run in both
    b_long = write_run(tmp_path, "b-long", 0xffffffff83000000,
                       [("pipe_write", 10, 10 * 1000 + 7), ("scx", 3, 10 * 1000), ("bpf", 5, 10 * 1000),
                        ("verifier", 1000, 5000)], bpf=True)
    b_short = write_run(tmp_path, "b-short", 0xffffffff84000000,
                        [("pipe_write", 10, 10 * 400 + 7), ("scx", 3, 10 * 400), ("bpf", 5, 10 * 400),
                         ("verifier", 1000, 5000)], bpf=True)
    r = subprocess.run([sys.executable, str(SYMS), "--ops", "1000", "400", a_long, a_short, b_long, b_short],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = {l.split()[0]: l.split()[-3:] for l in r.stdout.splitlines()[2:] if len(l.split()) >= 4}
    assert rows["pipe_write"] == ["100", "100", "0"], r.stdout
    assert rows["set_next_task_scx"] == ["0", "30", "30"], r.stdout
    assert rows["schedbe_enqueue"] == ["0", "50", "50"], r.stdout
    assert rows["do_check"] == ["0", "0", "0"], r.stdout
    assert "BPF programs" in r.stdout and "180" in next(l for l in r.stdout.splitlines() if "all" in l.split()[:1])
    r = subprocess.run([sys.executable, str(SYMS), "--ops", "400", "1000", a_long, a_short],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "must exceed" in r.stderr
