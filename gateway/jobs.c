/* jobs.c - the job endpoints' Redis steps: a submit (ids, idempotency
 * keys, the body's digest, replication), and a job of the caller's: its
 * owner checked, then its result, a wait, a cancel or its live output. */
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
	gw_reply_pending(q, 202);
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
		gw_reply_pending(q, 202);
		return;
	}
	gw_start_wait(q, q->wait_ms, 202);
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
		return AL_ESYS;
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
		gw_req_free(q);
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
	case K_WAIT: gw_await_result(q); break;
	case K_OUTPUT: gw_output_start(q); break;
	default: /* K_GET: the result if there is one, else the state */
		q->deadline_ms = 0;
		q->code_if_pending = 200;
		gw_await_result(q);
	}
}

void gw_with_owned_job(struct req *q)
{
	struct al_call c;

	al_lookup_call(&c, q->id);
	if (al_aconn_call(q->g->cmd, &c, on_owner, q))
		gw_reply_error(q, 500, "out of memory");
	al_call_free(&c);
}
