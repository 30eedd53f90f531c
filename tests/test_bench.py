"""`schedbe-bench` works end to end: `schedbe-bench srv-bg --quick` for weights and
schedbe writes its records, per-second CSV and summary, and they parse. The figures
are drawn on the host afterwards (matplotlib takes minutes per figure under
emulation): tests/test_bench_figures.py, `make test-bench-plot`.

This checks the harness, not performance: no latency or isolation thresholds (the
VM's timing is too noisy for that here; docs/results.md reports the measurements).
"""

import csv
import json
import shutil

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.vm

CONFIGS = ["weights", "schedbe"]
EXPERIMENT = "srv-bg"
# Read again by tests/test_bench_figures.py on the host.
BENCH_OUT = tl.RESULTS / "bench-quick"


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def quick_run():
    out = BENCH_OUT
    shutil.rmtree(out, ignore_errors=True)
    # 4 s + 4 s keeps the run well under two minutes in the emulated guest; the
    # tracer runs in both phases as in a real experiment.
    r = tl.run_bench([EXPERIMENT, "--quick", "--configs", ",".join(CONFIGS),
                      "--lc-alone-secs", "4", "--be-secs", "4", "--util", "0.5", "--service", "fixed:5000",
                      "--progress-secs", "2", "--drain-timeout", "20", "--no-plot", "--out", out],
                     "bench-quick.log", timeout=400)
    return out, r


def test_bench_json(quick_run):
    out, _ = quick_run
    b = json.loads((out / "bench.json").read_text())
    assert b["meta"]["experiment"] == EXPERIMENT
    assert [c[0] for c in b["configs"]] == CONFIGS
    assert b["params"]["util"] > 0 and b["params"]["ncpus"] == tl.NR_CPUS
    assert b["calibration"]["iters_per_us"] > 0
    runs = {r["config"]: r for r in b["runs"]}
    assert sorted(runs) == sorted(CONFIGS), runs.keys()
    for name, r in runs.items():
        assert r["ok"], f"{name}: {r.get('error')}"
        assert r["before"]["count"] > 0 and r["after"]["count"] > 0, name
        assert r["mean_ratio"] > 0 and r["p99_ratio"] > 0, name
        assert r["client"]["sent"] > 0 and r["client"]["received"] > 0, name
        assert r["be_iters_per_s"] is not None, f"{name}: no BE throughput"
        phases = {w["phase"] for w in r["windows"]}
        assert {"lc", "lc+be"} <= phases, f"{name}: windows {phases}"
        # the tracer ran in the BE phase and its report was read
        assert r["trace_be"] is not None, f"{name}: no tracer figures; warnings {r['warnings']}"
        assert 0.0 <= r["trace_be"]["inversion_frac"] <= 1.0
    assert runs["schedbe"]["sched_ext_state"] == "enabled"
    aggs = {a["config"]: a for a in b["aggregates"]}
    assert sorted(aggs) == sorted(CONFIGS)
    # nothing left behind: no scheduler, no cgroups
    assert tl.scx_state() == "disabled"
    assert not (tl.CGROOT / "schedbe-bench").exists()


def test_bench_csvs(quick_run):
    out, _ = quick_run
    rows = read_csv(out / "per_second.csv")
    assert rows, "per_second.csv is empty"
    assert {r["config"] for r in rows} == set(CONFIGS)
    for r in rows:
        float(r["t_s"]), int(r["lc_count"]), int(r["be_iters"])
    reqs = read_csv(out / "requests.csv")
    assert {r["config"] for r in reqs} == set(CONFIGS)
    lat = [float(r["latency_us"]) for r in reqs]
    assert lat and min(lat) > 0


def test_bench_summary(quick_run):
    out, r = quick_run
    md = (out / "summary.md").read_text()
    assert md.startswith(f"# schedbe-bench {EXPERIMENT}")
    for c in CONFIGS:
        assert f"| {c} |" in md, f"summary has no row for {c}"
    for c in CONFIGS:  # the table printed at the end
        assert any(line.split()[:1] == [c] for line in r.stdout.splitlines()), r.stdout
