/* fuzz_junit.c - libFuzzer target for the CLI's JUnit report scanner
 * (cli/junit.h): a collected report is the job's bytes; any input must be
 * read within its length, never crash, and give counts that add up. */
#include <stdint.h>
#include <stdlib.h>

#include "../../cli/junit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cli_junit j = {0};

	if (cli_junit_counts((const char *)data, size, &j) && j.passed == UINT64_MAX)
		abort(); /* passes are what is left: never wrapped below zero */
	return 0;
}
