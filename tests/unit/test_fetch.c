/* test_fetch.c - the worker's taking of jobs (worker/fetch.c) against
 * canned Redis replies: a FETCH call is caught instead of sent (the
 * connection and the worker's job and commit paths are fakes here, named
 * so: they record), and each answer a claim can give, and malformed ones,
 * are fed back, to see what the worker does with each slot. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/contract.h"
#include "../../worker/worker.h"
#include "policy_file.h"
#include "tap.h"

/* ---- fakes ---- */

static struct {
	redisCallbackFn *fn; /* the FETCH call's reply handler */
	void *priv;
	int fetches;
	int accepted, run, held, released, acks, dead, retried;
	int committed;
	enum al_status_code st;
	char dead_why[256];
	char count[16];	      /* the last FETCH's count */
	char block_count[16]; /* the last blocking read's */
} rec;

int al_aconn_send(struct al_aconn *c, struct al_call *call, redisCallbackFn *fn, void *priv)
{
	(void)c;
	if (call->args.n)
		snprintf(rec.count, sizeof(rec.count), "%.*s",
			 (int)call->args.len[call->args.n - 1], call->args.v[call->args.n - 1]);
	rec.fn = fn;
	rec.priv = priv;
	rec.fetches++;
	return 0;
}

int al_aconn_call(struct al_aconn *c, struct al_call *call, redisCallbackFn *fn, void *priv)
{
	(void)c, (void)call, (void)fn, (void)priv;
	return 0;
}

int al_aconn_cmd(struct al_aconn *c, redisCallbackFn *fn, void *priv, int argc,
		 const char *const *argv, const size_t *lens)
{
	(void)c, (void)fn, (void)priv, (void)lens;
	if (argc > 5) /* XREADGROUP GROUP g consumer COUNT n ... */
		snprintf(rec.block_count, sizeof(rec.block_count), "%s", argv[5]);
	return -1; /* not sent: the test only reads its count */
}

bool al_aconn_is_up(const struct al_aconn *c)
{
	(void)c;
	return true;
}

const char *al_aconn_strerror(const struct al_aconn *c)
{
	(void)c;
	return "fake";
}

bool al_aconn_transient(const redisReply *r)
{
	(void)r;
	return false;
}

unsigned wk_nplaces(const struct worker *w)
{
	return w->conf->slots;
}

bool wk_is_place(const struct slot *s)
{
	(void)s;
	return false;
}

struct backend_state *wk_backend_for(struct worker *w, const char *name)
{
	(void)name;
	return &w->backends[0];
}

void wk_send_call(struct worker *w, struct al_call *call, const char *what, const char *id)
{
	(void)w, (void)what, (void)id;
	al_call_free(call);
}

int wk_job_accept(struct worker *w, struct slot *s, const char *raw, size_t rawlen,
		  struct al_err *err)
{
	(void)w, (void)s, (void)raw, (void)rawlen, (void)err;
	rec.accepted++;
	return AL_OK;
}

void wk_job_run(struct worker *w, struct slot *s)
{
	(void)w, (void)s;
	rec.run++;
}

void wk_hold(struct worker *w, struct slot *p)
{
	(void)w, (void)p;
	rec.held++;
}

void wk_slot_release(struct slot *s)
{
	s->busy = false;
	rec.released++;
}

void wk_ack(struct worker *w, const char *stream, const char *entry, const char *id)
{
	(void)w, (void)stream, (void)entry, (void)id;
	rec.acks++;
}

void wk_dead_letter(struct worker *w, const char *stream, const char *entry, const char *reason,
		    const char *id, const char *raw, size_t rawlen)
{
	(void)w, (void)stream, (void)entry, (void)id, (void)raw, (void)rawlen;
	rec.dead++;
	snprintf(rec.dead_why, sizeof(rec.dead_why), "%s", reason);
}

void wk_retry_later(struct worker *w, struct slot *s, uint64_t delay_ms, bool bump)
{
	(void)w, (void)delay_ms, (void)bump;
	s->busy = false;
	rec.retried++;
}

void wk_commit_status(struct worker *w, const char *id, const char *stream, const char *entry,
		      long attempt, enum al_status_code st, const char *msg)
{
	(void)w, (void)id, (void)stream, (void)entry, (void)attempt, (void)msg;
	rec.committed++;
	rec.st = st;
}

/* ---- canned replies ---- */

static redisReply *str(const char *s)
{
	redisReply *r = calloc(1, sizeof(*r));

	r->type = REDIS_REPLY_STRING;
	r->str = strdup(s);
	r->len = strlen(s);
	return r;
}

static redisReply *num(long long v)
{
	redisReply *r = calloc(1, sizeof(*r));

	r->type = REDIS_REPLY_INTEGER;
	r->integer = v;
	return r;
}

static redisReply *arr(size_t n)
{
	redisReply *r = calloc(1, sizeof(*r));

	r->type = REDIS_REPLY_ARRAY;
	r->elements = n;
	r->element = calloc(n ? n : 1, sizeof(*r->element));
	return r;
}

/* One FETCH answer entry: {stream, entry id, job id, attempt, code, job}. */
static redisReply *fetched(long long code, bool with_job)
{
	redisReply *e = arr(with_job ? 6 : 5);

	e->element[0] = str("al:q:t:mid");
	e->element[1] = str("5-0");
	e->element[2] = str("j1");
	e->element[3] = str("1");
	e->element[4] = num(code);
	if (with_job)
		e->element[5] = str("JOB");
	return e;
}

static void reset(struct worker *w)
{
	memset(&rec, 0, sizeof(rec));
	for (unsigned i = 0; i < w->conf->slots; i++)
		w->backends[0].slots[i].busy = false;
	w->fetch_inflight = 0;
	w->fetch_reserved = 0;
	w->block_fetching = false;
}

/* A fetch goes out; its answer is one entry (or a whole canned reply). */
static void fetch_with(struct worker *w, redisReply *reply)
{
	redisCallbackFn *fn;

	wk_maybe_fetch(w);
	fn = rec.fn;
	rec.fn = NULL;
	if (fn)
		fn(NULL, reply, rec.priv);
	freeReplyObject(reply);
}

int main(void)
{
	static struct wk_worker_conf conf = {.slots = 2};
	static struct worker w;
	static struct slot slots[2 + AL_PREFETCH_AUTO_MAX];
	static const struct al_backend_ops ops = {.name = "process"};
	struct al_err err = {0};

	if (load_policy_text("tiers:\n  t: {backend: process}\n", &w.policy, &err))
		return printf("# %s\n", err.msg), 1;
	conf.backend.worker_id = "w1";
	w.conf = &conf;
	w.cmd = w.fetch = (struct al_aconn *)&w; /* never dereferenced: fakes */
	w.nbackends = 1;
	w.backends[0].ops = &ops;
	w.backends[0].ok = true;
	w.backends[0].slots = slots;
	for (int i = 0; i < 2 + AL_PREFETCH_AUTO_MAX; i++) {
		slots[i].w = &w;
		slots[i].index = i;
		slots[i].ops = &ops;
		slots[i].be = &w.backends[0];
	}
	w.streams[0] = "al:q:t:mid";
	w.stream_be[0] = &w.backends[0];
	w.nstreams = 1;

	static const struct {
		long long code;
		bool job;
		int run, committed, retried, dead, acks;
		enum al_status_code st;
		const char *what;
	} claims[] = {
	    {AL_CLAIM_RUN, true, 1, 0, 0, 0, 0, 0, "1: the job is accepted and runs"},
	    {AL_CLAIM_STALE, false, 0, 0, 0, 0, 1, 0, "0 (stale): acknowledged, the slot freed"},
	    {AL_CLAIM_UNKNOWN, false, 0, 0, 0, 1, 0, 0, "-2 (no record): a dead letter"},
	    {AL_CLAIM_CANCELLED, true, 0, 1, 0, 0, 0, AL_ST_CANCELLED,
	     "-3: its cancelled result committed, never run"},
	    {AL_CLAIM_EXPIRED, true, 0, 1, 0, 0, 0, AL_ST_EXPIRED,
	     "-4: its expired result committed, never run"},
	    {AL_CLAIM_TENANT_FULL, false, 0, 0, 1, 0, 0, 0,
	     "-5 (tenant at its running cap): tried again later"},
	    {AL_CLAIM_MALFORMED, false, 0, 0, 0, 1, 0, 0, "-9 (malformed entry): a dead letter"},
	};
	for (size_t i = 0; i < sizeof(claims) / sizeof(claims[0]); i++) {
		redisReply *r = arr(1);

		reset(&w);
		r->element[0] = fetched(claims[i].code, claims[i].job);
		fetch_with(&w, r);
		TAP_OK(rec.fetches >= 1 && rec.run == claims[i].run &&
			   rec.committed == claims[i].committed &&
			   rec.retried == claims[i].retried && rec.dead == claims[i].dead &&
			   rec.acks == claims[i].acks &&
			   (!claims[i].committed || rec.st == claims[i].st),
		       "FETCH answers %s", claims[i].what);
	}

	/* a run answer without its job bytes: the slot goes back, nothing runs */
	reset(&w);
	{
		redisReply *r = arr(1);

		r->element[0] = fetched(AL_CLAIM_RUN, false);
		fetch_with(&w, r);
		TAP_OK(rec.run == 0 && rec.accepted == 0 && rec.released == 1 && !slots[0].busy,
		       "1 without the job: the slot is released, nothing runs");
	}

	/* malformed answers: never read past their shape, nothing runs */
	reset(&w);
	{
		redisReply *r = arr(4), *e;

		e = fetched(AL_CLAIM_RUN, true); /* the job id an integer */
		freeReplyObject(e->element[2]);
		e->element[2] = num(7);
		r->element[0] = e;
		e = fetched(AL_CLAIM_RUN, true); /* the code a string */
		freeReplyObject(e->element[4]);
		e->element[4] = str("1");
		r->element[1] = e;
		r->element[2] = num(3);		 /* not an entry at all */
		e = fetched(AL_CLAIM_RUN, true); /* the stream missing: nil */
		freeReplyObject(e->element[0]);
		e->element[0] = calloc(1, sizeof(redisReply));
		e->element[0]->type = REDIS_REPLY_NIL;
		r->element[3] = e;
		fetch_with(&w, r);
		TAP_OK(rec.run == 0 && rec.accepted == 0 && !slots[0].busy && !slots[1].busy,
		       "malformed FETCH entries (an id not a string, a code not a number, no "
		       "entry, a nil stream) are passed over: nothing runs, no slot is held");
	}

	/* --prefetch auto: places by the slots' recent run times */
	{
		static const struct {
			uint64_t avg_us;
			const char *count, *what;
		} sized[] = {
		    {0, "", "no job has run yet: nothing fetched ahead of the busy slots"},
		    {100, "9",
		     "100 us jobs: all 16 places usable, 9 (half of slots and places) per fetch"},
		    {5000, "2", "5 ms jobs on 2 slots: 2 places (what they free within 5 ms)"},
		    {20000, "", "20 ms jobs: no place, nothing fetched while the slots are busy"},
		};

		conf.prefetch_auto = true;
		conf.prefetch = AL_PREFETCH_AUTO_MAX;
		for (size_t i = 0; i < sizeof(sized) / sizeof(sized[0]); i++) {
			reset(&w);
			slots[0].busy = slots[1].busy = true;
			w.backends[0].run_us_avg = sized[i].avg_us;
			wk_maybe_fetch(&w);
			TAP_OK(!strcmp(rec.count, sized[i].count) &&
				   rec.fetches == (*sized[i].count ? 1 : 0),
			       "auto, %s (count \"%s\")", sized[i].what, rec.count);
		}
		reset(&w);
		slots[0].busy = true;
		w.backends[0].run_us_avg = 100;
		fetch_with(&w, arr(0)); /* the queue is empty: a blocking read follows */
		TAP_OK(!strcmp(rec.block_count, "1"),
		       "auto: the blocking read of an empty queue asks for the free slot only, no "
		       "place (count %s)",
		       rec.block_count);
		reset(&w);
		slots[0].busy = slots[1].busy = true;
		w.backends[0].run_us_avg = 100;
		w.backends[0].hold_off = true;
		wk_maybe_fetch(&w);
		TAP_OK(rec.fetches == 0, "auto: a held job went back (hold off): no place used");
		w.backends[0].hold_off = false;
		/* due: a fetch would ask for its most (half of slots and places) */
		reset(&w);
		slots[0].busy = slots[1].busy = true;
		w.backends[0].run_us_avg = 100;
		TAP_OK(wk_fetch_due(&w), "a fetch is due: its 16 places are empty (it asks for 9)");
		for (int i = 2; i < 12; i++)
			slots[i].busy = true;
		TAP_OK(!wk_fetch_due(&w), "...not with 10 of the 16 places holding jobs (6 free)");
		for (int i = 2; i < 6; i++)
			slots[i].busy = false;
		TAP_OK(wk_fetch_due(&w), "...due again with 10 free");
		w.fetch_reserved = 2;
		TAP_OK(!wk_fetch_due(&w), "...not while a fetch in flight reserved 2 of them");
		for (int i = 2; i < 12; i++)
			slots[i].busy = false;
		conf.prefetch_auto = false;
		conf.prefetch = 3;
		reset(&w);
		slots[0].busy = slots[1].busy = true;
		fetch_with(&w, arr(0));
		TAP_OK(!strcmp(rec.count, "3") && !strcmp(rec.block_count, "3"),
		       "--prefetch 3: 3 places whatever the run times, the blocking read too");
	}
	al_policy_free(&w.policy);
	return tap_done();
}
