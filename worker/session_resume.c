/* session_resume.c - paused sessions coming back (docs/snapshots.md;
 * scripts.h SESSION_TAKE ... PAUSED_DUE, PAUSED_EXPIRE): a paused
 * session's id on a resume queue this worker serves is taken, its
 * snapshot checked against the record's digest and restored into a free
 * slot (or, refused, the session dropped with its held calls answered
 * first); and the housekeeping of paused sessions: those past their time
 * ended with their files, the halves of pauses an earlier run left, and
 * the files of sessions that ended while their worker was away. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cleanup.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "session_int.h"
#include "snapshot.h"

/* Snapshots no paused session names are looked for this often; one that
 * no record names goes only past a pause's or a fork's time to record it
 * (its file is put in place first). */
#define SNAP_ORPHANS_EVERY_MS (10 * 60 * 1000)
#define SNAP_ORPHAN_AGE_MS    (10 * 60 * 1000)

/* Whether path (from a record in Redis, which this worker does not take
 * on trust to name a file to open or remove) is DIR/<name>.snap for the
 * snapshot directory DIR of one of the tiers it serves. */
static bool ours(struct worker *w, const char *path)
{
	const char *base = strrchr(path, '/');
	size_t l = strlen(path);

	if (!base || l < 6 || strcmp(path + l - 5, ".snap") || strstr(path, "/.") || base[1] == '.')
		return false;
	for (size_t i = 0; i < w->policy.ntiers; i++) {
		const struct al_tier_policy *t = &w->policy.tiers[i];
		char dir[PATH_MAX];
		struct al_err err = {0};

		if (t->sessions.on && wk_serves(w, t->name) &&
		    !wk_snap_dir(t, &w->conf->backend, dir, sizeof(dir), &err) &&
		    strlen(dir) == (size_t)(base - path) && !strncmp(dir, path, strlen(dir)))
			return true;
	}
	return false;
}

struct resuming {
	struct worker *w;
	struct slot *s; /* reserved for it */
	char rq[AL_KEY_MAX], sid[AL_ID_MAX + 1];
	wk_session_start_fn start;
};

/* The calls held for a session that will not come back (why, msg), each
 * answered: a close ok, the rest with status st. */
static void answer_held(struct worker *w, const char *sid, redisReply **calls, size_t n,
			enum al_status_code st, const char *msg)
{
	for (size_t i = 0; i < n; i++) {
		struct al_sess_call c;
		struct al_err err = {0};

		if (calls[i]->type != REDIS_REPLY_STRING ||
		    al_sess_call_decode(calls[i]->str, calls[i]->len, &c, &err))
			continue;
		if (!strcmp(c.session, sid))
			wk_sess_reply_status(w, sid, c.id, c.op == AL_SESS_CLOSE ? AL_ST_OK : st,
					     c.op == AL_SESS_CLOSE ? NULL : msg);
		al_sess_call_free(&c);
	}
}

struct dropping {
	struct worker *w;
	char sid[AL_ID_MAX + 1];
	enum al_sess_end why;
	enum al_status_code st;
	char msg[AL_ERR_MSG_MAX + 64];
};

static void on_dropped(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct dropping *d = priv;
	redisReply *r = reply_;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
	    r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 1) {
		if (r->element[1]->type == REDIS_REPLY_STRING && ours(d->w, r->element[1]->str))
			wk_snap_remove(r->element[1]->str);
		/* those queued after the first answers: the record says ended
		 * already, so their clients may see it before these answers */
		answer_held(d->w, d->sid, r->element + 2, r->elements - 2, d->st, d->msg);
	}
	free(d);
}

/* The calls held for the session (a best-effort LRANGE: none when Redis
 * is down), answered first; then SESSION_DROP ends its record. The
 * worker's writes go in order on its one connection, so a client that
 * sees the record ended finds its call's answer there already. */
static void on_held(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct dropping *d = priv;
	redisReply *r = reply_;
	size_t n = 0;
	struct al_call c;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ARRAY) {
		n = r->elements;
		answer_held(d->w, d->sid, r->element, n, d->st, d->msg);
	}
	al_session_drop_call(&c, d->sid, al_sess_end_name(d->why), d->w->policy.result_ttl_ms, n);
	if (al_aconn_call(d->w->cmd, &c, on_dropped, d))
		free(d);
}

/* End paused session sid (reason why) with its snapshot; its held calls
 * answered st with msg. */
static void drop(struct worker *w, const char *sid, enum al_sess_end why, enum al_status_code st,
		 const char *msg)
{
	struct dropping *d = calloc(1, sizeof(*d));
	char q[AL_KEY_MAX];
	const char *argv[] = {"LRANGE", al_key_sq(q, sid), "0", "-1"};

	if (!d)
		return;
	d->w = w;
	d->why = why;
	d->st = st;
	snprintf(d->sid, sizeof(d->sid), "%s", sid);
	snprintf(d->msg, sizeof(d->msg), "%s", msg);
	al_log(why == AL_SESS_CLOSED ? "info" : "warn", "session_end",
	       "job=%s reason=%s detail=\"%s\" paused=1", sid, al_sess_end_name(why), msg);
	if (al_aconn_cmd(w->cmd, on_held, d, 4, argv, NULL))
		on_held(NULL, NULL, d);
}

void wk_sess_resume_failed(struct worker *w, const char *sid, enum al_sess_end why, const char *msg)
{
	drop(w, sid, why, AL_ST_SANDBOX_ERROR, msg);
}

/* A field of a HGETALL reply, or NULL. */
static const redisReply *field(const redisReply *all, const char *name)
{
	for (size_t i = 0; all && all->type == REDIS_REPLY_ARRAY && i + 1 < all->elements; i += 2)
		if (all->element[i]->type == REDIS_REPLY_STRING &&
		    !strcmp(all->element[i]->str, name))
			return all->element[i + 1];
	return NULL;
}

static uint64_t field_u64(const redisReply *all, const char *name)
{
	const redisReply *f = field(all, name);

	return f && f->type == REDIS_REPLY_STRING ? strtoull(f->str, NULL, 10) : 0;
}

/* No paused session waits to resume here (now): the slot left free for one
 * goes to jobs again (held ones, then a fetch). */
static void no_resume_waits(struct worker *w)
{
	w->resumes_waiting = false;
	for (int b = 0; b < w->nbackends; b++)
		w->backends[b].dispatch_wanted = true;
	wk_pass_want(w, WK_PASS_DISPATCH | WK_PASS_FETCH);
}

/* A free slot of the named backend's, or NULL. */
static struct slot *free_slot(struct worker *w, const char *backend)
{
	struct backend_state *be = wk_backend_for(w, backend);

	for (unsigned i = 0; be && be->ok && i < w->conf->slots; i++)
		if (!be->slots[i].busy)
			return &be->slots[i];
	return NULL;
}

static void on_taken(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct resuming *rz = priv;
	struct worker *w = rz->w;
	struct slot *s = rz->s;
	redisReply *r = reply_, *all, *held;
	const redisReply *tier, *tenant, *job, *path, *sha;
	struct wk_restore rs = {.fd = -1, .t0_ms = al_mono_ms()};
	struct al_err err = {0};
	char msg[AL_ERR_MSG_MAX + 128];

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER || r->element[0]->integer != 1) {
		wk_slot_release(s); /* not resuming (ended, taken by another): nothing to do */
		free(rz);
		return;
	}
	all = r->element[1];
	held = r->element[2];
	tier = field(all, "tier");
	tenant = field(all, "tenant");
	job = field(all, "job");
	path = field(all, "snapshot");
	sha = field(all, "snapshot_sha256");
	s->tier = tier ? al_policy_tier(&w->policy, tier->str) : NULL;
	for (size_t i = 0; held->type == REDIS_REPLY_ARRAY && i < held->elements; i++) {
		struct al_sess_call c;

		memset(&err, 0, sizeof(err));
		if (held->element[i]->type == REDIS_REPLY_STRING &&
		    !al_sess_call_decode(held->element[i]->str, held->element[i]->len, &c, &err)) {
			/* anyone may push onto al:sq: only the session's own tenant closes it */
			bool close = c.op == AL_SESS_CLOSE && tenant &&
				     !strcmp(c.tenant, tenant->str) && !strcmp(c.session, rz->sid);

			al_sess_call_free(&c);
			if (close) { /* closed while paused: no need to restore it to end it */
				wk_slot_release(s);
				drop(w, rz->sid, AL_SESS_CLOSED, AL_ST_SESSION_ENDED,
				     "session_ended: closed");
				free(rz);
				return;
			}
		}
	}
	if (s->tier && strcmp(s->tier->backend, s->ops->name)) {
		/* the slot reserved is another backend's (one queue serves this
		 * worker's tiers): one of its tier's, else its lease, which this
		 * worker does not renew, puts it back on its queue */
		const struct al_tier_policy *tt = s->tier;
		struct slot *o = free_slot(w, tt->backend);

		wk_slot_release(s);
		if (!o) {
			al_log("warn", "resume_later",
			       "job=%s tier=%s why=\"no free slot of its "
			       "backend\"",
			       rz->sid, tt->name);
			free(rz);
			return;
		}
		s = rz->s = o;
		s->busy = true;
		s->tier = tt;
	}
	memset(&err, 0, sizeof(err));
	if (!s->tier || !tenant || !job || !path || !sha || !ours(w, path->str) ||
	    strcmp(s->tier->backend, s->ops->name) ||
	    al_job_decode(job->str, job->len, &s->job, &err)) {
		snprintf(msg, sizeof(msg), "resume: its record cannot be restored here (%s)",
			 err.msg[0] ? err.msg : "its tier or its fields");
		wk_slot_release(s);
		drop(w, rz->sid, AL_SESS_BROKEN, AL_ST_SANDBOX_ERROR, msg);
		free(rz);
		return;
	}
	s->have_job = true;
	snprintf(rs.path, sizeof(rs.path), "%s", path->str);
	rs.fd = wk_snap_open(rs.path, field_u64(all, "snapshot_bytes"), sha->str, &err);
	if (rs.fd < 0) {
		al_log("error", "snapshot_refused", "job=%s error=\"%s\"", rz->sid, err.msg);
		wk_snap_remove(rs.path);
		wk_slot_release(s);
		drop(w, rz->sid, AL_SESS_SNAPSHOT_REFUSED, AL_ST_SANDBOX_ERROR, err.msg);
		free(rz);
		return;
	}
	rs.life_left_ms = field_u64(all, "life_left_ms");
	rs.idle_ms = field_u64(all, "idle_ms");
	rs.cpu_budget_ms = field_u64(all, "cpu_budget_ms");
	rs.calls = field_u64(all, "calls");
	{
		const redisReply *seen = field(all, "seen");

		rs.seen = seen && seen->type == REDIS_REPLY_STRING ? seen->str : NULL;
	}
	if (!rs.life_left_ms)
		rs.life_left_ms = s->tier->sessions.life_ms;
	if (!rs.idle_ms)
		rs.idle_ms = s->tier->sessions.idle_ms;
	snprintf(s->id, sizeof(s->id), "%s", rz->sid);
	s->stream[0] = s->entry[0] = '\0';
	s->attempt = 1;
	s->negress = 0;
	rz->start(w, s, &rs); /* the session now; its end answers for it */
	close(rs.fd);
	free(rz);
}

void wk_sess_resume(struct worker *w, const char *rq, const char *sid, wk_session_start_fn start)
{
	struct resuming *rz;
	struct slot *s = NULL;
	struct al_call c;

	/* a free slot of a backend that restores: the queue's tier's */
	for (int b = 0; !s && b < w->nbackends; b++) {
		struct backend_state *be = &w->backends[b];

		if (!be->ok || !(be->ops->caps & AL_CAP_SNAPSHOT || be->ops->snapshot_ok))
			continue;
		for (unsigned i = 0; !s && i < w->conf->slots; i++)
			if (!be->slots[i].busy)
				s = &be->slots[i];
	}
	if (!s || w->draining || !(rz = calloc(1, sizeof(*rz)))) {
		wk_sess_requeue(w, rq, sid);
		return;
	}
	s->busy = true;		/* reserved until the record says whose it is */
	if (w->resumes_waiting) /* taken: the next look says whether more wait */
		no_resume_waits(w);
	rz->w = w;
	rz->s = s;
	rz->start = start;
	snprintf(rz->rq, sizeof(rz->rq), "%s", rq);
	snprintf(rz->sid, sizeof(rz->sid), "%s", sid);
	al_session_take_call(&c, sid, w->conf->backend.worker_id, w->policy.lease_ms);
	if (al_aconn_call(w->cmd, &c, on_taken, rz)) {
		s->busy = false;
		free(rz);
	}
}

size_t wk_sess_resume_queues(struct worker *w, bool free_only, char (*keys)[AL_KEY_MAX], size_t cap)
{
	size_t n = 0;
	bool own = false;

	for (size_t i = 0; i < w->policy.ntiers && n + 1 < cap; i++) {
		const struct al_tier_policy *t = &w->policy.tiers[i];
		struct backend_state *be = wk_backend_for(w, t->backend);
		bool room = false;

		if (!t->sessions.on || !wk_serves(w, t->name) || !be || !be->ok ||
		    !wk_tier_pauses(t, be->ops))
			continue;
		for (unsigned k = 0; !room && k < w->conf->slots; k++)
			room = !be->slots[k].busy;
		if (free_only && !room)
			continue;
		if (t->snapshot_dir)
			wk_sess_rq_of(w, t, keys[n++]);
		else
			own = true;
	}
	if (own)
		al_key_rq(keys[n++], NULL, w->conf->backend.worker_id);
	return n;
}

/* PAUSED_DUE's answer: whether a paused session waits to resume here
 * (fetch_room and the dispatch of held jobs leave it a slot), and the
 * files of those it ended. */
static void on_due(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct worker *w = priv;
	redisReply *r = reply_;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || !r->elements ||
	    r->element[0]->type != REDIS_REPLY_INTEGER)
		return; /* (none: the connection went with the worker) */
	if (w->resumes_waiting && !r->element[0]->integer)
		no_resume_waits(w);
	else
		w->resumes_waiting = r->element[0]->integer > 0;
	for (size_t i = 1; i + 1 < r->elements; i += 2) {
		if (r->element[i + 1]->type == REDIS_REPLY_STRING &&
		    ours(w, r->element[i + 1]->str))
			wk_snap_remove(r->element[i + 1]->str);
		al_log("info", "session_end", "job=%s reason=paused_expired paused=1",
		       r->element[i]->type == REDIS_REPLY_STRING ? r->element[i]->str : "?");
	}
}

struct orphan {
	char path[PATH_MAX];
	uint64_t age_ms;
};

/* A snapshot's session record: a file of a session that ended (while its
 * worker was away: the scheduler's PAUSED_EXPIRE) goes; one no record
 * names (its record expired, or a resume left it) goes once it is older
 * than a pause or a fork takes to record its file. */
static void on_orphan(redisAsyncContext *ac, void *reply_, void *priv)
{
	struct orphan *o = priv;
	redisReply *r = reply_;

	(void)ac;
	if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL)) {
		const char *st = r->type == REDIS_REPLY_STRING ? r->str : "";
		bool ended = !strcmp(st, "ended");
		/* (a paused record's file is never taken for another's) */
		bool paused = !strcmp(st, "paused") || !strcmp(st, "resuming");

		if (ended || (!paused && o->age_ms >= SNAP_ORPHAN_AGE_MS)) {
			al_log("info", "snapshot_swept", "path=%s note=\"%s\"", o->path,
			       ended ? "its session ended" : "no session names it");
			wk_snap_remove(o->path);
		}
	}
	free(o);
}

static void check_orphan(const char *path, const char *sid, uint64_t age_ms, void *arg)
{
	struct worker *w = arg;
	struct orphan *o = calloc(1, sizeof(*o));
	char k[AL_KEY_MAX];
	const char *argv[] = {"HGET", al_key_sess(k, sid), "state"};

	if (!o)
		return;
	o->age_ms = age_ms;
	snprintf(o->path, sizeof(o->path), "%s", path);
	if (al_aconn_cmd(w->cmd, on_orphan, o, 3, argv, NULL))
		free(o);
}

/* Once at start, the halves of pauses an earlier run never finished; then
 * every SNAP_ORPHANS_EVERY_MS, the snapshots no paused session names any
 * more, past the time a pause takes to record its file. */
static void sweep_snapshots(struct worker *w)
{
	uint64_t now = al_mono_ms();

	if (w->snaps_swept && now - w->orphans_mono < SNAP_ORPHANS_EVERY_MS)
		return;
	w->orphans_mono = now;
	for (size_t i = 0; i < w->policy.ntiers; i++) {
		const struct al_tier_policy *t = &w->policy.tiers[i];
		char dir[PATH_MAX];
		struct al_err err = {0};

		if (!t->sessions.on || !wk_serves(w, t->name) ||
		    wk_snap_dir(t, &w->conf->backend, dir, sizeof(dir), &err))
			continue;
		if (!w->snaps_swept)
			wk_snap_sweep(dir);
		wk_snap_each(dir, check_orphan, w);
	}
	w->snaps_swept = true;
}

void wk_sess_paused_tick(struct worker *w)
{
	char keys[AL_TIERS_MAX + 1][AL_KEY_MAX];
	const char *rqs[AL_TIERS_MAX + 1];
	size_t n = wk_sess_resume_queues(w, false, keys, AL_TIERS_MAX + 1);
	struct al_call c;

	/* a paused session's end is in seconds: not every heartbeat's business */
	if (!n || (w->snaps_swept && al_mono_ms() - w->paused_due_mono < AL_PAUSED_DUE_EVERY_MS))
		return;
	w->paused_due_mono = al_mono_ms();
	sweep_snapshots(w);
	for (size_t i = 0; i < n; i++)
		rqs[i] = keys[i];
	al_paused_due_call(&c, w->policy.result_ttl_ms, rqs, n);
	al_aconn_call(w->cmd, &c, on_due, w);
}
