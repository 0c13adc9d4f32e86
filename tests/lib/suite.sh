# suite.sh - the test runner's counting, sourced by tests/run.sh (and by
# tests/integration/runner.sh, which checks it): run_suite runs one TAP
# suite with its output in $LOGDIR and adds it up; suite_summary prints
# why each skipped suite skipped, then "N passed, N failed[, N skipped]".
passed=0 failed=0 skipped=0
skips=()
_CLK_TCK=$(getconf CLK_TCK)

# CPU the shell's reaped children used so far (user + system, in ticks): a
# suite's share of it against its wall time tells a busy suite from one that
# mostly waits
_cpu_ticks() { # pid of the shell that runs the suites
	awk '{print $16 + $17}' "/proc/$1/stat"
}

run_suite() { # name command...
	local name=$1 log="$LOGDIR/${1//\//_}.log" rc p f s why
	shift
	local t0=$SECONDS me=$BASHPID c0
	c0=$(_cpu_ticks "$me")
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
	printf '%-28s %4d passed %3d failed %3d skipped  (%ds, cpu %ds)\n' "$name" $((p - s)) "$f" "$s" \
		$((SECONDS - t0)) $((($(_cpu_ticks "$me") - c0) / _CLK_TCK))
	if [ "$f" -ne 0 ]; then
		grep -E '^not ok|^#' "$log" | head -40 | sed 's/^/    /'
		echo "    (full log: $log)"
	fi
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
