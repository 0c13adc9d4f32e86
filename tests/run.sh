#!/usr/bin/env bash
# Runs every test suite against $BUILD and prints "N passed, N failed".
# QUICK=1 (make check): the suites that need no root, no daemon and no
# image (format, unit, headers, the runner's own counting, FUZZ_SECONDS of
# fuzzing), in well under a minute.
# Each suite prints TAP lines ("ok N - ..." / "not ok N - ..."); a suite that
# exits non-zero without a failing line counts as one failure.
set -u
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-45}
LOGDIR=$(mktemp -d /tmp/airlock-test.XXXXXX)
. tests/lib/suite.sh

# Fuzz one target for a bounded time from its committed corpus; new inputs go
# to a scratch directory so the tree stays clean.
fuzz() { # target seconds
	local scratch
	scratch=$(mktemp -d "$LOGDIR/corpus.XXXX")
	if "$BUILD/fuzz/$1" -max_total_time="$2" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		"$scratch" "tests/fuzz/corpus/${1#fuzz_}" >"$LOGDIR/$1.fuzz" 2>&1; then
		echo "ok 1 - $1 ran $2 s clean ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$LOGDIR/$1.fuzz" | grep -o '[0-9]*$') executions)"
	else
		echo "not ok 1 - $1 found a crash:"
		grep -E 'ERROR|SUMMARY|Test unit written' "$LOGDIR/$1.fuzz" | sed 's/^/# /'
		return 1
	fi
}

# The image catalogue the integration tests use (python, datascience, toolchain, node, go, rust:
# kept while their recipes are unchanged, else rebuilt: about ten minutes
# the first time, build.sh says which step it is on) and the microVM guest
# (kernel + initramfs with this build's agent: seconds). As root, a failed
# build is a failure, not a skip. The catalogue builds in the background
# (tests/lib/images_bg.sh; `make test` starts it before it builds the
# programs, IMAGES_BG) while the suites that need no image run (debootstrap
# waits on the mirror and dpkg as much as on the CPU); the suites that use
# images come after.
QUICK=${QUICK:-0}
IMAGES_DIR=
if [ "$(id -u)" = 0 ] && [ "$QUICK" != 1 ]; then
	echo "# images: the catalogue (python, datascience, toolchain, node, go, rust) builds in the background; the microVM guest after it" >&2
	IMAGES_DIR=${IMAGES_BG:-}
	if [ -z "$IMAGES_DIR" ] || [ ! -f "$IMAGES_DIR/pid" ]; then
		IMAGES_DIR=$LOGDIR/images
		bash tests/lib/images_bg.sh start "$IMAGES_DIR"
	fi
fi
images_done() {
	bash tests/lib/images_bg.sh wait "$IMAGES_DIR"
}

# Suites that need no catalogue image nor microVM guest (the process tier
# on the host's /usr, Redis, the gateway, the fuzzers): while it builds.
NO_IMAGE="layers layout test_layout test_acl test_clock test_egress_proxy test_faults test_help
	test_gateway test_policy_reload test_process test_sentinel test_tiers"
# Image suites that mostly wait (on servers in test namespaces, leases,
# sessions' timers): they run while the hostile suite takes a core in a lane
# beside them. It shares nothing with them: its own worker ids, slot uids
# and user-namespace range (tests/hostile/hostile.py).
WAITING="test_container test_egress test_egress_cache test_egress_https_cache test_images
	test_inputs test_process_warm test_readme_byhand test_scheduler test_stream test_systemd
	test_gvisor"
# Suites a lane runs (below), not the main sequence: each lane's suites have
# worker ids, slot uids (and the VMM uids above them) and namespaces that no
# suite of the main sequence beside them has.
EARLY_LANE="test_gw_hostile test_stall test_fleet test_worker_faults test_queue"
WAITING_LANE="test_sessions"
LATE_LANE="test_microvm test_snapshots test_vm test_verdicts test_grade"
IN_LANES="$EARLY_LANE $WAITING_LANE $LATE_LANE"
integration() { # early|waiting|late
	local s n
	for s in tests/integration/*.sh tests/integration/*.py; do
		[ -f "$s" ] && [ "$QUICK" != 1 ] || continue
		n=$(basename "$s" .py)
		case " $IN_LANES " in *" $n "*) continue ;; esac # run by a lane (below)
		case " $(echo $NO_IMAGE) " in
		*" $n "*) [ "$1" = early ] || continue ;;
		*)
			case " $(echo $WAITING) " in
			*" $n "*) [ "$1" = waiting ] || continue ;;
			*) [ "$1" = late ] || continue ;;
			esac
			;;
		esac
		case "$s" in
		*.py) run_suite "integration/$n" /usr/bin/python3 "$s" ;;
		*) run_suite "$(basename "$(dirname "$s")")/$(basename "$s" .sh)" bash "$s" ;;
		esac
	done
}

run_suite format bash tests/format.sh
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] && run_suite "unit/$(basename "$t")" "$t"
done
if [ "$QUICK" = 1 ]; then
	run_suite integration/headers bash tests/integration/headers.sh
	run_suite integration/runner bash tests/integration/runner.sh
	run_suite integration/layers /usr/bin/python3 tests/integration/layers.py
	run_suite integration/layout /usr/bin/python3 tests/integration/layout.py
	run_suite integration/test_layout /usr/bin/python3 tests/integration/test_layout.py
fi
fuzzers() {
	run_suite fuzz/job fuzz fuzz_job "$FUZZ_SECONDS"
	run_suite fuzz/result fuzz fuzz_result $((FUZZ_SECONDS / 3 + 1))
	run_suite fuzz/call fuzz fuzz_call $((FUZZ_SECONDS / 3 + 1))
	run_suite fuzz/junit fuzz fuzz_junit $((FUZZ_SECONDS / 6 + 1))
}
# The fuzzers share nothing with the other suites: in full runs they take
# one core beside the suites that need no image (which mostly wait on
# timers and leases), counted when the lane joins, before the image suites.
# The gateway's hostile clients, the stalled Redis, the fleet, the worker's
# host faults and the queue's follow them there: those suites wait (on the
# gateway's timeouts, a stopped redis-server, leases, backoffs) most of
# their 36, 19, 40, 9 and 68 s, with worker ids and slot uids (the fleet's
# and the host faults' 66500-66720, the queue's 64000-65420) no suite of
# this phase has.
if [ "$QUICK" = 1 ]; then
	fuzzers
else
	beside_early() {
		fuzzers
		local n
		for n in $EARLY_LANE; do
			run_suite "integration/$n" /usr/bin/python3 "tests/integration/$n.py"
		done
	}
	lane beside_early
fi
[ "$QUICK" = 1 ] || run_suite interop/python-msgpack /usr/bin/python3 tests/interop/test_interop.py
[ "$QUICK" = 1 ] || run_suite interop/python-client /usr/bin/python3 tests/interop/test_client_py.py
for s in client/python/tests/test_*.py; do
	[ "$QUICK" = 1 ] || run_suite "python/$(basename "$s" .py)" /usr/bin/python3 "$s"
done
integration early
lane_join
if [ -n "$IMAGES_DIR" ]; then
	run_suite images/catalogue images_done
	run_suite images/microvm bash -c 'deploy/images/build.sh --agent "$BUILD/airlock-agent" microvm &&
		echo "ok 1 - microvm guest built or up to date"'
fi
# The hostile suite (a core for about 220 s), then the sessions (mostly
# waiting on their timers: 120 s at a third of the machine), beside the
# other waiting suites.
beside_waiting() {
	run_suite hostile/run bash tests/hostile/run.sh
	local n
	for n in $WAITING_LANE; do
		run_suite "integration/$n" /usr/bin/python3 "tests/integration/$n.py"
	done
}
[ "$QUICK" = 1 ] || lane beside_waiting
integration waiting
lane_join
# Beside the suites that keep one core busy under TCG (about half the
# machine: the CI suites, the examples), the microVM suite (its guests
# under TCG too, waiting on their boots half the time: worker ids mvm-*,
# uids 65000-67300 and its container worker's user namespaces from
# 1000000, none of test_ci's 70000 and 200000 or test_examples'), the
# snapshots' paused sessions (worker ids snap*, uids 72000-75767), the
# service VMs (their own libvirtd in a namespace of their
# own, waiting on libvirt and their guests' boots most of the time), then
# the verdicts on three tiers (a third of the machine), then the grading
# suite (half the machine, 78 s): their own worker ids, slot uids and VMM
# uids (test_grade: grade-w, 63500-63501 and 63600-63601, VMMs from
# 63756), ports from free_port, and nothing of theirs that another suite
# counts. The main sequence has the CI suites (70000, user namespaces from
# 200000), the warm containers (runc, 64000 with user namespaces from
# 600000), the examples (63800-63900) and the README's recipe (debootstrap
# of a ruby image, then a job on it per tier: w1, 64000-64001, VMMs from
# 64256). (The examples' microVM session stays in the main sequence: with
# three suites under TCG at once, the machine's two cores are not enough
# for their guests' time limits.)
beside_late() {
	local n
	for n in $LATE_LANE; do
		run_suite "integration/$n" /usr/bin/python3 "tests/integration/$n.py"
	done
}
[ "$QUICK" = 1 ] || lane beside_late
integration late
lane_join

suite_summary
[ "$failed" -eq 0 ] && rm -rf "$LOGDIR"
[ "$failed" -eq 0 ]
