/* main.c - airlock-gateway entry point (gw.h, docs/api.md). */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/opt.h"
#include "gw.h"

static struct event_base *stop_base;

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	event_base_loopexit(stop_base, NULL);
}

/* SIGHUP: the key file again. New, revoked and rotated keys hold from the
 * next request; requests already let in (a stream) run on. */
static const char *keys_path;

static void on_hup(evutil_socket_t fd, short what, void *arg)
{
	struct gw *g = arg;
	struct al_err err = {0};
	size_t before = g->nkeys;

	(void)fd;
	(void)what;
	if (gw_keys_load(g, keys_path, &err))
		al_log("error", "keys_reload",
		       "result=refused keys=%zu error=\"%s\" (the keys before it stay; fix the "
		       "file and send SIGHUP again)",
		       before, err.msg);
	else
		al_log("info", "keys_reload", "result=ok keys=%zu was=%zu file=%s", g->nkeys,
		       before, keys_path);
}

static SSL_CTX *tls_ctx(const char *cert, const char *key)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		char e[256];

		ERR_error_string_n(ERR_get_error(), e, sizeof(e));
		fprintf(stderr, "airlock-gateway: TLS with %s and %s: %s\n", cert, key, e);
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static int hash_key(void)
{
	char key[4096], out[72];
	size_t n = fread(key, 1, sizeof(key), stdin);

	while (n && (key[n - 1] == '\n' || key[n - 1] == '\r'))
		n--;
	if (n < 16) {
		fputs("airlock-gateway --hash-key: a key of at least 16 bytes on stdin\n", stderr);
		return 2;
	}
	gw_hash_text(key, n, out);
	puts(out);
	return 0;
}

/* The connection cap within the descriptor limit (raised to its hard
 * limit first): every connection and every long-poll Redis connection is a
 * descriptor, and an accept() that fails for want of one serves nobody. */
static int conns_fit(struct gw *g)
{
	struct rlimit rl;
	unsigned long room;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	room = rl.rlim_cur > GW_WAITERS_MAX + 64 ? (unsigned long)rl.rlim_cur - GW_WAITERS_MAX - 64
						 : 0;
	if (!g->max_conns)
		g->max_conns = room < GW_CONNS_MAX ? (unsigned)room : GW_CONNS_MAX;
	if (g->max_conns < 16 || g->max_conns > room) {
		fprintf(stderr,
			"airlock-gateway: --max-connections %u does not fit the descriptor limit "
			"(nofile %lu, of which %d are for long polls and 64 for the rest): raise "
			"LimitNOFILE or lower --max-connections (at least 16)\n",
			g->max_conns, (unsigned long)rl.rlim_cur, GW_WAITERS_MAX);
		return 2;
	}
	return 0;
}

/* Every setting, from AIRLOCK_<OPTION> or a flag (common/opt.h); the
 * numbers then go into struct gw. */
struct settings {
	const char *redis, *keys, *listen, *cert, *key, *result_ttl;
	uint64_t max_body;
	unsigned max_conns, header_s, polls_per_tenant;
	bool hash_key, help;
};

#define S(f) offsetof(struct settings, f)
static const struct al_opt opts[] = {
    {"redis", AL_OPT_STR, S(redis), 0, 0, 0, NULL, "URL",
     "Redis (redis://, rediss:// or unix:///path.sock)"},
    {"keys", AL_OPT_STR, S(keys), 0, 0, 0, NULL, "FILE",
     "API keys: lines \"TENANT sha256:HEX\" (only hashes)"},
    {"listen", AL_OPT_STR, S(listen), 0, 0, 0, NULL, "HOST:PORT",
     "where to serve (default 127.0.0.1:8088)"},
    {"tls-cert", AL_OPT_STR, S(cert), 0, 0, 0, NULL, "FILE",
     "serve HTTPS with this certificate (PEM) ..."},
    {"tls-key", AL_OPT_STR, S(key), 0, 0, 0, NULL, "FILE", "... and key"},
    {"max-body", AL_OPT_U64, S(max_body), 1, 1ull << 30, 0, NULL, "BYTES",
     "larger request bodies get 413 (default 3 MiB)"},
    {"max-connections", AL_OPT_UINT, S(max_conns), 1, 1000000, 0, NULL, "N",
     "connections at once; more wait in the backlog (default\n1024, fewer when the descriptor "
     "limit is low)"},
    {"header-timeout-s", AL_OPT_UINT, S(header_s), 1, 1000000, 0, NULL, "N",
     "a request's line and headers must be in within this\n(default 10; a long poll's own limit is "
     "its timeout)"},
    {"polls-per-tenant", AL_OPT_UINT, S(polls_per_tenant), 1, 1000000, 0, NULL, "N",
     "long polls (waits, runs, output streams) one tenant may\nhave open at once (default 256, of "
     "512 in all)"},
    {"result-ttl-s", AL_OPT_STR, S(result_ttl), 0, 0, 0, NULL, NULL, NULL}, /* refused */
    {"hash-key", AL_OPT_FLAG, S(hash_key), 0, 0, 0, NULL, NULL,
     "read a key on stdin, print its line's hash, and exit"},
    {"help", AL_OPT_FLAG, S(help), 0, 0, 0, NULL, NULL, "this text, and exit"},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
#undef S

static void usage(FILE *f)
{
	fputs("usage: airlock-gateway --redis URL --keys FILE [options]\n"
	      "       airlock-gateway --hash-key < KEYFILE   (prints the line's hash)\n",
	      f);
	al_opts_usage(f, opts);
	fputs("Each option may also come from AIRLOCK_<OPTION> (AIRLOCK_REDIS, AIRLOCK_KEYS,\n"
	      "AIRLOCK_TLS_CERT, ...); a flag wins. Give a Redis URL with a password as\n"
	      "AIRLOCK_REDIS (a systemd EnvironmentFile), not as a flag that ps shows.\n"
	      "SIGHUP rereads the key file (a file that does not load changes nothing);\n"
	      "SIGTERM stops.\n",
	      f);
}

int main(int argc, char **argv)
{
	static struct gw g; /* large: the key table and the waiters */
	struct settings o = {.listen = "127.0.0.1:8088",
			     .max_body = GW_BODY_MAX,
			     .header_s = GW_HEADER_S,
			     .polls_per_tenant = GW_POLLS_SHARE};
	struct al_err err = {0};
	struct event *sigterm, *sigint, *sighup;
	SSL_CTX *ctx = NULL;
	struct evhttp_bound_socket *bound;
	char host[128];
	int port;

	if (al_opts_parse(opts, &o, argc, argv, &err)) {
		fprintf(stderr, "airlock-gateway: %s (see airlock-gateway --help)\n", err.msg);
		return 2;
	}
	if (o.help) {
		usage(stdout);
		return 0;
	}
	if (o.hash_key)
		return hash_key();
	if (o.result_ttl) { /* a setting that would do nothing must not look like one */
		fputs("airlock-gateway: --result-ttl-s: no longer an option: the gateway writes "
		      "no result (a cancel is the scheduler's, kept for the policy's "
		      "result_ttl_s)\n",
		      stderr);
		return 2;
	}
	g.max_body = (size_t)o.max_body;
	g.max_conns = o.max_conns;
	g.header_s = o.header_s;
	g.polls_per_tenant = o.polls_per_tenant;
	if (!o.redis || !o.keys) {
		fputs("airlock-gateway: --redis and --keys are required\n", stderr);
		usage(stderr);
		return 2;
	}
	if (!o.cert != !o.key) {
		fputs("airlock-gateway: --tls-cert and --tls-key go together\n", stderr);
		return 2;
	}
	if (al_redis_url_parse(o.redis, &g.url, &err) || gw_keys_load(&g, o.keys, &err)) {
		fprintf(stderr, "airlock-gateway: %s\n", err.msg);
		return 2;
	}
	if (sscanf(o.listen, "%127[^:]:%d", host, &port) != 2 || port < 0 || port > 65535) {
		fprintf(stderr, "airlock-gateway: --listen: expected host:port, got \"%s\"\n",
			o.listen);
		return 2;
	}
	if (o.cert && !(ctx = tls_ctx(o.cert, o.key)))
		return 2;
	if (conns_fit(&g))
		return 2;
	g.tls = ctx;
	signal(SIGPIPE, SIG_IGN);
	stop_base = g.base = event_base_new();
	g.http = g.base ? evhttp_new(g.base) : NULL;
	if (!g.http || !(bound = evhttp_bind_socket_with_handle(g.http, host, (uint16_t)port))) {
		fprintf(stderr, "airlock-gateway: cannot listen on %s: %s\n", o.listen,
			strerror(errno));
		return 2;
	}
	g.listener = evhttp_bound_socket_get_listener(bound);
	gw_conns_init(&g);
	evhttp_set_max_body_size(g.http, (ev_ssize_t)g.max_body);
	/* every method reaches the routes, which answer 405 in JSON (an unknown
	 * one is 501, from conn.c); a chunked body over the limit is read to
	 * its end before libevent's 413 */
	evhttp_set_allowed_methods(g.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
					       EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD |
					       EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH |
					       EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT);
	evhttp_set_flags(g.http, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_gencb(g.http, gw_on_request, &g);
	g.cmd = al_aconn_new(g.base, &g.url, "cmd", NULL, NULL, &g);
	keys_path = o.keys;
	sigterm = evsignal_new(g.base, SIGTERM, on_stop, NULL);
	sigint = evsignal_new(g.base, SIGINT, on_stop, NULL);
	sighup = evsignal_new(g.base, SIGHUP, on_hup, &g);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	evsignal_add(sighup, NULL);
	al_log("info", "gateway_start",
	       "listen=%s tls=%s keys=%zu max_connections=%u header_timeout_s=%u "
	       "polls_per_tenant=%u",
	       o.listen, ctx ? "yes" : "no", g.nkeys, g.max_conns, g.header_s, g.polls_per_tenant);
	event_base_dispatch(g.base);
	al_log("info", "gateway_stop", "requests=%llu", (unsigned long long)g.st.requests);
	evhttp_free(g.http);
	al_aconn_free(g.cmd);
	for (size_t i = 0; i < g.nwaiters; i++)
		al_aconn_free(g.waiters[i].c);
	event_free(sigterm);
	event_free(sigint);
	event_free(sighup);
	event_base_free(g.base);
	SSL_CTX_free(ctx);
	return 0;
}
