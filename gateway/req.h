/* req.h - one HTTP request of the gateway's, alive until it is answered,
 * and the steps its files share, top down: api.c (the route table),
 * session_api.c (the sessions' endpoints), jobs.c (the jobs'), sse.c (live
 * output), poll.c (long polls) and reply.c (answers). Each calls only
 * those after it. Internal to gateway/. */
#ifndef AL_GW_REQ_H
#define AL_GW_REQ_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../proto/contract.h"
#include "gw.h"

enum kind { K_SUBMIT, K_GET, K_WAIT, K_CANCEL, K_OUTPUT, K_SESSION_OPEN, K_CALL };

struct req {
	struct gw *g;
	struct evhttp_request *r; /* NULL once the client went */
	enum kind kind;
	char tenant[AL_ID_MAX + 1];
	struct gw_tenant *t; /* the key's tenant: its long polls are counted */
	char id[AL_ID_MAX + 1];
	bool wait;		      /* submit, then wait for the result... */
	uint64_t wait_ms;	      /* ...this long */
	uint64_t deadline_ms;	      /* of the wait (monotonic) */
	char after[AL_STREAM_ID_MAX]; /* the wait: the live output's newest entry (AWAIT) */
	int code_if_pending;	      /* a wait that ran out: 202 */
	struct gw_waiter *w;
	char state[16];
	char last[48];			/* output: the last entry sent (Last-Event-ID) */
	unsigned quiet;			/* output: rounds without an entry (a ping every 15) */
	unsigned end_attempt;		/* output: the end entry's attempt (its result is read) */
	bool same_key;			/* submit: an earlier job of the tenant's key */
	struct al_call *submit;		/* submit: SUBMIT, waiting for the body's digest check */
	char idem[AL_KEY_MAX];		/* ...the key's own (al:idem:<tenant>/<key>) */
	char digest[17];		/* ...and the body's digest (16 hex digits) */
	char nonce[AL_ID_MAX + 1];	/* cancel: its answer comes on al:reply:<nonce> */
	char session[AL_ID_MAX + 1];	/* a call: its session's id (q->id is the call's) */
	char call_key[AL_CALL_KEY_MAX]; /* ...and its answer's keys' name (al_call_key_name) */
	int op;				/* a call: enum al_sess_op */
	bool op_of_path;		/* ...from the path: DELETE, /files (else a result) */
	const char *tail;		/* a route's path after its prefix (a file's) */
	bool want_stream;		/* a call: Accept: text/event-stream */
	bool streaming;			/* its answer is Server-Sent Events (started) */
	bool fetch;			/* a GET of a call's answer: 202 when its wait ends */
	/* a call's live output: its result (the last event) if there is one,
	 * else the session's state (set by session_api.c, called by sse.c) */
	void (*look)(struct req *q);
};

/* The name of q's answer's keys (al:res:<it>, al:out:<it>): a call's
 * <session>/<call>, else the job's id. */
static inline const char *gw_answer_name(const struct req *q)
{
	return q->kind == K_CALL ? q->call_key : q->id;
}

/* reply.c */
/* Answer with len bytes of ctype (data NULL: a 500) and free q. */
void gw_reply_send(struct req *q, int code, const char *ctype, const void *data, size_t len);
/* takes doc; a streamed call: its last event */
void gw_reply_json(struct req *q, int code, json_t *doc);
void gw_reply_error(struct req *q, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A stored result (msgpack) as the answer: msgpack when asked for, else
 * JSON; a rejection 400, or 429 by a quota. */
void gw_reply_result(struct req *q, const char *raw, size_t len);
/* A job not ended yet: its id and state (code: 202, or 200 of a wait). */
void gw_reply_pending(struct req *q, int code);
/* A streamed answer: its 200 and headers (ctype, no caching), then
 * chunks (evhttp_send_reply_chunk); its end, and q freed. */
void gw_reply_stream_start(struct req *q, const char *ctype);
void gw_reply_stream_end(struct req *q);
/* Free q unanswered (its client went), its waiter back. */
void gw_req_free(struct req *q);
/* Send call on conn (best effort), its answer to fn(q); a 503 when Redis
 * is not reachable. The call is freed either way. */
void gw_send(struct req *q, struct al_aconn *conn, struct al_call *c, redisCallbackFn *fn);

/* poll.c */
/* q becomes a long poll (a waiter of its own); false when refused
 * (answered: 429 or 503). */
bool gw_poll_begin(struct req *q);
/* AWAIT's answer r (al_await_call on q->id): the result, or NULL with
 * q->after set to the live output's newest entry (nothing on a reply of
 * another shape); gw_end_wait_call then waits a second at most for
 * anything after it. */
const redisReply *gw_awaited(struct req *q, const redisReply *r);
void gw_end_wait_call(struct al_call *c, const struct req *q);
/* q->id's result if there is one; else, before q->deadline_ms, another
 * round of waiting, after it the answer q->code_if_pending (a 202 or 200
 * with the job's state). */
void gw_await_result(struct req *q);
/* Wait up to ms for q->id's result: it, or code_if_pending's answer. */
void gw_start_wait(struct req *q, uint64_t ms, int code_if_pending);

/* sse.c */
/* Live output as Server-Sent Events: start sends the 200 and follows
 * al:out:<gw_answer_name(q)> from q->last, a second a round (step); a
 * job's stream ends at its end entry, a call's asks q->look at its end
 * entry and whenever a round was quiet; its last event is a reply's
 * (gw_reply_json, streaming). */
void gw_output_start(struct req *q);
void gw_output_step(struct req *q);
/* Last-Event-ID (or ?after=): "0" or a stream entry id, MS-SEQ. */
bool gw_entry_id_ok(const char *s);

/* jobs.c */
int gw_new_id(char out[AL_ID_MAX + 1]);
/* Submit the body's job (JSON or msgpack) for q's tenant; run: wait for
 * its result; session: the job opens a session. */
void gw_submit(struct req *q, const char *body, size_t len, bool msgpack, bool run,
	       uint64_t wait_ms);
/* q->id's record: the caller's tenant's job, then q->kind's step (its
 * result, a wait, a cancel, its output); else 404. */
void gw_with_owned_job(struct req *q);

/* session_api.c: the sessions' endpoints (docs/api.md, "Sessions"): open
 * (POST /v1/sessions), and a call: the op from the path and method
 * (/calls: the body's), on the session of q->id. */
struct evkeyvalq;
void gw_serve_session_open(struct req *q, struct evkeyvalq *qs);
void gw_serve_session_call(struct req *q, struct evkeyvalq *qs);
/* GET /v1/sessions/{id}/calls/{call}?wait_ms=N: a call's answer, waited
 * for up to N ms (0 and at most GW_WAIT_MAX_MS), else 202. DELETE: the
 * call cancelled (a cancel call; its answer says what it did). */
void gw_serve_session_result(struct req *q, struct evkeyvalq *qs);

#endif
