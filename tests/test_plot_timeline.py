"""scripts/plot-timeline.py on small synthetic `schedbe trace --timeline` CSVs,
on the host (no sched_ext, no tracer): the PNG is written, with one panel per
input, for one timeline or two side by side; bad input exits non-zero with one
error line and writes nothing."""

import subprocess
import sys

import pytest

import schedbe_testlib as tl

# matplotlib under emulation takes minutes a figure: on the host only (make test-host).
pytestmark = pytest.mark.host

pytest.importorskip("matplotlib", reason="needs python3-matplotlib (scripts/setup.sh installs it)")

SCRIPT = tl.ROOT / "scripts" / "plot-timeline.py"
HEADER = "cpu,start_ns,end_ns,pid,comm,tier,cgroup_index,cgroup\n"


def timeline(path, rows):
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


def small(path, shift=0):
    """2 CPUs, 20 ms: pod1 (cgroup 0) and pod2 (cgroup 1) LC, a BE task and an
    RT one outside every --cgroup; a comm with a comma and quotes."""
    ms = 1_000_000
    rows = []
    for cpu in range(2):
        for i in range(10):
            a = (2 * i + shift) * ms
            kind = (i + cpu) % 4
            row = [(f"{100 + cpu}", "srv", "lc", "0", "kubepods.slice/pod1.slice"),
                   (f"{200 + cpu}", '"hog, ""x"""', "lc", "1", "kubepods.slice/pod2.slice"),
                   (f"{300 + cpu}", "resize", "be", "", ""),
                   (f"{400 + cpu}", "migration/0", "other", "", "")][kind]
            rows.append(f"{cpu},{a},{a + ms + ms // 2},{row[0]},{row[1]},{row[2]},{row[3]},{row[4]}")
    return timeline(path, rows)


def plot(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)


def test_two_timelines_side_by_side(tmp_path):
    a, b = small(tmp_path / "eevdf.csv"), small(tmp_path / "schedbe.csv", shift=1)
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    r = plot("--out", one, a)
    assert r.returncode == 0, r.stderr
    r = plot("--out", two, f"{a}:EEVDF", f"{b}:schedbe", "--from", "0.002", "--to", "0.012",
             "--title", "synthetic")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(two)], r.stdout
    (w1, h1), (w2, h2) = tl.png_size(one), tl.png_size(two)
    assert w1 >= 300 and h1 >= 200, (w1, h1)
    assert w2 > 1.5 * w1 and h2 >= h1, f"two panels side by side: {w1}x{h1} -> {w2}x{h2}"


def test_tier_colours_and_an_empty_timeline(tmp_path):
    empty = timeline(tmp_path / "empty.csv", [])
    out = tmp_path / "t.png"
    r = plot("--out", out, "--color-by", "tier", small(tmp_path / "a.csv"), empty)
    assert r.returncode == 0, r.stderr
    assert tl.png_size(out)[0] >= 300


@pytest.mark.parametrize("kind", ["missing", "not-a-timeline", "bad-row", "empty-range"])
def test_bad_input(tmp_path, kind):
    out = tmp_path / "bad.png"
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    args = {
        "missing": [tmp_path / "nope.csv"],
        "not-a-timeline": [other],
        "bad-row": [timeline(tmp_path / "r.csv", ["0,1,two,3,c,lc,,"])],
        "empty-range": [small(tmp_path / "good.csv"), "--from", "1", "--to", "1"],
    }[kind]
    r = plot("--out", out, *args)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode != 0, r
    assert len(lines) == 1 and lines[0].startswith("plot-timeline: error:"), r.stderr
    assert not out.exists()
