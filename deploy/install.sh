#!/usr/bin/env bash
# make install: the programs, the systemd units and the example settings.
#   PREFIX (default /usr/local), DESTDIR (staging root, default none), BUILD.
# The configuration itself (/etc/airlock/) is the operator's: README "Using it".
set -euo pipefail
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
echo "installed in $DESTDIR$PREFIX (units: $units)"
