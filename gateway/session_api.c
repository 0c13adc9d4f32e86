/* session.c - the gateway's session endpoints (docs/api.md, "Sessions"):
 * open one (a job with "session": true, waited for), and its calls: each
 * queued with SESSION_CALL for the key's tenant (another tenant's session
 * is 404, as an unknown one), then waited for on a long-poll connection
 * in one-second rounds, the session's record looked at between them, so
 * that a session that ended (or whose worker is lost) answers 410 instead
 * of a wait that never ends. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/opt.h"
#include "../proto/contract.h"
#include "../proto/json.h"
#include "../proto/result.h"
#include "../proto/call.h"
#include "req.h"

#define CALL_SLACK_MS 30000 /* a call is waited for its time plus this */

/* The request's body and whether it is msgpack. */
static const char *body_of(struct req *q, size_t *len, bool *msgpack)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(q->r);
	const char *body = (const char *)evbuffer_pullup(in, -1);
	const char *ctype =
	    evhttp_find_header(evhttp_request_get_input_headers(q->r), "Content-Type");

	*len = evbuffer_get_length(in);
	*msgpack = ctype && strstr(ctype, "msgpack");
	return body ? body : "";
}

void gw_serve_session_open(struct req *q, struct evkeyvalq *qs)
{
	size_t len;
	bool msgpack;
	const char *body = body_of(q, &len, &msgpack);

	(void)qs;
	q->kind = K_SESSION_OPEN;
	gw_submit(q, body, len, msgpack, true, 0);
}

static void call_step(struct req *q);

/* 410: the session has ended. why is "REASON" or "REASON: detail" (a
 * result's error after "session_ended: "); reason is the word alone. */
static void ended(struct req *q, const char *why)
{
	char msg[AL_ERR_MSG_MAX];

	snprintf(msg, sizeof(msg), "session_ended: %s", why);
	gw_reply_json(q, 410,
		      json_pack("{s:s, s:s, s:s#}", "id", q->session, "error", msg, "reason", why,
				(int)strcspn(why, ":")));
}

/* The call's result, as its op wants it: a file's bytes, a close's word,
 * else the result (msgpack or JSON); session_ended is 410. */
static void answer(struct req *q, const char *raw, size_t len)
{
	struct al_result res = {0};
	struct al_err err = {0};

	if (al_result_decode(raw, len, &res, &err)) {
		gw_reply_error(q, 500, "the stored result does not decode: %s", err.msg);
		return;
	}
	if (res.status == AL_ST_SESSION_ENDED) {
		const char *why = res.error && !strncmp(res.error, "session_ended: ", 15)
				      ? res.error + 15
				      : "ended";

		ended(q, why);
	} else if (q->streaming) {
		gw_reply_json(q, 200,
			      json_pack("{s:s, s:s, s:o*}", "id", q->id, "state", "done", "result",
					al_result_to_json(&res)));
	} else if (!q->op_of_path) { /* /calls: the result, whatever the op */
		gw_reply_result(q, raw, len);
	} else if (q->op == AL_SESS_CLOSE) {
		gw_reply_json(q, 200,
			      json_pack("{s:s, s:s}", "id", q->session, "session", "closed"));
	} else if (q->op == AL_SESS_INFO && res.status == AL_ST_OK) { /* its JSON as it is */
		gw_reply_send(q, 200, "application/json", res.out.data ? res.out.data : "{}",
			      res.out.data ? res.out.len : 2);
	} else if (q->op == AL_SESS_GET && res.status == AL_ST_OK && !res.out_truncated) {
		gw_reply_send(q, 200, "application/octet-stream", res.out.data ? res.out.data : "",
			      res.out.len);
	} else if (q->op == AL_SESS_GET) {
		gw_reply_error(q, res.out_truncated ? 413 : 404, "%s",
			       res.out_truncated ? "the file is larger than the worker's cap"
			       : res.error	 ? res.error
						 : "not found");
	} else {
		gw_reply_result(q, raw, len);
	}
	al_result_free(&res);
}

static void on_look(redisAsyncContext *ac, void *reply, void *priv);

/* Send call on conn, its answer to fn(q): reliably, so that a call (or a
 * look at its answer) waits out a Redis restart as a live stream does (a
 * call sent again runs once: its worker knows its id). */
static void send_on(struct req *q, struct al_aconn *conn, struct al_call *c, redisCallbackFn *fn)
{
	if (al_aconn_call(conn, c, fn, q))
		gw_reply_error(q, 500, "out of memory");
	al_call_free(c);
}

/* A reply element's text, or NULL when it is not one. */
static const char *text_of(const redisReply *e)
{
	return e->type == REDIS_REPLY_STRING ? e->str : NULL;
}

static void on_result(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	const redisReply *res = gw_awaited(q, reply);
	struct al_call c;

	(void)ac;
	if (res) {
		answer(q, res->str, res->len);
		return;
	}
	if (!q->r) { /* the client went */
		gw_reply_send(q, 499, "text/plain", "", 0);
		return;
	}
	if (q->state[0]) { /* the session ended, and no result came: 410 */
		ended(q, q->state);
		return;
	}
	al_session_read_call(&c, q->session);
	send_on(q, q->g->cmd, &c, on_look);
}

static void get_result(struct req *q)
{
	struct al_call c;

	al_await_call(&c, q->call_key);
	send_on(q, q->g->cmd, &c, on_result);
}

/* The session's record between rounds: ended, or its lease run out. */
static void on_look(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 5) {
		const char *why =
		    al_session_end_seen(text_of(r->element[1]), text_of(r->element[2]));

		if (why) { /* one more look for its result, then 410 */
			snprintf(q->state, sizeof(q->state), "%s", why);
			get_result(q);
			return;
		}
	}
	if (al_mono_ms() >= q->deadline_ms && q->fetch) {
		gw_reply_json(q, 202,
			      json_pack("{s:s, s:s, s:s}", "id", q->id, "session", q->session,
					"state", "pending"));
		return;
	}
	if (al_mono_ms() >= q->deadline_ms) {
		gw_reply_json(q, 504,
			      json_pack("{s:s, s:s, s:s}", "id", q->id, "session", q->session,
					"error",
					"no answer within the call's time and 30 s: the "
					"session's worker may be stalled"));
		return;
	}
	if (q->streaming)
		gw_output_step(q);
	else
		call_step(q);
}

static void call_look(struct req *q)
{
	get_result(q);
}

static void on_done(redisAsyncContext *ac, void *reply, void *priv)
{
	(void)ac;
	(void)reply;
	get_result(priv);
}

/* One round: wait at most a second for anything after the call's live
 * output's newest entry (its result's end entry comes there), then read. */
static void call_step(struct req *q)
{
	struct al_call c;

	if (!gw_poll_begin(q))
		return;
	gw_end_wait_call(&c, q);
	send_on(q, q->w->c, &c, on_done);
}

/* An info call to a paused session: the record's JSON, as it is (GET
 * /v1/sessions/<id>), or as a call's result's stdout (/calls). */
static void paused_info(struct req *q, const char *json, size_t len)
{
	struct al_result res = {.version = AL_PROTO_VERSION,
				.id = q->id,
				.status = AL_ST_OK,
				.has_exit_code = true,
				.out = {(char *)json, len}};
	struct al_buf b = {0};
	struct al_err err = {0};

	if (q->op_of_path)
		gw_reply_send(q, 200, "application/json", json, len);
	else if (al_result_encode(&res, &b, &err))
		gw_reply_error(q, 500, "%s", err.msg);
	else
		gw_reply_result(q, b.data, b.len);
	al_buf_free(&b);
}

static void on_queued(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER) {
		gw_reply_error(q, 502, "unexpected answer from Redis to the call");
	} else if (r->element[0]->integer == AL_SESS_Q_UNKNOWN) {
		gw_reply_error(q, 404, "no session %s", q->session);
	} else if (r->element[0]->integer == AL_SESS_Q_MISMATCH) { /* not the gateway's own */
		gw_reply_error(q, 500, "SESSION_CALL refused the gateway's call: %s",
			       r->elements > 1 && r->element[1]->type == REDIS_REPLY_STRING
				   ? r->element[1]->str
				   : "?");
	} else if (r->element[0]->integer == AL_SESS_Q_ENDED) {
		ended(q, r->elements > 1 && r->element[1]->type == REDIS_REPLY_STRING
			     ? r->element[1]->str
			     : "ended");
	} else if (r->element[0]->integer == AL_SESS_Q_PAUSED_INFO && r->elements > 1 &&
		   r->element[1]->type == REDIS_REPLY_STRING) { /* paused: its record answers */
		paused_info(q, r->element[1]->str, r->element[1]->len);
	} else if (q->want_stream) {
		snprintf(q->last, sizeof(q->last), "0"); /* its output from the start */
		q->look = call_look;
		gw_output_start(q);
	} else {
		call_step(q);
	}
}

static void serve_call(struct req *q, const char *op, const char *path, const char *body,
		       size_t len, bool msgpack);

void gw_serve_session_call(struct req *q, struct evkeyvalq *qs)
{
	const char *upath = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(q->r));
	enum evhttp_cmd_type m = evhttp_request_get_command(q->r);
	const char *rest = strchr(upath + strlen("/v1/sessions/"), '/');
	size_t len;
	bool msgpack;
	const char *body = body_of(q, &len, &msgpack);
	const char *op = m == EVHTTP_REQ_DELETE		? "close"
			 : !rest			? "info"
			 : !strcmp(rest, "/exec")	? "exec"
			 : !strcmp(rest, "/run_python") ? "python"
			 : !strcmp(rest, "/files")	? "ls"
			 : q->tail			? (m == EVHTTP_REQ_PUT ? "put" : "get")
							: NULL; /* /calls: the body's */
	char *path = q->tail ? evhttp_uridecode(q->tail, 0, NULL) : NULL;

	(void)qs;
	snprintf(q->session, sizeof(q->session), "%s", q->id);
	q->op_of_path = op && (!strcmp(op, "close") || !strcmp(op, "get") || !strcmp(op, "ls") ||
			       !strcmp(op, "put") || !strcmp(op, "info"));
	serve_call(q, op, path, body, len, msgpack);
	free(path);
}

static void serve_call(struct req *q, const char *op, const char *path, const char *body,
		       size_t len, bool msgpack)
{
	struct al_sess_call call = {0};
	struct al_buf mp = {0};
	struct al_err err = {0};
	struct al_call c;
	int rc;

	q->kind = K_CALL;
	if (gw_new_id(q->id)) {
		gw_reply_error(q, 500, "no randomness for an id");
		return;
	}
	if (op && (!strcmp(op, "put") || !strcmp(op, "get") || !strcmp(op, "ls") ||
		   !strcmp(op, "close") || !strcmp(op, "cancel") || !strcmp(op, "info"))) {
		/* from the path alone; a put's body is the file's bytes */
		call = (struct al_sess_call){
		    .version = AL_PROTO_VERSION,
		    .id = q->id,
		    .session = q->session,
		    .tenant = q->tenant,
		    .op = (enum al_sess_op)al_sess_op_parse(op),
		    .path = path && *path && strcmp(op, "cancel") ? (char *)path : NULL,
		    .target = !strcmp(op, "cancel") ? (char *)path : NULL,
		    .data = {(char *)body, len},
		    .mode = 0644,
		    .submitted_ms = al_now_ms()};
		if (call.op != AL_SESS_PUT)
			call.data = (struct al_bytes){0};
		rc = al_sess_call_encode(&call, &mp, &err);
		memset(&call, 0, sizeof(call)); /* nothing of it is owned */
	} else {
		rc = gw_call_from_body(body, len, msgpack, q->id, q->session, op, q->tenant, &mp,
				       &call, &err);
	}
	al_call_key_name(q->call_key, q->session, q->id); /* the caller's id, if it gave one */
	q->op = rc ? -1 : op ? al_sess_op_parse(op) : (int)call.op;
	{
		const char *accept =
		    evhttp_find_header(evhttp_request_get_input_headers(q->r), "Accept");

		/* Accept: text/event-stream: its output as it comes, then its result */
		q->want_stream = accept && strstr(accept, "text/event-stream") &&
				 (q->op == AL_SESS_EXEC || q->op == AL_SESS_PYTHON);
	}
	q->deadline_ms =
	    al_mono_ms() + (call.timeout_ms ? call.timeout_ms : GW_WAIT_MAX_MS / 2) + CALL_SLACK_MS;
	al_sess_call_free(&call);
	if (rc) {
		al_buf_free(&mp);
		gw_reply_error(q, err.code == AL_ENOMEM ? 500 : 400, "%s", err.msg);
		return;
	}
	q->state[0] = '\0';
	al_session_queue_call(&c, q->session, q->tenant, mp.data, mp.len);
	al_buf_free(&mp);
	send_on(q, q->g->cmd, &c, on_queued);
}

/* The session's record, before a fetch reads anything: the key's tenant's
 * session, else 404 (another tenant's is as no session). */
static void on_fetch_owner(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 5) {
		gw_reply_error(q, 503, "Redis is not reachable");
		return;
	}
	if (!text_of(r->element[0]) || strcmp(text_of(r->element[0]), q->tenant)) {
		gw_reply_error(q, 404, "no session %s", q->session);
		return;
	}
	get_result(q);
}

void gw_serve_session_result(struct req *q, struct evkeyvalq *qs)
{
	const char *w = evhttp_find_header(qs, "wait_ms");
	uint64_t wait_ms = 0;
	struct al_call c;

	snprintf(q->session, sizeof(q->session), "%s", q->id);
	if (!q->tail || !al_job_id_ok(q->tail, strlen(q->tail))) {
		gw_reply_error(q, 400, "call: expected a call's id (1..64 of [A-Za-z0-9._:-])");
		return;
	}
	if (evhttp_request_get_command(q->r) == EVHTTP_REQ_DELETE) {
		q->op_of_path = true;
		serve_call(q, "cancel", q->tail, NULL, 0, false);
		return;
	}
	if (w && !al_parse_u64(w, 0, UINT64_MAX, &wait_ms)) {
		gw_reply_error(q, 400, "wait_ms: expected milliseconds");
		return;
	}
	snprintf(q->id, sizeof(q->id), "%s", q->tail);
	al_call_key_name(q->call_key, q->session, q->id);
	q->kind = K_CALL;
	q->fetch = true;
	q->op = -1; /* the result, whatever the op */
	q->deadline_ms = al_mono_ms() + (wait_ms > GW_WAIT_MAX_MS ? GW_WAIT_MAX_MS : wait_ms);
	al_session_read_call(&c, q->session);
	send_on(q, q->g->cmd, &c, on_fetch_owner);
}
