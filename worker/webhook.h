/* webhook.h - POSTing results to callback URLs with libcurl's multi
 * interface on the worker's libevent loop: never blocks the loop, signs the
 * body with HMAC-SHA256 of an operator secret, retries a few times. */
#ifndef AL_WEBHOOK_H
#define AL_WEBHOOK_H

#include <event2/event.h>
#include <stddef.h>

#include "../proto/err.h"

struct wk_webhooks;

#define AL_WEBHOOK_TRIES      3	    /* attempts per callback */
#define AL_WEBHOOK_TIMEOUT_MS 10000 /* per attempt */

/* Each callback is signed with its tenant's own key: the first line of
 * secrets_dir/<tenant> (a tenant without one gets no callback: never one
 * signed with another's key, never an unsigned one). Without secrets_dir,
 * secret signs every tenant's (one tenant, or tenants that trust each
 * other), or none when NULL. Free with wk_webhooks_free. */
struct wk_webhooks *wk_webhooks_new(struct event_base *base, const char *secret,
				    const char *secrets_dir);
/* Queue a POST of body (copied) to url with headers X-Airlock-Job and
 * X-Airlock-Signature: sha256=<hex HMAC of the body with tenant's key>. allow: the tier's
 * callback_hosts (copied): an internal address (loopback, private,
 * link-local, metadata...) is connected to only when allow names it
 * (al_callback_addr_ok); no proxy, no redirects. */
int wk_webhooks_post(struct wk_webhooks *wh, const char *url, const char *job_id,
		     const char *tenant, const void *body, size_t len, char *const *allow,
		     size_t nallow, struct al_err *err);
/* Number of callbacks not yet delivered or given up. */
int wk_webhooks_inflight(const struct wk_webhooks *wh);
void wk_webhooks_free(struct wk_webhooks *wh);

#endif
