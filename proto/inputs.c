/* inputs.c - the job's "inputs" field: decode, checks, encode (inputs.h). */
#include "inputs.h"

#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "job.h"

static const char *const unpack_names[] = {"none", "tar", "zip", "git"};

const char *al_unpack_name(enum al_unpack u)
{
	return (unsigned)u < 4 ? unpack_names[u] : "?";
}

bool al_git_ref_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > AL_GIT_REF_MAX || s[0] == '-' || s[0] == '/' || s[n - 1] == '/' ||
	    s[n - 1] == '.' || strstr(s, "..") || strstr(s, "//") || strstr(s, "/.") ||
	    (n >= 5 && !strcmp(s + n - 5, ".lock")) || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("._/-", s[i])))
			return false;
	return true;
}

/* {"url", "ref"}: a git input's repository and what of it */
static int dec_git(const msgpack_object *m, const char *what, struct al_input *in,
		   struct al_err *err)
{
	char name[80];
	int rc;

	if ((rc = al_mp_want(m, MSGPACK_OBJECT_MAP, what, err)))
		return rc;
	for (uint32_t k = 0; k < m->via.map.size; k++) {
		const msgpack_object *key = &m->via.map.ptr[k].key;
		const msgpack_object *val = &m->via.map.ptr[k].val;

		if (al_mp_key_is(key, "url") && !in->url) {
			snprintf(name, sizeof(name), "%s.url", what);
			rc = al_mp_get_text(val, name, AL_INPUT_URL_MAX, &in->url, err);
		} else if (al_mp_key_is(key, "ref") && !in->ref) {
			snprintf(name, sizeof(name), "%s.ref", what);
			rc = al_mp_get_text(val, name, AL_GIT_REF_MAX + 1, &in->ref, err);
		} else {
			rc = al_err_set(err, AL_EINVAL, "%s: unknown or repeated field (url, ref)",
					what);
		}
		if (rc)
			return rc;
	}
	if (!in->ref)
		return al_err_set(
		    err, AL_EINVAL,
		    "%s.ref: missing: a branch, a tag, a full ref or a 40-hex commit id", what);
	return AL_OK;
}

int al_input_url_parse(const char *what, const char *url, char *host, size_t cap, unsigned *port,
		       int *https, struct al_err *err)
{
	const char *a, *end, *h, *he, *p;
	size_t n = strlen(url);
	unsigned long v = 0;

	if (n > AL_INPUT_URL_MAX)
		return al_err_set(err, AL_EINVAL, "%s: longer than %d bytes", what,
				  AL_INPUT_URL_MAX);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)url[i] <= 0x20 || (unsigned char)url[i] >= 0x7f)
			return al_err_set(err, AL_EINVAL,
					  "%s: a space, control or non-ASCII byte at %zu "
					  "(percent-encode it)",
					  what, i);
	if (!strncmp(url, "https://", 8))
		*https = 1, a = url + 8, *port = 443;
	else if (!strncmp(url, "http://", 7))
		*https = 0, a = url + 7, *port = 80;
	else
		return al_err_set(err, AL_EINVAL, "%s: \"%.40s\": only http:// and https:// URLs",
				  what, url);
	end = a + strcspn(a, "/?#");
	if (memchr(a, '@', (size_t)(end - a)))
		return al_err_set(err, AL_EINVAL, "%s: user information in the URL is not taken",
				  what);
	if (*a == '[') {
		h = a + 1;
		if (!(he = memchr(h, ']', (size_t)(end - h))))
			return al_err_set(err, AL_EINVAL, "%s: an IPv6 address without ']'", what);
		p = he + 1;
	} else {
		h = a;
		he = memchr(a, ':', (size_t)(end - a));
		he = he ? he : end;
		p = he;
		for (const char *c = h; c < he; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			      (*c >= '0' && *c <= '9') || *c == '.' || *c == '-'))
				return al_err_set(err, AL_EINVAL,
						  "%s: the host has a '%c': letters, digits, '.' "
						  "and '-' only",
						  what, *c);
	}
	if (he == h || (size_t)(he - h) >= cap)
		return al_err_set(err, AL_EINVAL, "%s: no host, or a host too long", what);
	if (p < end) {
		if (*p != ':' || p + 1 == end)
			return al_err_set(err, AL_EINVAL, "%s: bad text after the host", what);
		for (const char *c = p + 1; c < end; c++) {
			if (*c < '0' || *c > '9' ||
			    (v = v * 10 + (unsigned long)(*c - '0')) > 65535)
				return al_err_set(err, AL_EINVAL, "%s: bad port", what);
		}
		if (v == 0)
			return al_err_set(err, AL_EINVAL, "%s: port 0", what);
		*port = (unsigned)v;
	}
	memcpy(host, h, (size_t)(he - h));
	host[he - h] = '\0';
	return AL_OK;
}

static int dec_input(const msgpack_object *m, const char *what, struct al_input *in,
		     struct al_err *err)
{
	char name[64];
	char *sha = NULL;
	char *unpack = NULL;
	bool git = false;
	int rc;

	if ((rc = al_mp_want(m, MSGPACK_OBJECT_MAP, what, err)))
		return rc;
	for (uint32_t k = 0; k < m->via.map.size; k++) {
		const msgpack_object *key = &m->via.map.ptr[k].key;
		const msgpack_object *val = &m->via.map.ptr[k].val;

		if (al_mp_key_is(key, "url") && !in->url && !git) {
			snprintf(name, sizeof(name), "%s.url", what);
			rc = al_mp_get_text(val, name, AL_INPUT_URL_MAX, &in->url, err);
		} else if (al_mp_key_is(key, "sha256") && !sha) {
			snprintf(name, sizeof(name), "%s.sha256", what);
			rc = al_mp_get_text(val, name, 64, &sha, err);
		} else if (al_mp_key_is(key, "path") && !in->path) {
			snprintf(name, sizeof(name), "%s.path", what);
			rc = al_mp_get_text(val, name, AL_PATH_MAX, &in->path, err);
		} else if (al_mp_key_is(key, "unpack") && !unpack) {
			snprintf(name, sizeof(name), "%s.unpack", what);
			rc = al_mp_get_text(val, name, 8, &unpack, err);
		} else if (al_mp_key_is(key, "git") && !git) {
			snprintf(name, sizeof(name), "%s.git", what);
			git = true;
			rc = in->url ? AL_OK : dec_git(val, name, in, err);
		} else {
			rc = al_err_set(err, AL_EINVAL,
					"%s: unknown or repeated field (url, sha256, path, unpack; "
					"or git, path)",
					what);
		}
		if (rc)
			goto out_strings;
	}
	if (git) {
		in->unpack = AL_UNPACK_GIT;
		rc = sha || unpack || !in->ref
			 ? al_err_set(err, AL_EINVAL,
				      "%s: a git input takes git {url, ref} and path only (no url, "
				      "sha256 or unpack beside git)",
				      what)
			 : AL_OK;
		goto out_strings;
	}
	rc = al_err_set(err, AL_EINVAL, "%s.sha256: missing: 64 hex digits of the bytes", what);
	if (sha) {
		snprintf(in->sha256, sizeof(in->sha256), "%s", sha);
		rc = AL_OK;
	}
	in->unpack = AL_UNPACK_NONE;
	for (int u = 0; !rc && unpack && u <= 3; u++) {
		if (u == 3) /* git is not an unpack value: it is the input's kind */
			rc = al_err_set(err, AL_EINVAL, "%s.unpack: \"%s\": one of tar, zip, none",
					what, unpack);
		else if (!strcmp(unpack, unpack_names[u]))
			in->unpack = (enum al_unpack)u, unpack = NULL;
	}
out_strings:
	free(sha);
	free(unpack);
	return rc;
}

int al_inputs_decode(const msgpack_object *v, struct al_job *job, struct al_err *err)
{
	char what[32];
	int rc;

	if ((rc = al_mp_want(v, MSGPACK_OBJECT_ARRAY, "inputs", err)))
		return rc;
	if (v->via.array.size > AL_INPUTS_MAX)
		return al_err_set(err, AL_EINVAL, "inputs: %u entries, at most %d",
				  v->via.array.size, AL_INPUTS_MAX);
	if (!v->via.array.size)
		return AL_OK;
	if (!(job->inputs = calloc(v->via.array.size, sizeof(*job->inputs))))
		return al_err_set(err, AL_ENOMEM, "inputs: out of memory");
	for (uint32_t i = 0; i < v->via.array.size; i++) {
		snprintf(what, sizeof(what), "inputs[%u]", i);
		job->ninputs++;
		if ((rc = dec_input(&v->via.array.ptr[i], what, &job->inputs[i], err)))
			return rc;
	}
	return AL_OK;
}

/* a is b, or a directory above it ("." is above everything) */
static bool covers(const char *a, const char *b)
{
	size_t n = strlen(a);

	return !strcmp(a, ".") || !strcmp(a, b) || (!strncmp(a, b, n) && b[n] == '/');
}

int al_inputs_validate(const struct al_job *job, struct al_err *err)
{
	char what[48];
	int rc, https;
	unsigned port;
	char host[256];

	if (job->ninputs > AL_INPUTS_MAX)
		return al_err_set(err, AL_EINVAL, "inputs: %zu entries, at most %d", job->ninputs,
				  AL_INPUTS_MAX);
	if (job->ninputs && (job->session || job->ntests))
		return al_err_set(err, AL_EINVAL,
				  "inputs: not taken by a %s (give its files instead)",
				  job->session ? "session" : "grading job");
	for (size_t i = 0; i < job->ninputs; i++) {
		const struct al_input *in = &job->inputs[i];

		bool git = in->unpack == AL_UNPACK_GIT;

		snprintf(what, sizeof(what), git ? "inputs[%zu].git.url" : "inputs[%zu].url", i);
		if (!in->url)
			return al_err_set(err, AL_EINVAL, "%s: missing", what);
		if ((rc =
			 al_input_url_parse(what, in->url, host, sizeof(host), &port, &https, err)))
			return rc;
		if (git && (!in->ref || !al_git_ref_ok(in->ref)))
			return al_err_set(err, AL_EINVAL,
					  "inputs[%zu].git.ref: \"%.80s\": a branch, a tag, a full "
					  "ref (refs/pull/7/head) or a 40-hex commit id: letters, "
					  "digits and \"._/-\", no \"..\"",
					  i, in->ref ? in->ref : "");
		if (!git &&
		    (strlen(in->sha256) != 64 || strspn(in->sha256, "0123456789abcdef") != 64))
			return al_err_set(err, AL_EINVAL,
					  "inputs[%zu].sha256: \"%.70s\": 64 lowercase hex digits "
					  "(sha256sum's output)",
					  i, in->sha256);
		snprintf(what, sizeof(what), "inputs[%zu].path", i);
		if (!in->path)
			return al_err_set(err, AL_EINVAL,
					  "%s: missing: where it goes in the work directory (\".\" "
					  "for an archive's top)",
					  what);
		if (strcmp(in->path, ".") || in->unpack == AL_UNPACK_NONE)
			if ((rc = al_check_rel_path(what, in->path, err)))
				return rc;
		/* an archive at the top (".") may share directories with the
		 * rest: a clash of entries is found as it unpacks */
		if (!strcmp(in->path, "."))
			continue;
		for (size_t j = 0; j < job->nfiles; j++)
			if (covers(in->path, job->files[j].path) ||
			    covers(job->files[j].path, in->path))
				return al_err_set(err, AL_EINVAL,
						  "%s: \"%s\" meets files[%zu] \"%s\"", what,
						  in->path, j, job->files[j].path);
		for (size_t j = 0; j < i; j++)
			if (strcmp(job->inputs[j].path, ".") &&
			    (covers(in->path, job->inputs[j].path) ||
			     covers(job->inputs[j].path, in->path)))
				return al_err_set(err, AL_EINVAL,
						  "%s: \"%s\" meets inputs[%zu] \"%s\"", what,
						  in->path, j, job->inputs[j].path);
	}
	return AL_OK;
}

int al_inputs_pack(msgpack_packer *pk, const struct al_input *in, size_t n)
{
	if (msgpack_pack_array(pk, n))
		return AL_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (in[i].unpack == AL_UNPACK_GIT) {
			if (msgpack_pack_map(pk, 2) || al_mp_pack_str(pk, "git") ||
			    msgpack_pack_map(pk, 2) || al_mp_pack_kv_str(pk, "url", in[i].url) ||
			    al_mp_pack_kv_str(pk, "ref", in[i].ref) ||
			    al_mp_pack_kv_str(pk, "path", in[i].path))
				return AL_ENOMEM;
		} else if (msgpack_pack_map(pk, 4) || al_mp_pack_kv_str(pk, "url", in[i].url) ||
			   al_mp_pack_kv_str(pk, "sha256", in[i].sha256) ||
			   al_mp_pack_kv_str(pk, "path", in[i].path) ||
			   al_mp_pack_kv_str(pk, "unpack", al_unpack_name(in[i].unpack)))
			return AL_ENOMEM;
	return 0;
}

void al_inputs_free(struct al_input *in, size_t n)
{
	for (size_t i = 0; in && i < n; i++) {
		free(in[i].url);
		free(in[i].ref);
		free(in[i].path);
	}
	free(in);
}
