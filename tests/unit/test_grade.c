/* test_grade.c - the grading comparison (backends/judge.h): each mode's
 * matches and mismatches, the first differing line reported, bytes that are
 * not text, and the bounds of what is kept for the report; then the steps'
 * verdicts (the order they are decided in, their detail lines, the output
 * kept), the job's result from its steps, a step's job and limits, and the
 * envelope a whole grading job needs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../backends/judge.h"
#include "tap.h"

#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"

/* A run's result with status st, exit code (or -1: none), signal, stdout. */
static struct al_result run_of(enum al_status_code st, int code, int sig, const char *out)
{
	return (struct al_result){.status = st,
				  .has_exit_code = code >= 0,
				  .exit_code = code,
				  .signal = sig,
				  .out = {(char *)out, strlen(out)},
				  .err = {"", 0},
				  .cpu_ms = 7,
				  .wall_ms = 9,
				  .peak_memory_bytes = 1000,
				  .error = st == AL_ST_OK || st == AL_ST_NONZERO_EXIT
					       ? NULL
					       : "CPU-time limit of 500 ms reached"};
}

static void test_steps(void)
{
	struct al_test t = {
	    .name = "t1", .has_expect = true, .expect = {"5\n", 2}, .compare = AL_CMP_TRIM};
	struct al_test_result tr, tests[3], build;
	struct al_result r, big, res = {0}, build_run;
	static char huge[AL_TEST_KEEP_MAX + 100];

	r = run_of(AL_ST_OK, 0, 0, "5  \n\n");
	TAP_OK(!al_grade_test(&t, &r, &tr) && tr.verdict == AL_V_ACCEPTED && !tr.detail &&
		   tr.cpu_ms == 7 && tr.wall_ms == 9 && tr.peak_memory_bytes == 1000 &&
		   !strcmp(tr.name, "t1"),
	       "exit 0 and the expected output (trim): accepted, with its usage");
	al_test_result_free(&tr);
	r = run_of(AL_ST_OK, 0, 0, "4\n");
	TAP_OK(!al_grade_test(&t, &r, &tr) && tr.verdict == AL_V_WRONG_ANSWER && tr.detail &&
		   !strcmp(tr.detail, "line 1: expected \"5\", got \"4\""),
	       "exit 0, other output: wrong_answer, the first differing line (%s)", tr.detail);
	al_test_result_free(&tr);
	r = run_of(AL_ST_NONZERO_EXIT, 3, 0, "5\n");
	TAP_OK(!al_grade_test(&t, &r, &tr) && tr.verdict == AL_V_RUNTIME_ERROR &&
		   !strcmp(tr.detail, "exit code 3"),
	       "a non-zero exit is runtime_error even with the right output (%s)", tr.detail);
	al_test_result_free(&tr);
	r = run_of(AL_ST_NONZERO_EXIT, -1, 11, "");
	TAP_OK(!al_grade_test(&t, &r, &tr) && tr.verdict == AL_V_RUNTIME_ERROR && tr.detail &&
		   strstr(tr.detail, "signal 11") && !tr.has_exit_code,
	       "a signal is runtime_error, named (%s)", tr.detail);
	al_test_result_free(&tr);
	r = run_of(AL_ST_CPU_LIMIT, -1, 9, "5\n");
	TAP_OK(!al_grade_test(&t, &r, &tr) && tr.verdict == AL_V_TIMEOUT &&
		   !strcmp(tr.detail, "CPU-time limit of 500 ms reached"),
	       "a limit comes before the output; over its CPU time is timeout (as over its "
	       "wall-clock time), the detail saying which");
	al_test_result_free(&tr);
	{
		static const enum al_status_code st[] = {AL_ST_TIMEOUT, AL_ST_MEMORY_LIMIT,
							 AL_ST_OUTPUT_LIMIT, AL_ST_SANDBOX_ERROR};
		static const enum al_verdict v[] = {AL_V_TIMEOUT, AL_V_MEMORY_LIMIT,
						    AL_V_OUTPUT_LIMIT, AL_V_RUNTIME_ERROR};
		bool all = true;

		for (int i = 0; i < 4; i++) {
			r = run_of(st[i], -1, 0, "");
			all &= !al_grade_test(&t, &r, &tr) && tr.verdict == v[i];
			al_test_result_free(&tr);
		}
		TAP_OK(all, "timeout, memory_limit and output_limit from the status");
	}
	memset(huge, 'x', sizeof(huge) - 1);
	big = run_of(AL_ST_OK, 0, 0, huge);
	t.has_expect = false;
	TAP_OK(!al_grade_test(&t, &big, &tr) && tr.verdict == AL_V_ACCEPTED &&
		   tr.out.len == AL_TEST_KEEP_MAX && tr.out_truncated && !tr.err_truncated,
	       "no expected output: exit 0 is accepted; %u bytes of stdout kept, marked cut",
	       AL_TEST_KEEP_MAX);
	al_test_result_free(&tr);
	TAP_OK(!al_grade_skip(&t, &tr) && tr.verdict == AL_V_SKIPPED && tr.detail &&
		   strstr(tr.detail, "stop_on_failure") && tr.cpu_ms == 0,
	       "a skipped test: its verdict and why");
	al_test_result_free(&tr);
	TAP_OK(al_verdict_failed(AL_V_WRONG_ANSWER) && al_verdict_failed(AL_V_TIMEOUT) &&
		   !al_verdict_failed(AL_V_ACCEPTED) && !al_verdict_failed(AL_V_SKIPPED),
	       "what counts as a failure for stop_on_failure");

	/* the job's result from its steps */
	r = run_of(AL_ST_NONZERO_EXIT, 1, 0, "");
	TAP_OK(!al_grade_build(&r, &build) && build.verdict == AL_V_COMPILE_ERROR &&
		   !strcmp(build.detail, "exit code 1"),
	       "a build that exits 1: compile_error");
	build_run = (struct al_result){.has_exit_code = true,
				       .exit_code = 1,
				       .out = {strdup(""), 0},
				       .err = {strdup("error: x\n"), 9}};
	res.id = "g";
	TAP_OK(!al_grade_result(&res, &build, &build_run, tests, 0) &&
		   res.status == AL_ST_COMPILE_ERROR && res.exit_code == 1 && res.err.len == 9 &&
		   !strcmp(res.err.data, "error: x\n") && res.tests && res.ntests == 0 &&
		   res.build && res.error && strstr(res.error, "the build failed: exit code 1"),
	       "compile_error: the build's output and exit code, its tests an empty list (%s)",
	       res.error);
	res.id = NULL;
	al_result_free(&res);
	r = run_of(AL_ST_OK, 0, 0, "");
	al_grade_build(&r, &build);
	t.has_expect = true;
	for (int i = 0; i < 3; i++) {
		r = run_of(AL_ST_OK, 0, 0, i == 1 ? "6\n" : "5\n");
		r.cpu_ms = 10 * (i + 1);
		r.peak_memory_bytes = i == 2 ? 5000 : 100;
		al_grade_test(&t, &r, &tests[i]);
	}
	build_run = (struct al_result){0};
	TAP_OK(!al_grade_result(&res, &build, &build_run, tests, 3) && res.status == AL_ST_OK &&
		   res.exit_code == 1 && res.ntests == 3 && res.cpu_ms == 7 + 10 + 20 + 30 &&
		   res.peak_memory_bytes == 5000 && !res.error,
	       "tests ran: ok, exit code 1 (one was not accepted), CPU summed, the peak memory");
	al_result_free(&res);
}

/* Float tolerance: numbers within abs_tol or rel_tol, everything else as
 * tokens. */
static void test_float(void)
{
	struct al_test t = {.name = "f",
			    .has_expect = true,
			    .compare = AL_CMP_FLOAT,
			    .abs_tol = 1e-6,
			    .rel_tol = 1e-6};
	struct al_diff d;
	static const struct {
		const char *want, *got;
		double abs_tol, rel_tol;
		bool ok;
	} c[] = {
	    {"3.1415926\n", "3.1415929\n", 1e-6, 1e-9, true}, /* within abs */
	    {"3.1415926\n", "3.1416\n", 1e-6, 1e-9, false},   /* off by 7e-5 */
	    {"1e9 2\n", "1000000500 2\n", 1e-9, 1e-6, true},  /* within rel */
	    {"1e9 2\n", "1000005000 2\n", 1e-9, 1e-6, false}, /* past rel */
	    {"yes 0.5\n", "YES 0.5\n", 1, 1, false},	      /* words exact */
	    {"0.5 1.5\n", "0.5\n", 1, 1, false},	      /* a token short */
	    {"nan\n", "nan\n", 1, 1, true},		      /* the same token */
	    {"1\n", "inf\n", 1e300, 1e300, false},	      /* no infinity */
	    {"1.0\n", "1.0abc\n", 1, 1, false},		      /* a number's whole token */
	    {"2\n", "0x2\n", 0, 0, true},		      /* as strtod reads it */
	};
	bool all = true;

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		t.expect = (struct al_bytes){(char *)c[i].want, strlen(c[i].want)};
		t.abs_tol = c[i].abs_tol;
		t.rel_tol = c[i].rel_tol;
		if (al_test_output_matches(&t, c[i].got, strlen(c[i].got), &d) != c[i].ok) {
			all = false;
			printf("# case %zu: %s vs %s", i, c[i].want, c[i].got);
		}
	}
	TAP_OK(all, "compare float: numbers within abs_tol or rel_tol of the expected, other "
		    "tokens exact");
	t.expect = (struct al_bytes){"1 2.5 3\n", 8};
	TAP_OK(!al_test_output_matches(&t, "1 2.6 3\n", 8, &d) && d.line == 1 &&
		   !strcmp(d.want, "2.5") && !strcmp(d.got, "2.6"),
	       "a number off its tolerance is reported as the differing token");
}

/* Points, groups all or nothing or summed, hidden tests. */
static void test_score(void)
{
	struct al_test tests[5] = {
	    {.name = "a", .points = 2},
	    {.name = "b", .points = 3, .group = "g1"},
	    {.name = "c", .points = 3, .group = "g1"},
	    {.name = "d", .points = 5, .group = "g2", .hidden = true},
	    {.name = "e", .points = 1},
	};
	static const enum al_verdict v[5] = {AL_V_ACCEPTED, AL_V_ACCEPTED, AL_V_WRONG_ANSWER,
					     AL_V_ACCEPTED, AL_V_TIMEOUT};
	struct al_job job = {.tests = tests, .ntests = 5};
	struct al_result res = {0};

	for (int mode = AL_GROUPS_ALL; mode <= AL_GROUPS_MIN; mode++) {
		bool sum = mode == AL_GROUPS_SUM;

		res.tests = calloc(5, sizeof(*res.tests));
		res.ntests = 5;
		for (int i = 0; i < 5; i++) {
			res.tests[i].name = strdup(tests[i].name);
			res.tests[i].verdict = v[i];
			res.tests[i].out = (struct al_bytes){strdup("secret\n"), 7};
			res.tests[i].err = (struct al_bytes){strdup(""), 0};
			res.tests[i].detail = strdup("line 1: ...");
		}
		job.group_scoring = mode;
		TAP_OK(!al_grade_score(&res, &job) && res.has_score && res.max_score == 14 &&
			   res.ngroups == 2 && !strcmp(res.groups[0].name, "g1") &&
			   res.groups[0].max_score == 6 && res.groups[0].score == (sum ? 3u : 0u) &&
			   res.groups[1].score == 5 && res.score == 2 + (sum ? 3 : 0) + 5 &&
			   res.tests[2].points == 0 && res.tests[1].points == 3 &&
			   res.tests[4].max_points == 1 && res.tests[4].points == 0 &&
			   !strcmp(res.tests[1].group, "g1"),
		       "group_scoring %s: the score %llu of %llu, each group's, each test's points",
		       al_group_scoring_name(mode), (unsigned long long)res.score,
		       (unsigned long long)res.max_score);
		TAP_OK(res.tests[3].hidden && res.tests[3].out.len == 0 && !res.tests[3].detail &&
			   res.tests[3].verdict == AL_V_ACCEPTED && res.tests[0].out.len == 7 &&
			   !res.tests[0].hidden,
		       "a hidden test: its verdict and points, no output, no detail");
		al_result_free(&res);
		res = (struct al_result){0};
	}
	res.tests = calloc(1, sizeof(*res.tests));
	res.ntests = 0; /* a compile_error: no test ran */
	job.group_scoring = AL_GROUPS_ALL;
	TAP_OK(!al_grade_score(&res, &job) && res.score == 0 && res.max_score == 14 &&
		   res.ngroups == 2 && res.groups[0].score == 0 && res.groups[1].score == 0 &&
		   res.groups[1].max_score == 5,
	       "no test ran: score 0 of the most it could have been, each group 0");
	al_result_free(&res);
}

/* A checker's run into the test's verdict. */
static void test_checker(void)
{
	static const struct {
		enum al_status_code st;
		int code, sig;
		const char *out;
		enum al_verdict want;
		const char *detail;
	} c[] = {
	    {AL_ST_OK, 0, 0, "accepted fine\n", AL_V_ACCEPTED, "checker: fine"},
	    {AL_ST_OK, 0, 0, "accepted", AL_V_ACCEPTED, NULL},
	    {AL_ST_OK, 0, 0, "wrong_answer off by one\nmore", AL_V_WRONG_ANSWER,
	     "checker: off by one"},
	    {AL_ST_OK, 0, 0, "wrong_answer\n", AL_V_WRONG_ANSWER,
	     "checker: the output is not a right answer"},
	    {AL_ST_OK, 0, 0, "acceptedX\n", AL_V_CHECKER_ERROR, NULL},
	    {AL_ST_OK, 0, 0, "", AL_V_CHECKER_ERROR, NULL},
	    {AL_ST_NONZERO_EXIT, 1, 0, "accepted\n", AL_V_CHECKER_ERROR, "the checker exited 1"},
	    {AL_ST_NONZERO_EXIT, -1, 11, "accepted\n", AL_V_CHECKER_ERROR,
	     "the checker was killed by signal 11"},
	    {AL_ST_TIMEOUT, -1, 0, "accepted\n", AL_V_CHECKER_ERROR, NULL},
	    {AL_ST_OK, 0, 0, "accepted \x1b[31mred\x07\n", AL_V_ACCEPTED, "checker: ?[31mred?"},
	};
	bool all = true;

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct al_test_result tr = {.verdict = AL_V_ACCEPTED};
		struct al_result r = run_of(c[i].st, c[i].code, c[i].sig, c[i].out);

		if (al_grade_checked(&tr, &r) || tr.verdict != c[i].want ||
		    (c[i].detail && (!tr.detail || strcmp(tr.detail, c[i].detail)))) {
			all = false;
			printf("# case %zu: %s / %s\n", i, al_verdict_name(tr.verdict),
			       tr.detail ? tr.detail : "(none)");
		}
		al_test_result_free(&tr);
	}
	TAP_OK(all, "a checker's word: exit 0 and accepted or wrong_answer first, the rest its "
		    "detail (control bytes shown as ?); anything else checker_error");
}

static void test_step_jobs(void)
{
	static char *jargv[] = {"./main", "-q"}, *targv[] = {"in.txt"}, *bargv[] = {"make"};
	struct al_file files[] = {{"main.c", {"x", 1}, 0644}},
		       tfiles[] = {{"in.txt", {"1", 1}, 0644}};
	struct al_build b = {
	    .argv = bargv, .argc = 1, .limits = {.wall_ms = 60000, .disk_bytes = 7}};
	struct al_test tests[2] = {{.name = "a",
				    .argv = targv,
				    .argc = 1,
				    .files = tfiles,
				    .nfiles = 1,
				    .stdin_data = {"2 3", 3},
				    .limits = {.memory_bytes = 1 << 20}},
				   {.name = "b", .limits = {.wall_ms = 100}}};
	struct al_job job = {.argv = jargv,
			     .argc = 2,
			     .files = files,
			     .nfiles = 1,
			     .build = &b,
			     .tests = tests,
			     .ntests = 2};
	struct al_limits dflt = {1000, 1000, 64 << 20, 16, 100, 100, 1 << 20}, lim, env;
	char *argv[AL_ARGV_MAX];
	struct al_job sj;

	al_grade_step_job(&job, &dflt, -1, argv, &sj, &lim);
	TAP_OK(sj.argc == 1 && !strcmp(sj.argv[0], "make") && sj.nfiles == 0 && !sj.ntests &&
		   lim.wall_ms == 60000 && lim.disk_bytes == 7 && lim.memory_bytes == 64 << 20,
	       "the build step: its command, no files (they are in the tree), its limits over "
	       "the job's");
	al_grade_step_job(&job, &dflt, 0, argv, &sj, &lim);
	TAP_OK(sj.argc == 3 && !strcmp(sj.argv[1], "-q") && !strcmp(sj.argv[2], "in.txt") &&
		   sj.nfiles == 1 && !strcmp(sj.files[0].path, "in.txt") &&
		   sj.stdin_data.len == 3 && lim.memory_bytes == 1 << 20 && lim.wall_ms == 1000 &&
		   !sj.build,
	       "a test step: the job's argv then the test's, its files, stdin and limits");
	al_grade_envelope(&job, &dflt, &env);
	TAP_OK(env.wall_ms == 60000 + 1000 + 100 + 3 * AL_GRADE_STEP_SLACK_MS &&
		   env.cpu_ms == 3000 && env.memory_bytes == 64 << 20 && env.disk_bytes == 1 << 20,
	       "the envelope: every step's time, the largest step's memory and disk (wall %llu)",
	       (unsigned long long)env.wall_ms);
	job.ntests = 0;
	al_grade_envelope(&job, &dflt, &env);
	TAP_OK(!memcmp(&env, &dflt, sizeof(env)), "a job without tests: its own limits");
}

static bool m(const char *want, const char *got, enum al_compare mode, struct al_diff *d)
{
	return al_output_matches(want, strlen(want), got, strlen(got), mode, d);
}

int main(void)
{
	struct al_diff d;
	char text[600], big[1000];

	TAP_OK(al_compare_parse("exact") == AL_CMP_EXACT &&
		   al_compare_parse("trim") == AL_CMP_TRIM &&
		   al_compare_parse("tokens") == AL_CMP_TOKENS &&
		   al_compare_parse("float") == AL_CMP_FLOAT &&
		   al_compare_parse("fuzzy") == AL_EINVAL && al_compare_parse(NULL) == AL_EINVAL,
	       "the four modes by name; another name is refused");

	/* exact */
	TAP_OK(m("1\n2\n", "1\n2\n", AL_CMP_EXACT, &d), "exact: the same bytes match");
	TAP_OK(!m("1\n2\n3\n", "1\n5\n3\n", AL_CMP_EXACT, &d) && d.line == 2 &&
		   !strcmp(d.want, "2") && !strcmp(d.got, "5"),
	       "exact: the first differing line, with both sides (line %llu)",
	       (unsigned long long)d.line);
	al_diff_text(&d, text, sizeof(text));
	TAP_OK(!strcmp(text, "line 2: expected \"2\", got \"5\""), "its report: %s", text);
	TAP_OK(!m("1\n2\n", "1\n", AL_CMP_EXACT, &d) && d.line == 2 && d.got_ended && !d.want_ended,
	       "exact: output that stops early: its line, the output ended");
	al_diff_text(&d, text, sizeof(text));
	TAP_OK(strstr(text, "got nothing: the output ended") != NULL, "its report: %s", text);
	TAP_OK(!m("1\n", "1\n2\n", AL_CMP_EXACT, &d) && d.line == 2 && d.want_ended &&
		   !strcmp(d.got, "2"),
	       "exact: more output than expected: the first extra line");
	TAP_OK(!m("1\n", "1", AL_CMP_EXACT, &d) && d.line == 1 && strstr(d.want, "newline"),
	       "exact: a missing final newline is a difference, said as such (%s / %s)", d.want,
	       d.got);
	TAP_OK(!m("a b\n", "a  b\n", AL_CMP_EXACT, NULL), "exact: spacing counts");
	TAP_OK(!al_output_matches("a\0b", 3, "a\0c", 3, AL_CMP_EXACT, &d) && d.line == 1 &&
		   !strcmp(d.got, "a?c"),
	       "exact: NUL bytes compare, and are shown as ? in the report");

	/* trim */
	TAP_OK(m("1\n2\n", "1  \n2\t\r\n\n\n", AL_CMP_TRIM, &d),
	       "trim: trailing blanks per line and blank lines at the end do not count");
	TAP_OK(m("1\n2", "1\n2\n", AL_CMP_TRIM, &d), "trim: nor the last newline");
	TAP_OK(!m("1\n\n2\n", "1\n2\n", AL_CMP_TRIM, &d) && d.line == 2 && !strcmp(d.got, "2"),
	       "trim: a blank line inside still counts");
	TAP_OK(!m("a b\n", " a b\n", AL_CMP_TRIM, &d) && d.line == 1, "trim: leading blanks count");
	TAP_OK(!m("1\n2\n", "1\n", AL_CMP_TRIM, &d) && d.got_ended && d.line == 2,
	       "trim: output that stops early");

	/* tokens */
	TAP_OK(m("1 2\n3\n", "  1\n2    3", AL_CMP_TOKENS, &d),
	       "tokens: the same tokens in order, however spaced and broken into lines");
	TAP_OK(!m("1 2 3", "1\n2\n4\n", AL_CMP_TOKENS, &d) && d.line == 3 && !strcmp(d.want, "3") &&
		   !strcmp(d.got, "4"),
	       "tokens: the first differing token and the output line it is on (%llu)",
	       (unsigned long long)d.line);
	TAP_OK(!m("1 2", "1", AL_CMP_TOKENS, &d) && d.got_ended && !strcmp(d.want, "2"),
	       "tokens: fewer tokens than expected");
	TAP_OK(!m("1", "1 2", AL_CMP_TOKENS, &d) && d.want_ended && !strcmp(d.got, "2"),
	       "tokens: more tokens than expected");
	TAP_OK(m("", "", AL_CMP_TOKENS, &d) && m("", " \n\n", AL_CMP_TOKENS, &d) &&
		   m("", "", AL_CMP_EXACT, &d) && m("", "\n\n", AL_CMP_TRIM, &d),
	       "empty expectations: empty output matches (blank output too, but for exact)");
	TAP_OK(!m("", "x", AL_CMP_EXACT, &d) && d.line == 1 && d.want_ended,
	       "exact: output where none was expected");

	/* bounds */
	memset(big, 'y', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	TAP_OK(!m("x", big, AL_CMP_EXACT, &d) && strlen(d.got) == AL_DIFF_TEXT_MAX,
	       "a long line is kept to %d bytes in the report", AL_DIFF_TEXT_MAX);
	TAP_OK(!al_output_matches(NULL, 0, "x", 1, AL_CMP_TRIM, &d) && d.want_ended,
	       "NULL with length 0 is empty");
	test_steps();
	test_float();
	test_score();
	test_checker();
	test_step_jobs();
	return tap_done();
}
