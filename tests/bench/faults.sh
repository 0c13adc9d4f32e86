#!/usr/bin/env bash
# The fault-injection soak (not part of `make test`): the suite of
# tests/integration/test_faults.py with FAULTS_SCALE times the jobs and faults,
# ROUNDS times in a row. Prints each round's TAP summary; exits non-zero on
# the first failing round. `FAULTS_SCALE=5 ROUNDS=3 bash tests/bench/faults.sh`
set -euo pipefail
cd "$(dirname "$0")/../.."
export BUILD=${BUILD:-build} FAULTS_SCALE=${FAULTS_SCALE:-5}
for r in $(seq 1 "${ROUNDS:-3}"); do
	t0=$SECONDS
	log=$(mktemp /tmp/airlock-faults.XXXXXX)
	if /usr/bin/python3 tests/integration/test_faults.py >"$log" 2>&1; then
		echo "round $r: $(grep -c '^ok' "$log") checks passed in $((SECONDS - t0)) s (scale $FAULTS_SCALE)"
		grep -E 'accepted|LOADING' "$log" | sed 's/^/    /'
		rm -f "$log"
	else
		echo "round $r: FAILED after $((SECONDS - t0)) s; log: $log"
		grep -E '^not ok|^#' "$log" | head -40
		exit 1
	fi
done
