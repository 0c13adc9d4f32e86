/* client.h - the client library: submit jobs, wait for, read and cancel
 * results, queue statistics and dead letters, over a blocking hiredis
 * connection. */
#ifndef AL_CLIENT_H
#define AL_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "../proto/chunk.h"
#include "../proto/contract.h"
#include "../proto/err.h"
#include "../proto/job.h"
#include "../proto/result.h"

struct al_client;

/* Connect (and AUTH/SELECT) to url; NULL with err filled on failure.
 * Free with al_client_close. */
struct al_client *al_client_connect(const char *url, struct al_err *err);
/* Or through the HTTP gateway (docs/api.md): url http:// or https://, token
 * the tenant's API key. Submit, wait, status and cancel work the same (the
 * gateway chooses ids and the key decides the tenant); stats, dlq and vm
 * are operators' commands and refuse. */
struct al_client *al_client_connect_gateway(const char *url, const char *token, struct al_err *err);
void al_client_close(struct al_client *c);

/* Submit job. If job->id is NULL a fresh id is generated (and stored in the
 * job, owned by it). *existing is set when an earlier job with the same
 * idempotency key exists: its id is copied to id_out instead. */
int al_client_submit(struct al_client *c, struct al_job *job, char id_out[AL_ID_MAX + 1],
		     bool *existing, struct al_err *err);

/* Submit n jobs in one round trip (same rules as al_client_submit, per job).
 * ids_out[i] gets each id; code[i] says what became of it: accepted, an
 * earlier job with the same idempotency key (its id in ids_out[i]), or the
 * id was taken. Returns AL_OK or an error for the whole call (nothing or
 * everything was submitted). */
int al_client_submit_many(struct al_client *c, struct al_job *jobs, size_t n,
			  char (*ids_out)[AL_ID_MAX + 1], enum al_submit_code *code,
			  struct al_err *err);

/* Wait up to timeout_ms (0 = forever) for the result; AL_OK fills *res
 * (caller frees). A timeout returns AL_EREDIS with "timed out". */
int al_client_wait(struct al_client *c, const char *id, uint64_t timeout_ms, struct al_result *res,
		   struct al_err *err);

/* A session's call (proto/call.h): call->session, op and its fields
 * set; its id (new when NULL) and tenant ("default" when NULL) are filled
 * here. Queued for the session's worker, then waited for up to
 * timeout_ms (0 = forever). AL_OK fills *res: the call's result, or, when
 * the session has ended (before or while the call ran), status
 * session_ended with "session_ended: <reason>" in error. AL_EINVAL when
 * there is no such session for the call's tenant, or SESSION_CALL refused
 * the call (saying why). Its answer is read from al:res:<session>/<id>
 * (al_call_key_name). Open a session with
 * al_client_submit of a job whose session is true, then al_client_wait. */
struct al_sess_call;
int al_client_session_call(struct al_client *c, struct al_sess_call *call, uint64_t timeout_ms,
			   struct al_result *res, struct al_err *err);

/* Return non-zero to stop following. */
typedef int (*al_chunk_fn)(const struct al_chunk *ch, void *arg);

/* Follow job id's live output from after entry `after` (NULL or "0": from
 * the start), calling fn for each entry in order, until the end entry (then
 * AL_OK), fn returns non-zero (AL_OK), or timeout_ms (0: no limit) passes
 * (AL_EREDIS "timed out"). An unknown id is AL_EINVAL. Bytes the stream did
 * not carry (trimmed, or lost while Redis was away) are in the result. */
int al_client_stream(struct al_client *c, const char *id, const char *after, uint64_t timeout_ms,
		     al_chunk_fn fn, void *arg, struct al_err *err);

/* Where the job is in its life (al_job_state_name gives its name); with a
 * result when done (res->version != 0). Unknown ids are AL_EINVAL. */
int al_client_status(struct al_client *c, const char *id, enum al_job_state *state,
		     struct al_result *res, struct al_err *err);

/* 1: cancelled while waiting, 2: kill sent to the running job, 0: already
 * finished, 3: requested, but no scheduler answered within AL_CANCEL_WAIT_S
 * s (it is carried out when one reads the intake). Unknown ids are
 * AL_EINVAL. */
int al_client_cancel(struct al_client *c, const char *id, struct al_err *err);

/* The operator's calls (stats, dead letters, service VMs): admin.h. */

#endif
