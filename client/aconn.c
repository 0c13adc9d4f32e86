/* aconn.c - a reconnecting asynchronous Redis connection (see aconn.h). */
#include "aconn.h"

#include <adapters/libevent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/scripts.h"
#include "log.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000

struct al_aconn {
	struct event_base *base;
	struct al_redis_url url;
	char name[32];
	redisAsyncContext *ac;
	struct event *retry;
	unsigned backoff_ms;
	bool up;
	bool closing;
	al_aconn_fn on_up, on_down;
	void *arg;
};

static void schedule_retry(struct al_aconn *c);

void al_aconn_load_scripts(struct al_aconn *c)
{
	/* Ordered before anything sent after it on this connection. */
	for (size_t i = 0; al_lua_all[i]; i++) {
		const char *argv[] = { "SCRIPT", "LOAD", al_lua_all[i] };

		redisAsyncCommandArgv(c->ac, NULL, NULL, 3, argv, NULL);
	}
}

static void on_auth(redisAsyncContext *ac, void *reply, void *priv)
{
	struct al_aconn *c = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type == REDIS_REPLY_ERROR) {
		al_log("error", "redis_auth", "conn=%s error=\"%s\"", c->name, r ? r->str : "no reply");
		if (c->ac && r)
			redisAsyncDisconnect(c->ac);
		return;
	}
	c->up = true;
	c->backoff_ms = BACKOFF_MIN_MS;
	al_aconn_load_scripts(c);
	if (c->on_up)
		c->on_up(c, c->arg);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct al_aconn *c = ac->data;

	if (status != REDIS_OK) {
		/* hiredis frees the context after this callback */
		c->ac = NULL;
		schedule_retry(c);
		return;
	}
	if (c->url.password[0]) {
		const char *argv[3] = { "AUTH", c->url.user[0] ? c->url.user : c->url.password,
					c->url.password };

		redisAsyncCommandArgv(c->ac, on_auth, c, c->url.user[0] ? 3 : 2, argv, NULL);
	} else if (c->url.db) {
		char db[16];
		const char *argv[2] = { "SELECT", db };

		snprintf(db, sizeof(db), "%d", c->url.db);
		redisAsyncCommandArgv(c->ac, on_auth, c, 2, argv, NULL);
	} else {
		on_auth(c->ac, &(redisReply){ .type = REDIS_REPLY_STATUS }, c);
	}
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct al_aconn *c = ac->data;
	bool was_up = c->up;

	(void)status;
	c->ac = NULL; /* hiredis frees it */
	c->up = false;
	if (c->closing)
		return;
	if (was_up && c->on_down)
		c->on_down(c, c->arg);
	schedule_retry(c);
}

static void connect_now(evutil_socket_t fd, short what, void *arg)
{
	struct al_aconn *c = arg;
	redisAsyncContext *ac;

	(void)fd;
	(void)what;
	ac = c->url.path[0] ? redisAsyncConnectUnix(c->url.path)
			    : redisAsyncConnect(c->url.host, c->url.port);
	if (!ac || ac->err) {
		if (ac)
			redisAsyncFree(ac);
		schedule_retry(c);
		return;
	}
	ac->data = c;
	c->ac = ac;
	redisLibeventAttach(ac, c->base);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

static void schedule_retry(struct al_aconn *c)
{
	struct timeval tv = { c->backoff_ms / 1000, (c->backoff_ms % 1000) * 1000 };

	if (c->closing)
		return;
	evtimer_add(c->retry, &tv);
	c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
}

struct al_aconn *al_aconn_new(struct event_base *base, const struct al_redis_url *url,
			      const char *name, al_aconn_fn up, al_aconn_fn down, void *arg)
{
	struct al_aconn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->base = base;
	c->url = *url;
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->on_up = up;
	c->on_down = down;
	c->arg = arg;
	c->backoff_ms = BACKOFF_MIN_MS;
	c->retry = evtimer_new(base, connect_now, c);
	if (!c->retry) {
		free(c);
		return NULL;
	}
	connect_now(-1, 0, c);
	return c;
}

int al_aconn_cmd(struct al_aconn *c, redisCallbackFn *fn, void *priv, int argc,
		 const char *const *argv, const size_t *lens)
{
	if (!c->up || !c->ac)
		return -1;
	/* hiredis does not write through argv; its prototype predates const. */
	return redisAsyncCommandArgv(c->ac, fn, priv, argc, (const char **)(uintptr_t)argv, lens) ==
			       REDIS_OK
		       ? 0
		       : -1;
}

bool al_aconn_is_up(const struct al_aconn *c)
{
	return c && c->up;
}

void al_aconn_free(struct al_aconn *c)
{
	if (!c)
		return;
	c->closing = true;
	if (c->ac)
		redisAsyncFree(c->ac);
	event_free(c->retry);
	free(c);
}
