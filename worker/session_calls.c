/* session_calls.c - a session's calls (sessions.c holds its life): each
 * sent to the session's server in turn, timed (its time, its CPU: the
 * sandbox's cgroup looked at), interrupted, cancelled, cut for a model
 * (output_max), answered like a job; info and cancel answered at once; a
 * call id run once. It reaches the session's life only through ss->end.
 * Frames to the server are a 4-byte big-endian length and a JSON object. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "../common/cleanup.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "../proto/json.h"
#include "../proto/call.h"
#include "proxy.h"
#include "session_int.h"

/* The result of call call_id of session sid, answered once at
 * al:res:<sid>/<call id> (al_call_key_name): only ever a key of that
 * session's calls, never a job's, and never over an answer already there. */
void wk_sess_reply(struct worker *w, const char *sid, const char *call_id, struct al_result *res)
{
	struct al_buf b = {0};
	struct al_err err = {0};
	struct al_call c;
	const char *status = al_status_name(res->status);

	res->version = AL_PROTO_VERSION;
	res->attempt = 1;
	res->worker = (char *)w->conf->backend.worker_id;
	if (!res->finished_ms)
		res->finished_ms = al_now_ms();
	if (al_result_encode(res, &b, &err)) {
		/* answered all the same: the caller must not wait for nothing */
		struct al_result bad = {.version = AL_PROTO_VERSION,
					.id = (char *)call_id,
					.attempt = 1,
					.status = AL_ST_SANDBOX_ERROR,
					.error = err.msg,
					.finished_ms = al_now_ms()};

		al_log("error", "session_reply", "call=%s error=\"%s\"", call_id, err.msg);
		status = al_status_name(bad.status);
		al_buf_free(&b);
		if (al_result_encode(&bad, &b, &err)) {
			al_buf_free(&b);
			return;
		}
	}
	al_session_reply_call(&c, sid, call_id, b.data, b.len, status, w->policy.result_ttl_ms);
	al_buf_free(&b);
	wk_send_call(w, &c, "call", call_id);
}

void wk_sess_reply_status(struct worker *w, const char *sid, const char *call_id,
			  enum al_status_code st, const char *msg)
{
	struct al_result res = {.id = (char *)call_id, .status = st, .error = (char *)msg};

	wk_sess_reply(w, sid, call_id, &res);
}

void wk_sess_pending_free(struct pending *p)
{
	if (!p)
		return;
	al_sess_call_free(&p->call);
	free(p);
}

int wk_sess_send(struct wk_session *ss, json_t *doc)
{
	cleanup_free char *text = json_dumps(doc, JSON_COMPACT);
	uint32_t n, be;
	int rc = AL_ESYS;

	json_decref(doc);
	if (!text)
		return AL_ENOMEM;
	n = (uint32_t)strlen(text);
	be = htonl(n);
	if (ss->chan && !bufferevent_write(ss->chan, &be, 4) &&
	    !bufferevent_write(ss->chan, text, n))
		rc = 0;
	return rc;
}

/* The session's egress proxy, its listener and every connection closed. */
void wk_sess_egress_end(struct wk_session *ss)
{
	if (ss->egress) {
		wk_proxy_finish(ss->egress, NULL);
		wk_proxy_free(ss->egress);
		ss->egress = NULL;
	}
}

/* The largest frame a call may answer with: its output caps and the
 * worker's cap on files (a get, or a call's figures together), base64, and
 * room for the rest. More ends the session (broken): what a session can
 * make the worker hold is bounded. */
size_t wk_sess_frame_max(const struct wk_session *ss)
{
	const struct al_limits *l = &ss->s->job.limits;
	uint64_t caps = l->stdout_bytes + l->stderr_bytes + ss->w->conf->backend.collect_max_bytes;

	return (size_t)(caps / 3 * 4 + 16 + FRAME_SLACK);
}

void wk_sess_arm(struct event *ev, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

	evtimer_add(ev, &tv);
}

void wk_sess_arm_idle(struct wk_session *ss)
{
	ss->idle_since_mono = al_mono_ms();
	wk_sess_arm(ss->timer, ss->idle_ms);
	/* idle: what the sandbox can spare goes back to the host (a microVM's
	 * page cache), at most once every TRIM_EVERY_MS */
	if (!ss->trimmed_mono || ss->idle_since_mono - ss->trimmed_mono >= TRIM_EVERY_MS) {
		al_backend_trim(ss->sb);
		ss->trimmed_mono = ss->idle_since_mono;
	}
}

void wk_sess_free(struct wk_session *ss)
{
	if (ss->chan)
		bufferevent_free(ss->chan);
	free(ss->seen);
	free(ss->restored_from);
	free(ss);
}

void wk_sess_reply_text(struct wk_session *ss, const struct al_sess_call *c, const char *text)
{
	struct al_result res = {.id = c->id, .status = AL_ST_OK, .has_exit_code = true};

	res.out = (struct al_bytes){(char *)text, strlen(text)};
	res.backend = (char *)ss->s->ops->name;
	wk_sess_reply(ss->w, c->session, c->id, &res);
}

/* Send the next queued call to the server. */
void wk_sess_next(struct wk_session *ss)
{
	const struct al_limits *l = &ss->s->job.limits;
	struct al_sess_call *c;
	json_t *doc;
	uint64_t t;

	if (ss->active || !ss->queue || ss->state != SS_OPEN || ss->restarting ||
	    ss->pause_in_flight)
		return;
	ss->active = ss->queue;
	ss->queue = ss->queue->next;
	c = &ss->active->call;
	if (c->op == AL_SESS_CLOSE) {
		ss->end(ss, AL_SESS_CLOSED, NULL);
		return;
	}
	if (c->op == AL_SESS_PAUSE || c->op == AL_SESS_FORK) { /* in order, once idle */
		if (ss->pause) {
			ss->pause(ss);
			return;
		}
		wk_sess_reply_status(ss->w, c->session, c->id, AL_ST_REJECTED,
				     "unsupported: this worker cannot pause sessions");
		wk_sess_pending_free(ss->active);
		ss->active = NULL;
		wk_sess_next(ss);
		return;
	}
	/* its CPU: its own, within the tier's most, else the session's per-call */
	ss->call_cpu_ms = c->cpu_ms ? c->cpu_ms : l->cpu_ms;
	if (ss->s->tier->max.cpu_ms && ss->call_cpu_ms > ss->s->tier->max.cpu_ms)
		ss->call_cpu_ms = ss->s->tier->max.cpu_ms;
	ss->cpu_over = false;
	ss->cancelled = false;
	doc = json_pack("{s:s, s:s, s:[I, I], s:I, s:i, s:I}", "id", c->id, "op",
			al_sess_op_name(c->op), "caps", (json_int_t)l->stdout_bytes,
			(json_int_t)l->stderr_bytes, "cap",
			(json_int_t)ss->w->conf->backend.collect_max_bytes, "mode", (int)c->mode,
			"cpu_ms", (json_int_t)ss->call_cpu_ms);
	if (doc && c->code.len) {
		/* the server decodes text: a python call's code must be UTF-8,
		 * which the gateway and the clients make sure of */
		json_t *code = json_stringn(c->code.data, c->code.len);

		if (!code) {
			json_decref(doc);
			wk_sess_reply_status(ss->w, c->session, c->id, AL_ST_REJECTED,
					     "code: not valid UTF-8 text");
			wk_sess_pending_free(ss->active);
			ss->active = NULL;
			wk_sess_next(ss);
			return;
		}
		json_object_set_new(doc, "code", code);
	}
	if (doc && c->argc) {
		json_t *a = json_array();

		for (size_t i = 0; a && i < c->argc; i++)
			json_array_append_new(a, json_string(c->argv[i]));
		json_object_set_new(doc, "argv", a);
	}
	ss->live =
	    !ss->w->conf->no_live_output && (c->op == AL_SESS_EXEC || c->op == AL_SESS_PYTHON);
	ss->out_ttl_set = false;
	ss->live_sent[0] = ss->live_sent[1] = 0;
	if (doc && ss->live)
		json_object_set_new(doc, "live", json_true());
	if (doc && c->path)
		json_object_set_new(doc, "path", json_string(c->path));
	if (doc && c->data.len)
		al_json_set_bytes(doc, "data", &c->data);
	if (!doc || wk_sess_send(ss, doc)) {
		ss->end(ss, AL_SESS_BROKEN, "could not send a call to the session's server");
		return;
	}
	ss->calls++;
	ss->interrupted = false;
	ss->call_t0 = al_mono_ms();
	t = c->timeout_ms ? c->timeout_ms : l->wall_ms;
	wk_sess_arm(ss->timer, (c->op == AL_SESS_EXEC || c->op == AL_SESS_PYTHON) ? t : 30000);
	if (c->op == AL_SESS_EXEC || c->op == AL_SESS_PYTHON) {
		struct al_usage u;

		if (al_backend_usage(ss->sb, &u) == 0) {
			ss->cpu_base_ns = u.cpu_ns;
			wk_sess_arm(ss->cpu_poll, CPU_POLL_MS);
		}
		if (al_backend_oom_kills(ss->sb, &ss->oom_base))
			ss->oom_base = 0;
	}
}

/* The active call stops (SIGINT inside, its processes killed); the
 * session goes on if it does within INTERRUPT_MS. */
void wk_sess_interrupt(struct wk_session *ss, const char *why)
{
	ss->interrupted = true;
	evtimer_del(ss->cpu_poll);
	al_log("info", "call_interrupted", "job=%s call=%s why=%s", ss->s->id, ss->active->call.id,
	       why);
	if (wk_sess_send(ss, json_pack("{s:s}", "op", "interrupt")))
		ss->end(ss, AL_SESS_BROKEN, "could not interrupt a call");
	else
		wk_sess_arm(ss->timer, INTERRUPT_MS);
}

/* The active call's CPU, as the sandbox's cgroup counts it: past the
 * call's CPU time, it is interrupted (cpu_limit); the session goes on. */
void wk_sess_on_cpu_poll(evutil_socket_t fd, short what, void *arg)
{
	struct wk_session *ss = arg;
	struct al_usage u;

	(void)fd;
	(void)what;
	if (!ss->active || ss->interrupted || al_backend_usage(ss->sb, &u))
		return;
	if (u.cpu_ns > ss->cpu_base_ns &&
	    (u.cpu_ns - ss->cpu_base_ns) / 1000000 >= ss->call_cpu_ms) {
		ss->cpu_over = true;
		wk_sess_interrupt(ss, "cpu");
	} else {
		wk_sess_arm(ss->cpu_poll, CPU_POLL_MS);
	}
}

/* Keep the head and the tail of b (the first of n bytes the call wrote):
 * at most max bytes in all. True when something was cut. */
static bool head_and_tail(struct al_bytes *b, uint64_t max)
{
	size_t head = (size_t)(max / 2), tail = (size_t)(max - max / 2);

	if (b->len <= max)
		return false;
	memmove(b->data + head, b->data + b->len - tail, tail);
	b->len = head + tail;
	return true;
}

/* A call's output_max (proto/call.h): each stream cut to its head and
 * tail, said in the result's error, and the call output_limit. */
static void cut_for_output_max(struct al_result *res, uint64_t max, uint64_t out_size,
			       uint64_t err_size)
{
	bool out_cut = head_and_tail(&res->out, max) || (out_size > res->out.len && max < out_size);
	bool err_cut = head_and_tail(&res->err, max) || (err_size > res->err.len && max < err_size);
	char why[AL_ERR_MSG_MAX];

	if (!out_cut && !err_cut)
		return;
	res->out_truncated |= out_cut;
	res->err_truncated |= err_cut;
	snprintf(why, sizeof(why),
		 "output cut to the call's output_max of %llu bytes a stream (its first and last "
		 "halves): stdout %llu of %llu bytes kept, stderr %llu of %llu%s%s",
		 (unsigned long long)max, (unsigned long long)res->out.len,
		 (unsigned long long)out_size, (unsigned long long)res->err.len,
		 (unsigned long long)err_size, res->error ? "; " : "",
		 res->error ? res->error : "");
	free(res->error);
	res->error = strdup(why);
	if (res->status == AL_ST_OK || res->status == AL_ST_NONZERO_EXIT)
		res->status = AL_ST_OUTPUT_LIMIT;
}

/* The server's answer to the active call: into a result, bounded. */
void wk_sess_answer(struct wk_session *ss, json_t *doc)
{
	const struct al_limits *l = &ss->s->job.limits;
	struct pending *p = ss->active;
	struct al_result res = {.id = p->call.id};
	json_t *v;
	uint64_t out_size = 0, err_size = 0;
	bool over = false;

	v = json_object_get(doc, "id");
	if (!json_is_string(v) || strcmp(json_string_value(v), p->call.id)) {
		ss->end(ss, AL_SESS_BROKEN, "the server answered another call");
		return;
	}
	if (al_json_get_bytes(doc, "stdout", &res.out) ||
	    al_json_get_bytes(doc, "stderr", &res.err)) {
		ss->end(ss, AL_SESS_BROKEN, "the server sent bad base64");
		al_result_free(&(struct al_result){.out = res.out, .err = res.err});
		return;
	}
	v = json_object_get(doc, "exit_code");
	res.has_exit_code = json_is_integer(v);
	res.exit_code = res.has_exit_code ? (int32_t)json_integer_value(v) : 0;
	v = json_object_get(doc, "signal");
	res.signal = json_is_integer(v) ? (int32_t)json_integer_value(v) : 0;
	v = json_object_get(doc, "stdout_size");
	out_size = json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v)
								   : res.out.len;
	v = json_object_get(doc, "stderr_size");
	err_size = json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v)
								   : res.err.len;
	/* the caps hold whatever the server says: what is past them goes */
	uint64_t out_cap =
	    p->call.op == AL_SESS_GET ? ss->w->conf->backend.collect_max_bytes : l->stdout_bytes;
	if (res.out.len > out_cap)
		res.out.len = (size_t)out_cap;
	if (res.err.len > l->stderr_bytes)
		res.err.len = (size_t)l->stderr_bytes;
	res.out_truncated = out_size > res.out.len;
	res.err_truncated = err_size > res.err.len;
	over = json_is_true(json_object_get(doc, "output_limit")) || res.out_truncated ||
	       res.err_truncated;
	v = json_object_get(doc, "error");
	res.error = json_is_string(v) ? strndup(json_string_value(v), AL_ERROR_MAX - 1) : NULL;
	res.wall_ms = al_mono_ms() - ss->call_t0;
	res.backend = (char *)ss->s->ops->name;
	res.finished_ms = al_now_ms();
	v = json_object_get(doc, "cpu_ms");
	res.cpu_ms = json_is_integer(v) && json_integer_value(v) > 0 &&
			     (uint64_t)json_integer_value(v) <= AL_LIMIT_WALL_MS_MAX
			 ? (uint64_t)json_integer_value(v)
			 : 0;
	{
		struct al_usage u;

		if ((p->call.op == AL_SESS_EXEC || p->call.op == AL_SESS_PYTHON) &&
		    al_backend_usage(ss->sb, &u) == 0 && u.cpu_ns > ss->cpu_base_ns)
			res.cpu_ms = (u.cpu_ns - ss->cpu_base_ns) / 1000000; /* the host's word */
	}
	evtimer_del(ss->cpu_poll);
	if (ss->cancelled) {
		res.status = AL_ST_CANCELLED;
		free(res.error);
		res.error = strdup("cancelled by a client: interrupted; the session goes on");
	} else if (ss->cpu_over || json_is_true(json_object_get(doc, "cpu_limit"))) {
		/* the host saw it (cgroup), or the server in the sandbox did (its
		 * word decides only this call's status) */
		char why[160];

		res.status = AL_ST_CPU_LIMIT;
		snprintf(why, sizeof(why),
			 "the call used its CPU time (%llu ms) and was interrupted; the session "
			 "goes on",
			 (unsigned long long)ss->call_cpu_ms);
		free(res.error);
		res.error = strdup(why);
	} else if (ss->interrupted) {
		res.status = AL_ST_TIMEOUT;
		free(res.error);
		res.error = strdup("the call ran past its time and was interrupted; the session "
				   "goes on");
	} else if (over && p->call.op != AL_SESS_GET) {
		char why[160];

		res.status = AL_ST_OUTPUT_LIMIT;
		snprintf(why, sizeof(why),
			 "the call's output passed its cap (stdout %llu, stderr %llu bytes): "
			 "stopped, the session goes on",
			 (unsigned long long)l->stdout_bytes, (unsigned long long)l->stderr_bytes);
		free(res.error);
		res.error = strdup(why);
	} else {
		res.status = res.has_exit_code && res.exit_code == 0 && !res.signal
				 ? AL_ST_OK
				 : AL_ST_NONZERO_EXIT;
	}
	if (p->call.output_max && p->call.op != AL_SESS_GET && res.status != AL_ST_SANDBOX_ERROR)
		cut_for_output_max(&res, p->call.output_max, out_size, err_size);
	/* a call stopped at a limit, or cut, has no exit code of its own: none
	 * that reads as success */
	if (res.status == AL_ST_CPU_LIMIT || res.status == AL_ST_TIMEOUT ||
	    res.status == AL_ST_CANCELLED ||
	    (res.status == AL_ST_OUTPUT_LIMIT && (!res.has_exit_code || !res.exit_code))) {
		res.has_exit_code = false;
		res.exit_code = 0;
	}
	v = json_object_get(doc, "outputs");
	for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++) {
		json_t *o = json_array_get(v, i), *mime = json_object_get(o, "mime");
		struct al_bytes data = {0};

		if (json_is_string(mime) && !al_json_get_bytes(o, "data", &data) &&
		    data.len <= ss->w->conf->backend.collect_max_bytes)
			al_result_add_output(&res, json_string_value(mime), data.data, data.len);
		free(data.data);
	}
	wk_proxy_transcript(ss->egress, &res); /* this call's connections */
	wk_sess_reply(ss->w, p->call.session, p->call.id, &res);
	res.id = NULL;
	res.backend = NULL;
	res.worker = NULL;
	al_result_free(&res);
	wk_sess_pending_free(p);
	ss->active = NULL;
	evtimer_del(ss->timer);
	if (ss->queue)
		wk_sess_next(ss);
	else
		wk_sess_arm_idle(ss);
}

/* A live output chunk of the active call (PROTOCOL.md, "Live output"):
 * onto al:out:<session>/<call id> as a job's, never past the call's caps (what is
 * past them is dropped: the answer says output_limit). Output of another
 * call, or a chunk over its bound, breaks the protocol. */
void wk_sess_chunk(struct wk_session *ss, json_t *doc)
{
	const struct al_limits *l = &ss->s->job.limits;
	const char *call_id = ss->active->call.id;
	char name[AL_CALL_KEY_MAX];
	const char *t = json_string_value(json_object_get(doc, "t"));
	json_t *v = json_object_get(doc, "chunk");
	int i = t && !strcmp(t, "out") ? 0 : t && !strcmp(t, "err") ? 1 : -1;
	struct al_bytes d = {0};
	uint64_t cap, n;

	if (!ss->live || !json_is_string(v) || strcmp(json_string_value(v), call_id)) {
		ss->end(ss, AL_SESS_BROKEN, "the server sent output of another call");
		return;
	}
	if (i < 0 || al_json_get_bytes(doc, "data", &d) || !d.len || d.len > AL_OUT_CHUNK_MAX) {
		free(d.data);
		ss->end(ss, AL_SESS_BROKEN, "the server sent a malformed output chunk");
		return;
	}
	cap = i ? l->stderr_bytes : l->stdout_bytes;
	n = ss->live_sent[i] >= cap ? 0 : cap - ss->live_sent[i];
	if (n > d.len)
		n = d.len;
	if (n) {
		uint64_t t_ms =
		    ss->active->call.timeout_ms ? ss->active->call.timeout_ms : l->wall_ms;

		ss->live_sent[i] += n;
		wk_send_output(ss->w, al_call_key_name(name, ss->id, call_id), 1, i ? "err" : "out",
			       d.data, (size_t)n, &ss->out_ttl_set,
			       t_ms + ss->w->policy.result_ttl_ms + 600000);
	}
	free(d.data);
}

/* What is left of span after since (monotonic ms). */
static uint64_t left_of(uint64_t since, uint64_t span)
{
	uint64_t gone = al_mono_ms() - since;

	return gone < span ? span - gone : 0;
}

/* An info call (p): the session's limits (the whole session's, and each
 * call's defaults), its usage so far, and the time left before it is
 * idle and before its life ends, as one JSON object on stdout. */
void wk_sess_info(struct wk_session *ss, struct pending *p)
{
	const struct al_limits *l = &ss->s->job.limits;
	const struct al_session_policy *sp = &ss->s->tier->sessions;
	struct al_usage u;
	size_t queued = 0;
	json_t *doc;
	char *text;

	for (struct pending *q = ss->queue; q; q = q->next)
		queued++;
	doc = json_pack("{s:s, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}}",
			"session", ss->id, "limits", "memory_bytes", (json_int_t)l->memory_bytes,
			"pids", (json_int_t)l->pids, "disk_bytes", (json_int_t)l->disk_bytes,
			"cpu_millis", (json_int_t)ss->sb->spec.cpu_millis, "call_timeout_ms",
			(json_int_t)l->wall_ms, "call_cpu_ms", (json_int_t)l->cpu_ms,
			"stdout_bytes", (json_int_t)l->stdout_bytes, "stderr_bytes",
			(json_int_t)l->stderr_bytes, "cpu_budget_ms", (json_int_t)ss->cpu_budget_ms,
			"idle_ms", (json_int_t)ss->idle_ms, "life_ms", (json_int_t)ss->life_ms);
	if (doc) {
		json_object_set_new(json_object_get(doc, "limits"), "max_idle_ms",
				    json_integer((json_int_t)sp->max_idle_ms));
		json_object_set_new(json_object_get(doc, "limits"), "max_life_ms",
				    json_integer((json_int_t)sp->max_life_ms));
		json_object_set_new(
		    doc, "usage",
		    json_pack("{s:I, s:o, s:I, s:o}", "calls", (json_int_t)ss->calls, "cpu_ms",
			      al_backend_usage(ss->sb, &u) == 0
				  ? json_integer((json_int_t)(u.cpu_ns / 1000000))
				  : json_null(),
			      "queued", (json_int_t)queued, "running",
			      ss->active ? json_string(ss->active->call.id) : json_null()));
		json_object_set_new(
		    doc, "idle_left_ms",
		    json_integer((json_int_t)(ss->active
						  ? ss->idle_ms
						  : left_of(ss->idle_since_mono, ss->idle_ms))));
		json_object_set_new(
		    doc, "life_left_ms",
		    json_integer((json_int_t)left_of(ss->opened_mono, ss->life_ms)));
		/* open here; restored from a snapshot (when, how long it took) */
		json_object_set_new(doc, "state", json_string("open"));
		if (ss->restored)
			json_object_set_new(doc, "resume_ms",
					    json_integer((json_int_t)ss->resumed_ms));
	}
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!text) {
		wk_sess_reply_status(ss->w, p->call.session, p->call.id, AL_ST_SANDBOX_ERROR,
				     "out of memory");
	} else {
		wk_sess_reply_text(ss, &p->call, text);
	}
	free(text);
	wk_sess_pending_free(p);
}

/* An extend call (p): the session's idle time from now on, and its life
 * from now (its end moved, never past opened + the tier's max_life_s;
 * idle never past max_idle_s); answered as an info call. */
void wk_sess_extend(struct wk_session *ss, struct pending *p)
{
	const struct al_session_policy *sp = &ss->s->tier->sessions;
	uint64_t now = al_mono_ms();

	if (p->call.idle_ms) {
		ss->idle_ms = p->call.idle_ms < sp->max_idle_ms ? p->call.idle_ms : sp->max_idle_ms;
		if (ss->state == SS_OPEN && !ss->active && !ss->queue)
			wk_sess_arm_idle(ss); /* idle from now, for the new time */
	}
	if (p->call.life_ms && ss->state == SS_OPEN) {
		uint64_t lived = now - ss->opened_mono, want = lived + p->call.life_ms;

		ss->life_ms = want < sp->max_life_ms ? want : sp->max_life_ms;
		wk_sess_arm(ss->life, ss->life_ms - lived);
	}
	wk_sess_info(ss, p);
}

/* A cancel call (p): its target, running, is interrupted (its answer
 * says cancelled); queued, it is dropped and answered cancelled; else
 * (answered, or unknown) nothing. The cancel itself is answered ok, its
 * stdout saying which. */
void wk_sess_cancel(struct wk_session *ss, struct pending *p)
{
	const char *target = p->call.target, *what = "not running (answered, or unknown)";
	struct al_result res = {.id = p->call.id, .status = AL_ST_OK, .has_exit_code = true};

	if (ss->active && !strcmp(ss->active->call.id, target)) {
		if (!ss->interrupted) {
			ss->cancelled = true;
			wk_sess_interrupt(ss, "cancel");
		}
		what = "interrupted";
	} else {
		for (struct pending **q = &ss->queue; *q; q = &(*q)->next)
			if (!strcmp((*q)->call.id, target)) {
				struct pending *gone = *q;

				*q = gone->next;
				wk_sess_reply_status(ss->w, gone->call.session, gone->call.id,
						     AL_ST_CANCELLED,
						     "cancelled by a client before it ran");
				wk_sess_pending_free(gone);
				what = "dropped before it ran";
				break;
			}
	}
	res.out = (struct al_bytes){(char *)what, strlen(what)};
	res.backend = (char *)ss->s->ops->name;
	wk_sess_reply(ss->w, p->call.session, p->call.id, &res);
	wk_sess_pending_free(p);
}

/* id remembered as the newest seen (the oldest forgotten past SEEN_CALLS);
 * false out of memory. */
static bool remember(struct wk_session *ss, const char *id)
{
	if (!ss->seen && !(ss->seen = calloc(SEEN_CALLS, sizeof(*ss->seen))))
		return false;
	snprintf(ss->seen[ss->seen_at], sizeof(ss->seen[0]), "%s", id);
	ss->seen_at = (ss->seen_at + 1) % SEEN_CALLS;
	if (ss->nseen < SEEN_CALLS)
		ss->nseen++;
	return true;
}

/* True the first time the session takes a call of this id (within its
 * last SEEN_CALLS); then remembered. */
bool wk_sess_seen_first(struct wk_session *ss, const char *id)
{
	for (unsigned i = 0; i < ss->nseen; i++)
		if (!strcmp(ss->seen[i], id))
			return false;
	remember(ss, id); /* out of memory: no memory of calls, as before */
	return true;
}

char *wk_sess_seen_text(const struct wk_session *ss)
{
	unsigned first = ss->nseen < SEEN_CALLS ? 0 : ss->seen_at;
	size_t n = 1, at = 0;
	char *out;

	for (unsigned k = 0; k < ss->nseen; k++)
		n += strlen(ss->seen[k]) + 1;
	if (!(out = malloc(n)))
		return NULL;
	for (unsigned k = 0; k < ss->nseen; k++) {
		const char *id = ss->seen[(first + k) % SEEN_CALLS];
		size_t l = strlen(id);

		memcpy(out + at, id, l);
		out[at + l] = '\n';
		at += l + 1;
	}
	out[at] = '\0';
	return out;
}

void wk_sess_seen_load(struct wk_session *ss, const char *text)
{
	char id[AL_ID_MAX + 1];

	for (const char *p = text, *nl; p && (nl = strchr(p, '\n')); p = nl + 1)
		if (nl > p && (size_t)(nl - p) <= AL_ID_MAX) {
			memcpy(id, p, (size_t)(nl - p));
			id[nl - p] = '\0';
			remember(ss, id); /* distinct already: no look through the others */
		}
}

void wk_sess_restarted(struct wk_session *ss, const char *said)
{
	struct pending *p = ss->active;
	uint64_t kills = 0;
	/* the sandbox's OOM count where the backend has one; a microVM's
	 * server says (its guest's count: the session's own word, about its
	 * own call) */
	bool memory = al_backend_oom_kills(ss->sb, &kills) == 0 ? kills > ss->oom_base
								: said && !strcmp(said, "memory");
	struct al_result res = {.status = memory ? AL_ST_MEMORY_LIMIT : AL_ST_NONZERO_EXIT,
				.signal = memory ? 0 : 9};

	ss->restarting = false;
	evtimer_del(ss->timer);
	al_log("warn", "interpreter_restarted", "job=%s call=%s why=%s", ss->id,
	       p ? p->call.id : "-", memory ? "memory" : "killed");
	if (p) {
		res.id = p->call.id;
		res.error = memory ? (char *)"the call ran out of the session's memory: its "
					     "interpreter was restarted, its variables and imports "
					     "are gone; the session's files stay"
				   : (char *)"the interpreter was killed (signal 9) and restarted: "
					     "its variables and imports are gone; the session's "
					     "files stay";
		res.wall_ms = al_mono_ms() - ss->call_t0;
		res.backend = (char *)ss->s->ops->name;
		wk_proxy_transcript(ss->egress, &res);
		wk_sess_reply(ss->w, p->call.session, p->call.id, &res);
		res.id = NULL; /* none of these is the result's own */
		res.error = NULL;
		res.backend = NULL;
		res.worker = NULL;
		al_result_free(&res);
		wk_sess_pending_free(p);
		ss->active = NULL;
	}
	if (ss->queue)
		wk_sess_next(ss);
	else
		wk_sess_arm_idle(ss);
}
