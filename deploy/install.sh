#!/usr/bin/env bash
# usage: [PREFIX=DIR] [DESTDIR=DIR] [BUILD=DIR] deploy/install.sh   (make install)
# make install: the programs, the systemd units, the example settings and
# the client library (libairlock.a, headers, airlock.pc).
#   PREFIX (default /usr/local), DESTDIR (staging root, default none), BUILD.
# The configuration itself (/etc/airlock/) is the operator's: README "Using it".
set -euo pipefail
# --help: the comment above; no other argument is taken
case "${1:-}" in
-h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
"") ;;
*) echo "$(basename "$0"): no arguments (see $(basename "$0") --help)" >&2; exit 2 ;;
esac
BUILD=${BUILD:-build}
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
here=$(cd "$(dirname "$0")" && pwd)
bin="$DESTDIR$PREFIX/bin"
units="$DESTDIR$PREFIX/lib/systemd/system"
share="$DESTDIR$PREFIX/share/airlock"
install -d "$bin" "$units" "$share"
# the worker's helpers sit beside it, owned by root (its --helper-dir default)
for p in airlock airlock-scheduler airlock-worker airlock-gateway airlock-sandbox-init \
	airlock-oci-shim airlock-exec airlock-egress-fwd; do
	install -m 0755 "$BUILD/$p" "$bin/$p"
done
for u in "$here"/systemd/*.service; do
	sed "s|/usr/local/bin/|$PREFIX/bin/|g" "$u" >"$units/$(basename "$u")"
	chmod 0644 "$units/$(basename "$u")"
done
install -m 0644 "$here"/systemd/*.env.example "$here/policy.example.yaml" \
	"$here/redis-users.acl.in" "$share/"
install -m 0755 "$here/redis-acl.sh" "$share/"
# the client library: libairlock.a, its headers (as make headers lays them
# out: <airlock/client/client.h> ...) and a pkg-config file for it
lib="$DESTDIR$PREFIX/lib"
inc="$DESTDIR$PREFIX/include"
install -d "$lib/pkgconfig" "$inc"
install -m 0644 "$BUILD/libairlock.a" "$lib/libairlock.a"
rm -rf "$inc/airlock"
cp -r "$BUILD/include/airlock" "$inc/airlock"
find "$inc/airlock" -type d -exec chmod 0755 {} + -o -type f -exec chmod 0644 {} +
cat >"$lib/pkgconfig/airlock.pc" <<PC
prefix=$PREFIX
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: airlock
Description: Airlock's client library: submit, wait, run, cancel and follow jobs
Version: 1
Requires: hiredis libevent msgpack jansson libcrypto libcurl
Cflags: -I\${includedir}
Libs: -L\${libdir} -lairlock
PC
echo "installed in $DESTDIR$PREFIX (units: $units; library: $lib/libairlock.a, airlock.pc)"
