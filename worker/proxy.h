/* proxy.h - the egress proxy: one per job that was granted network
 * "egress", on the worker's event loop, outside every sandbox. It serves a
 * listening socket the backend made where only the job can reach it (inside
 * the job's network namespace), speaks what HTTP_PROXY / HTTPS_PROXY
 * clients speak (CONNECT host:port for TLS, absolute-URI requests for plain
 * HTTP), lets out only what the allow rules name (common/egress.h: names are
 * resolved here and every address checked before it is used), counts bytes
 * and connections against the caps, closes idle tunnels, and keeps a
 * transcript of every connection tried for the result. */
#ifndef AL_WORKER_PROXY_H
#define AL_WORKER_PROXY_H

#include <event2/dns.h>
#include <event2/event.h>

#include "../common/egress.h"
#include "../proto/result.h"

#define AL_EGRESS_IDLE_MS 60000 /* a tunnel silent both ways this long is closed */

struct wk_proxy;

#define AL_EGRESS_FDS_PER_TUNNEL 6 /* two sockets and two pipes (spliced) */

/* Serve listen_fd (taken: closed with the proxy) under rules (copied): a
 * TCP listener's connections are the clients; a unix listener's each hand
 * over one client socket (SCM_RIGHTS: a microVM's forwarder). Caps, 0 for
 * none: max_bytes both ways, max_connections tried in all, max_open
 * tunnels at once. NULL when out of memory. */
struct wk_proxy *wk_proxy_new(struct event_base *base, struct evdns_base *dns, int listen_fd,
			      const struct al_egress_rule *rules, size_t nrules, uint64_t max_bytes,
			      uint32_t max_connections, uint32_t max_open, uint64_t idle_ms);
/* A unix listener's connections are e's clients themselves (a runsc
 * sandbox's, whose relay connects to a socket file for each of its job's
 * connections), not handoffs of one. */
void wk_proxy_unix_clients(struct wk_proxy *e);
/* Keep what e's jobs fetch over plain HTTP (and https: wk_proxy_set_intercept) in dir (made, the
 * caller's: one per tenant and tier, never visible to a job) and serve a GET from it while fresh:
 * what is cacheable is in proxy_cache.c (cacheable_response); the least recently used entries go
 * past max_bytes. A hit is served only once the name resolved to an address the rules allow, as if
 * connecting. Hits and stores show in the transcript (its "why") and in info.egress_cache. 0, or -1
 * when out of memory. */
int wk_proxy_set_cache(struct wk_proxy *e, const char *dir, uint64_t max_bytes);
/* End the https of e's jobs here too, so that the cache (set first) keeps
 * what they fetch over TLS (proxy_tls.c, egress_ca.h: the worker's CA must
 * be open, and the job's bundle trust it); the servers' certificates are
 * checked against the host's store and ca_file (NULL: none). A CONNECT
 * whose client does not speak TLS stays a byte tunnel. 0, or -1 (no cache,
 * no CA, out of memory). */
int wk_proxy_set_intercept(struct wk_proxy *e, const char *ca_file);
/* The descriptors the tunnels of every proxy of this process may hold
 * together (0: no limit): past it a new tunnel is refused (503), so that
 * one job's connections can never leave another job without the
 * descriptors its sandbox's set-up needs. */
void wk_proxy_set_fd_budget(unsigned fds);
/* Close every tunnel and move the transcript into res->egress (a count of
 * what did not fit goes to info.egress_unlisted; res NULL: nowhere). */
void wk_proxy_finish(struct wk_proxy *e, struct al_result *res);
/* The transcript so far into res (a session's call's: the proxy serves
 * on); it starts again empty. */
void wk_proxy_transcript(struct wk_proxy *e, struct al_result *res);
void wk_proxy_free(struct wk_proxy *e);
/* For a sandbox that outlives its result (a service VM): what the
 * transcript holds so far goes into res; the proxy serves on, logging each
 * connection as an `egress` event tagged with the job's id, and frees itself after
 * ms. The caller lets go of e. */
void wk_proxy_keep(struct wk_proxy *e, struct al_result *res, uint64_t ms, const char *job);

#endif
