/* api.c - the gateway's endpoints (docs/api.md). One struct req per HTTP
 * request, alive until it is answered; every Redis step is asynchronous on
 * the gateway's loop (common/aconn.h). A long poll (a wait, a run, a live
 * output stream) holds a connection of its own for its life (XREAD BLOCK
 * blocks it), from a pool that grows to GW_WAITERS_MAX, of which
 * one tenant may hold its share (--polls-per-tenant) at most. */
#include <errno.h>
#include <stdarg.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include <sys/random.h>

#include "../proto/chunk.h"
#include "../proto/json.h"
#include "../common/log.h"
#include "../proto/contract.h"
#include "../proto/result.h"
#include "gw.h"
#include "req.h"
#include "../common/clock.h"

#define IDEM_TTL_S     86400
#define IDEM_TTL_STR   "86400"
#define WAIT_STEP_MS   1000
#define JOB_IDS_PREFIX "g" /* ids the gateway chose: g + 32 hex */

/* ---- replies ---- */

static void count_reply(struct gw *g, int code, size_t bytes)
{
	if (code >= 100 && code < 600)
		g->st.by_code[code / 100]++;
	g->st.bytes_out += bytes;
}

static void forget_close(struct req *q)
{
	if (q->r)
		evhttp_connection_set_closecb(evhttp_request_get_connection(q->r), NULL, NULL);
}

/* A long poll's waiter goes back, and its connection's timeout with it. */
static void poll_end(struct req *q)
{
	if (!q->w)
		return;
	if (q->r)
		gw_conn_long(q->r, false, q->g);
	q->w->busy = false;
	q->w = NULL;
	q->t->polls--;
}

static void req_free(struct req *q)
{
	poll_end(q);
	if (q->submit) {
		al_call_free(q->submit);
		free(q->submit);
	}
	free(q);
}

/* Answer with data (len bytes of type ctype; NULL: out of memory, a 500)
 * and end the request. A client that went gets nothing. */
void gw_reply_send(struct req *q, int code, const char *ctype, const void *data, size_t len)
{
	static const char *const reason[] = {NULL,    "Continue",     "OK",
					     "Found", "Client Error", "Server Error"};
	struct evbuffer *b;
	const char *phrase = code == 414   ? "URI Too Long"
			     : code == 429 ? "Too Many Requests"
			     : code == 431 ? "Request Header Fields Too Large"
					   : reason[code / 100];

	if (q->r) {
		forget_close(q);
		poll_end(q);
		b = evbuffer_new();
		if (!data || !b || evbuffer_add(b, data, len)) {
			evhttp_send_error(q->r, 500, "out of memory");
			count_reply(q->g, 500, 0);
		} else {
			evhttp_add_header(evhttp_request_get_output_headers(q->r), "Content-Type",
					  ctype);
			count_reply(q->g, code, len);
			evhttp_send_reply(q->r, code, phrase, b);
		}
		if (b)
			evbuffer_free(b);
	}
	req_free(q);
}

/* Answer with a JSON document (taken), one line; a request whose 200
 * went as the start of Server-Sent Events (a streamed call) gets it as
 * the last event: result, or error with the code it would have had. */
void gw_reply_json(struct req *q, int code, json_t *doc)
{
	char *text, *line;
	size_t n;

	if (q->streaming) {
		if (doc && code != 200)
			json_object_set_new(doc, "code", json_integer(code));
		gw_output_end(q, code == 200 ? "result" : "error", doc);
		return;
	}
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	n = text ? strlen(text) : 0;
	line = text ? realloc(text, n + 2) : NULL;
	json_decref(doc);
	if (line)
		memcpy(line + n, "\n", 2);
	else
		free(text);
	gw_reply_send(q, code, "application/json", line, n + 1);
	free(line);
}

void gw_reply_error(struct req *q, int code, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	gw_reply_json(q, code, json_pack("{s:s}", "error", msg));
}

/* The result (msgpack) as the reply: 200 with it; a rejection by a tenant
 * quota (info.quota: max_queued, rate_per_s) is 429, another rejection 400
 * (its error says why). */
void gw_reply_result(struct req *q, const char *raw, size_t len)
{
	struct al_result res = {0};
	struct al_err err = {0};
	json_t *doc;
	int code = 200;
	const char *accept =
	    q->r ? evhttp_find_header(evhttp_request_get_input_headers(q->r), "Accept") : NULL;

	if (al_result_decode(raw, len, &res, &err)) {
		gw_reply_error(q, 500, "the stored result does not decode: %s", err.msg);
		return;
	}
	if (res.status == AL_ST_REJECTED) {
		code = 400;
		for (size_t i = 0; i < res.ninfo; i++)
			if (!strcmp(res.info[i].key, "quota"))
				code = 429; /* the scheduler says which quota refused it */
	}
	if (q->kind == K_SESSION_OPEN && res.status == AL_ST_OK) { /* opened */
		al_result_free(&res);
		gw_reply_json(q, 201, json_pack("{s:s, s:s}", "id", q->id, "session", "open"));
		return;
	}
	/* Accept: application/msgpack: the result as stored (the C client) */
	if (accept && strstr(accept, "application/msgpack")) {
		al_result_free(&res);
		gw_reply_send(q, code, "application/msgpack", raw, len);
		return;
	}
	doc = json_pack("{s:s, s:s, s:o*}", "id", q->id, "state", "done", "result",
			al_result_to_json(&res));
	/* every 4xx has the one envelope, {"error": ...}: a rejection's result
	 * rides beside it */
	if (doc && code >= 400)
		json_object_set_new(
		    doc, "error", json_string(res.error ? res.error : al_status_name(res.status)));
	if (doc && q->kind == K_SUBMIT)
		json_object_set_new(doc, "same_key", json_boolean(q->same_key));
	al_result_free(&res);
	gw_reply_json(q, code, doc);
}

static void reply_pending(struct req *q, int code)
{
	json_t *doc =
	    json_pack("{s:s, s:s}", "id", q->id, "state", q->state[0] ? q->state : "submitted");

	if (doc && q->kind == K_SUBMIT)
		json_object_set_new(doc, "same_key", json_boolean(q->same_key));
	gw_reply_json(q, code, doc);
}

/* ---- waiting for a result ---- */

static void wait_step(struct req *q);

static struct gw_waiter *waiter_take(struct gw *g)
{
	for (size_t i = 0; i < g->nwaiters; i++)
		if (!g->waiters[i].busy) {
			g->waiters[i].busy = true;
			return &g->waiters[i];
		}
	if (g->nwaiters == GW_WAITERS_MAX)
		return NULL;
	{
		struct gw_waiter *w = &g->waiters[g->nwaiters];

		if (!(w->c = al_aconn_new(g->base, &g->url, "wait", NULL, NULL, w)))
			return NULL;
		w->g = g;
		w->busy = true;
		g->nwaiters++;
		return w;
	}
}

/* The request becomes a long poll: a waiter of its own, within its
 * tenant's share of them, and the long timeout on its connection. False,
 * answered (429: the tenant's share is spent; 503: the pool is), if not. */
bool gw_poll_begin(struct req *q)
{
	if (q->w)
		return true;
	if (q->t->polls >= q->g->polls_per_tenant) {
		gw_reply_error(q, 429,
			       "tenant %s has %u long polls open (waits, runs and output streams), "
			       "its share of this gateway; end one, or poll again later",
			       q->tenant, q->t->polls);
		return false;
	}
	if (!(q->w = waiter_take(q->g))) {
		gw_reply_error(q, 503,
			       "all %d long-poll connections of this gateway are in use; try "
			       "again",
			       GW_WAITERS_MAX);
		return false;
	}
	q->t->polls++;
	if (q->r)
		gw_conn_long(q->r, true, q->g);
	return true;
}

const redisReply *gw_awaited(struct req *q, const redisReply *r)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_STRING)
		return NULL;
	if (r->element[0]->integer == 1)
		return r->element[1];
	snprintf(q->after, sizeof(q->after), "%.*s", (int)r->element[1]->len, r->element[1]->str);
	return NULL;
}

void gw_end_wait_call(struct al_call *c, const struct req *q)
{
	al_end_wait_call(c, gw_answer_name(q), q->after[0] ? q->after : "0-0", WAIT_STEP_MS);
}

static void on_result_got(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	const redisReply *res = gw_awaited(q, reply);

	(void)ac;
	if (res) {
		gw_reply_result(q, res->str, res->len);
		return;
	}
	if (!q->r) { /* the client went */
		req_free(q);
		return;
	}
	if (al_mono_ms() >= q->deadline_ms) {
		reply_pending(q, q->code_if_pending);
		return;
	}
	wait_step(q);
}

static void get_result(struct req *q)
{
	struct al_call c;

	al_await_call(&c, q->id);
	gw_send(q, q->g->cmd, &c, on_result_got);
}

static void on_end_wait(redisAsyncContext *ac, void *reply, void *priv)
{
	(void)ac;
	(void)reply;
	get_result(priv);
}

/* One round: wait at most a second for anything after the live output's
 * newest entry (the result's end entry comes there), then look again. */
static void wait_step(struct req *q)
{
	struct al_call c;

	if (!gw_poll_begin(q))
		return;
	/* reliable: a new connection sends it once up; an XREAD sent again
	 * after a reset reads the same */
	gw_end_wait_call(&c, q);
	if (al_aconn_call(q->w->c, &c, on_end_wait, q))
		gw_reply_error(q, 500, "out of memory");
	al_call_free(&c);
}

static void start_wait(struct req *q, uint64_t ms, int code_if_pending)
{
	q->deadline_ms = al_mono_ms() + (ms > GW_WAIT_MAX_MS ? GW_WAIT_MAX_MS : ms);
	q->code_if_pending = code_if_pending;
	get_result(q);
}

/* ---- submit ---- */

/* An earlier job's state (LOOKUP), for the 202 of a reused key. */
static void on_earlier_state(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING)
		snprintf(q->state, sizeof(q->state), "%s", r->element[0]->str);
	else
		snprintf(q->state, sizeof(q->state), "unknown");
	reply_pending(q, 202);
}

/* The submission is in (and replicated, with min_replicas): 202, or wait.
 * A reused key's 202 says the earlier job's real state. */
static void submitted(struct req *q)
{
	if (!q->wait && q->same_key) {
		struct al_call c;

		al_lookup_call(&c, q->id);
		gw_send(q, q->g->cmd, &c, on_earlier_state);
		al_call_free(&c);
		return;
	}
	if (!q->wait) {
		reply_pending(q, 202);
		return;
	}
	start_wait(q, q->wait_ms, 202);
}

static void on_replicated(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;

	(void)ac;
	if (r && r->type == REDIS_REPLY_INTEGER && r->integer >= q->g->url.min_replicas) {
		submitted(q);
		return;
	}
	gw_reply_error(
	    q, 503,
	    "job %s: submitted, but %lld of the %d replicas asked for (min_replicas) had "
	    "it within %d ms: a failover now could lose it; submit again with the same "
	    "idempotency key to be sure",
	    q->id, r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0LL, q->g->url.min_replicas,
	    q->g->url.replica_timeout_ms);
}

static void on_submitted(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply, *item;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 1 ||
	    (item = r->element[0])->type != REDIS_REPLY_ARRAY || item->elements != 2 ||
	    item->element[0]->type != REDIS_REPLY_INTEGER ||
	    item->element[1]->type != REDIS_REPLY_STRING) {
		gw_reply_error(q, 502, "unexpected answer from Redis to the submission");
		return;
	}
	/* accepted, or an earlier job of this tenant with the same key; "id
	 * taken" for an id of 128 random bits is this very job, sent again
	 * after a reconnect lost Redis's first answer (a reliable call) */
	snprintf(q->id, sizeof(q->id), "%.*s", (int)item->element[1]->len, item->element[1]->str);
	q->g->st.submitted++;
	q->same_key = item->element[0]->integer == AL_SUBMIT_SAME_KEY;
	if (q->g->url.min_replicas) { /* acknowledged once that many replicas have it */
		struct al_call c;
		int rc;

		al_wait_call(&c, (unsigned)q->g->url.min_replicas,
			     (unsigned)q->g->url.replica_timeout_ms);
		rc = al_aconn_send(q->g->cmd, &c, on_replicated, q);
		al_call_free(&c);
		if (rc)
			gw_reply_error(q, 503,
				       "job %s: submitted, but Redis went away before its "
				       "replicas said they have it; submit again with the same "
				       "idempotency key",
				       q->id);
		return;
	}
	submitted(q);
}

int gw_new_id(char out[AL_ID_MAX + 1])
{
	unsigned char r[16];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -1;
	strcpy(out, JOB_IDS_PREFIX);
	for (int i = 0; i < 16; i++)
		snprintf(out + 1 + 2 * i, 3, "%02x", r[i]);
	return 0;
}

static void send_submit(struct req *q)
{
	/* reliable: kept and sent again until Redis answers; SUBMIT run twice
	 * answers "id taken" the second time, which is this same job */
	if (al_aconn_call(q->g->cmd, q->submit, on_submitted, q))
		gw_reply_error(q, 500, "out of memory");
}

/* A reused key's earlier id, for its 409. */
static void on_conflict_id(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;
	json_t *doc;

	(void)ac;
	doc =
	    json_pack("{s:s, s:b}", "error",
		      "idempotency_key: already used by this tenant with a different body (the "
		      "same key must come with the same body, byte for byte, for 24 h); use a new "
		      "key for a new job",
		      "same_key", 1);
	if (doc && r && r->type == REDIS_REPLY_STRING)
		json_object_set_new(doc, "id", json_stringn(r->str, r->len));
	gw_reply_json(q, 409, doc);
}

/* The digest check (SET ... NX GET): ours now, or the same body's: submit;
 * another body's: 409. */
static void on_digest(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;
	const char *mine = q->digest;

	(void)ac;
	if (!r || r->type == REDIS_REPLY_ERROR) {
		gw_reply_error(q, 503, "Redis did not take the submission: %s",
			       r && r->str ? r->str : "no answer");
		return;
	}
	if (r->type == REDIS_REPLY_STRING &&
	    (r->len != strlen(mine) || memcmp(r->str, mine, r->len))) {
		const char *argv[] = {"GET", q->idem};

		q->g->st.idem_conflicts++;
		if (al_aconn_cmd(q->g->cmd, on_conflict_id, q, 2, argv, NULL))
			gw_reply_error(q, 503, "Redis is not reachable");
		return;
	}
	send_submit(q);
}

void gw_submit(struct req *q, const char *body, size_t len, bool msgpack, bool run,
	       uint64_t wait_ms)
{
	struct al_buf mp = {0};
	struct al_job job;
	struct al_err err = {0};

	if (gw_new_id(q->id)) {
		gw_reply_error(q, 500, "no randomness for an id");
		return;
	}
	if (gw_job_from_body(body, len, msgpack, q->id, q->tenant, q->kind == K_SESSION_OPEN, &mp,
			     &job, &err)) {
		al_job_free(&job);
		al_buf_free(&mp);
		gw_reply_error(q, err.code == AL_ENOMEM ? 500 : 400, "%s", err.msg);
		return;
	}
	q->wait = run || wait_ms > 0;
	if (q->wait && !gw_poll_begin(q)) { /* refused before it is submitted */
		al_job_free(&job);
		al_buf_free(&mp);
		return;
	}
	/* /v1/run: as long as the job may take, and some slack for the queue */
	q->wait_ms =
	    run ? (job.limits.wall_ms ? job.limits.wall_ms : 60000) + GW_RUN_SLACK_MS : wait_ms;
	if (!(q->submit = calloc(1, sizeof(*q->submit)))) {
		al_job_free(&job);
		al_buf_free(&mp);
		gw_reply_error(q, 500, "out of memory");
		return;
	}
	al_call_init(q->submit, al_lua_submit);
	al_submit_add(q->submit, &(struct al_submit_item){.id = q->id,
							  .tier = job.tier,
							  .tenant = q->tenant,
							  .job = mp.data,
							  .joblen = mp.len,
							  .now_ms = al_now_ms(),
							  .idem_key = job.idempotency_key,
							  .idem_ttl_s = IDEM_TTL_S});
	al_buf_free(&mp);
	if (!job.idempotency_key || q->kind != K_SUBMIT) {
		al_job_free(&job);
		send_submit(q);
		return;
	}
	/* A key's first body is kept with it (its SHA-256, beside the key, for
	 * as long): the key reused with another body is a 409, not the earlier
	 * job passed off as this one. */
	{
		unsigned char h[SHA256_DIGEST_LENGTH];
		char dkey[AL_KEY_MAX];
		const char *argv[] = {"SET", dkey, q->digest, "NX", "GET", "EX", IDEM_TTL_STR};

		SHA256((const unsigned char *)body, len, h);
		for (int i = 0; i < 8; i++)
			snprintf(q->digest + 2 * i, 3, "%02x", h[i]);
		al_key_idem(q->idem, q->tenant, job.idempotency_key);
		al_key_idem_digest(dkey, q->tenant, job.idempotency_key);
		al_job_free(&job);
		if (al_aconn_cmd(q->g->cmd, on_digest, q, 7, argv, NULL))
			gw_reply_error(q, 503, "Redis is not reachable");
	}
}

/* ---- a job of the caller's ---- */

/* A cancel is a request on the intake that the scheduler carries out and
 * answers on al:reply:<nonce> (this gateway's Redis user may not write
 * records or results); the answer is awaited on a long-poll connection, in
 * one-second rounds, AL_CANCEL_WAIT_S at most: then 202, still requested. */
static void cancel_step(struct req *q);

static void on_cancel_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;
	static const char *const what[] = {"finished", "ended", "kill_sent"};
	long code;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_STRING) {
		code = strtol(r->element[1]->str, NULL, 10);
		if (code == AL_CANCEL_UNKNOWN)
			gw_reply_error(q, 404, "no job %s", q->id);
		else if (code < 0 || code > 2)
			gw_reply_error(q, 502, "cancel: unexpected answer");
		else
			gw_reply_json(q, 200,
				      json_pack("{s:s, s:s}", "id", q->id, "cancel", what[code]));
		return;
	}
	if (!q->r) { /* the client went */
		req_free(q);
		return;
	}
	if (r && r->type == REDIS_REPLY_NIL && al_mono_ms() < q->deadline_ms) {
		cancel_step(q);
		return;
	}
	gw_reply_json(
	    q, 202,
	    json_pack("{s:s, s:s, s:s}", "id", q->id, "cancel", "requested", "note",
		      "no scheduler answered in time; the request stays on the intake and "
		      "is carried out when a scheduler reads it"));
}

static void cancel_step(struct req *q)
{
	struct al_call c;

	al_reply_wait_call(&c, q->nonce, 1000);
	if (al_aconn_call(q->w->c, &c, on_cancel_reply, q))
		gw_reply_error(q, 500, "out of memory");
	al_call_free(&c);
}

static void on_cancel_requested(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type == REDIS_REPLY_ERROR) {
		gw_reply_error(q, 503, "cancel: Redis did not take the request: %s",
			       r ? r->str : "no answer");
		return;
	}
	q->deadline_ms = al_mono_ms() + AL_CANCEL_WAIT_S * 1000;
	cancel_step(q);
}

static void cancel(struct req *q)
{
	struct al_call c;

	if (!gw_poll_begin(q)) /* refused before anything is requested */
		return;
	if (gw_new_id(q->nonce)) {
		gw_reply_error(q, 500, "no randomness for a nonce");
		return;
	}
	al_cancel_request_call(&c, q->id, q->nonce);
	if (al_aconn_call(q->g->cmd, &c, on_cancel_requested, q))
		gw_reply_error(q, 500, "out of memory");
	al_call_free(&c);
}

/* The record's tenant decides: another tenant's job is as unknown as one
 * that never was. */
static void on_owner(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
		gw_reply_error(q, 503, "Redis is not reachable");
		return;
	}
	/* LOOKUP: {state, tenant} of the record, or of the submission's marker */
	if (r->element[1]->type != REDIS_REPLY_STRING || strcmp(r->element[1]->str, q->tenant)) {
		gw_reply_error(q, 404, "no job %s", q->id);
		return;
	}
	if (r->element[0]->type == REDIS_REPLY_STRING)
		snprintf(q->state, sizeof(q->state), "%s", r->element[0]->str);
	switch (q->kind) {
	case K_CANCEL: cancel(q); break;
	case K_WAIT: get_result(q); break;
	case K_OUTPUT: gw_output_start(q); break;
	default: /* K_GET: the result if there is one, else the state */
		q->deadline_ms = 0;
		q->code_if_pending = 200;
		get_result(q);
	}
}

static void with_owned_job(struct req *q)
{
	struct al_call c;

	al_lookup_call(&c, q->id);
	if (al_aconn_call(q->g->cmd, &c, on_owner, q))
		gw_reply_error(q, 500, "out of memory");
	al_call_free(&c);
}

/* ---- live output: Server-Sent Events from al:out:<id> ---- */

#define SSE_PING_ROUNDS 15 /* a ": ping" after this many quiet one-second rounds */

/* End the event stream (the 200 went at its start; the client may resume
 * with Last-Event-ID). */
static void output_close(struct req *q)
{
	if (q->r) {
		forget_close(q);
		poll_end(q);
		evhttp_send_reply_end(q->r);
	}
	req_free(q);
}

static void sse_send(struct req *q, struct evbuffer *b)
{
	q->g->st.bytes_out += evbuffer_get_length(b);
	evhttp_send_reply_chunk(q->r, b);
}

/* One entry as an event: id, event (stdout, stderr, restart, end) and data,
 * a JSON object with attempt, data (or data_base64) and, at the end, status.
 * True at the end entry. */
static bool sse_entry(struct req *q, const redisReply *e, struct evbuffer *b)
{
	static const char *const event[] = {NULL, "stdout", "stderr", "restart", "end"};
	struct al_chunk ch;
	bool known = al_chunk_of_entry(e, &ch);
	json_t *j;
	char *text;

	if (ch.id[0])
		snprintf(q->last, sizeof(q->last), "%s", ch.id);
	if (!known)
		return false; /* unknown entries are not shown (newer workers may add some) */
	j = json_pack("{s:I}", "attempt", (json_int_t)ch.attempt);
	if (j && ch.data &&
	    al_json_set_bytes(j, "data", &(struct al_bytes){(char *)ch.data, ch.len})) {
		json_decref(j);
		j = NULL;
	}
	if (j && ch.kind == AL_CHUNK_END)
		json_object_set_new(j, "status", json_string(ch.status));
	if (ch.kind == AL_CHUNK_END) { /* a call's result comes instead; a job's with it */
		json_decref(j);
		q->end_attempt = ch.attempt;
		snprintf(q->state, sizeof(q->state), "%.15s", ch.status);
		return true;
	}
	text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	evbuffer_add_printf(b, "id: %s\nevent: %s\ndata: %s\n\n", q->last, event[ch.kind],
			    text ? text : "{}");
	free(text);
	json_decref(j);
	return ch.kind == AL_CHUNK_END;
}

/* The end event, with the result (read once the end entry or the record
 * said done: the script that wrote either wrote the result too). */
static void on_end_result(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;
	struct al_result res = {0};
	struct al_err err = {0};
	struct evbuffer *b;
	json_t *j;
	char *text;

	(void)ac;
	if (!q->r) {
		req_free(q);
		return;
	}
	j = json_pack("{s:I, s:s}", "attempt", (json_int_t)q->end_attempt, "status", q->state);
	if (j && r && r->type == REDIS_REPLY_STRING &&
	    !al_result_decode(r->str, r->len, &res, &err)) {
		json_object_set_new(j, "result", al_result_to_json(&res));
		al_result_free(&res);
	}
	text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if ((b = evbuffer_new())) {
		evbuffer_add_printf(b, "id: %s\nevent: end\ndata: %s\n\n", q->last,
				    text ? text : "{}");
		sse_send(q, b);
		evbuffer_free(b);
	}
	free(text);
	json_decref(j);
	output_close(q);
}

static void output_end(struct req *q)
{
	struct al_call c;

	al_result_get_call(&c, q->id);
	if (al_aconn_call(q->g->cmd, &c, on_end_result, q))
		output_close(q);
	al_call_free(&c);
}

static void on_output_state(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;

	(void)ac;
	if (!q->r) {
		req_free(q);
		return;
	}
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
		output_close(q);
		return;
	}
	/* done, and its end entry gone (trimmed or expired): end it so */
	if (r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "done")) {
		q->end_attempt = 0;
		snprintf(q->state, sizeof(q->state), "%s",
			 r->element[1]->type == REDIS_REPLY_STRING ? r->element[1]->str : "");
		output_end(q);
		return;
	}
	if (al_mono_ms() >= q->deadline_ms) {
		output_close(q); /* a long one: the client resumes */
		return;
	}
	gw_output_step(q);
}

static void on_xread(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;
	struct evbuffer *b;
	bool end = false, any = false;

	(void)ac;
	if (!q->r) {
		req_free(q);
		return;
	}
	if (!(b = evbuffer_new())) {
		output_close(q);
		return;
	}
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
	    r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements == 2) {
		const redisReply *es = r->element[0]->element[1];

		for (size_t i = 0; i < es->elements && !end; i++) {
			end = sse_entry(q, es->element[i], b);
			any = true;
		}
	}
	if (any)
		q->quiet = 0;
	else if (++q->quiet % SSE_PING_ROUNDS == 0)
		evbuffer_add_printf(b, ": ping\n\n");
	if (evbuffer_get_length(b))
		sse_send(q, b);
	evbuffer_free(b);
	if (q->kind == K_CALL && (end || !any)) {
		gw_call_look(q); /* its result, or its session's state */
	} else if (end) {
		output_end(q);
	} else if (!any) { /* quiet: has it ended without its end entry? */
		char k[AL_KEY_MAX];
		const char *argv[] = {"HMGET", al_key_job(k, q->id), "state", "status"};

		if (al_aconn_cmd(q->g->cmd, on_output_state, q, 4, argv, NULL))
			output_close(q);
	} else {
		gw_output_step(q);
	}
}

void gw_output_step(struct req *q)
{
	char k[AL_KEY_MAX];
	struct al_call c;

	al_call_init(&c, NULL);
	al_call_str(&c, "XREAD");
	al_call_str(&c, "COUNT");
	al_call_str(&c, "256");
	al_call_str(&c, "BLOCK");
	al_call_str(&c, "1000");
	al_call_str(&c, "STREAMS");
	al_call_str(&c, al_key_out(k, gw_answer_name(q)));
	al_call_str(&c, q->last);
	if (al_aconn_call(q->w->c, &c, on_xread, q))
		output_close(q);
	al_call_free(&c);
}

void gw_output_start(struct req *q)
{
	struct evkeyvalq *h;

	if (!q->r) {
		req_free(q);
		return;
	}
	if (!gw_poll_begin(q)) /* an error status, before any 200 */
		return;
	h = evhttp_request_get_output_headers(q->r);
	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-cache");
	evhttp_add_header(h, "X-Accel-Buffering", "no");
	count_reply(q->g, 200, 0);
	evhttp_send_reply_start(q->r, 200, "OK");
	q->streaming = true;
	if (q->kind != K_CALL) /* a call's is its time and some */
		q->deadline_ms = al_mono_ms() + GW_WAIT_MAX_MS;
	gw_output_step(q);
}

void gw_output_end(struct req *q, const char *event, json_t *doc)
{
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	struct evbuffer *b = q->r ? evbuffer_new() : NULL;

	json_decref(doc);
	if (b) {
		evbuffer_add_printf(b, "event: %s\ndata: %s\n\n", text ? event : "error",
				    text ? text : "{\"code\":500,\"error\":\"out of memory\"}");
		sse_send(q, b);
		evbuffer_free(b);
	}
	free(text);
	output_close(q);
}

/* Last-Event-ID (or ?after=): "0" or a stream entry id, MS-SEQ. */
static bool entry_id_ok(const char *s)
{
	size_t n = strspn(s, "0123456789");

	if (!n || n > 20)
		return false;
	if (!s[n])
		return !strcmp(s, "0");
	return s[n] == '-' && strspn(s + n + 1, "0123456789") == strlen(s + n + 1) &&
	       strlen(s + n + 1) >= 1 && strlen(s + n + 1) <= 20;
}

/* ---- routing ---- */

static void on_client_gone(struct evhttp_connection *evcon, void *arg)
{
	struct req *q = arg;

	(void)evcon;
	q->r = NULL; /* answered never; freed when its Redis step returns */
}

static bool id_ok(const char *s, size_t n)
{
	if (n == 0 || n > AL_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-",
			    s[i]))
			return false;
	return true;
}

static uint64_t query_ms(const struct evkeyvalq *qs, const char *name, bool *bad)
{
	const char *v = evhttp_find_header(qs, name);
	char *end;
	unsigned long long n;

	if (!v)
		return 0;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end || !*v || v[0] == '-')
		*bad = true;
	return n;
}

static void metrics(struct req *q)
{
	const struct gw_stats *s = &q->g->st;
	struct evbuffer *b = evbuffer_new();

	if (!b) {
		gw_reply_error(q, 500, "out of memory");
		return;
	}
	evbuffer_add_printf(b,
			    "# TYPE airlock_gateway_requests_total counter\n"
			    "airlock_gateway_requests_total %llu\n"
			    "# TYPE airlock_gateway_responses_total counter\n",
			    (unsigned long long)s->requests);
	for (int c = 1; c < 6; c++)
		evbuffer_add_printf(b, "airlock_gateway_responses_total{code=\"%dxx\"} %llu\n", c,
				    (unsigned long long)s->by_code[c]);
	evbuffer_add_printf(b,
			    "# TYPE airlock_gateway_bytes_in_total counter\n"
			    "airlock_gateway_bytes_in_total %llu\n"
			    "# TYPE airlock_gateway_bytes_out_total counter\n"
			    "airlock_gateway_bytes_out_total %llu\n"
			    "# TYPE airlock_gateway_jobs_submitted_total counter\n"
			    "airlock_gateway_jobs_submitted_total %llu\n"
			    "# TYPE airlock_gateway_unauthorized_total counter\n"
			    "airlock_gateway_unauthorized_total %llu\n"
			    "# TYPE airlock_gateway_idempotency_conflicts_total counter\n"
			    "airlock_gateway_idempotency_conflicts_total %llu\n",
			    (unsigned long long)s->bytes_in, (unsigned long long)s->bytes_out,
			    (unsigned long long)s->submitted, (unsigned long long)s->unauthorized,
			    (unsigned long long)s->idem_conflicts);
	gw_reply_send(q, 200, "text/plain; version=0.0.4", evbuffer_pullup(b, -1),
		      evbuffer_get_length(b));
	evbuffer_free(b);
}

/* ---- routes ---- */

/* /healthz: is Redis reachable (no key needed) */
static void serve_healthz(struct req *q, struct evkeyvalq *qs)
{
	bool up = al_aconn_is_up(q->g->cmd);

	(void)qs;
	gw_reply_json(q, up ? 200 : 503,
		      json_pack("{s:s, s:b}", "status", up ? "ok" : "redis down", "redis", up));
}

static void serve_metrics(struct req *q, struct evkeyvalq *qs)
{
	(void)qs;
	metrics(q);
}

/* POST /v1/jobs and /v1/run: the body is the job */
static void serve_submit(struct req *q, struct evkeyvalq *qs)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(q->r);
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(q->r));
	bool bad = false, run = !strcmp(path, "/v1/run");
	uint64_t wait_ms = query_ms(qs, "wait", &bad);
	size_t len = evbuffer_get_length(in);
	const char *body = (const char *)evbuffer_pullup(in, -1);
	const char *ctype =
	    evhttp_find_header(evhttp_request_get_input_headers(q->r), "Content-Type");

	if (bad) {
		gw_reply_error(q, 400, "wait: expected milliseconds");
		return;
	}
	q->kind = K_SUBMIT;
	gw_submit(q, body ? body : "", len, ctype && strstr(ctype, "msgpack"), run, wait_ms);
}

/* GET /v1/jobs/{id} (the result or the state), DELETE (cancel) */
static void serve_job(struct req *q, struct evkeyvalq *qs)
{
	(void)qs;
	q->kind = evhttp_request_get_command(q->r) == EVHTTP_REQ_DELETE ? K_CANCEL : K_GET;
	with_owned_job(q);
}

/* GET /v1/jobs/{id}/wait?timeout_ms= */
static void serve_wait(struct req *q, struct evkeyvalq *qs)
{
	bool bad = false;
	uint64_t ms = query_ms(qs, "timeout_ms", &bad);

	if (bad) {
		gw_reply_error(q, 400, "timeout_ms: expected milliseconds");
		return;
	}
	q->kind = K_WAIT;
	q->deadline_ms = al_mono_ms() + (ms ? (ms > GW_WAIT_MAX_MS ? GW_WAIT_MAX_MS : ms) : 30000);
	q->code_if_pending = 202;
	with_owned_job(q);
}

/* GET /v1/jobs/{id}/output: Server-Sent Events, from Last-Event-ID */
static void serve_output(struct req *q, struct evkeyvalq *qs)
{
	const char *after =
	    evhttp_find_header(evhttp_request_get_input_headers(q->r), "Last-Event-ID");

	if (!after)
		after = evhttp_find_header(qs, "after");
	snprintf(q->last, sizeof(q->last), "%s", after ? after : "0");
	if (!entry_id_ok(q->last)) {
		gw_reply_error(q, 400,
			       "Last-Event-ID: expected an event id (MS-SEQ, as sent) or 0");
		return;
	}
	q->kind = K_OUTPUT;
	with_owned_job(q);
}

/* The routes: a path (with_id: "/v1/jobs/" then a job id, then suffix),
 * whether it takes a tenant's key, the methods it takes, its handler. A
 * request no route matches is 404; one with another method, 405. */
static const struct route {
	const char *path;
	bool with_id;
	const char *suffix; /* with_id: what follows the id ("" for the job itself); ending
			     * in '/': a prefix, the rest of the path a file's (q->tail) */
	bool key;	    /* needs an API key (its tenant is the job's) */
	int methods;	    /* EVHTTP_REQ_* */
	const char *takes;  /* the methods, for 405's message */
	void (*serve)(struct req *q, struct evkeyvalq *qs);
} routes[] = {
    {"/healthz", false, NULL, false, EVHTTP_REQ_GET, "GET", serve_healthz},
    {"/metrics", false, NULL, false, EVHTTP_REQ_GET, "GET", serve_metrics},
    {"/v1/jobs", false, NULL, true, EVHTTP_REQ_POST, "POST", serve_submit},
    {"/v1/run", false, NULL, true, EVHTTP_REQ_POST, "POST", serve_submit},
    {"/v1/jobs/", true, "", true, EVHTTP_REQ_GET | EVHTTP_REQ_DELETE, "GET or DELETE", serve_job},
    {"/v1/jobs/", true, "/wait", true, EVHTTP_REQ_GET, "GET", serve_wait},
    {"/v1/jobs/", true, "/output", true, EVHTTP_REQ_GET, "GET", serve_output},
    {"/v1/sessions", false, NULL, true, EVHTTP_REQ_POST, "POST", gw_serve_session_open},
    {"/v1/sessions/", true, "", true, EVHTTP_REQ_DELETE, "DELETE", gw_serve_session_call},
    {"/v1/sessions/", true, "/calls", true, EVHTTP_REQ_POST, "POST", gw_serve_session_call},
    {"/v1/sessions/", true, "/exec", true, EVHTTP_REQ_POST, "POST", gw_serve_session_call},
    {"/v1/sessions/", true, "/run_python", true, EVHTTP_REQ_POST, "POST", gw_serve_session_call},
    {"/v1/sessions/", true, "/files", true, EVHTTP_REQ_GET, "GET", gw_serve_session_call},
    {"/v1/sessions/", true, "/files/", true, EVHTTP_REQ_GET | EVHTTP_REQ_PUT, "GET or PUT",
     gw_serve_session_call},
};

/* The route of path, its job id into id (with_id routes) and what follows
 * a prefix suffix into tail; NULL if none. */
static const struct route *route_of(const char *path, char id[AL_ID_MAX + 1], const char **tail)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const struct route *rt = &routes[i];
		size_t n = strlen(rt->path);
		const char *end;

		if (!rt->with_id) {
			if (!strcmp(path, rt->path))
				return rt;
			continue;
		}
		if (strncmp(path, rt->path, n))
			continue;
		end = strchr(path + n, '/');
		end = end ? end : path + strlen(path);
		if (!id_ok(path + n, (size_t)(end - path - (ptrdiff_t)n)))
			continue;
		if (*rt->suffix && rt->suffix[strlen(rt->suffix) - 1] == '/') {
			if (strncmp(end, rt->suffix, strlen(rt->suffix)) ||
			    !end[strlen(rt->suffix)])
				continue;
			*tail = end + strlen(rt->suffix);
		} else if (strcmp(end, rt->suffix)) {
			continue;
		}
		snprintf(id, AL_ID_MAX + 1, "%.*s", (int)(end - path - (ptrdiff_t)n), path + n);
		return rt;
	}
	return NULL;
}

void gw_on_request(struct evhttp_request *r, void *arg)
{
	struct gw *g = arg;
	struct req *q = calloc(1, sizeof(*q));
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(r);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL, *query;
	struct evbuffer *in = evhttp_request_get_input_buffer(r);
	struct evkeyvalq qs = {0};
	const struct route *rt;
	struct al_err why = {0};
	int refused;

	g->st.requests++;
	g->st.bytes_in += evbuffer_get_length(in);
	if (!q) {
		evhttp_send_error(r, 500, "out of memory");
		return;
	}
	q->g = g;
	q->r = r;
	evhttp_connection_set_closecb(evhttp_request_get_connection(r), on_client_gone, q);
	if ((refused = gw_conn_request(g, r, &why))) {
		gw_reply_error(q, refused, "%s", why.msg);
		return;
	}
	if (!path) {
		gw_reply_error(q, 400, "a request without a path");
		return;
	}
	rt = route_of(path, q->id, &q->tail);
	/* under /v1/ the key comes first: no endpoint is told to a stranger */
	if ((rt && rt->key) || (!rt && !strncmp(path, "/v1/", 4))) {
		if (!(q->t = gw_auth(g, evhttp_find_header(evhttp_request_get_input_headers(r),
							   "Authorization")))) {
			g->st.unauthorized++;
			evhttp_add_header(evhttp_request_get_output_headers(r), "WWW-Authenticate",
					  "Bearer realm=\"airlock\"");
			gw_reply_error(q, 401,
				       "a missing or unknown API key (Authorization: Bearer KEY)");
			return;
		}
		snprintf(q->tenant, sizeof(q->tenant), "%s", q->t->name);
	}
	if (!rt) {
		gw_reply_error(q, 404, "no such endpoint: %s (see docs/api.md)", path);
		return;
	}
	if (!(evhttp_request_get_command(r) & rt->methods)) {
		gw_reply_error(q, 405, "%s takes %s", path, rt->takes);
		return;
	}
	query = evhttp_uri_get_query(uri);
	if (query && evhttp_parse_query_str(query, &qs)) {
		gw_reply_error(q, 400, "a malformed query string");
		return;
	}
	rt->serve(q, &qs);
	evhttp_clear_headers(&qs);
}
