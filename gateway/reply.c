/* reply.c - the gateway's answers: a request's reply (JSON, msgpack, an
 * error, a stored result, a 202 of a job still pending), counted, and the
 * request freed with its long poll's waiter. Every other file of
 * gateway/ answers through it. */
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

void gw_req_free(struct req *q)
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
	gw_req_free(q);
}

/* A stream's last event (doc taken), and its end. */
static void last_event(struct req *q, const char *event, json_t *doc)
{
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	struct evbuffer *b = q->r ? evbuffer_new() : NULL;

	json_decref(doc);
	if (b) {
		evbuffer_add_printf(b, "event: %s\ndata: %s\n\n", text ? event : "error",
				    text ? text : "{\"code\":500,\"error\":\"out of memory\"}");
		q->g->st.bytes_out += evbuffer_get_length(b);
		evhttp_send_reply_chunk(q->r, b);
		evbuffer_free(b);
	}
	free(text);
	gw_reply_stream_end(q);
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
		last_event(q, code == 200 ? "result" : "error", doc);
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

void gw_reply_pending(struct req *q, int code)
{
	json_t *doc =
	    json_pack("{s:s, s:s}", "id", q->id, "state", q->state[0] ? q->state : "submitted");

	if (doc && q->kind == K_SUBMIT)
		json_object_set_new(doc, "same_key", json_boolean(q->same_key));
	gw_reply_json(q, code, doc);
}

void gw_send(struct req *q, struct al_aconn *conn, struct al_call *c, redisCallbackFn *fn)
{
	if (al_aconn_send(conn, c, fn, q))
		gw_reply_error(q, 503, "Redis is not reachable: %s", al_aconn_strerror(conn));
	al_call_free(c);
}

void gw_reply_stream_start(struct req *q, const char *ctype)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(q->r);

	evhttp_add_header(h, "Content-Type", ctype);
	evhttp_add_header(h, "Cache-Control", "no-cache");
	evhttp_add_header(h, "X-Accel-Buffering", "no");
	/* the connection ends with the stream, and says so: a client that kept
	 * it for its next request would find it closed */
	evhttp_add_header(h, "Connection", "close");
	count_reply(q->g, 200, 0);
	evhttp_send_reply_start(q->r, 200, "OK");
}

void gw_reply_stream_end(struct req *q)
{
	if (q->r) {
		forget_close(q);
		poll_end(q);
		evhttp_send_reply_end(q->r);
	}
	gw_req_free(q);
}
