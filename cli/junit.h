/* junit.h - the counts of a JUnit XML report (pytest --junitxml, ctest
 * --output-junit, JUnit's, jest-junit's...), for `airlock run`'s one-line
 * summary of a collected report. Internal to cli/. */
#ifndef AL_CLI_JUNIT_H
#define AL_CLI_JUNIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cli_junit {
	uint64_t passed, failed, skipped; /* failed: failures and errors */
};

/* Sum the tests, failures, errors and skipped (or disabled) attributes of
 * every <testsuite> element in data (len bytes, any content: a job made
 * it); only <testsuites>' when there is no <testsuite>. Comments and CDATA
 * are skipped. false when data holds neither element (not a report). */
bool cli_junit_counts(const char *data, size_t len, struct cli_junit *out);

#endif
