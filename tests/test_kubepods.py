"""`schedbe-bench pods`: the kubelet cgroup tree, emulated (docs/kubernetes.md).

The cgroup tests apply docs/examples/pods.toml with both drivers under a fresh
test cgroup (/sys/fs/cgroup/schedbe-test-kubepods, never the host's kubepods),
walk the tree, check every directory's name against the layout kubelet and
containerd use and every cpu.weight / cpu.max against values worked out here
by hand from kubelet's formulas, then delete it and check nothing is left.
They need root and cgroup v2 with the cpu controller (the `cgroup` marker skips
them elsewhere). The bad-input tests run anywhere.
"""

import os
import re
import subprocess

import pytest

import schedbe_testlib as tl

EXAMPLE = tl.ROOT / "docs" / "examples" / "pods.toml"
ROOT_CG = "schedbe-test-kubepods"

# docs/examples/pods.toml with --allocatable-cpu 4, by hand:
#   shares = milliCPU * 1024 / 1000 (min 2); kubelet's weight = 1 + (shares-2)*9999/262142
#   kubepods:   4 CPUs  -> 4096 shares -> 157
#   burstable:  service2's 1 CPU -> 1024 -> 39;  besteffort: 2 shares -> 1
#   service1 (Guaranteed, 2 CPUs): 2048 -> 79, quota 2 * 100 ms
#   service2 (Burstable, 1 CPU, no limit): 1024 -> 39, no quota
# The container level is the runtime's: linear (runc <= 1.3.1) as above, or
# quadratic (runc >= 1.3.2): ceil(10^((L^2 + 125 L)/612 - 7/34)), L = log2(shares):
#   2048 -> 174, 1024 -> 100.
MAX = "max 100000"
KUBEPODS = (157, MAX)
BURSTABLE = (39, MAX)
BESTEFFORT = (1, MAX)
SERVICE1 = (79, "200000 100000")
SERVICE2 = (39, MAX)
CONTAINER_WEIGHTS = {"linear": (79, 39), "quadratic": (174, 100)}

UID_PARTS = [r"[0-9a-f]{8}", r"[0-9a-f]{4}", r"4[0-9a-f]{3}", r"[89ab][0-9a-f]{3}", r"[0-9a-f]{12}"]
UID = "-".join(UID_PARTS)
CID = r"[0-9a-f]{64}"


def layout(driver):
    """Name patterns of each level, relative to the root."""
    if driver == "systemd":
        su = "_".join(UID_PARTS)
        return {
            "kubepods": r"kubepods\.slice",
            "burstable": r"kubepods\.slice/kubepods-burstable\.slice",
            "besteffort": r"kubepods\.slice/kubepods-besteffort\.slice",
            "service1": rf"kubepods\.slice/kubepods-pod(?P<uid>{su})\.slice",
            "service1/c": rf"kubepods\.slice/kubepods-pod{su}\.slice/cri-containerd-{CID}\.scope",
            "service2": rf"kubepods\.slice/kubepods-burstable\.slice/kubepods-burstable-pod(?P<uid>{su})\.slice",
            "service2/c": rf"kubepods\.slice/kubepods-burstable\.slice/kubepods-burstable-pod{su}\.slice/"
                          rf"cri-containerd-{CID}\.scope",
        }
    return {
        "kubepods": r"kubepods",
        "burstable": r"kubepods/burstable",
        "besteffort": r"kubepods/besteffort",
        "service1": rf"kubepods/pod(?P<uid>{UID})",
        "service1/c": rf"kubepods/pod{UID}/{CID}",
        "service2": rf"kubepods/burstable/pod(?P<uid>{UID})",
        "service2/c": rf"kubepods/burstable/pod{UID}/{CID}",
    }


def root():
    return tl.cg_path(ROOT_CG)


def tree():
    """Every cgroup under the test root, as paths relative to it."""
    top = root()
    return sorted(str(p.relative_to(top)) for p in top.rglob("*") if p.is_dir())


def pods(cmd, *args, check=True):
    argv = [tl.SCHEDBE_BENCH, "pods", cmd, *map(str, args)]
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    tl.log(f"{' '.join(map(str, argv))} -> {r.returncode}\n{r.stdout}{r.stderr}")
    if check:
        assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"
    return r


def values(rel):
    d = root() / rel
    return int((d / "cpu.weight").read_text()), (d / "cpu.max").read_text().strip()


@pytest.fixture
def test_root():
    """A fresh /sys/fs/cgroup/schedbe-test-kubepods with the cpu controller."""
    if not os.access(tl.CGROOT, os.W_OK):
        pytest.skip(f"{tl.CGROOT} is not writable")
    tl.cg_remove_tree(ROOT_CG)
    tl.cg_create(ROOT_CG)
    if "cpu" not in tl.cg_read(ROOT_CG, "cgroup.controllers").split():
        pytest.skip(f"no cpu controller in {root()}")
    yield root()
    tl.cg_remove_tree(ROOT_CG)


@pytest.mark.cgroup
@pytest.mark.parametrize("conversion", ["linear", "quadratic"])
@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
def test_apply_and_delete(test_root, driver, conversion):
    r = pods("apply", EXAMPLE, "--driver", driver, "--root", test_root, "--allocatable-cpu", "4",
             "--weight-conversion", conversion)
    pats = layout(driver)
    got = tree()
    assert len(got) == len(pats), f"expected {len(pats)} cgroups, got {got}"
    found = {}
    for rel in got:
        names = [n for n, pat in pats.items() if re.fullmatch(pat, rel)]
        assert len(names) == 1, f"{rel} matches {names or 'no level'} of the {driver} layout"
        assert names[0] not in found, f"two cgroups for {names[0]}: {found[names[0]]}, {rel}"
        found[names[0]] = rel
        assert rel in r.stdout, f"apply did not print {rel}"
    # The container sits in its pod, and the two pods' UIDs differ.
    for pod in ("service1", "service2"):
        assert found[f"{pod}/c"].startswith(found[pod] + "/")
    uids = [re.fullmatch(pats[p], found[p])["uid"] for p in ("service1", "service2")]
    assert uids[0] != uids[1]

    c1, c2 = CONTAINER_WEIGHTS[conversion]
    want = {
        "kubepods": KUBEPODS, "burstable": BURSTABLE, "besteffort": BESTEFFORT,
        "service1": SERVICE1, "service1/c": (c1, SERVICE1[1]),
        "service2": SERVICE2, "service2/c": (c2, SERVICE2[1]),
    }
    for name, rel in found.items():
        assert values(rel) == want[name], f"{name} ({rel}): {values(rel)}, want {want[name]}"
    # +cpu down the path, so every level has cpu.* files.
    for rel in ["."] + [found[n] for n in ("kubepods", "burstable", "besteffort", "service1", "service2")]:
        assert "cpu" in (test_root / rel / "cgroup.subtree_control").read_text().split(), rel

    # Applying again rewrites the same values and creates nothing new.
    pods("apply", EXAMPLE, "--driver", driver, "--root", test_root, "--allocatable-cpu", "4",
         "--weight-conversion", conversion)
    assert tree() == got
    for name, rel in found.items():
        assert values(rel) == want[name]

    pods("delete", EXAMPLE, "--driver", driver, "--root", test_root)
    assert tree() == [], f"delete left {tree()}"
    # Deleting what is already gone is not an error.
    r = pods("delete", EXAMPLE, "--driver", driver, "--root", test_root)
    assert "already gone" in r.stdout


@pytest.mark.cgroup
def test_same_uids_for_both_drivers(test_root):
    """The systemd names are the cgroupfs names with '-' turned into '_'."""
    uids = {}
    for driver in ("systemd", "cgroupfs"):
        pods("apply", EXAMPLE, "--driver", driver, "--root", test_root)
        pats = layout(driver)
        for rel in tree():
            for pod in ("service1", "service2"):
                m = re.fullmatch(pats[pod], rel)
                if m:
                    uids.setdefault(pod, []).append(m["uid"].replace("_", "-"))
        pods("delete", EXAMPLE, "--driver", driver, "--root", test_root)
    assert all(len(v) == 2 and v[0] == v[1] for v in uids.values()), uids
    assert tree() == []


@pytest.mark.cgroup
@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
def test_existing_kubepods_is_kept(test_root, driver):
    """A kubepods cgroup that was there before (a kubelet's) is used but not
    written, and delete leaves it in place; what apply created goes."""
    tl.cg_write(ROOT_CG, "cgroup.subtree_control", "+cpu")
    kp = test_root / ("kubepods.slice" if driver == "systemd" else "kubepods")
    kp.mkdir()
    before = (kp / "cpu.weight").read_text()
    r = pods("apply", EXAMPLE, "--driver", driver, "--root", test_root, "--allocatable-cpu", "4")
    assert "existing (not written)" in r.stdout
    assert (kp / "cpu.weight").read_text() == before
    assert len(tree()) == 7
    r = pods("delete", EXAMPLE, "--driver", driver, "--root", test_root)
    assert "kept (existed before apply)" in r.stdout
    assert tree() == [kp.name], tree()


@pytest.mark.cgroup
def test_delete_kills_container_processes(test_root):
    """The containers' cgroups are for real processes; delete ends them, as
    kubelet does when a pod goes."""
    pods("apply", EXAMPLE, "--driver", "cgroupfs", "--root", test_root)
    containers = [rel for rel in tree() if re.fullmatch(layout("cgroupfs")["service2/c"], rel)]
    assert len(containers) == 1
    p = tl.spawn(["sleep", "600"], cgroup=f"{ROOT_CG}/{containers[0]}")
    try:
        assert tl.cg_procs(f"{ROOT_CG}/{containers[0]}") == [p.pid]
        pods("delete", EXAMPLE, "--driver", "cgroupfs", "--root", test_root)
        assert p.wait(10) is not None
        assert tree() == []
    finally:
        tl.kill_proc(p)


def run_bad(argv):
    return tl.bench_bad(["pods", *argv])


BAD_SPECS = {
    "duplicate-pod": ('[[pods]]\nname = "a"\n[[pods.containers]]\nname = "c"\n'
                      '[[pods]]\nname = "a"\n[[pods.containers]]\nname = "c"\n', "appears twice"),
    "request-above-limit": ('[[pods]]\nname = "a"\n[[pods.containers]]\nname = "c"\n'
                            'cpu_request = "2"\ncpu_limit = "1"\n', "above cpu_limit"),
    "negative": ('[[pods]]\nname = "a"\n[[pods.containers]]\nname = "c"\ncpu_request = -1\n', "negative"),
    "fraction": ('[[pods]]\nname = "a"\n[[pods.containers]]\nname = "c"\ncpu_limit = 0.5\n', "line 5"),
    "unknown-key": ('[[pods]]\nname = "a"\nmemory = "1Gi"\n', "memory"),
    "no-pods": ("", "no pods"),
    "too-many": ("".join(f'[[pods]]\nname = "p{i}"\n[[pods.containers]]\nname = "c"\n' for i in range(1025)),
                 "at most 1024"),
}


@pytest.mark.parametrize("kind", sorted(BAD_SPECS))
def test_bad_spec(kind, tmp_path):
    text, names = BAD_SPECS[kind]
    spec = tmp_path / f"{kind}.toml"
    spec.write_text(text)
    line = run_bad(["apply", spec, "--root", tmp_path / "no-such-root"])
    assert names in line and str(spec) in line, line
    assert not (tmp_path / "no-such-root").exists()


def test_missing_root(tmp_path):
    line = run_bad(["apply", EXAMPLE, "--root", tmp_path / "absent"])
    assert str(tmp_path / "absent") in line, line
    line = run_bad(["apply", EXAMPLE, "--root", tmp_path])
    assert "not a cgroup v2 directory" in line, line
    assert list(tmp_path.iterdir()) == []
