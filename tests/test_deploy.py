"""The Kubernetes deployment (deploy/kubernetes/*.yaml), checked offline on the host.

- Every YAML document validates against the Kubernetes API schema of K8S_VERSION
  with kubernetes-validate --strict (pinned in scripts/setup.sh, installed in
  /opt/schedbe-venv; it ships the schemas, so no cluster or network is needed).
- The DaemonSet keeps what schedbe relies on: hostPID, privileged, the host
  mounts (/sys/fs/cgroup read-write, /run/schedbe kept on the node, ...), the
  thawing initContainer, a Burstable pod without a CPU limit, a readiness probe
  on /sys/kernel/sched_ext.
- The ConfigMap's schedbe.toml uses only fields of the Config struct
  (crates/schedbe/src/policy/sched_be/config.rs), with the right types.
- On this host (no sched_ext, the "node without sched_ext" case) the readiness
  probe's exact shell command fails and says why, the initContainer's command
  succeeds, and the main container's exact command line exits non-zero with
  one line naming sched_ext, changing nothing.

tests/test_deploy_vm.py runs the same command lines under sched_ext. The
helpers here (manifest parsing, argv substitution) are shared with it.
"""

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

import schedbe_testlib as tl

# Offline checks: on the host only (make test-host); the VM suite leaves them out.
pytestmark = pytest.mark.host

DEPLOY = tl.ROOT / "deploy" / "kubernetes"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))
DAEMONSET_YAML = DEPLOY / "schedbe-daemonset.yaml"
CONFIG_RS = tl.ROOT / "crates" / "schedbe" / "src" / "policy" / "sched_be" / "config.rs"
SETUP_SH = tl.ROOT / "scripts" / "setup.sh"

VENV = Path("/opt/schedbe-venv")
KUBERNETES_VALIDATE = VENV / "bin" / "kubernetes-validate"
# The newest Kubernetes API the pinned kubernetes-validate (KV_VERSION in
# scripts/setup.sh) ships schemas for; bump both together.
K8S_VERSION = "1.37"

NAMESPACE = "schedbe-system"
IMAGE_BIN = "/usr/local/bin/schedbe"      # where deploy/container/Containerfile puts it
STATE_DIR = "/run/schedbe"
SCX_STATE = "/sys/kernel/sched_ext/state"


# ------------------------------------------------------------------ manifest helpers

def documents(path=DAEMONSET_YAML):
    """The non-empty YAML documents of a manifest file."""
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def find(kind, name=None, path=DAEMONSET_YAML):
    hits = [d for d in documents(path)
            if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected one {kind} {name or ''} in {path}, found {len(hits)}"
    return hits[0]


def daemonset():
    return find("DaemonSet", "schedbe")


def pod_spec():
    return daemonset()["spec"]["template"]["spec"]


def main_container():
    cs = [c for c in pod_spec()["containers"] if c["name"] == "schedbe"]
    assert len(cs) == 1, "the DaemonSet has no container named schedbe"
    return cs[0]


def init_container():
    cs = pod_spec().get("initContainers", [])
    assert len(cs) == 1, f"expected one initContainer (schedbe thaw), found {len(cs)}"
    return cs[0]


def container_argv(c):
    return list(c.get("command", [])) + list(c.get("args", []))


def volume(name):
    vs = [v for v in pod_spec()["volumes"] if v["name"] == name]
    assert len(vs) == 1, f"no volume named {name}"
    return vs[0]


def mounts(c):
    """mountPath -> (volumeMount, volume) of a container."""
    return {m["mountPath"]: (m, volume(m["name"])) for m in c.get("volumeMounts", [])}


def config_path_in_container():
    """Where the ConfigMap's schedbe.toml appears in the main container."""
    for path, (m, v) in mounts(main_container()).items():
        if "configMap" in v:
            items = v["configMap"].get("items") or [{"key": "schedbe.toml", "path": "schedbe.toml"}]
            item = [i for i in items if i["key"] == "schedbe.toml"]
            assert item, f"volume {v['name']} does not project schedbe.toml"
            return f"{path.rstrip('/')}/{item[0]['path']}"
    raise AssertionError("the main container mounts no ConfigMap")


def config_toml_text():
    cm_name = [v for _, v in mounts(main_container()).values() if "configMap" in v][0]["configMap"]["name"]
    return find("ConfigMap", cm_name)["data"]["schedbe.toml"]


def probe_command():
    return list(main_container()["readinessProbe"]["exec"]["command"])


def host_argv(c, config=None, state_file=None):
    """A container's exact command line, with the image's binary replaced by the
    one built here and, if given, the config file and the --state-file path
    replaced by local ones (nothing else changes)."""
    argv = container_argv(c)
    assert argv and argv[0] == IMAGE_BIN, f"{c['name']}: command must start with {IMAGE_BIN}: {argv}"
    argv[0] = str(tl.SCHEDBE)
    cfg_path = config_path_in_container()
    out = []
    for i, a in enumerate(argv):
        prev = argv[i - 1] if i else None
        if config is not None and prev == "--config" and a == cfg_path:
            a = str(config)
        elif state_file is not None and prev == "--state-file":
            a = str(state_file)
        out.append(a)
    return out


def config_struct_fields():
    """name -> Rust type of the pub fields of `struct Config` in config.rs."""
    text = CONFIG_RS.read_text()
    m = re.search(r"pub struct Config\s*\{(.*?)\n\}", text, re.S)
    assert m, f"no `pub struct Config {{ ... }}` in {CONFIG_RS}"
    fields = dict(re.findall(r"^\s*pub\s+(\w+)\s*:\s*([^,\n]+),", m.group(1), re.M))
    assert fields, f"no pub fields parsed out of struct Config in {CONFIG_RS}"
    return fields


def rust_type_ok(rust_type, value):
    t = rust_type.replace(" ", "")
    if t == "bool":
        return isinstance(value, bool)
    if t in ("u8", "u16", "u32", "u64", "usize"):
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if t in ("i32", "i64"):
        return isinstance(value, int) and not isinstance(value, bool)
    if t in ("f32", "f64"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "String":
        return isinstance(value, str)
    if t == "Vec<String>":
        return isinstance(value, list) and all(isinstance(x, str) for x in value)
    return True  # a type this check does not know: schedbe's own parser decides


def frozen_cgroups():
    """Cgroups under /sys/fs/cgroup with cgroup.freeze = 1."""
    found = []
    for d, dirs, files in os.walk(tl.CGROOT):
        if "cgroup.freeze" in files:
            try:
                if Path(d, "cgroup.freeze").read_text().strip() == "1":
                    found.append("/" + os.path.relpath(d, tl.CGROOT))
            except OSError:
                pass
    return found


def run_probe(timeout=10):
    return subprocess.run(probe_command(), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout)


# ------------------------------------------------------------------ schema validation

def kv_version():
    if not KUBERNETES_VALIDATE.exists():
        pytest.fail(f"{KUBERNETES_VALIDATE} missing: run `make setup` (scripts/setup.sh installs it)")
    r = subprocess.run([KUBERNETES_VALIDATE, "--version"], capture_output=True, text=True, timeout=60)
    return r.stdout.strip()


def test_kubernetes_validate_pinned():
    """The installed kubernetes-validate is the version setup.sh pins, and it has
    schemas for K8S_VERSION."""
    m = re.search(r'^KV_VERSION=(\S+)', SETUP_SH.read_text(), re.M)
    assert m, "scripts/setup.sh does not pin KV_VERSION"
    pinned = m.group(1).strip("\"'")
    assert kv_version() == pinned, f"installed kubernetes-validate {kv_version()}, setup.sh pins {pinned}"
    r = subprocess.run([VENV / "bin" / "python", "-c",
                        "import kubernetes_validate.utils as u; print(' '.join(u.all_versions()))"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    versions = r.stdout.split()
    tl.log(f"kubernetes-validate {pinned}: schemas for {versions[0]} .. {versions[-1]}")
    assert any(v == K8S_VERSION or v.startswith(K8S_VERSION + ".") for v in versions), \
        f"kubernetes-validate {pinned} has no schemas for {K8S_VERSION}: {versions}"


def test_manifests_exist():
    assert DAEMONSET_YAML in MANIFESTS, f"{DAEMONSET_YAML} missing"


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_manifest_validates(manifest):
    """kubernetes-validate --strict (unknown fields are errors) accepts every
    document of the file against Kubernetes K8S_VERSION. A document of a kind it
    has no schema for only gets a WARN from the tool: that fails here too."""
    kv_version()
    docs = documents(manifest)
    assert docs, f"{manifest} has no YAML documents"
    for d in docs:
        assert {"apiVersion", "kind", "metadata"} <= d.keys(), f"incomplete document: {d}"
    r = subprocess.run([KUBERNETES_VALIDATE, "--strict", "-k", K8S_VERSION, str(manifest)],
                       capture_output=True, text=True, timeout=300)
    out = (r.stdout + r.stderr).strip()
    tl.log(f"kubernetes-validate --strict -k {K8S_VERSION} {manifest.name} -> {r.returncode}\n{out}")
    assert r.returncode == 0, f"kubernetes-validate failed against {K8S_VERSION}:\n{out}"
    passed = [l for l in out.splitlines() if l.startswith("INFO ") and " passed " in l]
    assert len(passed) == len(docs), \
        f"{len(docs)} documents, {len(passed)} validated against {K8S_VERSION}:\n{out}"


# ------------------------------------------------------------------ what schedbe relies on

def test_daemonset_properties():
    ds = daemonset()
    assert ds["metadata"]["namespace"] == NAMESPACE
    find("Namespace", NAMESPACE)
    sa = find("ServiceAccount", pod_spec()["serviceAccountName"])
    assert sa["metadata"]["namespace"] == NAMESPACE
    labels = {"app.kubernetes.io/name": "schedbe"}
    assert labels.items() <= ds["spec"]["selector"]["matchLabels"].items()
    assert labels.items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxUnavailable": 1}}

    spec = pod_spec()
    assert spec.get("hostPID") is True, "schedbe must see host PIDs (hostPID: true)"
    assert spec.get("priorityClassName") == "system-node-critical"
    assert spec.get("nodeSelector", {}).get("kubernetes.io/os") == "linux"
    assert {"operator": "Exists"} in spec.get("tolerations", []), \
        "no catch-all toleration (operator: Exists, no key): schedbe would miss tainted nodes"
    grace = spec.get("terminationGracePeriodSeconds")
    assert grace is not None and 10 <= grace <= 60, f"terminationGracePeriodSeconds {grace}"

    main, init = main_container(), init_container()
    for c in (main, init):
        assert c.get("securityContext", {}).get("privileged") is True, f"{c['name']} not privileged"
        assert c["image"] == main["image"], "the initContainer must run the same image"
        assert c.get("imagePullPolicy") == "IfNotPresent"

    # The main command line: `schedbe run --config <the ConfigMap's file> ...`.
    argv = container_argv(main)
    assert argv[:2] == [IMAGE_BIN, "run"], argv
    assert "--config" in argv and argv[argv.index("--config") + 1] == config_path_in_container(), \
        f"--config does not point at the mounted ConfigMap ({config_path_in_container()}): {argv}"
    # No lifecycle hook that could kill it before SIGTERM does its thawing.
    assert "preStop" not in main.get("lifecycle", {}), "schedbe handles SIGTERM itself"

    # Requests make the pod Burstable (its own cgroup LC, not BestEffort = BE);
    # no CPU limit, which would throttle the scheduler daemon itself.
    res = main.get("resources", {})
    assert {"cpu", "memory"} <= res.get("requests", {}).keys(), f"requests: {res}"
    assert "cpu" not in res.get("limits", {}), "a CPU limit would throttle the scheduler"

    m = mounts(main)
    want = {  # mountPath: (host path, read-only)
        "/sys/fs/cgroup": ("/sys/fs/cgroup", False),
        "/sys/kernel": ("/sys/kernel", None),
        "/sys/fs/bpf": ("/sys/fs/bpf", None),
        STATE_DIR: (STATE_DIR, False),
        "/boot": ("/boot", True),
        "/lib/modules": ("/lib/modules", True),
    }
    for path, (host, ro) in want.items():
        assert path in m, f"main container does not mount {path}"
        vm, vol = m[path]
        assert vol.get("hostPath", {}).get("path") == host, f"{path}: volume {vol}"
        if ro is not None:
            assert bool(vm.get("readOnly", False)) == ro, f"{path}: readOnly should be {ro}"
    assert m[STATE_DIR][1]["hostPath"].get("type") == "DirectoryOrCreate"

    # The initContainer thaws the same state file, on the same host directory,
    # with the cgroup tree writable.
    iargv = container_argv(init)
    assert iargv[:2] == [IMAGE_BIN, "thaw"], iargv
    cfg = tomllib.loads(config_toml_text())
    state_file = cfg.get("state_file", f"{STATE_DIR}/parked.json")
    if "--state-file" in iargv:
        assert iargv[iargv.index("--state-file") + 1] == state_file, \
            f"initContainer thaws another file than the config's state_file {state_file}: {iargv}"
    else:
        assert state_file == f"{STATE_DIR}/parked.json", "thaw uses the default state file"
    assert state_file.startswith(STATE_DIR + "/"), f"state_file {state_file} is not on the {STATE_DIR} hostPath"
    im = mounts(init)
    for path in ("/sys/fs/cgroup", STATE_DIR):
        assert path in im and not im[path][0].get("readOnly", False), f"initContainer lacks rw {path}"
        assert im[path][1]["hostPath"]["path"] == path

    # Readiness: sched_ext enabled with schedbe as the root scheduler.
    cmd = probe_command()
    assert cmd[:2] in (["/bin/sh", "-c"], ["sh", "-c"]) and len(cmd) == 3, cmd
    assert "/sys/kernel/sched_ext" in cmd[2] and "state" in cmd[2] and "root/ops" in cmd[2], cmd[2]
    assert "enabled" in cmd[2] and "schedbe" in cmd[2], cmd[2]


def test_config_keys_are_config_fields():
    """schedbe.toml in the ConfigMap parses, and uses only pub fields of Config
    (schedbe rejects unknown keys) with values of their types."""
    fields = config_struct_fields()
    for must in ("park", "park_after_ms", "be_cgroups", "state_file"):
        assert must in fields, f"parsed Config fields look wrong: {sorted(fields)}"
    cfg = tomllib.loads(config_toml_text())
    tl.log(f"ConfigMap schedbe.toml: {cfg}; Config fields: {sorted(fields)}")
    unknown = sorted(set(cfg) - set(fields))
    assert not unknown, f"keys schedbe does not know (it would refuse to start): {unknown}; " \
                        f"valid: {sorted(fields)}"
    bad = {k: (v, fields[k]) for k, v in cfg.items() if not rust_type_ok(fields[k], v)}
    assert not bad, f"values of the wrong type (value, Rust type): {bad}"


# ------------------------------------------------------------------ a node without sched_ext

def test_readiness_probe_fails_without_schedbe():
    """The probe's exact shell command, here: no sched_ext on the host (or, in the
    VM, sched_ext with no scheduler loaded). It must fail and say why."""
    r = run_probe()
    out = (r.stdout + r.stderr).strip()
    tl.log(f"readiness probe -> {r.returncode}: {out!r}")
    assert r.returncode != 0, f"readiness probe succeeded with no schedbe loaded: {out!r}"
    assert out, "readiness probe failed without saying why"
    if not tl.scx_available():
        assert SCX_STATE in out and "sched_ext" in out, f"reason does not name sched_ext: {out!r}"
    else:
        assert tl.scx_state() in out, f"reason does not give the sched_ext state: {out!r}"


# (state file, root/ops file or None when absent) -> ready?
PROBE_CASES = {
    "schedbe-enabled": ("enabled", "schedbe_0.1.0_g0123abcd_x86_64_unknown_linux_gnu", True),
    "schedbe-plain-name": ("enabled", "schedbe", True),
    "other-scheduler": ("enabled", "rusty_1.0.4_x86_64_unknown_linux_gnu", False),
    "name-prefix-only": ("enabled", "schedbex", False),
    "enabling": ("enabling", "schedbe_0.1.0", False),
    "disabled": ("disabled", None, False),
    "no-sched_ext": (None, None, False),
}


@pytest.mark.parametrize("case", sorted(PROBE_CASES))
def test_readiness_probe_logic(case, tmp_path):
    """The probe's exact script with /sys/kernel/sched_ext pointed at a fake
    directory: ready only for sched_ext enabled with schedbe as root scheduler
    (the kernel shows the ops name with scx_utils' version suffix)."""
    state, ops, ready = PROBE_CASES[case]
    d = tmp_path / "sched_ext"
    if state is not None:
        (d / "root").mkdir(parents=True)
        (d / "state").write_text(state + "\n")
        if ops is not None:
            (d / "root" / "ops").write_text(ops + "\n")
    cmd = probe_command()
    assert cmd[2].count("/sys/kernel/sched_ext") >= 1
    cmd[2] = cmd[2].replace("/sys/kernel/sched_ext", str(d))
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    out = (r.stdout + r.stderr).strip()
    assert (r.returncode == 0) == ready, f"{case}: exit {r.returncode}, want ready={ready}: {out!r}"
    if not ready:
        assert out, f"{case}: the probe failed without saying why"
        if state is not None:
            assert state in out, f"{case}: reason does not give the state: {out!r}"


def cgroup_snapshot():
    if not (tl.CGROOT / "cgroup.controllers").exists():
        return None
    return sorted(p.name for p in tl.CGROOT.iterdir() if p.is_dir())


def test_pod_commands_on_node_without_sched_ext(tmp_path):
    """The initContainer's and the main container's exact command lines on this
    host, which has no sched_ext: `schedbe thaw` succeeds (nothing to thaw), then
    `schedbe run` exits non-zero with one line naming sched_ext (the pod's log),
    and nothing on the node changed."""
    if tl.scx_available():
        pytest.skip("this kernel has sched_ext: tests/test_deploy_vm.py runs these command lines")
    cfg = tmp_path / "schedbe.toml"
    cfg.write_text(config_toml_text())
    state = tmp_path / "parked.json"   # not the host's real /run/schedbe
    before = cgroup_snapshot()

    iargv = host_argv(init_container(), state_file=state)
    r = subprocess.run(iargv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    tl.log(f"{' '.join(iargv)} -> {r.returncode}: {r.stdout.strip()!r} {r.stderr.strip()!r}")
    assert r.returncode == 0 and "nothing to thaw" in r.stdout, r

    argv = host_argv(main_container(), config=cfg)
    assert str(cfg) in argv, f"config path not substituted: {argv}"
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    tl.log(f"{' '.join(argv)} -> {r.returncode}: {r.stderr.strip()!r}")
    assert r.returncode != 0, f"schedbe run exited 0 without sched_ext: {r}"
    assert len(lines) == 1 and lines[0].startswith("schedbe: error:"), \
        f"expected one 'schedbe: error:' line, got {r.stderr!r}"
    # The config is checked before the kernel: a bad ConfigMap would be named here.
    assert "sched_ext" in lines[0] and "config" not in lines[0], lines[0]
    assert cgroup_snapshot() == before, "schedbe run changed the cgroup tree"
    assert not state.exists()
    assert not frozen_cgroups()
