/* keys.h - the Redis key layout (documented in PROTOCOL.md, "Redis"). Every
 * key starts with AL_KEY_PREFIX; ids and tier names are already restricted to
 * safe characters by the codec. */
#ifndef AL_KEYS_H
#define AL_KEYS_H

#include <stddef.h>
#include <string.h>

#define AL_KEY_PREFIX "al:"
#define AL_KEY_INTAKE "al:intake"	   /* stream: submitted jobs (field job) */
#define AL_KEY_DLQ "al:dlq"		   /* stream: dead letters */
#define AL_KEY_DELAYED "al:delayed"	   /* zset: job id -> due unix ms (retries) */
#define AL_KEY_STATS "al:stats"		   /* hash: final status -> count, and counters */
#define AL_KEY_WORKERS "al:workers"	   /* hash: worker id -> JSON description */
#define AL_KEY_CANCEL_CHANNEL "al:cancel" /* pub/sub: ids of jobs to kill */
#define AL_KEY_VM_LEASES "al:vm:leases"   /* zset: service VM name -> lease end, unix ms */
#define AL_KEY_VM_PREFIX "al:vm:"	   /* al:vm:<name> hash: the VM's lease record */
#define AL_VM_NAME_PREFIX "al-svc-"	   /* every domain Airlock makes; others are never touched */
#define AL_GROUP_WORKERS "workers"	   /* consumer group on every ready queue */
#define AL_GROUP_SCHEDULER "scheduler"	   /* consumer group on the intake */

/* Priority bands: one ready stream per tier and band, read high first. */
#define AL_BANDS 3
static inline int al_band_of(unsigned priority)
{
	return priority >= 7 ? 0 : priority >= 4 ? 1 : 2;
}
static inline const char *al_band_name(int band)
{
	return band == 0 ? "hi" : band == 1 ? "mid" : "lo";
}

/* Formats (ids are at most 64 chars, tiers 64, tenants 64):
 *   al:job:<id>        hash: state, job, tier, tenant, attempt, max_attempts, ...
 *   al:res:<id>        string: the committed msgpack result
 *   al:done:<id>       list: a token pushed at commit, for BLPOP waiters
 *   al:q:<tier>:<band> stream: ready entries (id, attempt), group "workers"
 *   al:idem:<tenant>:<key>  string: job id of an idempotent submission
 *   al:worker:<id>     string with a TTL: the worker is alive
 *   al:tenant:<tenant> hash: queued, running (quota counters)
 *   al:vm:<name>       hash: a service VM's lease (job, tier, worker, ip, ports,
 *                      created_ms, expires_ms, max_until_ms, state, reason) */
#define AL_KEY_MAX 256

/* The command that records a dead letter: XADD al:dlq * reason R source S
 * entry E id I raw BYTES. Fills argv/lens (raw may be NULL). */
#define AL_DLQ_ARGC 13
static inline void al_dlq_argv(const char *argv[AL_DLQ_ARGC], size_t lens[AL_DLQ_ARGC],
			       const char *reason, const char *source, const char *entry,
			       const char *id, const char *raw, size_t rawlen)
{
	const char *v[AL_DLQ_ARGC] = { "XADD", AL_KEY_DLQ, "*", "reason", reason, "source", source,
				       "entry", entry, "id", id ? id : "", "raw", raw ? raw : "" };

	for (int i = 0; i < AL_DLQ_ARGC; i++) {
		argv[i] = v[i];
		lens[i] = i == AL_DLQ_ARGC - 1 ? (raw ? rawlen : 0) : strlen(v[i]);
	}
}

#endif
