"""The figures of the `schedbe-bench srv-bg --quick` run that tests/test_bench.py made
in the VM, drawn on the host with `schedbe-bench plot` (matplotlib under emulation
takes minutes per figure). `make test` runs this after the VM suite
(`make test-bench-plot`); elsewhere it skips when there is no such run.
"""

import json
import os
import subprocess

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.bench_plot

OUT = tl.RESULTS / "bench-quick"
CONFIGS = ["weights", "schedbe"]
EXPERIMENT = "srv-bg"


def test_bench_figures():
    if not (OUT / "bench.json").exists():
        msg = f"no bench run in {OUT} (tests/test_bench.py in the VM writes it)"
        if os.environ.get("SCHEDBE_REQUIRE_BENCH") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    r = subprocess.run([str(tl.SCHEDBE_BENCH), "plot", str(OUT)], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"schedbe-bench plot failed: {r.stderr[-2000:]}"
    want = [f"{EXPERIMENT}-{c}.png" for c in CONFIGS] + [f"{EXPERIMENT}-timelines.png", f"{EXPERIMENT}-cmp.png"]
    printed = sorted(os.path.basename(l) for l in r.stdout.split())
    assert printed == sorted(want), r.stdout
    b = json.loads((OUT / "bench.json").read_text())
    assert sorted(b["figures"]) == sorted(want), b["figures"]
    md = (OUT / "summary.md").read_text()
    for f in want:
        w, h = tl.png_size(OUT / f)
        assert w >= 300 and h >= 200, f"{f}: {w}x{h}"
        assert f"]({f})" in md, f"summary does not link {f}"
