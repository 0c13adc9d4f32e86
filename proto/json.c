/* json.c - JSON views of jobs and results. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jbuild.h"
#include "grade.h"
#include "mp.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *base64_encode(const unsigned char *p, size_t n)
{
	char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		*o++ = b64[(v >> 18) & 63];
		*o++ = b64[(v >> 12) & 63];
		*o++ = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? b64[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

static int base64_decode(const char *s, struct al_bytes *b)
{
	size_t n = strlen(s), o = 0;

	if (n % 4)
		return AL_EINVAL;
	b->data = malloc(n / 4 * 3 + 1);
	if (!b->data)
		return AL_EINVAL;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];

		for (int k = 0; k < 4; k++) {
			v[k] = s[i + k] == '=' && i + 4 == n && k >= 2 ? 0 : b64_val(s[i + k]);
			if (v[k] < 0)
				goto fail_data;
		}
		b->data[o++] = (char)((v[0] << 2) | (v[1] >> 4));
		if (s[i + 2] != '=')
			b->data[o++] = (char)(((v[1] & 15) << 4) | (v[2] >> 2));
		if (s[i + 3] != '=')
			b->data[o++] = (char)(((v[2] & 3) << 6) | v[3]);
	}
	b->data[o] = '\0';
	b->len = o;
	return 0;
fail_data:
	free(b->data);
	b->data = NULL;
	return AL_EINVAL;
}

/* key_base64: the bytes as base64 text. */
static int set_base64(json_t *obj, const char *key, const struct al_bytes *b)
{
	char name[80];
	char *enc;
	int rc;

	snprintf(name, sizeof(name), "%s_base64", key);
	enc = base64_encode((const unsigned char *)b->data, b->len);
	if (!enc)
		return AL_ENOMEM;
	rc = json_object_set_new(obj, name, json_string(enc));
	free(enc);
	return rc;
}

int al_json_set_bytes(json_t *obj, const char *key, const struct al_bytes *b)
{
	if (al_utf8_valid(b->data ? b->data : "", b->len))
		return json_object_set_new(obj, key, json_stringn(b->data ? b->data : "", b->len))
			   ? AL_ENOMEM
			   : AL_OK;
	return set_base64(obj, key, b);
}

int al_json_set_output(json_t *obj, const char *key, const struct al_bytes *b)
{
	const unsigned char *s = (const unsigned char *)(b->data ? b->data : "");
	char *text;
	size_t n = 0;
	int rc;

	if (al_utf8_valid((const char *)s, b->len))
		return json_object_set_new(obj, key, json_stringn((const char *)s, b->len));
	if (set_base64(obj, key, b)) /* NAME_base64: the bytes, exact */
		return AL_ENOMEM;
	if (!(text = malloc(b->len * 3 + 1)))
		return AL_ENOMEM;
	for (size_t i = 0; i < b->len;) { /* each byte of no valid sequence: U+FFFD */
		unsigned char c = s[i];
		size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;

		if (k <= b->len - i && al_utf8_valid((const char *)s + i, k)) {
			memcpy(text + n, s + i, k);
			n += k;
			i += k;
		} else {
			memcpy(text + n, "\xef\xbf\xbd", 3);
			n += 3;
			i++;
		}
	}
	rc = json_object_set_new(obj, key, json_stringn(text, n));
	free(text);
	return rc;
}

int al_json_get_bytes(const json_t *obj, const char *key, struct al_bytes *b)
{
	char name[80];
	json_t *v;

	memset(b, 0, sizeof(*b));
	/* NAME_base64 first: beside a lossy NAME (al_json_set_output) it is exact */
	snprintf(name, sizeof(name), "%s_base64", key);
	v = json_object_get(obj, name);
	if (json_is_string(v))
		return base64_decode(json_string_value(v), b);
	v = json_object_get(obj, key);
	if (json_is_string(v)) {
		b->len = json_string_length(v);
		b->data = malloc(b->len + 1);
		if (!b->data)
			return AL_EINVAL;
		memcpy(b->data, json_string_value(v), b->len);
		b->data[b->len] = '\0';
		return 0;
	}
	return 0;
}

static json_t *strv_json(struct al_jb *b, char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		al_jb_add(b, a, json_string(v[i]));
	return a;
}

static json_t *kv_json(struct al_jb *b, const struct al_kv *kv, size_t n)
{
	json_t *o = json_object();

	for (size_t i = 0; i < n; i++)
		al_jb_set(b, o, kv[i].key, json_string(kv[i].value));
	return o;
}

static json_t *opt_str(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *limits_json(struct al_jb *b, const struct al_limits *l)
{
	json_t *lim = json_object();

	al_jb_set(b, lim, "wall_ms", json_integer((json_int_t)l->wall_ms));
	al_jb_set(b, lim, "cpu_ms", json_integer((json_int_t)l->cpu_ms));
	al_jb_set(b, lim, "memory_bytes", json_integer((json_int_t)l->memory_bytes));
	al_jb_set(b, lim, "pids", json_integer((json_int_t)l->pids));
	al_jb_set(b, lim, "stdout_bytes", json_integer((json_int_t)l->stdout_bytes));
	al_jb_set(b, lim, "stderr_bytes", json_integer((json_int_t)l->stderr_bytes));
	al_jb_set(b, lim, "disk_bytes", json_integer((json_int_t)l->disk_bytes));
	return lim;
}

static json_t *files_json(struct al_jb *b, const struct al_file *files, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *f = json_object();

		al_jb_set(b, f, "path", json_string(files[i].path));
		al_jb_check(b, al_json_set_bytes(f, "data", &files[i].data));
		al_jb_set(b, f, "mode", json_integer(files[i].mode));
		al_jb_add(b, a, f);
	}
	return a;
}

/* A grading job's build and tests (proto/grade.h). */
static void grading_json(struct al_jb *b, json_t *o, const struct al_job *job)
{
	json_t *tests = json_array();

	for (int k = 0; k < 2; k++) {
		const struct al_build *st = k ? job->checker : job->build;
		json_t *bo;

		if (!st)
			continue;
		bo = json_object();
		al_jb_set(b, bo, "runtime", json_string(al_runtime_name(st->runtime)));
		if (st->code.data)
			al_jb_check(b, al_json_set_bytes(bo, "code", &st->code));
		al_jb_set(b, bo, "argv", strv_json(b, st->argv, st->argc));
		al_jb_set(b, bo, "limits", limits_json(b, &st->limits));
		al_jb_set(b, o, k ? "checker" : "build", bo);
	}
	for (size_t i = 0; i < job->ntests; i++) {
		const struct al_test *t = &job->tests[i];
		json_t *to = json_object();

		al_jb_set(b, to, "name", json_string(t->name));
		al_jb_check(b, al_json_set_bytes(to, "stdin", &t->stdin_data));
		al_jb_set(b, to, "argv", strv_json(b, t->argv, t->argc));
		al_jb_set(b, to, "files", files_json(b, t->files, t->nfiles));
		al_jb_set(b, to, "limits", limits_json(b, &t->limits));
		if (t->has_expect) {
			al_jb_check(b, al_json_set_bytes(to, "expect", &t->expect));
			al_jb_set(b, to, "compare", json_string(al_compare_name(t->compare)));
			if (t->compare == AL_CMP_FLOAT) {
				al_jb_set(b, to, "abs_tol", json_real(t->abs_tol));
				al_jb_set(b, to, "rel_tol", json_real(t->rel_tol));
			}
		}
		al_jb_set(b, to, "points", json_integer(t->points));
		if (t->group)
			al_jb_set(b, to, "group", json_string(t->group));
		if (t->hidden)
			al_jb_set(b, to, "hidden", json_true());
		al_jb_add(b, tests, to);
	}
	al_jb_set(b, o, "tests", tests);
	al_jb_set(b, o, "stop_on_failure", json_boolean(job->stop_on_failure));
	if (job->group_scoring)
		al_jb_set(b, o, "group_scoring",
			  json_string(al_group_scoring_name(job->group_scoring)));
}

static json_t *test_result_json(struct al_jb *b, const struct al_test_result *t)
{
	json_t *o = json_object();

	al_jb_set(b, o, "name", json_string(t->name));
	al_jb_set(b, o, "verdict", json_string(al_verdict_name(t->verdict)));
	al_jb_set(b, o, "exit_code", t->has_exit_code ? json_integer(t->exit_code) : json_null());
	al_jb_set(b, o, "signal", json_integer(t->signal));
	al_jb_set(b, o, "wall_ms", json_integer((json_int_t)t->wall_ms));
	al_jb_set(b, o, "cpu_ms", json_integer((json_int_t)t->cpu_ms));
	al_jb_set(b, o, "peak_memory_bytes", json_integer((json_int_t)t->peak_memory_bytes));
	al_jb_set(b, o, "max_rss_bytes", json_integer((json_int_t)t->max_rss_bytes));
	al_jb_check(b, al_json_set_output(o, "stdout", &t->out));
	al_jb_set(b, o, "stdout_truncated", json_boolean(t->out_truncated));
	al_jb_check(b, al_json_set_output(o, "stderr", &t->err));
	al_jb_set(b, o, "stderr_truncated", json_boolean(t->err_truncated));
	al_jb_set(b, o, "detail", opt_str(t->detail));
	al_jb_set(b, o, "points", json_integer(t->points));
	al_jb_set(b, o, "max_points", json_integer(t->max_points));
	al_jb_set(b, o, "group", opt_str(t->group));
	al_jb_set(b, o, "hidden", json_boolean(t->hidden));
	return o;
}

static json_t *inputs_json(struct al_jb *b, const struct al_input *in, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *o = json_object();

		if (in[i].unpack == AL_UNPACK_GIT) {
			json_t *g = json_object();

			al_jb_set(b, g, "url", json_string(in[i].url));
			al_jb_set(b, g, "ref", json_string(in[i].ref));
			al_jb_set(b, o, "git", g);
		} else {
			al_jb_set(b, o, "url", json_string(in[i].url));
			al_jb_set(b, o, "sha256", json_string(in[i].sha256));
			al_jb_set(b, o, "unpack", json_string(al_unpack_name(in[i].unpack)));
		}
		al_jb_set(b, o, "path", json_string(in[i].path));
		al_jb_add(b, a, o);
	}
	return a;
}

json_t *al_job_to_json(const struct al_job *job)
{
	struct al_jb b = {0};
	json_t *o = json_object();

	al_jb_set(&b, o, "v", json_integer(job->version));
	al_jb_set(&b, o, "id", json_string(job->id));
	al_jb_set(&b, o, "tenant", json_string(job->tenant));
	al_jb_set(&b, o, "tier", json_string(job->tier));
	al_jb_set(&b, o, "runtime", json_string(al_runtime_name(job->runtime)));
	if (job->code.data)
		al_jb_check(&b, al_json_set_bytes(o, "code", &job->code));
	al_jb_set(&b, o, "argv", strv_json(&b, job->argv, job->argc));
	al_jb_check(&b, al_json_set_bytes(o, "stdin", &job->stdin_data));
	al_jb_set(&b, o, "files", files_json(&b, job->files, job->nfiles));
	if (job->ninputs)
		al_jb_set(&b, o, "inputs", inputs_json(&b, job->inputs, job->ninputs));
	al_jb_set(&b, o, "env", kv_json(&b, job->env, job->nenv));
	al_jb_set(&b, o, "collect", strv_json(&b, job->collect, job->ncollect));
	al_jb_set(&b, o, "limits", limits_json(&b, &job->limits));
	al_jb_set(&b, o, "network", json_string(al_network_name(job->network)));
	al_jb_set(&b, o, "priority", json_integer(job->priority));
	al_jb_set(&b, o, "deadline_ms", json_integer((json_int_t)job->deadline_ms));
	al_jb_set(&b, o, "max_attempts", json_integer(job->max_attempts));
	al_jb_set(&b, o, "idempotency_key",
		  job->idempotency_key ? json_string(job->idempotency_key) : json_null());
	al_jb_set(&b, o, "image", job->image ? json_string(job->image) : json_null());
	if (job->language)
		al_jb_set(&b, o, "language", json_string(job->language));
	al_jb_set(&b, o, "callback_url",
		  job->callback_url ? json_string(job->callback_url) : json_null());
	al_jb_set(&b, o, "labels", kv_json(&b, job->labels, job->nlabels));
	al_jb_set(&b, o, "submitted_ms", json_integer((json_int_t)job->submitted_ms));
	if (job->ntests)
		grading_json(&b, o, job);
	if (job->session)
		al_jb_set(&b, o, "session", json_true());
	return al_jb_done(&b, o);
}

json_t *al_result_to_json(const struct al_result *res)
{
	struct al_jb b = {0};
	json_t *o = json_object(), *files = json_array();

	al_jb_set(&b, o, "v", json_integer(res->version));
	al_jb_set(&b, o, "id", json_string(res->id));
	al_jb_set(&b, o, "attempt", json_integer(res->attempt));
	al_jb_set(&b, o, "status", json_string(al_status_name(res->status)));
	al_jb_set(&b, o, "exit_code",
		  res->has_exit_code ? json_integer(res->exit_code) : json_null());
	al_jb_set(&b, o, "signal", json_integer(res->signal));
	al_jb_check(&b, al_json_set_output(o, "stdout", &res->out));
	al_jb_set(&b, o, "stdout_truncated", json_boolean(res->out_truncated));
	al_jb_check(&b, al_json_set_output(o, "stderr", &res->err));
	al_jb_set(&b, o, "stderr_truncated", json_boolean(res->err_truncated));
	for (size_t i = 0; i < res->nfiles; i++) {
		json_t *f = json_object();

		al_jb_set(&b, f, "path", json_string(res->files[i].path));
		al_jb_check(&b, al_json_set_bytes(f, "data", &res->files[i].data));
		al_jb_set(&b, f, "truncated", json_boolean(res->files[i].truncated));
		al_jb_add(&b, files, f);
	}
	al_jb_set(&b, o, "files", files);
	al_jb_set(&b, o, "wall_ms", json_integer((json_int_t)res->wall_ms));
	al_jb_set(&b, o, "cpu_ms", json_integer((json_int_t)res->cpu_ms));
	al_jb_set(&b, o, "peak_memory_bytes", json_integer((json_int_t)res->peak_memory_bytes));
	al_jb_set(&b, o, "max_rss_bytes", json_integer((json_int_t)res->max_rss_bytes));
	al_jb_set(&b, o, "backend", opt_str(res->backend));
	al_jb_set(&b, o, "worker", opt_str(res->worker));
	al_jb_set(&b, o, "queued_ms", json_integer((json_int_t)res->queued_ms));
	al_jb_set(&b, o, "started_ms", json_integer((json_int_t)res->started_ms));
	al_jb_set(&b, o, "finished_ms", json_integer((json_int_t)res->finished_ms));
	al_jb_set(&b, o, "error", opt_str(res->error));
	al_jb_set(&b, o, "info", kv_json(&b, res->info, res->ninfo));
	if (res->negress) {
		json_t *eg = json_array();

		for (size_t i = 0; i < res->negress; i++) {
			const struct al_egress_conn *c = &res->egress[i];

			al_jb_add(&b, eg,
				  json_pack("{s:s, s:I, s:s, s:b, s:s, s:I, s:I, s:I}", "host",
					    c->host, "port", (json_int_t)c->port, "addr", c->addr,
					    "allowed", c->allowed, "why", c->why, "up",
					    (json_int_t)c->up, "down", (json_int_t)c->down, "ms",
					    (json_int_t)c->ms));
		}
		al_jb_set(&b, o, "egress", eg);
	}
	if (res->noutputs) {
		json_t *outs = json_array();

		for (size_t i = 0; i < res->noutputs; i++) {
			json_t *x = json_pack("{s:s}", "mime", res->outputs[i].mime);

			/* bytes: as data_base64 (an image is never text) */
			al_jb_check(&b,
				    x ? al_json_set_bytes(x, "data", &res->outputs[i].data) : -1);
			al_jb_add(&b, outs, x);
		}
		al_jb_set(&b, o, "outputs", outs);
	}
	if (res->build)
		al_jb_set(&b, o, "build", test_result_json(&b, res->build));
	if (res->tests || res->ntests) {
		json_t *tests = json_array();

		for (size_t i = 0; i < res->ntests; i++)
			al_jb_add(&b, tests, test_result_json(&b, &res->tests[i]));
		al_jb_set(&b, o, "tests", tests);
	}
	if (res->has_score) {
		json_t *gs = json_array();

		al_jb_set(&b, o, "score", json_integer((json_int_t)res->score));
		al_jb_set(&b, o, "max_score", json_integer((json_int_t)res->max_score));
		for (size_t i = 0; i < res->ngroups; i++)
			al_jb_add(&b, gs,
				  json_pack("{s:s, s:I, s:I}", "name", res->groups[i].name, "score",
					    (json_int_t)res->groups[i].score, "max_score",
					    (json_int_t)res->groups[i].max_score));
		al_jb_set(&b, o, "groups", gs);
	}
	return al_jb_done(&b, o);
}

/* JSON to msgpack: objects, arrays, strings, integers, booleans and null
 * as they are; a key "NAME_base64" is NAME as bytes (bin). A real number is
 * packed as one (the decoder refuses it where a uint is due). */
static int pack_json(msgpack_packer *pk, const json_t *v, struct al_err *err);

static int pack_object(msgpack_packer *pk, const json_t *o, struct al_err *err)
{
	const char *k;
	json_t *v;

	if (msgpack_pack_map(pk, json_object_size(o)))
		return al_err_set(err, AL_ENOMEM, "out of memory");
	json_object_foreach((json_t *)o, k, v)
	{
		size_t kl = strlen(k);

		if (kl > 7 && !strcmp(k + kl - 7, "_base64")) {
			struct al_bytes b = {0};
			json_t *wrap = json_object();
			char name[256];
			int rc;

			/* al_json_get_bytes reads NAME from NAME_base64 */
			snprintf(name, sizeof(name), "%.*s", (int)(kl - 7), k);
			if (!wrap || json_object_set(wrap, k, v)) {
				json_decref(wrap);
				return al_err_set(err, AL_ENOMEM, "out of memory");
			}
			rc = json_is_string(v) ? al_json_get_bytes(wrap, name, &b) : -1;
			json_decref(wrap);
			if (rc) {
				free(b.data);
				return al_err_set(err, AL_EINVAL, "%s: expected base64 text", k);
			}
			rc = al_mp_pack_strn(pk, k, kl - 7) ||
			     al_mp_pack_bin(pk, b.data ? (const void *)b.data : "", b.len);
			free(b.data);
			if (rc)
				return al_err_set(err, AL_ENOMEM, "out of memory");
			continue;
		}
		if (al_mp_pack_strn(pk, k, kl) || pack_json(pk, v, err))
			return err->code ? err->code : al_err_set(err, AL_ENOMEM, "out of memory");
	}
	return AL_OK;
}

static int pack_json(msgpack_packer *pk, const json_t *v, struct al_err *err)
{
	size_t i;
	json_t *e;
	int rc = 0;

	switch (json_typeof(v)) {
	case JSON_OBJECT: return pack_object(pk, v, err);
	case JSON_ARRAY:
		if (msgpack_pack_array(pk, json_array_size(v)))
			return al_err_set(err, AL_ENOMEM, "out of memory");
		json_array_foreach(v, i, e) if ((rc = pack_json(pk, e, err))) return rc;
		return AL_OK;
	case JSON_STRING:
		rc = al_mp_pack_strn(pk, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER: rc = msgpack_pack_int64(pk, json_integer_value(v)); break;
	case JSON_REAL: rc = msgpack_pack_double(pk, json_real_value(v)); break;
	case JSON_TRUE: rc = msgpack_pack_true(pk); break;
	case JSON_FALSE: rc = msgpack_pack_false(pk); break;
	case JSON_NULL: rc = msgpack_pack_nil(pk); break;
	}
	return rc ? al_err_set(err, AL_ENOMEM, "out of memory") : AL_OK;
}

int al_json_to_msgpack(const json_t *v, struct al_buf *out, struct al_err *err)
{
	msgpack_packer pk;

	al_mp_packer_init(&pk, out);
	return pack_json(&pk, v, err);
}
