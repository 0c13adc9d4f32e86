/* redis_url.c - parsing Redis addresses (see redis_url.h). */
#include "redis_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int copy(char *dst, size_t cap, const char *src, size_t n)
{
	if (n >= cap)
		return -1;
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
		} else if (kn == 2 && !strncmp(q, "db", 2))
			u->db = atoi(v);
		else
			return al_err_set(
			    err, AL_EINVAL,
			    "redis url: unknown parameter \"%.*s\" (use user, password, db)",
			    (int)kn, q);
		q = amp ? amp + 1 : NULL;
	}
	return AL_OK;
}

int al_redis_url_parse(const char *url, struct al_redis_url *u, struct al_err *err)
{
	const char *p;

	memset(u, 0, sizeof(*u));
	u->port = 6379;
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
	if (strncmp(url, "redis://", 8))
		return al_err_set(
		    err, AL_EINVAL,
		    "redis url: \"%s\": expected redis://host:port or unix:///path.sock", url);
	p = url + 8;
	{
		const char *at = strrchr(p, '@');

		if (at) {
			const char *colon = memchr(p, ':', (size_t)(at - p));

			if (colon) {
				if (copy(u->user, sizeof(u->user), p, (size_t)(colon - p)) ||
				    copy(u->password, sizeof(u->password), colon + 1,
					 (size_t)(at - colon - 1)))
					return al_err_set(err, AL_EINVAL,
							  "redis url: credentials too long");
			} else if (copy(u->password, sizeof(u->password), p, (size_t)(at - p))) {
				return al_err_set(err, AL_EINVAL, "redis url: password too long");
			}
			p = at + 1;
		}
	}
	{
		size_t n = strcspn(p, ":/?");
		const char *rest = p + n;

		if (n == 0 || copy(u->host, sizeof(u->host), p, n))
			return al_err_set(err, AL_EINVAL, "redis url: \"%s\": missing host", url);
		if (*rest == ':') {
			char *end;
			long port = strtol(rest + 1, &end, 10);

			if (end == rest + 1 || port < 1 || port > 65535)
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
	if (u->path[0])
		snprintf(buf, cap, "%s", u->path);
	else
		snprintf(buf, cap, "%s:%d", u->host, u->port);
	return buf;
}
