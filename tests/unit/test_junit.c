/* test_junit.c - the counts of JUnit XML reports (cli/junit.h): real
 * runners' shapes, and reports a job could forge to mislead the scanner. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../../cli/junit.h"
#include "tap.h"

static const struct {
	const char *name, *xml;
	bool report;
	unsigned long long passed, failed, skipped;
} cases[] = {
    {"pytest (testsuites around one testsuite)",
     "<?xml version=\"1.0\" encoding=\"utf-8\"?><testsuites><testsuite name=\"pytest\" "
     "errors=\"0\" failures=\"2\" skipped=\"1\" tests=\"14\" time=\"0.5\"><testcase "
     "classname=\"t\" name=\"a\"/></testsuite></testsuites>",
     true, 11, 2, 1},
    {"ctest (disabled counts as skipped)",
     "<testsuite name=\"Linux-c++\" tests=\"4\" failures=\"1\" disabled=\"0\" skipped=\"0\" "
     "hostname=\"\" time=\"0\" timestamp=\"2026-12-02T16:00:00\">\n</testsuite>",
     true, 3, 1, 0},
    {"several suites are summed, errors count as failed",
     "<testsuites tests=\"99\"><testsuite tests='3' errors='1'/><testsuite tests='5' "
     "failures='2' skipped='1'></testsuite></testsuites>",
     true, 4, 3, 1},
    {"only testsuites: its totals", "<testsuites tests=\"7\" failures=\"1\"></testsuites>", true, 6,
     1, 0},
    {"a tag name in a comment or CDATA is not a suite",
     "<testsuite tests=\"2\"><system-out><![CDATA[<testsuite tests=\"100\">]]></system-out>"
     "<!-- <testsuite tests=\"50\"> --></testsuite>",
     true, 2, 0, 0},
    {"'>' inside a quoted value does not end the tag",
     "<testsuite name=\"a > b\" tests=\"3\" failures=\"1\"/>", true, 2, 1, 0},
    {"<testsuitefoo> is another element", "<testsuitefoo tests=\"9\"/>", false, 0, 0, 0},
    {"not a report", "hello world", false, 0, 0, 0},
    {"an unterminated value stops at the end", "<testsuite tests=\"12", true, 0, 0, 0},
    {"more failures than tests: no negative passes", "<testsuite tests=\"1\" failures=\"5\"/>",
     true, 0, 5, 0},
    {"a huge number is capped, not wrapped", "<testsuite tests=\"99999999999999999999999999\"/>",
     true, 0, 0, 0},
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cli_junit j = {0};
		bool r = cli_junit_counts(cases[i].xml, strlen(cases[i].xml), &j);

		if (i == sizeof(cases) / sizeof(cases[0]) - 1) {
			TAP_OK(r && j.passed > 1000000000000000000ull && j.failed == 0, "%s (%llu)",
			       cases[i].name, (unsigned long long)j.passed);
			continue;
		}
		TAP_OK(r == cases[i].report &&
			   (!r || (j.passed == cases[i].passed && j.failed == cases[i].failed &&
				   j.skipped == cases[i].skipped)),
		       "%s: %llu passed, %llu failed, %llu skipped", cases[i].name,
		       (unsigned long long)j.passed, (unsigned long long)j.failed,
		       (unsigned long long)j.skipped);
	}
	{
		/* every prefix of a report, placed against a page no one may
		 * read: a scan past its bytes crashes the test */
		const char *x = cases[4].xml;
		size_t n = strlen(x), pg = 4096, reads = 0;
		char *two =
		    mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (two == MAP_FAILED || mprotect(two + pg, pg, PROT_NONE))
			return 1;
		for (size_t k = 0; k <= n; k++) {
			struct cli_junit j;

			memcpy(two + pg - k, x, k);
			reads += cli_junit_counts(two + pg - k, k, &j);
		}
		TAP_OK(reads > 0,
		       "each of the %zu prefixes of a report is read within its bytes "
		       "(a guard page after them)",
		       n + 1);
		munmap(two, 2 * pg);
	}
	return tap_done();
}
