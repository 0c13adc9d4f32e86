/* field.c - the job codec's fields, shared by every message that carries
 * them (jobs, grading jobs, inputs, session calls): value checks (names,
 * relative paths, files, a command, limits), generic msgpack decoders and
 * encoders (text arrays, key-value maps, files, limits, a map's fields by
 * name), their frees, and the names of runtimes and networks. Calls
 * nothing of job.c, grade.c or inputs.c (which call it).
 */
#include "job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "mp.h"

const char *al_runtime_name(enum al_runtime r)
{
	switch (r) {
	case AL_RUNTIME_ARGV: return "argv";
	case AL_RUNTIME_PYTHON: return "python";
	case AL_RUNTIME_SH: return "sh";
	}
	return "?";
}

const char *al_network_name(enum al_network n)
{
	return n == AL_NET_EGRESS ? "egress" : "none";
}

bool al_name_ok(const char *s, size_t max, const char *extra)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr(extra, c)))
			return false;
	}
	return true;
}

int al_check_name(const char *what, const char *s, size_t max, const char *extra,
		  struct al_err *err)
{
	if (!s)
		return al_err_set(err, AL_EINVAL, "%s: missing", what);
	if (!al_name_ok(s, max, extra))
		return al_err_set(err, AL_EINVAL,
				  "%s: must be 1..%zu characters of [A-Za-z0-9%s], got \"%.64s\"",
				  what, max, extra, s);
	return AL_OK;
}

int al_check_rel_path(const char *what, const char *p, struct al_err *err)
{
	size_t n = strlen(p);
	const char *c = p;

	if (n == 0)
		return al_err_set(err, AL_EINVAL, "%s: empty path", what);
	if (n > AL_PATH_MAX)
		return al_err_set(err, AL_EINVAL, "%s: path too long: %zu bytes, at most %d", what,
				  n, AL_PATH_MAX);
	if (p[0] == '/')
		return al_err_set(
		    err, AL_EINVAL,
		    "%s: absolute path \"%s\": paths are relative to the work directory", what, p);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			return al_err_set(err, AL_EINVAL, "%s: control character in path", what);
	while (*c) {
		const char *end = strchr(c, '/');
		size_t len = end ? (size_t)(end - c) : strlen(c);

		if (len == 0 || (len == 1 && c[0] == '.'))
			return al_err_set(err, AL_EINVAL, "%s: empty or \".\" component in \"%s\"",
					  what, p);
		if (len == 2 && c[0] == '.' && c[1] == '.')
			return al_err_set(err, AL_EINVAL, "%s: \"..\" in path \"%s\"", what, p);
		if (!end)
			break;
		c = end + 1;
		if (!*c)
			return al_err_set(err, AL_EINVAL, "%s: trailing \"/\" in \"%s\"", what, p);
	}
	return AL_OK;
}

int al_check_limit(const char *what, uint64_t v, uint64_t max, struct al_err *err)
{
	if (v > max)
		return al_err_set(err, AL_EINVAL, "%s: out of range: got %llu, at most %llu", what,
				  (unsigned long long)v, (unsigned long long)max);
	return AL_OK;
}

/* True when dir names a directory on the way to path ("a" of "a/b"). */
static bool is_dir_of(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	return strncmp(dir, path, n) == 0 && path[n] == '/';
}

int al_check_files(const char *list, const struct al_file *files, size_t n, struct al_err *err)
{
	size_t total = 0;
	char what[96];
	int rc;

	for (size_t i = 0; i < n; i++) {
		const struct al_file *f = &files[i];

		snprintf(what, sizeof(what), "%s[%zu].path", list, i);
		if ((rc = al_check_rel_path(what, f->path, err)))
			return rc;
		if (f->mode > 0777)
			return al_err_set(err, AL_EINVAL, "%s[%zu].mode: %#o has bits beyond 0777",
					  list, i, f->mode);
		for (size_t j = 0; j < i; j++) {
			const char *o = files[j].path;

			if (strcmp(o, f->path) == 0)
				return al_err_set(err, AL_EINVAL,
						  "%s[%zu].path: duplicate file \"%s\"", list, i,
						  f->path);
			/* a file cannot also be a directory of another */
			if (is_dir_of(o, f->path) || is_dir_of(f->path, o))
				return al_err_set(err, AL_EINVAL,
						  "%s[%zu].path: \"%s\" and \"%s\": one is a file, "
						  "the other needs it as a directory",
						  list, i, f->path, o);
		}
		total += f->data.len;
		if (total > AL_FILES_TOTAL_MAX)
			return al_err_set(err, AL_EINVAL,
					  "%s: %zu bytes or more in all, at most %u", list, total,
					  AL_FILES_TOTAL_MAX);
	}
	return AL_OK;
}

int al_check_command(const char *pre, enum al_runtime runtime, const struct al_bytes *code,
		     char *const *argv, size_t argc, struct al_err *err)
{
	if (runtime == AL_RUNTIME_ARGV) {
		if (code->data)
			return al_err_set(err, AL_EINVAL,
					  "%scode: given without a runtime (python or sh)", pre);
		if (argc == 0)
			return al_err_set(err, AL_EINVAL,
					  "%sargv: missing: a job needs runtime+code or argv", pre);
		if (argv[0][0] == '\0')
			return al_err_set(err, AL_EINVAL, "%sargv[0]: empty program name", pre);
	} else if (!code->data) {
		return al_err_set(err, AL_EINVAL, "%scode: missing: runtime %s needs code", pre,
				  al_runtime_name(runtime));
	}
	return AL_OK;
}

int al_check_limits(const char *what, const struct al_limits *l, struct al_err *err)
{
	char f[96];
	int rc;

#define CHECK(name, max)                                                                           \
	(snprintf(f, sizeof(f), "%s." #name, what), al_check_limit(f, l->name, max, err))
	if ((rc = CHECK(wall_ms, AL_LIMIT_WALL_MS_MAX)) ||
	    (rc = CHECK(cpu_ms, AL_LIMIT_WALL_MS_MAX)) ||
	    (rc = CHECK(memory_bytes, AL_LIMIT_MEMORY_MAX)) ||
	    (rc = CHECK(pids, AL_LIMIT_PIDS_MAX)) ||
	    (rc = CHECK(stdout_bytes, AL_LIMIT_OUTPUT_MAX)) ||
	    (rc = CHECK(stderr_bytes, AL_LIMIT_OUTPUT_MAX)) ||
	    (rc = CHECK(disk_bytes, AL_LIMIT_DISK_MAX)))
		return rc;
#undef CHECK
	return AL_OK;
}

int al_dec_text_array(const msgpack_object *v, const char *what, size_t maxn, size_t maxlen,
		      char ***out, size_t *n, struct al_err *err)
{
	char name[64];
	int rc;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_ARRAY, what, err)))
		return rc;
	if (v->via.array.size > maxn)
		return al_err_set(err, AL_EINVAL, "%s: too many entries: %u, at most %zu", what,
				  v->via.array.size, maxn);
	if (v->via.array.size == 0)
		return AL_OK;
	*out = calloc(v->via.array.size, sizeof(**out));
	if (!*out)
		return al_err_set(err, AL_ENOMEM, "%s: out of memory", what);
	for (uint32_t i = 0; i < v->via.array.size; i++) {
		snprintf(name, sizeof(name), "%s[%u]", what, i);
		if ((rc = al_mp_get_text(&v->via.array.ptr[i], name, maxlen, &(*out)[i], err)))
			return rc;
		(*n)++;
	}
	return AL_OK;
}

int al_dec_kv_map(const msgpack_object *v, const char *what, size_t maxn, size_t maxk, size_t maxv,
		  struct al_kv **out, size_t *n, struct al_err *err)
{
	char name[64];
	int rc;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_MAP, what, err)))
		return rc;
	if (v->via.map.size > maxn)
		return al_err_set(err, AL_EINVAL, "%s: too many entries: %u, at most %zu", what,
				  v->via.map.size, maxn);
	if (v->via.map.size == 0)
		return AL_OK;
	*out = calloc(v->via.map.size, sizeof(**out));
	if (!*out)
		return al_err_set(err, AL_ENOMEM, "%s: out of memory", what);
	for (uint32_t i = 0; i < v->via.map.size; i++) {
		const msgpack_object_kv *kv = &v->via.map.ptr[i];

		snprintf(name, sizeof(name), "%s key #%u", what, i);
		if ((rc = al_mp_get_text(&kv->key, name, maxk, &(*out)[i].key, err)))
			return rc;
		(*n)++;
		snprintf(name, sizeof(name), "%s.%.40s", what, (*out)[i].key);
		if ((rc = al_mp_get_text(&kv->val, name, maxv, &(*out)[i].value, err)))
			return rc;
	}
	return AL_OK;
}

int al_dec_files(const msgpack_object *v, const char *what, struct al_file **files, size_t *nfiles,
		 struct al_err *err)
{
	char name[96];
	int rc;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_ARRAY, what, err)))
		return rc;
	if (v->via.array.size > AL_FILES_MAX)
		return al_err_set(err, AL_EINVAL, "%s: too many entries: %u, at most %d", what,
				  v->via.array.size, AL_FILES_MAX);
	if (v->via.array.size == 0)
		return AL_OK;
	*files = calloc(v->via.array.size, sizeof(**files));
	if (!*files)
		return al_err_set(err, AL_ENOMEM, "%s: out of memory", what);
	for (uint32_t i = 0; i < v->via.array.size; i++) {
		const msgpack_object *f = &v->via.array.ptr[i];
		struct al_file *out = &(*files)[i];
		bool have_data = false;

		snprintf(name, sizeof(name), "%s[%u]", what, i);
		if ((rc = al_mp_want(f, MSGPACK_OBJECT_MAP, name, err)))
			return rc;
		(*nfiles)++;
		out->mode = 0644;
		for (uint32_t k = 0; k < f->via.map.size; k++) {
			const msgpack_object *key = &f->via.map.ptr[k].key;
			const msgpack_object *val = &f->via.map.ptr[k].val;
			uint64_t mode;

			if (al_mp_key_is(key, "path") && !out->path) {
				snprintf(name, sizeof(name), "%s[%u].path", what, i);
				rc = al_mp_get_text(val, name, AL_PATH_MAX, &out->path, err);
			} else if (al_mp_key_is(key, "data") && !have_data) {
				snprintf(name, sizeof(name), "%s[%u].data", what, i);
				rc =
				    al_mp_get_bytes(val, name, AL_FILES_TOTAL_MAX, &out->data, err);
				have_data = true;
			} else if (al_mp_key_is(key, "mode")) {
				snprintf(name, sizeof(name), "%s[%u].mode", what, i);
				rc = al_mp_get_uint(val, name, 0, 0777, &mode, err);
				out->mode = (uint32_t)mode;
			} else {
				rc = al_err_set(err, AL_EINVAL, "%s[%u]: unknown or repeated field",
						what, i);
			}
			if (rc)
				return rc;
		}
		if (!out->path)
			return al_err_set(err, AL_EINVAL, "%s[%u].path: missing", what, i);
		if (!have_data)
			return al_err_set(err, AL_EINVAL, "%s[%u].data: missing", what, i);
	}
	return AL_OK;
}

int al_dec_limits(const msgpack_object *v, const char *what, struct al_limits *l,
		  struct al_err *err)
{
	static const struct {
		const char *name;
		size_t off;
		uint64_t max;
	} fields[] = {
	    {"wall_ms", offsetof(struct al_limits, wall_ms), AL_LIMIT_WALL_MS_MAX},
	    {"cpu_ms", offsetof(struct al_limits, cpu_ms), AL_LIMIT_WALL_MS_MAX},
	    {"memory_bytes", offsetof(struct al_limits, memory_bytes), AL_LIMIT_MEMORY_MAX},
	    {"pids", offsetof(struct al_limits, pids), AL_LIMIT_PIDS_MAX},
	    {"stdout_bytes", offsetof(struct al_limits, stdout_bytes), AL_LIMIT_OUTPUT_MAX},
	    {"stderr_bytes", offsetof(struct al_limits, stderr_bytes), AL_LIMIT_OUTPUT_MAX},
	    {"disk_bytes", offsetof(struct al_limits, disk_bytes), AL_LIMIT_DISK_MAX},
	};
	unsigned seen = 0;
	char name[96];
	int rc;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_MAP, what, err)))
		return rc;
	for (uint32_t i = 0; i < v->via.map.size; i++) {
		const msgpack_object_kv *kv = &v->via.map.ptr[i];
		size_t f;

		for (f = 0; f < sizeof(fields) / sizeof(fields[0]); f++)
			if (al_mp_key_is(&kv->key, fields[f].name))
				break;
		if (f == sizeof(fields) / sizeof(fields[0]))
			return al_err_set(
			    err, AL_EINVAL,
			    "%s: unknown field #%u (known: wall_ms, cpu_ms, memory_bytes, "
			    "pids, stdout_bytes, stderr_bytes, disk_bytes)",
			    what, i);
		if (seen & (1u << f))
			return al_err_set(err, AL_EINVAL, "%s.%s: duplicate field", what,
					  fields[f].name);
		seen |= 1u << f;
		snprintf(name, sizeof(name), "%s.%s", what, fields[f].name);
		if ((rc = al_mp_get_uint(&kv->val, name, 1, fields[f].max,
					 (uint64_t *)((char *)l + fields[f].off), err)))
			return rc;
	}
	return AL_OK;
}

int al_dec_fields(const msgpack_object *root, const char *what, const char *const *names, int n,
		  al_field_fn fn, void *ctx, uint32_t *seen, struct al_err *err)
{
	int rc;

	*seen = 0;
	if (root->type != MSGPACK_OBJECT_MAP)
		return al_err_set(err, AL_EINVAL, "%s: wrong type: expected map, got %s", what,
				  al_mp_type_name(root->type));
	for (uint32_t i = 0; i < root->via.map.size; i++) {
		const msgpack_object_kv *kv = &root->via.map.ptr[i];
		int f;

		if (kv->key.type != MSGPACK_OBJECT_STR)
			return al_err_set(err, AL_EINVAL,
					  "%s: key #%u: wrong type: expected string, got %s", what,
					  i, al_mp_type_name(kv->key.type));
		for (f = 0; f < n; f++)
			if (al_mp_key_is(&kv->key, names[f]))
				break;
		if (f == n)
			return al_err_set(
			    err, AL_EINVAL, "%s: unknown field \"%.*s\"", what,
			    (int)(kv->key.via.str.size > 40 ? 40 : kv->key.via.str.size),
			    al_utf8_valid(kv->key.via.str.ptr, kv->key.via.str.size)
				? kv->key.via.str.ptr
				: "(not UTF-8)");
		if (*seen & (1u << f))
			return al_err_set(err, AL_EINVAL, "%s: duplicate field", names[f]);
		*seen |= 1u << f;
		if ((rc = fn(f, &kv->val, ctx, err)))
			return rc;
	}
	return AL_OK;
}

int al_pack_text_array(msgpack_packer *pk, char *const *v, size_t n)
{
	if (msgpack_pack_array(pk, n))
		return AL_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (al_mp_pack_str(pk, v[i]))
			return AL_ENOMEM;
	return 0;
}

int al_pack_files(msgpack_packer *pk, const struct al_file *files, size_t n)
{
	if (msgpack_pack_array(pk, n))
		return AL_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (msgpack_pack_map(pk, 3) || al_mp_pack_kv_str(pk, "path", files[i].path) ||
		    al_mp_pack_kv_bin(pk, "data", files[i].data.data, files[i].data.len) ||
		    al_mp_pack_kv_uint(pk, "mode", files[i].mode))
			return AL_ENOMEM;
	return 0;
}

int al_pack_limits(msgpack_packer *pk, const struct al_limits *l)
{
	const struct {
		const char *k;
		uint64_t v;
	} f[] = {
	    {"wall_ms", l->wall_ms},	       {"cpu_ms", l->cpu_ms},
	    {"memory_bytes", l->memory_bytes}, {"pids", l->pids},
	    {"stdout_bytes", l->stdout_bytes}, {"stderr_bytes", l->stderr_bytes},
	    {"disk_bytes", l->disk_bytes},
	};
	size_t n = 0;

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		n += f[i].v != 0;
	if (msgpack_pack_map(pk, n))
		return AL_ENOMEM;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].v && al_mp_pack_kv_uint(pk, f[i].k, f[i].v))
			return AL_ENOMEM;
	return 0;
}

void al_free_files(struct al_file *files, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(files[i].path);
		free(files[i].data.data);
	}
	free(files);
}

void al_free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

size_t al_peek_ids(const void *buf, size_t len, size_t max_len, const char *const *keys, size_t n,
		   char (*out)[AL_ID_MAX + 1])
{
	msgpack_unpacked up;
	const msgpack_object *root;
	bool seen[8] = {false};
	size_t found = 0;

	for (size_t k = 0; k < n; k++)
		out[k][0] = '\0';
	if (len > max_len || n > sizeof(seen) / sizeof(seen[0]))
		return 0;
	msgpack_unpacked_init(&up);
	if (al_mp_parse(buf, len, &up, &root, NULL) == AL_OK && root->type == MSGPACK_OBJECT_MAP) {
		for (uint32_t i = 0; i < root->via.map.size; i++) {
			const msgpack_object_kv *kv = &root->via.map.ptr[i];
			const msgpack_object *v = &kv->val;
			size_t k = 0;

			while (k < n && !al_mp_key_is(&kv->key, keys[k]))
				k++;
			if (k == n || seen[k])
				continue;
			seen[k] = true; /* the first of a key decides */
			if (v->type != MSGPACK_OBJECT_STR || !v->via.str.size ||
			    v->via.str.size > AL_ID_MAX ||
			    memchr(v->via.str.ptr, 0, v->via.str.size))
				continue;
			memcpy(out[k], v->via.str.ptr, v->via.str.size);
			out[k][v->via.str.size] = '\0';
			if (al_name_ok(out[k], AL_ID_MAX, "._:-"))
				found++;
			else
				out[k][0] = '\0';
		}
	}
	msgpack_unpacked_destroy(&up);
	return found;
}
