/* result.c - decoding, validating and encoding results (PROTOCOL.md). */
#include "result.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "mp.h"

static const char *const status_names[AL_ST_COUNT] = {
    "ok",	    "nonzero_exit",  "timeout",	      "cpu_limit",     "memory_limit",
    "output_limit", "cancelled",     "rejected",      "sandbox_error", "worker_lost",
    "expired",	    "compile_error", "session_ended",
};

const char *al_status_name(enum al_status_code s)
{
	return (unsigned)s < AL_ST_COUNT ? status_names[s] : "?";
}

int al_status_parse(const char *name)
{
	for (int i = 0; i < AL_ST_COUNT; i++)
		if (strcmp(name, status_names[i]) == 0)
			return i;
	return AL_EINVAL;
}

int al_result_validate(const struct al_result *res, struct al_err *err)
{
	if (res->version != AL_PROTO_VERSION)
		return al_err_set(err, AL_EINVAL, "v: unknown protocol version %u", res->version);
	if (!res->id || !res->id[0] || strlen(res->id) > AL_ID_MAX)
		return al_err_set(err, AL_EINVAL, "id: missing or longer than %d", AL_ID_MAX);
	if ((unsigned)res->status >= AL_ST_COUNT)
		return al_err_set(err, AL_EINVAL, "status: unknown value %d", (int)res->status);
	if (res->status != AL_ST_OK && res->status != AL_ST_NONZERO_EXIT &&
	    (!res->error || !res->error[0]))
		return al_err_set(err, AL_EINVAL, "error: required when status is %s",
				  al_status_name(res->status));
	if (res->out.len > AL_RESULT_STREAM_MAX || res->err.len > AL_RESULT_STREAM_MAX)
		return al_err_set(err, AL_EINVAL, "stdout/stderr: larger than %u bytes",
				  AL_RESULT_STREAM_MAX);
	if (res->nfiles > AL_COLLECT_FILES_MAX || res->ninfo > AL_INFO_MAX ||
	    res->negress > AL_EGRESS_LOG_MAX || res->noutputs > AL_OUTPUTS_MAX)
		return al_err_set(err, AL_EINVAL, "files/info/egress: too many entries");
	if (res->ntests > AL_TESTS_MAX)
		return al_err_set(err, AL_EINVAL, "tests: more than %d", AL_TESTS_MAX);
	for (size_t i = 0; i < res->ntests; i++)
		if (!res->tests[i].name || (unsigned)res->tests[i].verdict >= AL_V_COUNT ||
		    res->tests[i].out.len > AL_TEST_KEEP_MAX ||
		    res->tests[i].err.len > AL_TEST_KEEP_MAX)
			return al_err_set(
			    err, AL_EINVAL,
			    "tests[%zu]: no name, an unknown verdict, or output over %u bytes", i,
			    AL_TEST_KEEP_MAX);
	return AL_OK;
}

/* Field decoders; each one names its field in errors. */
static int dec_files(const msgpack_object *v, struct al_result *res, struct al_err *err)
{
	char name[64];
	int rc;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_ARRAY, "files", err)))
		return rc;
	if (v->via.array.size > AL_COLLECT_FILES_MAX)
		return al_err_set(err, AL_EINVAL, "files: too many entries: %u, at most %d",
				  v->via.array.size, AL_COLLECT_FILES_MAX);
	if (v->via.array.size == 0)
		return AL_OK;
	res->files = calloc(v->via.array.size, sizeof(*res->files));
	if (!res->files)
		return al_err_set(err, AL_ENOMEM, "files: out of memory");
	for (uint32_t i = 0; i < v->via.array.size; i++) {
		const msgpack_object *f = &v->via.array.ptr[i];
		struct al_out_file *o = &res->files[i];

		snprintf(name, sizeof(name), "files[%u]", i);
		if ((rc = al_mp_want(f, MSGPACK_OBJECT_MAP, name, err)))
			return rc;
		res->nfiles++;
		for (uint32_t k = 0; k < f->via.map.size; k++) {
			const msgpack_object_kv *kv = &f->via.map.ptr[k];

			if (al_mp_key_is(&kv->key, "path") && !o->path)
				rc = al_mp_get_text(&kv->val, "files[].path", AL_PATH_MAX, &o->path,
						    err);
			else if (al_mp_key_is(&kv->key, "data") && !o->data.data)
				rc = al_mp_get_bytes(&kv->val, "files[].data", AL_RESULT_FILE_MAX,
						     &o->data, err);
			else if (al_mp_key_is(&kv->key, "truncated"))
				rc = al_mp_get_bool(&kv->val, "files[].truncated", &o->truncated,
						    err);
			else
				rc = al_err_set(err, AL_EINVAL, "%s: unknown or repeated field",
						name);
			if (rc)
				return rc;
		}
		if (!o->path || !o->data.data)
			return al_err_set(err, AL_EINVAL, "%s: path and data are required", name);
	}
	return AL_OK;
}

/* outputs: [{mime, data}] */
static int dec_outputs(const msgpack_object *v, struct al_result *res, struct al_err *err)
{
	int rc;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_ARRAY, "outputs", err)))
		return rc;
	if (v->via.array.size > AL_OUTPUTS_MAX)
		return al_err_set(err, AL_EINVAL, "outputs: too many entries: %u, at most %d",
				  v->via.array.size, AL_OUTPUTS_MAX);
	if (v->via.array.size && !(res->outputs = calloc(v->via.array.size, sizeof(*res->outputs))))
		return al_err_set(err, AL_ENOMEM, "outputs: out of memory");
	for (uint32_t i = 0; i < v->via.array.size; i++) {
		const msgpack_object *o = &v->via.array.ptr[i];
		struct al_output *out = &res->outputs[i];

		if ((rc = al_mp_want(o, MSGPACK_OBJECT_MAP, "outputs[]", err)))
			return rc;
		res->noutputs++;
		for (uint32_t j = 0; j < o->via.map.size && !rc; j++) {
			const msgpack_object *k = &o->via.map.ptr[j].key,
					     *x = &o->via.map.ptr[j].val;

			if (al_mp_key_is(k, "mime") && !out->mime)
				rc = al_mp_get_text(x, "outputs[].mime", AL_OUTPUT_MIME_MAX,
						    &out->mime, err);
			else if (al_mp_key_is(k, "data") && !out->data.data)
				rc = al_mp_get_bytes(x, "outputs[].data", AL_OUTPUT_BYTES_MAX,
						     &out->data, err);
		}
		if (!rc && !out->mime)
			rc = al_err_set(err, AL_EINVAL, "outputs[%u].mime: missing", i);
		if (rc)
			return rc;
	}
	return AL_OK;
}

static int dec_egress(const msgpack_object *v, struct al_result *res, struct al_err *err)
{
	char name[64];
	int rc;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_ARRAY, "egress", err)))
		return rc;
	if (v->via.array.size > AL_EGRESS_LOG_MAX)
		return al_err_set(err, AL_EINVAL, "egress: too many entries: %u, at most %d",
				  v->via.array.size, AL_EGRESS_LOG_MAX);
	if (v->via.array.size == 0)
		return AL_OK;
	if (!(res->egress = calloc(v->via.array.size, sizeof(*res->egress))))
		return al_err_set(err, AL_ENOMEM, "egress: out of memory");
	for (uint32_t i = 0; i < v->via.array.size; i++) {
		const msgpack_object *f = &v->via.array.ptr[i];
		struct al_egress_conn *c = &res->egress[i];
		uint64_t u;

		snprintf(name, sizeof(name), "egress[%u]", i);
		if ((rc = al_mp_want(f, MSGPACK_OBJECT_MAP, name, err)))
			return rc;
		res->negress++;
		for (uint32_t k = 0; k < f->via.map.size; k++) {
			const msgpack_object_kv *kv = &f->via.map.ptr[k];
			const msgpack_object *x = &kv->val;

			if (al_mp_key_is(&kv->key, "host") && !c->host)
				rc = al_mp_get_text(x, "egress[].host", 256, &c->host, err);
			else if (al_mp_key_is(&kv->key, "addr") && !c->addr)
				rc = al_mp_get_text(x, "egress[].addr", 64, &c->addr, err);
			else if (al_mp_key_is(&kv->key, "why") && !c->why)
				rc = al_mp_get_text(x, "egress[].why", 512, &c->why, err);
			else if (al_mp_key_is(&kv->key, "allowed"))
				rc = al_mp_get_bool(x, "egress[].allowed", &c->allowed, err);
			else if (al_mp_key_is(&kv->key, "port")) {
				rc = al_mp_get_uint(x, "egress[].port", 0, 65535, &u, err);
				c->port = (uint32_t)u;
			} else if (al_mp_key_is(&kv->key, "up"))
				rc = al_mp_get_uint(x, "egress[].up", 0, UINT64_MAX, &c->up, err);
			else if (al_mp_key_is(&kv->key, "down"))
				rc = al_mp_get_uint(x, "egress[].down", 0, UINT64_MAX, &c->down,
						    err);
			else if (al_mp_key_is(&kv->key, "ms"))
				rc = al_mp_get_uint(x, "egress[].ms", 0, UINT64_MAX, &c->ms, err);
			else
				rc = al_err_set(err, AL_EINVAL, "%s: unknown or repeated field",
						name);
			if (rc)
				return rc;
		}
		if (!c->host || !c->addr || !c->why)
			return al_err_set(err, AL_EINVAL, "%s: host, addr and why are required",
					  name);
	}
	return AL_OK;
}

static int dec_info(const msgpack_object *v, struct al_result *res, struct al_err *err)
{
	int rc;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_MAP, "info", err)))
		return rc;
	if (v->via.map.size > AL_INFO_MAX)
		return al_err_set(err, AL_EINVAL, "info: too many entries: %u, at most %d",
				  v->via.map.size, AL_INFO_MAX);
	if (v->via.map.size == 0)
		return AL_OK;
	res->info = calloc(v->via.map.size, sizeof(*res->info));
	if (!res->info)
		return al_err_set(err, AL_ENOMEM, "info: out of memory");
	for (uint32_t i = 0; i < v->via.map.size; i++) {
		struct al_kv *kv = &res->info[i];

		if ((rc = al_mp_get_text(&v->via.map.ptr[i].key, "info key", AL_LABEL_KEY_MAX,
					 &kv->key, err)))
			return rc;
		res->ninfo++;
		if ((rc = al_mp_get_text(&v->via.map.ptr[i].val, "info value", AL_INFO_VALUE_MAX,
					 &kv->value, err)))
			return rc;
	}
	return AL_OK;
}

static int dec_opt_text(const msgpack_object *v, const char *what, size_t max, char **out,
			struct al_err *err)
{
	if (v->type == MSGPACK_OBJECT_NIL)
		return AL_OK;
	return al_mp_get_text(v, what, max, out, err);
}

static int result_decode_obj(const msgpack_object *root, struct al_result *res, struct al_err *err)
{
	bool have_status = false;
	char *status = NULL;
	uint64_t u;
	int64_t i64;
	int rc = AL_OK;

	if ((rc = al_mp_want(root, MSGPACK_OBJECT_MAP, "result", err)))
		return rc;
	for (uint32_t i = 0; i < root->via.map.size && !rc; i++) {
		const msgpack_object *k = &root->via.map.ptr[i].key;
		const msgpack_object *v = &root->via.map.ptr[i].val;

		if (al_mp_key_is(k, "v")) {
			rc = al_mp_get_uint(v, "v", 0, UINT32_MAX, &u, err);
			res->version = (uint32_t)u;
		} else if (al_mp_key_is(k, "id") && !res->id) {
			rc = al_mp_get_text(v, "id", AL_ID_MAX, &res->id, err);
		} else if (al_mp_key_is(k, "attempt")) {
			rc = al_mp_get_uint(v, "attempt", 0, 1000, &u, err);
			res->attempt = (uint32_t)u;
		} else if (al_mp_key_is(k, "status") && !status) {
			rc = al_mp_get_text(v, "status", 32, &status, err);
			have_status = true;
		} else if (al_mp_key_is(k, "exit_code")) {
			if (v->type != MSGPACK_OBJECT_NIL) {
				rc = al_mp_get_int(v, "exit_code", INT32_MIN, INT32_MAX, &i64, err);
				res->exit_code = (int32_t)i64;
				res->has_exit_code = true;
			}
		} else if (al_mp_key_is(k, "signal")) {
			rc = al_mp_get_uint(v, "signal", 0, 128, &u, err);
			res->signal = (int32_t)u;
		} else if (al_mp_key_is(k, "stdout") && !res->out.data) {
			rc = al_mp_get_bytes(v, "stdout", AL_RESULT_STREAM_MAX, &res->out, err);
		} else if (al_mp_key_is(k, "stderr") && !res->err.data) {
			rc = al_mp_get_bytes(v, "stderr", AL_RESULT_STREAM_MAX, &res->err, err);
		} else if (al_mp_key_is(k, "stdout_truncated")) {
			rc = al_mp_get_bool(v, "stdout_truncated", &res->out_truncated, err);
		} else if (al_mp_key_is(k, "stderr_truncated")) {
			rc = al_mp_get_bool(v, "stderr_truncated", &res->err_truncated, err);
		} else if (al_mp_key_is(k, "files") && !res->files) {
			rc = dec_files(v, res, err);
		} else if (al_mp_key_is(k, "wall_ms")) {
			rc = al_mp_get_uint(v, "wall_ms", 0, UINT64_MAX, &res->wall_ms, err);
		} else if (al_mp_key_is(k, "cpu_ms")) {
			rc = al_mp_get_uint(v, "cpu_ms", 0, UINT64_MAX, &res->cpu_ms, err);
		} else if (al_mp_key_is(k, "peak_memory_bytes")) {
			rc = al_mp_get_uint(v, "peak_memory_bytes", 0, UINT64_MAX,
					    &res->peak_memory_bytes, err);
		} else if (al_mp_key_is(k, "max_rss_bytes")) {
			rc = al_mp_get_uint(v, "max_rss_bytes", 0, UINT64_MAX, &res->max_rss_bytes,
					    err);
		} else if (al_mp_key_is(k, "backend") && !res->backend) {
			rc = dec_opt_text(v, "backend", AL_ID_MAX, &res->backend, err);
		} else if (al_mp_key_is(k, "worker") && !res->worker) {
			rc = dec_opt_text(v, "worker", 256, &res->worker, err);
		} else if (al_mp_key_is(k, "queued_ms")) {
			rc = al_mp_get_uint(v, "queued_ms", 0, UINT64_MAX, &res->queued_ms, err);
		} else if (al_mp_key_is(k, "started_ms")) {
			rc = al_mp_get_uint(v, "started_ms", 0, UINT64_MAX, &res->started_ms, err);
		} else if (al_mp_key_is(k, "finished_ms")) {
			rc =
			    al_mp_get_uint(v, "finished_ms", 0, UINT64_MAX, &res->finished_ms, err);
		} else if (al_mp_key_is(k, "error") && !res->error) {
			rc = dec_opt_text(v, "error", AL_ERROR_MAX, &res->error, err);
		} else if (al_mp_key_is(k, "info") && !res->info) {
			rc = dec_info(v, res, err);
		} else if (al_mp_key_is(k, "egress") && !res->egress) {
			rc = dec_egress(v, res, err);
		} else if (al_mp_key_is(k, "outputs") && !res->outputs) {
			rc = dec_outputs(v, res, err);
		} else if (k->type != MSGPACK_OBJECT_STR) {
			rc = al_err_set(err, AL_EINVAL,
					"result: key #%u: wrong type: expected string, got %s", i,
					al_mp_type_name(k->type));
		} else { /* a grading job's build and tests; else a newer writer's field, ignored */
			rc = al_grade_dec_result(k, v, res, err);
		}
	}
	if (!rc && have_status) {
		int s = al_status_parse(status);

		if (s < 0)
			rc = al_err_set(err, AL_EINVAL, "status: unknown value \"%.32s\"", status);
		res->status = s < 0 ? AL_ST_SANDBOX_ERROR : (enum al_status_code)s;
	} else if (!rc) {
		rc = al_err_set(err, AL_EINVAL, "status: missing");
	}
	free(status);
	if (!rc)
		rc = al_result_validate(res, err);
	return rc;
}

int al_result_decode(const void *buf, size_t len, struct al_result *res, struct al_err *err)
{
	msgpack_unpacked up;
	const msgpack_object *root;
	int rc;

	memset(res, 0, sizeof(*res));
	if (len > AL_RESULT_MAX_BYTES)
		return al_err_set(err, AL_EINVAL, "result: %zu bytes, at most %u", len,
				  AL_RESULT_MAX_BYTES);
	msgpack_unpacked_init(&up);
	rc = al_mp_parse(buf, len, &up, &root, err);
	if (!rc)
		rc = result_decode_obj(root, res, err);
	msgpack_unpacked_destroy(&up);
	if (rc)
		al_result_free(res);
	return rc;
}

static int pack_opt_str(msgpack_packer *pk, const char *k, const char *v)
{
	if (al_mp_pack_str(pk, k))
		return AL_ENOMEM;
	return v ? al_mp_pack_str(pk, v) : msgpack_pack_nil(pk);
}

int al_result_encode(const struct al_result *res, struct al_buf *out, struct al_err *err)
{
	msgpack_packer pk;
	int rc, bad = 0;

	if ((rc = al_result_validate(res, err)))
		return rc;
	al_mp_packer_init(&pk, out);
	bad |= msgpack_pack_map(&pk, 22 + (res->negress > 0) + (res->noutputs > 0) +
					 al_grade_result_nfields(res));
	bad |= al_mp_pack_kv_uint(&pk, "v", res->version);
	bad |= al_mp_pack_kv_str(&pk, "id", res->id);
	bad |= al_mp_pack_kv_uint(&pk, "attempt", res->attempt);
	bad |= al_mp_pack_kv_str(&pk, "status", al_status_name(res->status));
	bad |= al_mp_pack_str(&pk, "exit_code");
	bad |= res->has_exit_code ? msgpack_pack_int32(&pk, res->exit_code) : msgpack_pack_nil(&pk);
	bad |= al_mp_pack_kv_uint(&pk, "signal", (uint64_t)res->signal);
	bad |= al_mp_pack_kv_bin(&pk, "stdout", res->out.data, res->out.len);
	bad |= al_mp_pack_str(&pk, "stdout_truncated");
	bad |= res->out_truncated ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	bad |= al_mp_pack_kv_bin(&pk, "stderr", res->err.data, res->err.len);
	bad |= al_mp_pack_str(&pk, "stderr_truncated");
	bad |= res->err_truncated ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	bad |= al_mp_pack_str(&pk, "files") || msgpack_pack_array(&pk, res->nfiles);
	for (size_t i = 0; i < res->nfiles; i++) {
		const struct al_out_file *f = &res->files[i];

		bad |= msgpack_pack_map(&pk, 3) || al_mp_pack_kv_str(&pk, "path", f->path) ||
		       al_mp_pack_kv_bin(&pk, "data", f->data.data, f->data.len) ||
		       al_mp_pack_str(&pk, "truncated") ||
		       (f->truncated ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk));
	}
	bad |= al_mp_pack_kv_uint(&pk, "wall_ms", res->wall_ms);
	bad |= al_mp_pack_kv_uint(&pk, "cpu_ms", res->cpu_ms);
	bad |= al_mp_pack_kv_uint(&pk, "peak_memory_bytes", res->peak_memory_bytes);
	bad |= al_mp_pack_kv_uint(&pk, "max_rss_bytes", res->max_rss_bytes);
	bad |= pack_opt_str(&pk, "backend", res->backend);
	bad |= pack_opt_str(&pk, "worker", res->worker);
	bad |= al_mp_pack_kv_uint(&pk, "queued_ms", res->queued_ms);
	bad |= al_mp_pack_kv_uint(&pk, "started_ms", res->started_ms);
	bad |= al_mp_pack_kv_uint(&pk, "finished_ms", res->finished_ms);
	bad |= pack_opt_str(&pk, "error", res->error);
	bad |= al_mp_pack_str(&pk, "info") || al_mp_pack_kvs(&pk, res->info, res->ninfo);
	if (res->negress)
		bad |= al_mp_pack_str(&pk, "egress") || msgpack_pack_array(&pk, res->negress);
	for (size_t i = 0; i < res->negress; i++) {
		const struct al_egress_conn *c = &res->egress[i];

		bad |= msgpack_pack_map(&pk, 8) || al_mp_pack_kv_str(&pk, "host", c->host) ||
		       al_mp_pack_kv_uint(&pk, "port", c->port) ||
		       al_mp_pack_kv_str(&pk, "addr", c->addr) || al_mp_pack_str(&pk, "allowed") ||
		       (c->allowed ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk)) ||
		       al_mp_pack_kv_str(&pk, "why", c->why) ||
		       al_mp_pack_kv_uint(&pk, "up", c->up) ||
		       al_mp_pack_kv_uint(&pk, "down", c->down) ||
		       al_mp_pack_kv_uint(&pk, "ms", c->ms);
	}
	if (res->noutputs)
		bad |= al_mp_pack_str(&pk, "outputs") || msgpack_pack_array(&pk, res->noutputs);
	for (size_t i = 0; i < res->noutputs; i++)
		bad |= msgpack_pack_map(&pk, 2) ||
		       al_mp_pack_kv_str(&pk, "mime", res->outputs[i].mime) ||
		       al_mp_pack_kv_bin(&pk, "data", res->outputs[i].data.data,
					 res->outputs[i].data.len);
	bad |= al_grade_pack_result(&pk, res);
	if (bad)
		return al_err_set(err, AL_ENOMEM, "result %s: out of memory while encoding",
				  res->id);
	return AL_OK;
}

int al_result_add_output(struct al_result *res, const char *mime, const void *data, size_t len)
{
	struct al_output *v, *o;

	if (res->noutputs >= AL_OUTPUTS_MAX || len > AL_OUTPUT_BYTES_MAX ||
	    strlen(mime) > AL_OUTPUT_MIME_MAX)
		return AL_EINVAL; /* past the caps */
	if (!(v = realloc(res->outputs, (res->noutputs + 1) * sizeof(*v))))
		return AL_ENOMEM;
	res->outputs = v;
	o = &v[res->noutputs];
	o->mime = strdup(mime);
	o->data.data = malloc(len + 1);
	if (!o->mime || !o->data.data) {
		free(o->mime);
		free(o->data.data);
		return AL_ENOMEM;
	}
	memcpy(o->data.data, data, len);
	o->data.data[len] = '\0';
	o->data.len = len;
	res->noutputs++;
	return 0;
}

int al_result_add_egress(struct al_result *res, const struct al_egress_conn *c)
{
	struct al_egress_conn *v, *n;

	if (res->negress >= AL_EGRESS_LOG_MAX)
		return AL_EINVAL; /* the transcript is full */
	if (!(v = realloc(res->egress, (res->negress + 1) * sizeof(*v))))
		return AL_ENOMEM;
	res->egress = v;
	n = &v[res->negress];
	*n = *c;
	n->host = strdup(c->host ? c->host : "");
	n->addr = strdup(c->addr ? c->addr : "");
	n->why = strdup(c->why ? c->why : "");
	if (!n->host || !n->addr || !n->why) {
		free(n->host);
		free(n->addr);
		free(n->why);
		return AL_ENOMEM;
	}
	res->negress++;
	return 0;
}

int al_result_set_error(struct al_result *res, const char *fmt, ...)
{
	char msg[AL_ERROR_MAX + 1];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	free(res->error);
	res->error = strdup(msg);
	return res->error ? 0 : -1;
}

int al_result_add_info(struct al_result *res, const char *key, const char *value)
{
	struct al_kv *kv;

	if (res->ninfo >= AL_INFO_MAX)
		return AL_ENOMEM;
	kv = realloc(res->info, (res->ninfo + 1) * sizeof(*kv));
	if (!kv)
		return AL_ENOMEM;
	res->info = kv;
	kv[res->ninfo].key = strdup(key);
	kv[res->ninfo].value = strdup(value);
	if (!kv[res->ninfo].key || !kv[res->ninfo].value) {
		free(kv[res->ninfo].key);
		free(kv[res->ninfo].value);
		return AL_ENOMEM;
	}
	res->ninfo++;
	return 0;
}

void al_result_free(struct al_result *res)
{
	if (!res)
		return;
	free(res->id);
	free(res->out.data);
	free(res->err.data);
	for (size_t i = 0; i < res->nfiles; i++) {
		free(res->files[i].path);
		free(res->files[i].data.data);
	}
	free(res->files);
	for (size_t i = 0; i < res->negress; i++) {
		free(res->egress[i].host);
		free(res->egress[i].addr);
		free(res->egress[i].why);
	}
	free(res->egress);
	free(res->backend);
	free(res->worker);
	free(res->error);
	for (size_t i = 0; i < res->ninfo; i++) {
		free(res->info[i].key);
		free(res->info[i].value);
	}
	free(res->info);
	for (size_t i = 0; i < res->noutputs; i++) {
		free(res->outputs[i].mime);
		free(res->outputs[i].data.data);
	}
	free(res->outputs);
	al_grade_free_result(res);
	memset(res, 0, sizeof(*res));
}
