/* fetcher.c - what airlock-inputs' parts share (fetcher.h): the run's
 * state, its one answer and the one way out (fx_die), the tier's rules for
 * a URL and an address, and the host's cache of inputs by hash (a size
 * cap, least recently used out first). main.c (URL inputs, the pack) and
 * git.c (git inputs) call down into it; nothing here calls up. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../common/egress.h"
#include "../../proto/inputs.h"
#include "fetcher.h"

struct fetcher fx;

/* The one answer, then exit. */
void __attribute__((noreturn))
fx_answer(bool ok, const char *status, const char *msg, uint64_t pack_bytes)
{
	json_t *o = json_object(), *a = json_array();

	json_object_set_new(o, "ok", json_boolean(ok));
	if (!ok) {
		json_object_set_new(o, "status", json_string(status));
		json_object_set_new(o, "error", json_string(msg));
		if (fx.cache_full)
			json_object_set_new(o, "cache_full", json_true());
	}
	for (size_t i = 0; ok && i < fx.nin; i++) {
		json_t *e = json_object();

		json_object_set_new(e, "url", json_string(fx.in[i].url));
		if (fx.in[i].unpack == AL_UNPACK_GIT) {
			json_object_set_new(e, "ref", json_string(fx.in[i].ref));
			json_object_set_new(e, "commit", json_string(fx.in[i].commit));
		} else {
			json_object_set_new(e, "sha256", json_string(fx.in[i].sha256));
		}
		json_object_set_new(e, "bytes", json_integer((json_int_t)fx.in[i].bytes));
		json_object_set_new(e, "cached", json_boolean(fx.in[i].cached));
		json_array_append_new(a, e);
	}
	json_object_set_new(o, "inputs", a);
	json_object_set_new(o, "pack_bytes", json_integer((json_int_t)pack_bytes));
	json_dumpf(o, stdout, JSON_COMPACT | JSON_ENSURE_ASCII);
	fputc('\n', stdout);
	fflush(stdout);
	exit(ok ? 0 : 1);
}

void fx_die(const char *status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (fx.out)
		unlink(fx.out);
	if (fx.part[0])
		unlink(fx.part);
	if (fx.on_die) /* a git run's directory (git.c) */
		fx.on_die();
	fx_answer(false, status, msg, 0);
}

/* ---- the rules ---- */

bool fx_addr_ok(struct fetch *f, const struct sockaddr *sa)
{
	char text[64];
	bool internal = al_addr_internal(sa, text, sizeof(text));

	/* a name rule lets out a public address; anything internal, or a
	 * literal, needs a range rule holding it */
	if ((!internal && !f->literal) ||
	    al_egress_match_range(fx.rules, fx.nrules, sa, f->port) >= 0)
		return true;
	snprintf(f->refused, sizeof(f->refused),
		 "%s resolves to %s, %s address no egress rule of the tier names", f->host, text,
		 internal ? "an internal" : "an");
	return false;
}

/* Check url against the rules (the name's, or a range rule for a
 * literal, at the port), filling f's host and port. */
void fx_check_url(struct fetch *f, const char *what, const char *url, char *host, size_t cap)
{
	struct al_err err = {0};
	int https;
	struct sockaddr_storage ss = {0};

	if (al_input_url_parse(what, url, host, cap, &f->port, &https, &err))
		fx_die("rejected", "%s", err.msg);
	f->host = host;
	f->literal = inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1 ||
		     inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1;
	if (!f->literal && al_egress_match_name(fx.rules, fx.nrules, host, f->port) < 0)
		fx_die("rejected", "%s: %s:%u is not in the tier's egress rules", what, host,
		       f->port);
	/* a literal's range rule is checked on connect */
}

/* ---- the cache ---- */

bool fx_hex64(const char *s)
{
	return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

struct cache_entry {
	char name[65];
	time_t mtime;
	off_t size;
};

static int by_age(const void *a, const void *b)
{
	const struct cache_entry *x = a, *y = b;

	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Least recently used out until the cache holds at most cache_bytes
 * (what this run holds open stays readable). */
void fx_evict(void)
{
	DIR *d = opendir(fx.cache);
	struct cache_entry *e = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	struct dirent *de;
	struct stat st;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (!fx_hex64(de->d_name) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (n == cap && !(e = realloc(e, (cap = cap ? 2 * cap : 64) * sizeof(*e))))
			break;
		snprintf(e[n].name, sizeof(e[n].name), "%s", de->d_name);
		e[n].mtime = st.st_mtime;
		e[n].size = st.st_size;
		total += (uint64_t)st.st_size;
		n++;
	}
	if (e) {
		qsort(e, n, sizeof(*e), by_age);
		for (size_t i = 0; i < n && total > fx.cache_bytes; i++)
			if (!unlinkat(dirfd(d), e[i].name, 0))
				total -= (uint64_t)e[i].size;
	}
	free(e);
	closedir(d);
}

bool fx_cache_take(size_t i, const char *key)
{
	struct input *in = &fx.in[i];
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", fx.cache, key);
	if ((in->fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return false;
	if (fstat(in->fd, &st) || !S_ISREG(st.st_mode)) {
		close(in->fd);
		in->fd = -1;
		return false;
	}
	if ((uint64_t)st.st_size > fx.max_bytes)
		fx_die("rejected",
		       "inputs[%zu]: %llu bytes, more than the tier's "
		       "max_input_bytes (%llu)",
		       i, (unsigned long long)st.st_size, (unsigned long long)fx.max_bytes);
	futimens(in->fd, NULL); /* recently used */
	in->cached = true;
	in->bytes = (uint64_t)st.st_size;
	return true;
}

const char *fx_cache_part(size_t i)
{
	snprintf(fx.part, sizeof(fx.part), "%s/.part.%d.%zu", fx.cache, (int)getpid(), i);
	return fx.part;
}

void fx_cache_room_or_die(const char *what)
{
	struct statvfs v;
	unsigned long long room, size;

	if (statvfs(fx.cache, &v))
		return;
	room = (unsigned long long)v.f_bavail * v.f_frsize;
	size = (unsigned long long)v.f_blocks * v.f_frsize;
	if (room >= AL_INPUT_CACHE_ROOM_MIN)
		return;
	fx.cache_full = true;
	fx_die("sandbox_error",
	       "%s: the input cache %s is full: %llu of its file system's %llu bytes free (the "
	       "cache keeps at most --input-cache-bytes %llu): make room there",
	       what, fx.cache, room, size, (unsigned long long)fx.cache_bytes);
}

void fx_cache_put(size_t i, const char *key)
{
	struct input *in = &fx.in[i];
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", fx.cache, key);
	if (rename(fx.part, path))
		fx_die("sandbox_error", "inputs[%zu]: the cache: %s", i, strerror(errno));
	fx.part[0] = '\0';
	if ((in->fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		fx_die("sandbox_error", "inputs[%zu]: the cache: %s", i, strerror(errno));
	fx_evict();
}
