/* proxy_relay.c - relaying a connected tunnel: the first bytes, then
 * each direction spliced through a pipe with backpressure, counting bytes,
 * a response teed into the cache, the idle timer. */
#include "proxy_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/clock.h"

/* Move what src has into the pipe and from the pipe to dst, as far as both
 * take it now; then wait for whichever is the holdup. */
static void dir_pump(struct dir *d)
{
	struct tunnel *t = d->t;
	struct wk_proxy *e = t->e;

	for (;;) {
		if (d->inpipe) {
			ssize_t w = splice(d->pipe[0], NULL, d->dst, NULL, d->inpipe,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

			if (w < 0 && errno == EAGAIN) {
				event_del(d->rd);
				event_add(d->wr, NULL);
				return;
			}
			if (w <= 0) {
				px_tunnel_end(t, true, NULL);
				return;
			}
			d->inpipe -= (size_t)w;
			continue;
		}
		if (d->eof) {
			shutdown(d->dst, SHUT_WR);
			event_del(d->rd);
			event_del(d->wr);
			if (t->d[0].eof && t->d[1].eof && !t->d[0].inpipe && !t->d[1].inpipe)
				px_tunnel_end(t, true, NULL);
			return;
		}
		{
			size_t room = RELAY_CHUNK;
			ssize_t r;

			if (e->max_bytes && e->used >= e->max_bytes) {
				snprintf(t->why, sizeof(t->why),
					 "%s; cut: the job's max_bytes of %llu reached",
					 e->rules[t->rule].text, (unsigned long long)e->max_bytes);
				px_tunnel_end(t, true, NULL);
				return;
			}
			if (e->max_bytes && e->max_bytes - e->used < room)
				room = (size_t)(e->max_bytes - e->used);
			r = splice(d->src, NULL, d->pipe[1], NULL, room,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (r < 0 && errno == EAGAIN) {
				event_del(d->wr);
				event_add(d->rd, NULL);
				return;
			}
			if (r < 0) {
				px_tunnel_end(t, true, NULL);
				return;
			}
			if (r == 0) {
				d->eof = true;
				continue;
			}
			d->inpipe += (size_t)r;
			if (t->fill && d == &t->d[1])
				px_fill_tee(t, d->pipe[0], (size_t)r);
			*d->count += (uint64_t)r;
			e->used += (uint64_t)r;
			t->last_ms = al_mono_ms();
		}
	}
}

static void on_dir(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	dir_pump(arg);
}

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;
	struct timeval tv = {1, 0};

	(void)fd;
	(void)what;
	if (al_mono_ms() - t->last_ms >= t->e->idle_ms) {
		snprintf(t->why + strlen(t->why), sizeof(t->why) - strlen(t->why),
			 "; closed: idle %llu ms", (unsigned long long)t->e->idle_ms);
		px_tunnel_end(t, true, NULL);
		return;
	}
	evtimer_add(t->idle_ev, &tv);
}

/* Relaying from now on: closed when silent both ways for idle_ms (the
 * tunnel ended when the timer cannot be made). */
void px_idle_start(struct tunnel *t)
{
	struct timeval tv = {1, 0};

	t->last_ms = al_mono_ms();
	if (!(t->idle_ev = evtimer_new(t->e->base, on_idle, t))) {
		snprintf(t->why + strlen(t->why), sizeof(t->why) - strlen(t->why),
			 "; closed: the proxy could not relay (out of memory)");
		px_tunnel_end(t, true, NULL);
		return;
	}
	evtimer_add(t->idle_ev, &tv);
}

/* Connected: the first bytes (the 200 of a CONNECT, or the rewritten head
 * and whatever the client sent after it), then the sockets leave their
 * bufferevents and each direction is spliced. */
void px_start_relay(struct tunnel *t)
{
	struct evbuffer *extra = bufferevent_get_input(t->in);
	int fin = dup(bufferevent_getfd(t->in)), fout = dup(bufferevent_getfd(t->out));
	bool ok = fin >= 0 && fout >= 0;

	t->relaying = true;
	snprintf(t->why, sizeof(t->why), "%s", t->e->rules[t->rule].text);
	if (ok && t->connect) {
		if (!t->established) /* else proxy_tls.c sent it before the first byte */
			ok = px_write_all(fin, PX_ESTABLISHED, sizeof(PX_ESTABLISHED) - 1);
	} else if (ok) {
		size_t n = evbuffer_get_length(t->fwd);

		t->up += n;
		t->e->used += n;
		ok = px_write_all(fout, evbuffer_pullup(t->fwd, -1), n);
		if (ok && !evbuffer_get_length(extra))
			px_fill_start(t); /* a GET with no body: its response may be kept */
	}
	if (ok && evbuffer_get_length(extra)) {
		size_t n = evbuffer_get_length(extra);

		t->up += n;
		t->e->used += n;
		ok = px_write_all(fout, evbuffer_pullup(extra, -1), n);
	}
	bufferevent_free(t->in);
	bufferevent_free(t->out);
	t->in = t->out = NULL;
	t->spliced = true;
	t->d[0] = (struct dir){t, fin, fout, {-1, -1}, 0, false, NULL, NULL, &t->up};
	t->d[1] = (struct dir){t, fout, fin, {-1, -1}, 0, false, NULL, NULL, &t->down};
	for (int i = 0; ok && i < 2; i++) {
		struct dir *d = &t->d[i];

		ok = !pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) &&
		     (d->rd = event_new(t->e->base, d->src, EV_READ | EV_PERSIST, on_dir, d)) &&
		     (d->wr = event_new(t->e->base, d->dst, EV_WRITE | EV_PERSIST, on_dir, d));
		if (ok)
			fcntl(d->pipe[1], F_SETPIPE_SZ, (int)RELAY_CHUNK);
	}
	if (!ok) {
		snprintf(t->why + strlen(t->why), sizeof(t->why) - strlen(t->why),
			 "; closed: the proxy could not relay (out of memory)");
		px_tunnel_end(t, true, NULL);
		return;
	}
	px_idle_start(t);
	if (!t->idle_ev)
		return;
	event_add(t->d[0].rd, NULL);
	event_add(t->d[1].rd, NULL);
}
