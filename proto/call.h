/* call.h - sessions (PROTOCOL.md, "Sessions"): a sandbox a tenant opens,
 * runs calls in, and closes. A session is opened by a job with "session":
 * true (its id is the session's id); its calls are the frames below, which
 * a client queues for the worker that holds the session (al:wq:<worker>,
 * through the SESSION_CALL script), each answered like a job, under the
 * name <session>/<call id> (al_call_key_name): a result at al:res:<it>, an
 * end entry on al:out:<it>. */
#ifndef AL_CALL_H
#define AL_CALL_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "job.h"

#define AL_SESS_CALL_MAX_BYTES (16u << 20) /* a whole encoded call */
#define AL_SESS_FILE_MAX       (8u << 20)  /* a file put into a session */
#define AL_SESS_OUTPUT_MAX_MIN 256	   /* a call's output_max, at least */
#define AL_SESS_FORK_MAX       16	   /* a fork's copies, at most */

enum al_sess_op {
	AL_SESS_EXEC,	/* a program (argv) or a shell line (code) */
	AL_SESS_PYTHON, /* code, into the session's one Python interpreter */
	AL_SESS_PUT,	/* data into path (mode) under the work directory */
	AL_SESS_GET,	/* path's contents, as the result's stdout */
	AL_SESS_LS,	/* the files under path ("" = the work directory) */
	AL_SESS_CLOSE,	/* end the session */
	AL_SESS_CANCEL, /* stop the call named target (running: interrupted; queued:
			 * dropped); both answered cancelled, the session goes on */
	AL_SESS_INFO,	/* the session's limits, usage and time left (stdout: JSON) */
	AL_SESS_EXTEND, /* its idle time and its life from now: idle_ms, life_ms, each
			 * up to the tier's most (answered as info) */
	AL_SESS_PAUSE,	/* save the sandbox whole and free it: the session is paused
			 * until its next call (docs/snapshots.md) */
	AL_SESS_RESUME, /* a paused session back (any call does it): answered as info */
	AL_SESS_FORK,	/* count new sessions, paused, from one snapshot of this one
			 * (stdout: JSON {"sessions": [ids]}) */
	AL_SESS_OP_COUNT
};

/* Why a session ended (the record's reason; a call after it gets
 * session_ended with it). Append-only, like status codes. */
enum al_sess_end {
	AL_SESS_CLOSED,		  /* a client closed it */
	AL_SESS_IDLE,		  /* no call for its idle time */
	AL_SESS_LIFE,		  /* open for its maximum life */
	AL_SESS_LIMIT,		  /* the sandbox hit a session limit (memory, pids...) */
	AL_SESS_CALL_STUCK,	  /* a call past its time did not stop when interrupted */
	AL_SESS_EXITED,		  /* the sandbox's interpreter ended (the code exited it) */
	AL_SESS_WORKER_LOST,	  /* its worker stopped beating */
	AL_SESS_WORKER_STOP,	  /* its worker was stopped (drain) */
	AL_SESS_BROKEN,		  /* the sandbox broke the session protocol */
	AL_SESS_PAUSED_EXPIRED,	  /* paused longer than its tier's paused_max_s */
	AL_SESS_SNAPSHOT_REFUSED, /* its snapshot could not be restored (changed, truncated,
				   * of another shape or image) */
	AL_SESS_END_COUNT
};

struct al_sess_call {
	uint32_t version; /* AL_PROTO_VERSION */
	char *id;	  /* the call's id: its result is al:res:<session>/<id> */
	char *session;	  /* the session's id */
	char *tenant;	  /* "default" when absent */
	enum al_sess_op op;
	struct al_bytes code; /* exec: a shell line (without argv); python: source */
	char **argv;	      /* exec: a program and its arguments */
	size_t argc;
	char *path;	      /* put, get, ls: relative to the work directory */
	struct al_bytes data; /* put: the file's bytes */
	uint32_t mode;	      /* put: permission bits, <= 0777; default 0644 */
	uint64_t timeout_ms;  /* exec, python: 0 = the session's per-call time */
	uint64_t cpu_ms;      /* exec, python: 0 = the session's per-call CPU time */
	uint64_t output_max;  /* exec, python: each stream cut to its head and tail of
			       * at most this many bytes (0 = kept up to the caps) */
	char *target;	      /* cancel: the id of the call to stop */
	uint64_t idle_ms;     /* extend: the session's idle time from now on */
	uint64_t life_ms;     /* extend: its life from now (its end moves up to that) */
	uint32_t count;	      /* fork: how many copies, 1..AL_SESS_FORK_MAX */
	uint64_t submitted_ms;
};

/* Total, as al_job_decode: fills *call (caller frees with
 * al_sess_call_free) and AL_OK, or AL_EINVAL naming the field. */
int al_sess_call_decode(const void *buf, size_t len, struct al_sess_call *call, struct al_err *err);
int al_sess_call_encode(const struct al_sess_call *call, struct al_buf *out, struct al_err *err);
int al_sess_call_validate(const struct al_sess_call *call, struct al_err *err);
void al_sess_call_free(struct al_sess_call *call);
/* Best effort, for a call that does not decode: its session's and its own
 * id (each a well-formed id), so that it can be told why on its own keys.
 * False when either is missing. */
bool al_sess_call_peek(const void *buf, size_t len, char session[AL_ID_MAX + 1],
		       char id[AL_ID_MAX + 1]);

const char *al_sess_op_name(enum al_sess_op op);
int al_sess_op_parse(const char *name); /* -1 when unknown */
const char *al_sess_end_name(enum al_sess_end why);
int al_sess_end_parse(const char *name);

#endif
