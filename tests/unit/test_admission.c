/* test_admission.c - the scheduler's admission (scheduler/admission.c)
 * against canned Redis replies: intake entries go in as XREADGROUP would
 * hand them over, the calls admission makes are caught instead of sent
 * (the connection layer and the scheduler's result writers are fakes
 * here, named so: they record), and each answer ADMIT or CANCEL can give is
 * fed back, to see what the scheduler does with it. */
#include <hiredis/hiredis.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/contract.h"
#include "../../proto/job.h"
#include "../../scheduler/sched.h"
#include "policy_file.h"
#include "tap.h"

/* ---- fakes: what admission sent, and what it decided ---- */

static struct {
	struct al_call call; /* the last reliable call */
	redisCallbackFn *fn;
	void *priv;
	int calls;
	char dead[8][256]; /* dead letters' reasons */
	int ndead;
	char commit_id[8][80]; /* sc_commit: id, status, quota */
	int commit_st[8];
	char commit_quota[8][32];
	int ncommit;
	int acks;
} rec;

int al_aconn_call(struct al_aconn *c, struct al_call *call, redisCallbackFn *fn, void *priv)
{
	(void)c;
	al_call_free(&rec.call);
	al_call_move(&rec.call, call);
	rec.fn = fn;
	rec.priv = priv;
	rec.calls++;
	return 0;
}

int al_aconn_send(struct al_aconn *c, struct al_call *call, redisCallbackFn *fn, void *priv)
{
	(void)c, (void)call, (void)fn, (void)priv;
	return 0;
}

int al_aconn_cmd(struct al_aconn *c, redisCallbackFn *fn, void *priv, int argc,
		 const char *const *argv, const size_t *lens)
{
	(void)c, (void)fn, (void)priv, (void)argc, (void)argv, (void)lens;
	return 0;
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

uint64_t sc_now_ms(const struct sched *s)
{
	(void)s;
	return 1700000000000ull;
}

void sc_ack_intake(struct sched *s, const char *entry)
{
	(void)s, (void)entry;
	rec.acks++;
}

void sc_dead_letter(struct sched *s, const char *source, const char *entry, const char *reason,
		    const char *id, const char *raw, size_t rawlen)
{
	(void)s, (void)source, (void)entry, (void)id, (void)raw, (void)rawlen;
	if (rec.ndead < 8)
		snprintf(rec.dead[rec.ndead++], sizeof(rec.dead[0]), "%s", reason);
}

void sc_commit(struct sched *s, const char *id, long attempt, enum al_status_code st,
	       const char *msg, const char *quota, const char *stream, const char *entry,
	       const char *group, const char *raw, size_t rawlen)
{
	(void)s, (void)attempt, (void)msg, (void)stream, (void)entry, (void)group, (void)raw,
	    (void)rawlen;
	if (rec.ncommit == 8)
		return;
	snprintf(rec.commit_id[rec.ncommit], sizeof(rec.commit_id[0]), "%s", id);
	snprintf(rec.commit_quota[rec.ncommit], sizeof(rec.commit_quota[0]), "%s",
		 quota ? quota : "");
	rec.commit_st[rec.ncommit++] = st;
}

void sc_call(struct sched *s, struct al_call *c, const char *what)
{
	(void)s, (void)what;
	al_call_free(c);
}

/* ---- canned replies ---- */

static redisReply *str(const char *s, size_t len)
{
	redisReply *r = calloc(1, sizeof(*r));

	r->type = REDIS_REPLY_STRING;
	r->str = malloc(len + 1);
	memcpy(r->str, s, len);
	r->str[len] = '\0';
	r->len = len;
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

static redisReply *num(long long v)
{
	redisReply *r = calloc(1, sizeof(*r));

	r->type = REDIS_REPLY_INTEGER;
	r->integer = v;
	return r;
}

/* XREADGROUP's answer: one stream, al:intake, holding these entries; each
 * entry's fields are NULL-terminated name/value pairs (a value's length
 * is its strlen unless it is the job's msgpack, given with its length). */
struct field {
	const char *name, *value;
	size_t len;
};

static redisReply *entry(const char *id, const struct field *f)
{
	redisReply *e = arr(2), *fields;
	size_t n = 0;

	while (f[n].name)
		n++;
	fields = arr(2 * n);
	for (size_t i = 0; i < n; i++) {
		fields->element[2 * i] = str(f[i].name, strlen(f[i].name));
		fields->element[2 * i + 1] =
		    str(f[i].value, f[i].len ? f[i].len : strlen(f[i].value));
	}
	e->element[0] = str(id, strlen(id));
	e->element[1] = fields;
	return e;
}

static redisReply *intake(redisReply **entries, size_t n)
{
	redisReply *r = arr(1), *st = arr(2), *es = arr(n);

	for (size_t i = 0; i < n; i++)
		es->element[i] = entries[i];
	st->element[0] = str(AL_KEY_INTAKE, strlen(AL_KEY_INTAKE));
	st->element[1] = es;
	r->element[0] = st;
	return r;
}

/* A job's msgpack (tier and id), in buf; its length. */
static size_t job_bytes(char *buf, size_t cap, const char *id, const char *tier)
{
	struct al_job job = {0};
	struct al_buf b = {0};
	size_t n;

	job.version = AL_PROTO_VERSION;
	job.id = (char *)id;
	job.tier = (char *)tier;
	job.tenant = (char *)"acme";
	job.runtime = AL_RUNTIME_PYTHON;
	job.code.data = (char *)"print(1)";
	job.code.len = 8;
	struct al_err err = {0};

	if (al_job_encode(&job, &b, &err) || b.len > cap) {
		printf("# al_job_encode: %s\n", err.msg);
		return 0;
	}
	memcpy(buf, b.data, b.len);
	n = b.len;
	al_buf_free(&b);
	return n;
}

static void reset(void)
{
	al_call_free(&rec.call);
	memset(&rec, 0, sizeof(rec));
}

/* Hand one intake read to admission (as its own pending entries at start). */
static void read_intake(struct sched *s, redisReply *r)
{
	sc_on_own_pending(NULL, r, s);
	freeReplyObject(r);
}

/* Feed the captured call its answer. */
static void answer(redisReply *r)
{
	redisCallbackFn *fn = rec.fn;

	rec.fn = NULL;
	if (fn)
		fn(NULL, r, rec.priv);
	if (r)
		freeReplyObject(r);
}

static const char *arg(int i)
{
	int argc;
	const char **argv;
	const size_t *lens;

	if (al_call_argv(&rec.call, &argc, &argv, &lens) || i >= argc)
		return "(none)";
	return argv[i];
}

int main(void)
{
	struct sched s = {0};
	struct al_err err = {0};
	char job[512];
	size_t jl;

	if (load_policy_text("tiers:\n  t: {backend: process}\n", &s.policy, &err))
		return printf("# %s\n", err.msg), 1;
	s.cmd = (struct al_aconn *)&s; /* never dereferenced: the connection is a fake */

	/* ADMIT's answers, one job each */
	static const struct {
		long long code;
		int dead, commits;
		const char *quota, *what;
	} admits[] = {
	    {AL_ADMIT_QUEUED, 0, 0, "", "1 queued: nothing more to do"},
	    {AL_ADMIT_AGAIN, 0, 0, "", "0 admitted before: nothing"},
	    {AL_ADMIT_FINISHED, 0, 0, "",
	     "-1 cancelled before admission: nothing (its result exists)"},
	    {AL_ADMIT_ID_TAKEN, 1, 0, "", "-2 another submission's id: a dead letter, never run"},
	    {AL_ADMIT_QUEUE_FULL, 0, 1, "max_queued",
	     "-3 tenant queue full: rejected, quota max_queued"},
	    {AL_ADMIT_RATE, 0, 1, "rate_per_s", "-4 rate exceeded: rejected, quota rate_per_s"},
	};
	for (size_t i = 0; i < sizeof(admits) / sizeof(admits[0]); i++) {
		redisReply *e, *ans = arr(1);

		reset();
		jl = job_bytes(job, sizeof(job), "j1", "t");
		e = entry("5-0",
			  (struct field[]){{"id", "j1", 0}, {"job", job, jl}, {NULL, NULL, 0}});
		read_intake(&s, intake(&e, 1));
		ans->element[0] = num(admits[i].code);
		TAP_OK(
		    rec.calls == 1 && rec.fn && !strcmp(arg(3), AL_KEY_INTAKE) &&
			!strcmp(arg(4), "al:job:j1") && !strcmp(arg(5), "al:sub:j1") &&
			!strncmp(arg(6), "al:q:t:", 7),
		    "a job entry is one ADMIT: the intake, the record, its marker, the queue (%s)",
		    arg(5));
		answer(ans);
		TAP_OK(rec.ndead == admits[i].dead && rec.ncommit == admits[i].commits &&
			   (!rec.ncommit || (rec.commit_st[0] == AL_ST_REJECTED &&
					     !strcmp(rec.commit_id[0], "j1") &&
					     !strcmp(rec.commit_quota[0], admits[i].quota))),
		       "ADMIT answers %s", admits[i].what);
	}

	reset();
	jl = job_bytes(job, sizeof(job), "j2", "t");
	{
		redisReply *e = entry("6-0", (struct field[]){{"id", "j2", 0},
							      {"job", job, jl},
							      {NULL, NULL, 0}}),
			   *err_reply = calloc(1, sizeof(*err_reply));

		read_intake(&s, intake(&e, 1));
		err_reply->type = REDIS_REPLY_ERROR;
		err_reply->str = strdup("ERR something");
		err_reply->len = strlen(err_reply->str);
		answer(err_reply);
		TAP_OK(rec.ndead == 0 && rec.ncommit == 0 && rec.acks == 0,
		       "an error answer: nothing decided, nothing acknowledged (the entry stays "
		       "pending for a takeover)");
		reset();
		e = entry("6-1",
			  (struct field[]){{"id", "j2", 0}, {"job", job, jl}, {NULL, NULL, 0}});
		read_intake(&s, intake(&e, 1));
		answer(NULL);
		TAP_OK(rec.ndead == 0 && rec.ncommit == 0 && rec.acks == 0,
		       "no answer (the scheduler stopping): nothing decided");
	}

	/* entries refused before ADMIT */
	reset();
	jl = job_bytes(job, sizeof(job), "j3", "nosuchtier");
	{
		redisReply *es[4];

		es[0] = entry("7-0",
			      (struct field[]){{"id", "j3", 0}, {"job", job, jl}, {NULL, NULL, 0}});
		es[1] = entry(
		    "7-1",
		    (struct field[]){{"id", "j4", 0}, {"job", "\xc1garbage", 8}, {NULL, NULL, 0}});
		es[2] = entry("7-2", (struct field[]){{"nothing", "here", 0}, {NULL, NULL, 0}});
		es[3] = entry(
		    "7-3", (struct field[]){{"id", "other", 0}, {"job", job, jl}, {NULL, NULL, 0}});
		read_intake(&s, intake(es, 4));
		TAP_OK(rec.calls == 0, "no ADMIT when no entry is admissible");
		TAP_OK(rec.ncommit == 3 && !strcmp(rec.commit_id[0], "j3") &&
			   !strcmp(rec.commit_id[1], "j4") && !strcmp(rec.commit_id[2], "other") &&
			   rec.commit_st[0] == AL_ST_REJECTED && rec.commit_st[1] == AL_ST_REJECTED,
		       "rejected under their ids: an unknown tier, an undecodable job (its id "
		       "field), an id field that is not the job's (the field's id)");
		TAP_OK(rec.ndead == 1 && rec.acks == 1 && strstr(rec.dead[0], "no job field"),
		       "an entry with neither job nor id: a dead letter, acknowledged");
	}

	/* cancel requests */
	reset();
	{
		redisReply *e = entry(
		    "8-0",
		    (struct field[]){{"cancel", "j5", 0}, {"reply", "n5", 0}, {NULL, NULL, 0}});

		read_intake(&s, intake(&e, 1));
		TAP_OK(
		    rec.calls == 1 && !strcmp(arg(2), "6") && !strcmp(arg(3), "al:job:j5") &&
			!strcmp(arg(6), "al:sub:j5") && !strcmp(arg(8), "al:reply:n5") &&
			!strcmp(arg(12), AL_GROUP_SCHEDULER) && !strcmp(arg(13), "8-0"),
		    "a cancel request is one CANCEL: the job's keys, its marker, the reply list, "
		    "the request's entry to acknowledge");
		answer(num(AL_CANCEL_KILL_SENT));
		TAP_OK(rec.ndead == 0 && rec.ncommit == 0, "its answer decides nothing more here");
	}
	reset();
	{
		redisReply *es[2];

		es[0] = entry(
		    "9-0",
		    (struct field[]){{"cancel", "bad id!", 0}, {"reply", "n", 0}, {NULL, NULL, 0}});
		es[1] = entry("9-1", (struct field[]){{"cancel", "j6", 0}, {NULL, NULL, 0}});
		read_intake(&s, intake(es, 2));
		TAP_OK(rec.calls == 0 && rec.ndead == 2 && rec.acks == 2 &&
			   strstr(rec.dead[0], "not a well-formed job id") &&
			   strstr(rec.dead[1], "reply is not a well-formed nonce"),
		       "a cancel request with a bad id or no reply nonce: dead-lettered, "
		       "acknowledged, nothing run");
	}
	reset();
	al_policy_free(&s.policy);
	return tap_done();
}
