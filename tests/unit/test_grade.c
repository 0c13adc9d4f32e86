/* test_grade.c - the grading comparison (backends/grade.h): each mode's
 * matches and mismatches, the first differing line reported, bytes that are
 * not text, and the bounds of what is kept for the report. */
#include <string.h>

#include "../../backends/grade.h"
#include "tap.h"

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
		   al_compare_parse("tokens") == AL_CMP_TOKENS && al_compare_parse("fuzzy") == -1 &&
		   al_compare_parse(NULL) == -1,
	       "the three modes by name; another name is refused");

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
	return tap_done();
}
