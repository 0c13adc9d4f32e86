/* call.c - a session call's msgpack codec (call.h). */
#include "call.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "mp.h"

static const char *const op_names[AL_SESS_OP_COUNT] = {"exec",	 "python", "put",    "get",
						       "ls",	 "close",  "cancel", "info",
						       "extend", "pause",  "resume", "fork"};
static const char *const end_names[AL_SESS_END_COUNT] = {
    "closed",	   "idle",	  "max_life", "limit",		"call_stuck",	   "exited",
    "worker_lost", "worker_stop", "broken",   "paused_expired", "snapshot_refused"};

/* The index of name in names[0..n-1], or -1. */
static int index_of(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(name, names[i]))
			return i;
	return -1;
}

const char *al_sess_op_name(enum al_sess_op op)
{
	return op < AL_SESS_OP_COUNT ? op_names[op] : "?";
}

int al_sess_op_parse(const char *name)
{
	return index_of(op_names, AL_SESS_OP_COUNT, name);
}

const char *al_sess_end_name(enum al_sess_end why)
{
	return why < AL_SESS_END_COUNT ? end_names[why] : "?";
}

int al_sess_end_parse(const char *name)
{
	return index_of(end_names, AL_SESS_END_COUNT, name);
}

int al_sess_call_validate(const struct al_sess_call *c, struct al_err *err)
{
	int rc;

	if (!c->id || !al_job_id_ok(c->id, strlen(c->id)))
		return al_err_set(err, AL_EINVAL, "id: expected 1..%d of [A-Za-z0-9._:-]",
				  AL_ID_MAX);
	if (!c->session || !al_job_id_ok(c->session, strlen(c->session)))
		return al_err_set(err, AL_EINVAL, "session: expected a session's id");
	if (!c->tenant || !al_job_id_ok(c->tenant, strlen(c->tenant)))
		return al_err_set(err, AL_EINVAL, "tenant: expected 1..%d of [A-Za-z0-9._:-]",
				  AL_ID_MAX);
	if (c->op >= AL_SESS_OP_COUNT)
		return al_err_set(err, AL_EINVAL, "op: unknown");
	switch (c->op) {
	case AL_SESS_EXEC:
		if (!c->argc && !c->code.len)
			return al_err_set(err, AL_EINVAL,
					  "exec: needs argv (a program) or code (a shell line)");
		if (c->argc && c->code.len)
			return al_err_set(err, AL_EINVAL, "exec: argv or code, not both");
		break;
	case AL_SESS_PYTHON:
		if (!c->code.len)
			return al_err_set(err, AL_EINVAL, "python: needs code");
		break;
	case AL_SESS_PUT:
	case AL_SESS_GET:
		if (!c->path)
			return al_err_set(err, AL_EINVAL, "%s: needs path", op_names[c->op]);
		if ((rc = al_check_rel_path("path", c->path, err)))
			return rc;
		if (c->mode > 0777)
			return al_err_set(err, AL_EINVAL, "mode: %o is more than permission bits",
					  c->mode);
		break;
	case AL_SESS_LS:
		if (c->path && c->path[0] && (rc = al_check_rel_path("path", c->path, err)))
			return rc;
		break;
	case AL_SESS_EXTEND:
		if (!c->idle_ms && !c->life_ms)
			return al_err_set(err, AL_EINVAL, "extend: needs idle_ms, life_ms or both");
		break;
	case AL_SESS_FORK:
		if (c->count < 1 || c->count > AL_SESS_FORK_MAX)
			return al_err_set(err, AL_EINVAL, "fork: count: expected 1..%d",
					  AL_SESS_FORK_MAX);
		break;
	case AL_SESS_CANCEL:
		if (!c->target || !al_job_id_ok(c->target, strlen(c->target)))
			return al_err_set(err, AL_EINVAL,
					  "cancel: needs target, the id of the call to stop");
		break;
	default: break;
	}
	if (c->data.len > AL_SESS_FILE_MAX)
		return al_err_set(err, AL_EINVAL, "data: %zu bytes, at most %u", c->data.len,
				  AL_SESS_FILE_MAX);
	if (c->timeout_ms > AL_LIMIT_WALL_MS_MAX)
		return al_err_set(err, AL_EINVAL, "timeout_ms: at most %llu",
				  (unsigned long long)AL_LIMIT_WALL_MS_MAX);
	if (c->cpu_ms > AL_LIMIT_WALL_MS_MAX)
		return al_err_set(err, AL_EINVAL, "cpu_ms: at most %llu",
				  (unsigned long long)AL_LIMIT_WALL_MS_MAX);
	if (c->output_max &&
	    (c->output_max < AL_SESS_OUTPUT_MAX_MIN || c->output_max > AL_LIMIT_OUTPUT_MAX))
		return al_err_set(err, AL_EINVAL, "output_max: %llu bytes, expected %u..%llu",
				  (unsigned long long)c->output_max, AL_SESS_OUTPUT_MAX_MIN,
				  (unsigned long long)AL_LIMIT_OUTPUT_MAX);
	return AL_OK;
}

enum call_field {
	C_V,
	C_ID,
	C_SESSION,
	C_TENANT,
	C_OP,
	C_CODE,
	C_ARGV,
	C_PATH,
	C_DATA,
	C_MODE,
	C_TIMEOUT,
	C_SUBMITTED,
	C_CPU,
	C_OUTPUT_MAX,
	C_TARGET,
	C_IDLE,
	C_LIFE,
	C_NCOPIES,
	C_COUNT
};

static const char *const call_field_names[C_COUNT] = {
    "v",      "id",	    "session", "tenant",  "op",		"code",
    "argv",   "path",	    "data",    "mode",	  "timeout_ms", "submitted_ms",
    "cpu_ms", "output_max", "target",  "idle_ms", "life_ms",	"count"};

static int dec_field(enum call_field f, const msgpack_object *v, struct al_sess_call *c,
		     struct al_err *err)
{
	uint64_t u;
	char *s = NULL;
	int rc;

	switch (f) {
	case C_V:
		rc = al_mp_get_uint(v, "v", AL_PROTO_VERSION, AL_PROTO_VERSION, &u, err);
		c->version = (uint32_t)u;
		return rc;
	case C_ID: return al_mp_get_text(v, "id", AL_ID_MAX, &c->id, err);
	case C_SESSION: return al_mp_get_text(v, "session", AL_ID_MAX, &c->session, err);
	case C_TENANT: return al_mp_get_text(v, "tenant", AL_ID_MAX, &c->tenant, err);
	case C_OP:
		if ((rc = al_mp_get_text(v, "op", 16, &s, err)))
			return rc;
		rc = al_sess_op_parse(s);
		if (rc < 0)
			rc = al_err_set(err, AL_EINVAL,
					"op: unknown \"%s\": expected exec, python, put, get, ls, "
					"close, cancel, info, extend, pause, resume or fork",
					s);
		else
			c->op = (enum al_sess_op)rc, rc = AL_OK;
		free(s);
		return rc;
	case C_CODE: return al_mp_get_bytes(v, "code", AL_CODE_MAX, &c->code, err);
	case C_ARGV:
		return al_dec_text_array(v, "argv", AL_ARGV_MAX, AL_ARG_MAX, &c->argv, &c->argc,
					 err);
	case C_PATH: return al_mp_get_text(v, "path", AL_PATH_MAX, &c->path, err);
	case C_DATA: return al_mp_get_bytes(v, "data", AL_SESS_FILE_MAX, &c->data, err);
	case C_MODE:
		rc = al_mp_get_uint(v, "mode", 0, 0777, &u, err);
		c->mode = (uint32_t)u;
		return rc;
	case C_TIMEOUT:
		return al_mp_get_uint(v, "timeout_ms", 1, AL_LIMIT_WALL_MS_MAX, &c->timeout_ms,
				      err);
	case C_SUBMITTED:
		return al_mp_get_uint(v, "submitted_ms", 0, UINT64_MAX, &c->submitted_ms, err);
	case C_CPU: return al_mp_get_uint(v, "cpu_ms", 1, AL_LIMIT_WALL_MS_MAX, &c->cpu_ms, err);
	case C_TARGET: return al_mp_get_text(v, "target", AL_ID_MAX, &c->target, err);
	case C_IDLE: return al_mp_get_uint(v, "idle_ms", 1, AL_LIMIT_WALL_MS_MAX, &c->idle_ms, err);
	case C_LIFE: return al_mp_get_uint(v, "life_ms", 1, AL_LIMIT_WALL_MS_MAX, &c->life_ms, err);
	case C_NCOPIES:
		rc = al_mp_get_uint(v, "count", 1, AL_SESS_FORK_MAX, &u, err);
		c->count = (uint32_t)u;
		return rc;
	case C_OUTPUT_MAX:
		return al_mp_get_uint(v, "output_max", AL_SESS_OUTPUT_MAX_MIN, AL_LIMIT_OUTPUT_MAX,
				      &c->output_max, err);
	case C_COUNT: break;
	}
	return al_err_set(err, AL_EINVAL, "internal: unhandled field");
}

static int call_field(int f, const msgpack_object *v, void *c, struct al_err *err)
{
	return dec_field((enum call_field)f, v, c, err);
}

static int decode_obj(const msgpack_object *root, struct al_sess_call *c, struct al_err *err)
{
	uint32_t seen;
	int rc;

	c->op = AL_SESS_OP_COUNT;
	if ((rc =
		 al_dec_fields(root, "call", call_field_names, C_COUNT, call_field, c, &seen, err)))
		return rc;
	if (!(seen & (1u << C_V)))
		return al_err_set(err, AL_EINVAL, "v: missing: the protocol version is required");
	if (!(seen & (1u << C_OP)))
		return al_err_set(err, AL_EINVAL, "op: missing");
	if (!(seen & (1u << C_MODE)))
		c->mode = 0644;
	if (!c->tenant && !(c->tenant = strdup("default")))
		return al_err_set(err, AL_ENOMEM, "tenant: out of memory");
	return al_sess_call_validate(c, err);
}

int al_sess_call_decode(const void *buf, size_t len, struct al_sess_call *c, struct al_err *err)
{
	msgpack_unpacked up;
	const msgpack_object *root;
	int rc;

	memset(c, 0, sizeof(*c));
	if (len > AL_SESS_CALL_MAX_BYTES)
		return al_err_set(err, AL_EINVAL, "call: %zu bytes, at most %u", len,
				  AL_SESS_CALL_MAX_BYTES);
	msgpack_unpacked_init(&up);
	rc = al_mp_parse(buf, len, &up, &root, err);
	if (!rc)
		rc = decode_obj(root, c, err);
	msgpack_unpacked_destroy(&up);
	if (rc)
		al_sess_call_free(c);
	return rc;
}

bool al_sess_call_peek(const void *buf, size_t len, char session[AL_ID_MAX + 1],
		       char id[AL_ID_MAX + 1])
{
	static const char *const keys[] = {"session", "id"};
	char ids[2][AL_ID_MAX + 1];
	bool both = al_peek_ids(buf, len, AL_SESS_CALL_MAX_BYTES, keys, 2, ids) == 2;

	memcpy(session, ids[0], sizeof(ids[0]));
	memcpy(id, ids[1], sizeof(ids[1]));
	return both;
}

int al_sess_call_encode(const struct al_sess_call *c, struct al_buf *out, struct al_err *err)
{
	msgpack_packer pk;
	size_t n = 5; /* v, id, session, tenant, op */
	int rc, bad = 0;

	if ((rc = al_sess_call_validate(c, err)))
		return rc;
	n += c->code.len > 0;
	n += c->argc > 0;
	n += c->path != NULL;
	n += c->data.len > 0;
	n += c->op == AL_SESS_PUT;
	n += c->timeout_ms > 0;
	n += c->submitted_ms > 0;
	n += c->cpu_ms > 0;
	n += c->output_max > 0;
	n += c->target != NULL;
	n += c->idle_ms > 0;
	n += c->life_ms > 0;
	n += c->count > 0;
	al_mp_packer_init(&pk, out);
	bad |= msgpack_pack_map(&pk, n);
	bad |= al_mp_pack_kv_uint(&pk, "v", AL_PROTO_VERSION);
	bad |= al_mp_pack_kv_str(&pk, "id", c->id);
	bad |= al_mp_pack_kv_str(&pk, "session", c->session);
	bad |= al_mp_pack_kv_str(&pk, "tenant", c->tenant);
	bad |= al_mp_pack_kv_str(&pk, "op", op_names[c->op]);
	if (c->code.len)
		bad |= al_mp_pack_kv_bin(&pk, "code", c->code.data, c->code.len);
	if (c->argc)
		bad |= al_mp_pack_str(&pk, "argv") || al_pack_text_array(&pk, c->argv, c->argc);
	if (c->path)
		bad |= al_mp_pack_kv_str(&pk, "path", c->path);
	if (c->data.len)
		bad |= al_mp_pack_kv_bin(&pk, "data", c->data.data, c->data.len);
	if (c->op == AL_SESS_PUT)
		bad |= al_mp_pack_kv_uint(&pk, "mode", c->mode);
	if (c->timeout_ms)
		bad |= al_mp_pack_kv_uint(&pk, "timeout_ms", c->timeout_ms);
	if (c->submitted_ms)
		bad |= al_mp_pack_kv_uint(&pk, "submitted_ms", c->submitted_ms);
	if (c->cpu_ms)
		bad |= al_mp_pack_kv_uint(&pk, "cpu_ms", c->cpu_ms);
	if (c->output_max)
		bad |= al_mp_pack_kv_uint(&pk, "output_max", c->output_max);
	if (c->target)
		bad |= al_mp_pack_kv_str(&pk, "target", c->target);
	if (c->idle_ms)
		bad |= al_mp_pack_kv_uint(&pk, "idle_ms", c->idle_ms);
	if (c->life_ms)
		bad |= al_mp_pack_kv_uint(&pk, "life_ms", c->life_ms);
	if (c->count)
		bad |= al_mp_pack_kv_uint(&pk, "count", c->count);
	return bad ? al_err_set(err, AL_ENOMEM, "call %s: out of memory while encoding", c->id)
		   : AL_OK;
}

void al_sess_call_free(struct al_sess_call *c)
{
	if (!c)
		return;
	free(c->id);
	free(c->session);
	free(c->tenant);
	free(c->code.data);
	al_free_strv(c->argv, c->argc);
	free(c->path);
	free(c->data.data);
	free(c->target);
	memset(c, 0, sizeof(*c));
}
