/* junit.c - the counts of a JUnit XML report (junit.h). A scanner, not a
 * parser: it reads only the start tags of <testsuite> and <testsuites>
 * and their numeric attributes, bounded by len, never past it. */
#include "junit.h"

#include <stddef.h>
#include <string.h>

struct tally {
	uint64_t tests, failures, errors, skipped;
	bool seen;
};

/* The first occurrence of the len2 bytes s2 in [p, end), or NULL. */
static const char *find(const char *p, const char *end, const char *s2)
{
	size_t n = strlen(s2);

	return (size_t)(end - p) >= n ? memmem(p, (size_t)(end - p), s2, n) : NULL;
}

/* A decimal attribute value (quoted, digits only, capped): its value, or 0. */
static uint64_t number(const char *p, const char *end)
{
	uint64_t v = 0;

	for (; p < end && *p >= '0' && *p <= '9'; p++)
		v = v < UINT64_MAX / 16 ? v * 10 + (uint64_t)(*p - '0') : v;
	return v;
}

/* The attributes of a start tag from p (after its name) to its '>'; the
 * position after it. */
static const char *attributes(const char *p, const char *end, struct tally *t)
{
	static const struct {
		const char *name;
		size_t off;
	} names[] = {{"tests", offsetof(struct tally, tests)},
		     {"failures", offsetof(struct tally, failures)},
		     {"errors", offsetof(struct tally, errors)},
		     {"skipped", offsetof(struct tally, skipped)},
		     {"disabled", offsetof(struct tally, skipped)}};

	t->seen = true;
	while (p < end && *p != '>') {
		const char *name, *eq, *val, *close;
		size_t nl;

		while (p < end &&
		       (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '/'))
			p++;
		name = p;
		while (p < end && *p != '=' && *p != '>' && *p != ' ' && *p != '\t' && *p != '\n' &&
		       *p != '\r')
			p++;
		if (p >= end || *p != '=') {
			if (p < end && *p != '>')
				p++;
			continue;
		}
		eq = p++;
		nl = (size_t)(eq - name);
		if (p >= end || (*p != '"' && *p != '\''))
			continue;
		val = p + 1;
		close = memchr(val, *p, (size_t)(end - val));
		if (!close)
			return end;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strlen(names[i].name) == nl && !memcmp(name, names[i].name, nl))
				*(uint64_t *)((char *)t + names[i].off) += number(val, close);
		p = close + 1;
	}
	return p < end ? p + 1 : end;
}

bool cli_junit_counts(const char *data, size_t len, struct cli_junit *out)
{
	const char *p = data, *end = data + len;
	struct tally suite = {0}, suites = {0}, *t;

	while (p && p < end && (p = memchr(p, '<', (size_t)(end - p)))) {
		const char *skip_to = NULL;

		if ((size_t)(end - p) >= 4 && !memcmp(p, "<!--", 4))
			skip_to = "-->";
		else if ((size_t)(end - p) >= 9 && !memcmp(p, "<![CDATA[", 9))
			skip_to = "]]>";
		if (skip_to) {
			const char *e = find(p, end, skip_to);

			p = e ? e + strlen(skip_to) : end;
			continue;
		}
		if ((size_t)(end - p) > 10 && !memcmp(p, "<testsuite", 10)) {
			char c = p[10];

			t = c == 's' ? &suites : &suite;
			p += c == 's' ? 11 : 10;
			if (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' ||
					*p == '>' || *p == '/')) {
				p = attributes(p, end, t);
				continue;
			}
			continue;
		}
		p++;
	}
	t = suite.seen ? &suite : &suites;
	if (!t->seen)
		return false;
	out->failed = t->failures + t->errors;
	out->skipped = t->skipped;
	out->passed =
	    t->tests > out->failed + out->skipped ? t->tests - out->failed - out->skipped : 0;
	return true;
}
