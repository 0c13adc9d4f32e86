/* proxy_cache.c - the egress proxy's cache (wk_proxy_set_cache): each
 * cacheable response of a tenant's jobs kept as a file, served to a later
 * GET of the same key while fresh, the least recently used out first. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proxy_int.h"

/* ---- the cache (wk_proxy_set_cache) ---- */

/* Each entry is the whole response as the server sent it, after a fixed
 * head: "AL1 <expiry, seconds since the epoch; 0: none>" padded to
 * CACHE_META bytes with a newline last. */
#define CACHE_META 32
#define FILL_STALE 3600 /* a .fill file this old is a dead proxy's: removed */

static bool cache_path(const struct wk_proxy *e, const char *name, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s", e->cache_dir, name);

	return n > 0 && (size_t)n < cap;
}

/* The entry in fd (size bytes) onto out: its head as stored but with
 * "Connection: close" (the proxy closes after it, whatever the server
 * said then), then its body from the file (taken: closed with out's data).
 * *bytes: what goes to the client. 0, or -1 (fd still the caller's). */
static int serve_entry(struct evbuffer *out, int fd, off_t size, uint64_t *bytes)
{
	char head[HEAD_MAX + 1], *blank, *save = NULL;
	ssize_t got = pread(fd, head, HEAD_MAX, CACHE_META);
	struct evbuffer *h;
	off_t body;

	if (got <= 0)
		return AL_ESYS;
	head[got] = '\0';
	if (!(blank = strstr(head, "\r\n\r\n")) || !(h = evbuffer_new()))
		return AL_ESYS;
	body = CACHE_META + (blank + 4 - head);
	blank[2] = '\0';
	for (char *l = strtok_r(head, "\r\n", &save); l; l = strtok_r(NULL, "\r\n", &save))
		if (strncasecmp(l, "connection:", 11) && strncasecmp(l, "keep-alive:", 11))
			evbuffer_add_printf(h, "%s\r\n", l);
	evbuffer_add_printf(h, "Connection: close\r\n\r\n");
	*bytes = evbuffer_get_length(h) + (uint64_t)(size - body);
	if (evbuffer_add_buffer(out, h) || evbuffer_add_file(out, fd, body, size - body)) {
		evbuffer_free(h);
		return AL_ESYS;
	}
	evbuffer_free(h);
	return 0;
}

/* Serve t's request from the cache, once the address it resolved to passed
 * the rules: true when it was (the reply is queued on the client's side),
 * false when there is no fresh entry. */
bool px_cache_serve(struct tunnel *t)
{
	struct wk_proxy *e = t->e;
	char path[4096], meta[CACHE_META + 1] = {0};
	struct stat st;
	unsigned long long expiry;
	int fd;

	if (!t->ckey[0] || !cache_path(e, t->ckey, path, sizeof(path)) ||
	    (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return false;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= CACHE_META ||
	    pread(fd, meta, CACHE_META, 0) != CACHE_META ||
	    sscanf(meta, "AL1 %llu", &expiry) != 1 ||
	    (expiry && expiry <= (unsigned long long)time(NULL))) {
		close(fd);
		unlink(path); /* stale or not ours: fetched again */
		return false;
	}
	futimens(fd, NULL); /* recently used: evicted last */
	if (serve_entry(bufferevent_get_output(t->in), fd, st.st_size, &t->down)) {
		close(fd);
		return false;
	}
	t->hit = true;
	snprintf(t->why, sizeof(t->why), "%s; served from the cache", e->rules[t->rule].text);
	e->hits++;
	e->hit_bytes += t->down;
	return true;
}

void px_fill_drop(struct tunnel *t)
{
	struct fill *f = t->fill;

	if (!f)
		return;
	if (f->fd >= 0) {
		close(f->fd);
		unlink(f->tmp);
	}
	for (int i = 0; i < 2; i++)
		if (f->pipe[i] >= 0)
			close(f->pipe[i]);
	free(f);
	t->fill = NULL;
}

/* A cacheable request is being relayed: its response goes to a file too. */
void px_fill_start(struct tunnel *t)
{
	struct fill *f;
	char meta[CACHE_META];

	if (!t->ckey[0] || !(f = calloc(1, sizeof(*f))))
		return;
	f->fd = f->pipe[0] = f->pipe[1] = -1;
	t->fill = f;
	memset(meta, ' ', sizeof(meta));
	meta[CACHE_META - 1] = '\n';
	if (!cache_path(t->e, ".fill.XXXXXX", f->tmp, sizeof(f->tmp)) ||
	    (f->fd = mkostemp(f->tmp, O_CLOEXEC)) < 0 || pipe2(f->pipe, O_NONBLOCK | O_CLOEXEC) ||
	    write(f->fd, meta, sizeof(meta)) != (ssize_t)sizeof(meta)) {
		px_fill_drop(t);
		return;
	}
	fcntl(f->pipe[1], F_SETPIPE_SZ, (int)RELAY_CHUNK);
}

/* n bytes just came from the server into src_pipe (which held none
 * before): the same bytes into the fill's file, or the fill is dropped. */
void px_fill_tee(struct tunnel *t, int src_pipe, size_t n)
{
	struct fill *f = t->fill;
	ssize_t k = tee(src_pipe, f->pipe[1], n, SPLICE_F_NONBLOCK);

	f->bytes += n;
	if (k != (ssize_t)n || f->bytes > t->e->cache_max) {
		px_fill_drop(t);
		return;
	}
	while (k > 0) {
		ssize_t w = splice(f->pipe[0], NULL, f->fd, NULL, (size_t)k, SPLICE_F_MOVE);

		if (w <= 0) {
			px_fill_drop(t);
			return;
		}
		k -= w;
	}
}

/* n bytes at the front of buf just came from the server (an https
 * tunnel the proxy ended): the same bytes into the fill's file. */
void px_fill_add(struct tunnel *t, struct evbuffer *buf, size_t n)
{
	struct fill *f = t->fill;
	struct evbuffer_iovec v[16];
	struct evbuffer_ptr at;
	size_t left = n;

	f->bytes += n;
	if (f->bytes > t->e->cache_max) {
		px_fill_drop(t);
		return;
	}
	evbuffer_ptr_set(buf, &at, 0, EVBUFFER_PTR_SET);
	while (left) {
		int k = evbuffer_peek(buf, (ev_ssize_t)left, &at, v, 16);

		if (k <= 0) {
			px_fill_drop(t);
			return;
		}
		for (int i = 0; i < k && i < 16 && left; i++) {
			size_t l = v[i].iov_len < left ? v[i].iov_len : left;

			if (!px_write_all(f->fd, v[i].iov_base, l)) {
				px_fill_drop(t);
				return;
			}
			left -= l;
			evbuffer_ptr_set(buf, &at, l, EVBUFFER_PTR_ADD);
		}
	}
}

static bool header_is(const char *h, const char *name, const char **value)
{
	size_t l = strlen(name);

	if (strncasecmp(h, name, l) || h[l] != ':')
		return false;
	for (*value = h + l + 1; **value == ' ' || **value == '\t'; (*value)++)
		;
	return true;
}

/* Whether a cached response is served for now and until when (0: until
 * evicted): a 200 with a Content-Length that all came, no cookie, no Vary
 * past what the key holds, and a max-age, "immutable" or an artifact path.
 * head is NUL-terminated, hlen its bytes up to the blank line's end. */
static bool cacheable_response(const struct tunnel *t, char *head, size_t hlen, uint64_t total,
			       unsigned long long *expiry)
{
	unsigned long long length = 0, max_age = 0;
	bool have_length = false, have_age = false, immutable = false;
	char *save = NULL;

	if (strncmp(head, "HTTP/1.", 7) || strncmp(head + 8, " 200 ", 5))
		return false;
	for (char *h = strtok_r(head, "\r\n", &save); h; h = strtok_r(NULL, "\r\n", &save)) {
		const char *v;

		if (header_is(h, "Content-Length", &v)) {
			have_length = true;
			length = strtoull(v, NULL, 10);
		} else if (header_is(h, "Transfer-Encoding", &v) ||
			   header_is(h, "Set-Cookie", &v)) {
			return false;
		} else if (header_is(h, "Vary", &v)) {
			for (const char *p = v; *p;) {
				size_t l = strcspn(p, ", ");

				if (l && !(l == 6 && !strncasecmp(p, "accept", 6)) &&
				    !(l == 15 && !strncasecmp(p, "accept-encoding", 15)))
					return false;
				p += l + strspn(p + l, ", ");
			}
		} else if (header_is(h, "Cache-Control", &v)) {
			const char *m;

			if (strcasestr(v, "no-store") || strcasestr(v, "private") ||
			    strcasestr(v, "no-cache"))
				return false;
			immutable = strcasestr(v, "immutable") != NULL;
			if ((m = strcasestr(v, "max-age="))) {
				have_age = true;
				max_age = strtoull(m + 8, NULL, 10);
			}
		}
	}
	if (!have_length || hlen + length != total)
		return false; /* cut short, or more than it said */
	if (have_age && !immutable) {
		*expiry = max_age ? (unsigned long long)time(NULL) + max_age : 0;
		return max_age > 0;
	}
	*expiry = 0;
	return immutable || t->artifact;
}

struct entry {
	char name[80];
	struct timespec used;
	uint64_t bytes;
};

static int by_use(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	return x->used.tv_nsec < y->used.tv_nsec ? -1 : x->used.tv_nsec > y->used.tv_nsec;
}

/* The least recently used entries out until the cache holds cache_max;
 * dead proxies' fills out too. */
static void cache_evict(struct wk_proxy *e)
{
	DIR *d = opendir(e->cache_dir);
	struct entry *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t sum = 0;
	struct dirent *de;
	char path[4096];

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct stat st;
		bool fill = !strncmp(de->d_name, ".fill.", 6);

		if ((de->d_name[0] == '.' && !fill) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) || strlen(de->d_name) >= sizeof(v->name))
			continue;
		if (fill) {
			if (st.st_mtime + FILL_STALE < time(NULL))
				unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		if (n == cap) {
			struct entry *w = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));

			if (!w)
				break;
			v = w;
		}
		snprintf(v[n].name, sizeof(v[n].name), "%s", de->d_name);
		v[n].used = st.st_mtim;
		v[n].bytes = (uint64_t)st.st_size;
		sum += v[n++].bytes;
	}
	qsort(v, n, sizeof(*v), by_use);
	for (size_t i = 0; i < n && sum > e->cache_max; i++)
		if (cache_path(e, v[i].name, path, sizeof(path)) && !unlink(path))
			sum -= v[i].bytes;
	closedir(d);
	free(v);
}

/* The relay ended: a complete, cacheable response becomes the entry of
 * its key (one rename, so a reader sees the old entry or the new). */
void px_fill_end(struct tunnel *t)
{
	struct fill *f = t->fill;
	char head[HEAD_MAX + 1], path[4096], meta[CACHE_META + 1];
	ssize_t got;
	char *blank;
	unsigned long long expiry = 0;

	if (!f)
		return;
	got = pread(f->fd, head, HEAD_MAX, CACHE_META);
	if (got <= 0) {
		px_fill_drop(t);
		return;
	}
	head[got] = '\0';
	if ((blank = strstr(head, "\r\n\r\n")))
		blank[2] = '\0'; /* the head alone */
	if (!blank || !cacheable_response(t, head, (size_t)(blank + 4 - head), f->bytes, &expiry) ||
	    !cache_path(t->e, t->ckey, path, sizeof(path))) {
		px_fill_drop(t);
		return;
	}
	memset(meta, ' ', CACHE_META);
	memcpy(meta, "AL1 ", 4);
	snprintf(meta + 4, 21, "%020llu", expiry);
	meta[24] = ' ';
	meta[CACHE_META - 1] = '\n';
	if (pwrite(f->fd, meta, CACHE_META, 0) != CACHE_META || rename(f->tmp, path)) {
		px_fill_drop(t);
		return;
	}
	close(f->fd);
	f->fd = -1; /* renamed: not unlinked by the drop */
	px_fill_drop(t);
	t->e->stored++;
	snprintf(t->why + strlen(t->why), sizeof(t->why) - strlen(t->why), "; stored in the cache");
	cache_evict(t->e);
}

int wk_proxy_set_cache(struct wk_proxy *e, const char *dir, uint64_t max_bytes)
{
	free(e->cache_dir);
	if (!(e->cache_dir = strdup(dir)))
		return AL_ESYS;
	e->cache_max = max_bytes;
	return 0;
}
