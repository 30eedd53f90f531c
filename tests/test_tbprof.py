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
