"""`schedbe-bench overhead` (docs/bench.md): schedbe's cost with no BE, against EEVDF
and peer sched_ext schedulers.

In the VM: `schedbe-bench overhead --quick --configs eevdf,schedbe --reps 1 --lc-capacity`
runs every workload (perf messaging and pipe, cyclictest, the LC server alone at two
loads of its capacity, measured first, the C build) under both configurations; its JSON,
CSV and summary are written and parse, the LC loads offered are the fractions of the
capacity the summary gives,
every run finished ok, schedbe's BPF programs were counted in the count pass after the
timed repetition and in no timed run, the counted runs are in no ratio, and it leaves
no scheduler loaded and kernel.bpf_stats_enabled as it was. No performance thresholds: the VM's
timing is too noisy for that. The peers are not built by the test suite (scripts/peers.sh,
`make bench-overhead`).

On the host too: bad input (unknown workload or configuration, a missing peer binary,
--cyclictest-trace without cyclictest, --lc-capacity without an LC workload)
exits 1 with one clear error line, before anything runs.
"""

import csv
import json
import shutil
from pathlib import Path

import pytest

import schedbe_testlib as tl

CONFIGS = ["eevdf", "schedbe"]
WORKLOADS = ["messaging", "pipe", "cyclictest", "lc-60", "lc-85", "build"]
OUT = tl.RESULTS / "bench-overhead-quick"
BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


def bpf_stats():
    try:
        return BPF_STATS.read_text().strip()
    except OSError:
        return None


@pytest.fixture(scope="module")
def quick_run():
    shutil.rmtree(OUT, ignore_errors=True)
    before = bpf_stats()
    r = tl.run_bench(["overhead", "--quick", "--configs", ",".join(CONFIGS), "--reps", "1", "--no-plot",
                      "--lc-capacity", "--out", OUT], "bench-overhead-quick.log", timeout=800)
    return r, before


@pytest.mark.vm
def test_overhead_json(quick_run):
    _, stats_before = quick_run
    d = json.loads((OUT / "overhead.json").read_text())
    assert [c[0] for c in d["configs"]] == CONFIGS
    assert d["workloads"] == WORKLOADS
    runs = {(r["workload"], r["config"]): r for r in d["runs"] if not r["counted"]}
    counted = {(r["workload"], r["config"]): r for r in d["runs"] if r["counted"]}
    assert sorted(runs) == sorted((w, c) for w in WORKLOADS for c in CONFIGS), runs.keys()
    # the count pass: every workload once more under schedbe, none under EEVDF
    assert sorted(counted) == sorted((w, "schedbe") for w in WORKLOADS), counted.keys()
    assert all(r["rep"] == 2 for r in counted.values())
    for (w, c), r in list(runs.items()) + list(counted.items()):
        assert r["ok"], f"{w} under {c}: {r.get('error')}"
        assert r["values"], f"{w} under {c}: no values"
        assert (OUT / r["raw_dir"]).is_dir(), r["raw_dir"]
    for c in CONFIGS:
        assert runs[("messaging", c)]["values"]["time_s"] > 0
        assert runs[("pipe", c)]["values"]["ops_per_s"] > 0
        cyc = runs[("cyclictest", c)]["values"]
        assert cyc["samples"] > 0 and cyc["max_us"] >= cyc.get("p99_us", 0)
        # its background load ran (stress-ng at 50% of every CPU): an aborted
        # stress-ng once left cyclictest measuring an idle machine
        assert cyc["busy_pct"] >= 25, f"cyclictest under {c} ran on a machine {cyc['busy_pct']:.0f}% busy"
        assert runs[("lc-60", c)]["values"]["requests"] > 0
        assert runs[("build", c)]["values"]["wall_s"] > 0
    # schedbe's BPF programs were counted around each workload of the count pass (the LC
    # server's over its first phase), and in no timed run
    for w in ["messaging", "pipe", "cyclictest", "lc-60", "build"]:
        b = counted[(w, "schedbe")]["bpf"]
        assert b is not None and b["calls"] > 0 and b["callbacks"], f"{w}: no BPF counts"
        assert runs[(w, "schedbe")]["bpf"] is None and runs[(w, "eevdf")]["bpf"] is None
    assert any("count pass" in n for n in d["meta"]["notes"]), d["meta"]["notes"]
    # --lc-capacity: the probe's capacity C is in the notes, and each lc-NN offered NN% of it
    cap = [n for n in d["meta"]["notes"] if n.startswith("LC capacity")]
    assert len(cap) == 1, d["meta"]["notes"]
    lcc = d["lc_capacity"]
    c = lcc["capacity"]
    assert 0.05 < c <= 1.0, lcc
    assert c == min(lcc["served_util"], 1.0) and lcc["offered_util"] > 1.0, lcc
    assert f"{c:.3f}" in cap[0], (cap[0], lcc)
    assert (OUT / lcc["raw_dir"] / "requests.csv").is_file(), lcc
    for w, u in [("lc-60", 0.6), ("lc-85", 0.85)]:
        for cfg in CONFIGS:
            offered = runs[(w, cfg)]["values"]["offered_util"]
            # Poisson arrivals over a 2 s window: a few percent either way
            assert abs(offered / (u * c) - 1) < 0.2, f"{w} under {cfg}: offered {offered:.3f}, capacity {c:.3f}"
    ratio_rows = [x for x in d["rows"] if x["config"] == "schedbe"]
    assert any(x["ratio"] is not None for x in ratio_rows), ratio_rows
    # nothing left behind
    assert tl.scx_state() == "disabled"
    assert bpf_stats() == stats_before
    assert not (tl.CGROOT / "schedbe-bench").exists()


@pytest.mark.vm
def test_overhead_csv_and_summary(quick_run):
    r, _ = quick_run
    with open(OUT / "overhead.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {x["config"] for x in rows} == set(CONFIGS)
    assert {x["workload"] for x in rows} == set(WORKLOADS)
    # the count pass's rows: schedbe's only, and in no ratio
    assert {x["pass"] for x in rows} == {"timed", "bpf-count"}
    assert all(x["config"] == "schedbe" and x["ratio_to_eevdf"] == "" for x in rows if x["pass"] == "bpf-count")
    for x in rows:
        v = float(x["value"])
        if x["config"] == "eevdf":
            # a zero baseline (no misses, a 0 us percentile) has no ratio
            if v > 0:
                assert float(x["ratio_to_eevdf"]) == 1.0, x
            else:
                assert x["ratio_to_eevdf"] == "", x
    md = (OUT / "summary.md").read_text()
    assert md.startswith("# schedbe-bench overhead")
    for w in WORKLOADS:
        assert f"| {w} |" in md, f"summary has no row for {w}"
    assert "BPF CPU time" in md
    # the table printed at the end
    assert any(line.startswith("messaging time_s") for line in r.stdout.splitlines()), r.stdout


def run_bad(argv):
    return tl.bench_bad(["overhead", *argv])


def test_unknown_workload(tmp_path):
    line = run_bad(["--configs", "eevdf", "--workloads", "messaging,hackbench", "--out", tmp_path / "o"])
    assert "hackbench" in line and "cyclictest" in line, line
    assert not (tmp_path / "o").exists()


def test_unknown_config(tmp_path):
    line = run_bad(["--configs", "eevdf,scx_nope", "--out", tmp_path / "o"])
    assert "scx_nope" in line and "scx_bpfland" in line, line
    assert not (tmp_path / "o").exists()


def test_missing_peer(tmp_path):
    empty = tmp_path / "peers"
    empty.mkdir()
    line = run_bad(["--configs", "eevdf,scx_lavd", "--peers-dir", empty, "--out", tmp_path / "o"])
    assert "scx_lavd" in line and "scripts/peers.sh" in line and str(empty) in line, line
    assert not (tmp_path / "o").exists()


def test_cyclictest_trace_needs_cyclictest(tmp_path):
    line = run_bad(["--configs", "eevdf", "--workloads", "pipe", "--cyclictest-trace", "--out", tmp_path / "o"])
    assert "--cyclictest-trace" in line and "cyclictest workload" in line, line
    assert not (tmp_path / "o").exists()


def test_lc_capacity_needs_lc(tmp_path):
    line = run_bad(["--configs", "eevdf", "--workloads", "pipe", "--lc-capacity", "--out", tmp_path / "o"])
    assert "--lc-capacity" in line and "lc" in line, line
    assert not (tmp_path / "o").exists()
