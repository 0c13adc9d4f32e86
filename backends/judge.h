/* judge.h - a grading test's verdict on its output: does what the program
 * printed match what the test expects, and where does it first differ.
 * Pure C, no I/O: the worker and the microVM guest agent share it (the
 * grading issue: build once, run many tests, a verdict for each). */
#ifndef AL_JUDGE_H
#define AL_JUDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/grade.h" /* enum al_compare */

#define AL_DIFF_TEXT_MAX 200 /* bytes of each side kept for the report */

/* Where the output first differs from the expected one. */
struct al_diff {
	uint64_t line; /* 1-based line of the output (tokens: the line holding the
			* first differing token) */
	char want[AL_DIFF_TEXT_MAX + 1], got[AL_DIFF_TEXT_MAX + 1]; /* that line (tokens: token)
								     * of each, cut, with every
								     * control byte as '?' */
	bool want_ended, got_ended; /* that side had no such line (token) */
};

/* True when got matches want under mode; else false with *d filled (d may
 * be NULL). Never reads past either length; any bytes (NUL included). */
bool al_output_matches(const char *want, size_t wn, const char *got, size_t gn,
		       enum al_compare mode, struct al_diff *d);

/* The same under test t's compare mode and tolerances. */
bool al_test_output_matches(const struct al_test *t, const char *got, size_t gn, struct al_diff *d);

/* One line for a verdict: "line 3: expected \"4\", got \"5\"" (or "... got
 * nothing: the output ended"). */
void al_diff_text(const struct al_diff *d, char *out, size_t cap);

/* The steps of a grading job, the same for the worker (a sandbox per step)
 * and the microVM agent (a cgroup and uid per step in one VM). */

/* Test t's outcome from the result of its run (status, exit, output,
 * usage): its verdict (timeout, cpu_limit, memory_limit, output_limit from
 * the status; runtime_error for a non-zero exit or a signal; then the
 * expected output compared), a detail line, the usage, and the output cut
 * to AL_TEST_KEEP_MAX. Fills *tr (the caller frees its fields); 0, or AL_ENOMEM
 * when out of memory. */
int al_grade_test(const struct al_test *t, const struct al_result *run, struct al_test_result *tr);
/* The build's outcome: accepted when it exited 0, else compile_error. */
int al_grade_build(const struct al_result *run, struct al_test_result *tr);
/* A test that did not run (stop_on_failure). */
int al_grade_skip(const struct al_test *t, struct al_test_result *tr);

/* The job's result from its steps, into res (which keeps id, attempt,
 * backend, worker and times): tests[] and build (taken from the arguments,
 * which are emptied), usage summed (CPU) or the peak (memory); status
 * compile_error with the build's output as stdout/stderr (taken from
 * build_run) when the build failed, else ok with exit code 0 when every
 * test was accepted and 1 when one was not. 0 or AL_ENOMEM. */
int al_grade_result(struct al_result *res, struct al_test_result *build,
		    struct al_result *build_run, struct al_test_result *tests, size_t ntests);

/* The step of a grading job: the job with that step's command, stdin,
 * files and limits (dflt: the job's effective limits), argv is storage for
 * the job's argv and the test's (AL_ARGV_MAX pointers). step == -1 is the
 * build. Nothing is copied: *out points into job. */
void al_grade_step_job(const struct al_job *job, const struct al_limits *dflt, long step,
		       char **argv, struct al_job *out, struct al_limits *lim);

/* What one sandbox running a whole grading job needs (AL_CAP_GRADE_INSIDE):
 * wall and CPU time the sum of its steps' (each wall with
 * AL_GRADE_STEP_SLACK_MS for its set-up), memory, pids, output and disk the
 * largest step's. A job without tests: dflt itself. */
#define AL_GRADE_STEP_SLACK_MS 500
void al_grade_envelope(const struct al_job *job, const struct al_limits *dflt,
		       struct al_limits *env);

/* A job's checker (PROTOCOL.md, "Checkers"): after a test that exited
 * cleanly (accepted or wrong_answer by expect), the checker runs in a step
 * of its own with the test's input, expected and actual output as files
 * in AL_CHECK_DIR, their paths its last three arguments. It exits 0 with
 * "accepted" or "wrong_answer" as the first word of its stdout, the rest
 * of that line the detail; anything else (another exit code, a crash, a
 * signal, a limit, another word) is checker_error: never the solution's
 * fault. What the solution printed cannot speak for the checker. */
#define AL_CHECK_DIR "/tmp"
bool al_grade_wants_check(const struct al_job *job, const struct al_test_result *tr);
/* The checker's step for test (argv: AL_ARGV_MAX pointers, files: three
 * maps, both the caller's storage; nothing copied). */
void al_grade_checker_job(const struct al_job *job, const struct al_limits *dflt, long test,
			  const struct al_bytes *actual, char **argv, struct al_file files[3],
			  struct al_job *out, struct al_limits *lim);
/* Test tr's verdict and detail from the checker's run. 0, or AL_ENOMEM. */
int al_grade_checked(struct al_test_result *tr, const struct al_result *run);

/* The host's part of a grading job's result (every backend, the microVM
 * guest's word on it ignored): each test's points (earned when accepted)
 * and group, a hidden test's output and detail taken out, the groups'
 * scores (all or nothing, also for min, or summed: job->group_scoring) and the total
 * against the most it could have been. 0, or AL_ENOMEM. */
int al_grade_score(struct al_result *res, const struct al_job *job);

/* Whether a verdict counts as a failure (stop_on_failure). */
bool al_verdict_failed(enum al_verdict v);

#endif
