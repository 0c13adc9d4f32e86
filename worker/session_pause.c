/* session_pause.c - sessions pausing (docs/snapshots.md; scripts.h
 * SESSION_PAUSE, SESSION_FORK): a session's sandbox saved whole into a
 * snapshot (worker/snapshot.h) and freed, the record saying paused; its
 * next call (or a resume) puts its id on its tier's resume queue, where a
 * worker that can reach the snapshot takes it (session_resume.c); fork
 * makes paused copies from one snapshot. A backend with AL_CAP_SNAPSHOT pauses (the microVM: its
 * memory, devices and the files on its tmpfs), and one whose snapshot_ok
 * says so for the session's tier (the container backend on runsc: its
 * checkpoint stops the sandbox, so the tenant's paused count is looked at
 * first, the session's server lets go of its host socket, and a fork's
 * parent is paused too, then resumed at once); the process tier and runc
 * answer unsupported (their processes cannot be saved: CRIU does not work
 * on the kernels we run).
 *
 * The pause is one blocking step of the worker's loop (the VMM writes the
 * guest's memory to a file: about 0.3 s for a 256 MiB guest under TCG);
 * the rest is Redis's, answered through the loop. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cleanup.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "../proto/json.h"
#include "session_int.h"
#include "snapshot.h"

#define RELEASE_MS 5000 /* a runsc session's server lets go of its connection */

/* A pause (or fork) on its way to the record. */
struct wk_pausing {
	struct wk_snap snap;
	uint64_t t0, save_ms;
	unsigned n;   /* fork: copies */
	bool stopped; /* the snapshot stopped the sandbox (runsc) */
	/* a fork that stopped its parent (runsc): the parent is recorded
	 * paused after its copies (snap.path its own name for the bytes), then
	 * resumed at once; reply: the fork's answer, given then */
	char *reply;
	char dir[PATH_MAX];
	char parent[PATH_MAX]; /* ...the parent's name for the snapshot, until recorded */
	char ids[AL_SESS_FORK_MAX][AL_ID_MAX + 1];
	char paths[AL_SESS_FORK_MAX][PATH_MAX];
};

bool wk_tier_pauses(const struct al_tier_policy *t, const struct al_backend_ops *ops)
{
	struct al_err err = {0};

	return (ops->caps & AL_CAP_SNAPSHOT) ||
	       (ops->snapshot_ok && !ops->snapshot_ok(t->oci_runtime, &err));
}

/* Whether ss's sandbox can be saved: 0, else err says why not; *stops: its
 * snapshot stops it (runsc), and its server lets go of its connection
 * first. */
static int can_pause(const struct wk_session *ss, bool *stops, struct al_err *err)
{
	const struct al_backend_ops *ops = ss->s->ops;

	*stops = false;
	if (ops->caps & AL_CAP_SNAPSHOT)
		return AL_OK;
	if (!ops->snapshot_ok)
		return al_err_set(
		    err, AL_EINVAL,
		    "it cannot save its processes (a checkpoint needs CRIU, which "
		    "does not work on the kernels Airlock runs on): close the session "
		    "and open another, or use a microVM tier");
	*stops = true;
	return ops->snapshot_ok(ss->s->tier->oci_runtime, err);
}

bool wk_sess_pausable(const struct wk_session *ss)
{
	bool stops;
	struct al_err err = {0};

	return !can_pause(ss, &stops, &err);
}

const char *wk_sess_rq_of(struct worker *w, const struct al_tier_policy *t, char out[AL_KEY_MAX])
{
	return al_key_rq(out, t->snapshot_dir ? t->name : NULL, w->conf->backend.worker_id);
}

/* The pause call (if any) answered st/msg; the session goes on. */
static void refuse(struct wk_session *ss, enum al_status_code st, const char *msg)
{
	struct pending *p = ss->active;

	if (p) {
		wk_sess_reply_status(ss->w, p->call.session, p->call.id, st, msg);
		wk_sess_pending_free(p);
		ss->active = NULL;
	} else { /* it idled on a tier that pauses idle sessions: it ends idle */
		al_log("warn", "session_pause", "job=%s error=\"%s\"", ss->id, msg);
		ss->end(ss, ss->w->draining ? AL_SESS_WORKER_STOP : AL_SESS_IDLE,
			"it could not be paused");
		return;
	}
	if (ss->queue)
		wk_sess_next(ss);
	else
		wk_sess_arm_idle(ss);
}

static void drop_files(struct wk_pausing *pz)
{
	for (unsigned i = 0; i < pz->n; i++)
		wk_snap_remove(pz->paths[i]);
	wk_snap_remove(pz->snap.path);
	if (pz->parent[0])
		wk_snap_remove(pz->parent);
}

static void pausing_free(struct wk_pausing *pz)
{
	if (pz)
		free(pz->reply);
	free(pz);
}

static void quota_msg(const struct wk_session *ss, long long n, char *msg, size_t cap)
{
	snprintf(msg, cap,
		 "quota: tenant %s has %lld paused sessions (max_paused_per_tenant %u on "
		 "tier %s)",
		 ss->s->job.tenant, n, ss->s->tier->sessions.max_paused_per_tenant,
		 ss->s->tier->name);
}

void wk_sess_requeue(struct worker *w, const char *rq, const char *sid)
{
	struct al_call c;

	al_call_init(&c, NULL);
	al_call_str(&c, "LPUSH");
	al_call_str(&c, rq);
	al_call_str(&c, sid);
	wk_send_call(w, &c, "resume_back", sid);
}

static int record(struct wk_session *ss, struct wk_pausing *pz, unsigned copies,
		  struct al_err *err);

/* The call's answer (a fork's, given before its parent's end). */
static void answer(struct wk_session *ss, const char *text)
{
	if (!ss->active)
		return;
	wk_sess_reply_text(ss, &ss->active->call, text);
	wk_sess_pending_free(ss->active);
	ss->active = NULL;
}

static void on_paused(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct wk_session *ss = priv;
	struct wk_pausing *pz = ss->pausing;
	redisReply *r = reply_;
	long long rc = -3, n = 0;
	char msg[AL_ERR_MSG_MAX + 128], rq[AL_KEY_MAX];
	bool fork = pz->n > 0;
	struct al_err err = {0};

	(void)ac;
	ss->pause_in_flight = false;
	ss->pausing = NULL;
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_INTEGER) {
		rc = r->element[0]->integer;
		n = r->element[1]->type == REDIS_REPLY_INTEGER ? r->element[1]->integer : 0;
	}
	if (ss->state == SS_ENDED) { /* it ended meanwhile (its life, the worker's drain) */
		if (rc != 1 || !fork)
			drop_files(pz);
		pausing_free(pz);
		wk_sess_free(ss);
		return;
	}
	if (rc != 1) {
		bool stopped = pz->stopped;

		drop_files(pz);
		if (rc == 0)
			quota_msg(ss, n, msg, sizeof(msg));
		else
			snprintf(msg, sizeof(msg), "%s: Redis did not record it%s",
				 fork ? "fork" : "pause",
				 rc == -1 ? " (the session is not open here)" : "");
		if (stopped) { /* its sandbox is gone with the snapshot: so is the session */
			size_t l = strlen(msg);

			snprintf(msg + l, sizeof(msg) - l,
				 " (refused after runsc's checkpoint had stopped its sandbox)");
			if (pz->reply) /* its copies are made: the fork is answered */
				answer(ss, pz->reply);
			pausing_free(pz);
			ss->end(ss, AL_SESS_BROKEN, msg);
			return;
		}
		pausing_free(pz);
		refuse(ss, rc == 0 ? AL_ST_REJECTED : AL_ST_SANDBOX_ERROR, msg);
		return;
	}
	if (fork) {
		json_t *ids = json_array();
		char *text;

		for (unsigned i = 0; i < pz->n; i++)
			json_array_append_new(ids, json_string(pz->ids[i]));
		json_t *doc =
		    json_pack("{s:o, s:I, s:I}", "sessions", ids, "snapshot_bytes",
			      (json_int_t)pz->snap.size, "snapshot_ms", (json_int_t)pz->save_ms);

		text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
		json_decref(doc);
		wk_snap_remove(pz->snap.path); /* each copy has its own name for the bytes */
		al_log("info", "session_fork", "job=%s copies=%u bytes=%llu ms=%llu", ss->id, pz->n,
		       (unsigned long long)pz->snap.size, (unsigned long long)pz->save_ms);
		if (pz->stopped) { /* runsc: the parent's pause next, then the answer */
			pz->reply = text ? text : strdup("{}");
			snprintf(pz->snap.path, sizeof(pz->snap.path), "%s", pz->parent);
			pz->parent[0] = '\0';
			if (record(ss, pz, 0, &err)) {
				answer(ss, pz->reply);
				drop_files(pz);
				pausing_free(pz);
				ss->end(ss, AL_SESS_BROKEN, err.msg);
			}
			return;
		}
		answer(ss, text ? text : "{}");
		free(text);
		pausing_free(pz);
		if (ss->queue)
			wk_sess_next(ss);
		else
			wk_sess_arm_idle(ss);
		return;
	}
	al_log("info", "session_paused", "job=%s bytes=%llu ms=%llu path=%s tenant_paused=%lld",
	       ss->id, (unsigned long long)pz->snap.size, (unsigned long long)pz->save_ms,
	       pz->snap.path, n);
	snprintf(msg, sizeof(msg),
		 "{\"state\":\"paused\",\"snapshot_bytes\":%llu,\"pause_ms\":%llu}",
		 (unsigned long long)pz->snap.size, (unsigned long long)pz->save_ms);
	answer(ss, pz->reply ? pz->reply : msg);
	snprintf(ss->w->paused_ids[ss->w->paused_at++ % 64], AL_ID_MAX + 1, "%s", ss->id);
	/* a fork's parent on runsc: back at once (any worker of its queue) */
	if (pz->reply)
		wk_sess_requeue(ss->w, wk_sess_rq_of(ss->w, ss->s->tier, rq), ss->id);
	pausing_free(pz);
	ss->paused = true;
	ss->end(ss, AL_SESS_CLOSED, "paused"); /* the sandbox goes; the record says paused */
}

static void on_quota(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct wk_session *ss = priv;
	redisReply *r = reply_;
	char msg[AL_ERR_MSG_MAX + 128];
	long long n = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
	/* a fork's copies and, on runsc, its parent too */
	long long need = ss->active && ss->active->call.op == AL_SESS_FORK
			     ? (long long)ss->active->call.count + 1
			     : 1;

	(void)ac;
	ss->pause_in_flight = false;
	if (ss->state == SS_ENDED) { /* it ended meanwhile */
		wk_sess_free(ss);
		return;
	}
	if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
		refuse(ss, AL_ST_SANDBOX_ERROR, "pause: Redis did not answer");
		return;
	}
	if (n + need > (long long)ss->s->tier->sessions.max_paused_per_tenant) {
		quota_msg(ss, n, msg, sizeof(msg));
		if (need > 1) {
			size_t l = strlen(msg);

			snprintf(msg + l, sizeof(msg) - l,
				 ": a fork of %lld needs %lld places on runsc (its copies, and its "
				 "parent, which its checkpoint pauses)",
				 need - 1, need);
		}
		refuse(ss, AL_ST_REJECTED, msg);
		return;
	}
	ss->pause_checked = true;
	wk_sess_pause(ss);
}

/* The tenant's paused sessions, counted before a pause that stops its
 * sandbox (then on_quota goes on with it). */
static void check_quota(struct wk_session *ss)
{
	char key[AL_KEY_MAX];
	struct al_call c;

	al_call_init(&c, NULL);
	al_call_str(&c, "HGET");
	al_call_str(&c, al_key_tenant(key, ss->s->job.tenant));
	al_call_str(&c, "paused");
	ss->pause_in_flight = true; /* no call runs, and the session is not freed, meanwhile */
	if (al_aconn_call(ss->w->cmd, &c, on_quota, ss)) {
		ss->pause_in_flight = false;
		refuse(ss, AL_ST_SANDBOX_ERROR, "pause: Redis is not reachable");
	}
}

/* Whether a runsc session's server can be told to let go now: connected,
 * and nothing of the worker's on its way to it. */
static bool can_let_go(const struct wk_session *ss)
{
	return ss->chan && !ss->restarting && !ss->chan_gone &&
	       !evbuffer_get_length(bufferevent_get_output(ss->chan));
}

/* A runsc session's server lets go of its connection to the worker (a
 * host socket, which runsc's checkpoint cannot save): the listener goes
 * first (its dialling again fails until a restored sandbox listens), the
 * sandbox's watch stops looking (it stops on purpose), then the server
 * is told and its end closes, within RELEASE_MS. With network egress the
 * proxy goes first too, its listener and connections (their relay's host
 * sockets: the server has the relay close its ends before its own). */
static int let_go(struct wk_session *ss, struct al_err *err)
{
	static const char frame[] = "{\"op\":\"release\"}";
	uint32_t be = htonl(sizeof(frame) - 1);
	uint64_t end = al_mono_ms() + RELEASE_MS;
	char buf[4096];
	int fd, rc = AL_ESANDBOX;

	if (ss->listen_ev)
		event_free(ss->listen_ev);
	ss->listen_ev = NULL;
	al_closep(&ss->listen_fd);
	wk_sess_egress_end(ss);
	for (int i = 0; i < ss->nwatch; i++)
		event_del(ss->watch[i]);
	evtimer_del(ss->cpu_poll);
	fd = bufferevent_getfd(ss->chan);
	bufferevent_disable(ss->chan, EV_READ | EV_WRITE);
	if (write(fd, &be, 4) != 4 || write(fd, frame, sizeof(frame) - 1) != sizeof(frame) - 1)
		end = 0;
	for (uint64_t now; (now = al_mono_ms()) < end;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		ssize_t k;

		if (poll(&pf, 1, (int)(end - now)) <= 0)
			continue;
		if ((k = read(fd, buf, sizeof(buf))) == 0) {
			rc = AL_OK;
			break;
		}
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			break;
	}
	bufferevent_free(ss->chan);
	ss->chan = NULL;
	return rc ? al_err_set(err, AL_ESANDBOX,
			       "pause: the session's server did not let go of its connection "
			       "within %d s",
			       RELEASE_MS / 1000)
		  : AL_OK;
}

/* A fork's copy i: its id (the first's is the snapshot's name already),
 * its name for the snapshot's bytes. */
static int copy(struct wk_pausing *pz, unsigned i, const char *dir, struct al_err *err)
{
	int rc = i ? al_job_new_id(pz->ids[i], err) : AL_OK;

	wk_snap_path(dir, pz->ids[i], pz->paths[i], sizeof(pz->paths[i]));
	return rc ? rc : i ? wk_snap_link(pz->snap.path, pz->paths[i], err) : AL_OK;
}

/* The record of a pause (copies 0: pz->snap.path is the session's own
 * snapshot), or of a fork's copies (their names made here): sent, its
 * answer to on_paused. */
static int record(struct wk_session *ss, struct wk_pausing *pz, unsigned copies, struct al_err *err)
{
	struct worker *w = ss->w;
	const struct al_tier_policy *t = ss->s->tier;
	bool fork = copies > 0;
	char rq[AL_KEY_MAX], num[4][32], calls[32];
	struct al_buf job = {0};
	struct al_job kept = ss->s->job;
	struct al_call c;
	uint64_t lived = al_mono_ms() - ss->opened_mono;
	int rc;

	/* the open job, without the server's code (the worker's own, given again) */
	kept.code = (struct al_bytes){0};
	kept.runtime = AL_RUNTIME_ARGV;
	if ((rc = al_job_encode(&kept, &job, err)))
		return rc;
	snprintf(num[0], sizeof(num[0]), "%llu", (unsigned long long)pz->snap.size);
	snprintf(num[1], sizeof(num[1]), "%llu",
		 (unsigned long long)(lived < ss->life_ms ? ss->life_ms - lived : 1));
	snprintf(num[2], sizeof(num[2]), "%llu", (unsigned long long)ss->idle_ms);
	snprintf(num[3], sizeof(num[3]), "%llu", (unsigned long long)ss->cpu_budget_ms);
	snprintf(calls, sizeof(calls), "%u", ss->calls);
	{
		cleanup_free char *seen = fork ? NULL : wk_sess_seen_text(ss);
		/* a copy is a session of its own: no id of its parent's calls */
		const struct al_rec_field fields[] = {
		    {"snapshot", pz->snap.path},
		    {"snapshot_bytes", num[0]},
		    {"snapshot_sha256", pz->snap.sha256},
		    {"life_left_ms", num[1]},
		    {"idle_ms", num[2]},
		    {"cpu_budget_ms", num[3]},
		    {"calls", calls},
		    {"seen", seen ? seen : ""},
		};
		struct al_session_pause_item it = {
		    .id = ss->id,
		    .tenant = ss->s->job.tenant,
		    .worker = w->conf->backend.worker_id,
		    .rq = wk_sess_rq_of(w, t, rq),
		    .max_paused = t->sessions.max_paused_per_tenant,
		    .paused_max_ms = t->sessions.paused_max_ms,
		    /* a copy's snapshot is its own, and its calls */
		    .fields = fields + (fork ? 1 : 0),
		    .nfields = sizeof(fields) / sizeof(fields[0]) - (fork ? 2 : 0),
		    .job = {job.data, job.len},
		};

		if (fork) {
			const char *ids[AL_SESS_FORK_MAX], *paths[AL_SESS_FORK_MAX];

			pz->n = copies;
			for (unsigned i = 0; i < pz->n; i++) {
				if ((rc = copy(pz, i, pz->dir, err))) {
					pz->n = i;
					al_buf_free(&job);
					return rc;
				}
				ids[i] = pz->ids[i];
				paths[i] = pz->paths[i];
			}
			/* the first copy's name is the snapshot's own */
			pz->snap.path[0] = '\0';
			al_session_fork_call(&c, &it, ids, paths, pz->n);
		} else {
			pz->n = 0;
			al_session_pause_call(&c, &it);
		}
	}
	al_buf_free(&job);
	ss->pausing = pz;
	ss->pause_in_flight = true;
	if (al_aconn_call(w->cmd, &c, on_paused, ss)) {
		ss->pause_in_flight = false;
		ss->pausing = NULL;
		return al_err_set(err, AL_ESANDBOX, "pause: Redis is not reachable");
	}
	return AL_OK;
}

/* A fork that stops its parent (runsc): the parent's own name for the
 * snapshot's bytes, for its pause after its copies are recorded. */
static int copy_parent(struct wk_session *ss, struct wk_pausing *pz, struct al_err *err)
{
	wk_snap_path(pz->dir, ss->id, pz->parent, sizeof(pz->parent));
	if (wk_snap_link(pz->snap.path, pz->parent, err)) {
		pz->parent[0] = '\0';
		return err->code ? err->code : AL_ESYS;
	}
	return AL_OK;
}

void wk_sess_pause(struct wk_session *ss)
{
	const struct al_tier_policy *t = ss->s->tier;
	struct pending *p = ss->active;
	bool fork = p && p->call.op == AL_SESS_FORK;
	struct wk_pausing *pz;
	char msg[AL_ERR_MSG_MAX + 256];
	struct al_err err = {0};
	bool stops;

	evtimer_del(ss->timer);
	if (can_pause(ss, &stops, &err)) {
		snprintf(msg, sizeof(msg), "unsupported: a session on the %s tier %s cannot %s: %s",
			 ss->s->ops->name, t->name, fork ? "fork" : "pause", err.msg);
		refuse(ss, AL_ST_REJECTED, msg);
		return;
	}
	if (!t->sessions.max_paused_per_tenant) {
		snprintf(msg, sizeof(msg),
			 "%s: tier %s keeps no paused sessions (sessions.max_paused_per_tenant is "
			 "0)",
			 fork ? "fork" : "pause", t->name);
		refuse(ss, AL_ST_REJECTED, msg);
		return;
	}
	/* runsc: its checkpoint stops the sandbox, which a quota refusal
	 * after it could not undo: the tenant's count is looked at first */
	if (stops && !ss->pause_checked) {
		check_quota(ss);
		return;
	}
	ss->pause_checked = false;
	if (stops && !can_let_go(ss)) { /* nothing is touched yet: it goes on */
		refuse(ss, AL_ST_SANDBOX_ERROR,
		       "pause: the session's server is not connected now (its interpreter "
		       "restarting?): try again");
		return;
	}
	if (!(pz = calloc(1, sizeof(*pz))) ||
	    wk_snap_dir(t, &ss->w->conf->backend, pz->dir, sizeof(pz->dir), &err)) {
		free(pz);
		refuse(ss, AL_ST_SANDBOX_ERROR, err.msg[0] ? err.msg : "out of memory");
		return;
	}
	/* a save that stops the sandbox and then fails loses it: room first */
	if (stops && al_backend_snapshot_room(ss->sb, pz->dir, &err)) {
		free(pz);
		snprintf(msg, sizeof(msg), "%s: %s; the session goes on", fork ? "fork" : "pause",
			 err.msg);
		refuse(ss, AL_ST_SANDBOX_ERROR, msg);
		return;
	}
	pz->t0 = al_mono_ms();
	/* a fork's first copy's id names the snapshot until each has its own */
	if (fork && al_job_new_id(pz->ids[0], &err)) {
		free(pz);
		refuse(ss, AL_ST_SANDBOX_ERROR, err.msg);
		return;
	}
	/* kept running: a pause the record refuses (quota) leaves it as it was;
	 * on runsc, its server lets go of its connection, then it stops (a
	 * fork's parent is paused too, then resumed at once) */
	pz->stopped = stops;
	if ((stops && let_go(ss, &err)) ||
	    wk_snap_save(ss->sb, pz->dir, fork ? pz->ids[0] : ss->id, !stops, &pz->snap, &err)) {
		free(pz);
		if (stops) /* its watch no longer looks: the session ends here */
			ss->end(ss, AL_SESS_BROKEN, err.msg);
		else /* a sandbox whole after it runs on (the backend's message
		      * says so), else its watch ends the session */
			refuse(ss, AL_ST_SANDBOX_ERROR, err.msg);
		return;
	}
	pz->save_ms = al_mono_ms() - pz->t0;
	if ((stops && fork && copy_parent(ss, pz, &err)) ||
	    record(ss, pz, fork ? p->call.count : 0, &err)) {
		drop_files(pz);
		pausing_free(pz);
		if (stops)
			ss->end(ss, AL_SESS_BROKEN, err.msg);
		else
			refuse(ss, AL_ST_SANDBOX_ERROR, err.msg);
	}
}
