/* job.c - decoding, validating and encoding jobs (wire format: PROTOCOL.md). */
#include "job.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "codec.h"
#include "grade.h"
#include "mp.h"

/* ---- value checks shared by decode and validate ---- */

bool al_collect_is_glob(const char *entry)
{
	return strpbrk(entry, "*?[") != NULL;
}

bool al_collect_wanted(const struct al_job *job, const char *path)
{
	for (size_t i = 0; i < job->ncollect; i++)
		if (al_collect_is_glob(job->collect[i])
			? !fnmatch(job->collect[i], path, FNM_PATHNAME | FNM_PERIOD)
			: !strcmp(job->collect[i], path))
			return true;
	return false;
}

size_t al_collect_max_files(const struct al_job *job)
{
	for (size_t i = 0; i < job->ncollect; i++)
		if (al_collect_is_glob(job->collect[i]))
			return AL_COLLECT_FILES_MAX;
	return job->ncollect;
}

static int check_env_name(const char *what, const char *s, struct al_err *err)
{
	size_t n = strlen(s);

	if (n == 0 || n > AL_ENV_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
		goto bad_name;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			goto bad_name;
	return AL_OK;
bad_name:
	return al_err_set(
	    err, AL_EINVAL,
	    "%s: bad variable name \"%.64s\": expected [A-Za-z_][A-Za-z0-9_]*, at most %d", what, s,
	    AL_ENV_NAME_MAX);
}

static int check_url(const char *u, struct al_err *err)
{
	size_t n = strlen(u);

	if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
		return al_err_set(err, AL_EINVAL,
				  "callback_url: must start with http:// or https://");
	if (n > AL_URL_MAX)
		return al_err_set(err, AL_EINVAL, "callback_url: too long: %zu bytes, at most %d",
				  n, AL_URL_MAX);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)u[i] <= 0x20 || u[i] == 0x7f)
			return al_err_set(err, AL_EINVAL,
					  "callback_url: space or control character");
	return AL_OK;
}

int al_job_validate(const struct al_job *job, struct al_err *err)
{
	const struct al_limits *l = &job->limits;
	char what[64];
	int rc;

	if (job->version != AL_PROTO_VERSION)
		return al_err_set(err, AL_EINVAL,
				  "v: unknown protocol version %u, this build speaks %d",
				  job->version, AL_PROTO_VERSION);
	if ((rc = al_check_name("id", job->id, AL_ID_MAX, "._:-", err)) ||
	    (rc = al_check_name("tenant", job->tenant, AL_ID_MAX, "._:-", err)) ||
	    (rc = al_check_name("tier", job->tier, AL_ID_MAX, "_-", err)) ||
	    (job->image && (rc = al_check_name("image", job->image, AL_ID_MAX, "_-", err))))
		return rc;

	/* a session's job names no command (admission refuses one: its calls
	 * come later); the worker gives it the session server's, which the
	 * microVM's guest decodes again */
	if (job->session) {
		if (job->argc || job->ntests || job->build || (job->code.data && !job->runtime))
			return al_err_set(err, AL_EINVAL,
					  "session: a session's job has no command (argv) nor "
					  "tests: its calls come later");
		if (job->cpu_budget_ms > AL_LIMIT_WALL_MS_MAX)
			return al_err_set(err, AL_EINVAL, "cpu_budget_ms: expected 1..%llu",
					  (unsigned long long)AL_LIMIT_WALL_MS_MAX);
	} else if (job->cpu_budget_ms) {
		return al_err_set(err, AL_EINVAL,
				  "cpu_budget_ms: only in a session's job (\"session\": true)");
	} else if (!(job->language && job->ntests && job->runtime == AL_RUNTIME_ARGV &&
		     !job->argc) && /* a language's command comes at admission */
		   (rc = al_check_command("", job->runtime, &job->code, job->argv, job->argc,
					  err))) {
		return rc;
	}
	if (job->language && !job->ntests)
		return al_err_set(err, AL_EINVAL, "language: only in a grading job (with tests)");
	if (job->code.len > AL_CODE_MAX || job->argc > AL_ARGV_MAX ||
	    job->stdin_data.len > AL_STDIN_MAX || job->nfiles > AL_FILES_MAX ||
	    job->nenv > AL_ENV_MAX || job->ncollect > AL_COLLECT_MAX ||
	    job->nlabels > AL_LABELS_MAX)
		return al_err_set(err, AL_EINVAL, "job: a field exceeds its cap (see PROTOCOL.md)");
	for (size_t i = 0; i < job->argc; i++)
		if (strlen(job->argv[i]) > AL_ARG_MAX)
			return al_err_set(err, AL_EINVAL, "argv[%zu]: too long", i);

	if ((rc = al_check_files("files", job->files, job->nfiles, err)) ||
	    (rc = al_inputs_validate(job, err)))
		return rc;
	for (size_t i = 0; i < job->nenv; i++) {
		snprintf(what, sizeof(what), "env[%zu]", i);
		if ((rc = check_env_name(what, job->env[i].key, err)))
			return rc;
		if (strlen(job->env[i].value) > AL_ENV_VALUE_MAX)
			return al_err_set(err, AL_EINVAL, "env.%s: value too long",
					  job->env[i].key);
		for (size_t j = 0; j < i; j++)
			if (strcmp(job->env[j].key, job->env[i].key) == 0)
				return al_err_set(err, AL_EINVAL, "env.%s: duplicate variable",
						  job->env[i].key);
	}
	for (size_t i = 0; i < job->ncollect; i++) {
		snprintf(what, sizeof(what), "collect[%zu]", i);
		if ((rc = al_check_rel_path(what, job->collect[i], err)))
			return rc;
		for (size_t j = 0; j < i; j++)
			if (strcmp(job->collect[j], job->collect[i]) == 0)
				return al_err_set(err, AL_EINVAL,
						  "collect[%zu]: duplicate path \"%s\"", i,
						  job->collect[i]);
	}
	for (size_t i = 0; i < job->nlabels; i++) {
		snprintf(what, sizeof(what), "labels[%zu]", i);
		if ((rc = al_check_name(what, job->labels[i].key, AL_LABEL_KEY_MAX, "._/-", err)))
			return rc;
		if (strlen(job->labels[i].value) > AL_LABEL_VALUE_MAX)
			return al_err_set(err, AL_EINVAL, "labels.%s: value too long",
					  job->labels[i].key);
		for (size_t j = 0; j < i; j++)
			if (strcmp(job->labels[j].key, job->labels[i].key) == 0)
				return al_err_set(err, AL_EINVAL, "labels.%s: duplicate label",
						  job->labels[i].key);
	}
	if ((rc = al_check_limits("limits", l, err)))
		return rc;
	if (job->priority > AL_PRIORITY_MAX)
		return al_err_set(err, AL_EINVAL, "priority: out of range: got %u, expected 0..%d",
				  job->priority, AL_PRIORITY_MAX);
	if (job->max_attempts > AL_ATTEMPTS_MAX)
		return al_err_set(err, AL_EINVAL,
				  "max_attempts: out of range: got %u, expected 1..%d",
				  job->max_attempts, AL_ATTEMPTS_MAX);
	if (job->idempotency_key &&
	    (job->idempotency_key[0] == '\0' || strlen(job->idempotency_key) > AL_IDEM_MAX))
		return al_err_set(err, AL_EINVAL, "idempotency_key: must be 1..%d bytes",
				  AL_IDEM_MAX);
	if (job->callback_url && (rc = check_url(job->callback_url, err)))
		return rc;
	if (job->negress_allow > AL_EGRESS_ALLOW_MAX)
		return al_err_set(err, AL_EINVAL, "egress_allow: at most %d rules",
				  AL_EGRESS_ALLOW_MAX);
	if (job->negress_allow && job->network != AL_NET_EGRESS)
		return al_err_set(
		    err, AL_EINVAL,
		    "egress_allow: only with network \"egress\" (it narrows what that "
		    "may reach)");
	return al_grade_validate(job, err);
}

/* ---- decoding ---- */

static int dec_enum(const msgpack_object *v, const char *what, const char *const *names, int n,
		    int *out, struct al_err *err)
{
	char *s = NULL;
	int rc = al_mp_get_text(v, what, 32, &s, err);

	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = i;
			free(s);
			return AL_OK;
		}
	}
	rc = al_err_set(err, AL_EINVAL, "%s: unknown value \"%s\"", what, s);
	free(s);
	return rc;
}

enum job_field {
	F_V,
	F_ID,
	F_TENANT,
	F_TIER,
	F_RUNTIME,
	F_CODE,
	F_ARGV,
	F_STDIN,
	F_FILES,
	F_ENV,
	F_COLLECT,
	F_LIMITS,
	F_NETWORK,
	F_PRIORITY,
	F_DEADLINE,
	F_ATTEMPTS,
	F_IDEM,
	F_CALLBACK,
	F_IMAGE,
	F_EGRESS_ALLOW,
	F_LABELS,
	F_SUBMITTED,
	F_BUILD,
	F_CHECKER,
	F_TESTS,
	F_STOP_ON_FAILURE,
	F_GROUP_SCORING,
	F_LANGUAGE,
	F_SESSION,
	F_INPUTS,
	F_CPU_BUDGET,
	F_COUNT
};

static const char *const job_field_names[F_COUNT] = {
    "v",
    "id",
    "tenant",
    "tier",
    "runtime",
    "code",
    "argv",
    "stdin",
    "files",
    "env",
    "collect",
    "limits",
    "network",
    "priority",
    "deadline_ms",
    "max_attempts",
    "idempotency_key",
    "callback_url",
    "image",
    "egress_allow",
    "labels",
    "submitted_ms",
    "build",
    "checker",
    "tests",
    "stop_on_failure",
    "group_scoring",
    "language",
    "session",
    "inputs",
    "cpu_budget_ms",
};

static int dec_field(enum job_field f, const msgpack_object *v, struct al_job *job,
		     struct al_err *err)
{
	static const char *const runtimes[] = {"python", "sh"};
	static const char *const networks[] = {"none", "egress"};
	uint64_t u;
	int e, rc;

	switch (f) {
	case F_V:
		rc = al_mp_get_uint(v, "v", 0, UINT32_MAX, &u, err);
		if (!rc && u != AL_PROTO_VERSION)
			rc = al_err_set(err, AL_EINVAL,
					"v: unknown protocol version %llu, this build speaks %d",
					(unsigned long long)u, AL_PROTO_VERSION);
		job->version = (uint32_t)u;
		return rc;
	case F_ID: return al_mp_get_text(v, "id", AL_ID_MAX, &job->id, err);
	case F_TENANT: return al_mp_get_text(v, "tenant", AL_ID_MAX, &job->tenant, err);
	case F_TIER: return al_mp_get_text(v, "tier", AL_ID_MAX, &job->tier, err);
	case F_RUNTIME:
		rc = dec_enum(v, "runtime", runtimes, 2, &e, err);
		job->runtime = rc ? AL_RUNTIME_ARGV : (enum al_runtime)(e + 1);
		return rc;
	case F_CODE: return al_mp_get_bytes(v, "code", AL_CODE_MAX, &job->code, err);
	case F_ARGV:
		return al_dec_text_array(v, "argv", AL_ARGV_MAX, AL_ARG_MAX, &job->argv, &job->argc,
					 err);
	case F_STDIN: return al_mp_get_bytes(v, "stdin", AL_STDIN_MAX, &job->stdin_data, err);
	case F_FILES: return al_dec_files(v, "files", &job->files, &job->nfiles, err);
	case F_ENV:
		return al_dec_kv_map(v, "env", AL_ENV_MAX, AL_ENV_NAME_MAX, AL_ENV_VALUE_MAX,
				     &job->env, &job->nenv, err);
	case F_COLLECT:
		return al_dec_text_array(v, "collect", AL_COLLECT_MAX, AL_PATH_MAX, &job->collect,
					 &job->ncollect, err);
	case F_LIMITS: return al_dec_limits(v, "limits", &job->limits, err);
	case F_NETWORK:
		rc = dec_enum(v, "network", networks, 2, &e, err);
		job->network = rc ? AL_NET_NONE : (enum al_network)e;
		return rc;
	case F_PRIORITY:
		rc = al_mp_get_uint(v, "priority", 0, AL_PRIORITY_MAX, &u, err);
		job->priority = (uint32_t)u;
		return rc;
	case F_DEADLINE:
		return al_mp_get_uint(v, "deadline_ms", 1, UINT64_MAX, &job->deadline_ms, err);
	case F_ATTEMPTS:
		rc = al_mp_get_uint(v, "max_attempts", 1, AL_ATTEMPTS_MAX, &u, err);
		job->max_attempts = (uint32_t)u;
		return rc;
	case F_IDEM:
		return al_mp_get_text(v, "idempotency_key", AL_IDEM_MAX, &job->idempotency_key,
				      err);
	case F_CALLBACK:
		return al_mp_get_text(v, "callback_url", AL_URL_MAX, &job->callback_url, err);
	case F_IMAGE: return al_mp_get_text(v, "image", AL_ID_MAX, &job->image, err);
	case F_EGRESS_ALLOW:
		return al_dec_text_array(v, "egress_allow", AL_EGRESS_ALLOW_MAX, AL_EGRESS_TEXT_MAX,
					 &job->egress_allow, &job->negress_allow, err);
	case F_LABELS:
		return al_dec_kv_map(v, "labels", AL_LABELS_MAX, AL_LABEL_KEY_MAX,
				     AL_LABEL_VALUE_MAX, &job->labels, &job->nlabels, err);
	case F_SUBMITTED:
		return al_mp_get_uint(v, "submitted_ms", 0, UINT64_MAX, &job->submitted_ms, err);
	case F_BUILD: return al_grade_dec_build(v, job, err);
	case F_CHECKER: return al_grade_dec_checker(v, job, err);
	case F_TESTS: return al_grade_dec_tests(v, job, err);
	case F_STOP_ON_FAILURE:
		return al_mp_get_bool(v, "stop_on_failure", &job->stop_on_failure, err);
	case F_GROUP_SCORING: {
		char *s = NULL;

		if ((rc = al_mp_get_text(v, "group_scoring", 8, &s, err)))
			return rc;
		job->group_scoring = al_group_scoring_parse(s);
		rc = job->group_scoring < 0
			 ? al_err_set(err, AL_EINVAL,
				      "group_scoring: unknown value \"%s\" (all, sum or min)", s)
			 : AL_OK;
		free(s);
		return rc;
	}
	case F_LANGUAGE: return al_mp_get_text(v, "language", 32, &job->language, err);
	case F_SESSION: return al_mp_get_bool(v, "session", &job->session, err);
	case F_INPUTS: return al_inputs_decode(v, job, err);
	case F_CPU_BUDGET:
		return al_mp_get_uint(v, "cpu_budget_ms", 1, AL_LIMIT_WALL_MS_MAX,
				      &job->cpu_budget_ms, err);
	case F_COUNT: break;
	}
	return al_err_set(err, AL_EINVAL, "internal: unhandled field");
}

static int job_field(int f, const msgpack_object *v, void *job, struct al_err *err)
{
	return dec_field((enum job_field)f, v, job, err);
}

static int job_decode_obj(const msgpack_object *root, struct al_job *job, struct al_err *err)
{
	uint32_t seen;
	int rc;

	job->priority = AL_PRIORITY_DEFAULT;
	if ((rc = al_dec_fields(root, "job", job_field_names, F_COUNT, job_field, job, &seen, err)))
		return rc;
	if (!(seen & (1u << F_V)))
		return al_err_set(err, AL_EINVAL,
				  "v: missing: the protocol version is required (%d)",
				  AL_PROTO_VERSION);
	if (!job->tenant && !(job->tenant = strdup("default")))
		return al_err_set(err, AL_ENOMEM, "tenant: out of memory");
	if (job->runtime != AL_RUNTIME_ARGV && !(seen & (1u << F_CODE)))
		return al_err_set(err, AL_EINVAL, "code: missing: runtime %s needs code",
				  al_runtime_name(job->runtime));
	return al_job_validate(job, err);
}

int al_job_decode(const void *buf, size_t len, struct al_job *job, struct al_err *err)
{
	msgpack_unpacked up;
	const msgpack_object *root;
	int rc;

	memset(job, 0, sizeof(*job));
	if (len > AL_JOB_MAX_BYTES)
		return al_err_set(err, AL_EINVAL, "job: %zu bytes, at most %u", len,
				  AL_JOB_MAX_BYTES);
	msgpack_unpacked_init(&up);
	rc = al_mp_parse(buf, len, &up, &root, err);
	if (!rc)
		rc = job_decode_obj(root, job, err);
	msgpack_unpacked_destroy(&up);
	if (rc)
		al_job_free(job);
	return rc;
}

bool al_job_id_ok(const char *s, size_t len)
{
	return s && len > 0 && len <= AL_ID_MAX && strlen(s) == len &&
	       al_name_ok(s, AL_ID_MAX, "._:-");
}

char *al_job_peek_id(const void *buf, size_t len)
{
	static const char *const keys[] = {"id"};
	char id[1][AL_ID_MAX + 1];

	return al_peek_ids(buf, len, AL_JOB_MAX_BYTES, keys, 1, id) ? strdup(id[0]) : NULL;
}

/* ---- encoding ---- */

int al_job_encode(const struct al_job *job, struct al_buf *out, struct al_err *err)
{
	msgpack_packer pk;
	size_t n = 5; /* v, id, tenant, tier, priority */
	int rc, bad = 0;

	if ((rc = al_job_validate(job, err)))
		return rc;
	n += job->runtime != AL_RUNTIME_ARGV ? 2 : 0;
	n += job->argc > 0;
	n += job->stdin_data.len > 0;
	n += job->nfiles > 0;
	n += job->ninputs > 0;
	n += job->nenv > 0;
	n += job->ncollect > 0;
	n += 1; /* limits */
	n += 1; /* network */
	n += job->deadline_ms > 0;
	n += job->max_attempts > 0;
	n += job->idempotency_key != NULL;
	n += job->callback_url != NULL;
	n += job->image != NULL;
	n += job->language != NULL;
	n += job->negress_allow > 0;
	n += job->nlabels > 0;
	n += job->submitted_ms > 0;
	n += al_grade_job_nfields(job);
	n += job->session;
	n += job->cpu_budget_ms > 0;

	al_mp_packer_init(&pk, out);
	bad |= msgpack_pack_map(&pk, n);
	bad |= al_mp_pack_kv_uint(&pk, "v", job->version);
	bad |= al_mp_pack_kv_str(&pk, "id", job->id);
	bad |= al_mp_pack_kv_str(&pk, "tenant", job->tenant);
	bad |= al_mp_pack_kv_str(&pk, "tier", job->tier);
	if (job->runtime != AL_RUNTIME_ARGV) {
		bad |= al_mp_pack_kv_str(&pk, "runtime", al_runtime_name(job->runtime));
		bad |= al_mp_pack_kv_bin(&pk, "code", job->code.data, job->code.len);
	}
	if (job->argc)
		bad |= al_mp_pack_str(&pk, "argv") || al_pack_text_array(&pk, job->argv, job->argc);
	if (job->stdin_data.len)
		bad |= al_mp_pack_kv_bin(&pk, "stdin", job->stdin_data.data, job->stdin_data.len);
	if (job->nfiles) {
		bad |= al_mp_pack_str(&pk, "files") || al_pack_files(&pk, job->files, job->nfiles);
	}
	if (job->ninputs)
		bad |=
		    al_mp_pack_str(&pk, "inputs") || al_inputs_pack(&pk, job->inputs, job->ninputs);
	if (job->nenv)
		bad |= al_mp_pack_str(&pk, "env") || al_mp_pack_kvs(&pk, job->env, job->nenv);
	if (job->ncollect)
		bad |= al_mp_pack_str(&pk, "collect") ||
		       al_pack_text_array(&pk, job->collect, job->ncollect);
	bad |= al_mp_pack_str(&pk, "limits") || al_pack_limits(&pk, &job->limits);
	bad |= al_mp_pack_kv_str(&pk, "network", al_network_name(job->network));
	bad |= al_mp_pack_kv_uint(&pk, "priority", job->priority);
	if (job->deadline_ms)
		bad |= al_mp_pack_kv_uint(&pk, "deadline_ms", job->deadline_ms);
	if (job->max_attempts)
		bad |= al_mp_pack_kv_uint(&pk, "max_attempts", job->max_attempts);
	if (job->idempotency_key)
		bad |= al_mp_pack_kv_str(&pk, "idempotency_key", job->idempotency_key);
	if (job->callback_url)
		bad |= al_mp_pack_kv_str(&pk, "callback_url", job->callback_url);
	if (job->image)
		bad |= al_mp_pack_kv_str(&pk, "image", job->image);
	if (job->language)
		bad |= al_mp_pack_kv_str(&pk, "language", job->language);
	if (job->negress_allow)
		bad |= al_mp_pack_str(&pk, "egress_allow") ||
		       al_pack_text_array(&pk, job->egress_allow, job->negress_allow);
	if (job->nlabels)
		bad |=
		    al_mp_pack_str(&pk, "labels") || al_mp_pack_kvs(&pk, job->labels, job->nlabels);
	if (job->submitted_ms)
		bad |= al_mp_pack_kv_uint(&pk, "submitted_ms", job->submitted_ms);
	bad |= al_grade_pack_job(&pk, job);
	if (job->session)
		bad |= al_mp_pack_str(&pk, "session") || msgpack_pack_true(&pk);
	if (job->cpu_budget_ms)
		bad |= al_mp_pack_kv_uint(&pk, "cpu_budget_ms", job->cpu_budget_ms);
	if (bad)
		return al_err_set(err, AL_ENOMEM, "job %s: out of memory while encoding", job->id);
	return AL_OK;
}

/* ---- ownership ---- */

static void free_kvs(struct al_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

void al_job_free(struct al_job *job)
{
	if (!job)
		return;
	free(job->id);
	free(job->tenant);
	free(job->tier);
	free(job->code.data);
	al_free_strv(job->argv, job->argc);
	free(job->stdin_data.data);
	al_free_files(job->files, job->nfiles);
	al_inputs_free(job->inputs, job->ninputs);
	free_kvs(job->env, job->nenv);
	al_free_strv(job->collect, job->ncollect);
	free(job->idempotency_key);
	free(job->callback_url);
	free(job->image);
	free(job->language);
	al_free_strv(job->egress_allow, job->negress_allow);
	free_kvs(job->labels, job->nlabels);
	al_grade_free_job(job);
	memset(job, 0, sizeof(*job));
}

int al_job_new_id(char out[33], struct al_err *err)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[16];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return al_err_sys(err, "getrandom");
	for (int i = 0; i < 16; i++) {
		out[2 * i] = hex[r[i] >> 4];
		out[2 * i + 1] = hex[r[i] & 15];
	}
	out[32] = '\0';
	return AL_OK;
}
