/* main.c - airlock-scheduler: admission of submitted jobs against the
 * operator's policy, routing to per-tier ready queues by priority, retries
 * after their backoff, reclaiming the jobs of dead workers, deadlines, and
 * metrics over HTTP. Several schedulers may run at once: every step is a
 * consumer-group read or an atomic script, so none is done twice. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../common/aconn.h"
#include "../common/opt.h"
#include "../common/log.h"
#include "../proto/contract.h"
#include "../proto/result.h"
#include "../common/policy.h"
#include "sched.h"
#include "vmlease.h"
#include "../common/clock.h"

/* ---- loop ---- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct sched *s = arg;
	struct timeval tv = {0, TICK_MS * 1000};
	uint64_t t = sc_now_ms(s), mono = al_mono_ms();
	char now[24];

	(void)fd;
	(void)what;
	evtimer_add(s->tick, &tv);
	if (!al_aconn_is_up(s->cmd))
		return;
	snprintf(now, sizeof(now), "%llu", (unsigned long long)t);
	{
		struct al_call c;

		al_promote_call(&c, t, 500);
		al_aconn_send(s->cmd, &c, sc_on_reply_log, (void *)"promote");
		al_call_free(&c);
	}
	{
		const char *argv[] = {
		    "ZRANGEBYSCORE", AL_KEY_DEADLINES, "-inf", now, "LIMIT", "0", "500"};

		al_aconn_cmd(s->cmd, sc_on_due_deadlines, s, 7, argv, NULL);
	}
	if (mono - s->last_time_mono >= 1000)
		sc_read_time(s);
	if (mono - s->last_reclaim_ms >= s->policy.lease_ms / 4) {
		s->last_reclaim_ms = mono;
		sc_reclaim(s);
	}
	if (s->vms && mono - s->last_vm_ms >= 1000) {
		s->last_vm_ms = mono;
		if (!s->reconciled) {
			s->reconciled = true;
			sc_vmlease_reconcile(s->vms);
		}
		sc_vmlease_tick(s->vms, t);
	}
	if (mono - s->last_snapshot_ms >= 1000) { /* also trims the streams */
		struct al_call c;

		s->last_snapshot_ms = mono;
		/* this scheduler's policy, for `airlock stats` (named in
		 * al:schedulers when the connection came up) */
		al_scheduler_alive_call(&c, s->id, s->policy.hash, 5000);
		al_aconn_send(s->cmd, &c, NULL, NULL);
		al_call_free(&c);
		sc_snapshot(s);
	}
}

static void on_cmd_up(struct al_aconn *c, void *arg)
{
	struct sched *s = arg;
	struct al_call grp;
	const char *mine[] = {"XREADGROUP", "GROUP",   AL_GROUP_SCHEDULER, s->id, "COUNT",
			      "1000",	    "STREAMS", AL_KEY_INTAKE,	   "0"};

	(void)c;
	al_log("info", "redis_up", "scheduler=%s note=\"reclaiming after one lease\"", s->id);
	s->up_ms = al_mono_ms();
	al_xgroup_create_call(&grp, AL_KEY_INTAKE, AL_GROUP_SCHEDULER);
	al_aconn_send(s->cmd, &grp, NULL, NULL);
	al_call_free(&grp);
	al_registry_add_call(&grp, AL_KEY_SCHEDULERS, s->id); /* `airlock stats` finds it */
	al_aconn_send(s->cmd, &grp, NULL, NULL);
	al_call_free(&grp);
	for (size_t i = 0; i < s->policy.ntiers; i++) {
		/* the tiers' registry: `airlock stats` reads their queues (no KEYS) */
		al_registry_add_call(&grp, AL_KEY_TIERS, s->policy.tiers[i].name);
		al_aconn_send(s->cmd, &grp, NULL, NULL);
		al_call_free(&grp);
		for (int b = 0; b < AL_BANDS; b++) {
			char key[AL_KEY_MAX];

			al_xgroup_create_call(&grp, al_key_queue(key, s->policy.tiers[i].name, b),
					      AL_GROUP_WORKERS);
			al_aconn_send(s->cmd, &grp, NULL, NULL);
			al_call_free(&grp);
		}
	}
	/* Our own unfinished intake entries (the same scheduler id after a
	 * crash), once per run: after a reconnect, the admissions this run sent
	 * are still on their way (kept and sent again by the connection). */
	if (!s->read_own && al_aconn_cmd(s->cmd, sc_on_own_pending, s, 9, mine, NULL) == 0)
		s->read_own = true;
	sc_maybe_fetch(s);
}

static void on_fetch_up(struct al_aconn *c, void *arg)
{
	(void)c;
	sc_maybe_fetch(arg);
}

static void on_down(struct al_aconn *c, void *arg)
{
	struct sched *s = arg;

	if (c == s->fetch)
		s->fetching = false;
	al_log("warn", "redis_down", "conn=%s note=\"reconnecting\"",
	       c == s->cmd ? "cmd" : "fetch");
}

static void on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct sched *s = arg;
	struct al_policy fresh;
	struct al_err err = {0};

	(void)sig;
	(void)what;
	if (al_policy_load(s->policy_path, &fresh, &err)) {
		al_log("error", "policy_reload",
		       "result=refused error=\"%s\" note=\"the old policy stays in force\"",
		       err.msg);
		return;
	}
	al_policy_free(&s->policy);
	s->policy = fresh;
	al_log("info", "policy_reload", "result=ok policy=%s source=%s tiers=%zu", s->policy.hash,
	       s->policy.source, s->policy.ntiers);
	s->last_snapshot_ms = 0; /* the new hash out at the next tick */
	if (al_aconn_is_up(s->cmd))
		on_cmd_up(s->cmd, s);
}

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct sched *s = arg;

	(void)what;
	al_log("info", "stop", "signal=%d", (int)sig);
	s->stopping = true;
	event_base_loopexit(s->base, NULL);
}

/* Every setting, from AIRLOCK_<OPTION> or a flag (common/opt.h). */
struct settings {
	const char *redis, *policy, *listen, *id, *libvirt;
	bool check, help, version;
};

#define S(f) offsetof(struct settings, f)
static const struct al_opt opts[] = {
    {"redis", AL_OPT_STR, S(redis), 0, 0, 0, NULL, "URL", "redis://host:port or unix:///path.sock"},
    {"policy", AL_OPT_STR, S(policy), 0, 0, 0, NULL, "FILE",
     "the operator's policy (default built-in)"},
    {"listen", AL_OPT_STR, S(listen), 0, 0, 0, NULL, "H:P",
     "metrics and health over HTTP (default 127.0.0.1:9464; \"off\")"},
    {"id", AL_OPT_STR, S(id), 0, 0, 0, NULL, "NAME", "scheduler name (default host-pid)"},
    {"libvirt", AL_OPT_STR, S(libvirt), 0, 0, 0, NULL, "URI",
     "end service VMs' leases and reconcile this libvirt with Redis\n(run the scheduler on the VM "
     "host; default: no VM management)"},
    {"check", AL_OPT_FLAG, S(check), 0, 0, 0, NULL, NULL, "load the policy, report, and exit"},
    {"help", AL_OPT_FLAG, S(help), 0, 0, 0, NULL, NULL, "this text, and exit"},
    {"version", AL_OPT_FLAG, S(version), 0, 0, 0, NULL, NULL,
     "print the protocol version and exit"},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
#undef S

static void usage(FILE *f)
{
	fputs("usage: airlock-scheduler [options]\n"
	      "Options (also AIRLOCK_<NAME> in the environment; a flag wins):\n",
	      f);
	al_opts_usage(f, opts);
	fputs("SIGHUP reloads the policy (a file that does not load changes nothing);\n"
	      "SIGTERM stops.\n",
	      f);
}

int main(int argc, char **argv)
{
	struct sched s = {0};
	struct settings o = {.redis = "redis://127.0.0.1:6379", .listen = "127.0.0.1:9464"};
	const char *redis, *listen;
	struct al_err err = {0};

	if (al_opts_parse(opts, &o, argc, argv, &err)) {
		fprintf(stderr, "airlock-scheduler: %s (see airlock-scheduler --help)\n", err.msg);
		return 2;
	}
	if (o.help) {
		usage(stdout);
		return 0;
	}
	if (o.version) {
		printf("airlock-scheduler protocol %d\n", AL_PROTO_VERSION);
		return 0;
	}
	redis = o.redis;
	listen = o.listen;
	s.policy_path = o.policy;
	s.libvirt_uri = o.libvirt;
	if (o.id && strlen(o.id) >= sizeof(s.id)) {
		fprintf(stderr, "airlock-scheduler: --id: at most %zu characters\n",
			sizeof(s.id) - 1);
		return 2;
	}
	if (o.id)
		snprintf(s.id, sizeof(s.id), "%s", o.id);
	if (al_policy_load(s.policy_path, &s.policy, &err)) {
		fprintf(stderr, "airlock-scheduler: %s\n", err.msg);
		return 2;
	}
	if (o.check) {
		printf("policy %s: %zu tiers, %zu tenants\n", s.policy.source, s.policy.ntiers,
		       s.policy.ntenants);
		for (size_t i = 0; i < s.policy.ntiers; i++) {
			const struct al_tier_policy *t = &s.policy.tiers[i];

			printf("  tier %s -> %s", t->name, t->backend);
			if (t->oci_runtime)
				printf(" (%s%s%s)", t->oci_runtime,
				       t->oci_platform ? ", platform " : "",
				       t->oci_platform ? t->oci_platform : "");
			for (size_t k = 0; k < t->nimages; k++)
				printf("%s%s%s", k ? ", " : " (images: ", t->images[k],
				       !strcmp(t->images[k], t->image) ? " [default]" : "");
			printf("%s", t->nimages ? ")" : "");
			if (t->sessions.on)
				printf(" (sessions: %u per tenant, idle %llu s, life %llu s)",
				       t->sessions.max_per_tenant,
				       (unsigned long long)t->sessions.idle_ms / 1000,
				       (unsigned long long)t->sessions.max_life_ms / 1000);
			printf("\n");
		}
		al_policy_free(&s.policy);
		return 0;
	}
	if (al_redis_url_parse(redis, &s.url, &err)) {
		fprintf(stderr, "airlock-scheduler: %s\n", err.msg);
		return 2;
	}
	if (!s.id[0]) {
		char host[48] = "host";

		gethostname(host, sizeof(host) - 1);
		snprintf(s.id, sizeof(s.id), "%.40s-%d", host, (int)getpid());
	}
	signal(SIGPIPE, SIG_IGN);
	s.base = event_base_new();
	if (strcmp(listen, "off")) {
		char host[128];
		int port;

		if (sscanf(listen, "%127[^:]:%d", host, &port) != 2 || port < 0 || port > 65535) {
			fprintf(stderr,
				"airlock-scheduler: --listen: expected host:port, got \"%s\"\n",
				listen);
			return 2;
		}
		s.http = evhttp_new(s.base);
		if (!s.http || evhttp_bind_socket(s.http, host, (uint16_t)port)) {
			fprintf(stderr, "airlock-scheduler: cannot listen on %s: %s\n", listen,
				strerror(errno));
			return 2;
		}
		evhttp_set_gencb(s.http, sc_on_http, &s);
	}
	s.tick = evtimer_new(s.base, on_tick, &s);
	s.sighup = evsignal_new(s.base, SIGHUP, on_hup, &s);
	s.sigterm = evsignal_new(s.base, SIGTERM, on_stop, &s);
	s.sigint = evsignal_new(s.base, SIGINT, on_stop, &s);
	evsignal_add(s.sighup, NULL);
	evsignal_add(s.sigterm, NULL);
	evsignal_add(s.sigint, NULL);
	s.cmd = al_aconn_new(s.base, &s.url, "cmd", on_cmd_up, on_down, &s);
	s.fetch = al_aconn_new(s.base, &s.url, "fetch", on_fetch_up, on_down, &s);
	if (s.libvirt_uri) {
		s.vms = sc_vmlease_new(s.libvirt_uri, s.cmd, s.policy.result_ttl_ms, &err);
		if (!s.vms) {
			fprintf(stderr, "airlock-scheduler: --libvirt: %s\n", err.msg);
			return 2;
		}
	}
	on_tick(-1, 0, &s);
	al_log("info", "scheduler_start", "id=%s policy=%s source=%s tiers=%zu listen=%s", s.id,
	       s.policy.hash, s.policy.source, s.policy.ntiers, listen);
	event_base_dispatch(s.base);
	sc_vmlease_free(s.vms);
	al_aconn_free(s.cmd);
	al_aconn_free(s.fetch);
	if (s.http)
		evhttp_free(s.http);
	event_free(s.tick);
	event_free(s.sighup);
	event_free(s.sigterm);
	event_free(s.sigint);
	event_base_free(s.base);
	free(s.metrics);
	al_policy_free(&s.policy);
	free(s.beats);
	return 0;
}
