/* grade.h - grading jobs (PROTOCOL.md, "Grading jobs"): a job's build step
 * and test cases, a verdict per test in its result, and their msgpack codec.
 *
 * A job with tests is a grading job: its build (if any) runs once, then its
 * command (runtime, code, argv) runs once per test, with the test's stdin,
 * extra argv, files and limits; the result says, per test, what happened. */
#ifndef AL_PROTO_GRADE_H
#define AL_PROTO_GRADE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "result.h"

#define AL_TESTS_MAX	    256		/* tests in one job */
#define AL_TEST_NAME_MAX    64		/* a test's name, bytes */
#define AL_EXPECT_MAX	    (1u << 20)	/* a test's expected stdout */
#define AL_TEST_KEEP_MAX    (64u << 10) /* stdout/stderr of one test kept in the result */
#define AL_VERDICT_TEXT_MAX 512		/* a test's detail line */

/* How a test's stdout is compared with what it expects. */
enum al_compare {
	AL_CMP_EXACT = 0, /* byte for byte */
	AL_CMP_TRIM,	  /* each line's trailing blanks (space, tab, CR) and the
			   * blank lines at the end do not count (the default) */
	AL_CMP_TOKENS,	  /* the same whitespace-separated tokens, in order */
	AL_CMP_FLOAT,	  /* tokens, those that are both numbers equal within the
			   * test's abs_tol or rel_tol (default 1e-6 each) */
};

#define AL_TOL_DEFAULT 1e-6
#define AL_POINTS_MAX  1000000 /* one test's points */
#define AL_GROUP_MAX   64      /* a group's name, bytes */

/* "exact", "trim", "tokens" -> the mode, or AL_EINVAL. */
int al_compare_parse(const char *name);
const char *al_compare_name(enum al_compare mode);

/* The build: runs once, before the tests, in the job's files; what it
 * leaves there every test sees, read-only. */
struct al_build {
	enum al_runtime runtime;
	struct al_bytes code; /* runtime python/sh only */
	char **argv;
	size_t argc;
	struct al_limits limits; /* 0 = the job's */
};

struct al_test {
	char *name;		    /* 1..64 bytes of UTF-8, no control character; unique */
	struct al_bytes stdin_data; /* the test's stdin */
	char **argv;		    /* appended to the job's argv */
	size_t argc;
	struct al_file *files; /* placed in the test's own directory, $HOME (/tmp) */
	size_t nfiles;
	struct al_limits limits; /* 0 = the job's */
	bool has_expect;
	struct al_bytes expect; /* the stdout it expects */
	enum al_compare compare;
	double abs_tol, rel_tol; /* compare float: |got - want| <= abs_tol, or <=
				  * rel_tol * |want| */
	uint32_t points;	 /* earned when accepted (default 1) */
	char *group;		 /* a subtask: its tests scored together, or NULL */
	bool hidden;		 /* its result shows the verdict only */
};

/* How a group's points are earned (the job's group_scoring). */
enum al_group_scoring {
	AL_GROUPS_ALL = 0, /* all or nothing: every test of the group accepted */
	AL_GROUPS_SUM,	   /* each accepted test's points */
	AL_GROUPS_MIN,	   /* the group's points times its smallest test score: a
			    * test scores 1 or 0, so this is AL_GROUPS_ALL by
			    * another name (CMS's GroupMin), kept as written */
};

/* The name of a group_scoring value ("all", "sum", "min"); its value from a
 * name, or -1 for one that is none of them. */
const char *al_group_scoring_name(int scoring);
int al_group_scoring_parse(const char *name);

struct al_group_score {
	char *name;
	uint64_t score, max_score;
};

enum al_verdict {
	AL_V_ACCEPTED = 0,  /* exited 0 (and printed what was expected) */
	AL_V_WRONG_ANSWER,  /* exited 0, printed something else */
	AL_V_TIMEOUT,	    /* its wall-clock limit */
	AL_V_CPU_LIMIT,	    /* older graders: its CPU-time limit (now timeout, detail saying so) */
	AL_V_MEMORY_LIMIT,  /* its memory limit */
	AL_V_OUTPUT_LIMIT,  /* its stdout/stderr or disk caps */
	AL_V_RUNTIME_ERROR, /* a non-zero exit or a signal */
	AL_V_SKIPPED,	    /* not run: stop_on_failure after an earlier failure */
	AL_V_COMPILE_ERROR, /* the build only: it failed */
	AL_V_CHECKER_ERROR, /* the job's checker failed on the test's output (never the
			     * solution's fault: it looped, crashed or said nothing clear) */
	AL_V_COUNT
};

const char *al_verdict_name(enum al_verdict v);
int al_verdict_parse(const char *name); /* the verdict, or AL_EINVAL */

/* One test's outcome (the build's too: verdict accepted or compile_error). */
struct al_test_result {
	char *name;
	enum al_verdict verdict;
	bool has_exit_code;
	int32_t exit_code;
	int32_t signal;
	uint64_t wall_ms, cpu_ms, peak_memory_bytes;
	uint64_t max_rss_bytes;	  /* wait4's ru_maxrss of its processes, beside the cgroup's peak */
	struct al_bytes out, err; /* at most AL_TEST_KEEP_MAX each */
	bool out_truncated, err_truncated;
	char *detail;		     /* wrong_answer: the first differing line; limits, runtime
				      * errors: what happened; NULL when nothing to say */
	uint32_t points, max_points; /* earned (its group's rule aside), of */
	char *group;		     /* the test's group, or NULL */
	bool hidden;		     /* verdict, usage and points only: no output, no detail */
};

/* Free what t holds and zero it. */
void al_test_result_free(struct al_test_result *t);

/* A step's limits: each field its own, else the job's (dflt). */
void al_step_limits(const struct al_limits *own, const struct al_limits *dflt,
		    struct al_limits *out);

#endif
