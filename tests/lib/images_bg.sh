#!/usr/bin/env bash
# The image catalogue the integration tests use (python, datascience,
# toolchain, node, go, rust), built in the background: kept while their
# recipes are unchanged, else rebuilt (about ten minutes the first time).
#
#   images_bg.sh start DIR   start the build (as root; else nothing), its
#                            output in DIR/build.log, its status in DIR/rc
#   images_bg.sh wait DIR    wait for it: its output, then "ok 1 - ..." or
#                            "not ok 1 - ..." (TAP), and its status
#
# `make test` starts it before it builds the programs, so that a fresh
# machine's ten minutes begin a minute sooner; tests/run.sh waits for it
# there (IMAGES_BG), or starts its own.
set -u
cmd=$1 dir=$(realpath -m "$2")
case $cmd in
start)
	[ "$(id -u)" = 0 ] || exit 0
	rm -rf "$dir" && mkdir -p "$dir" || exit 1
	cd "$(dirname "$0")/../.." || exit 1
	setsid bash -c 'deploy/images/build.sh --jobs 2 python datascience toolchain node go rust \
		>"$1/build.log" 2>&1; echo $? >"$1/rc"' images "$dir" </dev/null >/dev/null 2>&1 &
	echo $! >"$dir/pid"
	;;
wait)
	[ -f "$dir/pid" ] || { echo "not ok 1 - no catalogue build was started in $dir"; exit 1; }
	while [ ! -f "$dir/rc" ]; do
		if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
			sleep 1 # (it may have just written its status)
			[ -f "$dir/rc" ] && break
			echo "not ok 1 - the catalogue build ended without a status"
			exit 1
		fi
		sleep 1
	done
	cat "$dir/build.log"
	if [ "$(cat "$dir/rc")" = 0 ]; then
		echo "ok 1 - catalogue images built or up to date"
	else
		echo "not ok 1 - the catalogue build failed (exit $(cat "$dir/rc")): its output above"
		exit 1
	fi
	;;
*)
	echo "usage: images_bg.sh start|wait DIR" >&2
	exit 2
	;;
esac
