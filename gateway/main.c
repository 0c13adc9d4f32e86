/* main.c - airlock-gateway entry point (gw.h, docs/api.md). */
#include <errno.h>
#include <getopt.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/env.h"
#include "../common/log.h"
#include "gw.h"

static void usage(FILE *f)
{
	fputs("usage: airlock-gateway --redis URL --keys FILE [options]\n"
	      "       airlock-gateway --hash-key < KEYFILE   (prints the line's hash)\n"
	      "  --redis URL         Redis (redis://, rediss:// or unix:///path.sock)\n"
	      "  --keys FILE         API keys: lines \"TENANT sha256:HEX\" (only hashes)\n"
	      "  --listen HOST:PORT  where to serve (default 127.0.0.1:8088)\n"
	      "  --tls-cert FILE     serve HTTPS with this certificate (PEM) ...\n"
	      "  --tls-key FILE      ... and key\n"
	      "  --max-body BYTES    larger request bodies get 413 (default 3 MiB)\n"
	      "  --result-ttl-s N    how long a cancelled job's result is kept (default 86400)\n"
	      "  --max-connections N connections at once; more wait in the backlog (default\n"
	      "                      1024, fewer when the descriptor limit is low)\n"
	      "  --header-timeout-s N a request's line and headers must be in within this\n"
	      "                      (default 10; a long poll's own limit is its timeout)\n"
	      "  --polls-per-tenant N long polls (waits, runs, output streams) one tenant may\n"
	      "                      have open at once (default 256, of 512 in all)\n"
	      "Each option may also come from AIRLOCK_<OPTION> (AIRLOCK_REDIS, AIRLOCK_KEYS,\n"
	      "AIRLOCK_TLS_CERT, ...); a flag wins. Give a Redis URL with a password as\n"
	      "AIRLOCK_REDIS (a systemd EnvironmentFile), not as a flag that ps shows.\n",
	      f);
}

static struct event_base *stop_base;

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	event_base_loopexit(stop_base, NULL);
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

/* The path and address settings; the numbers go into struct gw. */
struct settings {
	const char *redis, *keys, *listen, *cert, *key;
};

/* One setting, from a flag or from its AIRLOCK_<OPTION> variable. */
static int set_opt(int c, const char *v, struct settings *o, struct gw *g)
{
	unsigned long long n;
	char *end;

	switch (c) {
	case 'r': o->redis = v; return 0;
	case 'k': o->keys = v; return 0;
	case 'l': o->listen = v; return 0;
	case 'c': o->cert = v; return 0;
	case 'K': o->key = v; return 0;
	default: break;
	}
	n = strtoull(v, &end, 10);
	if (*end || !*v || v[0] == '-' || n == 0 || (c != 'b' && c != 't' && n > 1000000)) {
		fprintf(stderr, "airlock-gateway: --%s: expected a positive number%s, got \"%s\"\n",
			c == 'b'   ? "max-body"
			: c == 't' ? "result-ttl-s"
			: c == 'C' ? "max-connections"
			: c == 'T' ? "header-timeout-s"
				   : "polls-per-tenant",
			c != 'b' && c != 't' ? " up to 1000000" : "", v);
		return 2;
	}
	switch (c) {
	case 'b': g->max_body = (size_t)n; break;
	case 't': g->result_ttl_ms = n * 1000; break;
	case 'C': g->max_conns = (unsigned)n; break;
	case 'T': g->header_s = (unsigned)n; break;
	default: g->polls_per_tenant = (unsigned)n;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"redis", required_argument, NULL, 'r'},
	    {"keys", required_argument, NULL, 'k'},
	    {"listen", required_argument, NULL, 'l'},
	    {"tls-cert", required_argument, NULL, 'c'},
	    {"tls-key", required_argument, NULL, 'K'},
	    {"max-body", required_argument, NULL, 'b'},
	    {"result-ttl-s", required_argument, NULL, 't'},
	    {"max-connections", required_argument, NULL, 'C'},
	    {"header-timeout-s", required_argument, NULL, 'T'},
	    {"polls-per-tenant", required_argument, NULL, 'P'},
	    {"hash-key", no_argument, NULL, 'H'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static struct gw g; /* large: the key table and the waiters */
	struct settings o = {.listen = "127.0.0.1:8088"};
	struct al_err err = {0};
	struct event *sigterm, *sigint;
	SSL_CTX *ctx = NULL;
	struct evhttp_bound_socket *bound;
	char host[128];
	int c, port;

	g.max_body = GW_BODY_MAX;
	g.result_ttl_ms = 86400000;
	g.header_s = GW_HEADER_S;
	g.polls_per_tenant = GW_POLLS_SHARE;
	/* AIRLOCK_<OPTION> first (env.h), then the flags */
	for (const struct option *op = opts; op->name; op++) {
		const char *v = op->has_arg ? al_opt_env(op->name, NULL) : NULL;

		if (v && set_opt(op->val, v, &o, &g))
			return 2;
	}
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'H': return hash_key();
		case 'h': usage(stdout); return 0;
		case '?': usage(stderr); return 2;
		default:
			if (set_opt(c, optarg, &o, &g))
				return 2;
		}
	}
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
	evhttp_set_allowed_methods(g.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE);
	evhttp_set_gencb(g.http, gw_on_request, &g);
	g.cmd = al_aconn_new(g.base, &g.url, "cmd", NULL, NULL, &g);
	sigterm = evsignal_new(g.base, SIGTERM, on_stop, NULL);
	sigint = evsignal_new(g.base, SIGINT, on_stop, NULL);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
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
	event_base_free(g.base);
	SSL_CTX_free(ctx);
	return 0;
}
