/* grade.c - see grade.h. */
#include "grade.h"

#include <stdio.h>
#include <string.h>

/* A cursor over one side: the next line, or the next token. */
struct side {
	const char *p, *end;
	uint64_t line; /* 1-based line of the cursor */
};

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* The next line [*s, *e) without its newline; false at the end. trim: its
 * trailing blanks go. */
static bool next_line(struct side *sd, const char **s, const char **e, bool trim)
{
	const char *nl;

	if (sd->p >= sd->end)
		return false;
	nl = memchr(sd->p, '\n', (size_t)(sd->end - sd->p));
	*s = sd->p;
	*e = nl ? nl : sd->end;
	sd->p = nl ? nl + 1 : sd->end;
	sd->line++;
	while (trim && *e > *s && blank((*e)[-1]))
		(*e)--;
	return true;
}

/* Only blank lines are left (trim: they do not count). */
static bool only_blank_left(const struct side *sd)
{
	for (const char *q = sd->p; q < sd->end; q++)
		if (!blank(*q))
			return false;
	return true;
}

/* The next token [*s, *e) and the line it is on; false at the end. */
static bool next_token(struct side *sd, const char **s, const char **e)
{
	while (sd->p < sd->end && blank(*sd->p)) {
		if (*sd->p == '\n')
			sd->line++;
		sd->p++;
	}
	if (sd->p >= sd->end)
		return false;
	*s = sd->p;
	while (sd->p < sd->end && !blank(*sd->p))
		sd->p++;
	*e = sd->p;
	return true;
}

static void keep(char *out, const char *s, const char *e)
{
	size_t n = (size_t)(e - s) > AL_DIFF_TEXT_MAX ? AL_DIFF_TEXT_MAX : (size_t)(e - s);

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		out[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	out[n] = '\0';
}

static bool same(const char *a, const char *ae, const char *b, const char *be)
{
	return ae - a == be - b && !memcmp(a, b, (size_t)(ae - a));
}

bool al_output_matches(const char *want, size_t wn, const char *got, size_t gn,
		       enum al_compare mode, struct al_diff *d)
{
	struct side w = {want ? want : "", (want ? want : "") + wn, 0};
	struct side g = {got ? got : "", (got ? got : "") + gn, 0};
	struct al_diff tmp;

	if (!d)
		d = &tmp;
	memset(d, 0, sizeof(*d));
	if (mode == AL_CMP_EXACT && wn == gn && (!wn || !memcmp(want, got, wn)))
		return true;
	for (;;) {
		const char *ws = NULL, *we = NULL, *gs = NULL, *ge = NULL;
		bool hw, hg;
		uint64_t at;

		if (mode == AL_CMP_TOKENS) {
			hw = next_token(&w, &ws, &we);
			hg = next_token(&g, &gs, &ge);
			at = g.line + 1; /* the newlines before the token, plus its own line */
		} else {
			bool trim = mode == AL_CMP_TRIM;

			if (trim && only_blank_left(&w) && only_blank_left(&g))
				return true;
			hw = next_line(&w, &ws, &we, trim);
			hg = next_line(&g, &gs, &ge, trim);
			at = hg ? g.line : g.line + 1;
			/* exact: "a\n" and "a" differ only in the final newline */
			if (!trim && !hw && !hg)
				break;
		}
		if (!hw && !hg)
			return true;
		if (hw && hg && same(ws, we, gs, ge))
			continue;
		d->line = at;
		d->want_ended = !hw;
		d->got_ended = !hg;
		if (hw)
			keep(d->want, ws, we);
		if (hg)
			keep(d->got, gs, ge);
		return false;
	}
	/* exact, every line alike: they differ in the last newline alone */
	d->line = g.line;
	snprintf(d->want, sizeof(d->want), "%s",
		 wn && want[wn - 1] == '\n' ? "(a newline at the end)" : "(no newline at the end)");
	snprintf(d->got, sizeof(d->got), "%s",
		 gn && got[gn - 1] == '\n' ? "(a newline at the end)" : "(no newline at the end)");
	return false;
}

void al_diff_text(const struct al_diff *d, char *out, size_t cap)
{
	if (d->got_ended)
		snprintf(out, cap, "line %llu: expected \"%s\", got nothing: the output ended",
			 (unsigned long long)d->line, d->want);
	else if (d->want_ended)
		snprintf(out, cap, "line %llu: expected nothing more, got \"%s\"",
			 (unsigned long long)d->line, d->got);
	else
		snprintf(out, cap, "line %llu: expected \"%s\", got \"%s\"",
			 (unsigned long long)d->line, d->want, d->got);
}
