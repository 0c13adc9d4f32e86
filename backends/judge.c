/* judge.c - a grading test's verdict on its output (see judge.h). */
#include "judge.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Tokens a and b both numbers (the whole token, finite) within the
 * tolerances: |a - b| <= abs_tol, or <= rel_tol * |want|. */
static bool numbers_close(const char *ws, const char *we, const char *gs, const char *ge,
			  double abs_tol, double rel_tol)
{
	char a[80], b[80], *ea, *eb;
	double x, y;

	if (we - ws >= (long)sizeof(a) || ge - gs >= (long)sizeof(b))
		return false;
	memcpy(a, ws, (size_t)(we - ws));
	a[we - ws] = '\0';
	memcpy(b, gs, (size_t)(ge - gs));
	b[ge - gs] = '\0';
	x = strtod(a, &ea);
	y = strtod(b, &eb);
	if (ea == a || eb == b || *ea || *eb || !isfinite(x) || !isfinite(y))
		return false;
	return fabs(x - y) <= abs_tol || fabs(x - y) <= rel_tol * fabs(x);
}

static bool matches(const char *want, size_t wn, const char *got, size_t gn, enum al_compare mode,
		    double abs_tol, double rel_tol, struct al_diff *d)
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

		if (mode == AL_CMP_TOKENS || mode == AL_CMP_FLOAT) {
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
		if (hw && hg && mode == AL_CMP_FLOAT &&
		    numbers_close(ws, we, gs, ge, abs_tol, rel_tol))
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

bool al_output_matches(const char *want, size_t wn, const char *got, size_t gn,
		       enum al_compare mode, struct al_diff *d)
{
	return matches(want, wn, got, gn, mode, AL_TOL_DEFAULT, AL_TOL_DEFAULT, d);
}

bool al_test_output_matches(const struct al_test *t, const char *got, size_t gn, struct al_diff *d)
{
	return matches(t->expect.data, t->expect.len, got, gn, t->compare, t->abs_tol, t->rel_tol,
		       d);
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

/* ---- the steps of a grading job ---- */

static int copy_cut(const struct al_bytes *in, bool in_cut, struct al_bytes *out, bool *cut)
{
	size_t n = in->len < AL_TEST_KEEP_MAX ? in->len : AL_TEST_KEEP_MAX;

	out->data = malloc(n + 1);
	if (!out->data)
		return AL_ENOMEM;
	if (n)
		memcpy(out->data, in->data, n);
	out->data[n] = '\0';
	out->len = n;
	*cut = in_cut || n < in->len;
	return 0;
}

static int fill_run(const char *name, const struct al_result *run, struct al_test_result *tr)
{
	memset(tr, 0, sizeof(*tr));
	tr->name = strdup(name);
	tr->has_exit_code = run->has_exit_code;
	tr->exit_code = run->exit_code;
	tr->signal = run->signal;
	tr->wall_ms = run->wall_ms;
	tr->cpu_ms = run->cpu_ms;
	tr->peak_memory_bytes = run->peak_memory_bytes;
	tr->max_rss_bytes = run->max_rss_bytes;
	if (!tr->name || copy_cut(&run->out, run->out_truncated, &tr->out, &tr->out_truncated) ||
	    copy_cut(&run->err, run->err_truncated, &tr->err, &tr->err_truncated))
		return AL_ENOMEM;
	return 0;
}

static int set_detail(struct al_test_result *tr, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int set_detail(struct al_test_result *tr, const char *fmt, ...)
{
	char text[AL_VERDICT_TEXT_MAX + 1];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	free(tr->detail);
	return (tr->detail = strdup(text)) ? 0 : -1;
}

/* How a run that did not exit 0 ended, in words. */
static int ended_how(const struct al_result *run, struct al_test_result *tr)
{
	if (run->error && run->error[0])
		return set_detail(tr, "%s", run->error);
	if (run->signal)
		return set_detail(tr, "killed by signal %d (%s)", run->signal,
				  strsignal(run->signal));
	return set_detail(tr, "exit code %d", run->has_exit_code ? run->exit_code : -1);
}

int al_grade_test(const struct al_test *t, const struct al_result *run, struct al_test_result *tr)
{
	struct al_diff d;
	char text[AL_VERDICT_TEXT_MAX + 1];

	if (fill_run(t->name, run, tr))
		return AL_ENOMEM;
	switch (run->status) {
	/* over its time, by the clock or by CPU: one verdict on every tier (which
	 * limit a run hits first depends on the machine: under TCG a busy loop
	 * uses less CPU per second), the detail says which */
	case AL_ST_TIMEOUT:
	case AL_ST_CPU_LIMIT: tr->verdict = AL_V_TIMEOUT; return ended_how(run, tr);
	case AL_ST_MEMORY_LIMIT: tr->verdict = AL_V_MEMORY_LIMIT; return ended_how(run, tr);
	case AL_ST_OUTPUT_LIMIT: tr->verdict = AL_V_OUTPUT_LIMIT; return ended_how(run, tr);
	case AL_ST_OK: break;
	default: tr->verdict = AL_V_RUNTIME_ERROR; return ended_how(run, tr);
	}
	if (run->signal || (run->has_exit_code && run->exit_code != 0)) {
		tr->verdict = AL_V_RUNTIME_ERROR;
		return ended_how(run, tr);
	}
	if (!t->has_expect || al_test_output_matches(t, run->out.data, run->out.len, &d)) {
		tr->verdict = AL_V_ACCEPTED;
		return 0;
	}
	tr->verdict = AL_V_WRONG_ANSWER;
	al_diff_text(&d, text, sizeof(text));
	return set_detail(tr, "%s", text);
}

int al_grade_build(const struct al_result *run, struct al_test_result *tr)
{
	if (fill_run("build", run, tr))
		return AL_ENOMEM;
	if (run->status == AL_ST_OK && !run->signal && (!run->has_exit_code || !run->exit_code)) {
		tr->verdict = AL_V_ACCEPTED;
		return 0;
	}
	tr->verdict = AL_V_COMPILE_ERROR;
	return ended_how(run, tr);
}

int al_grade_skip(const struct al_test *t, struct al_test_result *tr)
{
	memset(tr, 0, sizeof(*tr));
	tr->verdict = AL_V_SKIPPED;
	if (!(tr->name = strdup(t->name)) || !(tr->out.data = calloc(1, 1)) ||
	    !(tr->err.data = calloc(1, 1)))
		return AL_ENOMEM;
	return set_detail(tr, "not run: an earlier test failed (stop_on_failure)");
}

/* A step's job: the grading job without what makes it one. */
static void step_base(const struct al_job *job, struct al_job *out)
{
	*out = *job;
	out->build = out->checker = NULL;
	out->tests = NULL;
	out->ntests = 0;
	out->stop_on_failure = false;
	out->group_scoring = 0;
	out->language = NULL;
	out->ncollect = 0;
	out->collect = NULL;
	out->stdin_data = (struct al_bytes){0};
}

bool al_grade_wants_check(const struct al_job *job, const struct al_test_result *tr)
{
	/* a clean exit: its output is the checker's to judge (limits and
	 * crashes keep their verdict) */
	return job->checker && (tr->verdict == AL_V_ACCEPTED || tr->verdict == AL_V_WRONG_ANSWER);
}

void al_grade_checker_job(const struct al_job *job, const struct al_limits *dflt, long test,
			  const struct al_bytes *actual, char **argv, struct al_file files[3],
			  struct al_job *out, struct al_limits *lim)
{
	const struct al_build *c = job->checker;
	const struct al_test *t = &job->tests[test];
	size_t n = 0;

	step_base(job, out);
	out->runtime = c->runtime;
	out->code = c->code;
	for (size_t i = 0; i < c->argc && n + 3 < AL_ARGV_MAX; i++)
		argv[n++] = c->argv[i];
	argv[n++] = (char *)AL_CHECK_DIR "/input";
	argv[n++] = (char *)AL_CHECK_DIR "/expected";
	argv[n++] = (char *)AL_CHECK_DIR "/actual";
	out->argv = argv;
	out->argc = n;
	files[0] = (struct al_file){(char *)"input", t->stdin_data, 0644};
	files[1] = (struct al_file){(char *)"expected", t->expect, 0644};
	files[2] = (struct al_file){(char *)"actual", *actual, 0644};
	out->files = files;
	out->nfiles = 3;
	al_step_limits(&c->limits, dflt, lim);
	out->limits = *lim;
}

int al_grade_checked(struct al_test_result *tr, const struct al_result *run)
{
	const char *out = run->out.data ? run->out.data : "";
	size_t n = run->out.len, line = 0, word;
	char text[AL_VERDICT_TEXT_MAX + 1];
	const char *msg;

	while (line < n && out[line] != '\n' && out[line] != '\0')
		line++;
	word = 0;
	while (word < line && out[word] != ' ' && out[word] != '\t' && out[word] != '\r')
		word++;
	msg = out + word;
	while (msg < out + line && (*msg == ' ' || *msg == '\t'))
		msg++;
	snprintf(text, sizeof(text), "%.*s",
		 (int)((out + line - msg) > 300 ? 300 : (out + line - msg)), msg);
	for (char *p = text; *p; p++) /* its words, printable */
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (run->status == AL_ST_OK && run->has_exit_code && run->exit_code == 0 && !run->signal) {
		if (word == 8 && !memcmp(out, "accepted", 8)) {
			tr->verdict = AL_V_ACCEPTED;
			free(tr->detail);
			tr->detail = NULL;
			return text[0] ? set_detail(tr, "checker: %s", text) : 0;
		}
		if (word == 12 && !memcmp(out, "wrong_answer", 12)) {
			tr->verdict = AL_V_WRONG_ANSWER;
			return set_detail(tr, "checker: %s",
					  text[0] ? text : "the output is not a right answer");
		}
	}
	tr->verdict = AL_V_CHECKER_ERROR;
	if (run->status != AL_ST_OK && run->status != AL_ST_NONZERO_EXIT)
		return set_detail(tr, "the checker failed (%s): %s", al_status_name(run->status),
				  run->error ? run->error : "");
	if (run->signal)
		return set_detail(tr, "the checker was killed by signal %d", run->signal);
	if (!run->has_exit_code || run->exit_code != 0)
		return set_detail(tr, "the checker exited %d",
				  run->has_exit_code ? run->exit_code : -1);
	return set_detail(tr, "the checker said neither \"accepted\" nor \"wrong_answer\" on its "
			      "first line");
}

int al_grade_score(struct al_result *res, const struct al_job *job)
{
	uint64_t score = 0, max = 0;

	for (size_t i = 0; i < res->ngroups; i++) /* the host's count, never a guest's */
		free(res->groups[i].name);
	free(res->groups);
	res->groups = NULL;
	res->ngroups = 0;
	if (!(res->groups = calloc(job->ntests + 1, sizeof(*res->groups))))
		return AL_ENOMEM;
	for (size_t i = 0; i < job->ntests; i++) {
		const struct al_test *t = &job->tests[i];
		struct al_test_result *tr = i < res->ntests ? &res->tests[i] : NULL;
		bool ok = tr && tr->verdict == AL_V_ACCEPTED;
		struct al_group_score *g = NULL;

		max += t->points;
		if (tr) {
			tr->max_points = t->points;
			tr->points = ok ? t->points : 0;
			tr->hidden = t->hidden;
			free(tr->group);
			if (t->group && !(tr->group = strdup(t->group)))
				return AL_ENOMEM;
			if (t->hidden) { /* the verdict, its usage and points: nothing it printed */
				tr->out.len = tr->err.len = 0;
				if (tr->out.data)
					tr->out.data[0] = '\0';
				if (tr->err.data)
					tr->err.data[0] = '\0';
				tr->out_truncated = tr->err_truncated = false;
				free(tr->detail);
				tr->detail = NULL;
			}
		}
		if (!t->group) {
			score += ok ? t->points : 0;
			continue;
		}
		for (size_t k = 0; k < res->ngroups && !g; k++)
			if (!strcmp(res->groups[k].name, t->group))
				g = &res->groups[k];
		if (!g) {
			g = &res->groups[res->ngroups];
			if (!(g->name = strdup(t->group)))
				return AL_ENOMEM;
			res->ngroups++;
			/* all or nothing: earned until a test of it is not accepted */
			g->score = job->group_scoring == AL_GROUPS_SUM ? 0 : UINT64_MAX;
		}
		g->max_score += t->points;
		if (job->group_scoring == AL_GROUPS_SUM)
			g->score += ok ? t->points : 0;
		else if (!ok)
			g->score = 0;
	}
	for (size_t k = 0; k < res->ngroups; k++) {
		if (res->groups[k].score == UINT64_MAX)
			res->groups[k].score = res->groups[k].max_score;
		score += res->groups[k].score;
	}
	res->has_score = true;
	res->score = score;
	res->max_score = max;
	return 0;
}

bool al_verdict_failed(enum al_verdict v)
{
	return v != AL_V_ACCEPTED && v != AL_V_SKIPPED;
}

int al_grade_result(struct al_result *res, struct al_test_result *build,
		    struct al_result *build_run, struct al_test_result *tests, size_t ntests)
{
	bool all = true;

	res->cpu_ms = build ? build->cpu_ms : 0;
	res->peak_memory_bytes = build ? build->peak_memory_bytes : 0;
	res->max_rss_bytes = build ? build->max_rss_bytes : 0;
	for (size_t i = 0; i < ntests; i++) {
		res->cpu_ms += tests[i].cpu_ms;
		if (tests[i].peak_memory_bytes > res->peak_memory_bytes)
			res->peak_memory_bytes = tests[i].peak_memory_bytes;
		if (tests[i].max_rss_bytes > res->max_rss_bytes)
			res->max_rss_bytes = tests[i].max_rss_bytes;
		all &= tests[i].verdict == AL_V_ACCEPTED;
	}
	if (build) {
		if (!(res->build = malloc(sizeof(*res->build))))
			return AL_ENOMEM;
		*res->build = *build;
		memset(build, 0, sizeof(*build));
	}
	/* a grading job's result always has its tests (none after a compile_error) */
	if (!(res->tests = malloc((ntests ? ntests : 1) * sizeof(*res->tests))))
		return AL_ENOMEM;
	memcpy(res->tests, tests, ntests * sizeof(*tests));
	memset(tests, 0, ntests * sizeof(*tests));
	res->ntests = ntests;
	free(res->error);
	res->error = NULL;
	res->signal = 0;
	res->has_exit_code = true;
	if (res->build && res->build->verdict == AL_V_COMPILE_ERROR) {
		res->status = AL_ST_COMPILE_ERROR;
		res->exit_code = build_run->has_exit_code ? build_run->exit_code : -1;
		res->signal = build_run->signal;
		res->has_exit_code = build_run->has_exit_code;
		free(res->out.data);
		free(res->err.data);
		res->out = build_run->out;
		res->err = build_run->err;
		res->out_truncated = build_run->out_truncated;
		res->err_truncated = build_run->err_truncated;
		build_run->out = build_run->err = (struct al_bytes){0};
		return al_result_set_error(res, "the build failed: %s",
					   res->build->detail ? res->build->detail : "?");
	}
	res->status = AL_ST_OK;
	res->exit_code = all ? 0 : 1;
	return 0;
}

void al_grade_step_job(const struct al_job *job, const struct al_limits *dflt, long step,
		       char **argv, struct al_job *out, struct al_limits *lim)
{
	step_base(job, out);
	if (step < 0) { /* the build: its command; the job's files are in the tree */
		const struct al_build *b = job->build;

		out->runtime = b->runtime;
		out->code = b->code;
		out->argv = b->argv;
		out->argc = b->argc;
		out->files = NULL;
		out->nfiles = 0;
		al_step_limits(&b->limits, dflt, lim);
	} else {
		const struct al_test *t = &job->tests[step];
		size_t n = 0;

		for (size_t i = 0; i < job->argc && n < AL_ARGV_MAX; i++)
			argv[n++] = job->argv[i];
		for (size_t i = 0; i < t->argc && n < AL_ARGV_MAX; i++)
			argv[n++] = t->argv[i];
		out->argv = argv;
		out->argc = n;
		out->stdin_data = t->stdin_data;
		out->files = t->files;
		out->nfiles = t->nfiles;
		al_step_limits(&t->limits, dflt, lim);
	}
	out->limits = *lim;
}

void al_grade_envelope(const struct al_job *job, const struct al_limits *dflt,
		       struct al_limits *env)
{
	if (!job->ntests) {
		*env = *dflt;
		return;
	}
	*env = (struct al_limits){0};
	/* the build, each test and (with a checker) its check after it */
	for (long i = job->build ? -1 : 0; i < (long)job->ntests * (job->checker ? 2 : 1); i++) {
		struct al_limits l;
		bool check = i >= (long)job->ntests;

		al_step_limits(i < 0   ? &job->build->limits
			       : check ? &job->checker->limits
				       : &job->tests[i].limits,
			       dflt, &l);
		env->wall_ms += l.wall_ms + AL_GRADE_STEP_SLACK_MS;
		env->cpu_ms += l.cpu_ms;
#define MAX(f) env->f = l.f > env->f ? l.f : env->f
		MAX(memory_bytes);
		MAX(pids);
		MAX(stdout_bytes);
		MAX(stderr_bytes);
		MAX(disk_bytes);
#undef MAX
	}
}
