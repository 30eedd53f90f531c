"""`schedbe-bench serverless` (docs/serverless.md): paper 003's experiment.

In the VM: a small sweep (20 sandboxes, a moderate and an overloading load,
eevdf, schedbe and llf, one repetition of 8 s) runs end to end: its JSON,
table and per-request samples are written and parse, every run served its
requests, the agent and the tracer reported, the sched_ext runs' BPF
programs were counted, and nothing is left behind (no pod cgroups, no
scheduler loaded). No performance thresholds: those are the benchmark's
(docs/results.md), not a test's.

On the host: bad input (a malformed Azure trace file, no sandboxes, unknown
configurations, loads out of range) exits 1 with one clear error line before
anything runs, and the agent says so when its patterns match no cgroup.
"""

import csv
import json
import shutil
import subprocess
import sys

import pytest

import schedbe_testlib as tl

CONFIGS = ["eevdf", "schedbe", "llf"]
UTILS = [0.4, 1.3]
OUT = tl.RESULTS / "bench-serverless-quick"


@pytest.fixture(scope="module")
def quick_run():
    shutil.rmtree(OUT, ignore_errors=True)
    r = tl.run_bench(["serverless", "--functions", "20", "--utils", ",".join(map(str, UTILS)), "--reps", "1",
                      "--duration-s", "8", "--warmup-s", "3", "--drain-s", "2", "--no-plot", "--out", OUT],
                     "bench-serverless-quick.log", timeout=900)
    return r


@pytest.mark.vm
def test_serverless_runs_and_reports(quick_run):
    d = json.loads((OUT / "serverless.json").read_text())
    assert d["configs"] == CONFIGS and d["utils"] == UTILS
    rows = {(r["config"], r["util"]): r for r in d["rows"]}
    assert sorted(rows) == sorted((c, u) for c in CONFIGS for u in UTILS)
    for (c, u), r in rows.items():
        a = r["groups"]["all"]
        assert a["arrived"] > 20, f"{c} at {u}: {a}"
        # the groups partition the requests
        assert r["groups"]["group-high"]["arrived"] + r["groups"].get("group-low", {"arrived": 0})["arrived"] == a["arrived"]
        if u < 1:
            # at 40% load every scheduler serves (nearly) every request within the drain
            assert a["completed"] >= 0.95 * a["arrived"], f"{c} at {u}: {a}"
        assert a["met"] <= a["completed"] <= a["arrived"]
        assert r["cpu_high"] > 0 and r["ctx_per_s"] > 0
        assert r["send_failed"] == 0
        ag = r["agent"]
        assert ag is not None and ag["reports"] >= 5, f"{c} at {u}: agent {ag}"
        qos = [f for k, f in r["floors"].items() if k.endswith("kubepods-burstable.slice")]
        assert qos and qos[0]["periods"] >= 3, f"{c} at {u}: tracer {r['floors'].keys()} {r['warnings']}"
        if c == "eevdf":
            assert r["bpf_calls"] is None
        else:
            assert r["bpf_calls"] > 0 and r["bpf_ns_per_call"] > 0, f"{c} at {u}"
        with open(OUT / f"{c}-u{u:.2f}-r1" / "samples.csv") as f:
            samples = list(csv.DictReader(f))
        assert len(samples) == a["arrived"]
        # the summary compares integer nanoseconds with target_us * 1e3: do the same
        met = sum(1 for s in samples
                  if s["latency_us"] and round(float(s["latency_us"]) * 1000) <= float(s["target_us"]) * 1e3)
        assert met == a["met"], "the samples and the summary agree"
    table = (OUT / "serverless.md").read_text()
    assert all(f"| {c} |" in table for c in CONFIGS)


@pytest.mark.vm
def test_serverless_leaves_nothing_behind(quick_run):
    assert not (tl.CGROOT / "kubepods.slice").exists(), "the sandbox pods were not removed"
    assert tl.scx_state() in (None, "disabled")
    left = subprocess.run(["pgrep", "-f", "schedbe-bench fn-pool"], capture_output=True, text=True).stdout.split()
    assert not left, f"sandbox servers left running: {left}"


@pytest.mark.host
def test_figures_from_a_synthetic_run(tmp_path):
    """scripts/plot_serverless.py on a small synthetic output directory
    (matplotlib under emulation takes minutes a figure: on the host only)."""
    pytest.importorskip("matplotlib", reason="needs python3-matplotlib (scripts/setup.sh installs it)")
    rows = []
    for c in CONFIGS:
        for u in UTILS:
            g = {k: {"arrived": 10, "met": 9 if u < 1 else 3, "completed": 10, "attainment_pct": 90.0 if u < 1 else 30.0}
                 for k in ["group-low", "group-high", "all"]}
            rows.append({"config": c, "util": u, "rep": 0, "functions": 2, "groups": g, "ctx_per_s": 500.0})
            d = tmp_path / f"{c}-u{u:.2f}-r1"
            d.mkdir()
            (d / "samples.csv").write_text("function,band,group,latency_us,target_us\n"
                                           "fn-0000,0,group-low,900.0,5000.0\nfn-0000,0,group-low,7000.0,5000.0\n"
                                           "fn-0001,9,group-high,,5000.0\nfn-0001,9,group-high,3000.0,5000.0\n")
    (tmp_path / "serverless.json").write_text(json.dumps({"configs": CONFIGS, "nr_cpus": 2, "reps": 1, "rows": rows}))
    r = subprocess.run([sys.executable, str(tl.ROOT / "scripts" / "plot_serverless.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for name in ["serverless-attainment.png", "serverless-cdf.png"]:
        assert str(tmp_path / name) in r.stdout
        w, h = tl.png_size(tmp_path / name)
        assert w > 600 and h > 300, name
    r = subprocess.run([sys.executable, str(tl.ROOT / "scripts" / "plot_serverless.py"), str(tmp_path / "none")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "not found" in r.stderr


def bad(*argv):
    return tl.bench_bad(["serverless", *argv])


def test_bad_trace_file(tmp_path):
    f = tmp_path / "inv.csv"
    f.write_text("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,3,-2\n")
    e = bad("--azure", f)
    assert "line 2" in e and "-2" in e, e
    f.write_text("HashOwner,HashApp,HashFunction,Trigger,1,2\n")
    assert "no functions" in bad("--azure", f)
    assert "cannot read" in bad("--azure", tmp_path / "missing.csv")


@pytest.mark.parametrize("argv,want", [
    (["--functions", "0"], "functions"),
    (["--functions", "2000"], "1024"),
    (["--configs", "cfs"], "expected eevdf, schedbe or llf"),
    (["--configs", ""], "--configs is empty"),
    (["--utils", "0"], "--utils"),
    (["--utils", "1,x"], "--utils"),
    (["--reps", "0"], "--reps"),
    (["--duration-s", "3", "--warmup-s", "2"], "--duration-s"),
    (["--base-port", "80"], "--base-port"),
])
def test_bad_arguments(argv, want):
    e = bad(*argv)
    assert want in e, e


def test_agent_says_when_no_sandbox_matches(tmp_path):
    r = subprocess.run([str(tl.SCHEDBE), "agent", "--once", "--interval-s", "0.2", "--cgroup-root", str(tmp_path),
                        "--sandbox", "nothing/*"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "no cgroup under" in r.stderr and "nothing/*" in r.stderr, r.stderr
    assert '"kind":"node"' in r.stdout
