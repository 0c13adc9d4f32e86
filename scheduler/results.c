/* results.c - what the scheduler writes for a job (see sched.h): fire-and-log
 * calls, intake acks, dead letters, and results it commits itself
 * (rejections, expiries, jobs whose attempts are used up). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../common/aconn.h"
#include "../common/log.h"
#include "../proto/contract.h"
#include "../proto/result.h"
#include "../common/policy.h"
#include "sched.h"
#include "vmlease.h"
#include "../common/clock.h"

/* Fire-and-log reply of a best-effort call (promote, expire, trim: each
 * is repeated by the next pass anyway). */
void sc_on_reply_log(redisAsyncContext *ac, void *reply, void *priv)
{
	redisReply *r = reply;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ERROR)
		al_log("error", "redis", "what=%s error=\"%s\"", (const char *)priv, r->str);
}

/* A reliable call whose answer only needs logging when it is an error. */
void sc_call(struct sched *s, struct al_call *c, const char *what)
{
	if (al_aconn_call(s->cmd, c, sc_on_reply_log, (void *)what))
		al_log("error", "redis_call", "what=%s error=\"%s\"", what,
		       al_aconn_strerror(s->cmd));
}

void sc_ack_intake(struct sched *s, const char *entry)
{
	struct al_call c;

	al_xack_call(&c, AL_KEY_INTAKE, AL_GROUP_SCHEDULER, entry);
	sc_call(s, &c, "xack");
}

void sc_dead_letter(struct sched *s, const char *source, const char *entry, const char *reason,
		    const char *id, const char *raw, size_t rawlen)
{
	struct al_call c;

	al_dlq_call(&c, s->policy.dlq_max_len, reason, source, entry, id, raw, rawlen);
	al_log("warn", "dead_letter", "source=%s entry=%s job=%s reason=\"%s\"", source, entry,
	       id ? id : "-", reason);
	sc_call(s, &c, "dlq");
}

/* A result the scheduler decides (rejected, worker_lost), kept until Redis
 * answers. An unrun result of an intake entry whose id another submission
 * holds is refused by REJECT (-2): that entry is dead-lettered instead. */
struct commit_ctx {
	struct sched *s;
	char id[AL_ID_MAX + 1];
	char entry[64];
	char *raw; /* the submission, for that dead letter */
	size_t rawlen;
};

static void on_commit(redisAsyncContext *ac, void *reply, void *priv)
{
	struct commit_ctx *cc = priv;
	redisReply *r = reply,
		   *e = r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 ? r->element[0] : r;

	(void)ac;
	if (e && e->type == REDIS_REPLY_INTEGER && e->integer == AL_COMMIT_ID_TAKEN) {
		char msg[160];

		snprintf(
		    msg, sizeof(msg),
		    "duplicate job id: %s belongs to another submission; this entry never runs",
		    cc->id);
		sc_dead_letter(cc->s, AL_KEY_INTAKE, cc->entry, msg, cc->id, cc->raw, cc->rawlen);
	} else if (e && e->type == REDIS_REPLY_ERROR) {
		al_log("error", "commit", "job=%s error=\"%s\"", cc->id, e->str);
	}
	free(cc->raw);
	free(cc);
}

void sc_commit(struct sched *s, const char *id, long attempt, enum al_status_code st,
	       const char *msg, const char *quota, const char *stream, const char *entry,
	       const char *group, const char *raw, size_t rawlen)
{
	struct al_kv why = {(char *)"quota", (char *)quota};
	struct al_result res = {0};
	struct al_buf b = {0};
	struct al_call c;
	struct commit_ctx *cc = calloc(1, sizeof(*cc));

	res.version = AL_PROTO_VERSION;
	res.id = (char *)id;
	res.attempt = attempt > 0 ? (uint32_t)attempt : 0; /* worker_lost: the last attempt */
	res.status = st;
	res.error = (char *)msg;
	if (quota) { /* info.quota: which one refused it (the gateway's 429) */
		res.info = &why;
		res.ninfo = 1;
	}
	res.finished_ms = al_now_ms();
	if (!cc || al_result_encode(&res, &b, NULL)) {
		free(cc);
		al_log("error", "out_of_memory", "job=%s what=commit", id);
		return;
	}
	cc->s = s;
	snprintf(cc->id, sizeof(cc->id), "%s", id);
	snprintf(cc->entry, sizeof(cc->entry), "%s", entry ? entry : "");
	if (raw && (cc->raw = malloc(rawlen ? rawlen : 1))) {
		memcpy(cc->raw, raw, rawlen);
		cc->rawlen = rawlen;
	}
	if (attempt < 0) { /* never reached a queue: the intake entry's rejection */
		al_reject_call(&c, id, b.data, b.len, s->policy.result_ttl_ms, entry,
			       al_status_name(st));
	} else {
		al_call_init(&c, al_lua_commit);
		al_commit_add(&c, &(struct al_commit_item){.id = id,
							   .attempt = attempt,
							   .result = b.data,
							   .len = b.len,
							   .ttl_ms = s->policy.result_ttl_ms,
							   .stream = stream,
							   .entry = entry,
							   .group = group,
							   .status = al_status_name(st)});
	}
	al_buf_free(&b);
	if (al_aconn_call(s->cmd, &c, on_commit, cc)) {
		al_log("error", "redis_call", "what=commit job=%s error=\"%s\"", id,
		       al_aconn_strerror(s->cmd));
		free(cc->raw);
		free(cc);
	}
}
