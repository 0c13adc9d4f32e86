# suite.sh - the test runner's counting, sourced by tests/run.sh (and by
# tests/integration/runner.sh, which checks it): run_suite runs one TAP
# suite with its output in $LOGDIR and adds it up; suite_summary prints
# why each skipped suite skipped, then "N passed, N failed[, N skipped]".
passed=0 failed=0 skipped=0
skips=()
_CLK_TCK=$(getconf CLK_TCK)
_NCPU=$(nproc)

# The machine's busy CPU time so far (user, nice, system, irq, softirq,
# steal; in ticks, all CPUs): a suite's share of it against its wall time
# tells a busy suite from one that mostly waits (its sandboxes and VMs
# included, whoever reaps them)
_busy_ticks() {
	awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat
}

run_suite() { # name command...
	local name=$1 log="$LOGDIR/${1//\//_}.log" rc p f s why
	shift
	local t0=$SECONDS c0 wall
	c0=$(_busy_ticks)
	"$@" >"$log" 2>&1
	rc=$?
	p=$(grep -c '^ok ' "$log")
	f=$(grep -c '^not ok ' "$log")
	s=$(grep -c '^ok .*# SKIP' "$log")
	# a plan with a SKIP ("1..0 # SKIP why": the whole suite; "1..N # SKIP
	# why": the rest of it) is one skip, and its reason is kept for the end
	why=$(grep -m1 -E '^1\.\.[0-9]+ # SKIP' "$log" | sed -E 's/^1\.\.[0-9]+ # SKIP *//')
	if [ -n "$why" ]; then
		s=$((s + 1)) p=$((p + 1))
		skips+=("$name: $why")
	fi
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "not ok - suite $name exited $rc" >>"$log"
	fi
	passed=$((passed + p - s)) failed=$((failed + f)) skipped=$((skipped + s))
	wall=$((SECONDS - t0))
	printf '%-28s %4d passed %3d failed %3d skipped  (%ds, %d%% busy)\n' "$name" $((p - s)) "$f" \
		"$s" "$wall" $((($(_busy_ticks) - c0) * 100 / _CLK_TCK / _NCPU / (wall > 0 ? wall : 1)))
	if [ "$f" -ne 0 ]; then
		grep -E '^not ok|^#' "$log" | head -40 | sed 's/^/    /'
		echo "    (full log: $log)"
	fi
}

# A lane: a command (a function of run_suite calls) run in the background
# beside the main sequence, for suites that share nothing with the others
# (no worker id, uid, port or namespace): the fuzzers. lane_join waits for
# every lane and adds up their counts, printing their lines then.
lanes=()
lane() { # command...
	local tag="$LOGDIR/lane.${#lanes[@]}"
	(
		passed=0 failed=0 skipped=0 skips=()
		"$@" >"$tag.lines"
		echo "$passed $failed $skipped" >"$tag.counts"
		[ "${#skips[@]}" -eq 0 ] || printf '%s\n' "${skips[@]}" >>"$tag.counts"
	) &
	lanes+=("$!:$tag")
}

lane_join() {
	local l p f s why
	for l in "${lanes[@]}"; do
		wait "${l%%:*}"
		cat "${l#*:}.lines"
		{
			read -r p f s
			while IFS= read -r why; do skips+=("$why"); done
		} <"${l#*:}.counts"
		passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	done
	lanes=()
}

suite_summary() {
	echo
	for why in "${skips[@]}"; do
		echo "skipped: $why"
	done
	if [ "$skipped" -gt 0 ]; then
		echo "$passed passed, $failed failed, $skipped skipped"
	else
		echo "$passed passed, $failed failed"
	fi
}
