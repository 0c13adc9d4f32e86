/* grade.h - a grading test's verdict on its output: does what the program
 * printed match what the test expects, and where does it first differ.
 * Pure C, no I/O: the worker and the microVM guest agent share it (the
 * grading issue: build once, run many tests, a verdict for each). */
#ifndef AL_GRADE_H
#define AL_GRADE_H

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

/* One line for a verdict: "line 3: expected \"4\", got \"5\"" (or "... got
 * nothing: the output ended"). */
void al_diff_text(const struct al_diff *d, char *out, size_t cap);

#endif
