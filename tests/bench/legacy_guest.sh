#!/bin/bash
# legacy_guest.sh - a benchmark fixture: the microVM guest as it was before
# the image catalogue (python3 with a trimmed standard library inside the
# initramfs, no disk), rebuilt from today's guest and python image, so that
# tests/bench/image_latency.py can measure the catalogue image against it
# in the same run. Not used by any tier.
#
#   legacy_guest.sh GUEST_DIR PYTHON_IMAGE_DIR OUT_DIR
set -euo pipefail
GUEST=$1 PY=$2 OUT=$3
TREE=$(mktemp -d /var/tmp/airlock-legacy-guest.XXXXXX)
trap 'rm -rf "$TREE"' EXIT
mkdir -p "$OUT"
chmod 755 "$TREE" # the archive's root: the job (uid 1000) traverses it
lz4 -dc "$GUEST/initramfs.lz4" | (cd "$TREE" && cpio -idm --quiet)

# A file of the python image and, for ELF files, every library it needs.
copy_with_libs() {
	local f="$1" lib
	[ -e "$TREE$f" ] && return 0
	mkdir -p "$TREE$(dirname "$f")"
	cp -a "$PY$f" "$TREE$f"
	if head -c4 "$PY$f" | grep -q ELF; then
		for lib in $(chroot "$PY" ldd "$f" 2>/dev/null | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}'); do
			copy_with_libs "$(readlink -f "$PY$lib" | sed "s|^$PY||")"
			[ "$(readlink -f "$PY$lib")" = "$PY$lib" ] || { mkdir -p "$TREE$(dirname "$lib")"; cp -a "$PY$lib" "$TREE$lib"; }
		done
	fi
}
py=$(readlink -f "$PY/usr/bin/python3" | sed "s|^$PY||")
copy_with_libs "$py"
ln -sf "$(basename "$py")" "$TREE/usr/bin/python3"
(cd "$PY" && find usr/lib/python3.11 \( -name test -o -name tests -o -name idlelib \
	-o -name tkinter -o -name turtledemo -o -name ensurepip -o -name lib2to3 \
	-o -name pydoc_data -o -name 'config-3.11-*' \) -prune -o -print0 |
	cpio -0 -pdm --quiet "$TREE")
for m in "$TREE"/usr/lib/python3.11/lib-dynload/*.so; do
	copy_with_libs "${m#"$TREE"}"
done
find "$TREE" -exec touch -h -d @0 {} +
(cd "$TREE" && find . -print0 | LC_ALL=C sort -z | cpio -0 -o -H newc -R 0:0 --reproducible --quiet) |
	lz4 -l -9 -q >"$OUT/initramfs.lz4"
cp "$GUEST/vmlinux" "$OUT/vmlinux"
echo "legacy-initramfs-python" >"$OUT/.airlock-image"
chmod 755 "$OUT"
echo "legacy_guest.sh: $OUT ($(du -sh "$OUT/initramfs.lz4" | cut -f1) initramfs)" >&2
