#!/usr/bin/env bash
# The test runner's counting (tests/lib/suite.sh): a suite that skips whole
# ("1..0 # SKIP why") or in part ("1..N # SKIP why") counts as skipped and
# its reason is printed before the summary, which then says "N skipped"; a
# suite that exits non-zero without a failing line is a failure.
set -u
cd "$(dirname "$0")/../.."
LOGDIR=$(mktemp -d)
trap 'rm -rf "$LOGDIR"' EXIT
out=$( (
	. tests/lib/suite.sh
	run_suite whole bash -c 'echo "1..0 # SKIP needs a unicorn"'
	run_suite part bash -c 'echo "ok 1 - a"; echo "ok 2 - b"; echo "1..2 # SKIP the rest needs root"'
	run_suite fine bash -c 'echo "ok 1 - a"; echo "ok 2 - b # SKIP no b here"; echo "1..2"'
	run_suite crash bash -c 'echo "ok 1 - a"; exit 3'
	beside() {
		run_suite lane-a bash -c 'sleep 0.2; echo "ok 1 - a"; echo "not ok 2 - b"'
		run_suite lane-b bash -c 'echo "1..0 # SKIP needs a second unicorn"'
	}
	lane beside
	run_suite main bash -c 'echo "ok 1 - a"'
	lane_join
	suite_summary
))
n=0
check() { # description, then a grep -E pattern the output must hold
	n=$((n + 1))
	if grep -qE -- "$2" <<<"$out"; then
		echo "ok $n - $1"
	else
		echo "not ok $n - $1"
		sed 's/^/# /' <<<"$out"
	fi
}
check "a whole-suite skip counts one skipped, none passed" '^whole +0 passed +0 failed +1 skipped'
check "a skip of the rest counts its passes and one skip" '^part +2 passed +0 failed +1 skipped'
check "an ok line with a SKIP directive counts as skipped" '^fine +1 passed +0 failed +1 skipped'
check "a suite that exits non-zero with no failing line is one failure" '^crash +1 passed +1 failed'
check "each skip's reason is printed" '^skipped: whole: needs a unicorn$'
check "...with the suite's name" '^skipped: part: the rest needs root$'
n=$((n + 1))
if [ "$(grep -nE '^(main|lane-a) ' <<<"$out" | cut -d: -f2 | cut -d' ' -f1 | tr '\n' ' ')" = "main lane-a " ]; then
	echo "ok $n - a lane's suites are printed when it joins, after the main sequence's"
else
	echo "not ok $n - a lane's suites are printed when it joins, after the main sequence's"
	sed 's/^/# /' <<<"$out"
fi
check "...with their own counts" '^lane-a +1 passed +1 failed'
check "...and their skips' reasons" '^skipped: lane-b: needs a second unicorn$'
check "the summary line adds up every lane" '^6 passed, 2 failed, 4 skipped$'
echo "1..$n"
