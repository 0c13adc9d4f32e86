/* proxy.c - the egress proxy (proxy.h). One struct tunnel per client
 * connection: read the request head, decide by the rules, resolve, check
 * each address, connect, then relay both ways with backpressure, counting
 * bytes. Every tunnel ends in one transcript entry. */
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

/* ---- a new client connection ---- */

static void on_head(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	unsigned char probe[16];
	struct al_err err = {0};
	int rc;

	if ((rc = px_head_complete(t, in)) <= 0) {
		if (rc < 0)
			px_tunnel_end(t, false, "request head too long");
		return;
	}
	bufferevent_disable(bev, EV_READ);
	if (px_parse_head(t, in, &err)) {
		px_reply(t, 400, "Bad Request", err.msg);
		px_tunnel_end(t, false, err.msg);
		return;
	}
	t->literal =
	    inet_pton(AF_INET, t->host, probe) == 1 || inet_pton(AF_INET6, t->host, probe) == 1;
	if (!t->literal &&
	    (t->rule = al_egress_match_name(t->e->rules, t->e->nrules, t->host, t->port)) < 0) {
		snprintf(t->why, sizeof(t->why), "no rule allows %s:%u", t->host, t->port);
		px_reply(t, 403, "Forbidden", t->why);
		px_tunnel_end(t, false, NULL);
		return;
	}
	px_resolve(t);
}

static void on_head_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		px_tunnel_end(arg, false, "the client went before its request");
}

/* A client connection: its tunnel, reading the request head. */
/* Tunnels open in this process, and how many its descriptor budget holds. */
static unsigned tunnels_max;

void wk_proxy_set_fd_budget(unsigned fds)
{
	tunnels_max = fds / AL_EGRESS_FDS_PER_TUNNEL;
	if (fds && !tunnels_max)
		tunnels_max = 1;
}

static void take_client(struct wk_proxy *e, evutil_socket_t fd)
{
	struct tunnel *t = calloc(1, sizeof(*t));
	struct timeval head = {10, 0};

	if (!t || !(t->in = bufferevent_socket_new(e->base, fd, BEV_OPT_CLOSE_ON_FREE))) {
		evutil_closesocket(fd);
		free(t);
		e->unlisted++;
		return;
	}
	t->e = e;
	t->rule = -1;
	t->t0 = al_mono_ms();
	t->next = e->live;
	if (e->live)
		e->live->prev = &t->next;
	t->prev = &e->live;
	e->live = t;
	if (e->max_conns && e->conns >= e->max_conns) {
		snprintf(t->why, sizeof(t->why), "the job's max_connections of %u reached",
			 e->max_conns);
		px_reply(t, 403, "Forbidden", t->why);
		px_tunnel_end(t, false, NULL);
		return;
	}
	if (e->max_open && e->open >= e->max_open) {
		snprintf(t->why, sizeof(t->why), "the job's max_open of %u tunnels at once reached",
			 e->max_open);
		px_reply(t, 403, "Forbidden", t->why);
		px_tunnel_end(t, false, NULL);
		return;
	}
	if (tunnels_max && px_tunnels_open >= tunnels_max) {
		snprintf(t->why, sizeof(t->why),
			 "the worker's descriptors for tunnels are in use (%u open, all jobs); "
			 "try again",
			 px_tunnels_open);
		px_reply(t, 503, "Service Unavailable", t->why);
		px_tunnel_end(t, false, NULL);
		return;
	}
	e->conns++;
	e->open++;
	px_tunnels_open++;
	t->counted = true;
	bufferevent_setcb(t->in, on_head, NULL, on_head_event, t);
	bufferevent_set_timeouts(t->in, &head, NULL);
	bufferevent_enable(t->in, EV_READ | EV_WRITE);
}

/* A unix listener (a microVM's, egress_fwd.c): each connection carries one
 * guest connection's socket (SCM_RIGHTS with one byte), which becomes the
 * client; anything else, or nothing within HANDOFF_MS, is dropped. */
#define HANDOFF_MS 5000

struct handoff {
	struct wk_proxy *e;
	struct handoff *next, **prev;
	struct event *ev;
	int fd;
};

static void handoff_free(struct handoff *h)
{
	if (h->next)
		h->next->prev = h->prev;
	*h->prev = h->next;
	if (h->ev)
		event_free(h->ev);
	close(h->fd);
	free(h);
}

static void on_handoff(evutil_socket_t fd, short what, void *arg)
{
	struct handoff *h = arg;
	struct wk_proxy *e = h->e;
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	ssize_t n = -1;
	int got = -1;
	struct stat st;

	if (what & EV_READ) /* extra descriptors past one are closed by the kernel */
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0 && (what & EV_READ) && (errno == EAGAIN || errno == EINTR))
		return; /* the persistent event comes again */
	for (struct cmsghdr *c = n == 1 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&got, CMSG_DATA(c), sizeof(int));
	handoff_free(h);
	if (got >= 0 && (fstat(got, &st) || !S_ISSOCK(st.st_mode))) {
		close(got);
		got = -1;
	}
	if (got >= 0) {
		evutil_make_socket_nonblocking(got);
		take_client(e, got);
	}
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	struct wk_proxy *e = arg;
	struct handoff *h;
	struct timeval tv = {HANDOFF_MS / 1000, 0};

	(void)l;
	(void)len;
	if (sa->sa_family != AF_UNIX || e->unix_clients) {
		take_client(e, fd);
		return;
	}
	if (!(h = calloc(1, sizeof(*h)))) {
		evutil_closesocket(fd);
		return;
	}
	h->e = e;
	h->fd = fd;
	h->next = e->handoffs;
	if (e->handoffs)
		e->handoffs->prev = &h->next;
	h->prev = &e->handoffs;
	e->handoffs = h;
	if (!(h->ev = event_new(e->base, fd, EV_READ | EV_PERSIST, on_handoff, h)) ||
	    event_add(h->ev, &tv))
		handoff_free(h);
}

void wk_proxy_unix_clients(struct wk_proxy *e)
{
	e->unix_clients = true;
}

/* ---- the egress proxy of a job ---- */

struct wk_proxy *wk_proxy_new(struct event_base *base, struct evdns_base *dns, int listen_fd,
			      const struct al_egress_rule *rules, size_t nrules, uint64_t max_bytes,
			      uint32_t max_connections, uint32_t max_open, uint64_t idle_ms)
{
	struct wk_proxy *e = calloc(1, sizeof(*e));

	if (!e || !(e->rules = calloc(nrules ? nrules : 1, sizeof(*rules)))) {
		free(e);
		evutil_closesocket(listen_fd);
		return NULL;
	}
	e->tls = &px_tls_ops;
	memcpy(e->rules, rules, nrules * sizeof(*rules));
	e->nrules = nrules;
	e->base = base;
	e->dns = dns;
	e->max_bytes = max_bytes;
	e->max_conns = max_connections;
	e->max_open = max_open;
	e->idle_ms = idle_ms ? idle_ms : AL_EGRESS_IDLE_MS;
	evutil_make_socket_nonblocking(listen_fd);
	e->lst = evconnlistener_new(base, on_accept, e,
				    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, listen_fd);
	if (!e->lst) {
		evutil_closesocket(listen_fd);
		wk_proxy_free(e);
		return NULL;
	}
	return e;
}

/* Empty the transcript. */
static void clear_log(struct wk_proxy *e)
{
	e->log.id = NULL; /* only its egress list is ours */
	al_result_free(&e->log);
	memset(&e->log, 0, sizeof(e->log));
	e->unlisted = 0;
}

/* The transcript so far into res (a count of what did not fit too); it
 * starts again empty. */
static void move_transcript(struct wk_proxy *e, struct al_result *res)
{
	for (size_t i = 0; i < e->log.negress; i++)
		if (al_result_add_egress(res, &e->log.egress[i]))
			e->unlisted++;
	if (e->unlisted) {
		char n[24];

		snprintf(n, sizeof(n), "%llu", (unsigned long long)e->unlisted);
		al_result_add_info(res, "egress_unlisted", n);
	}
	if (e->hits || e->stored) {
		char c[96];

		snprintf(c, sizeof(c), "%llu hits (%llu bytes), %llu stored",
			 (unsigned long long)e->hits, (unsigned long long)e->hit_bytes,
			 (unsigned long long)e->stored);
		al_result_add_info(res, "egress_cache", c);
		e->hits = e->hit_bytes = e->stored = 0;
	}
	clear_log(e);
}

static void on_keep_end(evutil_socket_t fd, short what, void *arg)
{
	struct wk_proxy *e = arg;

	(void)fd;
	(void)what;
	al_log("info", "egress_end", "job=%s", e->kept);
	wk_proxy_finish(e, NULL);
	wk_proxy_free(e);
}

void wk_proxy_keep(struct wk_proxy *e, struct al_result *res, uint64_t ms, const char *job)
{
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

	if (!e)
		return;
	move_transcript(e, res);
	snprintf(e->kept, sizeof(e->kept), "%s", job);
	if (!(e->keep_ev = evtimer_new(e->base, on_keep_end, e)) || evtimer_add(e->keep_ev, &tv))
		on_keep_end(-1, 0, e); /* fail closed: no proxy without its end */
}

void wk_proxy_transcript(struct wk_proxy *e, struct al_result *res)
{
	if (e)
		move_transcript(e, res);
}

void wk_proxy_finish(struct wk_proxy *e, struct al_result *res)
{
	if (!e)
		return;
	if (e->lst) {
		evconnlistener_free(e->lst);
		e->lst = NULL;
	}
	while (e->handoffs)
		handoff_free(e->handoffs);
	for (struct tunnel *t = e->live, *next; t; t = next) {
		next = t->next;
		if (t->lingering)
			continue;
		if (t->relaying)
			snprintf(t->why + strlen(t->why), sizeof(t->why) - strlen(t->why),
				 "; closed: the job ended");
		px_tunnel_end(t, true, t->relaying ? NULL : "the job ended before the request");
	}
	if (res)
		move_transcript(e, res);
}

void wk_proxy_free(struct wk_proxy *e)
{
	if (!e)
		return;
	while (e->live)
		px_tunnel_free(e->live);
	while (e->handoffs)
		handoff_free(e->handoffs);
	if (e->keep_ev)
		event_free(e->keep_ev);
	if (e->lst)
		evconnlistener_free(e->lst);
	free(e->rules);
	free(e->cache_dir);
	free(e->up_ca);
	clear_log(e);
	free(e);
}
