/* job.h - the job: what a client asks Airlock to run, and its msgpack codec.
 * The wire format is specified in proto/PROTOCOL.md; every cap is here. */
#ifndef AL_JOB_H
#define AL_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "inputs.h"

#define AL_PROTO_VERSION 1

/* Caps on every variable-length field (bytes unless said otherwise). */
#define AL_JOB_MAX_BYTES     (16u << 20) /* a whole encoded job */
#define AL_ID_MAX	     64		 /* id, tenant, tier */
#define AL_CODE_MAX	     (1u << 20)	 /* source code */
#define AL_ARGV_MAX	     256	 /* argv entries */
#define AL_ARG_MAX	     4096	 /* one argv entry */
#define AL_STDIN_MAX	     (1u << 20)	 /* stdin bytes */
#define AL_FILES_MAX	     64		 /* input files */
#define AL_PATH_MAX	     255	 /* a relative file path */
#define AL_FILES_TOTAL_MAX   (8u << 20)	 /* all input files together */
#define AL_ENV_MAX	     64		 /* environment pairs */
#define AL_ENV_NAME_MAX	     128	 /* one variable name */
#define AL_ENV_VALUE_MAX     4096	 /* one variable value */
#define AL_COLLECT_MAX	     16		 /* output files (or globs) to collect */
#define AL_COLLECT_FILES_MAX 64		 /* files collected in all, globs' included */
#define AL_LABELS_MAX	     32		 /* labels */
#define AL_LABEL_KEY_MAX     64		 /* one label key */
#define AL_LABEL_VALUE_MAX   256	 /* one label value */
#define AL_IDEM_MAX	     128	 /* idempotency key */
#define AL_URL_MAX	     2048	 /* callback URL */
#define AL_EGRESS_ALLOW_MAX  32		 /* egress_allow rules */
#define AL_EGRESS_TEXT_MAX   300	 /* one egress_allow rule */
#define AL_ATTEMPTS_MAX	     10		 /* max_attempts */
#define AL_PRIORITY_MAX	     9		 /* priority 0..9, 9 runs first */
#define AL_PRIORITY_DEFAULT  5

/* Upper bounds of limits: anything above is a client bug, not a policy
 * question (the tier's policy sets tighter maxima). */
#define AL_LIMIT_WALL_MS_MAX (7ull * 24 * 3600 * 1000) /* a week */
#define AL_LIMIT_MEMORY_MAX  (1ull << 40)	       /* 1 TiB */
#define AL_LIMIT_PIDS_MAX    65536ull
#define AL_LIMIT_OUTPUT_MAX  (1ull << 30) /* 1 GiB per stream */
#define AL_LIMIT_DISK_MAX    (1ull << 40)

enum al_runtime {
	AL_RUNTIME_ARGV = 0, /* a plain argv, no source code */
	AL_RUNTIME_PYTHON,   /* /usr/bin/python3 -I, code as the script */
	AL_RUNTIME_SH,	     /* /bin/sh, code as the script */
};

enum al_network {
	AL_NET_NONE = 0, /* no network at all (default) */
	AL_NET_EGRESS,	 /* outbound traffic, if the tier's policy grants it */
};

/* A byte string that may hold any byte; data is NUL-terminated for
 * convenience (the NUL is not counted in len). */
struct al_bytes {
	char *data;
	size_t len;
};

struct al_file {
	char *path; /* relative, no "..", no leading "/", UTF-8 */
	struct al_bytes data;
	uint32_t mode; /* permission bits only, <= 0777; default 0644 */
};

struct al_kv {
	char *key;
	char *value;
};

/* Every limit is 0 when the job leaves it to the tier's default. */
struct al_limits {
	uint64_t wall_ms;      /* wall-clock time, milliseconds */
	uint64_t cpu_ms;       /* CPU time (user+system), milliseconds */
	uint64_t memory_bytes; /* peak memory, bytes */
	uint64_t pids;	       /* processes and threads at once */
	uint64_t stdout_bytes; /* stdout kept; more ends the job output_limit */
	uint64_t stderr_bytes; /* same for stderr */
	uint64_t disk_bytes;   /* bytes written to the work directory */
};

struct al_build; /* grade.h */
struct al_test;

struct al_job {
	uint32_t version; /* AL_PROTO_VERSION */
	char *id;	  /* 1..64 of [A-Za-z0-9._:-] */
	char *tenant;	  /* same charset; "default" when absent */
	char *tier;	  /* a tier name from the operator's policy */
	enum al_runtime runtime;
	struct al_bytes code; /* source, runtime python/sh only */
	char **argv;	      /* argv, or extra script arguments */
	size_t argc;
	struct al_bytes stdin_data; /* stdin of the job, may be empty */
	struct al_file *files;
	size_t nfiles;
	struct al_input *inputs; /* by URL + SHA-256, fetched by the worker (inputs.h) */
	size_t ninputs;
	struct al_kv *env; /* explicit pairs only */
	size_t nenv;
	char **collect; /* relative paths to collect afterwards */
	size_t ncollect;
	struct al_limits limits;
	enum al_network network;
	uint32_t priority;     /* 0..9, default 5 */
	uint64_t deadline_ms;  /* unix ms; 0 = none */
	uint32_t max_attempts; /* 1..10; 0 = the tier's default */
	char *idempotency_key; /* may be NULL */
	char *callback_url;    /* may be NULL */
	char *image;	       /* a catalogue image its tier allows; NULL = the tier's default */
	char **egress_allow;   /* network egress: rules narrowing the tier's (never wider) */
	size_t negress_allow;
	struct al_kv *labels;
	size_t nlabels;
	uint64_t submitted_ms; /* unix ms, set by the client; 0 = unknown */
	/* a grading job (grade.h): its build step (NULL = none) and its tests */
	struct al_build *build;
	struct al_build *checker; /* judges each test's output instead of expect/compare */
	char *language;		  /* a grading language of the policy (cpp17, python3, ...):
				   * admission fills build, argv and image from it */
	struct al_test *tests;
	size_t ntests;
	bool stop_on_failure; /* skip the tests after the first that fails */
	int group_scoring;    /* enum al_group_scoring: how a group's points are earned */
	/* opens a session (call.h): no command of its own; its sandbox
	 * runs the session server until the session ends */
	bool session;
	uint64_t cpu_budget_ms; /* a session's: the CPU time of all its calls, at most
				 * (0: the tier's budget or none; never above the tier's) */
};

/* Decode one encoded job. Total: every input either fills *job (caller frees
 * with al_job_free) and returns AL_OK, or returns AL_EINVAL with err->msg
 * naming the field and the problem, leaving *job empty. Never reads past
 * len, never allocates more than a small multiple of len. */
int al_job_decode(const void *buf, size_t len, struct al_job *job, struct al_err *err);

/* Encode *job into out (appended). The job must be valid (as decode would
 * accept it); returns AL_EINVAL naming the field otherwise. */
int al_job_encode(const struct al_job *job, struct al_buf *out, struct al_err *err);

/* Check the invariants decode enforces on a job built in memory. */
int al_job_validate(const struct al_job *job, struct al_err *err);

/* Best effort: find the "id" of an undecodable job so that a rejected result
 * can be written. Returns a malloc'd string (caller frees) or NULL. */
char *al_job_peek_id(const void *buf, size_t len);

/* A well-formed job id: 1..64 characters of [A-Za-z0-9._:-], len bytes, no
 * NUL inside. */
bool al_job_id_ok(const char *s, size_t len);

/* Free everything the job owns and zero it. NULL is fine. */
void al_job_free(struct al_job *job);

/* Generate a fresh random job id (32 hex chars) into out[33]. */
int al_job_new_id(char out[33], struct al_err *err);

const char *al_runtime_name(enum al_runtime r);
const char *al_network_name(enum al_network n);

/* collect: an entry with *, ? or [ is a glob (fnmatch with FNM_PATHNAME
 * and FNM_PERIOD: "*.png" matches in the work directory's top only, not
 * dot files), else a path. wanted: path is one the job asked for (an entry,
 * or a glob's match). max_files: how many files its result may hold. */
bool al_collect_is_glob(const char *entry);
bool al_collect_wanted(const struct al_job *job, const char *path);
size_t al_collect_max_files(const struct al_job *job);

#endif
