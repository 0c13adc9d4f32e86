/* gateway.c - the client library over the HTTP gateway (gateway.h):
 * libcurl, blocking, one connection kept alive. Results come as the
 * protocol's msgpack (Accept: application/msgpack), so they decode with
 * the same codec as in direct mode. */
#include "gateway.h"

#include "../proto/call.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "../proto/buf.h"
#include "../proto/mp.h"
#include "../proto/json.h"
#include "../common/clock.h"

#define POLL_MS 30000 /* one long poll at most this long */

struct al_gw {
	CURL *curl;
	struct curl_slist *hdr, *hdr_body; /* built once: auth, accept (+ content type) */
	char base[1024];
	char auth[1100];
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	return al_buf_append(arg, p, size * n) ? 0 : size * n;
}

struct al_gw *al_gw_open(const char *url, const char *token, struct al_err *err)
{
	struct al_gw *g;
	size_t n = strlen(url);

	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		al_err_set(err, AL_EINVAL, "--gateway %s: expected an http:// or https:// URL",
			   url);
		return NULL;
	}
	if (!token || !*token || strpbrk(token, "\r\n")) {
		al_err_set(err, AL_EINVAL,
			   "the gateway needs an API key: set AIRLOCK_TOKEN or --token-file FILE");
		return NULL;
	}
	if (!(g = calloc(1, sizeof(*g))) || !(g->curl = curl_easy_init())) {
		free(g);
		al_err_set(err, AL_ENOMEM, "out of memory");
		return NULL;
	}
	while (n && url[n - 1] == '/')
		n--;
	snprintf(g->base, sizeof(g->base), "%.*s", (int)n, url);
	snprintf(g->auth, sizeof(g->auth), "Authorization: Bearer %s", token);
	for (int i = 0; i < 2; i++) {
		struct curl_slist **l = i ? &g->hdr_body : &g->hdr, *h;

		h = curl_slist_append(*l, g->auth);
		h = h ? curl_slist_append(h, "Accept: application/msgpack, application/json")
		      : NULL;
		h = h && i ? curl_slist_append(h, "Content-Type: application/msgpack") : h;
		/* a body over 1 MiB goes at once: libcurl would ask "Expect:
		 * 100-continue" first, a round trip more (a second's wait
		 * behind a proxy that does not answer it) */
		h = h && i ? curl_slist_append(h, "Expect:") : h;
		if (!h) {
			al_gw_close(g);
			al_err_set(err, AL_ENOMEM, "out of memory");
			return NULL;
		}
		*l = h;
	}
	/* kept for every request: one connection, kept alive */
	curl_easy_setopt(g->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(g->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(g->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	return g;
}

void al_gw_close(struct al_gw *g)
{
	if (!g)
		return;
	curl_easy_cleanup(g->curl);
	curl_slist_free_all(g->hdr);
	curl_slist_free_all(g->hdr_body);
	memset(g->auth, 0, sizeof(g->auth));
	free(g);
}

/* One request; the status in *status, the body in out, whether it is
 * msgpack in *mp. AL_EREDIS when the gateway could not be reached. */
static int http(struct al_gw *g, const char *method, const char *path, const struct al_buf *body,
		uint64_t timeout_ms, long *status, struct al_buf *out, bool *mp, struct al_err *err)
{
	char url[1400];
	char *ctype = NULL;
	CURLcode rc;

	snprintf(url, sizeof(url), "%s%s", g->base, path);
	al_buf_reset(out);
	curl_easy_setopt(g->curl, CURLOPT_URL, url);
	curl_easy_setopt(g->curl, CURLOPT_HTTPHEADER, body ? g->hdr_body : g->hdr);
	curl_easy_setopt(g->curl, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(g->curl, CURLOPT_TIMEOUT_MS, (long)(timeout_ms + 15000));
	if (body) {
		curl_easy_setopt(g->curl, CURLOPT_POSTFIELDSIZE, (long)body->len);
		curl_easy_setopt(g->curl, CURLOPT_POSTFIELDS, body->data ? body->data : "");
	} else {
		curl_easy_setopt(g->curl, CURLOPT_HTTPGET, 1L);
	}
	curl_easy_setopt(g->curl, CURLOPT_CUSTOMREQUEST, strcmp(method, "DELETE") ? NULL : method);
	rc = curl_easy_perform(g->curl);
	if (rc != CURLE_OK)
		return al_err_set(err, AL_EREDIS, "cannot reach the gateway at %s: %s", g->base,
				  curl_easy_strerror(rc));
	curl_easy_getinfo(g->curl, CURLINFO_RESPONSE_CODE, status);
	curl_easy_getinfo(g->curl, CURLINFO_CONTENT_TYPE, &ctype);
	*mp = ctype && strstr(ctype, "msgpack");
	return AL_OK;
}

/* The gateway's JSON answer (NULL when it is not JSON). */
static json_t *answer(const struct al_buf *b)
{
	return b->data ? json_loadb(b->data, b->len, 0, NULL) : NULL;
}

/* A refusal: the gateway's "error", as an al_err of the matching kind. */
static int refused(long status, const struct al_buf *b, struct al_err *err)
{
	json_t *j = answer(b);
	const char *why = json_string_value(json_object_get(j, "error"));
	int code = status >= 500 ? AL_EREDIS : AL_EINVAL;

	al_err_set(err, code, "gateway: %ld %s", status, why ? why : "(no reason given)");
	json_decref(j);
	return code;
}

int al_gw_submit(struct al_gw *g, const struct al_job *job, char id_out[AL_ID_MAX + 1],
		 bool *existing, struct al_err *err)
{
	/* the gateway takes the tenant from the key: one named here must be
	 * the key's (the gateway checks); the default is left out */
	static const char *const drop_default[] = {"id", "tenant", NULL}, *const drop[] = {"id",
											   NULL};
	struct al_job shown = *job;
	struct al_buf mp = {0}, body = {0}, out = {0};
	long status = 0;
	bool is_mp;
	int rc;

	if (job->id)
		return al_err_set(err, AL_EINVAL, "id: the gateway chooses ids; leave it out");
	shown.id = (char *)"-"; /* the codec needs one; it is taken out again */
	if ((rc = al_job_encode(&shown, &mp, err)) ||
	    (rc = al_mp_map_without(mp.data, mp.len,
				    !job->tenant || !strcmp(job->tenant, "default") ? drop_default
										    : drop,
				    &body, err))) {
		al_buf_free(&mp);
		al_buf_free(&body);
		return rc;
	}
	al_buf_free(&mp);
	rc = http(g, "POST", "/v1/jobs", &body, 0, &status, &out, &is_mp, err);
	al_buf_free(&body);
	if (!rc && status != 202)
		rc = refused(status, &out, err);
	if (!rc) {
		json_t *a = answer(&out);
		const char *id = json_string_value(json_object_get(a, "id"));

		if (!id || strlen(id) > AL_ID_MAX)
			rc = al_err_set(err, AL_EREDIS, "gateway: an answer without an id");
		else
			snprintf(id_out, AL_ID_MAX + 1, "%s", id);
		*existing = json_is_true(json_object_get(a, "same_key"));
		json_decref(a);
	}
	al_buf_free(&out);
	return rc;
}

int al_gw_wait(struct al_gw *g, const char *id, uint64_t timeout_ms, struct al_result *res,
	       struct al_err *err)
{
	uint64_t end = timeout_ms ? al_mono_ms() + timeout_ms : 0;
	struct al_buf out = {0};
	int rc = AL_OK;

	for (;;) {
		uint64_t now = al_mono_ms(), left = end ? (end > now ? end - now : 0) : POLL_MS;
		char path[AL_ID_MAX + 64];
		long status = 0;
		bool mp;

		if (end && !left) {
			rc = al_err_set(err, AL_EREDIS, "timed out waiting for %s", id);
			break;
		}
		snprintf(path, sizeof(path), "/v1/jobs/%s/wait?timeout_ms=%llu", id,
			 (unsigned long long)(left < POLL_MS ? left : POLL_MS));
		if ((rc = http(g, "GET", path, NULL, left, &status, &out, &mp, err)))
			break;
		if (mp) { /* the result, whatever its status */
			rc = al_result_decode(out.data, out.len, res, err);
			break;
		}
		if (status != 202) {
			rc = refused(status, &out, err);
			break;
		}
	}
	al_buf_free(&out);
	return rc;
}

int al_gw_status(struct al_gw *g, const char *id, enum al_job_state *state, struct al_result *res,
		 struct al_err *err)
{
	struct al_buf out = {0};
	char path[AL_ID_MAX + 16];
	long status = 0;
	bool mp;
	int rc;

	memset(res, 0, sizeof(*res)); /* version 0: no result */
	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	if ((rc = http(g, "GET", path, NULL, 0, &status, &out, &mp, err)))
		goto out_buf;
	if (mp) {
		*state = AL_JS_DONE;
		rc = al_result_decode(out.data, out.len, res, err);
	} else if (status == 200) {
		json_t *a = answer(&out);
		int s = al_job_state_parse(json_string_value(json_object_get(a, "state")));

		json_decref(a);
		if (s < 0)
			rc = al_err_set(err, AL_EREDIS, "gateway: an unknown state for %s", id);
		else
			*state = (enum al_job_state)s;
	} else {
		rc = refused(status, &out, err);
	}
out_buf:
	al_buf_free(&out);
	return rc;
}

int al_gw_session_call(struct al_gw *g, const struct al_sess_call *call, uint64_t timeout_ms,
		       struct al_result *res, struct al_err *err)
{
	static const char *const drop[] = {"id", "tenant", "session", NULL};
	struct al_sess_call shown = *call;
	struct al_buf mp = {0}, body = {0}, out = {0};
	char path[AL_ID_MAX + 32];
	long status = 0;
	bool is_mp;
	int rc;

	shown.id = (char *)"-"; /* the codec needs them; taken out again */
	shown.tenant = (char *)"-";
	if ((rc = al_sess_call_encode(&shown, &mp, err)) ||
	    (rc = al_mp_map_without(mp.data, mp.len, drop, &body, err)))
		goto out_bufs;
	snprintf(path, sizeof(path), "/v1/sessions/%s/calls", call->session);
	if ((rc = http(g, "POST", path, &body, timeout_ms, &status, &out, &is_mp, err)))
		goto out_bufs;
	if (is_mp)
		rc = al_result_decode(out.data, out.len, res, err);
	else
		rc = refused(status, &out, err);
out_bufs:
	al_buf_free(&mp);
	al_buf_free(&body);
	al_buf_free(&out);
	return rc;
}

int al_gw_cancel(struct al_gw *g, const char *id, struct al_err *err)
{
	static const char *const what[] = {"finished", "ended", "kill_sent", "requested"};
	struct al_buf out = {0};
	char path[AL_ID_MAX + 16];
	long status = 0;
	bool mp;
	int rc;

	snprintf(path, sizeof(path), "/v1/jobs/%s", id);
	if ((rc = http(g, "DELETE", path, NULL, 0, &status, &out, &mp, err)))
		goto out_buf;
	if (status != 200 && status != 202) {
		rc = refused(status, &out, err);
	} else {
		json_t *a = answer(&out);
		const char *c = json_string_value(json_object_get(a, "cancel"));

		rc = al_err_set(err, AL_EREDIS, "gateway: an unexpected cancel answer");
		for (int i = 0; c && i < 4; i++)
			if (!strcmp(c, what[i]))
				rc = i;
		json_decref(a);
	}
out_buf:
	al_buf_free(&out);
	return rc;
}

/* Server-Sent Events, parsed as they arrive: "id:", "event:" and "data:"
 * lines, an empty line dispatching the event to fn. */
struct sse {
	CURL *curl;
	bool is_sse, checked; /* the answer is text/event-stream (else: an error body) */
	struct al_buf line, data, body;
	char id[48], event[16];
	al_chunk_fn fn;
	void *arg;
	bool stop, bad; /* fn said stop or the end came; a malformed event */
};

static void sse_dispatch(struct sse *s)
{
	static const char *const kinds[] = {NULL, "stdout", "stderr", "restart", "end"};
	struct al_chunk ch = {.kind = 0};
	struct al_bytes b = {0};
	json_t *j = s->data.data ? json_loadb(s->data.data, s->data.len, 0, NULL) : NULL;
	const char *st = json_string_value(json_object_get(j, "status"));

	for (int k = 1; k <= AL_CHUNK_END; k++)
		if (!strcmp(s->event, kinds[k]))
			ch.kind = (enum al_chunk_kind)k;
	if (!j || (ch.kind && al_json_get_bytes(j, "data", &b))) {
		s->bad = s->stop = true;
		json_decref(j);
		return;
	}
	if (!ch.kind) { /* an unknown event is skipped (newer gateways may add some) */
		json_decref(j);
		return;
	}
	snprintf(ch.id, sizeof(ch.id), "%s", s->id);
	ch.attempt = (unsigned)json_integer_value(json_object_get(j, "attempt"));
	ch.data = b.data;
	ch.len = b.len;
	snprintf(ch.status, sizeof(ch.status), "%s", st ? st : "");
	if (s->fn(&ch, s->arg) || ch.kind == AL_CHUNK_END)
		s->stop = true;
	json_decref(j);
	free(b.data);
}

static void sse_line(struct sse *s, char *l, size_t n)
{
	if (n && l[n - 1] == '\r')
		l[--n] = '\0';
	if (!n) {
		if (s->event[0] || s->data.len)
			sse_dispatch(s);
		s->event[0] = '\0';
		al_buf_reset(&s->data);
		return;
	}
	if (l[0] == ':') /* a comment: keep-alive */
		return;
	if (!strncmp(l, "id: ", 4))
		snprintf(s->id, sizeof(s->id), "%s", l + 4);
	else if (!strncmp(l, "event: ", 7))
		snprintf(s->event, sizeof(s->event), "%s", l + 7);
	else if (!strncmp(l, "data: ", 6))
		al_buf_append(&s->data, l + 6, n - 6);
}

static size_t on_sse(char *p, size_t size, size_t n, void *arg)
{
	struct sse *s = arg;
	size_t len = size * n;

	if (!s->checked) {
		char *ctype = NULL;

		curl_easy_getinfo(s->curl, CURLINFO_CONTENT_TYPE, &ctype);
		s->is_sse = ctype && strstr(ctype, "text/event-stream");
		s->checked = true;
	}
	if (!s->is_sse)
		return al_buf_append(&s->body, p, len) ? 0 : len;
	for (size_t i = 0; i < len && !s->stop; i++) {
		if (p[i] != '\n') {
			if (al_buf_append(&s->line, p + i, 1))
				return 0;
			continue;
		}
		sse_line(s, s->line.data ? s->line.data : (char *)"", s->line.len);
		al_buf_reset(&s->line);
	}
	return s->stop ? 0 : len; /* 0 ends the transfer: fn said stop, or the end */
}

int al_gw_stream(struct al_gw *g, const char *id, const char *after, uint64_t timeout_ms,
		 al_chunk_fn fn, void *arg, struct al_err *err)
{
	uint64_t end = timeout_ms ? al_mono_ms() + timeout_ms : 0;
	struct sse s = {.curl = g->curl, .fn = fn, .arg = arg};
	char url[1400], last[128];
	struct curl_slist *h = NULL;
	int rc = AL_OK;

	snprintf(s.id, sizeof(s.id), "%s", after && *after ? after : "0");
	snprintf(url, sizeof(url), "%s/v1/jobs/%s/output", g->base, id);
	for (int tries = 0;; tries++) {
		uint64_t now = al_mono_ms();
		long status = 0;
		CURLcode cc;

		if (end && now >= end) {
			rc = al_err_set(err, AL_EREDIS, "timed out following %s's output", id);
			break;
		}
		snprintf(last, sizeof(last), "Last-Event-ID: %s", s.id);
		curl_slist_free_all(h);
		h = curl_slist_append(curl_slist_append(NULL, g->auth), last);
		if (!h) {
			rc = al_err_set(err, AL_ENOMEM, "out of memory");
			break;
		}
		s.checked = s.is_sse = false;
		al_buf_reset(&s.body);
		al_buf_reset(&s.line);
		al_buf_reset(&s.data);
		s.event[0] = '\0';
		curl_easy_setopt(g->curl, CURLOPT_URL, url);
		curl_easy_setopt(g->curl, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(g->curl, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(g->curl, CURLOPT_CUSTOMREQUEST, NULL);
		curl_easy_setopt(g->curl, CURLOPT_WRITEFUNCTION, on_sse);
		curl_easy_setopt(g->curl, CURLOPT_WRITEDATA, &s);
		curl_easy_setopt(g->curl, CURLOPT_TIMEOUT_MS, end ? (long)(end - now) : 0L);
		cc = curl_easy_perform(g->curl);
		curl_easy_getinfo(g->curl, CURLINFO_RESPONSE_CODE, &status);
		if (s.stop) {
			if (s.bad)
				rc =
				    al_err_set(err, AL_EREDIS, "gateway: a malformed output event");
			break;
		}
		if (!s.is_sse && status) {
			rc = refused(status, &s.body, err);
			break;
		}
		if (cc == CURLE_OPERATION_TIMEDOUT) {
			rc = al_err_set(err, AL_EREDIS, "timed out following %s's output", id);
			break;
		}
		/* the connection went, or the gateway ended it before the end
		 * entry (it was stopped): resume after the last event */
		if (tries >= 20) {
			rc = al_err_set(err, AL_EREDIS, "cannot follow %s's output at %s: %s", id,
					g->base,
					cc == CURLE_OK ? "the stream keeps ending early"
						       : curl_easy_strerror(cc));
			break;
		}
		usleep(250000);
	}
	curl_easy_setopt(g->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(g->curl, CURLOPT_TIMEOUT_MS, 0L);
	curl_slist_free_all(h);
	al_buf_free(&s.body);
	al_buf_free(&s.line);
	al_buf_free(&s.data);
	return rc;
}
