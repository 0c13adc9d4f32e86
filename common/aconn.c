/* aconn.c - the daemons' Redis connection layer (see aconn.h). */
#include "aconn.h"

#include <adapters/libevent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "clock.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000
#define WATCH_MS       1000 /* how often the watchdog looks */

/* One command on its way: reliable ones stay in the connection's queue
 * until answered; best-effort ones only wrap the caller's callback. */
struct req {
	struct req *next;
	struct al_aconn *c;
	struct al_call call; /* reliable: what to (re)send */
	redisCallbackFn *fn;
	void *priv;
	bool reliable;
	bool sent;
	uint64_t sent_ms;
};

struct al_aconn {
	struct event_base *base;
	struct al_redis_url url;
	char name[32];
	redisAsyncContext *ac;
	struct event *retry, *watch;
	unsigned backoff_ms;
	uint64_t timeout_ms;
	bool up;
	bool closing;
	bool connected;	     /* hiredis said connected (handshake may be running) */
	uint64_t connect_ms; /* when this context was made */
	int hs_left;	     /* handshake replies still to come */
	bool hs_failed;
	bool ping_out;
	uint64_t ping_ms;
	uint64_t stall_end_ms;	  /* when an answer last came after a long silence */
	bool subscriber;	  /* carries a SUBSCRIBE: no PING on it */
	char last_error[128];	  /* logged once until it changes */
	char err[128];		  /* why the last call was refused (al_aconn_strerror) */
	struct req *head, **tail; /* reliable calls, in order */
	unsigned pending;
	al_aconn_fn on_up, on_down;
	void *arg;
};

static void schedule_retry(struct al_aconn *c);

/* A call refused: why, kept on the connection (hiredis-style). */
static int refuse(struct al_aconn *c, const char *why)
{
	snprintf(c->err, sizeof(c->err), "%s", why);
	return AL_EREDIS;
}

/* hiredis refused to queue a command: its reason when it has one. */
static int refuse_hiredis(struct al_aconn *c)
{
	snprintf(c->err, sizeof(c->err), "hiredis refused the command: %s",
		 c->ac && c->ac->errstr[0] ? c->ac->errstr : "no reason given");
	return AL_EREDIS;
}

const char *al_aconn_strerror(const struct al_aconn *c)
{
	return c && c->err[0] ? c->err : "no error";
}

bool al_aconn_transient(const redisReply *r)
{
	static const char *const kinds[] = {"LOADING",	"BUSY",	       "NOSCRIPT",
					    "READONLY", "MASTERDOWN",  "TRYAGAIN",
					    "OOM",	"CLUSTERDOWN", "NOREPLICAS"};

	if (!r || r->type != REDIS_REPLY_ERROR || !r->str)
		return false;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t n = strlen(kinds[i]);

		if (!strncmp(r->str, kinds[i], n) && (r->str[n] == ' ' || r->str[n] == '\0'))
			return true;
	}
	return false;
}

static void note_error(struct al_aconn *c, const char *what, const char *msg)
{
	if (!strncmp(c->last_error, msg, sizeof(c->last_error) - 1))
		return;
	snprintf(c->last_error, sizeof(c->last_error), "%s", msg);
	al_log("warn", "redis_reset",
	       "conn=%s during=%s error=\"%.120s\" note=\"reconnecting; calls are kept and sent "
	       "again\"",
	       c->name, what, msg);
}

/* Stop using this context: graceful (replies still due arrive first) or,
 * for a Redis that answers nothing, at once. */
static void reset(struct al_aconn *c, bool hard)
{
	redisAsyncContext *ac = c->ac;
	bool was_up = c->up;

	c->up = false;
	c->ping_out = false;
	if (!ac)
		return;
	if (hard) {
		c->ac = NULL;
		c->connected = false;
		redisAsyncFree(ac); /* callbacks get NULL; on_disconnect may run */
		if (!evtimer_pending(c->retry, NULL))
			schedule_retry(c);
	} else if (!(ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING))) {
		redisAsyncDisconnect(ac);
	}
	if (was_up && c->on_down && !c->closing)
		c->on_down(c, c->arg);
}

/* ---- reliable queue ---- */

static void req_unlink(struct al_aconn *c, struct req *q)
{
	for (struct req **pp = &c->head; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			if (c->tail == &q->next)
				c->tail = pp;
			c->pending--;
			return;
		}
	}
}

static void req_free(struct req *q)
{
	al_call_free(&q->call);
	free(q);
}

static void deliver(struct req *q, redisReply *r)
{
	if (q->reliable)
		req_unlink(q->c, q);
	if (q->fn)
		q->fn(q->c->ac, r, q->priv);
	req_free(q);
}

static void on_req_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	struct al_aconn *c = q->c;
	redisReply *r = reply;

	(void)ac;
	if (!r) {
		if (q->reliable && !c->closing) {
			q->sent = false; /* sent again once up */
			return;
		}
		deliver(q, NULL);
		return;
	}
	if (al_mono_ms() - q->sent_ms > AL_ACONN_STALL_MS) /* Redis was silent that long */
		c->stall_end_ms = al_mono_ms();
	if (al_aconn_transient(r)) {
		note_error(c, "command", r->str);
		reset(c, false);
		if (q->reliable && !c->closing) {
			q->sent = false;
			return;
		}
	}
	deliver(q, r);
}

static int send_req(struct al_aconn *c, struct req *q, const struct al_call *call)
{
	int argc;
	const char **argv;
	const size_t *lens;

	if (al_call_argv((struct al_call *)call, &argc, &argv, &lens))
		return refuse(c, "out of memory");
	if (redisAsyncCommandArgv(c->ac, on_req_reply, q, argc, argv, lens) != REDIS_OK)
		return refuse_hiredis(c);
	q->sent = true;
	q->sent_ms = al_mono_ms();
	return 0;
}

static void flush(struct al_aconn *c)
{
	for (struct req *q = c->head; q && c->up; q = q->next)
		if (!q->sent && send_req(c, q, &q->call))
			return;
}

/* ---- handshake ---- */

static void on_hs(redisAsyncContext *ac, void *reply, void *priv)
{
	struct al_aconn *c = priv;
	redisReply *r = reply;

	(void)ac;
	if (c->closing || !c->connected)
		return;
	if (!r || r->type == REDIS_REPLY_ERROR) {
		if (!c->hs_failed)
			note_error(c, "handshake", r ? r->str : "connection lost");
		c->hs_failed = true;
	}
	if (--c->hs_left > 0)
		return;
	if (c->hs_failed) {
		reset(c, false);
		return;
	}
	c->up = true;
	c->backoff_ms = BACKOFF_MIN_MS;
	if (c->last_error[0])
		al_log("info", "redis_ready",
		       "conn=%s note=\"scripts loaded; sending what was kept\"", c->name);
	c->last_error[0] = '\0';
	flush(c);
	if (c->on_up)
		c->on_up(c, c->arg);
}

static void hs_send(struct al_aconn *c, int argc, const char **argv)
{
	if (redisAsyncCommandArgv(c->ac, on_hs, c, argc, argv, NULL) == REDIS_OK)
		c->hs_left++;
	else
		c->hs_failed = true;
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct al_aconn *c = ac->data;
	char db[16];

	if (status != REDIS_OK) {
		/* hiredis frees the context after this callback */
		c->ac = NULL;
		c->connected = false;
		note_error(c, "connect", ac->errstr[0] ? ac->errstr : "refused");
		schedule_retry(c);
		return;
	}
	c->connected = true;
	c->hs_left = 0;
	c->hs_failed = false;
	/* Pipelined: a failed AUTH makes every later reply an error too. */
	if (c->url.password[0]) {
		const char *argv[3] = {"AUTH", c->url.user[0] ? c->url.user : c->url.password,
				       c->url.password};

		hs_send(c, c->url.user[0] ? 3 : 2, argv);
	}
	if (c->url.db) {
		const char *argv[2] = {"SELECT", db};

		snprintf(db, sizeof(db), "%d", c->url.db);
		hs_send(c, 2, argv);
	}
	for (size_t i = 0; al_lua_all[i]; i++) {
		const char *argv[] = {"SCRIPT", "LOAD", al_lua_all[i]};

		hs_send(c, 3, argv);
	}
	if (c->hs_failed && c->hs_left == 0)
		reset(c, false);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct al_aconn *c = ac->data;
	bool was_up = c->up;

	(void)status;
	if (c->ac == ac)
		c->ac = NULL; /* hiredis frees it */
	c->up = false;
	c->connected = false;
	c->ping_out = false;
	if (c->closing)
		return;
	if (was_up && c->on_down)
		c->on_down(c, c->arg);
	if (!evtimer_pending(c->retry, NULL))
		schedule_retry(c);
}

static void connect_now(evutil_socket_t fd, short what, void *arg)
{
	struct al_aconn *c = arg;
	redisAsyncContext *ac;

	(void)fd;
	(void)what;
	if (c->ac || c->closing)
		return;
	/* Through Sentinel: the master its sentinels name now (and that says
	 * so itself: ROLE), asked again at every reconnect, so a failover is
	 * followed like a restart. Blocking, but bounded: 300 ms a sentinel. */
	if (c->url.nsentinels) {
		struct al_err e = {0};

		if (al_sentinel_resolve(&c->url, 300, NULL, &e)) {
			note_error(c, "sentinel", e.msg);
			schedule_retry(c);
			return;
		}
	}
	ac = c->url.path[0] ? redisAsyncConnectUnix(c->url.path)
			    : redisAsyncConnect(c->url.host, c->url.port);
	if (!ac || ac->err) {
		if (ac) {
			note_error(c, "connect", ac->errstr);
			redisAsyncFree(ac);
		}
		schedule_retry(c);
		return;
	}
	ac->data = c;
	c->ac = ac;
	c->connect_ms = al_mono_ms();
	redisLibeventAttach(ac, c->base);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

static void schedule_retry(struct al_aconn *c)
{
	struct timeval tv = {c->backoff_ms / 1000, (c->backoff_ms % 1000) * 1000};

	if (c->closing)
		return;
	evtimer_add(c->retry, &tv);
	c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
}

/* ---- watchdog: a Redis that answers nothing ---- */

static void on_pong(redisAsyncContext *ac, void *reply, void *priv)
{
	struct al_aconn *c = priv;

	(void)ac;
	(void)reply;
	c->ping_out = false;
}

static void on_watch(evutil_socket_t fd, short what, void *arg)
{
	struct al_aconn *c = arg;
	struct timeval tv = {WATCH_MS / 1000, 0};
	uint64_t now = al_mono_ms();
	const char *why = NULL;

	(void)fd;
	(void)what;
	evtimer_add(c->watch, &tv);
	if (!c->ac)
		return;
	if (!c->up && now - c->connect_ms > c->timeout_ms)
		why = "no answer to the handshake";
	else if (c->up && c->ping_out && now - c->ping_ms > c->timeout_ms)
		why = "no answer to PING";
	for (struct req *q = c->head; !why && q && c->up; q = q->next) {
		if (!q->sent)
			continue;
		if (now - q->sent_ms > c->timeout_ms) /* sent in order: the oldest is enough */
			why = "no answer to a call";
		break;
	}
	if (why) {
		note_error(c, "watch", why);
		reset(c, true);
		return;
	}
	if (c->up && !c->ping_out && !c->subscriber) {
		const char *argv[] = {"PING"};

		if (redisAsyncCommandArgv(c->ac, on_pong, c, 1, argv, NULL) == REDIS_OK) {
			c->ping_out = true;
			c->ping_ms = now;
		}
	}
}

/* ---- interface ---- */

struct al_aconn *al_aconn_new(struct event_base *base, const struct al_redis_url *url,
			      const char *name, al_aconn_fn up, al_aconn_fn down, void *arg)
{
	struct al_aconn *c = calloc(1, sizeof(*c));
	struct timeval tv = {WATCH_MS / 1000, 0};

	if (!c)
		return NULL;
	c->base = base;
	c->url = *url;
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->on_up = up;
	c->on_down = down;
	c->arg = arg;
	c->backoff_ms = BACKOFF_MIN_MS;
	c->timeout_ms = AL_ACONN_TIMEOUT_MS;
	c->tail = &c->head;
	c->retry = evtimer_new(base, connect_now, c);
	c->watch = evtimer_new(base, on_watch, c);
	if (!c->retry || !c->watch) {
		if (c->retry)
			event_free(c->retry);
		free(c);
		return NULL;
	}
	evtimer_add(c->watch, &tv);
	connect_now(-1, 0, c);
	return c;
}

/* A request for fn(priv); best effort unless made reliable. */
static struct req *req_new(struct al_aconn *c, redisCallbackFn *fn, void *priv)
{
	struct req *q = calloc(1, sizeof(*q));

	if (q) {
		q->c = c;
		q->fn = fn;
		q->priv = priv;
	}
	return q;
}

int al_aconn_call(struct al_aconn *c, struct al_call *call, redisCallbackFn *fn, void *priv)
{
	struct req *q;
	int argc;
	const char **argv;
	const size_t *lens;

	if (c->closing || al_call_argv(call, &argc, &argv, &lens) || !(q = req_new(c, fn, priv))) {
		al_call_free(call);
		return refuse(c, c->closing ? "the connection is closing" : "out of memory");
	}
	q->reliable = true;
	al_call_move(&q->call, call);
	*c->tail = q;
	c->tail = &q->next;
	c->pending++;
	if (c->up) /* when up, everything before q went out already */
		send_req(c, q, &q->call);
	return 0;
}

/* A request of a call sent only while up (never replayed): NULL, with the
 * reason kept on the connection, when it cannot be sent now. */
static struct req *req_now(struct al_aconn *c, redisCallbackFn *fn, void *priv)
{
	struct req *q;

	if (!c->up || !c->ac) {
		refuse(c, "not connected (Redis is down, loading, or the handshake is running)");
		return NULL;
	}
	if (!(q = req_new(c, fn, priv)))
		refuse(c, "out of memory");
	return q;
}

int al_aconn_send(struct al_aconn *c, struct al_call *call, redisCallbackFn *fn, void *priv)
{
	struct req *q;

	if (!(q = req_now(c, fn, priv)))
		return AL_EREDIS;
	if (send_req(c, q, call)) {
		free(q);
		return AL_EREDIS;
	}
	return 0;
}

int al_aconn_cmd(struct al_aconn *c, redisCallbackFn *fn, void *priv, int argc,
		 const char *const *argv, const size_t *lens)
{
	struct req *q;

	if (!(q = req_now(c, fn, priv)))
		return AL_EREDIS;
	/* hiredis does not write through argv; its prototype predates const. */
	if (redisAsyncCommandArgv(c->ac, on_req_reply, q, argc, (const char **)(uintptr_t)argv,
				  lens) != REDIS_OK) {
		free(q);
		return refuse_hiredis(c);
	}
	q->sent_ms = al_mono_ms();
	return 0;
}

int al_aconn_subscribe(struct al_aconn *c, const char *channel, redisCallbackFn *fn, void *priv)
{
	const char *argv[] = {"SUBSCRIBE", channel};

	if (!c->up || !c->ac)
		return refuse(
		    c, "not connected (Redis is down, loading, or the handshake is running)");
	/* A subscriber's connection carries no other command: no PING. */
	c->subscriber = true;
	return redisAsyncCommandArgv(c->ac, fn, priv, 2, argv, NULL) == REDIS_OK
		   ? 0
		   : refuse_hiredis(c);
}

uint64_t al_aconn_stall_end_ms(const struct al_aconn *c)
{
	return c->stall_end_ms;
}

bool al_aconn_is_up(const struct al_aconn *c)
{
	return c && c->up;
}

unsigned al_aconn_pending(const struct al_aconn *c)
{
	return c ? c->pending : 0;
}

void al_aconn_free(struct al_aconn *c)
{
	if (!c)
		return;
	c->closing = true;
	if (c->ac)
		redisAsyncFree(c->ac); /* sent calls get NULL: delivered, freed */
	while (c->head)
		deliver(c->head, NULL); /* never sent */
	event_free(c->retry);
	event_free(c->watch);
	free(c);
}
