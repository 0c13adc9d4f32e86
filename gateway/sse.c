/* sse.c - live output as Server-Sent Events from al:out:<name>: a job's
 * stream until its end entry, a call's until its look function (req.h)
 * says it ended; pings on quiet rounds, resumable by Last-Event-ID. */
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

#define SSE_PING_ROUNDS 15 /* a ": ping" after this many quiet one-second rounds */

/* End the event stream (the 200 went at its start; the client may resume
 * with Last-Event-ID). */
static void output_close(struct req *q)
{
	gw_reply_stream_end(q);
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
		gw_req_free(q);
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
		gw_req_free(q);
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
		gw_req_free(q);
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
	if (q->look && (end || !any)) {
		q->look(q); /* a call's: its result, or its session's state */
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

	if (!q->r) {
		gw_req_free(q);
		return;
	}
	if (!gw_poll_begin(q)) /* an error status, before any 200 */
		return;
	gw_reply_stream_start(q, "text/event-stream");
	q->streaming = true;
	if (q->kind != K_CALL) /* a call's is its time and some */
		q->deadline_ms = al_mono_ms() + GW_WAIT_MAX_MS;
	gw_output_step(q);
}

/* Last-Event-ID (or ?after=): "0" or a stream entry id, MS-SEQ. */
bool gw_entry_id_ok(const char *s)
{
	size_t n = strspn(s, "0123456789");

	if (!n || n > 20)
		return false;
	if (!s[n])
		return !strcmp(s, "0");
	return s[n] == '-' && strspn(s + n + 1, "0123456789") == strlen(s + n + 1) &&
	       strlen(s + n + 1) >= 1 && strlen(s + n + 1) <= 20;
}
