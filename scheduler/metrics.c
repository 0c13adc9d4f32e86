/* metrics.c - metrics (see sched.h): a snapshot of queues, jobs and
 * workers once a second, served as Prometheus text and /healthz. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../common/aconn.h"
#include "../common/log.h"
#include "../proto/contract.h"
#include "../proto/result.h"
#include "../common/policy.h"
#include "sched.h"
#include "vmlease.h"

/* ---- metrics ---- */

struct snap {
	struct sched *s;
	int outstanding;
	struct evbuffer *out;
};

static void snap_done(struct snap *sn)
{
	struct sched *s = sn->s;
	size_t n = evbuffer_get_length(sn->out);

	free(s->metrics);
	s->metrics = malloc(n + 1);
	if (s->metrics) {
		evbuffer_remove(sn->out, s->metrics, n);
		s->metrics[n] = '\0';
	}
	evbuffer_free(sn->out);
	free(sn);
}

struct snap_part {
	struct snap *sn;
	char what[AL_KEY_MAX];
};

static void on_snap(redisAsyncContext *ac, void *reply, void *priv)
{
	struct snap_part *p = priv;
	struct snap *sn = p->sn;
	redisReply *r = reply;

	(void)ac;
	if (r && !strncmp(p->what, "q ", 2) && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
	    r->element[1]->type == REDIS_REPLY_INTEGER) {
		/* TRIM's reply: {trimmed, lag, pending} */
		char tier[AL_ID_MAX + 1], band[8];

		if (sscanf(p->what + 2, "%64[^ ] %7s", tier, band) == 2) {
			evbuffer_add_printf(sn->out,
					    "airlock_queue_depth{tier=\"%s\",band=\"%s\"} %lld\n",
					    tier, band, r->element[1]->integer);
			evbuffer_add_printf(sn->out,
					    "airlock_jobs_running{tier=\"%s\",band=\"%s\"} %lld\n",
					    tier, band, r->element[2]->integer);
		}
	} else if (r && !strcmp(p->what, "stats") && r->type == REDIS_REPLY_ARRAY) {
		for (size_t i = 0; i + 1 < r->elements; i += 2) {
			const char *k = r->element[i]->str, *v = r->element[i + 1]->str;

			if (!strncmp(k, "status:", 7))
				evbuffer_add_printf(
				    sn->out, "airlock_jobs_total{status=\"%s\"} %s\n", k + 7, v);
			else if (!strcmp(k, "reclaimed"))
				evbuffer_add_printf(sn->out, "airlock_reclaimed_total %s\n", v);
			else if (!strcmp(k, "retries"))
				evbuffer_add_printf(sn->out, "airlock_retries_total %s\n", v);
		}
	} else if (r && !strcmp(p->what, "workers") && r->type == REDIS_REPLY_ARRAY &&
		   r->elements == 4) {
		evbuffer_add_printf(sn->out, "airlock_workers_live %lld\n", r->element[0]->integer);
		evbuffer_add_printf(sn->out, "airlock_slots_busy %lld\n", r->element[1]->integer);
		evbuffer_add_printf(sn->out, "airlock_slots_free %lld\n",
				    r->element[2]->integer - r->element[1]->integer);
		evbuffer_add_printf(sn->out, "airlock_jobs_held %lld\n", r->element[3]->integer);
	} else if (r && !strcmp(p->what, "dlq") && r->type == REDIS_REPLY_INTEGER) {
		evbuffer_add_printf(sn->out, "airlock_dead_letters %lld\n", r->integer);
	} else if (r && !strcmp(p->what, "delayed") && r->type == REDIS_REPLY_INTEGER) {
		evbuffer_add_printf(sn->out, "airlock_retries_waiting %lld\n", r->integer);
	} else if (r && !strncmp(p->what, "h ", 2) && r->type == REDIS_REPLY_ARRAY) {
		/* al:hist:<tier>:<backend> -> cumulative histogram lines */
		static const char *const bounds[] = {"5",     "10",    "25",   "50",   "100",
						     "250",   "500",   "1000", "2500", "5000",
						     "10000", "30000", "60000"};
		char tier[AL_ID_MAX + 1], backend[32];

		if (sscanf(p->what + 2, "al:hist:%64[^:]:%31s", tier, backend) == 2) {
			for (int kind = 0; kind < 2; kind++) {
				const char *name = kind ? "run" : "wait";
				const char *metric =
				    kind ? "airlock_run_seconds" : "airlock_queue_wait_seconds";
				char want[48];

				long long cum = 0, total = 0;
				double sum = 0;

				for (size_t bi = 0; bi <= sizeof(bounds) / sizeof(bounds[0]);
				     bi++) {
					bool inf = bi == sizeof(bounds) / sizeof(bounds[0]);

					snprintf(want, sizeof(want), "%s_in_%s", name,
						 inf ? "inf" : bounds[bi]);
					for (size_t i = 0; i + 1 < r->elements; i += 2)
						if (!strcmp(r->element[i]->str, want))
							cum += atoll(r->element[i + 1]->str);
					if (inf)
						total = cum;
					else
						evbuffer_add_printf(sn->out,
								    "%s_bucket{tier=\"%s\",backend="
								    "\"%s\",le=\"%g\"} %lld\n",
								    metric, tier, backend,
								    atof(bounds[bi]) / 1000, cum);
				}
				snprintf(want, sizeof(want), "%s_sum_ms", name);
				for (size_t i = 0; i + 1 < r->elements; i += 2)
					if (!strcmp(r->element[i]->str, want))
						sum = atof(r->element[i + 1]->str) / 1000;
				evbuffer_add_printf(
				    sn->out,
				    "%s_bucket{tier=\"%s\",backend=\"%s\",le=\"+Inf\"} %lld\n",
				    metric, tier, backend, total);
				evbuffer_add_printf(sn->out,
						    "%s_count{tier=\"%s\",backend=\"%s\"} %lld\n",
						    metric, tier, backend, total);
				evbuffer_add_printf(sn->out,
						    "%s_sum{tier=\"%s\",backend=\"%s\"} %g\n",
						    metric, tier, backend, sum);
			}
		}
	} else if (r && !strcmp(p->what, "hkeys") && r->type == REDIS_REPLY_ARRAY) {
		for (size_t i = 0; i < r->elements; i++) {
			struct snap_part *q = calloc(1, sizeof(*q));
			const char *argv[] = {"HGETALL", r->element[i]->str};

			if (!q)
				continue;
			q->sn = sn;
			snprintf(q->what, sizeof(q->what), "h %s", r->element[i]->str);
			sn->outstanding++;
			if (al_aconn_cmd(sn->s->cmd, on_snap, q, 2, argv, NULL)) {
				sn->outstanding--;
				free(q);
			}
		}
	}
	free(p);
	if (--sn->outstanding == 0)
		snap_done(sn);
}

static const char lua_workers[] =
    "local live, busy, slots, held = 0, 0, 0, 0\n"
    "local all = redis.call('HGETALL', 'al:workers')\n"
    "for i = 1, #all, 2 do\n"
    "  if redis.call('EXISTS', 'al:worker:' .. all[i]) == 1 then\n"
    "    live = live + 1\n"
    "    busy = busy + (tonumber(string.match(all[i+1], '\"busy\":(%d+)')) or 0)\n"
    "    slots = slots + (tonumber(string.match(all[i+1], '\"slots\":(%d+)')) or 0)\n"
    "    held = held + (tonumber(string.match(all[i+1], '\"held\":(%d+)')) or 0)\n"
    "  end\n"
    "end\n"
    "return {live, busy, slots, held}\n";

void sc_snapshot(struct sched *s)
{
	struct snap *sn = calloc(1, sizeof(*sn));

	if (!sn || !(sn->out = evbuffer_new())) {
		free(sn);
		return;
	}
	sn->s = s;
	sn->outstanding = 1; /* released at the end of this function */
	evbuffer_add_printf(sn->out, "airlock_scheduler_admitted_total %llu\n",
			    (unsigned long long)s->admitted);
	evbuffer_add_printf(sn->out, "airlock_scheduler_rejected_total %llu\n",
			    (unsigned long long)s->rejected);
	evbuffer_add_printf(sn->out, "airlock_scheduler_reclaimed_total %llu\n",
			    (unsigned long long)s->reclaimed);
	evbuffer_add_printf(sn->out, "airlock_scheduler_worker_lost_total %llu\n",
			    (unsigned long long)s->lost);
	for (size_t i = 0; i < s->policy.ntiers; i++) {
		for (int b = 0; b < AL_BANDS; b++) {
			struct snap_part *p = calloc(1, sizeof(*p));
			char key[AL_KEY_MAX];
			struct al_call c;

			if (!p)
				continue;
			p->sn = sn;
			al_trim_call(&c, al_key_queue(key, s->policy.tiers[i].name, b),
				     AL_GROUP_WORKERS);
			snprintf(p->what, sizeof(p->what), "q %s %s", s->policy.tiers[i].name,
				 al_band_name(b));
			sn->outstanding++;
			if (al_aconn_send(s->cmd, &c, on_snap, p)) {
				sn->outstanding--;
				free(p);
			}
			al_call_free(&c);
		}
	}
	{
		struct al_call c;

		al_trim_call(&c, AL_KEY_INTAKE, AL_GROUP_SCHEDULER);
		al_aconn_send(s->cmd, &c, sc_on_reply_log, (void *)"trim");
		al_call_free(&c);
	}
	{
		static const char *const parts[][4] = {
		    {"stats", "HGETALL", AL_KEY_STATS, NULL},
		    {"dlq", "XLEN", AL_KEY_DLQ, NULL},
		    {"delayed", "ZCARD", AL_KEY_DELAYED, NULL},
		    {"hkeys", "KEYS", "al:hist:*", NULL},
		};

		for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
			struct snap_part *p = calloc(1, sizeof(*p));

			if (!p)
				continue;
			p->sn = sn;
			snprintf(p->what, sizeof(p->what), "%s", parts[i][0]);
			sn->outstanding++;
			if (al_aconn_cmd(s->cmd, on_snap, p, 2, &parts[i][1], NULL)) {
				sn->outstanding--;
				free(p);
			}
		}
	}
	{
		struct snap_part *p = calloc(1, sizeof(*p));
		const char *argv[] = {"EVAL", lua_workers, "0"};

		if (p) {
			p->sn = sn;
			snprintf(p->what, sizeof(p->what), "workers");
			sn->outstanding++;
			if (al_aconn_cmd(s->cmd, on_snap, p, 3, argv, NULL)) {
				sn->outstanding--;
				free(p);
			}
		}
	}
	if (--sn->outstanding == 0)
		snap_done(sn);
}

void sc_on_http(struct evhttp_request *req, void *arg)
{
	struct sched *s = arg;
	const char *uri = evhttp_request_get_uri(req);
	struct evbuffer *buf = evbuffer_new();
	bool ok;

	if (!buf) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	if (!strcmp(uri, "/metrics")) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
				  "text/plain; version=0.0.4");
		evbuffer_add_printf(buf, "airlock_redis_up %d\n", al_aconn_is_up(s->cmd) ? 1 : 0);
		evbuffer_add_printf(buf, "airlock_policy_tiers %zu\n", s->policy.ntiers);
		if (s->metrics)
			evbuffer_add(buf, s->metrics, strlen(s->metrics));
		evhttp_send_reply(req, 200, "OK", buf);
	} else if (!strcmp(uri, "/healthz")) {
		ok = al_aconn_is_up(s->cmd) && s->policy.ntiers > 0;
		evbuffer_add_printf(buf, "{\"redis\":%s,\"policy\":\"%s\",\"tiers\":%zu}\n",
				    al_aconn_is_up(s->cmd) ? "true" : "false", s->policy.source,
				    s->policy.ntiers);
		evhttp_send_reply(req, ok ? 200 : 503, ok ? "OK" : "Unavailable", buf);
	} else {
		evhttp_send_error(req, 404, "try /metrics or /healthz");
	}
	evbuffer_free(buf);
}
