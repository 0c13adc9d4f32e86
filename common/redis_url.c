/* redis_url.c - parsing Redis addresses (see redis_url.h). */
#include "redis_url.h"

#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int copy(char *dst, size_t cap, const char *src, size_t n)
{
	if (n >= cap)
		return AL_EINVAL;
	memcpy(dst, src, n);
	dst[n] = '\0';
	return 0;
}

static int query(struct al_redis_url *u, const char *q, struct al_err *err)
{
	while (q && *q) {
		const char *amp = strchr(q, '&');
		size_t n = amp ? (size_t)(amp - q) : strlen(q);
		const char *eq = memchr(q, '=', n);
		size_t kn = eq ? (size_t)(eq - q) : n, vn = eq ? n - kn - 1 : 0;
		char v[256];

		if (!eq || copy(v, sizeof(v), eq + 1, vn))
			return al_err_set(err, AL_EINVAL,
					  "redis url: bad query parameter near \"%.*s\"", (int)n,
					  q);
		if (kn == 4 && !strncmp(q, "user", 4)) {
			if (copy(u->user, sizeof(u->user), v, vn))
				return al_err_set(err, AL_EINVAL, "redis url: user too long");
		} else if (kn == 8 && !strncmp(q, "password", 8)) {
			if (copy(u->password, sizeof(u->password), v, vn))
				return al_err_set(err, AL_EINVAL, "redis url: password too long");
		} else if (kn == 2 && !strncmp(q, "db", 2)) {
			u->db = atoi(v);
		} else if ((kn == 12 && !strncmp(q, "min_replicas", 12)) ||
			   (kn == 18 && !strncmp(q, "replica_timeout_ms", 18))) {
			char *end;
			long num = strtol(v, &end, 10);

			if (end == v || *end || num < (kn == 12 ? 0 : 1) || num > 600000)
				return al_err_set(err, AL_EINVAL,
						  "redis url: %.*s: expected a number, %s..600000",
						  (int)kn, q, kn == 12 ? "0" : "1");
			if (kn == 12)
				u->min_replicas = (int)num;
			else
				u->replica_timeout_ms = (int)num;
		} else if (u->nsentinels && kn == 13 && !strncmp(q, "sentinel_user", 13)) {
			if (copy(u->sentinel_user, sizeof(u->sentinel_user), v, vn))
				return al_err_set(err, AL_EINVAL, "redis url: user too long");
		} else if (u->nsentinels && kn == 17 && !strncmp(q, "sentinel_password", 17)) {
			if (copy(u->sentinel_password, sizeof(u->sentinel_password), v, vn))
				return al_err_set(err, AL_EINVAL, "redis url: password too long");
		} else {
			return al_err_set(
			    err, AL_EINVAL,
			    "redis url: unknown parameter \"%.*s\" (use user, password, "
			    "db, min_replicas, replica_timeout_ms%s)",
			    (int)kn, q, u->nsentinels ? ", sentinel_user, sentinel_password" : "");
		}
		q = amp ? amp + 1 : NULL;
	}
	return AL_OK;
}

/* [user:]password@ at *p (the last '@' before end): taken, *p moved past it. */
static int credentials(const char **p, const char *end, struct al_redis_url *u, struct al_err *err)
{
	const char *at = memrchr(*p, '@', (size_t)(end - *p));

	if (!at)
		return AL_OK;
	{
		const char *colon = memchr(*p, ':', (size_t)(at - *p));

		if (colon) {
			if (copy(u->user, sizeof(u->user), *p, (size_t)(colon - *p)) ||
			    copy(u->password, sizeof(u->password), colon + 1,
				 (size_t)(at - colon - 1)))
				return al_err_set(err, AL_EINVAL,
						  "redis url: credentials too long");
		} else if (copy(u->password, sizeof(u->password), *p, (size_t)(at - *p))) {
			return al_err_set(err, AL_EINVAL, "redis url: password too long");
		}
	}
	*p = at + 1;
	return AL_OK;
}

/* A port after ':' at s (1..65535); -1 when there is none valid. */
static long port_at(const char *s, const char **end)
{
	char *e;
	long port = strtol(s, &e, 10);

	*end = e;
	return e == s || port < 1 || port > 65535 ? -1 : port;
}

/* redis+sentinel://[creds@]h1[:p1],h2[:p2],.../master[/db][?query] */
static int parse_sentinel(const char *url, const char *p, struct al_redis_url *u,
			  struct al_err *err)
{
	const char *slash;
	size_t n;

	if (credentials(&p, p + strcspn(p, "/"), u, err))
		return AL_EINVAL;
	if (!(slash = strchr(p, '/')))
		return al_err_set(err, AL_EINVAL,
				  "redis url: \"%s\": expected redis+sentinel://host:port,.../"
				  "master: no master name",
				  url);
	while (p < slash) {
		const char *comma = memchr(p, ',', (size_t)(slash - p)),
			   *end = comma ? comma : slash;
		const char *colon = memchr(p, ':', (size_t)(end - p)), *after;
		long port = 26379;

		if (u->nsentinels == AL_SENTINELS_MAX)
			return al_err_set(err, AL_EINVAL, "redis url: more than %d sentinels",
					  AL_SENTINELS_MAX);
		if (colon && ((port = port_at(colon + 1, &after)) < 0 || after != end))
			return al_err_set(err, AL_EINVAL, "redis url: \"%s\": bad sentinel port",
					  url);
		n = (size_t)((colon ? colon : end) - p);
		if (n == 0 ||
		    copy(u->sentinels[u->nsentinels].host, sizeof(u->sentinels[0].host), p, n))
			return al_err_set(err, AL_EINVAL, "redis url: \"%s\": empty sentinel host",
					  url);
		u->sentinels[u->nsentinels++].port = (int)port;
		p = comma ? comma + 1 : slash;
	}
	if (!u->nsentinels)
		return al_err_set(err, AL_EINVAL, "redis url: \"%s\": no sentinel", url);
	p = slash + 1;
	n = strcspn(p, "/?");
	if (n == 0 || copy(u->master, sizeof(u->master), p, n))
		return al_err_set(err, AL_EINVAL, "redis url: \"%s\": missing master name", url);
	p += n;
	if (*p == '/') {
		u->db = atoi(p + 1);
		p += strcspn(p, "?");
	}
	u->host[0] = '\0'; /* until a sentinel names it */
	return *p == '?' ? query(u, p + 1, err) : AL_OK;
}

static int parse(const char *url, struct al_redis_url *u, struct al_err *err)
{
	const char *p;

	memset(u, 0, sizeof(*u));
	u->port = 6379;
	u->replica_timeout_ms = 1000;
	if (!url || !*url)
		return al_err_set(err, AL_EINVAL, "redis url: empty");
	if (url[0] == '/' || !strncmp(url, "unix://", 7)) {
		const char *path = url[0] == '/' ? url : url + 7;
		const char *q = strchr(path, '?');
		size_t n = q ? (size_t)(q - path) : strlen(path);

		if (n == 0 || path[0] != '/' || copy(u->path, sizeof(u->path), path, n))
			return al_err_set(err, AL_EINVAL,
					  "redis url: \"%s\": expected unix:///absolute/path.sock",
					  url);
		return query(u, q ? q + 1 : NULL, err);
	}
	if (!strncmp(url, "redis+sentinel://", 17))
		return parse_sentinel(url, url + 17, u, err);
	if (strncmp(url, "redis://", 8))
		return al_err_set(err, AL_EINVAL,
				  "redis url: \"%s\": expected redis://host:port, "
				  "redis+sentinel://host:port,.../master or unix:///path.sock",
				  url);
	p = url + 8;
	if (credentials(&p, p + strlen(p), u, err))
		return AL_EINVAL;
	{
		size_t n = strcspn(p, ":/?");
		const char *rest = p + n;

		if (n == 0 || copy(u->host, sizeof(u->host), p, n))
			return al_err_set(err, AL_EINVAL, "redis url: \"%s\": missing host", url);
		if (*rest == ':') {
			const char *end;
			long port = port_at(rest + 1, &end);

			if (port < 0)
				return al_err_set(err, AL_EINVAL, "redis url: \"%s\": bad port",
						  url);
			u->port = (int)port;
			rest = end;
		}
		if (*rest == '/') {
			u->db = atoi(rest + 1);
			rest += strcspn(rest, "?");
		}
		if (*rest == '?')
			return query(u, rest + 1, err);
		if (*rest)
			return al_err_set(err, AL_EINVAL, "redis url: \"%s\": unexpected \"%s\"",
					  url, rest);
	}
	return AL_OK;
}

const char *al_redis_url_where(const struct al_redis_url *u, char *buf, size_t cap)
{
	if (u->nsentinels && !u->host[0])
		snprintf(buf, cap, "master %s of sentinel %s:%d", u->master, u->sentinels[0].host,
			 u->sentinels[0].port);
	else if (u->path[0])
		snprintf(buf, cap, "%s", u->path);
	else
		snprintf(buf, cap, "%s:%d", u->host, u->port);
	return buf;
}

int al_redis_url_parse(const char *url, struct al_redis_url *u, struct al_err *err)
{
	int rc = parse(url, u, err);

	if (rc) { /* the error quotes the URL: never with its password */
		char shown[sizeof(err->msg)];

		al_log_redact(err->msg, shown, sizeof(shown));
		memcpy(err->msg, shown, sizeof(shown));
	}
	return rc;
}
