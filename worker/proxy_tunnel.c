/* proxy_tunnel.c - a tunnel's end: its transcript entry (or log line), its
 * cache fill kept or dropped, the client's side flushed, everything freed;
 * and the count of tunnels open in this process. */
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

unsigned px_tunnels_open;

static void record(struct tunnel *t)
{
	struct al_egress_conn c = {
	    .host = t->host[0] ? t->host : (char *)"?",
	    .port = t->port,
	    .addr = t->addr,
	    .allowed = t->allowed,
	    .why = t->why,
	    .up = t->up,
	    .down = t->down,
	    .ms = al_mono_ms() - t->t0,
	};

	if (t->e->kept[0]) {
		al_log("info", "egress",
		       "job=%s host=%s port=%u addr=%s allowed=%s up=%llu down=%llu ms=%llu "
		       "why=\"%s\"",
		       t->e->kept, c.host, c.port, c.addr[0] ? c.addr : "-",
		       c.allowed ? "yes" : "no", (unsigned long long)c.up,
		       (unsigned long long)c.down, (unsigned long long)c.ms, c.why);
		return;
	}
	if (al_result_add_egress(&t->e->log, &c))
		t->e->unlisted++;
}

void px_tunnel_free(struct tunnel *t)
{
	if (t->req)
		evdns_getaddrinfo_cancel(t->req); /* calls on_resolved with CANCEL */
	if (t->ai)
		evutil_freeaddrinfo(t->ai);
	if (t->fwd)
		evbuffer_free(t->fwd);
	if (t->out)
		bufferevent_free(t->out);
	if (t->in)
		bufferevent_free(t->in);
	for (int i = 0; t->spliced && i < 2; i++) {
		if (t->d[i].rd)
			event_free(t->d[i].rd);
		if (t->d[i].wr)
			event_free(t->d[i].wr);
		for (int k = 0; k < 2; k++)
			if (t->d[i].pipe[k] >= 0)
				close(t->d[i].pipe[k]);
		close(t->d[i].src); /* each socket once: d[1].src is d[0].dst */
	}
	if (t->idle_ev)
		event_free(t->idle_ev);
	if (t->e->tls)
		t->e->tls->free(t);
	px_fill_drop(t);
	if (t->counted) {
		t->e->open--;
		px_tunnels_open--;
	}
	*t->prev = t->next;
	if (t->next)
		t->next->prev = t->prev;
	free(t);
}

/* The client's side closes once what is queued for it (a reply, the end of
 * a response) has gone out. */
static void on_flushed(struct bufferevent *bev, void *arg)
{
	(void)bev;
	px_tunnel_free(arg);
}

static void on_flushed_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	px_tunnel_free(arg);
}

void px_tunnel_end(struct tunnel *t, bool allowed, const char *why)
{
	struct timeval linger = {5, 0};

	t->allowed = allowed && (t->relaying || t->hit);
	if (why)
		snprintf(t->why, sizeof(t->why), "%s", why);
	if (t->allowed)
		px_fill_end(t);
	px_fill_drop(t);
	record(t);
	if (t->req) {
		evdns_getaddrinfo_cancel(t->req);
		t->req = NULL;
	}
	if (t->out) {
		bufferevent_free(t->out);
		t->out = NULL;
	}
	if (!t->in || !evbuffer_get_length(bufferevent_get_output(t->in))) {
		px_tunnel_free(t);
		return;
	}
	bufferevent_setcb(t->in, NULL, on_flushed, on_flushed_event, t);
	bufferevent_setwatermark(t->in, EV_WRITE, 0, 0);
	bufferevent_set_timeouts(t->in, NULL, &linger);
	bufferevent_disable(t->in, EV_READ);
	bufferevent_enable(t->in, EV_WRITE);
	t->relaying = false;
	t->lingering = true;
}
