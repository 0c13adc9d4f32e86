/* api.c - the gateway's endpoints (docs/api.md). One struct req per HTTP
 * request, alive until it is answered; every Redis step is asynchronous on
 * the gateway's loop (common/aconn.h). A long poll (a wait, a run, a live
 * output stream) holds a connection of its own for its life (XREAD BLOCK
 * blocks it), from a pool that grows to GW_WAITERS_MAX, of which
 * one tenant may hold its share (--polls-per-tenant) at most. */
#include <errno.h>
#include <stdarg.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include <sys/random.h>

#include "../proto/chunk.h"
#include "../proto/json.h"
#include "../common/log.h"
#include "../proto/contract.h"
#include "../proto/result.h"
#include "gw.h"
#include "req.h"
#include "../common/clock.h"

static void on_client_gone(struct evhttp_connection *evcon, void *arg)
{
	struct req *q = arg;

	(void)evcon;
	q->r = NULL; /* answered never; freed when its Redis step returns */
}

static bool id_ok(const char *s, size_t n)
{
	if (n == 0 || n > AL_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-",
			    s[i]))
			return false;
	return true;
}

static uint64_t query_ms(const struct evkeyvalq *qs, const char *name, bool *bad)
{
	const char *v = evhttp_find_header(qs, name);
	char *end;
	unsigned long long n;

	if (!v)
		return 0;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end || !*v || v[0] == '-')
		*bad = true;
	return n;
}

static void metrics(struct req *q)
{
	const struct gw_stats *s = &q->g->st;
	struct evbuffer *b = evbuffer_new();

	if (!b) {
		gw_reply_error(q, 500, "out of memory");
		return;
	}
	evbuffer_add_printf(b,
			    "# TYPE airlock_gateway_requests_total counter\n"
			    "airlock_gateway_requests_total %llu\n"
			    "# TYPE airlock_gateway_responses_total counter\n",
			    (unsigned long long)s->requests);
	for (int c = 1; c < 6; c++)
		evbuffer_add_printf(b, "airlock_gateway_responses_total{code=\"%dxx\"} %llu\n", c,
				    (unsigned long long)s->by_code[c]);
	evbuffer_add_printf(b,
			    "# TYPE airlock_gateway_bytes_in_total counter\n"
			    "airlock_gateway_bytes_in_total %llu\n"
			    "# TYPE airlock_gateway_bytes_out_total counter\n"
			    "airlock_gateway_bytes_out_total %llu\n"
			    "# TYPE airlock_gateway_jobs_submitted_total counter\n"
			    "airlock_gateway_jobs_submitted_total %llu\n"
			    "# TYPE airlock_gateway_unauthorized_total counter\n"
			    "airlock_gateway_unauthorized_total %llu\n"
			    "# TYPE airlock_gateway_idempotency_conflicts_total counter\n"
			    "airlock_gateway_idempotency_conflicts_total %llu\n",
			    (unsigned long long)s->bytes_in, (unsigned long long)s->bytes_out,
			    (unsigned long long)s->submitted, (unsigned long long)s->unauthorized,
			    (unsigned long long)s->idem_conflicts);
	gw_reply_send(q, 200, "text/plain; version=0.0.4", evbuffer_pullup(b, -1),
		      evbuffer_get_length(b));
	evbuffer_free(b);
}

/* ---- routes ---- */

/* /healthz: is Redis reachable (no key needed) */
static void serve_healthz(struct req *q, struct evkeyvalq *qs)
{
	bool up = al_aconn_is_up(q->g->cmd);

	(void)qs;
	gw_reply_json(q, up ? 200 : 503,
		      json_pack("{s:s, s:b}", "status", up ? "ok" : "redis down", "redis", up));
}

static void serve_metrics(struct req *q, struct evkeyvalq *qs)
{
	(void)qs;
	metrics(q);
}

/* POST /v1/jobs and /v1/run: the body is the job */
static void serve_submit(struct req *q, struct evkeyvalq *qs)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(q->r);
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(q->r));
	bool bad = false, run = !strcmp(path, "/v1/run");
	uint64_t wait_ms = query_ms(qs, "wait", &bad);
	size_t len = evbuffer_get_length(in);
	const char *body = (const char *)evbuffer_pullup(in, -1);
	const char *ctype =
	    evhttp_find_header(evhttp_request_get_input_headers(q->r), "Content-Type");

	if (bad) {
		gw_reply_error(q, 400, "wait: expected milliseconds");
		return;
	}
	q->kind = K_SUBMIT;
	gw_submit(q, body ? body : "", len, ctype && strstr(ctype, "msgpack"), run, wait_ms);
}

/* GET /v1/jobs/{id} (the result or the state), DELETE (cancel) */
static void serve_job(struct req *q, struct evkeyvalq *qs)
{
	(void)qs;
	q->kind = evhttp_request_get_command(q->r) == EVHTTP_REQ_DELETE ? K_CANCEL : K_GET;
	gw_with_owned_job(q);
}

/* GET /v1/jobs/{id}/wait?timeout_ms= */
static void serve_wait(struct req *q, struct evkeyvalq *qs)
{
	bool bad = false;
	uint64_t ms = query_ms(qs, "timeout_ms", &bad);

	if (bad) {
		gw_reply_error(q, 400, "timeout_ms: expected milliseconds");
		return;
	}
	q->kind = K_WAIT;
	q->deadline_ms = al_mono_ms() + (ms ? (ms > GW_WAIT_MAX_MS ? GW_WAIT_MAX_MS : ms) : 30000);
	q->code_if_pending = 202;
	gw_with_owned_job(q);
}

/* GET /v1/jobs/{id}/output: Server-Sent Events, from Last-Event-ID */
static void serve_output(struct req *q, struct evkeyvalq *qs)
{
	const char *after =
	    evhttp_find_header(evhttp_request_get_input_headers(q->r), "Last-Event-ID");

	if (!after)
		after = evhttp_find_header(qs, "after");
	snprintf(q->last, sizeof(q->last), "%s", after ? after : "0");
	if (!gw_entry_id_ok(q->last)) {
		gw_reply_error(q, 400,
			       "Last-Event-ID: expected an event id (MS-SEQ, as sent) or 0");
		return;
	}
	q->kind = K_OUTPUT;
	gw_with_owned_job(q);
}

/* The routes: a path (with_id: "/v1/jobs/" then a job id, then suffix),
 * whether it takes a tenant's key, the methods it takes, its handler. A
 * request no route matches is 404; one with another method, 405. */
static const struct route {
	const char *path;
	bool with_id;
	const char *suffix; /* with_id: what follows the id ("" for the job itself); ending
			     * in '/': a prefix, the rest of the path a file's (q->tail) */
	bool key;	    /* needs an API key (its tenant is the job's) */
	int methods;	    /* EVHTTP_REQ_* */
	const char *takes;  /* the methods, for 405's message */
	void (*serve)(struct req *q, struct evkeyvalq *qs);
} routes[] = {
    {"/healthz", false, NULL, false, EVHTTP_REQ_GET, "GET", serve_healthz},
    {"/metrics", false, NULL, false, EVHTTP_REQ_GET, "GET", serve_metrics},
    {"/v1/jobs", false, NULL, true, EVHTTP_REQ_POST, "POST", serve_submit},
    {"/v1/run", false, NULL, true, EVHTTP_REQ_POST, "POST", serve_submit},
    {"/v1/jobs/", true, "", true, EVHTTP_REQ_GET | EVHTTP_REQ_DELETE, "GET or DELETE", serve_job},
    {"/v1/jobs/", true, "/wait", true, EVHTTP_REQ_GET, "GET", serve_wait},
    {"/v1/jobs/", true, "/output", true, EVHTTP_REQ_GET, "GET", serve_output},
    {"/v1/sessions", false, NULL, true, EVHTTP_REQ_POST, "POST", gw_serve_session_open},
    {"/v1/sessions/", true, "", true, EVHTTP_REQ_DELETE | EVHTTP_REQ_GET, "GET or DELETE",
     gw_serve_session_call},
    {"/v1/sessions/", true, "/calls", true, EVHTTP_REQ_POST, "POST", gw_serve_session_call},
    {"/v1/sessions/", true, "/exec", true, EVHTTP_REQ_POST, "POST", gw_serve_session_call},
    {"/v1/sessions/", true, "/run_python", true, EVHTTP_REQ_POST, "POST", gw_serve_session_call},
    {"/v1/sessions/", true, "/files", true, EVHTTP_REQ_GET, "GET", gw_serve_session_call},
    {"/v1/sessions/", true, "/files/", true, EVHTTP_REQ_GET | EVHTTP_REQ_PUT, "GET or PUT",
     gw_serve_session_call},
    {"/v1/sessions/", true, "/calls/", true, EVHTTP_REQ_GET | EVHTTP_REQ_DELETE, "GET or DELETE",
     gw_serve_session_result},
};

/* The route of path, its job id into id (with_id routes) and what follows
 * a prefix suffix into tail; NULL if none. */
static const struct route *route_of(const char *path, char id[AL_ID_MAX + 1], const char **tail)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const struct route *rt = &routes[i];
		size_t n = strlen(rt->path);
		const char *end;

		if (!rt->with_id) {
			if (!strcmp(path, rt->path))
				return rt;
			continue;
		}
		if (strncmp(path, rt->path, n))
			continue;
		end = strchr(path + n, '/');
		end = end ? end : path + strlen(path);
		if (!id_ok(path + n, (size_t)(end - path - (ptrdiff_t)n)))
			continue;
		if (*rt->suffix && rt->suffix[strlen(rt->suffix) - 1] == '/') {
			if (strncmp(end, rt->suffix, strlen(rt->suffix)) ||
			    !end[strlen(rt->suffix)])
				continue;
			*tail = end + strlen(rt->suffix);
		} else if (strcmp(end, rt->suffix)) {
			continue;
		}
		snprintf(id, AL_ID_MAX + 1, "%.*s", (int)(end - path - (ptrdiff_t)n), path + n);
		return rt;
	}
	return NULL;
}

void gw_on_request(struct evhttp_request *r, void *arg)
{
	struct gw *g = arg;
	struct req *q = calloc(1, sizeof(*q));
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(r);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL, *query;
	struct evbuffer *in = evhttp_request_get_input_buffer(r);
	struct evkeyvalq qs = {0};
	const struct route *rt;
	struct al_err why = {0};
	int refused;

	g->st.requests++;
	g->st.bytes_in += evbuffer_get_length(in);
	if (!q) {
		evhttp_send_error(r, 500, "out of memory");
		return;
	}
	q->g = g;
	q->r = r;
	evhttp_connection_set_closecb(evhttp_request_get_connection(r), on_client_gone, q);
	if ((refused = gw_conn_request(g, r, &why))) {
		gw_reply_error(q, refused, "%s", why.msg);
		return;
	}
	if (!path) {
		gw_reply_error(q, 400, "a request without a path");
		return;
	}
	rt = route_of(path, q->id, &q->tail);
	/* under /v1/ the key comes first: no endpoint is told to a stranger */
	if ((rt && rt->key) || (!rt && !strncmp(path, "/v1/", 4))) {
		if (!(q->t = gw_auth(g, evhttp_find_header(evhttp_request_get_input_headers(r),
							   "Authorization")))) {
			g->st.unauthorized++;
			evhttp_add_header(evhttp_request_get_output_headers(r), "WWW-Authenticate",
					  "Bearer realm=\"airlock\"");
			gw_reply_error(q, 401,
				       "a missing or unknown API key (Authorization: Bearer KEY)");
			return;
		}
		snprintf(q->tenant, sizeof(q->tenant), "%s", q->t->name);
	}
	if (!rt) {
		gw_reply_error(q, 404, "no such endpoint: %s (see docs/api.md)", path);
		return;
	}
	if (!(evhttp_request_get_command(r) & rt->methods)) {
		gw_reply_error(q, 405, "%s takes %s", path, rt->takes);
		return;
	}
	query = evhttp_uri_get_query(uri);
	if (query && evhttp_parse_query_str(query, &qs)) {
		gw_reply_error(q, 400, "a malformed query string");
		return;
	}
	rt->serve(q, &qs);
	evhttp_clear_headers(&qs);
}
