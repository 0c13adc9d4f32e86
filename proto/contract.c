/* contract.c - key names, the command builder and one builder per script
 * (see contract.h). */
#include "contract.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"

_Static_assert(AL_CALL_KEY_MAX == 2 * AL_ID_MAX + 2, "a call key: two ids, a slash, a NUL");

/* ---- key names ---- */

/* prefix + a (+ ":" + b when b is not NULL), cut to AL_KEY_MAX - 1. */
static const char *const job_states[AL_JS_COUNT] = {
    [AL_JS_SUBMITTED] = "submitted", [AL_JS_QUEUED] = "queued", [AL_JS_RUNNING] = "running",
    [AL_JS_RETRYING] = "retrying",   [AL_JS_DONE] = "done",
};

const char *al_job_state_name(enum al_job_state s)
{
	return (unsigned)s < AL_JS_COUNT ? job_states[s] : "?";
}

int al_job_state_parse(const char *name)
{
	for (int i = 0; i < AL_JS_COUNT; i++)
		if (!strcmp(name, job_states[i]))
			return i;
	return AL_EINVAL;
}

static const char *keyf(char out[AL_KEY_MAX], const char *prefix, const char *a, const char *b)
{
	snprintf(out, AL_KEY_MAX, "%s%s%s%s", prefix, a ? a : "", b ? ":" : "", b ? b : "");
	return out;
}

const char *al_key_job(char out[AL_KEY_MAX], const char *id)
{
	return keyf(out, AL_KEY_PREFIX "job:", id, NULL);
}

const char *al_key_res(char out[AL_KEY_MAX], const char *id)
{
	return keyf(out, AL_KEY_PREFIX "res:", id, NULL);
}

const char *al_key_out(char out[AL_KEY_MAX], const char *id)
{
	return keyf(out, AL_KEY_PREFIX "out:", id, NULL);
}

const char *al_key_sub(char out[AL_KEY_MAX], const char *id)
{
	return keyf(out, AL_KEY_PREFIX "sub:", id, NULL);
}

const char *al_key_reply(char out[AL_KEY_MAX], const char *nonce)
{
	return keyf(out, AL_KEY_PREFIX "reply:", nonce, NULL);
}

const char *al_key_queue(char out[AL_KEY_MAX], const char *tier, int band)
{
	return keyf(out, AL_KEY_PREFIX "q:", tier, al_band_name(band));
}

const char *al_key_tenant(char out[AL_KEY_MAX], const char *tenant)
{
	return keyf(out, AL_KEY_PREFIX "tenant:", tenant ? tenant : "default", NULL);
}

/* '/' between: a tenant never holds one, so no two (tenant, key) pairs
 * name the same key (with ':', "a:b" + "c" and "a" + "b:c" did). */
const char *al_key_idem(char out[AL_KEY_MAX], const char *tenant, const char *key)
{
	snprintf(out, AL_KEY_MAX, AL_KEY_PREFIX "idem:%s/%s", tenant ? tenant : "", key ? key : "");
	return out;
}

/* '#' ends the tenant part: no tenant holds one, so this never names a
 * key's own al:idem:<tenant>/<key>. */
const char *al_key_idem_digest(char out[AL_KEY_MAX], const char *tenant, const char *key)
{
	snprintf(out, AL_KEY_MAX, AL_KEY_PREFIX "idem:%s#/%s", tenant ? tenant : "",
		 key ? key : "");
	return out;
}

const char *al_key_worker(char out[AL_KEY_MAX], const char *worker)
{
	return keyf(out, AL_KEY_PREFIX "worker:", worker, NULL);
}

const char *al_key_hist(char out[AL_KEY_MAX], const char *tier, const char *backend)
{
	return keyf(out, AL_KEY_PREFIX "hist:", tier, backend ? backend : "");
}

const char *al_key_vm(char out[AL_KEY_MAX], const char *name)
{
	return keyf(out, AL_KEY_VM_PREFIX, name, NULL);
}

const char *al_key_sess(char out[AL_KEY_MAX], const char *id)
{
	return keyf(out, AL_KEY_PREFIX "sess:", id, NULL);
}

const char *al_key_sq(char out[AL_KEY_MAX], const char *id)
{
	return keyf(out, AL_KEY_PREFIX "sq:", id, NULL);
}

const char *al_key_wq(char out[AL_KEY_MAX], const char *worker)
{
	return keyf(out, AL_KEY_PREFIX "wq:", worker, NULL);
}

const char *al_call_key_name(char out[AL_CALL_KEY_MAX], const char *session, const char *call)
{
	snprintf(out, AL_CALL_KEY_MAX, "%s/%s", session ? session : "", call ? call : "");
	return out;
}

bool al_key_queue_tier(const char *name, char *tier, size_t cap)
{
	static const char pre[] = AL_KEY_PREFIX "q:";
	const char *colon;
	size_t n;

	if (strncmp(name, pre, sizeof(pre) - 1))
		return false;
	name += sizeof(pre) - 1;
	colon = strrchr(name, ':');
	if (!colon || colon == name || (size_t)(colon - name) >= cap)
		return false;
	n = (size_t)(colon - name);
	memcpy(tier, name, n);
	tier[n] = '\0';
	return true;
}

/* ---- the command builder ---- */

static void strv_add(struct al_call *c, struct al_strv *v, const void *data, size_t len)
{
	char *copy;

	if (c->oom)
		return;
	if (v->n == v->cap) {
		int cap = v->cap ? 2 * v->cap : 16;
		char **nv = realloc(v->v, (size_t)cap * sizeof(*nv));
		size_t *nl = nv ? realloc(v->len, (size_t)cap * sizeof(*nl)) : NULL;

		if (nv)
			v->v = nv;
		if (!nv || !nl) {
			c->oom = true;
			return;
		}
		v->len = nl;
		v->cap = cap;
	}
	copy = malloc(len + 1);
	if (!copy) {
		c->oom = true;
		return;
	}
	if (len)
		memcpy(copy, data, len);
	copy[len] = '\0';
	v->v[v->n] = copy;
	v->len[v->n++] = len;
}

static void strv_free(struct al_strv *v)
{
	for (int i = 0; i < v->n; i++)
		free(v->v[i]);
	free(v->v);
	free(v->len);
	memset(v, 0, sizeof(*v));
}

void al_call_init(struct al_call *c, const char *script)
{
	memset(c, 0, sizeof(*c));
	c->script = script;
}

void al_call_key(struct al_call *c, const char *key)
{
	strv_add(c, c->script ? &c->keys : &c->args, key, strlen(key));
}

void al_call_arg(struct al_call *c, const void *data, size_t len)
{
	strv_add(c, &c->args, data, len);
}

void al_call_str(struct al_call *c, const char *s)
{
	al_call_arg(c, s ? s : "", s ? strlen(s) : 0);
}

void al_call_u64(struct al_call *c, uint64_t v)
{
	char n[24];

	snprintf(n, sizeof(n), "%" PRIu64, v);
	al_call_str(c, n);
}

void al_call_i64(struct al_call *c, int64_t v)
{
	char n[24];

	snprintf(n, sizeof(n), "%" PRId64, v);
	al_call_str(c, n);
}

int al_call_argv(struct al_call *c, int *argc, const char ***argv, const size_t **lens)
{
	int head = c->script ? 3 : 0, n = head + c->keys.n + c->args.n, k = 0;

	if (c->oom)
		return AL_ENOMEM;
	free(c->argv);
	free(c->lens);
	c->argv = calloc((size_t)n + 1, sizeof(*c->argv));
	c->lens = calloc((size_t)n + 1, sizeof(*c->lens));
	if (!c->argv || !c->lens) {
		c->oom = true;
		return AL_ENOMEM;
	}
	if (c->script) {
		snprintf(c->nkeys, sizeof(c->nkeys), "%d", c->keys.n);
		c->argv[k++] = al_script_read_only(c->script) ? "EVALSHA_RO" : "EVALSHA";
		c->argv[k++] = al_script_sha(c->script);
		c->argv[k++] = c->nkeys;
		for (int i = 0; i < head; i++)
			c->lens[i] = strlen(c->argv[i]);
	}
	for (int i = 0; i < c->keys.n; i++, k++) {
		c->argv[k] = c->keys.v[i];
		c->lens[k] = c->keys.len[i];
	}
	for (int i = 0; i < c->args.n; i++, k++) {
		c->argv[k] = c->args.v[i];
		c->lens[k] = c->args.len[i];
	}
	*argc = n;
	*argv = c->argv;
	*lens = c->lens;
	return 0;
}

int al_call_items(const struct al_call *c, int keys_per_item)
{
	return keys_per_item > 0 ? c->keys.n / keys_per_item : 0;
}

void al_call_move(struct al_call *dst, struct al_call *src)
{
	*dst = *src;
	memset(src, 0, sizeof(*src));
}

void al_call_free(struct al_call *c)
{
	if (!c)
		return;
	strv_free(&c->keys);
	strv_free(&c->args);
	free(c->argv);
	free(c->lens);
	c->argv = NULL;
	c->lens = NULL;
}

/* ---- the scripts ---- */

void al_submit_add(struct al_call *c, const struct al_submit_item *it)
{
	char k[AL_KEY_MAX];

	al_call_key(c, al_key_sub(k, it->id));
	al_call_key(c, it->idem_key ? al_key_idem(k, it->tenant, it->idem_key)
				    : AL_KEY_PREFIX "idem:-");
	al_call_str(c, it->id);
	al_call_arg(c, it->job, it->joblen);
	al_call_u64(c, it->now_ms);
	al_call_u64(c, it->idem_ttl_s);
	al_call_str(c, it->idem_key ? "1" : "0");
	al_call_str(c, it->tier);
	al_call_str(c, it->tenant);
}

void al_lookup_call(struct al_call *c, const char *id)
{
	char k[AL_KEY_MAX];

	al_call_init(c, al_lua_lookup);
	al_call_key(c, al_key_job(k, id));
	al_call_key(c, al_key_sub(k, id));
}

void al_admit_init(struct al_call *c)
{
	al_call_init(c, al_lua_admit);
	al_call_key(c, AL_KEY_INTAKE);
	al_call_str(c, AL_GROUP_SCHEDULER);
}

void al_admit_add(struct al_call *c, const struct al_admit_item *it)
{
	char k[AL_KEY_MAX];
	int band = al_band_of(it->priority);

	al_call_key(c, al_key_job(k, it->id));
	al_call_key(c, al_key_sub(k, it->id));
	al_call_key(c, al_key_queue(k, it->tier, band));
	al_call_str(c, it->id);
	al_call_arg(c, it->job, it->joblen);
	al_call_str(c, it->tier);
	al_call_str(c, it->tenant);
	al_call_u64(c, it->max_attempts);
	al_call_u64(c, it->now_ms);
	al_call_u64(c, it->deadline_ms);
	al_call_u64(c, it->max_queued);
	al_call_u64(c, it->rate_per_s);
	al_call_str(c, al_band_name(band));
	al_call_u64(c, it->max_running);
	al_call_str(c, it->entry);
}

void al_claim_init(struct al_call *c, const char *worker, uint64_t now_ms)
{
	al_call_init(c, al_lua_claim);
	al_call_str(c, worker);
	al_call_u64(c, now_ms);
}

void al_claim_add(struct al_call *c, const char *id, unsigned attempt)
{
	char k[AL_KEY_MAX];

	al_call_key(c, al_key_job(k, id));
	al_call_u64(c, attempt);
}

void al_fetch_call(struct al_call *c, const char *const *streams, int nstreams, const char *worker,
		   uint64_t now_ms, unsigned count)
{
	al_call_init(c, al_lua_fetch);
	for (int i = 0; i < nstreams; i++)
		al_call_key(c, streams[i]);
	al_call_str(c, worker);
	al_call_u64(c, now_ms);
	al_call_u64(c, count);
}

/* COMMIT's keys come first for every item, then the arguments: the two
 * lists are kept apart until al_call_argv joins them. */
void al_commit_add(struct al_call *c, const struct al_commit_item *it)
{
	char k[AL_KEY_MAX];

	al_call_key(c, al_key_job(k, it->id));
	al_call_key(c, al_key_res(k, it->id));
	al_call_key(c, it->stream && it->entry ? it->stream : "");
	al_call_key(c, al_key_out(k, it->id));
	al_call_i64(c, it->attempt);
	al_call_arg(c, it->result, it->len);
	al_call_u64(c, it->ttl_ms);
	al_call_str(c, it->stream ? it->entry : "");
	al_call_str(c, it->group);
	al_call_str(c, it->status);
}

void al_commit_fetch_end(struct al_call *c, int nresults, const char *const *streams, int nstreams,
			 const char *worker, uint64_t now_ms, unsigned count)
{
	for (int i = 0; i < nstreams; i++)
		al_call_key(c, streams[i]);
	al_call_str(c, worker);
	al_call_u64(c, now_ms);
	al_call_u64(c, count);
	al_call_u64(c, (uint64_t)nresults);
}

void al_retry_call(struct al_call *c, const struct al_retry_item *it)
{
	char k[AL_KEY_MAX];

	al_call_init(c, al_lua_retry);
	al_call_key(c, al_key_job(k, it->id));
	al_call_key(c, AL_KEY_DELAYED);
	al_call_key(c, it->stream);
	al_call_u64(c, it->attempt);
	al_call_u64(c, it->due_ms);
	al_call_str(c, it->entry);
	al_call_str(c, it->group);
	al_call_str(c, it->id);
	al_call_str(c, it->bump ? "1" : "0");
}

void al_promote_call(struct al_call *c, uint64_t now_ms, unsigned max)
{
	al_call_init(c, al_lua_promote);
	al_call_key(c, AL_KEY_DELAYED);
	al_call_u64(c, now_ms);
	al_call_u64(c, max);
}

void al_reclaim_call(struct al_call *c, const char *id, const char *stream, const char *entry,
		     const char *group, const char *attempt)
{
	char k[AL_KEY_MAX];

	al_call_init(c, al_lua_reclaim);
	al_call_key(c, al_key_job(k, id));
	al_call_key(c, al_key_res(k, id));
	al_call_key(c, stream);
	al_call_str(c, entry);
	al_call_str(c, group);
	al_call_str(c, attempt);
	al_call_str(c, id);
}

/* CANCEL, EXPIRE and REJECT write a result the caller encoded; their first
 * keys are the same. */
static void ending_call(struct al_call *c, const char *script, const char *id, const char *result,
			size_t len, uint64_t ttl_ms)
{
	char k[AL_KEY_MAX];

	al_call_init(c, script);
	al_call_key(c, al_key_job(k, id));
	al_call_key(c, al_key_res(k, id));
	al_call_key(c, al_key_out(k, id));
	al_call_str(c, id);
	al_call_arg(c, result, len);
	al_call_u64(c, ttl_ms);
}

void al_reject_call(struct al_call *c, const char *id, const char *result, size_t len,
		    uint64_t ttl_ms, const char *entry, const char *status)
{
	char k[AL_KEY_MAX];

	ending_call(c, al_lua_reject, id, result, len, ttl_ms);
	al_call_key(c, al_key_sub(k, id));
	al_call_key(c, AL_KEY_INTAKE);
	al_call_str(c, entry);
	al_call_str(c, AL_GROUP_SCHEDULER);
	al_call_str(c, status);
}

void al_cancel_request_call(struct al_call *c, const char *id, const char *nonce)
{
	al_call_init(c, NULL);
	al_call_str(c, "XADD");
	al_call_str(c, AL_KEY_INTAKE);
	al_call_str(c, "*");
	al_call_str(c, "cancel");
	al_call_str(c, id);
	al_call_str(c, "reply");
	al_call_str(c, nonce);
}

/* BLPOP key timeout (seconds, to the millisecond): the waits on a reply
 * list and on a worker's session calls. */
static void blpop_call(struct al_call *c, const char *key, unsigned timeout_ms)
{
	char t[32];

	snprintf(t, sizeof(t), "%u.%03u", timeout_ms / 1000, timeout_ms % 1000);
	al_call_init(c, NULL);
	al_call_str(c, "BLPOP");
	al_call_str(c, key);
	al_call_str(c, t);
}

void al_reply_wait_call(struct al_call *c, const char *nonce, unsigned timeout_ms)
{
	char k[AL_KEY_MAX];

	blpop_call(c, al_key_reply(k, nonce), timeout_ms);
}

void al_cancel_call(struct al_call *c, const char *id, const char *result, size_t len,
		    uint64_t ttl_ms, const char *entry, const char *nonce)
{
	char k[AL_KEY_MAX];

	ending_call(c, al_lua_cancel, id, result, len, ttl_ms);
	al_call_key(c, al_key_sub(k, id));
	al_call_key(c, AL_KEY_INTAKE);
	al_call_key(c, al_key_reply(k, nonce));
	al_call_str(c, AL_GROUP_SCHEDULER);
	al_call_str(c, entry);
	al_call_u64(c, AL_REPLY_TTL_MS);
}

void al_expire_call(struct al_call *c, const char *id, const char *result, size_t len,
		    uint64_t ttl_ms)
{
	ending_call(c, al_lua_expire, id, result, len, ttl_ms);
	al_call_key(c, AL_KEY_DEADLINES);
}

void al_trim_call(struct al_call *c, const char *stream, const char *group)
{
	al_call_init(c, al_lua_trim);
	al_call_key(c, stream);
	al_call_str(c, group);
}

void al_await_call(struct al_call *c, const char *id)
{
	char k[AL_KEY_MAX];

	al_call_init(c, al_lua_await);
	al_call_key(c, al_key_res(k, id));
	al_call_key(c, al_key_out(k, id));
}

void al_give_back_call(struct al_call *c, const char *stream, const char *group, const char *entry)
{
	al_call_init(c, al_lua_give_back);
	al_call_key(c, stream);
	al_call_str(c, group);
	al_call_str(c, entry);
}

void al_dlq_call(struct al_call *c, uint64_t max_len, const char *reason, const char *source,
		 const char *entry, const char *id, const char *raw, size_t rawlen)
{
	size_t rl = strlen(reason ? reason : "");

	al_call_init(c, NULL);
	al_call_str(c, "XADD");
	al_call_str(c, AL_KEY_DLQ);
	al_call_str(c, "MAXLEN"); /* exact: dead letters are few; the bound is the bound */
	al_call_u64(c, max_len ? max_len : AL_DLQ_MAX_LEN_DEFAULT);
	al_call_str(c, "*");
	al_call_str(c, "reason");
	al_call_arg(c, reason ? reason : "", rl > AL_DLQ_REASON_MAX ? AL_DLQ_REASON_MAX : rl);
	al_call_str(c, "source");
	al_call_str(c, source);
	al_call_str(c, "entry");
	al_call_str(c, entry);
	al_call_str(c, "id");
	al_call_str(c, id);
	al_call_str(c, "size");
	al_call_u64(c, raw ? rawlen : 0);
	al_call_str(c, "raw");
	al_call_arg(c, raw ? raw : "",
		    raw ? (rawlen > AL_DLQ_RAW_MAX ? AL_DLQ_RAW_MAX : rawlen) : 0);
}

void al_xack_call(struct al_call *c, const char *stream, const char *group, const char *entry)
{
	al_call_init(c, NULL);
	al_call_str(c, "XACK");
	al_call_str(c, stream);
	al_call_str(c, group);
	al_call_str(c, entry);
}

void al_xgroup_create_call(struct al_call *c, const char *stream, const char *group)
{
	al_call_init(c, NULL);
	al_call_str(c, "XGROUP");
	al_call_str(c, "CREATE");
	al_call_str(c, stream);
	al_call_str(c, group);
	al_call_str(c, "0");
	al_call_str(c, "MKSTREAM");
}

void al_wait_call(struct al_call *c, unsigned replicas, unsigned timeout_ms)
{
	al_call_init(c, NULL);
	al_call_str(c, "WAIT");
	al_call_u64(c, replicas);
	al_call_u64(c, timeout_ms);
}

void al_worker_alive_call(struct al_call *c, const char *worker, uint64_t ttl_ms)
{
	char k[AL_KEY_MAX];

	al_call_init(c, NULL);
	al_call_str(c, "SET");
	al_call_str(c, al_key_worker(k, worker));
	al_call_str(c, "1");
	al_call_str(c, "PX");
	al_call_u64(c, ttl_ms);
}

const char *al_key_scheduler(char out[AL_KEY_MAX], const char *sched)
{
	return keyf(out, AL_KEY_PREFIX "scheduler:", sched, NULL);
}

void al_scheduler_alive_call(struct al_call *c, const char *sched, const char *policy_hash,
			     uint64_t ttl_ms)
{
	char k[AL_KEY_MAX];

	al_call_init(c, NULL);
	al_call_str(c, "SET");
	al_call_str(c, al_key_scheduler(k, sched));
	al_call_str(c, policy_hash);
	al_call_str(c, "PX");
	al_call_u64(c, ttl_ms);
}

void al_worker_register_call(struct al_call *c, const char *worker, const char *desc)
{
	al_call_init(c, NULL);
	al_call_str(c, "HSET");
	al_call_str(c, AL_KEY_WORKERS);
	al_call_str(c, worker);
	al_call_str(c, desc);
}

void al_worker_alive_end_call(struct al_call *c, const char *worker)
{
	char k[AL_KEY_MAX];

	al_call_init(c, NULL);
	al_call_str(c, "DEL");
	al_call_str(c, al_key_worker(k, worker));
}

void al_worker_unregister_call(struct al_call *c, const char *worker)
{
	al_call_init(c, NULL);
	al_call_str(c, "HDEL");
	al_call_str(c, AL_KEY_WORKERS);
	al_call_str(c, worker);
}

void al_registry_add_call(struct al_call *c, const char *set, const char *member)
{
	al_call_init(c, NULL);
	al_call_str(c, "SADD");
	al_call_str(c, set);
	al_call_str(c, member);
}

void al_registry_call(struct al_call *c, const char *set)
{
	al_call_init(c, NULL);
	al_call_str(c, "SMEMBERS");
	al_call_str(c, set);
}

void al_hash_all_call(struct al_call *c, const char *key)
{
	al_call_init(c, NULL);
	al_call_str(c, "HGETALL");
	al_call_str(c, key);
}

void al_result_get_call(struct al_call *c, const char *id)
{
	char k[AL_KEY_MAX];

	al_call_init(c, NULL);
	al_call_str(c, "GET");
	al_call_str(c, al_key_res(k, id));
}

void al_dlq_len_call(struct al_call *c)
{
	al_call_init(c, NULL);
	al_call_str(c, "XLEN");
	al_call_str(c, AL_KEY_DLQ);
}

void al_retries_waiting_call(struct al_call *c)
{
	al_call_init(c, NULL);
	al_call_str(c, "ZCARD");
	al_call_str(c, AL_KEY_DELAYED);
}

void al_vm_record_call(struct al_call *c, const char *name, const char *const *kv, size_t n)
{
	char k[AL_KEY_MAX];

	al_call_init(c, NULL);
	al_call_str(c, "HSET");
	al_call_str(c, al_key_vm(k, name));
	for (size_t i = 0; i < 2 * n; i++)
		al_call_str(c, kv[i]);
}

void al_vm_index_call(struct al_call *c, const char *name, const char *expires_ms)
{
	al_call_init(c, NULL);
	al_call_str(c, "ZADD");
	al_call_str(c, AL_KEY_VM_LEASES);
	al_call_str(c, expires_ms);
	al_call_str(c, name);
}

void al_out_entry_call(struct al_call *c, const char *id, unsigned attempt, const char *type,
		       const void *data, size_t len)
{
	char k[AL_KEY_MAX];

	al_call_init(c, NULL);
	al_call_str(c, "XADD");
	al_call_str(c, al_key_out(k, id));
	al_call_str(c, "MAXLEN");
	al_call_str(c, "~");
	al_call_str(c, AL_OUT_MAXLEN_S);
	al_call_str(c, "*");
	al_call_str(c, "t");
	al_call_str(c, type);
	al_call_str(c, "a");
	al_call_u64(c, attempt);
	if (data) {
		al_call_str(c, "d");
		al_call_arg(c, data, len);
	}
}

void al_out_ttl_call(struct al_call *c, const char *id, uint64_t ttl_ms)
{
	char k[AL_KEY_MAX];

	al_call_init(c, NULL);
	al_call_str(c, "PEXPIRE");
	al_call_str(c, al_key_out(k, id));
	al_call_u64(c, ttl_ms);
}

void al_workers_call(struct al_call *c, const char *policy_hash)
{
	al_call_init(c, al_lua_workers);
	al_call_key(c, AL_KEY_WORKERS);
	al_call_str(c, policy_hash);
}

void al_vm_end_due_call(struct al_call *c, uint64_t now_ms, uint64_t ttl_ms)
{
	al_call_init(c, al_lua_vm_end_due);
	al_call_key(c, AL_KEY_VM_LEASES);
	al_call_u64(c, now_ms);
	al_call_u64(c, ttl_ms);
}

void al_vm_end_one_call(struct al_call *c, const char *name, const char *reason, uint64_t now_ms,
			uint64_t ttl_ms)
{
	al_call_init(c, al_lua_vm_end_one);
	al_call_key(c, AL_KEY_VM_LEASES);
	al_call_str(c, name);
	al_call_str(c, reason);
	al_call_u64(c, now_ms);
	al_call_u64(c, ttl_ms);
}

void al_end_wait_call(struct al_call *c, const char *id, const char *after, unsigned timeout_ms)
{
	char k[AL_KEY_MAX];

	al_call_init(c, NULL);
	al_call_str(c, "XREAD");
	al_call_str(c, "COUNT");
	al_call_str(c, "1");
	al_call_str(c, "BLOCK");
	al_call_u64(c, timeout_ms);
	al_call_str(c, "STREAMS");
	al_call_str(c, al_key_out(k, id));
	al_call_str(c, after);
}
