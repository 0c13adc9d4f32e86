#!/bin/bash
# build.sh - (re)build Airlock's container images from Debian packages.
#
#   deploy/images/build.sh [--out DIR] [python|toolchain|all]
#
# Each image is a root filesystem directory, DIR/NAME (default DIR:
# /var/lib/airlock/images), made with `debootstrap --variant=minbase` from
# the mirror this host's apt already uses, plus:
#   python     /usr/bin/python3 with its standard library (Debian's python3)
#   toolchain  gcc, g++, make, libc6-dev and python3 (graders, CI)
# A build goes to DIR/NAME.new and replaces DIR/NAME only when complete. The
# image's content hash (sha256 over the sorted list of every path, its mode,
# owner, link target and file contents) is written to DIR/NAME/.airlock-image
# and reported by the container backend in each result's info.image.
set -euo pipefail

OUT=/var/lib/airlock/images
SUITE=bookworm
while [ $# -gt 0 ]; do
	case "$1" in
	--out) OUT="$2"; shift 2 ;;
	--suite) SUITE="$2"; shift 2 ;;
	-h|--help) sed -n '2,14p' "$0"; exit 0 ;;
	-*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
WHICH="${1:-all}"
case "$WHICH" in
python|toolchain) NAMES=("$WHICH") ;;
all) NAMES=(python toolchain) ;;
*) echo "build.sh: unknown image '$WHICH' (python, toolchain or all)" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "build.sh: needs root (debootstrap)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "build.sh: install debootstrap" >&2; exit 1; }

# The mirror: whatever this host's apt is configured with (deb822 or
# one-line format); AIRLOCK_MIRROR overrides.
mirror() {
	if [ -n "${AIRLOCK_MIRROR:-}" ]; then echo "$AIRLOCK_MIRROR"; return; fi
	local m
	m=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
	[ -n "$m" ] || m=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' \
		/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
	[ -n "$m" ] || { echo "build.sh: no Debian mirror in /etc/apt; set AIRLOCK_MIRROR" >&2; exit 1; }
	echo "$m"
}

packages() {
	case "$1" in
	python) echo python3 ;;
	toolchain) echo python3,gcc,g++,make,libc6-dev ;;
	esac
}

# Content hash: stable across rebuilds of identical content.
content_hash() {
	(cd "$1" && find . -path ./.airlock-image -prune -o -print0 | LC_ALL=C sort -z |
		while IFS= read -r -d '' p; do
			printf '%s %s\n' "$(stat -c '%f %u %g' "$p")" "$p"
			if [ -L "$p" ]; then readlink "$p"
			elif [ -f "$p" ]; then sha256sum <"$p" | cut -d' ' -f1
			fi
		done) | sha256sum | cut -d' ' -f1
}

MIRROR=$(mirror)
mkdir -p "$OUT"
for name in "${NAMES[@]}"; do
	dst="$OUT/$name" tmp="$OUT/$name.new"
	rm -rf "$tmp"
	echo "build.sh: $name: debootstrap $SUITE from the host's mirror into $tmp" >&2
	debootstrap --variant=minbase --include="$(packages "$name")" "$SUITE" "$tmp" "$MIRROR" >"$OUT/$name.log" 2>&1 ||
		{ echo "build.sh: debootstrap failed; see $OUT/$name.log" >&2; exit 1; }
	# Nothing of the build's caches in the image; the job's user exists.
	rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/* "$tmp"/var/log/*
	grep -q '^job:' "$tmp/etc/passwd" || echo 'job:x:1000:1000:airlock job:/work:/bin/sh' >>"$tmp/etc/passwd"
	grep -q '^job:' "$tmp/etc/group" || echo 'job:x:1000:' >>"$tmp/etc/group"
	mkdir -p "$tmp/work"
	echo "sha256:$(content_hash "$tmp")" >"$tmp/.airlock-image"
	rm -rf "$dst.old"
	[ -e "$dst" ] && mv "$dst" "$dst.old"
	mv "$tmp" "$dst"
	rm -rf "$dst.old"
	echo "build.sh: $name: $dst $(cat "$dst/.airlock-image")" >&2
done
