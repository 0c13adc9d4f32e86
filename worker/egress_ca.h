/* egress_ca.h - the worker's own certificate authority for the egress
 * cache over https (a tier's egress: {cache_https: true}). Its certificate
 * joins the trust bundle of every job with egress on such a tier; its key
 * never leaves the worker (STATE/egress-ca/, root's, 0600, never mounted
 * into a sandbox). When the proxy ends a job's CONNECT itself, it shows the
 * job a leaf for the host the job asked for, signed here, and opens its own
 * TLS to the real server, verified against the host's trust store and the
 * tier's egress.ca_file. One per worker process. */
#ifndef AL_WORKER_EGRESS_CA_H
#define AL_WORKER_EGRESS_CA_H

#include <openssl/ssl.h>
#include <stdbool.h>

#include "../proto/err.h"

/* Load the CA in dir (made 0700 with what is above it, if absent), or make one there when there
 * is none or it is unreadable or ends within 30 days (a new key, a new
 * certificate; jobs started after get it). Once per process; a second call
 * is a no-op. 0, or fills err (AL_ESYS, AL_ENOMEM). */
int wk_egress_ca_open(const char *dir, struct al_err *err);
struct al_policy;
/* wk_egress_ca_open on STATE/egress-ca (state_dir NULL: /var/lib/airlock)
 * when a tier of pol has egress.cache_https; else nothing. 0, or err. */
int wk_egress_ca_for(const struct al_policy *pol, const char *state_dir, struct al_err *err);
/* The CA certificate's PEM file (for the job's bundle), or NULL before
 * wk_egress_ca_open succeeded. */
const char *wk_egress_ca_file(void);
/* A server-side SSL for the job's end of an intercepted tunnel to host (a
 * name, or an address literal when literal), with a leaf that names it
 * (made once per host, kept for the process, valid for 7 days from its
 * making). The caller frees it (SSL_free, or with its bufferevent). NULL
 * with err filled. */
SSL *wk_egress_ca_accept(const char *host, bool literal, struct al_err *err);
/* A client-side SSL to the real server: verified (chain and name; SNI for
 * a name) against the host's default trust store and ca_file when not
 * NULL (a tier's egress.ca_file). The caller frees it. NULL with err. */
SSL *wk_egress_ca_connect(const char *host, bool literal, const char *ca_file, struct al_err *err);

#endif
