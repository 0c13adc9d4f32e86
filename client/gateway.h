/* gateway.h - the client library's gateway mode (client.h uses it when
 * connected with al_client_connect_gateway): submit, wait, status and
 * cancel over the HTTP API (docs/api.md), with the tenant's API key. */
#ifndef AL_CLIENT_GATEWAY_H
#define AL_CLIENT_GATEWAY_H

#include <stdbool.h>
#include <stdint.h>

#include "../proto/contract.h"
#include "../proto/err.h"
#include "../proto/job.h"
#include "../proto/result.h"
#include "client.h" /* al_chunk */

struct al_gw;

/* url: http:// or https://; token: the API key (copied). */
struct al_gw *al_gw_open(const char *url, const char *token, struct al_err *err);
void al_gw_close(struct al_gw *g);
/* The job without its id and tenant (the gateway's and the key's). */
int al_gw_submit(struct al_gw *g, const struct al_job *job, char id_out[AL_ID_MAX + 1],
		 bool *existing, struct al_err *err);
int al_gw_wait(struct al_gw *g, const char *id, uint64_t timeout_ms, struct al_result *res,
	       struct al_err *err);
int al_gw_status(struct al_gw *g, const char *id, enum al_job_state *state, struct al_result *res,
		 struct al_err *err);
/* GET /v1/jobs/{id}/output (Server-Sent Events), resumed with Last-Event-ID
 * after a dropped connection (as al_client_stream). */
int al_gw_stream(struct al_gw *g, const char *id, const char *after, uint64_t timeout_ms,
		 al_chunk_fn fn, void *arg, struct al_err *err);
/* POST /v1/sessions/{id}/calls with the call (its id and tenant the
 * gateway's), answered with its result (as al_client_session_call). */
struct al_sess_call;
int al_gw_session_call(struct al_gw *g, const struct al_sess_call *call, uint64_t timeout_ms,
		       struct al_result *res, struct al_err *err);
/* 0 finished, 1 ended while waiting, 2 kill sent (as al_client_cancel). */
int al_gw_cancel(struct al_gw *g, const char *id, struct al_err *err);

#endif
