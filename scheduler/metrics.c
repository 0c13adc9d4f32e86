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

/* One reply the snapshot waits for: what it is, and for whom. */
enum snap_kind {
	SNAP_QUEUE,
	SNAP_STATS,
	SNAP_WORKERS,
	SNAP_DLQ,
	SNAP_DELAYED,
	SNAP_HKEYS,
	SNAP_HIST
};

struct snap_part {
	struct snap *sn;
	enum snap_kind kind;
	char tier[AL_ID_MAX + 1]; /* SNAP_QUEUE, SNAP_HIST */
	char band[8];		  /* SNAP_QUEUE */
	char backend[32];	  /* SNAP_HIST */
};

static void on_snap(redisAsyncContext *ac, void *reply, void *priv);

/* Ask cmd (argv, or a script call) for one part of the snapshot. */
static void snap_ask(struct snap *sn, struct snap_part *p, struct al_call *call)
{
	p->sn = sn;
	sn->outstanding++;
	if (al_aconn_send(sn->s->cmd, call, on_snap, p)) {
		sn->outstanding--;
		free(p);
	}
}

/* TRIM's reply: {trimmed, lag, pending} */
static void snap_queue(struct snap *sn, const struct snap_part *p, redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
	    r->element[1]->type != REDIS_REPLY_INTEGER)
		return;
	evbuffer_add_printf(sn->out, "airlock_queue_depth{tier=\"%s\",band=\"%s\"} %lld\n", p->tier,
			    p->band, r->element[1]->integer);
	evbuffer_add_printf(sn->out, "airlock_jobs_running{tier=\"%s\",band=\"%s\"} %lld\n",
			    p->tier, p->band, r->element[2]->integer);
}

static void snap_stats(struct snap *sn, const struct snap_part *p, redisReply *r)
{
	(void)p;
	if (r->type != REDIS_REPLY_ARRAY)
		return;
	for (size_t i = 0; i + 1 < r->elements; i += 2) {
		const char *k = r->element[i]->str, *v = r->element[i + 1]->str;

		if (!strncmp(k, "status:", 7))
			evbuffer_add_printf(sn->out, "airlock_jobs_total{status=\"%s\"} %s\n",
					    k + 7, v);
		else if (!strcmp(k, "reclaimed"))
			evbuffer_add_printf(sn->out, "airlock_reclaimed_total %s\n", v);
		else if (!strcmp(k, "retries"))
			evbuffer_add_printf(sn->out, "airlock_retries_total %s\n", v);
	}
}

static void snap_workers(struct snap *sn, const struct snap_part *p, redisReply *r)
{
	(void)p;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 6)
		return;
	evbuffer_add_printf(sn->out, "airlock_workers_live %lld\n", r->element[0]->integer);
	evbuffer_add_printf(sn->out, "airlock_slots_busy %lld\n", r->element[1]->integer);
	evbuffer_add_printf(sn->out, "airlock_slots_free %lld\n",
			    r->element[2]->integer - r->element[1]->integer);
	evbuffer_add_printf(sn->out, "airlock_jobs_held %lld\n", r->element[3]->integer);
	/* workers with a backend that stopped taking jobs (set-up failing) */
	evbuffer_add_printf(sn->out, "airlock_workers_paused %lld\n", r->element[4]->integer);
	/* live workers whose policy is not this scheduler's (a reload missed) */
	evbuffer_add_printf(sn->out, "airlock_workers_policy_mismatch %lld\n",
			    r->element[5]->integer);
}

static void snap_count(struct snap *sn, const struct snap_part *p, redisReply *r)
{
	if (r->type == REDIS_REPLY_INTEGER)
		evbuffer_add_printf(sn->out, "%s %lld\n",
				    p->kind == SNAP_DLQ ? "airlock_dead_letters"
							: "airlock_retries_waiting",
				    r->integer);
}

/* The latency histograms' keys (the workers' registry, al:hists): one
 * HGETALL each. */
static void snap_hkeys(struct snap *sn, const struct snap_part *p, redisReply *r)
{
	(void)p;
	if (r->type != REDIS_REPLY_ARRAY)
		return;
	for (size_t i = 0; i < r->elements; i++) {
		struct snap_part *q;
		struct al_call c;

		if (r->element[i]->type != REDIS_REPLY_STRING || !(q = calloc(1, sizeof(*q))))
			continue;
		q->kind = SNAP_HIST;
		if (sscanf(r->element[i]->str, "al:hist:%64[^:]:%31s", q->tier, q->backend) != 2) {
			free(q);
			continue;
		}
		al_hash_all_call(&c, r->element[i]->str);
		snap_ask(sn, q, &c);
		al_call_free(&c);
	}
}

/* The sum of the fields of hash reply r named name (0 when none). */
static double hash_field(const redisReply *r, const char *name)
{
	double v = 0;

	for (size_t i = 0; i + 1 < r->elements; i += 2)
		if (!strcmp(r->element[i]->str, name))
			v += atof(r->element[i + 1]->str);
	return v;
}

/* al:hist:<tier>:<backend> -> cumulative Prometheus histograms. */
static void snap_hist(struct snap *sn, const struct snap_part *p, redisReply *r)
{
	static const char *const bounds[] = {"5",     "10",    "25",   "50",   "100",
					     "250",   "500",   "1000", "2500", "5000",
					     "10000", "30000", "60000"};
	const size_t nb = sizeof(bounds) / sizeof(bounds[0]);

	if (r->type != REDIS_REPLY_ARRAY)
		return;
	for (int kind = 0; kind < 2; kind++) {
		const char *name = kind ? "run" : "wait";
		const char *metric = kind ? "airlock_run_seconds" : "airlock_queue_wait_seconds";
		char want[48];
		long long cum = 0;

		for (size_t bi = 0; bi < nb; bi++) {
			snprintf(want, sizeof(want), "%s_in_%s", name, bounds[bi]);
			cum += (long long)hash_field(r, want);
			evbuffer_add_printf(
			    sn->out, "%s_bucket{tier=\"%s\",backend=\"%s\",le=\"%g\"} %lld\n",
			    metric, p->tier, p->backend, atof(bounds[bi]) / 1000, cum);
		}
		snprintf(want, sizeof(want), "%s_in_inf", name);
		cum += (long long)hash_field(r, want);
		evbuffer_add_printf(sn->out,
				    "%s_bucket{tier=\"%s\",backend=\"%s\",le=\"+Inf\"} %lld\n",
				    metric, p->tier, p->backend, cum);
		evbuffer_add_printf(sn->out, "%s_count{tier=\"%s\",backend=\"%s\"} %lld\n", metric,
				    p->tier, p->backend, cum);
		snprintf(want, sizeof(want), "%s_sum_ms", name);
		evbuffer_add_printf(sn->out, "%s_sum{tier=\"%s\",backend=\"%s\"} %g\n", metric,
				    p->tier, p->backend, hash_field(r, want) / 1000);
	}
}

static void (*const snap_handlers[])(struct snap *, const struct snap_part *, redisReply *) = {
    [SNAP_QUEUE] = snap_queue, [SNAP_STATS] = snap_stats,   [SNAP_WORKERS] = snap_workers,
    [SNAP_DLQ] = snap_count,   [SNAP_DELAYED] = snap_count, [SNAP_HKEYS] = snap_hkeys,
    [SNAP_HIST] = snap_hist,
};

static void on_snap(redisAsyncContext *ac, void *reply, void *priv)
{
	struct snap_part *p = priv;
	struct snap *sn = p->sn;

	(void)ac;
	if (reply)
		snap_handlers[p->kind](sn, p, reply);
	free(p);
	if (--sn->outstanding == 0)
		snap_done(sn);
}

void sc_snapshot(struct sched *s)
{
	struct snap *sn = calloc(1, sizeof(*sn));

	if (!sn || !(sn->out = evbuffer_new())) {
		free(sn);
		return;
	}
	sn->s = s;
	sn->outstanding = 1; /* released at the end of this function */
	evbuffer_add_printf(sn->out, "airlock_policy_info{policy=\"%s\"} 1\n", s->policy.hash);
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
			p->kind = SNAP_QUEUE;
			snprintf(p->tier, sizeof(p->tier), "%s", s->policy.tiers[i].name);
			snprintf(p->band, sizeof(p->band), "%s", al_band_name(b));
			al_trim_call(&c, al_key_queue(key, s->policy.tiers[i].name, b),
				     AL_GROUP_WORKERS);
			snap_ask(sn, p, &c);
			al_call_free(&c);
		}
	}
	{
		struct al_call c;

		al_trim_call(&c, AL_KEY_INTAKE, AL_GROUP_SCHEDULER);
		al_aconn_send(s->cmd, &c, sc_on_reply_log, (void *)"trim");
		al_call_free(&c);
	}
	static const enum snap_kind counts[] = {SNAP_STATS, SNAP_DLQ, SNAP_DELAYED, SNAP_HKEYS};

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		enum snap_kind k = counts[i];
		struct snap_part *p = calloc(1, sizeof(*p));
		struct al_call c;

		if (!p)
			continue;
		p->kind = k;
		if (k == SNAP_STATS)
			al_hash_all_call(&c, AL_KEY_STATS);
		else if (k == SNAP_DLQ)
			al_dlq_len_call(&c);
		else if (k == SNAP_DELAYED)
			al_retries_waiting_call(&c);
		else
			al_registry_call(&c, AL_KEY_HISTS);
		snap_ask(sn, p, &c);
		al_call_free(&c);
	}
	{
		struct snap_part *p = calloc(1, sizeof(*p));
		struct al_call c;

		/* the workers' summary (WORKERS, read only) */
		al_workers_call(&c, s->policy.hash);
		if (p) {
			p->kind = SNAP_WORKERS;
			snap_ask(sn, p, &c);
		}
		al_call_free(&c);
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
