"""scripts/lc_breakdown.py on small synthetic client records, on the host: the
parts of each request's latency (send lag, queued, service, return) add up to
the total and are computed from the right columns, the warm-up is left out,
and bad input exits non-zero with one error line per file."""

import subprocess
import sys

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.host

SCRIPT = tl.ROOT / "scripts" / "lc_breakdown.py"
HEADER = "conn,id,intended_ns,send_ns,recv_ns,service_ns,start_ns,end_ns,cpu_ns\n"
MS = 1_000_000


def records(path, n=20, t0=5_000 * MS):
    """Request i, sent every 100 ms from t0: send lag 0.1 ms, queued i ms,
    service 2 ms, return 0.5 ms; the worker used 2.1 ms of CPU."""
    rows = []
    for i in range(n):
        intended = t0 + i * 100 * MS
        send = intended + MS // 10
        start = send + i * MS
        end = start + 2 * MS
        recv = end + MS // 2
        rows.append(f"{i % 4},{i},{intended},{send},{recv},{2 * MS},{start},{end},{2_100_000}")
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return path


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60)


def parse(out):
    """{part: mean} from the script's output."""
    means = {}
    for line in out.splitlines()[1:]:
        name, rest = line[:12].strip(), line[12:].split()
        means[name] = float(rest[rest.index("mean") + 1])
    return means


def test_parts_add_up_and_warmup_is_skipped(tmp_path):
    r = run(records(tmp_path / "r.csv"))
    assert r.returncode == 0, r.stderr
    # the first second (requests 0-9) is warm-up: requests 10-19 remain, queued 10..19 ms
    assert "10 requests" in r.stdout.splitlines()[0]
    m = parse(r.stdout)
    assert m["send lag"] == pytest.approx(0.1)
    assert m["queued"] == pytest.approx(14.5)
    assert m["service"] == pytest.approx(2.0)
    assert m["return"] == pytest.approx(0.5)
    assert m["worker cpu"] == pytest.approx(2.1)
    assert m["total"] == pytest.approx(m["send lag"] + m["queued"] + m["service"] + m["return"])
    r = run("--skip-s", 0, tmp_path / "r.csv")
    assert "20 requests" in r.stdout.splitlines()[0] and parse(r.stdout)["queued"] == pytest.approx(9.5)


def test_bad_input_fails_with_a_message(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("conn,id\n1,2\n")
    r = run(tmp_path / "missing.csv", bad, records(tmp_path / "ok.csv"))
    assert r.returncode == 1
    errs = r.stderr.strip().splitlines()
    assert len(errs) == 2 and all(e.startswith("lc_breakdown: ") for e in errs), r.stderr
    assert "not client records: no column intended_ns" in errs[1]
    assert "ok.csv: 10 requests" in r.stdout
    unanswered = tmp_path / "none.csv"
    unanswered.write_text(HEADER + f"0,0,{MS},{MS},0,{2 * MS},0,0,0\n")
    r = run(unanswered)
    assert r.returncode == 1 and "no answered request" in r.stderr
