#!/usr/bin/env bash
# usage: deploy/install-deps.sh   (as root)
# Installs every Debian package that Airlock's build, tests and four backends need,
# and the tests' one npm package (pinned, in its own directory).
# Idempotent and non-interactive; runs `apt-get update` only when something is missing.
set -euo pipefail
# --help: the comment above; no other argument is taken
case "${1:-}" in
-h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
"") ;;
*) echo "$(basename "$0"): no arguments (see $(basename "$0") --help)" >&2; exit 2 ;;
esac

# Build: compilers, pkg-config and the -dev packages of every library we link.
build_pkgs=(
	build-essential pkg-config clang libclang-rt-dev clang-format-14
	libhiredis-dev libevent-dev libmsgpack-dev libseccomp-dev
	libcurl4-openssl-dev libssl-dev libvirt-dev libxml2-dev libjansson-dev libyaml-dev
	libarchive-dev
)
# Tests and backends: Redis, Debian's python3 for sandboxes and the interop
# test and pip (the egress test installs a package through the proxy), git
# (the worker's fetcher checks git inputs out with it; the tests serve them with git http-backend), OCI runtimes (runc, crun, and runsc: gVisor), bubblewrap and podman (benchmark baselines), QEMU and the pieces the
# microVM/VM images are built from, libvirt's daemon, network tooling,
# systemd's systemd-analyze (the units in deploy/systemd/ are checked; nothing is started),
# valgrind (tests/bench/redis_count.py counts Redis's instructions per job).
run_pkgs=(
	redis-server python3 python3-msgpack python3-redis python3-yaml python3-pip python3-venv python3-setuptools
	python3-wheel curl procps iproute2 util-linux git
	bubblewrap runc crun runsc uidmap podman
	qemu-system-x86 qemu-utils busybox-static cpio lz4 debootstrap
	linux-image-cloud-amd64
	libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients dnsmasq-base iptables e2fsprogs
	nodejs
	systemd valgrind
)

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
missing=()
for p in "${build_pkgs[@]}" "${run_pkgs[@]}"; do
	# dpkg-query prints "install ok installed" only for a fully installed package.
	if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
		missing+=("$p")
	fi
done

# Some images ship a nodejs build that bundles npm and conflicts with Debian's
# npm package: ask for npm only when no npm command exists.
command -v npm >/dev/null 2>&1 || missing+=(npm)

# libvirtd resolves these users at start-up (libvirt-daemon-system, which
# would make them, also brings an init system's units we do not use).
users() {
	local u
	for u in libvirt-qemu libvirt-dnsmasq; do
		getent passwd "$u" >/dev/null ||
			${SUDO:-} useradd --system --no-create-home --home-dir /var/lib/libvirt \
				--shell /usr/sbin/nologin --user-group "$u"
	done
}

# The tests' npm packages (client/python/tests/test_mcp_sdk.py drives
# airlock-mcp with the official MCP TypeScript SDK's client), pinned, in
# their own directory: nothing global.
NODE_DEPS=${AIRLOCK_NODE_DEPS:-/var/lib/airlock/node-test}
node_pkgs=("@modelcontextprotocol/sdk@1.32.2")
node_deps() {
	local want have
	for want in "${node_pkgs[@]}"; do
		have=$(sed -n 's/^ *"version": "\(.*\)",$/\1/p' \
			"$NODE_DEPS/node_modules/${want%@*}/package.json" 2>/dev/null | head -1 || true)
		[ "$have" = "${want##*@}" ] && continue
		echo "install-deps: npm install ${node_pkgs[*]} into $NODE_DEPS"
		${SUDO:-} mkdir -p "$NODE_DEPS"
		${SUDO:-} npm install --prefix "$NODE_DEPS" --no-audit --no-fund --loglevel=error \
			"${node_pkgs[@]}" >/dev/null
		return
	done
}

if [ "${#missing[@]}" -eq 0 ]; then
	users
	node_deps
	echo "install-deps: all ${#build_pkgs[@]}+${#run_pkgs[@]} packages present"
	exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# No init system runs services here; keep package scripts from starting daemons.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
	$SUDO chmod 755 /usr/sbin/policy-rc.d
	trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
users
node_deps
echo "install-deps: done"
