#!/usr/bin/env bash
# The installed headers (make headers) compile on their own: each one, and a
# program using the client library built against build/include and
# libairlock.a only; and every header of the tree compiles alone.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
make -s BUILD="$BUILD" headers >/dev/null || { echo "not ok 1 - make headers"; exit 1; }
inc="$BUILD/include"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
for h in $(cd "$inc" && find airlock -name '*.h' | sort); do
	n=$((n + 1))
	printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$tmp/one.c"
	if cc -std=gnu11 -D_GNU_SOURCE -Wall -Werror -fsyntax-only -I"$inc" \
		$(pkg-config --cflags msgpack hiredis jansson 2>/dev/null) "$tmp/one.c" 2>"$tmp/err"; then
		echo "ok $n - <$h> compiles on its own"
	else
		echo "not ok $n - <$h> compiles on its own"
		sed 's/^/# /' "$tmp/err" | head -5
		bad=1
	fi
done
# every header of the tree alone too (the daemons' own included): each
# includes what it uses
cflags=$(pkg-config --cflags hiredis libevent msgpack libseccomp libcurl jansson yaml-0.1 libvirt \
	libxml-2.0 2>/dev/null)
for h in $(git ls-files '*.h'); do
	n=$((n + 1))
	printf '#include "%s"\nint main(void) { return 0; }\n' "$PWD/$h" >"$tmp/one.c"
	if cc -std=gnu11 -D_GNU_SOURCE -Wall -Werror -fsyntax-only $cflags -I/usr/include/hiredis \
		"$tmp/one.c" 2>"$tmp/err"; then
		echo "ok $n - $h compiles on its own"
	else
		echo "not ok $n - $h compiles on its own"
		sed 's/^/# /' "$tmp/err" | head -5
		bad=1
	fi
done
n=$((n + 1))
cat >"$tmp/prog.c" <<'C'
#include <airlock/client/client.h>
#include <airlock/proto/job.h>
#include <stdio.h>

int main(void)
{
	struct al_err err = { 0 };
	struct al_client *c = al_client_connect("unix:///nonexistent/airlock.sock", &err);

	printf("%s\n", c ? "connected" : err.msg);
	return c != NULL;
}
C
if cc -std=gnu11 -I"$inc" -o "$tmp/prog" "$tmp/prog.c" "$BUILD/libairlock.a" \
	$(pkg-config --libs hiredis libevent msgpack jansson libcrypto libcurl) 2>"$tmp/err" &&
	"$tmp/prog" | grep -q "nonexistent"; then
	echo "ok $n - a program against build/include and libairlock.a only builds and runs"
else
	echo "not ok $n - a program against build/include and libairlock.a only builds and runs"
	sed 's/^/# /' "$tmp/err" | head -8
	bad=1
fi
echo "1..$n"
exit $bad
