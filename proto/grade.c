/* grade.c - the grading fields of jobs and results (grade.h, PROTOCOL.md
 * "Grading jobs"): decoding, checking, encoding, freeing. */
#include "grade.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

static const char *const compare_names[] = {"exact", "trim", "tokens", "float"};
static const char *const verdict_names[AL_V_COUNT] = {
    "accepted",	    "wrong_answer",  "timeout", "cpu_limit",	 "memory_limit",
    "output_limit", "runtime_error", "skipped", "compile_error", "checker_error",
};

int al_compare_parse(const char *name)
{
	for (int i = 0; name && i < 4; i++)
		if (!strcmp(name, compare_names[i]))
			return i;
	return AL_EINVAL;
}

const char *al_compare_name(enum al_compare mode)
{
	return (unsigned)mode < 4 ? compare_names[mode] : "?";
}

const char *al_verdict_name(enum al_verdict v)
{
	return (unsigned)v < AL_V_COUNT ? verdict_names[v] : "?";
}

int al_verdict_parse(const char *name)
{
	for (int i = 0; name && i < AL_V_COUNT; i++)
		if (!strcmp(name, verdict_names[i]))
			return i;
	return AL_EINVAL;
}

void al_step_limits(const struct al_limits *own, const struct al_limits *dflt,
		    struct al_limits *out)
{
#define PICK(f) out->f = own->f ? own->f : dflt->f
	PICK(wall_ms);
	PICK(cpu_ms);
	PICK(memory_bytes);
	PICK(pids);
	PICK(stdout_bytes);
	PICK(stderr_bytes);
	PICK(disk_bytes);
#undef PICK
}

/* ---- the job's fields ---- */

static int dec_runtime(const msgpack_object *v, const char *what, enum al_runtime *rt,
		       struct al_err *err)
{
	char *s = NULL;
	int rc = al_mp_get_text(v, what, 32, &s, err);

	if (rc)
		return rc;
	if (!strcmp(s, "python"))
		*rt = AL_RUNTIME_PYTHON;
	else if (!strcmp(s, "sh"))
		*rt = AL_RUNTIME_SH;
	else
		rc = al_err_set(err, AL_EINVAL, "%s: unknown value \"%.32s\" (python or sh)", what,
				s);
	free(s);
	return rc;
}

/* A step map (build, checker) named what into *out. */
static int dec_step_map(const msgpack_object *v, const char *what, struct al_build **out,
			struct al_err *err)
{
	struct al_build *b;
	unsigned seen = 0;
	char name[32];
	int rc = AL_OK;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_MAP, what, err)))
		return rc;
	if (!(b = *out = calloc(1, sizeof(*b))))
		return al_err_set(err, AL_ENOMEM, "%s: out of memory", what);
	for (uint32_t i = 0; i < v->via.map.size && !rc; i++) {
		static const char *const keys[] = {"runtime", "code", "argv", "limits"};
		const msgpack_object *k = &v->via.map.ptr[i].key, *val = &v->via.map.ptr[i].val;
		unsigned f;

		for (f = 0; f < 4 && !al_mp_key_is(k, keys[f]); f++)
			;
		if (f == 4 || (seen & (1u << f)))
			return al_err_set(err, AL_EINVAL,
					  "%s: unknown or repeated field #%u (known: runtime, "
					  "code, argv, limits)",
					  what, i);
		seen |= 1u << f;
		snprintf(name, sizeof(name), "%s.%s", what, keys[f]);
		switch (f) {
		case 0: rc = dec_runtime(val, name, &b->runtime, err); break;
		case 1: rc = al_mp_get_bytes(val, name, AL_CODE_MAX, &b->code, err); break;
		case 2:
			rc = al_dec_text_array(val, name, AL_ARGV_MAX, AL_ARG_MAX, &b->argv,
					       &b->argc, err);
			break;
		default: rc = al_dec_limits(val, name, &b->limits, err); break;
		}
	}
	return rc;
}

int al_grade_dec_build(const msgpack_object *v, struct al_job *job, struct al_err *err)
{
	return dec_step_map(v, "build", &job->build, err);
}

int al_grade_dec_checker(const msgpack_object *v, struct al_job *job, struct al_err *err)
{
	return dec_step_map(v, "checker", &job->checker, err);
}

/* A tolerance: a number, 0..1e6. */
static int get_tol(const msgpack_object *v, const char *what, double *out, struct al_err *err)
{
	double x;

	if (v->type == MSGPACK_OBJECT_FLOAT32 || v->type == MSGPACK_OBJECT_FLOAT64)
		x = v->via.f64;
	else if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		x = (double)v->via.u64;
	else
		return al_err_set(err, AL_EINVAL, "%s: expected a number", what);
	if (!(x >= 0 && x <= 1e6))
		return al_err_set(err, AL_EINVAL, "%s: expected 0..1e6", what);
	*out = x;
	return AL_OK;
}

static int dec_test(const msgpack_object *v, uint32_t i, struct al_test *t, struct al_err *err)
{
	static const char *const keys[] = {"name",   "stdin",  "argv",	  "files",
					   "limits", "expect", "compare", "points",
					   "group",  "hidden", "abs_tol", "rel_tol"};
	const unsigned nkeys = sizeof(keys) / sizeof(keys[0]);
	char what[64];
	unsigned seen = 0;
	int rc;

	snprintf(what, sizeof(what), "tests[%u]", i);
	if ((rc = al_mp_want(v, MSGPACK_OBJECT_MAP, what, err)))
		return rc;
	t->compare = AL_CMP_TRIM;
	t->points = 1;
	t->abs_tol = t->rel_tol = AL_TOL_DEFAULT;
	for (uint32_t k = 0; k < v->via.map.size; k++) {
		const msgpack_object *key = &v->via.map.ptr[k].key, *val = &v->via.map.ptr[k].val;
		char *s = NULL;
		unsigned f;

		for (f = 0; f < nkeys && !al_mp_key_is(key, keys[f]); f++)
			;
		if (f == nkeys || (seen & (1u << f)))
			return al_err_set(
			    err, AL_EINVAL,
			    "tests[%u]: unknown or repeated field #%u (known: name, "
			    "stdin, argv, files, limits, expect, compare, points, group, "
			    "hidden, abs_tol, rel_tol)",
			    i, k);
		seen |= 1u << f;
		snprintf(what, sizeof(what), "tests[%u].%s", i, keys[f]);
		switch (f) {
		case 0: rc = al_mp_get_text(val, what, AL_TEST_NAME_MAX, &t->name, err); break;
		case 1: rc = al_mp_get_bytes(val, what, AL_STDIN_MAX, &t->stdin_data, err); break;
		case 2:
			rc = al_dec_text_array(val, what, AL_ARGV_MAX, AL_ARG_MAX, &t->argv,
					       &t->argc, err);
			break;
		case 3: rc = al_dec_files(val, what, &t->files, &t->nfiles, err); break;
		case 4: rc = al_dec_limits(val, what, &t->limits, err); break;
		case 5:
			rc = al_mp_get_bytes(val, what, AL_EXPECT_MAX, &t->expect, err);
			t->has_expect = true;
			break;
		case 7: {
			uint64_t u;

			rc = al_mp_get_uint(val, what, 0, AL_POINTS_MAX, &u, err);
			t->points = (uint32_t)u;
			break;
		}
		case 8:
			if (!(rc = al_mp_get_text(val, what, AL_GROUP_MAX, &t->group, err)) &&
			    !t->group[0])
				rc = al_err_set(err, AL_EINVAL, "%s: empty", what);
			break;
		case 9: rc = al_mp_get_bool(val, what, &t->hidden, err); break;
		case 10: rc = get_tol(val, what, &t->abs_tol, err); break;
		case 11: rc = get_tol(val, what, &t->rel_tol, err); break;
		default:
			if (!(rc = al_mp_get_text(val, what, 16, &s, err))) {
				int m = al_compare_parse(s);

				if (m < 0)
					rc = al_err_set(err, AL_EINVAL,
							"%s: unknown value \"%s\" (exact, trim, "
							"tokens or float)",
							what, s);
				t->compare = m < 0 ? AL_CMP_TRIM : (enum al_compare)m;
				free(s);
			}
			break;
		}
		if (rc)
			return rc;
	}
	if (!t->name)
		return al_err_set(err, AL_EINVAL, "tests[%u].name: missing", i);
	if ((seen & (3u << 10)) && t->compare != AL_CMP_FLOAT)
		return al_err_set(err, AL_EINVAL,
				  "tests[%u]: abs_tol and rel_tol only with compare: float", i);
	return AL_OK;
}

int al_grade_dec_tests(const msgpack_object *v, struct al_job *job, struct al_err *err)
{
	int rc;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_ARRAY, "tests", err)))
		return rc;
	if (v->via.array.size == 0 || v->via.array.size > AL_TESTS_MAX)
		return al_err_set(err, AL_EINVAL, "tests: %u entries, expected 1..%d",
				  v->via.array.size, AL_TESTS_MAX);
	if (!(job->tests = calloc(v->via.array.size, sizeof(*job->tests))))
		return al_err_set(err, AL_ENOMEM, "tests: out of memory");
	for (uint32_t i = 0; i < v->via.array.size; i++) {
		job->ntests++;
		if ((rc = dec_test(&v->via.array.ptr[i], i, &job->tests[i], err)))
			return rc;
	}
	return AL_OK;
}

static int check_args(const char *what, char *const *argv, size_t argc, struct al_err *err)
{
	for (size_t i = 0; i < argc; i++)
		if (strlen(argv[i]) > AL_ARG_MAX)
			return al_err_set(err, AL_EINVAL, "%s[%zu]: too long", what, i);
	return AL_OK;
}

static int check_test_name(size_t i, const char *name, struct al_err *err)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > AL_TEST_NAME_MAX || !al_utf8_valid(name, n))
		return al_err_set(err, AL_EINVAL, "tests[%zu].name: must be 1..%d bytes of UTF-8",
				  i, AL_TEST_NAME_MAX);
	for (size_t k = 0; k < n; k++)
		if ((unsigned char)name[k] < 0x20 || name[k] == 0x7f)
			return al_err_set(err, AL_EINVAL,
					  "tests[%zu].name: control character in \"%.64s\"", i,
					  name);
	return AL_OK;
}

int al_grade_validate(const struct al_job *job, struct al_err *err)
{
	const struct al_build *b = job->build;
	char what[64];
	int rc;

	if (!job->ntests) {
		if (b)
			return al_err_set(err, AL_EINVAL,
					  "build: only in a grading job: give it tests too");
		if (job->stop_on_failure)
			return al_err_set(err, AL_EINVAL,
					  "stop_on_failure: only in a grading job (with tests)");
		if (job->group_scoring)
			return al_err_set(err, AL_EINVAL,
					  "group_scoring: only in a grading job (with tests)");
		if (job->checker)
			return al_err_set(err, AL_EINVAL,
					  "checker: only in a grading job (with tests)");
		return AL_OK;
	}
	if (job->ntests > AL_TESTS_MAX)
		return al_err_set(err, AL_EINVAL, "tests: %zu entries, at most %d", job->ntests,
				  AL_TESTS_MAX);
	if (job->stdin_data.len)
		return al_err_set(err, AL_EINVAL,
				  "stdin: a grading job has none of its own: give each test its "
				  "stdin");
	if (job->ncollect)
		return al_err_set(err, AL_EINVAL,
				  "collect: not in a grading job (its result carries each test's "
				  "output)");
	for (int k = 0; k < 2; k++) { /* the build, then the checker */
		const struct al_build *st = k ? job->checker : b;
		const char *nm = k ? "checker" : "build";
		char w[32];

		if (!st)
			continue;
		snprintf(w, sizeof(w), "%s.", nm);
		if ((rc = al_check_command(w, st->runtime, &st->code, st->argv, st->argc, err)))
			return rc;
		snprintf(w, sizeof(w), "%s.argv", nm);
		if ((rc = check_args(w, st->argv, st->argc, err)))
			return rc;
		snprintf(w, sizeof(w), "%s.limits", nm);
		if ((rc = al_check_limits(w, &st->limits, err)))
			return rc;
		if (st->code.len > AL_CODE_MAX || st->argc + 3 > AL_ARGV_MAX)
			return al_err_set(err, AL_EINVAL,
					  "%s: code or argv exceeds its cap (see PROTOCOL.md)", nm);
	}
	for (size_t i = 0; i < job->ntests; i++) {
		const struct al_test *t = &job->tests[i];

		if ((rc = check_test_name(i, t->name, err)))
			return rc;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(job->tests[j].name, t->name))
				return al_err_set(err, AL_EINVAL,
						  "tests[%zu].name: \"%s\" is also tests[%zu]'s", i,
						  t->name, j);
		if (t->stdin_data.len > AL_STDIN_MAX || t->expect.len > AL_EXPECT_MAX)
			return al_err_set(err, AL_EINVAL,
					  "tests[%zu]: stdin or expect exceeds its cap (see "
					  "PROTOCOL.md)",
					  i);
		if (t->argc + job->argc > AL_ARGV_MAX)
			return al_err_set(
			    err, AL_EINVAL,
			    "tests[%zu].argv: %zu arguments with the job's, at most %d", i,
			    t->argc + job->argc, AL_ARGV_MAX);
		if ((unsigned)t->compare > AL_CMP_FLOAT)
			return al_err_set(err, AL_EINVAL, "tests[%zu].compare: unknown mode", i);
		snprintf(what, sizeof(what), "tests[%zu].argv", i);
		if ((rc = check_args(what, t->argv, t->argc, err)))
			return rc;
		snprintf(what, sizeof(what), "tests[%zu].files", i);
		if ((rc = al_check_files(what, t->files, t->nfiles, err)))
			return rc;
		snprintf(what, sizeof(what), "tests[%zu].limits", i);
		if ((rc = al_check_limits(what, &t->limits, err)))
			return rc;
	}
	return AL_OK;
}

size_t al_grade_job_nfields(const struct al_job *job)
{
	return (job->build != NULL) + (job->checker != NULL) + (job->ntests > 0) +
	       job->stop_on_failure + (job->group_scoring != AL_GROUPS_ALL);
}

static int pack_bool(msgpack_packer *pk, const char *k, bool v)
{
	return al_mp_pack_str(pk, k) || (v ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
}

static int pack_step_map(msgpack_packer *pk, const char *name, const struct al_build *b)
{
	int bad = al_mp_pack_str(pk, name) ||
		  msgpack_pack_map(pk, 1 + (b->runtime != AL_RUNTIME_ARGV) * 2 + (b->argc > 0));

	if (b->runtime != AL_RUNTIME_ARGV)
		bad |= al_mp_pack_kv_str(pk, "runtime", al_runtime_name(b->runtime)) ||
		       al_mp_pack_kv_bin(pk, "code", b->code.data, b->code.len);
	if (b->argc)
		bad |= al_mp_pack_str(pk, "argv") || al_pack_text_array(pk, b->argv, b->argc);
	bad |= al_mp_pack_str(pk, "limits") || al_pack_limits(pk, &b->limits);
	return bad;
}

int al_grade_pack_job(msgpack_packer *pk, const struct al_job *job)
{
	int bad = 0;

	if (job->build)
		bad |= pack_step_map(pk, "build", job->build);
	if (job->checker)
		bad |= pack_step_map(pk, "checker", job->checker);
	if (job->ntests) {
		bad |= al_mp_pack_str(pk, "tests") || msgpack_pack_array(pk, job->ntests);
		for (size_t i = 0; i < job->ntests && !bad; i++) {
			const struct al_test *t = &job->tests[i];

			bool tol = t->has_expect && t->compare == AL_CMP_FLOAT;

			bad |= msgpack_pack_map(
			    pk, 3 + (t->argc > 0) + (t->nfiles > 0) + t->has_expect * 2 + tol * 2 +
				    (t->points != 1) + (t->group != NULL) + t->hidden);
			bad |= al_mp_pack_kv_str(pk, "name", t->name);
			bad |=
			    al_mp_pack_kv_bin(pk, "stdin", t->stdin_data.data, t->stdin_data.len);
			if (t->argc)
				bad |= al_mp_pack_str(pk, "argv") ||
				       al_pack_text_array(pk, t->argv, t->argc);
			if (t->nfiles)
				bad |= al_mp_pack_str(pk, "files") ||
				       al_pack_files(pk, t->files, t->nfiles);
			bad |= al_mp_pack_str(pk, "limits") || al_pack_limits(pk, &t->limits);
			if (t->has_expect)
				bad |=
				    al_mp_pack_kv_bin(pk, "expect", t->expect.data,
						      t->expect.len) ||
				    al_mp_pack_kv_str(pk, "compare", al_compare_name(t->compare));
			if (tol)
				bad |= al_mp_pack_str(pk, "abs_tol") ||
				       msgpack_pack_double(pk, t->abs_tol) ||
				       al_mp_pack_str(pk, "rel_tol") ||
				       msgpack_pack_double(pk, t->rel_tol);
			if (t->points != 1)
				bad |= al_mp_pack_kv_uint(pk, "points", t->points);
			if (t->group)
				bad |= al_mp_pack_kv_str(pk, "group", t->group);
			if (t->hidden)
				bad |= pack_bool(pk, "hidden", true);
		}
	}
	if (job->stop_on_failure)
		bad |= pack_bool(pk, "stop_on_failure", true);
	if (job->group_scoring != AL_GROUPS_ALL)
		bad |= al_mp_pack_kv_str(pk, "group_scoring",
					 al_group_scoring_name(job->group_scoring));
	return bad ? -1 : 0;
}

static const char *const group_scoring_names[] = {
    [AL_GROUPS_ALL] = "all",
    [AL_GROUPS_SUM] = "sum",
    [AL_GROUPS_MIN] = "min",
};

const char *al_group_scoring_name(int scoring)
{
	return scoring >= 0 && scoring <= AL_GROUPS_MIN ? group_scoring_names[scoring] : "all";
}

int al_group_scoring_parse(const char *name)
{
	for (int k = AL_GROUPS_ALL; k <= AL_GROUPS_MIN; k++)
		if (!strcmp(name, group_scoring_names[k]))
			return k;
	return -1;
}

void al_grade_free_job(struct al_job *job)
{
	for (int k = 0; k < 2; k++) {
		struct al_build *st = k ? job->checker : job->build;

		if (st) {
			free(st->code.data);
			al_free_strv(st->argv, st->argc);
			free(st);
		}
	}
	job->checker = NULL;
	for (size_t i = 0; i < job->ntests; i++) {
		struct al_test *t = &job->tests[i];

		free(t->name);
		free(t->stdin_data.data);
		al_free_strv(t->argv, t->argc);
		al_free_files(t->files, t->nfiles);
		free(t->expect.data);
		free(t->group);
	}
	free(job->tests);
	job->build = NULL;
	job->tests = NULL;
	job->ntests = 0;
}

/* ---- the result's fields ---- */

static int dec_test_result(const msgpack_object *v, const char *what, struct al_test_result *t,
			   struct al_err *err)
{
	char name[96], *verdict = NULL;
	uint64_t u;
	int64_t i64;
	int rc = AL_OK;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_MAP, what, err)))
		return rc;
	for (uint32_t i = 0; i < v->via.map.size && !rc; i++) {
		const msgpack_object *k = &v->via.map.ptr[i].key, *val = &v->via.map.ptr[i].val;

		if (k->type == MSGPACK_OBJECT_STR)
			snprintf(name, sizeof(name), "%s.%.*s", what,
				 (int)(k->via.str.size > 20 ? 20 : k->via.str.size),
				 k->via.str.ptr);
		if (al_mp_key_is(k, "name") && !t->name) {
			rc = al_mp_get_text(val, name, AL_TEST_NAME_MAX, &t->name, err);
		} else if (al_mp_key_is(k, "verdict") && !verdict) {
			rc = al_mp_get_text(val, name, 32, &verdict, err);
		} else if (al_mp_key_is(k, "exit_code")) {
			if (val->type != MSGPACK_OBJECT_NIL) {
				rc = al_mp_get_int(val, name, INT32_MIN, INT32_MAX, &i64, err);
				t->exit_code = (int32_t)i64;
				t->has_exit_code = true;
			}
		} else if (al_mp_key_is(k, "signal")) {
			rc = al_mp_get_uint(val, name, 0, 128, &u, err);
			t->signal = (int32_t)u;
		} else if (al_mp_key_is(k, "wall_ms")) {
			rc = al_mp_get_uint(val, name, 0, UINT64_MAX, &t->wall_ms, err);
		} else if (al_mp_key_is(k, "cpu_ms")) {
			rc = al_mp_get_uint(val, name, 0, UINT64_MAX, &t->cpu_ms, err);
		} else if (al_mp_key_is(k, "peak_memory_bytes")) {
			rc = al_mp_get_uint(val, name, 0, UINT64_MAX, &t->peak_memory_bytes, err);
		} else if (al_mp_key_is(k, "max_rss_bytes")) {
			rc = al_mp_get_uint(val, name, 0, UINT64_MAX, &t->max_rss_bytes, err);
		} else if (al_mp_key_is(k, "stdout") && !t->out.data) {
			rc = al_mp_get_bytes(val, name, AL_TEST_KEEP_MAX, &t->out, err);
		} else if (al_mp_key_is(k, "stderr") && !t->err.data) {
			rc = al_mp_get_bytes(val, name, AL_TEST_KEEP_MAX, &t->err, err);
		} else if (al_mp_key_is(k, "stdout_truncated")) {
			rc = al_mp_get_bool(val, name, &t->out_truncated, err);
		} else if (al_mp_key_is(k, "stderr_truncated")) {
			rc = al_mp_get_bool(val, name, &t->err_truncated, err);
		} else if (al_mp_key_is(k, "detail") && !t->detail) {
			if (val->type != MSGPACK_OBJECT_NIL)
				rc =
				    al_mp_get_text(val, name, AL_VERDICT_TEXT_MAX, &t->detail, err);
		} else if (al_mp_key_is(k, "points")) {
			rc = al_mp_get_uint(val, name, 0, AL_POINTS_MAX, &u, err);
			t->points = (uint32_t)u;
		} else if (al_mp_key_is(k, "max_points")) {
			rc = al_mp_get_uint(val, name, 0, AL_POINTS_MAX, &u, err);
			t->max_points = (uint32_t)u;
		} else if (al_mp_key_is(k, "group") && !t->group) {
			if (val->type != MSGPACK_OBJECT_NIL)
				rc = al_mp_get_text(val, name, AL_GROUP_MAX, &t->group, err);
		} else if (al_mp_key_is(k, "hidden")) {
			rc = al_mp_get_bool(val, name, &t->hidden, err);
		} /* else: a newer writer's field, ignored */
	}
	if (!rc) {
		int vd = al_verdict_parse(verdict);

		if (vd < 0)
			rc =
			    al_err_set(err, AL_EINVAL, "%s.verdict: missing or unknown (\"%.32s\")",
				       what, verdict ? verdict : "");
		t->verdict = vd < 0 ? AL_V_RUNTIME_ERROR : (enum al_verdict)vd;
	}
	if (!rc && !t->name)
		rc = al_err_set(err, AL_EINVAL, "%s.name: missing", what);
	free(verdict);
	return rc;
}

/* groups: [{name, score, max_score}] */
static int dec_groups(const msgpack_object *v, struct al_result *res, struct al_err *err)
{
	int rc;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_ARRAY, "groups", err)))
		return rc;
	if (v->via.array.size > AL_TESTS_MAX)
		return al_err_set(err, AL_EINVAL, "groups: %u entries, at most %d",
				  v->via.array.size, AL_TESTS_MAX);
	if (!(res->groups = calloc(v->via.array.size + 1, sizeof(*res->groups))))
		return al_err_set(err, AL_ENOMEM, "groups: out of memory");
	for (uint32_t i = 0; i < v->via.array.size; i++) {
		const msgpack_object *g = &v->via.array.ptr[i];
		struct al_group_score *gs = &res->groups[res->ngroups++];

		if ((rc = al_mp_want(g, MSGPACK_OBJECT_MAP, "groups[]", err)))
			return rc;
		for (uint32_t k = 0; k < g->via.map.size && !rc; k++) {
			const msgpack_object *key = &g->via.map.ptr[k].key,
					     *val = &g->via.map.ptr[k].val;

			if (al_mp_key_is(key, "name") && !gs->name)
				rc = al_mp_get_text(val, "groups[].name", AL_GROUP_MAX, &gs->name,
						    err);
			else if (al_mp_key_is(key, "score"))
				rc = al_mp_get_uint(val, "groups[].score", 0, UINT64_MAX,
						    &gs->score, err);
			else if (al_mp_key_is(key, "max_score"))
				rc = al_mp_get_uint(val, "groups[].max_score", 0, UINT64_MAX,
						    &gs->max_score, err);
		}
		if (!rc && !gs->name)
			rc = al_err_set(err, AL_EINVAL, "groups[%u].name: missing", i);
		if (rc)
			return rc;
	}
	return AL_OK;
}

int al_grade_dec_result(const msgpack_object *key, const msgpack_object *v, struct al_result *res,
			struct al_err *err)
{
	char what[32];
	int rc;

	if (al_mp_key_is(key, "score")) {
		res->has_score = true;
		return al_mp_get_uint(v, "score", 0, UINT64_MAX, &res->score, err);
	}
	if (al_mp_key_is(key, "max_score")) {
		res->has_score = true;
		return al_mp_get_uint(v, "max_score", 0, UINT64_MAX, &res->max_score, err);
	}
	if (al_mp_key_is(key, "groups") && !res->groups)
		return dec_groups(v, res, err);

	if (al_mp_key_is(key, "build") && !res->build) {
		if (v->type == MSGPACK_OBJECT_NIL)
			return AL_OK;
		if (!(res->build = calloc(1, sizeof(*res->build))))
			return al_err_set(err, AL_ENOMEM, "build: out of memory");
		return dec_test_result(v, "build", res->build, err);
	}
	if (!al_mp_key_is(key, "tests") || res->tests)
		return AL_OK; /* not one of them */
	if ((rc = al_mp_want(v, MSGPACK_OBJECT_ARRAY, "tests", err)))
		return rc;
	if (v->via.array.size > AL_TESTS_MAX)
		return al_err_set(err, AL_EINVAL, "tests: %u entries, at most %d",
				  v->via.array.size, AL_TESTS_MAX);
	/* [] too: a grading job's result that ran no test still says so */
	if (!(res->tests = calloc(v->via.array.size ? v->via.array.size : 1, sizeof(*res->tests))))
		return al_err_set(err, AL_ENOMEM, "tests: out of memory");
	for (uint32_t i = 0; i < v->via.array.size; i++) {
		res->ntests++;
		snprintf(what, sizeof(what), "tests[%u]", i);
		if ((rc = dec_test_result(&v->via.array.ptr[i], what, &res->tests[i], err)))
			return rc;
	}
	return AL_OK;
}

size_t al_grade_result_nfields(const struct al_result *res)
{
	return (res->build != NULL) + (res->tests != NULL || res->ntests > 0) + res->has_score * 3;
}

static int pack_test_result(msgpack_packer *pk, const struct al_test_result *t)
{
	int bad = msgpack_pack_map(pk, 17);

	bad |= al_mp_pack_kv_str(pk, "name", t->name);
	bad |= al_mp_pack_kv_str(pk, "verdict", al_verdict_name(t->verdict));
	bad |= al_mp_pack_str(pk, "exit_code") ||
	       (t->has_exit_code ? msgpack_pack_int32(pk, t->exit_code) : msgpack_pack_nil(pk));
	bad |= al_mp_pack_kv_uint(pk, "signal", (uint64_t)t->signal);
	bad |= al_mp_pack_kv_uint(pk, "wall_ms", t->wall_ms);
	bad |= al_mp_pack_kv_uint(pk, "cpu_ms", t->cpu_ms);
	bad |= al_mp_pack_kv_uint(pk, "peak_memory_bytes", t->peak_memory_bytes);
	bad |= al_mp_pack_kv_uint(pk, "max_rss_bytes", t->max_rss_bytes);
	bad |= al_mp_pack_kv_bin(pk, "stdout", t->out.data, t->out.len);
	bad |= pack_bool(pk, "stdout_truncated", t->out_truncated);
	bad |= al_mp_pack_kv_bin(pk, "stderr", t->err.data, t->err.len);
	bad |= pack_bool(pk, "stderr_truncated", t->err_truncated);
	bad |= al_mp_pack_str(pk, "detail") ||
	       (t->detail ? al_mp_pack_str(pk, t->detail) : msgpack_pack_nil(pk));
	bad |= al_mp_pack_kv_uint(pk, "points", t->points);
	bad |= al_mp_pack_kv_uint(pk, "max_points", t->max_points);
	bad |= al_mp_pack_str(pk, "group") ||
	       (t->group ? al_mp_pack_str(pk, t->group) : msgpack_pack_nil(pk));
	bad |= pack_bool(pk, "hidden", t->hidden);
	return bad ? -1 : 0;
}

int al_grade_pack_result(msgpack_packer *pk, const struct al_result *res)
{
	int bad = 0;

	if (res->build)
		bad |= al_mp_pack_str(pk, "build") || pack_test_result(pk, res->build);
	if (res->tests || res->ntests) {
		bad |= al_mp_pack_str(pk, "tests") || msgpack_pack_array(pk, res->ntests);
		for (size_t i = 0; i < res->ntests && !bad; i++)
			bad |= pack_test_result(pk, &res->tests[i]);
	}
	if (res->has_score) {
		bad |= al_mp_pack_kv_uint(pk, "score", res->score) ||
		       al_mp_pack_kv_uint(pk, "max_score", res->max_score) ||
		       al_mp_pack_str(pk, "groups") || msgpack_pack_array(pk, res->ngroups);
		for (size_t i = 0; i < res->ngroups && !bad; i++)
			bad |= msgpack_pack_map(pk, 3) ||
			       al_mp_pack_kv_str(pk, "name", res->groups[i].name) ||
			       al_mp_pack_kv_uint(pk, "score", res->groups[i].score) ||
			       al_mp_pack_kv_uint(pk, "max_score", res->groups[i].max_score);
	}
	return bad ? -1 : 0;
}

void al_test_result_free(struct al_test_result *t)
{
	free(t->name);
	free(t->out.data);
	free(t->err.data);
	free(t->detail);
	free(t->group);
	memset(t, 0, sizeof(*t));
}

void al_grade_free_result(struct al_result *res)
{
	if (res->build) {
		al_test_result_free(res->build);
		free(res->build);
	}
	for (size_t i = 0; i < res->ntests; i++)
		al_test_result_free(&res->tests[i]);
	free(res->tests);
	for (size_t i = 0; i < res->ngroups; i++)
		free(res->groups[i].name);
	free(res->groups);
	res->groups = NULL;
	res->ngroups = 0;
	res->has_score = false;
	res->build = NULL;
	res->tests = NULL;
	res->ntests = 0;
}
