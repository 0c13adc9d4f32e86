/* keys.h - the Redis key layout (documented in PROTOCOL.md, "Redis"). Every
 * key starts with AL_KEY_PREFIX; ids and tier names are already restricted to
 * safe characters by the codec. */
#ifndef AL_KEYS_H
#define AL_KEYS_H

#define AL_KEY_PREFIX	      "al:"
#define AL_KEY_INTAKE	      "al:intake"    /* stream: submitted jobs (field job) */
#define AL_KEY_DLQ	      "al:dlq"	     /* stream: dead letters */
#define AL_KEY_DELAYED	      "al:delayed"   /* zset: job id -> due unix ms (retries) */
#define AL_KEY_DEADLINES      "al:deadlines" /* zset: job id -> deadline unix ms */
#define AL_KEY_STATS	      "al:stats"     /* hash: final status -> count, and counters */
#define AL_KEY_WORKERS	      "al:workers"   /* hash: worker id -> JSON description */
#define AL_KEY_HISTS	      "al:hists"     /* set: every al:hist:<tier>:<backend> written */
#define AL_KEY_TIERS	      "al:tiers"     /* set: the tiers of the schedulers' policies */
#define AL_KEY_SCHEDULERS     "al:schedulers" /* set: scheduler ids (al:scheduler:<id>: its policy) */
#define AL_KEY_CANCEL_CHANNEL "al:cancel"     /* pub/sub: ids of jobs to kill */
#define AL_KEY_VM_LEASES      "al:vm:leases" /* zset: service VM name -> lease end, unix ms */
#define AL_KEY_VM_PREFIX      "al:vm:"	     /* al:vm:<name> hash: the VM's lease record */
#define AL_KEY_SESSIONS	      "al:sessions"  /* zset: open session id -> lease end, unix ms */
#define AL_KEY_PAUSED	      "al:paused"    /* zset: paused session id -> its end, unix ms */
#define AL_VM_NAME_PREFIX     "al-svc-"	  /* every domain Airlock makes; others are never touched */
#define AL_GROUP_WORKERS      "workers"	  /* consumer group on every ready queue */
#define AL_GROUP_SCHEDULER    "scheduler" /* consumer group on the intake */

/* Live output (al:out:<id>, PROTOCOL.md "Live output"): a stream of chunks,
 * each at most AL_OUT_CHUNK_MAX bytes, the stream trimmed to about
 * AL_OUT_MAXLEN entries; the whole capped output stays in the result. */
#define AL_OUT_CHUNK_MAX 16384
#define AL_OUT_MAXLEN	 4096
#define AL_OUT_MAXLEN_S	 "4096"

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

/* Keys with a name part (al:job:<id>, al:q:<tier>:<band>, ...) are built
 * by the functions in contract.h, never spelt out at a call site. */
#define AL_KEY_MAX 256

#endif
