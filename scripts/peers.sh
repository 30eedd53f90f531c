#!/usr/bin/env bash
# Build the peer sched_ext schedulers `schedbe-bench overhead` compares schedbe
# with (docs/bench.md), from crates.io at pinned versions, into .cache/peers:
#
#   scripts/peers.sh            build what is missing; print the bin directory
#   scripts/peers.sh --force    build again even when present
#   scripts/peers.sh --check    build nothing; exit 1 when a peer is missing
#
# A peer already at its pinned version (.cache/peers/VERSIONS, bin/NAME) is
# skipped, so a second run takes a second. Needs cargo and what schedbe's own
# build needs (clang >= 16, libelf, zlib, pkg-config: scripts/setup.sh).
# Building both takes 10-20 minutes on 2 cores.
#
# Environment: SCHEDBE_PEERS_DIR (default <repo>/.cache/peers),
# CARGO_TARGET_DIR (cargo's build directory; default a temporary one, removed
# after), CARGO_BUILD_JOBS.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${SCHEDBE_PEERS_DIR:-$ROOT/.cache/peers}
# name=version; the newest releases that build with the workspace's toolchain
# (rust-version 1.91), the same scx release as schedbe's scx_utils.
PEERS=(scx_bpfland=1.1.4 scx_lavd=1.1.4)

log() { printf 'peers: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

force=0 check=0
for a in "$@"; do
    case $a in
        --force) force=1 ;;
        --check) check=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
        *) die "unknown argument $a (see --help)" ;;
    esac
done

export PATH=$HOME/.cargo/bin:$PATH
mkdir -p "$DIR/bin"
versions=$DIR/VERSIONS
touch "$versions"

have() { # name version: built at that version?
    [[ -x $DIR/bin/$1 ]] && grep -qx "$1 $2" "$versions"
}

missing=0
for p in "${PEERS[@]}"; do
    name=${p%%=*} ver=${p#*=}
    if ((!force)) && have "$name" "$ver"; then
        log "$name $ver: present"
        continue
    fi
    if ((check)); then
        log "$name $ver: missing"
        missing=1
        continue
    fi
    command -v cargo >/dev/null || die "cargo not found: install Rust (scripts/setup.sh says how)"
    log "$name $ver: building (cargo install --locked; minutes)"
    args=(install --locked --version "$ver" --root "$DIR" "$name")
    ((force)) && args+=(--force)
    cargo "${args[@]}" || die "$name $ver: cargo install failed (see above)"
    "$DIR/bin/$name" --version >/dev/null 2>&1 || die "$name $ver: built, but '$DIR/bin/$name --version' fails"
    # one line per peer: "name version"
    { grep -v "^$name " "$versions" || true; echo "$name $ver"; } >"$versions.new"
    mv "$versions.new" "$versions"
done
((missing)) && die "missing peers: run scripts/peers.sh"
echo "$DIR/bin"
