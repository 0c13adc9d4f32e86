/* proxy_conn.c - connecting a tunnel: the name resolved, each address
 * checked against the rules (internal ones only by a range rule), served
 * from the cache, ended with TLS (through the egress's TLS ops), or
 * connected, in turn. */
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

static void on_connect(struct bufferevent *bev, short what, void *arg)
{
	struct tunnel *t = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		px_start_relay(t);
		return;
	}
	px_connect_failed(t);
}

void px_connect_failed(struct tunnel *t)
{
	snprintf(t->why, sizeof(t->why), "%s: connect failed", t->addr);
	bufferevent_free(t->out);
	t->out = NULL;
	t->cur = t->cur->ai_next;
	px_try_next(t);
}

void px_try_next(struct tunnel *t)
{
	for (; t->cur; t->cur = t->cur->ai_next) {
		const struct sockaddr *sa = t->cur->ai_addr;
		int range = al_egress_match_range(t->e->rules, t->e->nrules, sa, t->port);
		bool internal = al_addr_internal(sa, t->addr, sizeof(t->addr));

		if (t->literal ? range < 0 : internal && range < 0) {
			snprintf(t->why, sizeof(t->why),
				 t->literal
				     ? "%s: no range rule names this address and port"
				     : "%s: an internal address (loopback, private, link-local, "
				       "metadata...) that no range rule names",
				 t->addr);
			continue;
		}
		if (t->literal || internal)
			t->rule = range;
		if (t->intercept && !t->inner && t->e->tls->begin(t))
			return; /* the client's first byte decides (proxy_tls.c) */
		if (t->intercept && t->inner) {
			if (t->e->tls->connect(t))
				return;
			snprintf(t->why, sizeof(t->why), "%s: connect failed", t->addr);
			continue;
		}
		if (px_cache_serve(t)) { /* allowed now, as if connecting */
			px_tunnel_end(t, true, NULL);
			return;
		}
		if (!(t->out = bufferevent_socket_new(t->e->base, -1, BEV_OPT_CLOSE_ON_FREE)))
			break;
		bufferevent_setcb(t->out, NULL, NULL, on_connect, t);
		if (bufferevent_socket_connect(t->out, sa, (int)t->cur->ai_addrlen) == 0)
			return;
		bufferevent_free(t->out);
		t->out = NULL;
		snprintf(t->why, sizeof(t->why), "%s: connect failed", t->addr);
	}
	px_reply(t, 403, "Forbidden", t->why[0] ? t->why : "no address to connect to");
	px_tunnel_end(t, false, NULL);
}

static void resolved(struct tunnel *t, int code, struct evutil_addrinfo *res)
{
	if (code) {
		snprintf(t->why, sizeof(t->why), "cannot resolve %s: %s", t->host,
			 evutil_gai_strerror(code));
		px_reply(t, 502, "Bad Gateway", t->why);
		px_tunnel_end(t, false, NULL);
		return;
	}
	t->ai = t->cur = res;
	px_try_next(t);
}

static void on_resolved(int code, struct evutil_addrinfo *res, void *arg)
{
	struct tunnel *t = arg;

	if (code == EVUTIL_EAI_CANCEL)
		return;	    /* the tunnel is being freed */
	if (t->resolving) { /* answered before evdns_getaddrinfo returned */
		t->answered = true;
		t->sync_code = code;
		t->sync_res = res;
		return;
	}
	t->req = NULL;
	resolved(t, code, res);
}

void px_resolve(struct tunnel *t)
{
	struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	char port[8];

	snprintf(port, sizeof(port), "%u", t->port);
	if (t->literal)
		hints.ai_flags = EVUTIL_AI_NUMERICHOST;
	t->resolving = true;
	t->req = evdns_getaddrinfo(t->e->dns, t->host, port, &hints, on_resolved, t);
	t->resolving = false;
	if (t->answered) {
		t->req = NULL;
		resolved(t, t->sync_code, t->sync_res);
	} else if (!t->req) {
		resolved(t, EVUTIL_EAI_FAIL, NULL);
	}
}
