/* result.h - the result of one job attempt, and its msgpack codec. */
#ifndef AL_RESULT_H
#define AL_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "job.h"

#define AL_RESULT_MAX_BYTES  (256u << 20) /* a whole encoded result */
#define AL_RESULT_STREAM_MAX (128u << 20) /* stdout or stderr in a result */
#define AL_RESULT_FILE_MAX   (64u << 20)  /* one collected file */
#define AL_ERROR_MAX	     1024	  /* the human-readable error */
#define AL_INFO_MAX	     32		  /* backend facts (info map) */
#define AL_INFO_VALUE_MAX    1024

enum al_status_code {
	AL_ST_OK = 0,	     /* exited 0 */
	AL_ST_NONZERO_EXIT,  /* exited with a non-zero code or died by a signal */
	AL_ST_TIMEOUT,	     /* wall-clock limit reached, killed */
	AL_ST_CPU_LIMIT,     /* CPU-time limit reached */
	AL_ST_MEMORY_LIMIT,  /* out of memory in its cgroup / VM */
	AL_ST_OUTPUT_LIMIT,  /* stdout/stderr or file size cap reached */
	AL_ST_CANCELLED,     /* cancelled by a client */
	AL_ST_REJECTED,	     /* never ran: invalid or refused by policy */
	AL_ST_SANDBOX_ERROR, /* the isolation boundary failed (retried) */
	AL_ST_WORKER_LOST,   /* every attempt's worker died */
	AL_ST_EXPIRED,	     /* not started before its deadline */
	AL_ST_COMPILE_ERROR, /* a grading job's build failed: no test ran */
	AL_ST_SESSION_ENDED, /* a session's call: the session has ended (error: why) */
	AL_ST_COUNT
};

struct al_out_file {
	char *path;
	struct al_bytes data;
	bool truncated; /* the file was larger than the cap */
};

#define AL_EGRESS_LOG_MAX 64 /* connections listed in a result's egress transcript */

/* One connection a job tried through the egress proxy. */
struct al_egress_conn {
	char *host; /* as the job asked for it */
	uint32_t port;
	char *addr; /* the address connected to ("" when none) */
	bool allowed;
	char *why;	   /* the rule that allowed it, or why it was denied or cut */
	uint64_t up, down; /* bytes job -> server, server -> job */
	uint64_t ms;	   /* how long it lasted */
};

struct al_test_result;
struct al_group_score;
struct al_group_score; /* grade.h */

#define AL_OUTPUTS_MAX	    16	       /* rich outputs in one result */
#define AL_OUTPUT_MIME_MAX  64	       /* an output's media type */
#define AL_OUTPUT_BYTES_MAX (8u << 20) /* one output's bytes */

/* A rich output of a session's python call (a figure: image/png). */
struct al_output {
	char *mime;
	struct al_bytes data;
};

struct al_result {
	uint32_t version; /* AL_PROTO_VERSION */
	char *id;	  /* the job's id */
	uint32_t attempt; /* 1-based attempt that produced it; 0 if none ran */
	enum al_status_code status;
	bool has_exit_code; /* false when the job never exited by itself */
	int32_t exit_code;
	int32_t signal;	     /* signal that ended the job, 0 when none */
	struct al_bytes out; /* stdout, at most the job's cap */
	bool out_truncated;
	struct al_bytes err; /* stderr */
	bool err_truncated;
	struct al_out_file *files; /* collected output files */
	size_t nfiles;
	uint64_t wall_ms; /* milliseconds */
	uint64_t cpu_ms;
	uint64_t peak_memory_bytes;
	uint64_t max_rss_bytes; /* the largest resident set of its processes, as wait4's
				 * ru_maxrss counts it (what autograders report); 0 unknown */
	char *backend;		/* e.g. "process"; may be NULL */
	char *worker;		/* worker id; may be NULL */
	uint64_t queued_ms;	/* unix ms timestamps, 0 when unknown */
	uint64_t started_ms;
	uint64_t finished_ms;
	char *error;	    /* why, whenever status is not ok/nonzero_exit */
	struct al_kv *info; /* backend facts: image hash, VM name and IP... */
	size_t ninfo;
	struct al_egress_conn *egress; /* network egress: the connections tried, in order */
	size_t negress;
	/* a grading job (grade.h): its build's outcome (NULL = no build) and one
	 * per test, in the job's order */
	struct al_test_result *build;
	struct al_test_result *tests;
	size_t ntests;
	/* ...and its score: the points of its tests (and groups) earned, of
	 * max_score; groups in the order their first test comes */
	bool has_score;
	uint64_t score, max_score;
	struct al_group_score *groups;
	size_t ngroups;
	struct al_output *outputs; /* a session's python call: figures, in order */
	size_t noutputs;
};

const char *al_status_name(enum al_status_code s);
/* Returns the status for a name, or AL_EINVAL. */
int al_status_parse(const char *name);

/* Decode a result; total like al_job_decode. Unknown fields are ignored so
 * that newer workers may add some. Caller frees with al_result_free. */
int al_result_decode(const void *buf, size_t len, struct al_result *res, struct al_err *err);
int al_result_encode(const struct al_result *res, struct al_buf *out, struct al_err *err);
int al_result_validate(const struct al_result *res, struct al_err *err);
/* Set res->error to a copy of the formatted message; returns 0 or -1. */
int al_result_set_error(struct al_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Append a connection to res->egress (copies the strings); AL_ENOMEM, or
 * AL_EINVAL when the transcript is full. */
int al_result_add_egress(struct al_result *res, const struct al_egress_conn *c);
/* Add an output (copies both); 0, AL_ENOMEM, or AL_EINVAL past
 * AL_OUTPUTS_MAX. */
int al_result_add_output(struct al_result *res, const char *mime, const void *data, size_t len);
/* Add a key/value to res->info (copies both); returns 0 or AL_ENOMEM. */
int al_result_add_info(struct al_result *res, const char *key, const char *value);
void al_result_free(struct al_result *res);

#endif
