/* webhook.c - result callbacks over libcurl multi on libevent (webhook.h). */
#include "webhook.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <sys/socket.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../proto/buf.h"
#include "../proto/job.h"
#include "../common/callback.h"
#include "../common/policy.h"

struct wk_webhooks {
	struct event_base *base;
	CURLM *multi;
	struct event *timer;
	char *secret;
	char *secrets_dir; /* per tenant: <dir>/<tenant> */
	int inflight;
};

struct hook {
	struct wk_webhooks *wh;
	CURL *easy;
	struct curl_slist *headers;
	char *url;
	char *body;
	size_t len;
	char id[AL_ID_MAX + 1];
	char **allow; /* the tier's callback_hosts, copied (a reload may free the policy's) */
	size_t nallow;
	char refused[64]; /* an address refused at connect time ("" when none) */
	int tries;
	struct event *retry;
};

struct sockctx {
	struct event *ev;
};

static void check_done(struct wk_webhooks *wh);
static int start_hook(struct hook *h);

static void hook_free(struct hook *h)
{
	if (h->easy) {
		curl_multi_remove_handle(h->wh->multi, h->easy);
		curl_easy_cleanup(h->easy);
	}
	curl_slist_free_all(h->headers);
	if (h->retry)
		event_free(h->retry);
	free(h->url);
	free(h->body);
	for (size_t i = 0; i < h->nallow; i++)
		free(h->allow[i]);
	free(h->allow);
	h->wh->inflight--;
	free(h);
}

static void on_socket_event(evutil_socket_t fd, short what, void *arg)
{
	struct wk_webhooks *wh = arg;
	int running, flags = 0;

	flags |= (what & EV_READ) ? CURL_CSELECT_IN : 0;
	flags |= (what & EV_WRITE) ? CURL_CSELECT_OUT : 0;
	curl_multi_socket_action(wh->multi, fd, flags, &running);
	check_done(wh);
}

static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct wk_webhooks *wh = userp;
	struct sockctx *sc = socketp;
	short kind = (short)(((what & CURL_POLL_IN) ? EV_READ : 0) |
			     ((what & CURL_POLL_OUT) ? EV_WRITE : 0) | EV_PERSIST);

	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (sc) {
			event_free(sc->ev);
			free(sc);
			curl_multi_assign(wh->multi, s, NULL);
		}
		return 0;
	}
	if (!sc) {
		sc = calloc(1, sizeof(*sc));
		if (!sc)
			return -1;
		curl_multi_assign(wh->multi, s, sc);
	} else {
		event_free(sc->ev);
	}
	sc->ev = event_new(wh->base, s, kind, on_socket_event, wh);
	event_add(sc->ev, NULL);
	return 0;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct wk_webhooks *wh = arg;
	int running;

	(void)fd;
	(void)what;
	curl_multi_socket_action(wh->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(wh);
}

static int on_curl_timer(CURLM *m, long ms, void *userp)
{
	struct wk_webhooks *wh = userp;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	(void)m;
	if (ms < 0)
		evtimer_del(wh->timer);
	else
		evtimer_add(wh->timer, &tv);
	return 0;
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	if (start_hook(arg))
		hook_free(arg);
}

static void check_done(struct wk_webhooks *wh)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(wh->multi, &left))) {
		struct hook *h;
		long code = 0;
		CURLcode result;

		if (msg->msg != CURLMSG_DONE)
			continue;
		/* msg lives in the easy handle: read it all before the cleanup */
		result = msg->data.result;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&h);
		curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
		curl_multi_remove_handle(wh->multi, h->easy);
		curl_easy_cleanup(h->easy);
		h->easy = NULL;
		if (h->refused[0]) {
			/* never retried: the name will resolve to the same place */
			al_log(
			    "error", "webhook_refused",
			    "job=%s address=%s note=\"an internal address that callback_hosts does "
			    "not name; not connected\"",
			    h->id, h->refused);
			hook_free(h);
		} else if (result == CURLE_OK && code >= 200 && code < 300) {
			al_log("info", "webhook", "job=%s status=%ld tries=%d", h->id, code,
			       h->tries);
			hook_free(h);
		} else if (h->tries < AL_WEBHOOK_TRIES) {
			struct timeval tv = {1 << (h->tries - 1), 0};

			al_log("warn", "webhook_retry", "job=%s status=%ld error=\"%s\" try=%d",
			       h->id, code, curl_easy_strerror(result), h->tries);
			evtimer_add(h->retry, &tv);
		} else {
			al_log("error", "webhook_failed", "job=%s status=%ld error=\"%s\" tries=%d",
			       h->id, code, curl_easy_strerror(result), h->tries);
			hook_free(h);
		}
	}
}

/* Every address libcurl connects to passes here first: the name in the
 * URL was allowed at admission, but what it resolves to is checked now. */
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct hook *h = arg;
	char text[64];

	(void)purpose;
	if (!al_callback_addr_ok(h->allow, h->nallow, &a->addr, text, sizeof(text))) {
		snprintf(h->refused, sizeof(h->refused), "%s", text[0] ? text : "unknown");
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype, a->protocol);
}

static int start_hook(struct hook *h)
{
	h->easy = curl_easy_init();
	if (!h->easy)
		return AL_ESYS;
	h->tries++;
	curl_easy_setopt(h->easy, CURLOPT_URL, h->url);
	curl_easy_setopt(h->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(h->easy, CURLOPT_POSTFIELDS, h->body);
	curl_easy_setopt(h->easy, CURLOPT_POSTFIELDSIZE, (long)h->len);
	curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, h->headers);
	curl_easy_setopt(h->easy, CURLOPT_TIMEOUT_MS, (long)AL_WEBHOOK_TIMEOUT_MS);
	curl_easy_setopt(h->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h->easy, CURLOPT_PROXY, ""); /* never a proxy from the environment */
	curl_easy_setopt(h->easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(h->easy, CURLOPT_OPENSOCKETDATA, h);
	curl_easy_setopt(h->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h->easy, CURLOPT_PRIVATE, h);
	curl_easy_setopt(h->easy, CURLOPT_USERAGENT, "airlock-worker");
	if (curl_multi_add_handle(h->wh->multi, h->easy) != CURLM_OK)
		return AL_ESYS;
	return 0;
}

struct wk_webhooks *wk_webhooks_new(struct event_base *base, const char *secret,
				    const char *secrets_dir)
{
	struct wk_webhooks *wh = calloc(1, sizeof(*wh));

	if (!wh)
		return NULL;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	wh->base = base;
	wh->multi = curl_multi_init();
	wh->timer = evtimer_new(base, on_timer, wh);
	wh->secret = secret ? strdup(secret) : NULL;
	wh->secrets_dir = secrets_dir ? strdup(secrets_dir) : NULL;
	if (!wh->multi || !wh->timer) {
		wk_webhooks_free(wh);
		return NULL;
	}
	curl_multi_setopt(wh->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(wh->multi, CURLMOPT_SOCKETDATA, wh);
	curl_multi_setopt(wh->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	curl_multi_setopt(wh->multi, CURLMOPT_TIMERDATA, wh);
	return wh;
}

/* Append a header line; false (and the list freed) when out of memory. */
static bool add_header(struct curl_slist **list, const char *line)
{
	struct curl_slist *l = curl_slist_append(*list, line);

	if (!l) {
		curl_slist_free_all(*list);
		*list = NULL;
		return false;
	}
	*list = l;
	return true;
}

/* The tenant's key into key (cap bytes): its file's first line. */
static int tenant_secret(const struct wk_webhooks *wh, const char *tenant, char *key, size_t cap,
			 struct al_err *err)
{
	char path[PATH_MAX];
	FILE *f;
	bool got;

	if (al_pathf(path, sizeof(path), "%s/%s", wh->secrets_dir, tenant) || strchr(tenant, '/'))
		return al_err_set(err, AL_EINVAL, "webhook: no secret path for tenant %s", tenant);
	if (!(f = fopen(path, "re")))
		return al_err_sys(err, "webhook: no secret for tenant %s (%s): nothing sent",
				  tenant, path);
	got = fgets(key, (int)cap, f) != NULL;
	fclose(f);
	key[got ? strcspn(key, "\r\n") : 0] = '\0';
	if (!key[0])
		return al_err_set(err, AL_EINVAL, "webhook: %s is empty: nothing sent", path);
	return AL_OK;
}

int wk_webhooks_post(struct wk_webhooks *wh, const char *url, const char *job_id,
		     const char *tenant, const void *body, size_t len, char *const *allow,
		     size_t nallow, struct al_err *err)
{
	struct hook *h;
	char line[160], tkey[1024];
	const char *secret = wh->secret;
	bool ok;

	if (wh->secrets_dir) {
		if (tenant_secret(wh, tenant ? tenant : "default", tkey, sizeof(tkey), err))
			return err->code;
		secret = tkey;
	}
	if (!(h = calloc(1, sizeof(*h))))
		return al_err_set(err, AL_ENOMEM, "webhook: out of memory");
	h->wh = wh;
	wh->inflight++;
	h->url = strdup(url);
	h->body = malloc(len ? len : 1);
	h->len = len;
	h->retry = evtimer_new(wh->base, on_retry, h);
	snprintf(h->id, sizeof(h->id), "%s", job_id);
	h->allow = nallow ? calloc(nallow, sizeof(*h->allow)) : NULL;
	for (size_t i = 0; h->allow && i < nallow; i++)
		if ((h->allow[h->nallow] = strdup(allow[i])))
			h->nallow++;
	if (!h->url || !h->body || !h->retry || h->nallow != nallow) {
		hook_free(h);
		return al_err_set(err, AL_ENOMEM, "webhook: out of memory");
	}
	memcpy(h->body, body, len);
	snprintf(line, sizeof(line), "X-Airlock-Job: %s", job_id);
	ok = add_header(&h->headers, "Content-Type: application/msgpack") &&
	     add_header(&h->headers, line);
	if (ok && secret) {
		unsigned char mac[EVP_MAX_MD_SIZE];
		unsigned int maclen = 0;
		char hex[2 * EVP_MAX_MD_SIZE + 1];

		ok = HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)body,
			  len, mac, &maclen) != NULL;
		for (unsigned i = 0; ok && i < maclen; i++)
			snprintf(hex + 2 * i, 3, "%02x", mac[i]);
		snprintf(line, sizeof(line), "X-Airlock-Signature: sha256=%s", ok ? hex : "");
		/* never an unsigned callback when a secret is set */
		ok = ok && add_header(&h->headers, line);
	}
	if (!ok) {
		hook_free(h);
		return al_err_set(err, AL_ENOMEM,
				  "webhook: could not build the headers (out of memory)");
	}
	if (start_hook(h)) {
		hook_free(h);
		return al_err_set(err, AL_ESANDBOX, "webhook: libcurl refused the request");
	}
	return AL_OK;
}

int wk_webhooks_inflight(const struct wk_webhooks *wh)
{
	return wh ? wh->inflight : 0;
}

void wk_webhooks_free(struct wk_webhooks *wh)
{
	if (!wh)
		return;
	if (wh->multi)
		curl_multi_cleanup(wh->multi);
	if (wh->timer)
		event_free(wh->timer);
	free(wh->secret);
	free(wh->secrets_dir);
	free(wh);
}
