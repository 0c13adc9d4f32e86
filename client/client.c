/* client.c - the client library over a blocking hiredis connection. */
#include "client.h"
#include "client_int.h"
#include "gateway.h"

#include <ctype.h>
#include <hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "../proto/contract.h"
#include "../proto/call.h"
#include "../common/log.h"
#include "../common/redis_url.h"
#include "../common/clock.h"

#define IDEM_TTL_S 86400

#define FAILOVER_WAIT_MS 30000 /* Sentinel: how long a command waits for a new master */

static int open_conn(struct al_client *c, struct al_err *err);

/* Waiting for a failover's end: sleep *wait_ms, then double it (at most 2 s). */
static void backoff(uint64_t *wait_ms)
{
	struct timespec ts = {(time_t)(*wait_ms / 1000), (long)(*wait_ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
	*wait_ms = *wait_ms * 2 > 2000 ? 2000 : *wait_ms * 2;
}

struct al_client *al_client_connect_gateway(const char *url, const char *token, struct al_err *err)
{
	struct al_client *c = calloc(1, sizeof(*c));

	if (!c) {
		al_err_set(err, AL_ENOMEM, "out of memory");
		return NULL;
	}
	if (!(c->gw = al_gw_open(url, token, err))) {
		free(c);
		return NULL;
	}
	snprintf(c->where, sizeof(c->where), "%s", url);
	return c;
}

/* EVALSHA of a script Redis does not have (yet: a new master, a restart):
 * load it and send the command again, once. r is the first reply. */
static redisReply *load_script_if_missing(struct al_client *c, redisReply *r, int argc,
					  const char **argv, const size_t *lens)
{
	if (!r || r->type != REDIS_REPLY_ERROR || strncmp(r->str, "NOSCRIPT", 8) ||
	    strncmp(argv[0], "EVALSHA", 7))
		return r;
	for (size_t i = 0; al_lua_all[i]; i++) {
		if (strcmp(al_script_sha(al_lua_all[i]), argv[1]))
			continue;
		freeReplyObject(r);
		r = redisCommand(c->rc, "SCRIPT LOAD %s", al_lua_all[i]);
		if (r)
			freeReplyObject(r);
		return redisCommandArgv(c->rc, argc, argv, lens);
	}
	return r;
}

/* Run a command; NULL with err filled on a transport or Redis error. */
static redisReply *cmd(struct al_client *c, struct al_err *err, int argc, const char **argv,
		       const size_t *lens)
{
	redisReply *r;

	if (!c->rc && open_conn(c, err)) /* a failover that had not ended */
		return NULL;
	r = redisCommandArgv(c->rc, argc, argv, lens);

	r = load_script_if_missing(c, r, argc, argv, lens);

	/* Through Sentinel: a lost connection or a master that became a
	 * replica is a failover; follow it (capped backoff) and send the
	 * command again (the scripts are safe to repeat). */
	if (c->url.nsentinels &&
	    (!r || (r->type == REDIS_REPLY_ERROR &&
		    (!strncmp(r->str, "READONLY", 8) || !strncmp(r->str, "MASTERDOWN", 10))))) {
		uint64_t t0 = al_mono_ms(), wait_ms = 100;
		struct al_err e2 = {0};

		while (al_mono_ms() - t0 < FAILOVER_WAIT_MS) {
			if (r)
				freeReplyObject(r);
			r = NULL;
			redisFree(c->rc);
			c->rc = NULL;
			if (!open_conn(c, &e2) &&
			    (r = load_script_if_missing(
				 c, redisCommandArgv(c->rc, argc, argv, lens), argc, argv, lens)) &&
			    !(r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "READONLY", 8))) {
				c->retried = true;
				break;
			}
			backoff(&wait_ms);
		}
		if (!c->rc) {
			al_err_set(err, AL_EREDIS, "redis %s: no master within %d ms: %s", c->where,
				   FAILOVER_WAIT_MS, e2.msg);
			if (r)
				freeReplyObject(r);
			return NULL;
		}
	}
	if (!r) {
		al_err_set(err, AL_EREDIS, "redis %s: %s", c->where,
			   c->rc->errstr[0] ? c->rc->errstr : "connection lost");
		return NULL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		al_err_set(err, AL_EREDIS, "redis %s: %s", c->where, r->str);
		freeReplyObject(r);
		return NULL;
	}
	return r;
}

/* Run a built call (the caller keeps and frees it). */
static redisReply *run_call(struct al_client *c, struct al_err *err, struct al_call *call)
{
	int argc;
	const char **argv;
	const size_t *lens;

	if (al_call_argv(call, &argc, &argv, &lens)) {
		al_err_set(err, AL_ENOMEM, "out of memory");
		return NULL;
	}
	return cmd(c, err, argc, argv, lens);
}

/* Run a built call and free it. */
redisReply *al_client_run_once(struct al_client *c, struct al_err *err, struct al_call *call)
{
	redisReply *r = run_call(c, err, call);

	al_call_free(call);
	return r;
}

/* (Re)connect to c->url (through its sentinels: to the master they name
 * now), AUTH and SELECT; AL_OK or AL_EREDIS with err. */
static int open_conn(struct al_client *c, struct al_err *err)
{
	struct al_redis_url *u = &c->url;
	struct timeval tv = {5, 0};
	char where[280];

	if (u->nsentinels) {
		/* a failover under way (the master named is gone): wait for
		 * its end, as a command in flight does */
		uint64_t t0 = al_mono_ms(), wait_ms = 100;
		bool failover = false;

		while (al_sentinel_resolve(u, 500, &failover, err)) {

			if (!failover || al_mono_ms() - t0 >= FAILOVER_WAIT_MS)
				return AL_EREDIS;
			backoff(&wait_ms);
		}
	}
	al_redis_url_where(u, where, sizeof(where));
	snprintf(c->where, sizeof(c->where), "%s", where);
	c->rc = u->path[0] ? redisConnectUnixWithTimeout(u->path, tv)
			   : redisConnectWithTimeout(u->host, u->port, tv);
	if (!c->rc || c->rc->err) {
		al_err_set(err, AL_EREDIS, "cannot reach Redis at %s: %s", where,
			   c->rc ? c->rc->errstr : "out of memory");
		goto fail_conn;
	}
	if (al_redis_auth(c->rc, u->user, u->password, err)) {
		al_err_wrap(err, "redis %s", where);
		goto fail_conn;
	}
	if (u->db) {
		redisReply *r = redisCommand(c->rc, "SELECT %d", u->db);

		if (!r || r->type == REDIS_REPLY_ERROR) {
			al_err_set(err, AL_EREDIS, "redis %s: SELECT %d failed", where, u->db);
			if (r)
				freeReplyObject(r);
			goto fail_conn;
		}
		freeReplyObject(r);
	}
	return AL_OK;
fail_conn:
	if (c->rc)
		redisFree(c->rc);
	c->rc = NULL;
	return AL_EREDIS;
}

struct al_client *al_client_connect(const char *url, struct al_err *err)
{
	struct al_client *c = calloc(1, sizeof(*c));

	if (!c) {
		al_err_set(err, AL_ENOMEM, "out of memory");
		return NULL;
	}
	if (al_redis_url_parse(url, &c->url, err) || open_conn(c, err)) {
		al_client_close(c);
		return NULL;
	}
	return c;
}

void al_client_close(struct al_client *c)
{
	if (!c)
		return;
	if (c->rc)
		redisFree(c->rc);
	al_gw_close(c->gw);
	free(c);
}

/* min_replicas: WAIT until that many replicas have what this connection
 * wrote; an error saying how many did when they are fewer. */
static int wait_replicas(struct al_client *c, const char *what, struct al_err *err)
{
	struct al_call call;
	redisReply *r;
	long long got;

	al_wait_call(&call, (unsigned)c->url.min_replicas, (unsigned)c->url.replica_timeout_ms);
	r = al_client_run_once(c, err, &call);
	if (!r)
		return AL_EREDIS;
	got = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
	freeReplyObject(r);
	if (got >= c->url.min_replicas)
		return AL_OK;
	return al_err_set(err, AL_EREDIS,
			  "%s reached %lld of the %d replicas asked for (min_replicas) within %d "
			  "ms: it is on the master, and a failover now could lose it; submit again "
			  "with the same idempotency key to be sure",
			  what, got < 0 ? 0 : got, c->url.min_replicas, c->url.replica_timeout_ms);
}

int al_client_submit_many(struct al_client *c, struct al_job *jobs, size_t n,
			  char (*ids_out)[AL_ID_MAX + 1], enum al_submit_code *code,
			  struct al_err *err)
{
	struct al_call call;
	struct al_buf body = {0};
	char gen[33];
	redisReply *r = NULL;
	int rc = AL_OK;

	if (c->gw) { /* one request each; the gateway chooses the ids */
		for (size_t i = 0; i < n; i++) {
			bool same = false;

			if ((rc = al_gw_submit(c->gw, &jobs[i], ids_out[i], &same, err)))
				return rc;
			code[i] = same ? AL_SUBMIT_SAME_KEY : AL_SUBMIT_ACCEPTED;
		}
		return AL_OK;
	}
	al_call_init(&call, al_lua_submit);
	c->retried = false;
	for (size_t i = 0; i < n; i++) {
		struct al_job *job = &jobs[i];

		if (!job->id) {
			if ((rc = al_job_new_id(gen, err)))
				goto out_call;
			if (!(job->id = strdup(gen))) {
				rc = al_err_set(err, AL_ENOMEM, "out of memory");
				goto out_call;
			}
		}
		if (!job->submitted_ms)
			job->submitted_ms = al_now_ms();
		al_buf_reset(&body);
		if ((rc = al_job_encode(job, &body, err)))
			goto out_call;
		al_submit_add(&call, &(struct al_submit_item){.id = job->id,
							      .tier = job->tier,
							      .tenant = job->tenant,
							      .job = body.data,
							      .joblen = body.len,
							      .now_ms = job->submitted_ms,
							      .idem_key = job->idempotency_key,
							      .idem_ttl_s = IDEM_TTL_S});
	}
	if (!(r = run_call(c, err, &call))) {
		rc = AL_EREDIS;
		goto out_call;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements != n) {
		rc = al_err_set(err, AL_EREDIS, "submit: unexpected reply from Redis");
		goto out_call;
	}
	for (size_t i = 0; i < n; i++) {
		redisReply *e = r->element[i];

		if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_STRING) {
			rc = al_err_set(err, AL_EREDIS, "submit: unexpected reply from Redis");
			goto out_call;
		}
		code[i] = (enum al_submit_code)e->element[0]->integer;
		snprintf(ids_out[i], AL_ID_MAX + 1, "%s", e->element[1]->str);
	}
	if (c->url.min_replicas)
		rc = wait_replicas(c, n == 1 ? "the submission" : "the submissions", err);
out_call:
	if (r)
		freeReplyObject(r);
	al_buf_free(&body);
	al_call_free(&call);
	return rc;
}

int al_client_submit(struct al_client *c, struct al_job *job, char id_out[AL_ID_MAX + 1],
		     bool *existing, struct al_err *err)
{
	char ids[1][AL_ID_MAX + 1];
	enum al_submit_code code = AL_SUBMIT_ACCEPTED;
	int rc = al_client_submit_many(c, job, 1, ids, &code, err);

	*existing = false;
	if (rc)
		return rc;
	/* sent again after a failover: the first one went in */
	if (code == AL_SUBMIT_ID_TAKEN && c->retried)
		code = AL_SUBMIT_ACCEPTED;
	if (code == AL_SUBMIT_ID_TAKEN)
		return al_err_set(err, AL_EINVAL, "id: job \"%s\" already exists", job->id);
	*existing = code == AL_SUBMIT_SAME_KEY;
	snprintf(id_out, AL_ID_MAX + 1, "%s", ids[0]);
	return AL_OK;
}

static int get_result(struct al_client *c, const char *id, struct al_result *res, bool *found,
		      struct al_err *err)
{
	struct al_call get;
	redisReply *r;
	int rc = AL_OK;

	al_result_get_call(&get, id);
	r = al_client_run_once(c, err, &get);
	if (!r)
		return AL_EREDIS;
	*found = r->type == REDIS_REPLY_STRING;
	if (*found && al_result_decode(r->str, r->len, res, err))
		rc = al_err_wrap(err, "result of %s", id);
	freeReplyObject(r);
	return rc;
}

/* AWAIT: the result of id (*found), or in after the id of its live
 * output's newest entry: the end entry that every result's script appends
 * comes after it. */
static int await_result(struct al_client *c, const char *id, struct al_result *res, bool *found,
			char after[AL_STREAM_ID_MAX], struct al_err *err)
{
	struct al_call call;
	redisReply *r, *e;
	int rc = AL_OK;

	al_await_call(&call, id);
	r = al_client_run_once(c, err, &call);
	if (!r)
		return AL_EREDIS;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER ||
	    (e = r->element[1])->type != REDIS_REPLY_STRING ||
	    (r->element[0]->integer != 1 && e->len >= AL_STREAM_ID_MAX)) {
		freeReplyObject(r);
		return al_err_set(err, AL_EREDIS, "unexpected answer to AWAIT for %s", id);
	}
	*found = r->element[0]->integer == 1;
	if (*found && al_result_decode(e->str, e->len, res, err))
		rc = al_err_wrap(err, "result of %s", id);
	else if (!*found)
		memcpy(after, e->str, e->len + 1);
	freeReplyObject(r);
	return rc;
}

/* Block until anything comes to id's live output after after (at most
 * left_ms, and a second). A Redis user that may not XREAD (an ACL from
 * before live output) polls instead, every END_POLL_MS. */
#define END_POLL_MS 100
static int end_wait(struct al_client *c, const char *id, const char *after, uint64_t left_ms,
		    struct al_err *err)
{
	struct al_call call;
	redisReply *r;

	if (!c->no_xread) {
		al_end_wait_call(&call, id, after, left_ms > 1000 ? 1000 : (unsigned)left_ms);
		r = al_client_run_once(c, err, &call);
		if (r) {
			freeReplyObject(r);
			return AL_OK;
		}
		if (!strstr(err->msg, "NOPERM"))
			return AL_EREDIS;
		c->no_xread = true;
		*err = (struct al_err){0};
	}
	{
		uint64_t ms = left_ms < END_POLL_MS ? left_ms : END_POLL_MS;
		struct timespec ts = {0, (long)ms * 1000000L};

		nanosleep(&ts, NULL);
	}
	return AL_OK;
}

int al_client_wait(struct al_client *c, const char *id, uint64_t timeout_ms, struct al_result *res,
		   struct al_err *err)
{
	if (c->gw)
		return al_gw_wait(c->gw, id, timeout_ms, res, err);
	uint64_t deadline = timeout_ms ? al_now_ms() + timeout_ms : 0;
	char after[AL_STREAM_ID_MAX];
	bool found;
	int rc;

	for (;;) {
		uint64_t left;

		if ((rc = await_result(c, id, res, &found, after, err)) || found)
			return rc;
		left = deadline ? (deadline > al_now_ms() ? deadline - al_now_ms() : 0) : 1000;
		if (deadline && left == 0)
			return al_err_set(err, AL_EREDIS, "timed out waiting for %s", id);
		if ((rc = end_wait(c, id, after, left, err)))
			return rc;
	}
}

/* A reply element's text, or NULL when it is not one. */
static const char *text_of(const redisReply *e)
{
	return e->type == REDIS_REPLY_STRING ? e->str : NULL;
}

/* The session's end as a call's result: status session_ended, why. */
static int session_ended(const struct al_sess_call *call, const char *reason, struct al_result *res)
{
	char msg[AL_ERR_MSG_MAX];

	snprintf(msg, sizeof(msg), "session_ended: %s", reason && *reason ? reason : "ended");
	memset(res, 0, sizeof(*res));
	res->version = AL_PROTO_VERSION;
	res->id = strdup(call->id);
	res->status = AL_ST_SESSION_ENDED;
	res->error = strdup(msg);
	return res->id && res->error ? AL_OK : AL_ENOMEM;
}

/* An info call to a paused session: its record's answer, as the result's
 * stdout (status ok). */
static int paused_info(const struct al_sess_call *call, const redisReply *json,
		       struct al_result *res)
{
	memset(res, 0, sizeof(*res));
	res->version = AL_PROTO_VERSION;
	res->status = AL_ST_OK;
	res->has_exit_code = true;
	if (!(res->id = strdup(call->id)) ||
	    !(res->out.data = strdup(json && json->type == REDIS_REPLY_STRING ? json->str : "{}")))
		return AL_ENOMEM;
	res->out.len = strlen(res->out.data);
	return AL_OK;
}

int al_client_session_call(struct al_client *c, struct al_sess_call *call, uint64_t timeout_ms,
			   struct al_result *res, struct al_err *err)
{
	uint64_t deadline = timeout_ms ? al_now_ms() + timeout_ms : 0;
	struct al_buf b = {0};
	struct al_call q;
	redisReply *r;
	char id[33], name[AL_CALL_KEY_MAX];
	int rc;

	if (c->gw)
		return al_gw_session_call(c->gw, call, timeout_ms, res, err);
	if (!call->id && (al_job_new_id(id, err) || !(call->id = strdup(id))))
		return err->code ? err->code : al_err_set(err, AL_ENOMEM, "out of memory");
	if (!call->tenant && !(call->tenant = strdup("default")))
		return al_err_set(err, AL_ENOMEM, "out of memory");
	call->version = AL_PROTO_VERSION;
	if (!call->submitted_ms)
		call->submitted_ms = al_now_ms();
	if ((rc = al_sess_call_encode(call, &b, err)))
		return rc;
	al_session_queue_call(&q, call->session, call->tenant, b.data, b.len);
	al_buf_free(&b);
	r = al_client_run_once(c, err, &q);
	if (!r)
		return AL_EREDIS;
	rc = r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
		     r->element[0]->type != REDIS_REPLY_INTEGER
		 ? al_err_set(err, AL_EREDIS, "SESSION_CALL: unexpected answer")
	     : r->element[0]->integer == AL_SESS_Q_UNKNOWN
		 ? al_err_set(err, AL_EINVAL, "no session %s", call->session)
	     : r->element[0]->integer == AL_SESS_Q_MISMATCH
		 ? al_err_set(err, AL_EINVAL, "SESSION_CALL refused the call: %s",
			      r->elements > 1 && r->element[1]->type == REDIS_REPLY_STRING
				  ? r->element[1]->str
				  : "?")
	     : r->element[0]->integer == AL_SESS_Q_ENDED
		 ? session_ended(call,
				 r->elements > 1 && r->element[1]->type == REDIS_REPLY_STRING
				     ? r->element[1]->str
				     : NULL,
				 res)
	     : r->element[0]->integer == AL_SESS_Q_PAUSED_INFO
		 ? paused_info(call, r->elements > 1 ? r->element[1] : NULL, res)
		 : 1;
	freeReplyObject(r);
	if (rc != 1)
		return rc;
	al_call_key_name(name, call->session, call->id); /* its answer's keys */
	for (;;) {
		struct al_call look;
		char after[AL_STREAM_ID_MAX];
		bool found;
		uint64_t left;

		if ((rc = await_result(c, name, res, &found, after, err)) || found)
			return rc;
		/* ended, or its worker stopped renewing it: no answer will come */
		al_session_read_call(&look, call->session);
		r = al_client_run_once(c, err, &look);
		if (!r)
			return AL_EREDIS;
		if (r->type == REDIS_REPLY_ARRAY && r->elements == 5) {
			const char *why =
			    al_session_end_seen(text_of(r->element[1]), text_of(r->element[2]));

			if (why) { /* one more look for its result, then the end */
				if (!(rc = get_result(c, name, res, &found, err)) && !found)
					rc = session_ended(call, why, res);
				freeReplyObject(r);
				return rc;
			}
		}
		freeReplyObject(r);
		left = deadline ? (deadline > al_now_ms() ? deadline - al_now_ms() : 0) : 1000;
		if (deadline && left == 0)
			return al_err_set(err, AL_EREDIS, "timed out waiting for call %s",
					  call->id);
		if ((rc = end_wait(c, name, after, left, err)))
			return rc;
	}
}

int al_client_stream(struct al_client *c, const char *id, const char *after, uint64_t timeout_ms,
		     al_chunk_fn fn, void *arg, struct al_err *err)
{
	if (c->gw)
		return al_gw_stream(c->gw, id, after, timeout_ms, fn, arg, err);
	char key[AL_KEY_MAX], job[AL_KEY_MAX], res[AL_KEY_MAX], sub[AL_KEY_MAX], last[48],
	    block[24];
	const char *known[4] = {"EXISTS", job, res, sub};
	uint64_t deadline = timeout_ms ? al_now_ms() + timeout_ms : 0;
	redisReply *r;

	al_key_out(key, id);
	al_key_job(job, id);
	al_key_res(res, id);
	al_key_sub(sub, id); /* submitted, not admitted yet */
	if (!(r = cmd(c, err, 4, known, NULL)))
		return AL_EREDIS;
	if (r->type != REDIS_REPLY_INTEGER || r->integer == 0) {
		freeReplyObject(r);
		return al_err_set(err, AL_EINVAL, "unknown job %s", id);
	}
	freeReplyObject(r);
	snprintf(last, sizeof(last), "%s", after && *after ? after : "0");
	for (;;) {
		uint64_t left =
		    deadline ? (deadline > al_now_ms() ? deadline - al_now_ms() : 0) : 1000;
		const char *argv[8] = {"XREAD", "COUNT",   "256", "BLOCK",
				       block,	"STREAMS", key,	  last};
		bool got = false;

		if (deadline && left == 0)
			return al_err_set(err, AL_EREDIS, "timed out following %s's output", id);
		snprintf(block, sizeof(block), "%llu",
			 (unsigned long long)(left > 1000 ? 1000 : left));
		if (!(r = cmd(c, err, 8, argv, NULL)))
			return AL_EREDIS;
		/* [[key, [entry, ...]]], or nil when nothing came */
		if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
		    r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements == 2) {
			const redisReply *es = r->element[0]->element[1];

			for (size_t i = 0; i < es->elements; i++) {
				struct al_chunk ch;

				bool is_chunk = al_chunk_of_entry(es->element[i], &ch);

				if (ch.id[0]) /* an unknown entry is passed over, not read again */
					snprintf(last, sizeof(last), "%s", ch.id);
				if (!is_chunk)
					continue;
				got = true;
				if (fn(&ch, arg) || ch.kind == AL_CHUNK_END) {
					freeReplyObject(r);
					return AL_OK;
				}
			}
		}
		freeReplyObject(r);
		if (!got) { /* nothing new: a result without its end entry (expired) ends it too */
			const char *has[2] = {"EXISTS", res};

			if (!(r = cmd(c, err, 2, has, NULL)))
				return AL_EREDIS;
			got = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
			freeReplyObject(r);
			if (got)
				return AL_OK;
		}
	}
}

int al_client_status(struct al_client *c, const char *id, enum al_job_state *state,
		     struct al_result *res, struct al_err *err)
{
	if (c->gw)
		return al_gw_status(c->gw, id, state, res, err);
	struct al_call call;
	redisReply *r;
	bool found;
	int rc, s;

	memset(res, 0, sizeof(*res));
	al_lookup_call(&call, id); /* the record's state, or "submitted" from the marker */
	r = al_client_run_once(c, err, &call);
	if (!r)
		return AL_EREDIS;
	s = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
		    r->element[0]->type == REDIS_REPLY_STRING
		? al_job_state_parse(r->element[0]->str)
		: -2;
	freeReplyObject(r);
	if ((rc = get_result(c, id, res, &found, err)))
		return rc;
	if (found)
		s = AL_JS_DONE;
	else if (s == -2)
		return al_err_set(err, AL_EINVAL,
				  "no job \"%s\" (never submitted, or its result expired)", id);
	else if (s < 0)
		return al_err_set(err, AL_EREDIS, "job \"%s\": its record has an unknown state",
				  id);
	*state = (enum al_job_state)s;
	return AL_OK;
}

/* A cancel is a request on the intake that the scheduler carries out and
 * answers on al:reply:<nonce> (the client may not write records or
 * results); waited for in one-second BLPOPs, as results are. */
int al_client_cancel(struct al_client *c, const char *id, struct al_err *err)
{
	if (c->gw)
		return al_gw_cancel(c->gw, id, err);
	char nonce[33];
	struct al_call call;
	redisReply *r;
	int rc;

	if (!al_job_id_ok(id, strlen(id)))
		return al_err_set(err, AL_EINVAL, "no job \"%s\" (not a well-formed job id)", id);
	if ((rc = al_job_new_id(nonce, err)))
		return rc;
	al_cancel_request_call(&call, id, nonce);
	r = al_client_run_once(c, err, &call);
	if (!r)
		return AL_EREDIS;
	freeReplyObject(r);
	for (int i = 0; i < AL_CANCEL_WAIT_S; i++) {
		al_reply_wait_call(&call, nonce, 1000);
		r = al_client_run_once(c, err, &call);
		if (!r)
			return AL_EREDIS;
		rc = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
			     r->element[1]->type == REDIS_REPLY_STRING
			 ? (int)strtol(r->element[1]->str, NULL, 10)
			 : -9;
		if (r->type == REDIS_REPLY_NIL) {
			freeReplyObject(r);
			continue;
		}
		freeReplyObject(r);
		if (rc == AL_CANCEL_UNKNOWN)
			return al_err_set(err, AL_EINVAL, "no job \"%s\"", id);
		if (rc < 0 || rc > AL_CANCEL_KILL_SENT)
			return al_err_set(err, AL_EREDIS, "cancel: unexpected reply");
		return rc;
	}
	return AL_CANCEL_REQUESTED; /* on the intake: carried out when a scheduler reads it */
}
