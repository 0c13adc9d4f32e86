/* test_commit.c - the worker's commit queue (worker/commit.c) against
 * canned Redis replies: results are committed, the COMMIT call is caught
 * instead of sent (the connection and webhooks are fakes here, named so:
 * they record), and each answer COMMIT can give is fed back, to see what
 * the worker does: a callback only for the result Redis committed, and a
 * result no reader could decode replaced before it goes. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/contract.h"
#include "../../proto/result.h"
#include "../../worker/webhook.h"
#include "../../worker/worker.h"
#include "tap.h"

/* ---- fakes ---- */

static struct {
	struct al_call call; /* the last COMMIT */
	redisCallbackFn *fn;
	void *priv;
	int commits;
	int posted;
	char posted_id[80];
} rec;

int al_aconn_call(struct al_aconn *c, struct al_call *call, redisCallbackFn *fn, void *priv)
{
	(void)c;
	if (call->script != al_lua_commit && call->script != al_lua_commit_fetch) {
		/* acks, retries: not under test */
		al_call_free(call);
		return 0;
	}
	al_call_free(&rec.call);
	al_call_move(&rec.call, call);
	rec.fn = fn;
	rec.priv = priv;
	rec.commits++;
	return 0;
}

int al_aconn_send(struct al_aconn *c, struct al_call *call, redisCallbackFn *fn, void *priv)
{
	(void)c, (void)call, (void)fn, (void)priv;
	return -1;
}

const char *al_aconn_strerror(const struct al_aconn *c)
{
	(void)c;
	return "fake";
}

int wk_webhooks_post(struct wk_webhooks *h, const char *url, const char *id, const char *tenant,
		     const void *result, size_t len, char *const *allow, size_t nallow,
		     struct al_err *err)
{
	(void)h, (void)url, (void)tenant, (void)result, (void)len, (void)allow, (void)nallow,
	    (void)err;
	rec.posted++;
	snprintf(rec.posted_id, sizeof(rec.posted_id), "%s", id);
	return 0;
}

void wk_maybe_fetch(struct worker *w)
{
	(void)w;
}

/* The fetch that rides on a COMMIT (fetch.c's): fake.attach slots when set */
static struct {
	unsigned attach;
	int answered;		/* wk_fetched calls */
	unsigned n;		/* ...the slots the last one released */
	const redisReply *want; /* the answer it should get */
	bool got_want;		/* ...and got it */
} fk;

static unsigned fake_attach(struct worker *w, struct al_call *c, int nresults)
{
	(void)w;
	if (!fk.attach)
		return 0;
	c->script = al_lua_commit_fetch;
	al_commit_fetch_end(c, nresults, (const char *const[]){"al:q:t:hi", "al:q:t:mid"}, 2, "w1",
			    7, fk.attach);
	return fk.attach;
}

static void fake_answered(struct worker *w, const redisReply *r, unsigned n)
{
	(void)w;
	fk.answered++;
	fk.n = n;
	fk.got_want = r == fk.want;
}

/* ---- helpers ---- */

static const char *arg(int i, size_t *len)
{
	int argc;
	const char **argv;
	const size_t *lens;

	if (al_call_argv(&rec.call, &argc, &argv, &lens) || i >= argc)
		return "(none)";
	if (len)
		*len = lens[i];
	return argv[i];
}

static redisReply *codes(int n, const long long *v)
{
	redisReply *r = calloc(1, sizeof(*r));

	r->type = REDIS_REPLY_ARRAY;
	r->elements = (size_t)n;
	r->element = calloc((size_t)n, sizeof(*r->element));
	for (int i = 0; i < n; i++) {
		r->element[i] = calloc(1, sizeof(redisReply));
		r->element[i]->type = REDIS_REPLY_INTEGER;
		r->element[i]->integer = v[i];
	}
	return r;
}

static void answer(redisReply *r)
{
	redisCallbackFn *fn = rec.fn;

	rec.fn = NULL;
	if (fn)
		fn(NULL, r, rec.priv);
	if (r)
		freeReplyObject(r);
}

static void commit(struct worker *w, const char *id, const char *callback)
{
	struct al_result res = {.version = AL_PROTO_VERSION,
				.id = (char *)id,
				.attempt = 1,
				.status = AL_ST_OK,
				.finished_ms = 1};
	struct al_job job = {
	    .id = (char *)id, .tenant = (char *)"acme", .callback_url = (char *)callback};

	wk_commit_result(w, &res, "al:q:t:mid", "5-0", 1, &job);
}

int main(void)
{
	static struct wk_worker_conf conf;
	static struct worker w;
	static const long long done[] = {AL_COMMIT_DONE}, exists[] = {AL_COMMIT_EXISTS},
			       stale[] = {AL_COMMIT_STALE},
			       two[] = {AL_COMMIT_DONE, AL_COMMIT_STALE};
	struct al_result got = {0};
	size_t len;
	const char *bytes;

	conf.backend.worker_id = "w1";
	w.conf = &conf;
	w.cmd = (struct al_aconn *)&w; /* never dereferenced: a fake */
	w.hooks = (struct wk_webhooks *)&w;
	w.commits_tail = &w.commits;
	w.commit_rider = &(const struct wk_rider){fake_attach, fake_answered};

	commit(&w, "j1", "https://hooks.example/x");
	wk_flush_commits(&w);
	TAP_OK(rec.commits == 1 && !strcmp(arg(2, NULL), "4") &&
		   !strcmp(arg(3, NULL), "al:job:j1") && !strcmp(arg(5, NULL), "al:q:t:mid") &&
		   !strcmp(arg(6, NULL), "al:out:j1"),
	       "a result is one COMMIT: the record, result, its queue, live output");
	answer(codes(1, done));
	TAP_OK(rec.posted == 1 && !strcmp(rec.posted_id, "j1"),
	       "committed (1): its callback is posted, once");

	static const struct {
		const long long *code;
		const char *what;
	} refused[] = {{exists, "0 (a result exists): dropped, no callback"},
		       {stale, "-1 (stale attempt): dropped, no callback"}};
	for (size_t i = 0; i < 2; i++) {
		rec.posted = 0;
		commit(&w, "j2", "https://hooks.example/x");
		wk_flush_commits(&w);
		answer(codes(1, refused[i].code));
		TAP_OK(rec.posted == 0 && w.commits == NULL, "COMMIT answers %s", refused[i].what);
	}
	rec.posted = 0;
	commit(&w, "j3", "https://hooks.example/x");
	wk_flush_commits(&w);
	answer(NULL);
	TAP_OK(rec.posted == 0, "no answer: no callback (the lease re-delivers the job)");

	rec.posted = 0;
	rec.commits = 0;
	commit(&w, "j4", "https://hooks.example/x");
	commit(&w, "j5", "https://hooks.example/y");
	wk_flush_commits(&w);
	TAP_OK(rec.commits == 1 && !strcmp(arg(2, NULL), "8"),
	       "two results waiting go in one COMMIT (8 keys)");
	answer(codes(2, two));
	TAP_OK(rec.posted == 1 && !strcmp(rec.posted_id, "j4"),
	       "its answers are read per result: j4 committed (callback), j5 stale (none)");

	/* a result the codec refuses to read back (an invalid status) */
	{
		struct al_result res = {.version = AL_PROTO_VERSION,
					.id = (char *)"j6",
					.attempt = 1,
					.status = (enum al_status_code)99,
					.finished_ms = 1};
		struct al_err err = {0};

		wk_commit_result(&w, &res, "al:q:t:mid", "5-0", 1, NULL);
		wk_flush_commits(&w);
		bytes = arg(3 + AL_COMMIT_KEYS + 1, &len); /* EVALSHA sha n, the keys, attempt,
							    * then the result */
		TAP_OK(al_result_decode(bytes, len, &got, &err) == 0 &&
			   got.status == AL_ST_SANDBOX_ERROR && got.error &&
			   strstr(got.error, "could not be stored whole"),
		       "a result that would not decode is replaced by a sandbox_error saying why: "
		       "%s",
		       got.error ? got.error : err.msg);
		al_result_free(&got);
		answer(codes(1, done));
	}

	/* the last batch of a flush carries the fetch of the slots it freed */
	{
		redisReply *both = calloc(1, sizeof(*both)), *entries = calloc(1, sizeof(*entries));
		int argc;
		const char **argv;
		const size_t *lens;

		fk.attach = 3;
		rec.posted = 0;
		commit(&w, "j7", "https://hooks.example/x");
		wk_flush_commits(&w);
		al_call_argv(&rec.call, &argc, &argv, &lens);
		TAP_OK(rec.call.script == al_lua_commit_fetch && !strcmp(arg(2, NULL), "6") &&
			   !strcmp(arg(7, NULL), "al:q:t:hi") &&
			   !strcmp(arg(8, NULL), "al:q:t:mid") && !strcmp(argv[argc - 4], "w1") &&
			   !strcmp(argv[argc - 2], "3") && !strcmp(argv[argc - 1], "1"),
		       "with a fetch due, the COMMIT is a COMMIT_FETCH: 4 keys, the worker's "
		       "streams, then worker, now, count, number of results");
		entries->type = REDIS_REPLY_ARRAY;
		both->type = REDIS_REPLY_ARRAY;
		both->elements = 2;
		both->element = calloc(2, sizeof(*both->element));
		both->element[0] = codes(1, done);
		both->element[1] = entries;
		fk.want = entries;
		answer(both);
		TAP_OK(rec.posted == 1 && fk.answered == 1 && fk.n == 3 && fk.got_want,
		       "its answer is split: the commits' codes (j7 committed, callback), then the "
		       "fetched entries with the 3 slots reserved");
		fk.answered = 0;
		fk.want = NULL;
		commit(&w, "j8", NULL);
		wk_flush_commits(&w);
		answer(NULL);
		TAP_OK(fk.answered == 1 && fk.n == 3 && fk.got_want,
		       "no answer: the fetch's reservation is released all the same");
		fk.attach = 0;
	}

	/* a single slot's results may wait while a COMMIT is in flight */
	{
		const int calls = rec.commits;

		conf.slots = 1;
		rec.posted = 0;
		commit(&w, "h1", NULL);
		wk_flush_commits(&w);
		TAP_OK(w.commit_batches == 1 && !wk_commits_may_wait(&w),
		       "one COMMIT in flight is counted; with no result waiting nothing waits");
		commit(&w, "h2", "https://hooks.example/h");
		TAP_OK(wk_commits_may_wait(&w), "a single slot's result may wait for its answer");
		w.draining = true;
		TAP_OK(!wk_commits_may_wait(&w), "...not while draining");
		w.draining = false;
		conf.slots = 2;
		TAP_OK(!wk_commits_may_wait(&w), "...not for a worker of several slots");
		conf.slots = 1;
		commit(&w, "h3", NULL);
		commit(&w, "h4", NULL);
		TAP_OK(wk_commits_may_wait(&w), "three results may wait");
		commit(&w, "h5", NULL);
		TAP_OK(!wk_commits_may_wait(&w), "...a fourth makes them go (COMMIT_HOLD_MAX 4)");
		w.pass_wants = 0;
		answer(codes(1, done));
		TAP_OK(w.commit_batches == 0 && (w.pass_wants & WK_PASS_FLUSH) &&
			   !wk_commits_may_wait(&w) && rec.commits == calls + 1,
		       "the answer to the COMMIT in flight wants a flush of the results waiting");
		wk_flush_commits(&w);
		TAP_OK(rec.commits == calls + 2 && !strcmp(arg(2, NULL), "16") && !w.commits,
		       "the results held go in one COMMIT (16 keys)");
		answer(codes(4, (const long long[]){AL_COMMIT_DONE, AL_COMMIT_DONE, AL_COMMIT_DONE,
						    AL_COMMIT_DONE}));
		TAP_OK(rec.posted == 1 && !strcmp(rec.posted_id, "h2") && w.commit_batches == 0,
		       "its answers are read per result: h2's callback posted");
	}
	al_call_free(&rec.call);
	return tap_done();
}
