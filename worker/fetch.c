/* fetch.c - taking jobs (see worker.h): the FETCH script per tier and
 * band, CLAIM batches, the blocking read that wakes the worker. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../common/aconn.h"
#include "../common/log.h"
#include "../proto/contract.h"
#include "worker.h"
#include "../common/clock.h"

/* What the claim of one entry said: code (CLAIM's codes; -99: no answer)
 * and, for 1, -3 and -4, the job bytes. */
static void claim_done(struct slot *s, long long code, const char *job, size_t joblen)
{
	struct worker *w = s->w;
	struct al_err err = {0};

	switch (code) {
	case AL_CLAIM_RUN:
		if (!job) {
			wk_slot_release(s);
			return;
		}
		if (wk_job_accept(w, s, job, joblen, &err))
			return; /* ended: rejected, err.msg in its result */
		if (wk_is_place(s))
			wk_hold(w, s);
		else
			wk_job_run(w, s);
		return;
	case AL_CLAIM_CANCELLED:
	case AL_CLAIM_EXPIRED:
		(void)job;
		(void)joblen;
		wk_commit_status(w, s->id, s->stream, s->entry, (long)s->attempt,
				 code == AL_CLAIM_CANCELLED ? AL_ST_CANCELLED : AL_ST_EXPIRED,
				 code == AL_CLAIM_CANCELLED
				     ? "cancelled by a client before it started"
				     : "not started before its deadline");
		break;
	case AL_CLAIM_TENANT_FULL:
		/* Tenant at its running cap: try again a little later. */
		wk_retry_later(w, s, 250, false);
		break;
	case AL_CLAIM_UNKNOWN:
		wk_dead_letter(w, s->stream, s->entry, "no such job (its record is missing)", s->id,
			       NULL, 0);
		break;
	case -99:
		/* No answer: the entry stays pending in our name and the lease
		 * brings it back. */
		break;
	default:
		/* finished already or a stale duplicate: just acknowledge */
		wk_ack(w, s->stream, s->entry, s->id);
	}
	wk_slot_release(s);
}

/* Find a free slot (else place) whose backend serves tier. */
static struct slot *free_slot_for(struct worker *w, const struct al_tier_policy *t)
{
	struct backend_state *be = wk_backend_for(w, t->backend);

	if (!be) /* unavailable backend: any free slot reports the failure */
		be = &w->backends[0];
	for (unsigned i = 0; i < wk_nplaces(w); i++)
		if (!be->slots[i].busy)
			return &be->slots[i];
	return NULL;
}

/* Check a fetched entry and reserve a slot for it; NULL when it was
 * dead-lettered or no slot is free. */
static struct slot *handle_entry(struct worker *w, const char *stream, const redisReply *e)
{
	char tier[AL_ID_MAX + 1];
	const char *id = NULL, *attempt = NULL;
	const struct al_tier_policy *t;
	struct slot *s;

	if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
	    e->element[0]->type != REDIS_REPLY_STRING)
		return NULL;
	if (e->element[1]->type == REDIS_REPLY_ARRAY) {
		for (size_t k = 0; k + 1 < e->element[1]->elements; k += 2) {
			const redisReply *key = e->element[1]->element[k],
					 *val = e->element[1]->element[k + 1];

			if (key->type != REDIS_REPLY_STRING || val->type != REDIS_REPLY_STRING)
				continue;
			if (!strcmp(key->str, "id"))
				id = val->str;
			else if (!strcmp(key->str, "attempt"))
				attempt = val->str;
		}
	}
	t = al_key_queue_tier(stream, tier, sizeof(tier)) ? al_policy_tier(&w->policy, tier) : NULL;
	if (!id || !attempt || !al_job_id_ok(id, strlen(id)) || atoi(attempt) < 1 || !t) {
		wk_dead_letter(
		    w, stream, e->element[0]->str,
		    !t ? "entry in the queue of a tier this worker's policy does not know"
		       : "malformed queue entry: needs id and attempt fields",
		    NULL, NULL, 0);
		return NULL;
	}
	s = free_slot_for(w, t);
	if (!s) {
		/* More entries than slots (should not happen): leave it pending;
		 * the lease returns it to the queue. */
		al_log("warn", "no_free_slot", "job=%s", id);
		return NULL;
	}
	s->busy = true;
	s->tier = t;
	s->attempt = (unsigned)atoi(attempt);
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->stream, sizeof(s->stream), "%s", stream);
	snprintf(s->entry, sizeof(s->entry), "%s", e->element[0]->str);
	return s;
}

/* The slots of one CLAIM call, in the order of its keys. */
struct claim_batch {
	int n;
	struct slot *slots[];
};

static void on_claim(redisAsyncContext *ac, void *reply, void *priv)
{
	struct claim_batch *b = priv;
	redisReply *r = reply;
	bool ok = r && r->type == REDIS_REPLY_ARRAY && (int)r->elements == b->n;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ERROR)
		al_log("error", "claim", "jobs=%d error=\"%s\"", b->n, r->str);
	/* No or odd reply: the entries stay pending in our name and the lease
	 * brings them back. */
	for (int i = 0; i < b->n; i++) {
		redisReply *e = ok ? r->element[i] : NULL;
		bool good = e && e->type == REDIS_REPLY_ARRAY && e->elements >= 1 &&
			    e->element[0]->type == REDIS_REPLY_INTEGER;
		bool has_job =
		    good && e->elements >= 2 && e->element[1]->type == REDIS_REPLY_STRING;

		claim_done(b->slots[i], good ? e->element[0]->integer : -99,
			   has_job ? e->element[1]->str : NULL, has_job ? e->element[1]->len : 0);
	}
	free(b);
}

/* CLAIM is a reliable call: the script answers a repeated claim of the
 * same attempt by the same worker as the first. */
static void claim_send(struct worker *w, struct claim_batch *b)
{
	struct al_call c;

	al_claim_init(&c, w->conf->backend.worker_id, al_now_ms());
	for (int i = 0; i < b->n; i++)
		al_claim_add(&c, b->slots[i]->id, b->slots[i]->attempt);
	if (al_aconn_call(w->cmd, &c, on_claim, b)) {
		al_log("warn", "redis_call", "what=claim jobs=%d error=\"%s\"", b->n,
		       al_aconn_strerror(w->cmd));
		for (int i = 0; i < b->n; i++) /* as a claim with no answer: released */
			claim_done(b->slots[i], -99, NULL,
				   0); /* stays pending; the lease returns it */
		free(b);
	}
}

/* One stream of an XREADGROUP reply, [name, [entry...]], when it has that
 * shape (a reply is untrusted like any input: checked before it is read). */
static bool stream_reply(const redisReply *st, const char **name, const redisReply **entries)
{
	if (st->type != REDIS_REPLY_ARRAY || st->elements != 2 ||
	    st->element[0]->type != REDIS_REPLY_STRING || st->element[1]->type != REDIS_REPLY_ARRAY)
		return false;
	*name = st->element[0]->str;
	*entries = st->element[1];
	return true;
}

static void on_fetch(redisAsyncContext *ac, void *reply, void *priv)
{
	struct worker *w = priv;
	redisReply *r = reply;

	(void)ac;
	w->block_fetching = false;
	if (r && r->type == REDIS_REPLY_ERROR) {
		/* NOGROUP: the scheduler has not made this tier's queue yet */
		if (!strncmp(r->str, "NOGROUP", 7)) {
			for (int i = 0; i < w->nstreams; i++) {
				struct al_call c;

				al_xgroup_create_call(&c, w->streams[i], AL_GROUP_WORKERS);
				al_aconn_send(w->cmd, &c, NULL, NULL);
				al_call_free(&c);
			}
		} else {
			al_log("error", "fetch", "error=\"%s\"", r->str);
		}
	}
	if (r && r->type == REDIS_REPLY_ARRAY && w->draining) {
		/* A read that was waiting when the drain began: these entries are
		 * ours but unclaimed; put them back at the queue's end, at once
		 * (one script: acknowledged and re-added together). */
		for (size_t i = 0; i < r->elements; i++) {
			const redisReply *es;
			const char *name;

			if (!stream_reply(r->element[i], &name, &es))
				continue;
			for (size_t j = 0; j < es->elements; j++) {
				const redisReply *e = es->element[j];
				struct al_call c;

				if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
				    e->element[0]->type != REDIS_REPLY_STRING)
					continue;
				al_give_back_call(&c, name, AL_GROUP_WORKERS, e->element[0]->str);
				wk_send_call(w, &c, "give-back", "-");
			}
		}
		return;
	}
	if (r && r->type == REDIS_REPLY_ARRAY) {
		/* Streams come back in the order asked: high band first. One
		 * CLAIM call covers every entry of this read. */
		size_t total = 0;
		struct claim_batch *b;
		const redisReply *es;
		const char *name;

		for (size_t i = 0; i < r->elements; i++)
			if (stream_reply(r->element[i], &name, &es))
				total += es->elements;
		b = calloc(1, sizeof(*b) + (total + 1) * sizeof(struct slot *));
		if (!b)
			al_log("error", "out_of_memory",
			       "what=claim jobs=%zu note=\"they stay pending; their lease brings "
			       "them back\"",
			       total);
		for (size_t i = 0; b && i < r->elements; i++) {
			if (!stream_reply(r->element[i], &name, &es))
				continue;
			for (size_t j = 0; j < es->elements; j++) {
				struct slot *sl = handle_entry(w, name, es->element[j]);

				if (sl)
					b->slots[b->n++] = sl;
			}
		}
		if (b && b->n)
			claim_send(w, b);
		else
			free(b);
	}
	if (r)
		wk_maybe_fetch(w);
}

/* The streams of the tiers whose backend takes jobs now (not paused). */
static int live_streams(const struct worker *w, const char **out)
{
	int n = 0;

	for (int i = 0; i < w->nstreams; i++)
		if (!w->stream_be[i] || !wk_health_paused(w->stream_be[i]))
			out[n++] = w->streams[i];
	return n;
}

/* The places of backend b a fetch may fill: --prefetch N's N; with auto,
 * as many as its slots free within AL_PREFETCH_WAIT_US by their recent run
 * times (none before a job has run, none for long jobs), and none for a
 * blocking read: an empty queue has nothing to hold ahead, and a job that
 * arrives belongs to a free slot (of any worker), not to a place. */
static unsigned places_of(const struct worker *w, const struct backend_state *b, bool blocking)
{
	uint64_t n;

	if (b->hold_off)
		return 0;
	if (!w->conf->prefetch_auto)
		return w->conf->prefetch;
	if (blocking || !b->run_us_avg)
		return 0;
	n = (uint64_t)w->conf->slots * AL_PREFETCH_WAIT_US / b->run_us_avg;
	return n < w->conf->prefetch ? (unsigned)n : w->conf->prefetch;
}

/* The smallest number of free slots and usable places over the backends,
 * less those reserved by fetches in flight (FETCH may hand back a job of
 * any tier served, so each must find one); *half, the most one fetch asks. */
static unsigned fetch_room(struct worker *w, bool blocking, unsigned *half)
{
	unsigned min = ~0u, cap = ~0u;

	for (int b = 0; b < w->nbackends; b++) {
		const struct backend_state *be = &w->backends[b];
		unsigned n = 0, last = w->conf->slots + places_of(w, be, blocking);

		if (wk_health_paused(be))
			continue; /* none of its jobs are fetched */
		for (unsigned i = 0; i < last; i++)
			n += !be->slots[i].busy;
		if (n < min)
			min = n;
		if (last < cap)
			cap = last;
	}
	min = min != ~0u && min > w->fetch_reserved ? min - w->fetch_reserved : 0;
	/* a paused session waiting to resume goes before the jobs queued: a
	 * slot stays free for it (its resume queue is read while one is) */
	if (w->resumes_waiting && min > 0)
		min--;
	/* at most half the slots and places per fetch: while the worker
	 * starts one batch, Redis already works on the next */
	*half = cap != ~0u ? (cap + 1) / 2 : 0;
	return min;
}

static unsigned fetch_count(struct worker *w, bool blocking)
{
	unsigned half, n = fetch_room(w, blocking, &half);

	return n < half ? n : half;
}

/* A fetch would ask for its most now (half of the slots and places): the
 * jobs in hand, running and held, and those the fetches in flight will
 * bring fill half of them or less. Above that they outlast a round trip
 * to Redis, and a fetch, with the results it would ride on, may wait. */
bool wk_fetch_due(struct worker *w)
{
	unsigned half, n = fetch_room(w, false, &half);

	return n >= half;
}

static void block_fetch(struct worker *w);

/* One entry of FETCH's answer, {stream, entry id, job id, attempt, code,
 * job (for some codes)}, when it has that shape. */
static bool fetched_entry_ok(const redisReply *e)
{
	if (e->type != REDIS_REPLY_ARRAY || e->elements < 5)
		return false;
	for (int i = 0; i < 4; i++)
		if (e->element[i]->type != REDIS_REPLY_STRING)
			return false;
	return e->element[4]->type == REDIS_REPLY_INTEGER;
}

struct fetch_req {
	struct worker *w;
	unsigned n; /* slots reserved for its entries */
};

/* FETCH's answer r (NULL: none came) to a fetch that reserved n slots,
 * sent alone or with a COMMIT batch. */
static void fetched(struct worker *w, const redisReply *r, unsigned n)
{
	size_t got = 0;

	w->fetch_inflight--;
	w->fetch_reserved -= n;
	if (!r)
		return; /* connection lost; fetching resumes when it is back */
	if (r->type == REDIS_REPLY_ERROR) {
		/* a reset follows a transient error: fetching resumes when up */
		if (!al_aconn_transient(r))
			al_log("error", "fetch", "error=\"%s\"", r->str);
	} else if (r->type == REDIS_REPLY_ARRAY) {
		got = r->elements;
		for (size_t i = 0; i < r->elements; i++) {
			const redisReply *e = r->element[i];
			const char *stream, *entry;
			char tier[AL_ID_MAX + 1];
			const struct al_tier_policy *t;
			struct slot *s;

			if (!fetched_entry_ok(e)) { /* pending in our name: the lease returns it */
				al_log("error", "fetch",
				       "error=\"a malformed FETCH answer entry\"");
				continue;
			}
			stream = e->element[0]->str;
			entry = e->element[1]->str;
			if (e->element[4]->integer == AL_CLAIM_MALFORMED) {
				wk_dead_letter(w, stream, entry,
					       "malformed queue entry: needs id and attempt fields",
					       NULL, NULL, 0);
				continue;
			}
			t = al_key_queue_tier(stream, tier, sizeof(tier))
				? al_policy_tier(&w->policy, tier)
				: NULL;
			s = t ? free_slot_for(w, t) : NULL;
			if (!s) { /* cannot happen with fetch_count; the lease repairs it */
				al_log("error", "no_free_slot", "job=%s", e->element[2]->str);
				continue;
			}
			s->busy = true;
			s->tier = t;
			s->attempt = (unsigned)strtoul(e->element[3]->str, NULL, 10);
			snprintf(s->id, sizeof(s->id), "%s", e->element[2]->str);
			snprintf(s->stream, sizeof(s->stream), "%s", stream);
			snprintf(s->entry, sizeof(s->entry), "%s", entry);
			claim_done(s, e->element[4]->integer,
				   e->elements >= 6 && e->element[5]->type == REDIS_REPLY_STRING
				       ? e->element[5]->str
				       : NULL,
				   e->elements >= 6 ? e->element[5]->len : 0);
		}
	}
	if (got)
		wk_maybe_fetch(w); /* more may be waiting */
	else if (!w->fetch_inflight)
		block_fetch(w); /* nothing waits: block until something does */
}

static void on_fetch_script(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fetch_req *q = priv;
	struct worker *w = q->w;
	unsigned n = q->n;

	(void)ac;
	free(q);
	fetched(w, reply, n);
}

/* A fetch may go out: no blocking read waiting, fewer than FETCH_DEPTH
 * fetch scripts in flight, not draining, free slots nobody reserved, both
 * connections up. */
static bool can_fetch(const struct worker *w, unsigned n)
{
	return !w->block_fetching && w->fetch_inflight < FETCH_DEPTH && !w->draining && n > 0 &&
	       al_aconn_is_up(w->fetch) && al_aconn_is_up(w->cmd);
}

/* Non-blocking read and claim in one script call on the command connection;
 * when the queues are empty, block_fetch waits on the fetch connection. */
void wk_maybe_fetch(struct worker *w)
{
	unsigned n = fetch_count(w, false);
	struct fetch_req *q;
	struct al_call c;
	const char *streams[MAX_STREAMS];
	int ns = live_streams(w, streams);

	if (!ns || !can_fetch(w, n) || !(q = malloc(sizeof(*q))))
		return;
	*q = (struct fetch_req){w, n};
	al_fetch_call(&c, streams, ns, w->conf->backend.worker_id, al_now_ms(), n);
	if (al_aconn_send(w->cmd, &c, on_fetch_script, q)) {
		free(q);
	} else {
		w->fetch_inflight++;
		w->fetch_reserved += n;
	}
	al_call_free(&c);
}

/* The fetch that goes out with COMMIT batch c of nresults results (made
 * with al_lua_commit, turned into COMMIT_FETCH here): the slots it
 * reserved, for fetched() with the answer's second half; 0 when no fetch
 * may go now (c is left a plain COMMIT). */
static unsigned fetch_attach(struct worker *w, struct al_call *c, int nresults)
{
	unsigned n = fetch_count(w, false);
	const char *streams[MAX_STREAMS];
	int ns = live_streams(w, streams);

	if (!ns || !can_fetch(w, n))
		return 0;
	c->script = al_lua_commit_fetch;
	al_commit_fetch_end(c, nresults, streams, ns, w->conf->backend.worker_id, al_now_ms(), n);
	w->fetch_inflight++;
	w->fetch_reserved += n;
	return n;
}

const struct wk_rider wk_fetch_rider = {fetch_attach, fetched};

static void block_fetch(struct worker *w)
{
	const char *argv[8 + 2 * MAX_STREAMS];
	char count[16];
	unsigned n = fetch_count(w, true);
	const char *streams[MAX_STREAMS];
	int argc = 0, ns = live_streams(w, streams);

	if (w->fetch_inflight || !ns || !can_fetch(w, n))
		return;
	snprintf(count, sizeof(count), "%u", n);
	argv[argc++] = "XREADGROUP";
	argv[argc++] = "GROUP";
	argv[argc++] = AL_GROUP_WORKERS;
	argv[argc++] = w->conf->backend.worker_id;
	argv[argc++] = "COUNT";
	argv[argc++] = count;
	argv[argc++] = "BLOCK";
	argv[argc++] = FETCH_BLOCK_MS;
	argv[argc++] = "STREAMS";
	for (int i = 0; i < ns; i++)
		argv[argc++] = streams[i];
	for (int i = 0; i < ns; i++)
		argv[argc++] = ">";
	if (al_aconn_cmd(w->fetch, on_fetch, w, argc, argv, NULL) == 0)
		w->block_fetching = true;
}
