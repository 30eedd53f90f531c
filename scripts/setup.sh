#!/usr/bin/env bash
# Install everything schedbe needs on a fresh Debian 12 (bookworm) machine, as root.
# Idempotent: each step checks before it acts, so re-running is quick.
set -euo pipefail

log() { printf 'setup: %s\n' "$*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
    echo "setup: must run as root (installs packages)" >&2
    exit 1
fi

# udev is not needed: scripts/vm.sh does not rely on the guest's virtio-port
# symlinks, and installing it in a container can fail in its postinst.
# python3-pytest runs the test suite (tests/), make runs the top-level targets,
# systemd's systemd-analyze verifies the shipped unit (packaging/systemd),
# python3-yaml reads the Kubernetes manifests in the tests (deploy/kubernetes).
# linux-perf (perf bench sched), rt-tests (cyclictest) and stress-ng are workloads of
# `schedbe-bench overhead`; its C build uses gcc, else clang-19. memcached,
# sysbench and qemu-system-x86 (below) are workloads of `schedbe-bench akita-*`.
PKGS=(clang-19 llvm-19 libelf-dev zlib1g-dev pkg-config kmod
      stress-ng busybox-static python3-venv python3-pytest python3-matplotlib
      python3-yaml rt-tests linux-perf util-linux procps make ca-certificates systemd
      memcached sysbench)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || { sleep 5; apt-get update -qq; }
    # A half-configured package (e.g. a postinst that failed in a container) makes
    # every later install fail: finish pending configuration, then retry once.
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
        log "apt-get install failed; running dpkg --configure -a and retrying once"
        dpkg --configure -a || true
        apt-get install -y -qq --no-install-recommends -f >/dev/null || true
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    # Debian starts memcached as a service; the bench runs its own, in the VM.
    if [[ " ${missing[*]} " == *" memcached "* ]]; then
        systemctl disable --now memcached >/dev/null 2>&1 || true
    fi
fi

# QEMU >= 8. Bookworm's 7.2 crashes guests under multi-threaded TCG ("Oops: int3" in
# hot scheduler code) when the guest kernel patches its own text, which it does for
# static keys on every sched_ext load and unload. bookworm-backports has QEMU 10
# built for bookworm; backports are never picked by default, so nothing else moves.
qemu_ver=$(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null || true)
if ! dpkg --compare-versions "${qemu_ver:-0}" ge 1:8; then
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    export DEBIAN_FRONTEND=noninteractive
    if [[ $codename == bookworm ]]; then
        if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
            echo 'deb http://deb.debian.org/debian bookworm-backports main' \
                >/etc/apt/sources.list.d/schedbe-bookworm-backports.list
        fi
        log "installing qemu-system-x86 from bookworm-backports"
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends -t bookworm-backports qemu-system-x86 >/dev/null
    else
        log "installing qemu-system-x86"
        apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null
    fi
fi

# scx_cargo looks for "clang"; point it at clang-19 without touching /usr/bin.
if ! command -v clang >/dev/null || ! clang --version | grep -q 'version 1[6-9]\|version 2'; then
    ln -sf /usr/bin/clang-19 /usr/local/bin/clang
fi
command -v llvm-strip >/dev/null || ln -sf /usr/bin/llvm-strip-19 /usr/local/bin/llvm-strip

# virtme-ng, pinned, in its own venv so the system Python stays untouched.
VNG_VERSION=1.42
VENV=/opt/schedbe-venv
if ! "$VENV/bin/vng" --version 2>/dev/null | grep -q "$VNG_VERSION"; then
    log "installing virtme-ng $VNG_VERSION"
    /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "virtme-ng==$VNG_VERSION"
fi
ln -sf "$VENV/bin/vng" /usr/local/bin/vng

# kubernetes-validate, pinned, in the same venv: it ships the Kubernetes JSON
# schemas, so tests/test_deploy.py validates deploy/kubernetes/ offline.
KV_VERSION=1.37.0
if [[ $("$VENV/bin/kubernetes-validate" --version 2>/dev/null) != "$KV_VERSION" ]]; then
    log "installing kubernetes-validate $KV_VERSION"
    "$VENV/bin/pip" install -q "kubernetes-validate==$KV_VERSION"
fi

# Rust: installed with rustup on dev and CI machines (Debian's rustc is too old for
# scx_utils). Say so clearly instead of failing later inside cargo.
if ! command -v cargo >/dev/null && [[ ! -x ${CARGO_HOME:-$HOME/.cargo}/bin/cargo ]]; then
    log "WARNING: cargo not found; install Rust >= 1.91 with rustup (https://rustup.rs)"
fi

log "ok"
