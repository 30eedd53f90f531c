#!/usr/bin/env bash
# Fetch the newest Debian trixie-backports kernel whose config has
# CONFIG_SCHED_CLASS_EXT=y and unpack it under .cache/kernel/<version>/.
# Uses a private apt configuration, so the host's sources and packages are untouched.
# Prints the unpacked directory on stdout. Idempotent: a verified cache is reused.
#
# SCHEDBE_KERNEL_SERIES=6.12 (a version prefix) picks the newest kernel of that
# series instead, e.g. to check the oldest supported kernel; it is cached beside
# the default one and does not replace it (.cache/kernel/current).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${SCHEDBE_CACHE:-$ROOT/.cache}
KDIR=$CACHE/kernel
APTDIR=$CACHE/apt
log() { printf 'fetch-kernel: %s\n' "$*" >&2; }

# An unpacked kernel directory holds usr/lib/modules/<ver>/ and, made here,
# top-level links: vmlinuz, config, modules (the <ver> directory) and release.
normalize() { # $1 = unpacked dir: find the kernel image and config, link them at the top
    local m v c
    m=$(ls -d "$1"/usr/lib/modules/*/ 2>/dev/null | head -1) || return 1
    [[ -n $m ]] || return 1
    v=$(ls "$m"/vmlinuz "$1"/boot/vmlinuz-* 2>/dev/null | head -1)
    c=$(ls "$m"/config "$1"/boot/config-* 2>/dev/null | head -1)
    [[ -n $v && -n $c ]] || return 1
    ln -sfn "${v#"$1"/}" "$1/vmlinuz"; ln -sfn "${c#"$1"/}" "$1/config"
    ln -sfn "${m#"$1"/}" "$1/modules"; basename "$m" > "$1/release"
}
verify() { # $1 = unpacked dir; succeeds if it holds a sched_ext kernel
    [[ -e $1/vmlinuz && -e $1/config && -s $1/release ]] \
        && grep -qx 'CONFIG_SCHED_CLASS_EXT=y' "$1/config" \
        && grep -qx 'CONFIG_DEBUG_INFO_BTF=y' "$1/config"
}

# Reuse the cache when it is verified and was checked against the archive within a
# day (or SCHEDBE_OFFLINE=1). The stamp records the last successful index check.
SERIES=${SCHEDBE_KERNEL_SERIES:-}
if [[ -n $SERIES ]]; then
    [[ $SERIES =~ ^[0-9]+(\.[0-9]+)*$ ]] || { log "SCHEDBE_KERNEL_SERIES=$SERIES: expected a version prefix like 6.12"; exit 2; }
    cur=$(ls -d "$KDIR/$SERIES".*/ "$KDIR/$SERIES"+*/ 2>/dev/null | sort -Vr | head -1 || true)
    if [[ -n $cur ]] && verify "${cur%/}"; then echo "${cur%/}"; exit 0; fi
fi
STAMP=$KDIR/.checked
if [[ -z $SERIES && -L $KDIR/current ]] && verify "$KDIR/current" \
   && [[ ${SCHEDBE_OFFLINE:-0} == 1 || ( -e $STAMP && -z $(find "$STAMP" -mmin +1440 2>/dev/null) ) ]]; then
    readlink -f "$KDIR/current"; exit 0
fi
# Without network, a verified cached kernel is still good enough.
fallback() {
    if [[ -z $SERIES && -L $KDIR/current ]] && verify "$KDIR/current"; then
        log "$1; using the cached $(cat "$KDIR/current/release")"
        readlink -f "$KDIR/current"; exit 0
    fi
    log "$1"; exit 1
}

mkdir -p "$APTDIR"/{lists/partial,archives/partial,etc/preferences.d} "$KDIR"
cat > "$APTDIR/etc/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
SRC
APT=(-o Dir::Etc::SourceList="$APTDIR/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o Dir::Etc::PreferencesParts="$APTDIR/etc/preferences.d"
     -o Dir::State::Lists="$APTDIR/lists" -o Dir::Cache::Archives="$APTDIR/archives"
     -o Dir::Cache="$APTDIR" -o APT::Architecture=amd64 -o Debug::NoLocking=1)
log "reading the trixie-backports index"
apt-get "${APT[@]}" update -qq >/dev/null 2>&1 || apt-get "${APT[@]}" update -qq \
    || fallback "cannot read the trixie-backports index"

# Candidates, newest first: linux-binary-<ver>-amd64 (split packaging) and the
# classic linux-image-<ver>-amd64. The cloud flavour has no sched_ext.
mapfile -t cands < <(apt-cache "${APT[@]}" pkgnames linux- 2>/dev/null \
    | grep -E '^linux-(binary|image)-[0-9][0-9.]*(\+[a-z0-9]+)?(-[0-9]+)?-amd64$' \
    | sed -E 's/^linux-(binary|image)-//' | sort -Vur)
if [[ -n $SERIES ]]; then
    mapfile -t cands < <(printf '%s\n' "${cands[@]}" | grep -E "^${SERIES//./\\.}[.+]" || true)
    ((${#cands[@]})) || { log "no $SERIES kernel in trixie(-backports)"; exit 1; }
    # the series kernel does not become the default one
    current_link() { :; }
else
    current_link() { ln -sfn "$1" "$KDIR/current"; touch "$STAMP"; }
fi
((${#cands[@]})) || fallback "no amd64 kernel found in trixie(-backports)"

for ver in "${cands[@]}"; do
    dest=$KDIR/$ver
    if verify "$dest"; then current_link "$ver"; echo "$dest"; exit 0; fi
    work=$(mktemp -d "$KDIR/.tmp.XXXX"); chmod 755 "$work"  # apt's _apt user writes here
    log "trying $ver"
    pkgs=()
    if apt-cache "${APT[@]}" show "linux-binary-$ver" >/dev/null 2>&1; then
        pkgs=("linux-binary-$ver" "linux-modules-$ver")
        # newer split packaging keeps config and System.map in linux-base-<ver>
        apt-cache "${APT[@]}" show "linux-base-$ver" >/dev/null 2>&1 && pkgs+=("linux-base-$ver")
    else
        pkgs=("linux-image-$ver")
    fi
    if (cd "$work" && apt-get "${APT[@]}" download "${pkgs[@]}" >"$work/apt.log" 2>&1); then
        for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
        rm -f "$work"/*.deb
        if normalize "$work/root" && verify "$work/root"; then
            rm -rf "$dest"; mv "$work/root" "$dest"; rm -rf "$work"
            current_link "$ver"
            log "using $ver"
            echo "$dest"; exit 0
        fi
        log "$ver: config lacks CONFIG_SCHED_CLASS_EXT=y, skipping"
    else
        log "$ver: download failed: $(grep -E "^E:" "$work/apt.log" | head -1)"
    fi
    rm -rf "$work"
done
fallback "no candidate kernel has CONFIG_SCHED_CLASS_EXT=y"
