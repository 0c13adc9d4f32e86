/* session.c - sessions (proto/call.h; PROTOCOL.md, "Sessions"): a job
 * with "session": true keeps its slot and its sandbox, which runs the
 * session server (session_server.py) instead of a command. The server
 * connects to the socket the backend made in the sandbox's own network
 * namespace (al_watch.session_fd); the worker then records the session
 * (SESSION_OPEN: the tenant's count checked), commits the open job's result
 * and serves the session's calls, which clients queue on al:wq:<worker>
 * (read here on a connection of its own, BLPOP), one at a time and in order,
 * each answered with a result (SESSION_REPLY) like a job's.
 *
 * A session ends, and its sandbox is destroyed, when a client closes it, it
 * is idle or old past its tier's policy, its sandbox dies (a limit, the code
 * ending the interpreter), a call past its time does not stop when
 * interrupted, the server breaks the protocol, or the worker drains; the
 * record says why (SESSION_END), and every call after gets session_ended
 * with the reason. Frames with the server: a 4-byte big-endian length and a
 * JSON object, every one bounded and checked (the server runs with the
 * session's code). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "../common/cleanup.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "../proto/json.h"
#include "../proto/call.h"
#include "worker.h"

#define HELLO_MS     30000 /* the server's first frame, after start */
#define INTERRUPT_MS 2000  /* a call interrupted at its time: this long to stop */
#define EXIT_WAIT_MS 1000  /* the server gone: this long for the sandbox's end */
#define FRAME_SLACK  (1u << 20)
#define CPU_POLL_MS  200  /* a call's CPU looked at this often (backends that report it) */
#define SEEN_CALLS   4096 /* a session's last call ids, each run at most once */
/* a session's sandbox without a CPU budget: its CPU limit, ms (years) */
#define NO_CPU_BUDGET_MS (1ull << 40)

extern const char wk_session_server_py[]; /* session_server.c, made from session_server.py */

struct pending {
	struct pending *next;
	struct al_sess_call call;
};

enum sess_state { SS_STARTING, SS_OPENING, SS_OPEN, SS_ENDED };

struct wk_session {
	struct wk_session *next;
	struct worker *w;
	struct slot *s;
	enum sess_state state;
	struct al_sandbox *sb;
	struct event *watch[AL_WATCH_MAX];
	int nwatch;
	int listen_fd;
	struct event *listen_ev;
	struct bufferevent *chan;
	struct event *timer;	/* hello, idle, the call's time, then its interrupt */
	struct event *life;	/* the session's maximum life */
	struct event *cpu_poll; /* the active call's CPU, looked at */
	uint64_t cpu_base_ns;	/* the sandbox's CPU when the call began */
	uint64_t call_cpu_ms;	/* the active call's CPU time */
	bool cpu_over;		/* ...which it used up (the host saw it): interrupted */
	bool cancelled;		/* ...or a client cancelled it: interrupted */
	/* the ids of the calls taken (a ring): a call sent again with the id of
	 * one of them (a client's retry after a fault) runs no second time */
	char (*seen)[AL_ID_MAX + 1];
	unsigned nseen, seen_at;
	struct pending *queue;	/* calls waiting, in order */
	struct pending *active; /* the call the server runs */
	bool interrupted;	/* the active call passed its time */
	bool live;		/* ...its output goes to al:out:<call id> */
	bool out_ttl_set;	/* ...whose TTL is set (at its first chunk) */
	uint64_t live_sent[2];	/* ...bytes of stdout, stderr streamed */
	bool chan_gone;		/* the server closed its end: the sandbox ends */
	uint64_t call_t0;
	uint64_t opened_ms;
	uint64_t opened_mono, idle_since_mono; /* its life's and its idleness's start */
	unsigned calls;
	/* ended while SESSION_OPEN was in flight: its answer finishes it */
	bool open_in_flight;
	char id[AL_ID_MAX + 1]; /* the session's (its open job's) */
	enum al_sess_end why;
	char end_msg[AL_ERR_MSG_MAX];
};

static void end_session(struct wk_session *ss, enum al_sess_end why, const char *detail);
static void open_session(struct wk_session *ss);

/* ---- answers ---- */

/* The result of call call_id of session sid, answered once at
 * al:res:<sid>/<call id> (al_call_key_name): only ever a key of that
 * session's calls, never a job's, and never over an answer already there. */
static void reply(struct worker *w, const char *sid, const char *call_id, struct al_result *res)
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

static void reply_status(struct worker *w, const char *sid, const char *call_id,
			 enum al_status_code st, const char *msg)
{
	struct al_result res = {.id = (char *)call_id, .status = st, .error = (char *)msg};

	reply(w, sid, call_id, &res);
}

static void pending_free(struct pending *p)
{
	if (!p)
		return;
	al_sess_call_free(&p->call);
	free(p);
}

/* ---- frames to and from the server ---- */

static int send_frame(struct wk_session *ss, json_t *doc)
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

/* The largest frame a call may answer with: its output caps and the
 * worker's cap on files (a get, or a call's figures together), base64, and
 * room for the rest. More ends the session (broken): what a session can
 * make the worker hold is bounded. */
static size_t frame_max(const struct wk_session *ss)
{
	const struct al_limits *l = &ss->s->job.limits;
	uint64_t caps = l->stdout_bytes + l->stderr_bytes + ss->w->conf->backend.collect_max_bytes;

	return (size_t)(caps / 3 * 4 + 16 + FRAME_SLACK);
}

static void arm(struct event *ev, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

	evtimer_add(ev, &tv);
}

static void arm_idle(struct wk_session *ss)
{
	ss->idle_since_mono = al_mono_ms();
	arm(ss->timer, ss->s->tier->sessions.idle_ms);
}

/* Send the next queued call to the server. */
static void next_call(struct wk_session *ss)
{
	const struct al_limits *l = &ss->s->job.limits;
	struct al_sess_call *c;
	json_t *doc;
	uint64_t t;

	if (ss->active || !ss->queue || ss->state != SS_OPEN)
		return;
	ss->active = ss->queue;
	ss->queue = ss->queue->next;
	c = &ss->active->call;
	if (c->op == AL_SESS_CLOSE) {
		end_session(ss, AL_SESS_CLOSED, NULL);
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
			reply_status(ss->w, c->session, c->id, AL_ST_REJECTED,
				     "code: not valid UTF-8 text");
			pending_free(ss->active);
			ss->active = NULL;
			next_call(ss);
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
	if (!doc || send_frame(ss, doc)) {
		end_session(ss, AL_SESS_BROKEN, "could not send a call to the session's server");
		return;
	}
	ss->calls++;
	ss->interrupted = false;
	ss->call_t0 = al_mono_ms();
	t = c->timeout_ms ? c->timeout_ms : l->wall_ms;
	arm(ss->timer, (c->op == AL_SESS_EXEC || c->op == AL_SESS_PYTHON) ? t : 30000);
	if (c->op == AL_SESS_EXEC || c->op == AL_SESS_PYTHON) {
		struct al_usage u;

		if (al_backend_usage(ss->sb, &u) == 0) {
			ss->cpu_base_ns = u.cpu_ns;
			arm(ss->cpu_poll, CPU_POLL_MS);
		}
	}
}

/* The active call stops (SIGINT inside, its processes killed); the
 * session goes on if it does within INTERRUPT_MS. */
static void interrupt_call(struct wk_session *ss, const char *why)
{
	ss->interrupted = true;
	evtimer_del(ss->cpu_poll);
	al_log("info", "call_interrupted", "job=%s call=%s why=%s", ss->s->id, ss->active->call.id,
	       why);
	if (send_frame(ss, json_pack("{s:s}", "op", "interrupt")))
		end_session(ss, AL_SESS_BROKEN, "could not interrupt a call");
	else
		arm(ss->timer, INTERRUPT_MS);
}

/* The active call's CPU, as the sandbox's cgroup counts it: past the
 * call's CPU time, it is interrupted (cpu_limit); the session goes on. */
static void on_cpu_poll(evutil_socket_t fd, short what, void *arg)
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
		interrupt_call(ss, "cpu");
	} else {
		arm(ss->cpu_poll, CPU_POLL_MS);
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
static void on_answer(struct wk_session *ss, json_t *doc)
{
	const struct al_limits *l = &ss->s->job.limits;
	struct pending *p = ss->active;
	struct al_result res = {.id = p->call.id};
	json_t *v;
	uint64_t out_size = 0, err_size = 0;
	bool over = false;

	v = json_object_get(doc, "id");
	if (!json_is_string(v) || strcmp(json_string_value(v), p->call.id)) {
		end_session(ss, AL_SESS_BROKEN, "the server answered another call");
		return;
	}
	if (al_json_get_bytes(doc, "stdout", &res.out) ||
	    al_json_get_bytes(doc, "stderr", &res.err)) {
		end_session(ss, AL_SESS_BROKEN, "the server sent bad base64");
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
	} else if (ss->cpu_over ||
		   (ss->interrupted && json_is_true(json_object_get(doc, "cpu_limit")))) {
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
	reply(ss->w, p->call.session, p->call.id, &res);
	res.id = NULL;
	res.backend = NULL;
	res.worker = NULL;
	al_result_free(&res);
	pending_free(p);
	ss->active = NULL;
	evtimer_del(ss->timer);
	if (ss->queue)
		next_call(ss);
	else
		arm_idle(ss);
}

/* A live output chunk of the active call (PROTOCOL.md, "Live output"):
 * onto al:out:<session>/<call id> as a job's, never past the call's caps (what is
 * past them is dropped: the answer says output_limit). Output of another
 * call, or a chunk over its bound, breaks the protocol. */
static void on_chunk(struct wk_session *ss, json_t *doc)
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
		end_session(ss, AL_SESS_BROKEN, "the server sent output of another call");
		return;
	}
	if (i < 0 || al_json_get_bytes(doc, "data", &d) || !d.len || d.len > AL_OUT_CHUNK_MAX) {
		free(d.data);
		end_session(ss, AL_SESS_BROKEN, "the server sent a malformed output chunk");
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

/* A frame from the server: the hello, then per call its live output and
 * one answer. */
static void on_frame(struct wk_session *ss, const char *data, size_t len)
{
	json_error_t jerr;
	json_t *doc = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);

	if (!json_is_object(doc)) {
		json_decref(doc);
		end_session(ss, AL_SESS_BROKEN,
			    "the server sent a frame that is not a JSON object");
		return;
	}
	if (ss->state == SS_STARTING) {
		if (!json_is_integer(json_object_get(doc, "hello")))
			end_session(ss, AL_SESS_BROKEN, "the server did not say hello");
		else
			open_session(ss);
	} else if (ss->state == SS_OPEN && ss->active && json_object_get(doc, "chunk")) {
		on_chunk(ss, doc);
	} else if (ss->state == SS_OPEN && ss->active) {
		on_answer(ss, doc);
	} else if (ss->state == SS_OPEN) {
		end_session(ss, AL_SESS_BROKEN, "the server spoke out of turn");
	}
	json_decref(doc);
}

static void on_chan_read(struct bufferevent *bev, void *arg)
{
	struct wk_session *ss = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (ss->state != SS_ENDED && evbuffer_get_length(in) >= 4) {
		uint32_t be, n;
		unsigned char *p;

		evbuffer_copyout(in, &be, 4);
		n = ntohl(be);
		if (n > frame_max(ss)) {
			end_session(ss, AL_SESS_BROKEN, "the server sent a frame over its bound");
			return;
		}
		if (evbuffer_get_length(in) < 4 + (size_t)n)
			return;
		evbuffer_drain(in, 4);
		p = evbuffer_pullup(in, n);
		if (!p && n) {
			end_session(ss, AL_SESS_BROKEN, "out of memory reading a frame");
			return;
		}
		on_frame(ss, (const char *)p, n);
		if (ss->state != SS_ENDED)
			evbuffer_drain(in, n);
	}
}

/* The server closed its end: the sandbox ends too; its reap says why (a
 * limit, or the interpreter exited), else, after EXIT_WAIT_MS, exited. */
static void on_chan_event(struct bufferevent *bev, short what, void *arg)
{
	struct wk_session *ss = arg;

	(void)bev;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) || ss->chan_gone)
		return;
	ss->chan_gone = true;
	bufferevent_disable(ss->chan, EV_READ | EV_WRITE);
	arm(ss->timer, EXIT_WAIT_MS);
}

/* The server's connection c (taken): frames from here on. */
static void chan_open(struct wk_session *ss, int c)
{
	ss->chan = bufferevent_socket_new(ss->w->base, c, BEV_OPT_CLOSE_ON_FREE);
	if (!ss->chan) {
		close(c);
		end_session(ss, AL_SESS_BROKEN, "out of memory");
		return;
	}
	bufferevent_setcb(ss->chan, on_chan_read, NULL, on_chan_event, ss);
	bufferevent_enable(ss->chan, EV_READ | EV_WRITE);
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
	struct wk_session *ss = arg;
	int c;

	(void)what;
	c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (c < 0)
		return;
	/* one connection: the server's; the listener goes */
	event_free(ss->listen_ev);
	ss->listen_ev = NULL;
	al_closep(&ss->listen_fd);
	chan_open(ss, c);
}

/* ---- the session's life ---- */

static void free_later(evutil_socket_t fd, short what, void *arg)
{
	struct wk_session *ss = arg;

	(void)fd;
	(void)what;
	if (ss->chan)
		bufferevent_free(ss->chan);
	free(ss->seen);
	free(ss);
}

/* Put the open job's result in: status, and why when not ok. */
static void commit_open(struct wk_session *ss, enum al_status_code st, const char *error)
{
	struct slot *s = ss->s;
	struct al_result res = {.version = AL_PROTO_VERSION,
				.id = s->id,
				.attempt = s->attempt,
				.status = st,
				.error = (char *)error,
				.backend = (char *)s->ops->name,
				.worker = (char *)ss->w->conf->backend.worker_id,
				.queued_ms = s->job.submitted_ms,
				.started_ms = ss->opened_ms,
				.finished_ms = al_now_ms()};

	if (st == AL_ST_OK) {
		res.has_exit_code = true;
		al_result_add_info(&res, "session", "open");
	} else if (st == AL_ST_REJECTED) {
		al_result_add_info(&res, "quota", "sessions"); /* QuotaExceeded */
	}
	wk_commit_result(ss->w, &res, s->stream, s->entry, (long)s->attempt, &s->job);
	for (size_t i = 0; i < res.ninfo; i++) {
		free(res.info[i].key);
		free(res.info[i].value);
	}
	free(res.info);
}

/* SESSION_END: the record says ended and why, the tenant's count drops. */
static void record_end(struct wk_session *ss)
{
	struct al_call c;

	al_session_end_call(&c, ss->id, al_sess_end_name(ss->why), al_now_ms(),
			    ss->w->policy.result_ttl_ms);
	wk_send_call(ss->w, &c, "session_end", ss->id);
}

static void end_session(struct wk_session *ss, enum al_sess_end why, const char *detail)
{
	struct worker *w = ss->w;
	struct slot *s = ss->s;
	struct al_err err = {0};
	char msg[AL_ERR_MSG_MAX];
	enum sess_state was = ss->state;
	struct timeval now = {0, 0};

	if (was == SS_ENDED)
		return;
	ss->state = SS_ENDED;
	snprintf(msg, sizeof(msg), "session_ended: %s%s%s", al_sess_end_name(why),
		 detail ? ": " : "", detail ? detail : "");
	al_log(why == AL_SESS_CLOSED || why == AL_SESS_IDLE || why == AL_SESS_LIFE ? "info"
										   : "warn",
	       "session_end", "job=%s reason=%s calls=%u detail=\"%s\"", s->id,
	       al_sess_end_name(why), ss->calls, detail ? detail : "");
	for (int i = 0; i < ss->nwatch; i++)
		event_free(ss->watch[i]);
	ss->nwatch = 0;
	if (ss->listen_ev)
		event_free(ss->listen_ev);
	ss->listen_ev = NULL;
	al_closep(&ss->listen_fd);
	if (ss->timer)
		event_free(ss->timer);
	if (ss->life)
		event_free(ss->life);
	if (ss->cpu_poll)
		event_free(ss->cpu_poll);
	ss->timer = ss->life = ss->cpu_poll = NULL;
	if (ss->chan)
		bufferevent_disable(ss->chan, EV_READ | EV_WRITE);
	if (ss->sb) {
		al_backend_kill(ss->sb, &err);
		al_sandbox_free(ss->sb); /* destroys it: processes, cgroup, files */
		ss->sb = NULL;
	}
	/* the calls: the one running (close: answered ok), then the queue */
	if (ss->active) {
		if (ss->active->call.op == AL_SESS_CLOSE)
			reply_status(w, ss->id, ss->active->call.id, AL_ST_OK, NULL);
		else /* the call that ended it learns so: its error says why */
			reply_status(w, ss->id, ss->active->call.id, AL_ST_SESSION_ENDED, msg);
		pending_free(ss->active);
		ss->active = NULL;
	}
	while (ss->queue) {
		struct pending *p = ss->queue;

		ss->queue = p->next;
		reply_status(w, p->call.session, p->call.id,
			     p->call.op == AL_SESS_CLOSE ? AL_ST_OK : AL_ST_SESSION_ENDED,
			     p->call.op == AL_SESS_CLOSE ? NULL : msg);
		pending_free(p);
	}
	ss->why = why;
	snprintf(ss->end_msg, sizeof(ss->end_msg), "%s", msg);
	if (was == SS_OPEN)
		record_end(ss);
	else if (was == SS_STARTING || (was == SS_OPENING && ss->open_in_flight))
		commit_open(ss, AL_ST_SANDBOX_ERROR, msg); /* never opened: the open job says why */
	/* out of the worker's list; the slot is free */
	for (struct wk_session **pp = &w->sessions; *pp; pp = &(*pp)->next)
		if (*pp == ss) {
			*pp = ss->next;
			break;
		}
	s->session = NULL;
	wk_slot_release(s);
	ss->s = NULL;
	if (!ss->open_in_flight)
		event_base_once(w->base, -1, EV_TIMEOUT, free_later, ss, &now);
}

/* A watched fd of the sandbox turned readable: it ended (a limit, the
 * server gone) when reap says so. */
static void on_watch(evutil_socket_t fd, short what, void *arg)
{
	struct wk_session *ss = arg;
	struct al_result res = {0};
	struct al_err err = {0};
	int rc;

	(void)fd;
	(void)what;
	rc = al_backend_reap(ss->sb, &res, &err);
	if (rc == 0)
		return;
	if (rc < 0)
		end_session(ss, AL_SESS_BROKEN, err.msg);
	else if (res.status == AL_ST_MEMORY_LIMIT || res.status == AL_ST_CPU_LIMIT ||
		 res.status == AL_ST_OUTPUT_LIMIT)
		end_session(ss, AL_SESS_LIMIT, al_status_name(res.status));
	else
		end_session(ss, AL_SESS_EXITED, res.error ? res.error : "the interpreter exited");
	al_result_free(&res);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct wk_session *ss = arg;

	(void)fd;
	(void)what;
	if (ss->chan_gone) {
		end_session(ss, AL_SESS_EXITED, "the session's interpreter ended");
	} else if (ss->state == SS_STARTING) {
		end_session(ss, AL_SESS_BROKEN, "the session's server did not start in time");
	} else if (ss->active && !ss->interrupted) {
		interrupt_call(ss, "time"); /* past its time */
	} else if (ss->active) {
		end_session(ss, AL_SESS_CALL_STUCK, "a call past its time did not stop");
	} else {
		end_session(ss, AL_SESS_IDLE, NULL);
	}
}

static void on_life(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	end_session(arg, AL_SESS_LIFE, NULL);
}

/* SESSION_OPEN's answer: opened (the open job's result says so), or the
 * tenant is at its maximum (the open job is refused). */
static void on_opened(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct wk_session *ss = priv;
	redisReply *r = reply_;
	char why[AL_ERR_MSG_MAX];
	bool opened, ok;

	(void)ac;
	ss->open_in_flight = false;
	ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	     r->element[0]->type == REDIS_REPLY_INTEGER &&
	     r->element[1]->type == REDIS_REPLY_INTEGER;
	opened = ok && r->element[0]->integer == 1;
	if (ss->state == SS_ENDED) {
		/* its sandbox died while Redis recorded it: recorded, it ends
		 * there too; the open job's result says why either way */
		if (opened)
			record_end(ss);
		free_later(-1, 0, ss);
		return;
	}
	if (!ok) {
		ss->state = SS_STARTING;
		end_session(ss, AL_SESS_BROKEN, "Redis did not record the session");
		return;
	}
	if (!opened) {
		snprintf(why, sizeof(why),
			 "quota: tenant %s has %lld open sessions (max_per_tenant %u on tier %s)",
			 ss->s->job.tenant, r->element[1]->integer,
			 ss->s->tier->sessions.max_per_tenant, ss->s->tier->name);
		commit_open(ss, AL_ST_REJECTED, why);
		ss->state = SS_OPENING; /* nothing recorded: nothing to end in Redis */
		end_session(ss, AL_SESS_CLOSED, "refused: quota");
		return;
	}
	ss->state = SS_OPEN;
	commit_open(ss, AL_ST_OK, NULL);
	al_log("info", "session_open", "job=%s tenant=%s tier=%s open=%lld", ss->id,
	       ss->s->job.tenant, ss->s->tier->name, r->element[1]->integer);
	arm(ss->life, ss->s->tier->sessions.max_life_ms);
	ss->opened_mono = al_mono_ms();
	if (ss->queue)
		next_call(ss);
	else
		arm_idle(ss);
}

/* The server said hello: record the session (the tenant's count checked). */
static void open_session(struct wk_session *ss)
{
	struct slot *s = ss->s;
	struct worker *w = ss->w;
	struct al_session_open_item it = {
	    .id = s->id,
	    .tenant = s->job.tenant,
	    .tier = s->tier->name,
	    .worker = w->conf->backend.worker_id,
	    .lease_ms = w->policy.lease_ms,
	    .life_ms = s->tier->sessions.max_life_ms,
	    .max_per_tenant = s->tier->sessions.max_per_tenant,
	};
	struct al_call c;

	evtimer_del(ss->timer);
	ss->state = SS_OPENING;
	ss->open_in_flight = true;
	al_session_open_call(&c, &it);
	if (al_aconn_call(w->cmd, &c, on_opened, ss)) {
		ss->open_in_flight = false;
		end_session(ss, AL_SESS_BROKEN, "out of memory");
	}
}

/* ---- the worker's side: start, calls, beats, drain ---- */

void wk_session_start(struct worker *w, struct slot *s)
{
	struct wk_session *ss = calloc(1, sizeof(*ss));
	struct al_run_spec spec = {0};
	struct al_watch wt = {.egress_fd = -1, .session_fd = -1};
	struct al_err err = {0};
	size_t n = strlen(wk_session_server_py);

	if (!ss || !(s->job.code.data = malloc(n + 1))) {
		free(ss);
		wk_commit_status(w, s->id, s->stream, s->entry, (long)s->attempt,
				 AL_ST_SANDBOX_ERROR, "out of memory");
		wk_slot_release(s);
		return;
	}
	/* the job's command: the session server, in the image's Python */
	memcpy(s->job.code.data, wk_session_server_py, n + 1);
	s->job.code.len = n;
	s->job.runtime = AL_RUNTIME_PYTHON;
	ss->w = w;
	ss->s = s;
	ss->listen_fd = -1;
	ss->opened_ms = al_now_ms();
	snprintf(ss->id, sizeof(ss->id), "%s", s->id);
	s->session = ss;
	ss->next = w->sessions;
	w->sessions = ss;
	ss->timer = evtimer_new(w->base, on_timer, ss);
	ss->life = evtimer_new(w->base, on_life, ss);
	ss->cpu_poll = evtimer_new(w->base, on_cpu_poll, ss);
	spec.job = &s->job;
	wk_run_spec_of(s->tier, &s->job, (unsigned)s->index, &spec);
	spec.attempt = s->attempt;
	spec.session = true;
	spec.network = AL_NET_NONE;
	/* the sandbox's own clock (a microVM's agent ends its job at it): the
	 * session's life, and a minute; each call has its own time */
	spec.limits.wall_ms = s->tier->sessions.max_life_ms + 60000;
	/* the job's CPU time is each call's (next_call); the sandbox's, all its
	 * calls', is the tier's budget, or none */
	spec.limits.cpu_ms =
	    s->tier->sessions.cpu_budget_ms ? s->tier->sessions.cpu_budget_ms : NO_CPU_BUDGET_MS;
	ss->sb = al_sandbox_new(s->ops, &w->conf->backend, &spec);
	if (!ss->timer || !ss->life || !ss->cpu_poll || !ss->sb) {
		end_session(ss, AL_SESS_BROKEN, "out of memory");
		return;
	}
	if (al_backend_prepare(ss->sb, &err) || al_backend_start(ss->sb, &wt, &err)) {
		al_closep(&wt.session_fd);
		al_closep(&wt.egress_fd);
		end_session(ss, AL_SESS_BROKEN, err.msg);
		return;
	}
	al_closep(&wt.egress_fd);
	{
		/* a listening socket (process, container: the server connects),
		 * or a connected one (microVM: the VM's session port) */
		int listening = 0;
		socklen_t len = sizeof(listening);

		if (wt.session_fd >= 0 &&
		    !getsockopt(wt.session_fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) &&
		    !listening) {
			fcntl(wt.session_fd, F_SETFL, fcntl(wt.session_fd, F_GETFL) | O_NONBLOCK);
			chan_open(ss, al_take_fd(&wt.session_fd));
			if (ss->state == SS_ENDED)
				return;
		}
	}
	ss->listen_fd = wt.session_fd;
	for (int i = 0; i < wt.nfds; i++) {
		ss->watch[i] = event_new(w->base, wt.fds[i], EV_READ | EV_PERSIST, on_watch, ss);
		if (ss->watch[i]) {
			event_add(ss->watch[i], NULL);
			ss->nwatch++;
		}
	}
	ss->listen_ev = ss->listen_fd >= 0
			    ? event_new(w->base, ss->listen_fd, EV_READ | EV_PERSIST, on_accept, ss)
			    : NULL;
	if ((!ss->listen_ev && !ss->chan) || ss->nwatch != wt.nfds) {
		end_session(ss, AL_SESS_BROKEN,
			    ss->listen_fd < 0 && !ss->chan ? "the backend made no session socket"
							   : "out of memory");
		return;
	}
	if (ss->listen_ev)
		event_add(ss->listen_ev, NULL);
	arm(ss->timer, HELLO_MS);
	al_log("info", "session_start", "job=%s tier=%s slot=%d", s->id, s->tier->name, s->index);
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
static void info_call(struct wk_session *ss, struct pending *p)
{
	const struct al_limits *l = &ss->s->job.limits;
	const struct al_session_policy *sp = &ss->s->tier->sessions;
	struct al_result res = {.id = p->call.id, .status = AL_ST_OK, .has_exit_code = true};
	struct al_usage u;
	size_t queued = 0;
	json_t *doc;
	char *text;

	for (struct pending *q = ss->queue; q; q = q->next)
		queued++;
	doc =
	    json_pack("{s:s, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}}", "session",
		      ss->id, "limits", "memory_bytes", (json_int_t)l->memory_bytes, "pids",
		      (json_int_t)l->pids, "disk_bytes", (json_int_t)l->disk_bytes, "cpu_millis",
		      (json_int_t)ss->sb->spec.cpu_millis, "call_timeout_ms",
		      (json_int_t)l->wall_ms, "call_cpu_ms", (json_int_t)l->cpu_ms, "stdout_bytes",
		      (json_int_t)l->stdout_bytes, "stderr_bytes", (json_int_t)l->stderr_bytes,
		      "cpu_budget_ms", (json_int_t)sp->cpu_budget_ms, "idle_ms",
		      (json_int_t)sp->idle_ms, "max_life_ms", (json_int_t)sp->max_life_ms);
	if (doc) {
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
						  ? sp->idle_ms
						  : left_of(ss->idle_since_mono, sp->idle_ms))));
		json_object_set_new(
		    doc, "life_left_ms",
		    json_integer((json_int_t)left_of(ss->opened_mono, sp->max_life_ms)));
	}
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!text) {
		reply_status(ss->w, p->call.session, p->call.id, AL_ST_SANDBOX_ERROR,
			     "out of memory");
	} else {
		res.out = (struct al_bytes){text, strlen(text)};
		res.backend = (char *)ss->s->ops->name;
		reply(ss->w, p->call.session, p->call.id, &res);
	}
	free(text);
	pending_free(p);
}

/* A cancel call (p): its target, running, is interrupted (its answer
 * says cancelled); queued, it is dropped and answered cancelled; else
 * (answered, or unknown) nothing. The cancel itself is answered ok, its
 * stdout saying which. */
static void cancel_call(struct wk_session *ss, struct pending *p)
{
	const char *target = p->call.target, *what = "not running (answered, or unknown)";
	struct al_result res = {.id = p->call.id, .status = AL_ST_OK, .has_exit_code = true};

	if (ss->active && !strcmp(ss->active->call.id, target)) {
		if (!ss->interrupted) {
			ss->cancelled = true;
			interrupt_call(ss, "cancel");
		}
		what = "interrupted";
	} else {
		for (struct pending **q = &ss->queue; *q; q = &(*q)->next)
			if (!strcmp((*q)->call.id, target)) {
				struct pending *gone = *q;

				*q = gone->next;
				reply_status(ss->w, gone->call.session, gone->call.id,
					     AL_ST_CANCELLED,
					     "cancelled by a client before it ran");
				pending_free(gone);
				what = "dropped before it ran";
				break;
			}
	}
	res.out = (struct al_bytes){(char *)what, strlen(what)};
	res.backend = (char *)ss->s->ops->name;
	reply(ss->w, p->call.session, p->call.id, &res);
	pending_free(p);
}

/* True the first time the session takes a call of this id (within its
 * last SEEN_CALLS); then remembered. */
static bool seen_first(struct wk_session *ss, const char *id)
{
	if (!ss->seen && !(ss->seen = calloc(SEEN_CALLS, sizeof(*ss->seen))))
		return true; /* out of memory: no memory of calls, as before */
	for (unsigned i = 0; i < ss->nseen; i++)
		if (!strcmp(ss->seen[i], id))
			return false;
	snprintf(ss->seen[ss->seen_at], sizeof(ss->seen[0]), "%s", id);
	ss->seen_at = (ss->seen_at + 1) % SEEN_CALLS;
	if (ss->nseen < SEEN_CALLS)
		ss->nseen++;
	return true;
}

static struct wk_session *find(struct worker *w, const char *id)
{
	for (struct wk_session *ss = w->sessions; ss; ss = ss->next)
		if (!strcmp(ss->id, id))
			return ss;
	return NULL;
}

/* A call from al:wq:<worker>, which any client credential may write to
 * (PROTOCOL.md, "What a stolen credential allows"): to its session's
 * queue, or answered at once, on that session's own call keys only:
 * malformed with a session and an id to answer on, rejected saying why;
 * its session not open here, or another tenant's, session_ended (the same
 * words for both); without a session and id, nothing is written. */
static void take_call(struct worker *w, const char *raw, size_t len)
{
	struct pending *p = calloc(1, sizeof(*p));
	struct al_err err = {0};
	struct wk_session *ss;

	if (!p)
		return;
	if (al_sess_call_decode(raw, len, &p->call, &err)) {
		char sid[AL_ID_MAX + 1], id[AL_ID_MAX + 1];
		bool named = al_sess_call_peek(raw, len, sid, id);

		if (named)
			reply_status(w, sid, id, AL_ST_REJECTED, err.msg);
		al_log("warn", "call_malformed", "session=%s call=%s error=\"%s\"",
		       named ? sid : "", named ? id : "", err.msg);
		free(p);
		return;
	}
	ss = find(w, p->call.session);
	if (!ss || ss->state == SS_ENDED || strcmp(ss->s->job.tenant, p->call.tenant)) {
		reply_status(w, p->call.session, p->call.id, AL_ST_SESSION_ENDED,
			     "session_ended: no such session open on its worker");
		pending_free(p);
		return;
	}
	if (!seen_first(ss, p->call.id)) { /* its answer is, or will be, the first's */
		al_log("info", "call_again",
		       "job=%s call=%s note=\"runs once; the answer is the "
		       "first's\"",
		       ss->id, p->call.id);
		pending_free(p);
		return;
	}
	if (p->call.op == AL_SESS_CANCEL) { /* at once, not after the calls before it */
		cancel_call(ss, p);
		return;
	}
	if (p->call.op == AL_SESS_INFO) { /* at once too: it asks the worker, not the sandbox */
		info_call(ss, p);
		return;
	}
	if (ss->state == SS_OPEN && !ss->active && p->call.op != AL_SESS_CLOSE)
		evtimer_del(ss->timer); /* not idle any more */
	{
		struct pending **tail = &ss->queue;

		while (*tail)
			tail = &(*tail)->next;
		*tail = p;
	}
	next_call(ss);
}

static void wait_calls(struct worker *w);

static void on_calls(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct worker *w = priv;
	redisReply *r = reply_;

	(void)ac;
	w->calls_waiting = false;
	if (r && r->type == REDIS_REPLY_ERROR) { /* again at the next heartbeat, not at once */
		al_log("error", "session_calls", "error=\"%s\"", r->str);
		return;
	}
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_STRING)
		take_call(w, r->element[1]->str, r->element[1]->len);
	if (r)
		wait_calls(w);
}

/* One BLPOP on al:wq:<worker> at a time, always (calls arrive any time). */
static void wait_calls(struct worker *w)
{
	struct al_call c;

	if (w->calls_waiting || !w->sessq || !al_aconn_is_up(w->sessq))
		return;
	al_session_calls_wait_call(&c, w->conf->backend.worker_id, 1000);
	if (!al_aconn_send(w->sessq, &c, on_calls, w))
		w->calls_waiting = true;
	al_call_free(&c);
}

void wk_sessions_on_up(struct al_aconn *c, void *arg)
{
	struct worker *w = arg;

	(void)c;
	al_log("info", "redis_up", "conn=sessq worker=%s", w->conf->backend.worker_id);
	w->calls_waiting = false;
	wait_calls(w);
}

/* SESSION_RENEW's answer: the sessions it did not renew have ended
 * (their lease ran out: the scheduler ended them, worker_lost; or a
 * client closed one): their sandboxes go, their slots are free. */
static void on_renewed(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct worker *w = priv;
	redisReply *r = reply_;

	(void)ac;
	for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
		struct wk_session *ss =
		    r->element[i]->type == REDIS_REPLY_STRING ? find(w, r->element[i]->str) : NULL;

		if (ss && ss->state == SS_OPEN) {
			al_log("warn", "session_gone",
			       "job=%s note=\"its record ended it (its "
			       "lease ran out?): the sandbox goes, the slot is free\"",
			       ss->id);
			end_session(ss, AL_SESS_WORKER_LOST, "the session's record had ended");
		}
	}
}

void wk_sessions_renew(struct worker *w)
{
	const char *ids[64];
	size_t n = 0;
	struct al_call c;

	for (struct wk_session *ss = w->sessions; ss; ss = ss->next) {
		if (ss->state == SS_OPEN)
			ids[n++] = ss->id;
		if (n == sizeof(ids) / sizeof(ids[0]) || (!ss->next && n)) {
			al_session_renew_call(&c, w->conf->backend.worker_id, w->policy.lease_ms,
					      ids, n);
			al_aconn_send(w->cmd, &c, on_renewed, w);
			al_call_free(&c);
			n = 0;
		}
	}
	wait_calls(w); /* the connection came back: wait again */
}

void wk_sessions_end_all(struct worker *w, enum al_sess_end why)
{
	while (w->sessions)
		end_session(w->sessions, why, NULL);
}

void wk_session_cancel(struct slot *s)
{
	if (s->session)
		end_session(s->session, AL_SESS_CLOSED, "its open job was cancelled");
}

bool wk_session_opening(const struct slot *s)
{
	return s->session && s->session->state < SS_OPEN;
}
