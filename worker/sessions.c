/* sessions.c - sessions (proto/call.h; PROTOCOL.md, "Sessions"): a job
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
#include "proxy.h"
#include "session_int.h"
#include "snapshot.h"
#include "worker.h"

extern const char wk_session_server_py[]; /* session_server.c, made from session_server.py */

static void end_session(struct wk_session *ss, enum al_sess_end why, const char *detail);
static void open_session(struct wk_session *ss);
static void resumed(struct wk_session *ss);

/* ---- frames from the server ---- */

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
	} else if (ss->restarting) {
		if (!json_is_integer(json_object_get(doc, "hello")) ||
		    !json_object_get(doc, "restarted"))
			end_session(ss, AL_SESS_BROKEN,
				    "the restarted server did not say hello as restarted");
		else
			wk_sess_restarted(ss, json_string_value(json_object_get(doc, "restarted")));
	} else if (ss->state == SS_OPEN && json_is_integer(json_object_get(doc, "hello")) &&
		   json_is_string(json_object_get(doc, "restarted"))) {
		/* a microVM's: the supervisor keeps the port, and the next
		 * interpreter says hello on it */
		wk_sess_restarted(ss, json_string_value(json_object_get(doc, "restarted")));
	} else if (ss->state == SS_OPEN && ss->active && json_object_get(doc, "chunk")) {
		wk_sess_chunk(ss, doc);
	} else if (ss->state == SS_OPEN && ss->active) {
		wk_sess_answer(ss, doc);
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
		if (n > wk_sess_frame_max(ss)) {
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

/* The server closed its end. Where its supervisor may start another
 * (a listener stays: process, container) the worker waits RESTART_MS for
 * its hello; else the sandbox ends too: its reap says why (a limit, or the
 * interpreter exited), else, after EXIT_WAIT_MS, exited. */
static void on_chan_event(struct bufferevent *bev, short what, void *arg)
{
	struct wk_session *ss = arg;

	(void)bev;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) || ss->chan_gone || ss->restarting)
		return;
	if (ss->state == SS_OPEN && ss->listen_ev && !event_add(ss->listen_ev, NULL)) {
		ss->restarting = true;
		bufferevent_free(ss->chan);
		ss->chan = NULL;
		evtimer_del(ss->cpu_poll);
		wk_sess_arm(ss->timer, RESTART_MS);
		return;
	}
	ss->chan_gone = true;
	bufferevent_disable(ss->chan, EV_READ | EV_WRITE);
	wk_sess_arm(ss->timer, EXIT_WAIT_MS);
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
	/* one connection at a time: the server's; the listener waits for the
	 * next interpreter's, after one was killed (on_chan_event) */
	if (ss->chan) {
		close(c);
		return;
	}
	event_del(ss->listen_ev);
	chan_open(ss, c);
	if (ss->chan && ss->restored && ss->state == SS_STARTING)
		resumed(ss); /* a restored server's, dialled again (runsc) */
}

/* ---- the session's life ---- */

static void free_later(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	wk_sess_free(arg);
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

/* A call queued behind a pause, back onto its session's record (SESSION_CALL:
 * the session is paused, so it waits there and resumes it). */
static void requeue(struct worker *w, const struct al_sess_call *call)
{
	struct al_buf b = {0};
	struct al_err err = {0};
	struct al_call c;

	if (al_sess_call_encode(call, &b, &err)) {
		wk_sess_reply_status(w, call->session, call->id, AL_ST_SANDBOX_ERROR, err.msg);
		return;
	}
	al_session_queue_call(&c, call->session, call->tenant, b.data, b.len);
	wk_send_call(w, &c, "session_requeue", call->id);
	al_buf_free(&b);
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
	if (ss->paused)
		al_log("info", "session_paused_out",
		       "job=%s calls=%u note=\"paused: its sandbox "
		       "goes, its slot is free\"",
		       s->id, ss->calls);
	else
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
	wk_sess_egress_end(ss); /* nothing of the sandbox connects any more */
	/* the calls: the one running (close: answered ok), then the queue */
	if (ss->active) {
		if (ss->active->call.op == AL_SESS_CLOSE)
			wk_sess_reply_status(w, ss->id, ss->active->call.id, AL_ST_OK, NULL);
		else /* the call that ended it learns so: its error says why */
			wk_sess_reply_status(w, ss->id, ss->active->call.id, AL_ST_SESSION_ENDED,
					     msg);
		wk_sess_pending_free(ss->active);
		ss->active = NULL;
	}
	while (ss->queue) {
		struct pending *p = ss->queue;

		ss->queue = p->next;
		if (ss->paused) /* back to Redis: they wait for the session there, and resume it */
			requeue(w, &p->call);
		else
			wk_sess_reply_status(w, p->call.session, p->call.id,
					     p->call.op == AL_SESS_CLOSE ? AL_ST_OK
									 : AL_ST_SESSION_ENDED,
					     p->call.op == AL_SESS_CLOSE ? NULL : msg);
		wk_sess_pending_free(p);
	}
	ss->why = why;
	snprintf(ss->end_msg, sizeof(ss->end_msg), "%s", msg);
	if (ss->paused)
		; /* the record says paused */
	else if (was == SS_OPEN)
		record_end(ss);
	else if (ss->restored) /* its record says resuming: it ends, its calls learn why */
		wk_sess_resume_failed(w, ss->id, why, msg);
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
	if (!ss->open_in_flight && !ss->pause_in_flight)
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
	} else if (ss->restarting) {
		end_session(ss, AL_SESS_EXITED,
			    "the session's interpreter ended, and no other came");
	} else if (ss->state == SS_STARTING) {
		end_session(ss, AL_SESS_BROKEN, "the session's server did not start in time");
	} else if (ss->active && !ss->interrupted) {
		wk_sess_interrupt(ss, "time"); /* past its time */
	} else if (ss->active) {
		end_session(ss, AL_SESS_CALL_STUCK, "a call past its time did not stop");
	} else if (ss->s->tier->sessions.pause_on_idle && !ss->pause_in_flight &&
		   wk_sess_pausable(ss)) {
		wk_sess_pause(ss); /* on_idle: pause (it ends idle if it cannot) */
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

/* Open (or open again): its life from now, then its calls or its idle
 * time. */
static void serving(struct wk_session *ss)
{
	wk_sess_arm(ss->life, ss->life_ms);
	ss->opened_mono = al_mono_ms();
	if (ss->queue)
		wk_sess_next(ss);
	else
		wk_sess_arm_idle(ss);
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
	serving(ss);
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
	    .life_ms = s->tier->sessions.life_ms,
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

/* SESSION_RESUMED's answer: a restored session is open here again (the
 * calls that waited for it are on al:wq:<worker> now); its snapshot goes. */
static void on_resumed(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct wk_session *ss = priv;
	redisReply *r = reply_;
	bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
		  r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 1;

	(void)ac;
	ss->open_in_flight = false;
	if (ss->state == SS_ENDED) {
		free_later(-1, 0, ss);
		return;
	}
	if (!ok) {
		end_session(ss, AL_SESS_BROKEN, "Redis did not record the resumed session");
		return;
	}
	ss->state = SS_OPEN;
	al_log("info", "session_resumed", "job=%s tenant=%s tier=%s ms=%llu", ss->id,
	       ss->s->job.tenant, ss->s->tier->name, (unsigned long long)ss->resumed_ms);
	/* open again: the snapshot is of no more use (until now a worker's
	 * death sent the session back to paused, with it) */
	wk_snap_remove(ss->restored_from);
	serving(ss);
}

/* A restored session's sandbox runs: made unique (its server reseeds its
 * random generators; the guest agent was told already), then open again
 * in its record. */
static void resumed(struct wk_session *ss)
{
	struct al_call c;

	ss->resumed_ms = al_mono_ms() - ss->resume_t0_ms;
	if (wk_sess_send(ss, json_pack("{s:s}", "op", "reseed"))) {
		end_session(ss, AL_SESS_BROKEN, "could not reach the restored session's server");
		return;
	}
	ss->state = SS_OPENING;
	ss->open_in_flight = true;
	al_session_resumed_call(&c, ss->id, ss->s->job.tenant, ss->w->conf->backend.worker_id);
	if (al_aconn_call(ss->w->cmd, &c, on_resumed, ss)) {
		ss->open_in_flight = false;
		end_session(ss, AL_SESS_BROKEN, "Redis did not record the resumed session");
	}
}

void wk_session_start(struct worker *w, struct slot *s, const struct wk_restore *rs)
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
	ss->end = end_session;
	ss->pause = wk_sess_pause;
	ss->restored = rs != NULL;
	if (rs) {
		ss->restored_from = strdup(rs->path);
		ss->resume_t0_ms = rs->t0_ms;
	}
	ss->idle_ms = rs ? rs->idle_ms : s->tier->sessions.idle_ms;
	ss->life_ms = rs ? rs->life_left_ms : s->tier->sessions.life_ms;
	ss->calls = rs ? (unsigned)rs->calls : 0;
	if (rs && rs->seen) /* its calls before the pause run no second time either */
		wk_sess_seen_load(ss, rs->seen);
	ss->listen_fd = -1;
	ss->opened_ms = al_now_ms();
	snprintf(ss->id, sizeof(ss->id), "%s", s->id);
	s->session = ss;
	ss->next = w->sessions;
	w->sessions = ss;
	ss->timer = evtimer_new(w->base, on_timer, ss);
	ss->life = evtimer_new(w->base, on_life, ss);
	ss->cpu_poll = evtimer_new(w->base, wk_sess_on_cpu_poll, ss);
	spec.job = &s->job;
	wk_run_spec_of(s->tier, &s->job, (unsigned)s->index, &spec);
	spec.attempt = s->attempt;
	spec.session = true;
	/* network egress as a job's: the tier's rules, narrowed by the open
	 * job's; one proxy serves all the calls, each answer its transcript */
	wk_run_spec_egress(s->tier, &s->job, s->egress, &s->negress, &spec);
	spec.network = s->job.network;
	/* the sandbox's own clock (a microVM's agent ends its job at it): the
	 * session's life, and a minute; each call has its own time */
	spec.limits.wall_ms = s->tier->sessions.max_life_ms + 60000;
	/* the job's CPU time is each call's (next_call); the sandbox's, all its
	 * calls', is the budget the caller asked for, never above the tier's,
	 * or none when neither asks */
	ss->cpu_budget_ms = s->tier->sessions.cpu_budget_ms;
	if (s->job.cpu_budget_ms &&
	    (!ss->cpu_budget_ms || s->job.cpu_budget_ms < ss->cpu_budget_ms))
		ss->cpu_budget_ms = s->job.cpu_budget_ms;
	spec.limits.cpu_ms = ss->cpu_budget_ms ? ss->cpu_budget_ms : NO_CPU_BUDGET_MS;
	if (rs) { /* the sandbox as it was paused: its server serves already */
		ss->cpu_budget_ms = rs->cpu_budget_ms;
		spec.restore = true;
		spec.restore_fd = rs->fd;
	}
	ss->sb = al_sandbox_new(s->ops, &w->conf->backend, &spec);
	if (!ss->timer || !ss->life || !ss->cpu_poll || !ss->sb) {
		end_session(ss, AL_SESS_BROKEN, "out of memory");
		return;
	}
	if (al_backend_prepare(ss->sb, &err) || al_backend_start(ss->sb, &wt, &err)) {
		al_closep(&wt.session_fd);
		al_closep(&wt.egress_fd);
		end_session(ss, rs ? AL_SESS_SNAPSHOT_REFUSED : AL_SESS_BROKEN, err.msg);
		return;
	}
	if (wt.egress_fd >= 0 &&
	    !(ss->egress = wk_runner_proxy(w->base, s->ops, &w->conf->backend, &spec, &wt))) {
		al_closep(&wt.session_fd);
		end_session(ss, AL_SESS_BROKEN, "cannot start the session's egress proxy");
		return;
	}
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
	al_log("info", "session_start", "job=%s tier=%s slot=%d%s", s->id, s->tier->name, s->index,
	       rs ? " restored=1" : "");
	if (rs && ss->chan) { /* its port, whose server serves already (microVM) */
		resumed(ss);
		return;
	}
	/* the server's hello; a restored server's connection (runsc: it
	 * dials the listener again, on_accept) */
	wk_sess_arm(ss->timer, HELLO_MS);
}

/* Whether this worker paused session id lately (then forgets it). */
static bool paused_here(struct worker *w, const char *id)
{
	for (unsigned i = 0; i < sizeof(w->paused_ids) / sizeof(w->paused_ids[0]); i++)
		if (!strcmp(w->paused_ids[i], id))
			return true;
	return false;
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
			wk_sess_reply_status(w, sid, id, AL_ST_REJECTED, err.msg);
		al_log("warn", "call_malformed", "session=%s call=%s error=\"%s\"",
		       named ? sid : "", named ? id : "", err.msg);
		free(p);
		return;
	}
	ss = find(w, p->call.session);
	if ((!ss || ss->state == SS_ENDED) && paused_here(w, p->call.session)) {
		requeue(w, &p->call); /* sent while it paused: the record resumes it */
		wk_sess_pending_free(p);
		return;
	}
	if (!ss || ss->state == SS_ENDED || strcmp(ss->s->job.tenant, p->call.tenant)) {
		wk_sess_reply_status(w, p->call.session, p->call.id, AL_ST_SESSION_ENDED,
				     "session_ended: no such session open on its worker");
		wk_sess_pending_free(p);
		return;
	}
	if (!wk_sess_seen_first(ss, p->call.id)) { /* its answer is, or will be, the first's */
		al_log("info", "call_again",
		       "job=%s call=%s note=\"runs once; the answer is the "
		       "first's\"",
		       ss->id, p->call.id);
		wk_sess_pending_free(p);
		return;
	}
	if (p->call.op == AL_SESS_CANCEL) { /* at once, not after the calls before it */
		wk_sess_cancel(ss, p);
		return;
	}
	if (p->call.op == AL_SESS_INFO || p->call.op == AL_SESS_RESUME) {
		/* at once too: it asks the worker, not the sandbox (resume: open
		 * already, its info says so) */
		wk_sess_info(ss, p);
		return;
	}
	if (p->call.op == AL_SESS_EXTEND) {
		wk_sess_extend(ss, p);
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
	wk_sess_next(ss);
}

static void wait_calls(struct worker *w);

static void on_calls(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct worker *w = priv;
	redisReply *r = reply_;
	char wq[AL_KEY_MAX];

	(void)ac;
	w->calls_waiting = false;
	if (r && r->type == REDIS_REPLY_ERROR) { /* again at the next heartbeat, not at once */
		al_log("error", "session_calls", "error=\"%s\"", r->str);
		return;
	}
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    r->element[1]->type == REDIS_REPLY_STRING) {
		if (!strcmp(r->element[0]->str, al_key_wq(wq, w->conf->backend.worker_id)))
			take_call(w, r->element[1]->str, r->element[1]->len);
		else /* a resume queue's: a paused session to restore here */
			wk_sess_resume(w, r->element[0]->str, r->element[1]->str, wk_session_start);
	}
	if (r)
		wait_calls(w);
}

/* One BLPOP on al:wq:<worker> at a time, always (calls arrive any time),
 * and on the resume queues of the tiers with a free slot here. */
static void wait_calls(struct worker *w)
{
	char keys[AL_TIERS_MAX + 1][AL_KEY_MAX];
	const char *rqs[AL_TIERS_MAX + 1];
	size_t n = 0;
	struct al_call c;

	if (w->calls_waiting || !w->sessq || !al_aconn_is_up(w->sessq))
		return;
	if (!w->draining)
		n = wk_sess_resume_queues(w, true, keys, AL_TIERS_MAX + 1);
	for (size_t i = 0; i < n; i++)
		rqs[i] = keys[i];
	al_session_calls_wait_call(&c, w->conf->backend.worker_id, rqs, n, 1000);
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
	wk_sess_paused_tick(w);
}

void wk_sessions_end_all(struct worker *w, enum al_sess_end why)
{
	while (w->sessions)
		end_session(w->sessions, why, NULL);
}

void wk_sessions_drain(struct worker *w)
{
	struct wk_session *ss = w->sessions, *next;

	for (; ss; ss = next) {
		next = ss->next;
		if (ss->state == SS_OPEN && !ss->active && !ss->queue && !ss->pause_in_flight &&
		    ss->s->tier->sessions.pause_on_idle && wk_sess_pausable(ss))
			wk_sess_pause(ss); /* its slot frees once the record says paused */
		else if (!ss->pause_in_flight)
			end_session(ss, AL_SESS_WORKER_STOP, NULL);
	}
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
