#!/bin/bash
# build.sh - (re)build Airlock's image catalogue from Debian packages.
#
#   deploy/images/build.sh [--out DIR] [--agent FILE] [--jobs N] [NAME...|microvm|all]
#
# The catalogue: one recipe per image in deploy/images/recipes/NAME/ (or
# --recipes DIR): `packages`, the Debian packages it holds (one per line, #
# comments), optionally `script`, run in the image as root (chroot)
# after they are installed, and optionally `warm`, the Python modules that
# a warm-pool microVM imports before its job (/.airlock-warm). Shipped:
# python (python3 with its whole standard library, numpy, pandas, pip,
# venv, pytest, pytest-xdist, coverage, hypothesis, tox, git), datascience
# (python3, numpy, pandas, pip and matplotlib, scipy, scikit-learn, PIL,
# requests, bs4, lxml, openpyxl, sympy: about 1.4 GB, Debian's scipy
# brings a C++ compiler and Boost headers for pythran), toolchain (gcc,
# g++, clang, make, cmake, ninja, pkg-config, autotools, valgrind, git,
# libc6-dev, python3), node (nodejs, npm, git), go (golang 1.19, gcc,
# git), rust (rustc 1.63, cargo, gcc, git). An operator adds an image
# by adding a recipe.
#
# Each image is a root filesystem directory, DIR/NAME (default DIR:
# /var/lib/airlock/images), made with `debootstrap --variant=minbase` from
# the mirror this host's apt already uses, with a job user (uid 1000) and
# /work; the container and process backends use that directory. From the
# same directory comes DIR/NAME.ext4, a read-only ext4 file system image that
# microVMs and service VMs get as a virtio block device. A build goes to
# DIR/NAME.new and replaces DIR/NAME only when complete. The image's content
# hash (sha256 over the sorted list of every path, its mode, owner, link
# target and file contents) is written to DIR/NAME/.airlock-image and
# reported in each result's info.image. An image built from the same inputs
# (suite, packages, script, this script's image format) is kept; AIRLOCK_REBUILD=1
# forces a build.
#
#   microvm    the guest (docs/backends/microvm.md): DIR/microvm/
#              vmlinux (Debian's linux-image-cloud-amd64, uncompressed so
#              that QEMU boots it through PVH) and initramfs.lz4 (lz4 legacy
#              frame: the static guest agent as /init, busybox-static, the
#              virtio modules the job channel, the image's disk, a service
#              VM's network card and disk need, a DHCP client script: no
#              interpreter, the job runs in its catalogue image), and
#              data.qcow2 (an empty 64 MiB ext4: service VMs get an overlay).
#              The same guest serves the microvm and vm backends.
#              --agent names the agent binary (`make microvm-image` passes
#              build/airlock-agent). The kernel and busybox packages are
#              fetched with `apt-get download` and cached in DIR/.debs; every
#              file of the initramfs gets mtime 0 and owner root, so the same
#              inputs give the same bytes; the sha256 of the three files is
#              written to DIR/microvm/.airlock-image.
#   all        every recipe (not the microvm guest).
set -euo pipefail

OUT=/var/lib/airlock/images
SUITE=bookworm
AGENT=
JOBS=1
while [ $# -gt 0 ]; do
	case "$1" in
	--jobs) JOBS="$2"; shift 2 ;;
	--out) OUT="$2"; shift 2 ;;
	--suite) SUITE="$2"; shift 2 ;;
	--agent) AGENT="$2"; shift 2 ;;
	--recipes) RECIPES="$2"; shift 2 ;;
	-h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
	-*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
RECIPES="${RECIPES:-$(cd "$(dirname "$0")" && pwd)/recipes}"
recipe_names() { (cd "$RECIPES" && for d in */; do [ -f "$d/packages" ] && echo "${d%/}"; done); }
NAMES=()
[ $# -gt 0 ] || set -- all
for w in "$@"; do
	case "$w" in
	all) mapfile -t -O "${#NAMES[@]}" NAMES < <(recipe_names) ;;
	microvm) NAMES+=(microvm) ;;
	*)
		if [[ ! "$w" =~ ^[a-z0-9][a-z0-9_-]*$ ]] || [ ! -f "$RECIPES/$w/packages" ]; then
			echo "build.sh: no recipe '$w' (recipes: $(recipe_names | tr '\n' ' ')microvm, all)" >&2
			exit 2
		fi
		NAMES+=("$w") ;;
	esac
done
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

# A recipe's packages, comma-separated (debootstrap --include).
packages() {
	sed -e 's/#.*//' "$RECIPES/$1/packages" | tr -s ' \t\n' '\n' | grep -v '^$' | LC_ALL=C sort -u | paste -sd, -
}

# Bump when the way an image is made changes (then every image is rebuilt).
IMAGE_FORMAT=4

# Content hash: stable across rebuilds of identical content. Every path
# with its mode, owner and link target, then every regular file's sha256,
# each list sorted: two passes of find and one sha256sum per batch of
# files (a process per file took minutes on the 50,000 files of
# datascience).
content_hash() {
	(cd "$1" && {
		find . -path ./.airlock-image -prune -o -printf '%p\t%M %U %G\t%l\n' | LC_ALL=C sort
		find . -path ./.airlock-image -prune -o -type f -print0 | LC_ALL=C sort -z |
			xargs -0 -r sha256sum
	}) | sha256sum | cut -d' ' -f1
}

# A read-only ext4 of directory $1 into file $2: no journal, no reserved
# blocks, fixed UUID, hash seed and time, so the same tree gives the same
# bytes; sized to the tree plus a margin (nothing is ever written to it).
make_blockimage() {
	local dir="$1" img="$2" kib inodes
	kib=$(du -s --apparent-size -k "$dir" | cut -f1)
	inodes=$(find "$dir" | wc -l)
	rm -f "$img"
	truncate -s $(((kib + kib / 5 + 32768) / 1024))M "$img"
	E2FSPROGS_FAKE_TIME=1 mkfs.ext4 -q -F -d "$dir" -m 0 -O ^has_journal -b 4096 \
		-N $((inodes + inodes / 5 + 1024)) -L airlock-image \
		-U 00000000-0000-0000-0000-00000000a1b2 -E hash_seed=00000000-0000-0000-0000-00000000a1b2 \
		"$img" >/dev/null
}

# A recipe's `warm` file: the modules a warm-pool microVM's interpreter
# imports before its job comes (docs/backends/microvm.md), one a line, #
# comments; written to the image as /.airlock-warm. None: no warm interpreter.
warm_modules() {
	[ -f "$RECIPES/$1/warm" ] || return 0
	sed -e 's/#.*//' "$RECIPES/$1/warm" | tr -s ' \t\n' '\n' | grep -v '^$' || true
}

script_hash() {
	if [ -f "$RECIPES/$1/script" ]; then sha256sum <"$RECIPES/$1/script" | cut -d' ' -f1; else echo none; fi
}

# /.airlock-preload: what the first moments of a job read (the shells' and
# interpreters' binaries, their libraries, Python's start-up modules). A VM
# reads these into its page cache while it boots, before it says ready, so
# that a warm VM's job starts from memory as if its files were in RAM.
make_preload() {
	local root="$1" bin f
	{
		for bin in /bin/sh /usr/bin/python3 /usr/bin/node; do
			[ -e "$root$bin" ] || continue
			f=$(readlink -f "$root$bin")
			case "$f" in "$root"/*) ;; *) continue ;; esac
			f=${f#"$root"}
			echo "$f"
			chroot "$root" ldd "$f" 2>/dev/null | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}'
		done
		if [ -x "$root/usr/bin/python3" ]; then
			chroot "$root" /usr/bin/python3 -B -c 'import sys
for m in list(sys.modules.values()):
    for f in (getattr(m, "__file__", None), getattr(m, "__cached__", None)):
        if f: print(f)' 2>/dev/null || true
		fi
	} | while IFS= read -r f; do
		[ -f "$root$f" ] && readlink -f "$root$f" | sed "s|^$root||"
	done | LC_ALL=C sort -u >"$root/.airlock-preload"
}

build_rootfs() {
	local name="$1" dst="$OUT/$1" tmp="$OUT/$1.new" inputs
	inputs="format $IMAGE_FORMAT
suite $SUITE
packages $(packages "$name")
script $(script_hash "$name")"
	# only a recipe with a warm file has this line (the others' inputs,
	# and so their images, stay as they were)
	[ -z "$(warm_modules "$name")" ] || inputs="$inputs
warm $(warm_modules "$name" | paste -sd' ' -)"
	if [ -z "${AIRLOCK_REBUILD:-}" ] && [ -f "$dst/.inputs" ] && [ "$(cat "$dst/.inputs")" = "$inputs" ] &&
		[ -f "$OUT/$name.ext4" ]; then
		echo "build.sh: $name: up to date ($dst $(cat "$dst/.airlock-image"))" >&2
		return 0
	fi
	rm -rf "$tmp"
	echo "build.sh: $name: [1/4] debootstrap $SUITE ($(packages "$name")) into $tmp (first time: a few minutes; log $OUT/$name.log)" >&2
	debootstrap --variant=minbase --include="$(packages "$name")" "$SUITE" "$tmp" "$MIRROR" >"$OUT/$name.log" 2>&1 ||
		{ echo "build.sh: debootstrap failed; see $OUT/$name.log" >&2; exit 1; }
	if [ -f "$RECIPES/$name/script" ]; then
		echo "build.sh: $name: [2/4] the recipe's script" >&2
		install -m 0755 "$RECIPES/$name/script" "$tmp/airlock-recipe-script"
		chroot "$tmp" /airlock-recipe-script >>"$OUT/$name.log" 2>&1 ||
			{ echo "build.sh: $name: the recipe's script failed; see $OUT/$name.log" >&2; exit 1; }
		rm -f "$tmp/airlock-recipe-script"
	else
		echo "build.sh: $name: [2/4] no recipe script" >&2
	fi
	# Nothing of the build's caches in the image; the job's user exists.
	rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/* "$tmp"/var/log/*
	grep -q '^job:' "$tmp/etc/passwd" || echo 'job:x:1000:1000:airlock job:/work:/bin/sh' >>"$tmp/etc/passwd"
	grep -q '^job:' "$tmp/etc/group" || echo 'job:x:1000:' >>"$tmp/etc/group"
	mkdir -p "$tmp/work" "$tmp/dev/shm" "$tmp/data" # data: a service VM's disk
	make_preload "$tmp"
	rm -f "$tmp/.airlock-warm"
	[ -z "$(warm_modules "$name")" ] || warm_modules "$name" >"$tmp/.airlock-warm"
	echo "build.sh: $name: [3/4] content hash" >&2
	echo "sha256:$(content_hash "$tmp")" >"$tmp/.airlock-image"
	echo "build.sh: $name: [4/4] block image $OUT/$name.ext4 (for microVMs)" >&2
	make_blockimage "$tmp" "$OUT/$name.ext4.new"
	echo "$inputs" >"$tmp/.inputs"
	rm -rf "$dst.old"
	[ -e "$dst" ] && mv "$dst" "$dst.old"
	mv "$tmp" "$dst"
	mv "$OUT/$name.ext4.new" "$OUT/$name.ext4"
	rm -rf "$dst.old"
	echo "build.sh: $name: $dst $(cat "$dst/.airlock-image") ($(du -sh --apparent-size "$OUT/$name.ext4" | cut -f1) block image)" >&2
}

# The Debian package's files, extracted under $2 (the .deb is cached).
deb_extract() {
	mkdir -p "$OUT/.debs"
	local deb
	deb=$(ls "$OUT/.debs/$1"_*.deb 2>/dev/null | head -1 || true)
	if [ -z "$deb" ]; then
		(cd "$OUT/.debs" && apt-get download "$1" >/dev/null 2>&1) ||
			{ echo "build.sh: apt-get download $1 failed (run apt-get update?)" >&2; exit 1; }
		deb=$(ls "$OUT/.debs/$1"_*.deb | head -1)
	fi
	dpkg-deb -x "$deb" "$2"
}

build_microvm() {
	local dst="$OUT/microvm" tmp="$OUT/microvm.new" kver m py
	[ -n "$AGENT" ] && [ -x "$AGENT" ] || { echo "build.sh: microvm needs --agent FILE (make microvm-image builds it)" >&2; exit 1; }
	for tool in lz4 cpio dpkg-deb apt-get qemu-img; do
		command -v "$tool" >/dev/null || { echo "build.sh: install $tool" >&2; exit 1; }
	done
	# Cached: the same inputs (agent, packages, this script)
	# give the same image, so an up-to-date one is kept.
	local inputs
	inputs="agent $(sha256sum <"$AGENT" | cut -d' ' -f1)
kernel $(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}') $(apt-cache policy linux-image-cloud-amd64 | awk '/Candidate:/ {print $2}')
busybox $(apt-cache policy busybox-static | awk '/Candidate:/ {print $2}')
script $(sha256sum <"$0" | cut -d' ' -f1)"
	if [ -z "${AIRLOCK_REBUILD:-}" ] && [ -f "$dst/.inputs" ] && [ "$(cat "$dst/.inputs")" = "$inputs" ]; then
		echo "build.sh: microvm: up to date ($dst $(cat "$dst/.airlock-image"))" >&2
		return 0
	fi
	rm -rf "$tmp"
	mkdir -p "$tmp/k" "$tmp/b" "$tmp/root"
	kver=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	[ -n "$kver" ] || { echo "build.sh: cannot resolve linux-image-cloud-amd64" >&2; exit 1; }
	echo "build.sh: microvm: kernel $kver" >&2
	deb_extract "$kver" "$tmp/k"
	deb_extract busybox-static "$tmp/b"
	# vmlinuz is a bzImage with an lz4 (legacy frame) payload: cut it out
	# at the frame's magic so that QEMU can boot the ELF directly (PVH).
	local vmlinuz off
	vmlinuz=$(ls "$tmp"/k/boot/vmlinuz-* | head -1)
	off=$(LC_ALL=C grep -obUaP '\x02\x21\x4c\x18' "$vmlinuz" | head -1 | cut -d: -f1)
	[ -n "$off" ] || { echo "build.sh: no lz4 payload in $vmlinuz" >&2; exit 1; }
	tail -c +$((off + 1)) "$vmlinuz" | lz4 -dc 2>/dev/null >"$tmp/vmlinux" || true
	head -c4 "$tmp/vmlinux" | grep -q ELF || { echo "build.sh: could not extract vmlinux" >&2; exit 1; }

	local r="$tmp/root"
	# Debian's merged /usr layout, so that library paths match the image's.
	mkdir -p "$r"/{dev,proc,sys,tmp,run,work,etc,usr/bin,usr/lib/modules,usr/lib64}
	ln -s usr/bin "$r/bin"
	ln -s usr/lib "$r/lib"
	ln -s usr/lib64 "$r/lib64"
	ln -s usr/bin "$r/sbin"
	install -m 0755 "$AGENT" "$r/init"
	install -m 0755 "$tmp/b/bin/busybox" "$r/usr/bin/busybox"
	ln -s busybox "$r/usr/bin/sh"
	# microVMs need the channel's four, the balloon (its free pages back to
	# the host) and virtio_blk (the catalogue image as a disk; ext4 is built
	# into the kernel); service VMs (a PC with PCI devices, a network card
	# and disks) the rest too. The agent loads what its mode needs.
	for m in virtio_ring virtio virtio_mmio virtio_console virtio_balloon virtio_pci_legacy_dev \
		virtio_pci_modern_dev virtio_pci failover net_failover virtio_net virtio_blk; do
		find "$tmp"/k/lib/modules -name "$m.ko*" -exec cp {} "$r/lib/modules/" \;
		[ -e "$r/lib/modules/$m.ko" ] || { echo "build.sh: module $m.ko missing" >&2; exit 1; }
	done
	# Service VMs: busybox's DHCP client configures the card with this; a
	# default route only when the policy grants egress (kernel command line).
	mkdir -p "$r/usr/share/airlock"
	cat >"$r/usr/share/airlock/udhcpc.sh" <<'SH'
#!/bin/sh
B=/bin/busybox
case "$1" in
bound|renew)
	$B ip addr flush dev "$interface"
	$B ip addr add "$ip/${mask:-24}" dev "$interface"
	if [ -n "$router" ] && $B grep -q 'airlock.egress=1' /proc/cmdline; then
		$B ip route add default via "${router%% *}" dev "$interface"
	fi
	;;
esac
SH
	chmod 0755 "$r/usr/share/airlock/udhcpc.sh"
	printf 'root:x:0:0::/:/bin/sh\njob:x:1000:1000:airlock job:/work:/bin/sh\n' >"$r/etc/passwd"
	printf 'root:x:0:\njob:x:1000:\n' >"$r/etc/group"
	find "$r" -exec touch -h -d @0 {} +
	(cd "$r" && find . -print0 | LC_ALL=C sort -z | cpio -0 -o -H newc -R 0:0 --reproducible --quiet) |
		lz4 -l -9 -q >"$tmp/initramfs.lz4"
	# Service VMs' disk: an empty ext4 (owned by the job's uid) that each VM
	# gets a copy-on-write overlay of; fixed UUID, seed and time, so the
	# same bytes every build.
	truncate -s 64M "$tmp/data.raw"
	E2FSPROGS_FAKE_TIME=1 mkfs.ext4 -q -F -T small -U 00000000-0000-0000-0000-00000000a1a1 \
		-E root_owner=1000:1000,hash_seed=00000000-0000-0000-0000-00000000a1a1 "$tmp/data.raw"
	qemu-img convert -O qcow2 "$tmp/data.raw" "$tmp/data.qcow2"
	mkdir -p "$tmp/out"
	mv "$tmp/vmlinux" "$tmp/initramfs.lz4" "$tmp/data.qcow2" "$tmp/out/"
	echo "sha256:$(cat "$tmp/out/vmlinux" "$tmp/out/initramfs.lz4" "$tmp/out/data.qcow2" | sha256sum | cut -d' ' -f1)" >"$tmp/out/.airlock-image"
	echo "$kver" >"$tmp/out/kernel-package"
	echo "$inputs" >"$tmp/out/.inputs"
	rm -rf "$dst.old"
	[ -e "$dst" ] && mv "$dst" "$dst.old"
	mv "$tmp/out" "$dst"
	rm -rf "$dst.old" "$tmp"
	echo "build.sh: microvm: $dst $(cat "$dst/.airlock-image") ($(du -sh "$dst/initramfs.lz4" | cut -f1) initramfs)" >&2
}

command -v mkfs.ext4 >/dev/null || { echo "build.sh: install e2fsprogs (mkfs.ext4)" >&2; exit 1; }
MIRROR=$(mirror)
mkdir -p "$OUT"
# --jobs N: up to N images at once (each has its own directory and log;
# debootstrap waits on the mirror and dpkg as much as on the CPU)
pids=()
failed=0
for name in "${NAMES[@]}"; do
	if [ "$JOBS" -le 1 ]; then
		if [ "$name" = microvm ]; then build_microvm; else build_rootfs "$name"; fi
		continue
	fi
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || failed=1; done
	if [ "$name" = microvm ]; then build_microvm & else build_rootfs "$name" & fi
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ "$failed" = 0 ] || { echo "build.sh: an image failed to build (its message above)" >&2; exit 1; }
