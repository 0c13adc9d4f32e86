/* session_contract.c - the Redis calls of sessions (contract.h,
 * scripts.h SESSION_*): opening, calls, renewal, the end, and paused
 * sessions (pause, fork, resume, their end). */
#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "keys.h"

void al_session_open_call(struct al_call *c, const struct al_session_open_item *it)
{
	char k[AL_KEY_MAX];

	al_call_init(c, al_lua_session_open);
	al_call_key(c, al_key_sess(k, it->id));
	al_call_key(c, al_key_tenant(k, it->tenant));
	al_call_key(c, AL_KEY_SESSIONS);
	al_call_str(c, it->tenant);
	al_call_str(c, it->tier);
	al_call_str(c, it->worker);
	al_call_u64(c, 0); /* was the worker's now: Redis's TIME is the script's */
	al_call_u64(c, it->lease_ms);
	al_call_u64(c, it->max_per_tenant);
	al_call_u64(c, it->life_ms);
	al_call_str(c, it->id);
}

void al_session_queue_call(struct al_call *c, const char *id, const char *tenant, const void *call,
			   size_t len)
{
	al_call_init(c, al_lua_session_call);
	al_call_str(c, id);
	al_call_str(c, tenant);
	al_call_arg(c, call, len);
}

void al_session_reply_call(struct al_call *c, const char *session, const char *call_id,
			   const void *result, size_t len, const char *status, uint64_t ttl_ms)
{
	char k[AL_KEY_MAX], name[AL_CALL_KEY_MAX];

	al_call_key_name(name, session, call_id);
	al_call_init(c, al_lua_session_reply);
	al_call_key(c, al_key_res(k, name));
	al_call_key(c, al_key_out(k, name));
	al_call_arg(c, result, len);
	al_call_u64(c, ttl_ms);
	al_call_str(c, status);
}

void al_session_renew_call(struct al_call *c, const char *worker, uint64_t lease_ms,
			   const char *const *ids, size_t n)
{
	al_call_init(c, al_lua_session_renew);
	al_call_key(c, AL_KEY_SESSIONS);
	al_call_str(c, worker);
	al_call_u64(c, lease_ms);
	for (size_t i = 0; i < n; i++)
		al_call_str(c, ids[i]);
}

void al_session_end_call(struct al_call *c, const char *id, const char *reason, uint64_t now_ms,
			 uint64_t ttl_ms)
{
	char k[AL_KEY_MAX];

	al_call_init(c, al_lua_session_end);
	al_call_key(c, al_key_sess(k, id));
	al_call_key(c, AL_KEY_SESSIONS);
	al_call_str(c, reason);
	al_call_u64(c, now_ms);
	al_call_u64(c, ttl_ms);
	al_call_str(c, id);
}

void al_session_lost_call(struct al_call *c, uint64_t now_ms, uint64_t ttl_ms)
{
	al_call_init(c, al_lua_session_lost);
	al_call_key(c, AL_KEY_SESSIONS);
	al_call_u64(c, now_ms);
	al_call_u64(c, ttl_ms);
}

void al_session_read_call(struct al_call *c, const char *id)
{
	char k[AL_KEY_MAX];

	al_call_init(c, NULL);
	al_call_str(c, "HMGET");
	al_call_str(c, al_key_sess(k, id));
	al_call_str(c, "tenant");
	al_call_str(c, "state");
	al_call_str(c, "reason");
	al_call_str(c, "worker");
	al_call_str(c, "lease_ms");
}

const char *al_session_end_seen(const char *state, const char *reason)
{
	if (state && !strcmp(state, "ended"))
		return reason && *reason ? reason : "ended";
	return NULL;
}

void al_session_calls_wait_call(struct al_call *c, const char *worker, const char *const *rqs,
				size_t nrq, unsigned timeout_ms)
{
	char k[AL_KEY_MAX], t[32];

	snprintf(t, sizeof(t), "%u.%03u", timeout_ms / 1000, timeout_ms % 1000);
	al_call_init(c, NULL);
	al_call_str(c, "BLPOP");
	al_call_str(c, al_key_wq(k, worker));
	for (size_t i = 0; i < nrq; i++)
		al_call_str(c, rqs[i]);
	al_call_str(c, t);
}

/* ---- paused sessions ---- */

const char *al_key_rq(char out[AL_KEY_MAX], const char *tier, const char *worker)
{
	if (tier)
		snprintf(out, AL_KEY_MAX, AL_KEY_PREFIX "rq:%s", tier);
	else
		snprintf(out, AL_KEY_MAX, AL_KEY_PREFIX "rq:@%s", worker);
	return out;
}

/* The record's fields: their count, then each name and value, the job
 * last (its msgpack as it is). */
static void pairs(struct al_call *c, const struct al_session_pause_item *it)
{
	al_call_u64(c, it->nfields + (it->job.len ? 1 : 0));
	for (size_t i = 0; i < it->nfields; i++) {
		al_call_str(c, it->fields[i].name);
		al_call_str(c, it->fields[i].value);
	}
	if (it->job.len) {
		al_call_str(c, "job");
		al_call_arg(c, it->job.data, it->job.len);
	}
}

void al_session_pause_call(struct al_call *c, const struct al_session_pause_item *it)
{
	char k[AL_KEY_MAX];

	al_call_init(c, al_lua_session_pause);
	al_call_key(c, al_key_sess(k, it->id));
	al_call_key(c, al_key_tenant(k, it->tenant));
	al_call_key(c, AL_KEY_SESSIONS);
	al_call_key(c, AL_KEY_PAUSED);
	al_call_str(c, it->worker);
	al_call_u64(c, it->max_paused);
	al_call_u64(c, it->paused_max_ms);
	al_call_str(c, it->rq);
	al_call_str(c, it->id);
	pairs(c, it);
	for (size_t i = 0; i < it->nheld; i++)
		al_call_arg(c, it->held[i].data, it->held[i].len);
}

void al_session_fork_call(struct al_call *c, const struct al_session_pause_item *it,
			  const char *const *ids, const char *const *paths, size_t n)
{
	char k[AL_KEY_MAX];

	al_call_init(c, al_lua_session_fork);
	al_call_key(c, al_key_sess(k, it->id));
	al_call_key(c, al_key_tenant(k, it->tenant));
	al_call_key(c, AL_KEY_PAUSED);
	al_call_str(c, it->worker);
	al_call_u64(c, it->max_paused);
	al_call_u64(c, it->paused_max_ms);
	al_call_str(c, it->rq);
	al_call_u64(c, n);
	for (size_t i = 0; i < n; i++) {
		al_call_str(c, ids[i]);
		al_call_str(c, paths[i]);
	}
	al_call_str(c, it->id);
	pairs(c, it);
}

void al_session_take_call(struct al_call *c, const char *id, const char *worker, uint64_t lease_ms)
{
	char k[AL_KEY_MAX];

	al_call_init(c, al_lua_session_take);
	al_call_key(c, al_key_sess(k, id));
	al_call_key(c, AL_KEY_SESSIONS);
	al_call_str(c, worker);
	al_call_u64(c, lease_ms);
	al_call_str(c, id);
}

void al_session_resumed_call(struct al_call *c, const char *id, const char *tenant,
			     const char *worker)
{
	char k[AL_KEY_MAX];

	al_call_init(c, al_lua_session_resumed);
	al_call_key(c, al_key_sess(k, id));
	al_call_key(c, al_key_tenant(k, tenant));
	al_call_key(c, AL_KEY_PAUSED);
	al_call_str(c, worker);
	al_call_str(c, id);
}

void al_session_drop_call(struct al_call *c, const char *id, const char *reason, uint64_t ttl_ms,
			  size_t answered)
{
	char k[AL_KEY_MAX];

	al_call_init(c, al_lua_session_drop);
	al_call_key(c, al_key_sess(k, id));
	al_call_str(c, reason);
	al_call_u64(c, ttl_ms);
	al_call_str(c, id);
	al_call_u64(c, answered);
}

void al_paused_due_call(struct al_call *c, uint64_t ttl_ms, const char *const *rqs, size_t nrq)
{
	al_call_init(c, al_lua_paused_due);
	al_call_key(c, AL_KEY_PAUSED);
	al_call_u64(c, ttl_ms);
	for (size_t i = 0; i < nrq; i++)
		al_call_str(c, rqs[i]);
}

void al_paused_expire_call(struct al_call *c, uint64_t grace_ms, uint64_t ttl_ms)
{
	al_call_init(c, al_lua_paused_expire);
	al_call_key(c, AL_KEY_PAUSED);
	al_call_u64(c, grace_ms);
	al_call_u64(c, ttl_ms);
}
