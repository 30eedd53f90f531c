#!/usr/bin/env bash
# Install everything schedbe needs on a fresh Debian 12 (bookworm) machine, as root.
# Idempotent: each step checks before it acts, so re-running is quick.
set -euo pipefail

log() { printf 'setup: %s\n' "$*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
    echo "setup: must run as root (installs packages)" >&2
    exit 1
fi

PKGS=(clang-19 llvm-19 libelf-dev zlib1g-dev pkg-config qemu-system-x86 kmod
      stress-ng busybox-static python3-venv python3-matplotlib rt-tests udev)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# scx_cargo looks for "clang"; point it at clang-19 without touching /usr/bin.
for tool in clang llvm-strip bpftool; do :; done
if ! command -v clang >/dev/null || ! clang --version | grep -q 'version 1[6-9]\|version 2'; then
    ln -sf /usr/bin/clang-19 /usr/local/bin/clang
fi
command -v llvm-strip >/dev/null || ln -sf /usr/bin/llvm-strip-19 /usr/local/bin/llvm-strip

# virtme-ng, pinned, in its own venv so the system Python stays untouched.
VNG_VERSION=1.42
VENV=/opt/schedbe-venv
if ! "$VENV/bin/vng" --version 2>/dev/null | grep -q "$VNG_VERSION"; then
    log "installing virtme-ng $VNG_VERSION"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "virtme-ng==$VNG_VERSION"
fi
ln -sf "$VENV/bin/vng" /usr/local/bin/vng

log "ok"
