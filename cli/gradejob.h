/* gradejob.h - grading jobs for the CLI (`airlock grade`, PROTOCOL.md
 * "Grading jobs"): one read from a directory or a JSON/YAML file, and the
 * verdict table of its result.
 *
 * A file holds the job as JSON (the gateway's form) or the same in YAML;
 * a key NAME_from (code_from, stdin_from, expect_from, data_from) in the
 * job, its build, a test or a file reads NAME from that path, relative to
 * the file. A directory holds:
 *   grade.yaml, grade.yml or grade.json   the job's fields (optional): tier,
 *                       build, runtime/code/argv, limits, stop_on_failure,
 *                       image, and "compare" for the tests found below
 *   files/...           the job's files (the submission), paths kept
 *   tests/NAME.in       a test's stdin, one test per .in, in name order
 *   tests/NAME.out      its expected stdout (optional)
 *   tests/NAME.args     its extra arguments, one per line (optional) */
#ifndef AL_GRADEJOB_H
#define AL_GRADEJOB_H

#include <stdbool.h>
#include <stdio.h>

#include "../proto/err.h"
#include "../proto/job.h"
#include "../proto/result.h"

struct cli_grade_opts {
	const char *tier;     /* overrides the file's; NULL = the file's, else "trusted" */
	const char *image;    /* overrides the file's; NULL = the file's */
	const char *compare;  /* the directory's tests: exact, trim (default) or tokens */
	bool stop_on_failure; /* set it (the file's stands otherwise) */
	bool no_new_id;	      /* a file without an id gives a job without one (the
			       * gateway chooses ids) */
};

/* Read the grading job at path into *job (the caller frees it with
 * al_job_free); its id is new unless the file names one. AL_EINVAL with
 * err naming the file and the problem (the protocol's checks included),
 * AL_ESYS when a file cannot be read. */
int cli_grade_job_load(const char *path, const struct cli_grade_opts *o, struct al_job *job,
		       struct al_err *err);

/* The verdict table of a grading job's result, then one summary line
 * ("19/20 accepted"); for a compile_error, the build's output first. */
void cli_grade_print(FILE *f, const struct al_result *res);

#endif
