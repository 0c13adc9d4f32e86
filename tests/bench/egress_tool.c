/* egress_tool.c - the worker's egress proxy (worker/proxy.c) on its own,
 * for the proxy's tests and benchmark:
 *   egress_tool PORT_FILE MAX_BYTES MAX_CONNS RULE...
 * listens on 127.0.0.1 (a free port, written to PORT_FILE), serves until
 * SIGTERM or SIGINT, then prints the transcript as JSON on stdout. */
#include <arpa/inet.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../proto/json.h"
#include "../../worker/proxy.h"

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopexit(arg, NULL);
}

int main(int argc, char **argv)
{
	struct al_egress_rule rules[AL_EGRESS_RULES_MAX];
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	struct al_result res = {.version = 1, .id = (char *)"egress-tool"};
	struct al_err err = {0};
	struct event_base *base;
	struct evdns_base *dns;
	struct event *term, *intr;
	struct wk_proxy *e;
	size_t n = 0;
	json_t *j;
	FILE *pf;
	int fd;

	if (argc < 5) {
		fprintf(stderr, "usage: egress_tool PORT_FILE MAX_BYTES MAX_CONNS RULE...\n");
		return 2;
	}
	for (int i = 4; i < argc && n < AL_EGRESS_RULES_MAX; i++, n++)
		if (al_egress_rule_parse(argv[i], &rules[n], &err)) {
			fprintf(stderr, "egress_tool: %s\n", err.msg);
			return 2;
		}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, 128) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len)) {
		perror("egress_tool: listen");
		return 1;
	}
	base = event_base_new();
	dns = base ? evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS) : NULL;
	if (!dns && base) /* no resolv.conf: names fail, addresses still work */
		dns = evdns_base_new(base, 0);
	e = dns ? wk_proxy_new(base, dns, fd, rules, n, strtoull(argv[2], NULL, 10),
			       (uint32_t)strtoul(argv[3], NULL, 10), 0, 0)
		: NULL;
	term = base ? evsignal_new(base, SIGTERM, on_signal, base) : NULL;
	intr = base ? evsignal_new(base, SIGINT, on_signal, base) : NULL;
	if (!e || !term || !intr || evsignal_add(term, NULL) || evsignal_add(intr, NULL)) {
		fprintf(stderr, "egress_tool: out of memory\n");
		return 1;
	}
	if (!(pf = fopen(argv[1], "w")) || fprintf(pf, "%u\n", ntohs(sin.sin_port)) < 0 ||
	    fclose(pf)) {
		perror("egress_tool: port file");
		return 1;
	}
	event_base_dispatch(base);
	wk_proxy_finish(e, &res);
	j = al_result_to_json(&res);
	json_dumpf(json_object_get(j, "egress"), stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(j);
	wk_proxy_free(e);
	res.id = NULL;
	al_result_free(&res);
	event_free(term);
	event_free(intr);
	evdns_base_free(dns, 0);
	event_base_free(base);
	return 0;
}
