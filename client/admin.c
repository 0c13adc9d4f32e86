/* admin.c - the operator's calls (admin.h): stats, dead letters, service
 * VMs, read from and written to Redis over the client's connection
 * (client.c, called down to). Nothing here prints. */
#include "admin.h"
#include "client_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../proto/contract.h"

/* Operators' commands read Redis itself: not through the gateway. */
static int operator_only(const struct al_client *c, const char *what, struct al_err *err)
{
	if (!c->gw)
		return AL_OK;
	return al_err_set(err, AL_EINVAL,
			  "%s is an operator's command: it needs direct Redis (--redis), not the "
			  "gateway",
			  what);
}

static int redis_failed(struct al_client *c, redisReply *r, struct al_err *err)
{
	if (r)
		freeReplyObject(r);
	return al_err_set(err, AL_EREDIS, "redis %s: %s", c->where,
			  c->rc->errstr[0] ? c->rc->errstr : "unexpected reply");
}

static int out_of_memory(struct al_err *err)
{
	return al_err_set(err, AL_ENOMEM, "out of memory");
}

/* Room for one more of *v (n of them, *cap allotted); false when none. */
static bool grow(void **v, size_t n, size_t *cap, size_t size)
{
	void *p;

	if (n < *cap)
		return true;
	if (!(p = realloc(*v, (*cap ? *cap * 2 : 8) * size)))
		return false;
	*v = p;
	*cap = *cap ? *cap * 2 : 8;
	return true;
}

/* A hash reply's (or a stream entry's) key-value pairs as al_kv. */
static int kv_of(const redisReply *h, struct al_kv **out, size_t *n)
{
	size_t m = h && h->type == REDIS_REPLY_ARRAY ? h->elements / 2 : 0;

	*out = NULL;
	*n = 0;
	if (!m)
		return AL_OK;
	if (!(*out = calloc(m, sizeof(**out))))
		return AL_ENOMEM;
	for (size_t k = 0; k < m; k++) {
		const redisReply *a = h->element[2 * k], *b = h->element[2 * k + 1];

		if (a->type != REDIS_REPLY_STRING || b->type != REDIS_REPLY_STRING)
			continue;
		(*out)[*n].key = strdup(a->str);
		(*out)[*n].value = strdup(b->str);
		if (!(*out)[*n].key || !(*out)[*n].value) {
			(*n)++;
			return AL_ENOMEM;
		}
		(*n)++;
	}
	return AL_OK;
}

static void kv_free(struct al_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

/* ---- stats ---- */

/* One ready stream's workers group: its lag (queued) and pending
 * (running); nothing for a stream that does not exist (yet). */
static int stats_queue(struct al_client *c, struct al_stats *s, size_t *cap, const char *stream)
{
	redisReply *r = redisCommand(c->rc, "XINFO GROUPS %s", stream);
	long long lag = -1, pending = 0;
	struct al_stats_queue *q;

	if (!r || r->type != REDIS_REPLY_ARRAY) {
		if (r)
			freeReplyObject(r);
		return AL_OK;
	}
	for (size_t g = 0; g < r->elements; g++) {
		redisReply *grp = r->element[g];
		bool ours = false;
		long long l = -1, p = 0;

		for (size_t k = 0; grp->type == REDIS_REPLY_ARRAY && k + 1 < grp->elements;
		     k += 2) {
			const char *name = grp->element[k]->str;
			redisReply *v = grp->element[k + 1];

			if (!strcmp(name, "name") && v->type == REDIS_REPLY_STRING)
				ours = !strcmp(v->str, AL_GROUP_WORKERS);
			else if (!strcmp(name, "lag") && v->type == REDIS_REPLY_INTEGER)
				l = v->integer;
			else if (!strcmp(name, "pending") && v->type == REDIS_REPLY_INTEGER)
				p = v->integer;
		}
		if (ours) {
			lag = l;
			pending = p;
		}
	}
	freeReplyObject(r);
	if (!grow((void **)&s->queues, s->nqueues, cap, sizeof(*s->queues)))
		return AL_ENOMEM;
	q = &s->queues[s->nqueues];
	if (!(q->name = strdup(stream + strlen(AL_KEY_PREFIX "q:"))))
		return AL_ENOMEM;
	q->queued = lag;
	q->running = pending;
	s->nqueues++;
	return AL_OK;
}

/* The policy hash in a worker's registry entry ("" when it has none). */
static void desc_policy(const char *desc, char out[17])
{
	const char *p = strstr(desc, "\"policy\":\"");
	size_t n = 0;

	out[0] = 0;
	if (!p)
		return;
	for (p += 10; n < 16 && isxdigit((unsigned char)p[n]); n++)
		out[n] = p[n];
	out[n] = 0;
}

static int add_node(struct al_stats_node **v, size_t *n, size_t *cap, const char *id,
		    const char *about)
{
	if (!grow((void **)v, *n, cap, sizeof(**v)))
		return AL_ENOMEM;
	(*v)[*n].id = strdup(id);
	(*v)[*n].about = strdup(about);
	(*n)++;
	return (*v)[*n - 1].id && (*v)[*n - 1].about ? AL_OK : AL_ENOMEM;
}

/* The live schedulers with their policy's hash, the live workers with
 * their registry entries, and each live worker whose policy is none of
 * the schedulers'. */
static int stats_schedulers_and_workers(struct al_client *c, struct al_stats *s)
{
	size_t cap_s = 0, cap_w = 0, cap_m = 0;
	struct al_call call;
	redisReply *r;
	bool *live = NULL;
	int rc = AL_OK;

	al_registry_call(&call, AL_KEY_SCHEDULERS);
	r = al_client_run_once(c, NULL, &call);
	for (size_t i = 0; !rc && r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
		char key[AL_KEY_MAX];
		redisReply *h;

		if (r->element[i]->type != REDIS_REPLY_STRING)
			continue;
		h = redisCommand(c->rc, "GET %s", al_key_scheduler(key, r->element[i]->str));
		if (h && h->type == REDIS_REPLY_STRING)
			rc = add_node(&s->schedulers, &s->nschedulers, &cap_s, r->element[i]->str,
				      h->str);
		if (h)
			freeReplyObject(h);
	}
	if (r)
		freeReplyObject(r);
	if (rc)
		return rc;
	al_hash_all_call(&call, AL_KEY_WORKERS);
	r = al_client_run_once(c, NULL, &call);
	if (r && r->type == REDIS_REPLY_ARRAY && !(live = calloc(r->elements / 2 + 1, 1)))
		rc = AL_ENOMEM;
	/* each worker asked about once: alive (al:worker:<id>), then listed */
	for (size_t i = 0; !rc && live && i + 1 < r->elements; i += 2) {
		char key[AL_KEY_MAX];
		redisReply *alive;

		if (r->element[i]->type != REDIS_REPLY_STRING ||
		    r->element[i + 1]->type != REDIS_REPLY_STRING)
			continue;
		alive = redisCommand(c->rc, "EXISTS %s", al_key_worker(key, r->element[i]->str));
		live[i / 2] = alive && alive->type == REDIS_REPLY_INTEGER && alive->integer;
		if (alive)
			freeReplyObject(alive);
		if (live[i / 2])
			rc = add_node(&s->workers, &s->nworkers, &cap_w, r->element[i]->str,
				      r->element[i + 1]->str);
	}
	/* then those whose policy is none of the schedulers' */
	for (size_t i = 0; !rc && live && s->nschedulers && i + 1 < r->elements; i += 2) {
		char hash[17];
		bool known = false;

		if (!live[i / 2])
			continue;
		desc_policy(r->element[i + 1]->str, hash);
		for (size_t k = 0; k < s->nschedulers; k++)
			known |= !strcmp(s->schedulers[k].about, hash);
		if (!known)
			rc = add_node(&s->mismatched, &s->nmismatched, &cap_m, r->element[i]->str,
				      hash);
	}
	free(live);
	if (r)
		freeReplyObject(r);
	return rc;
}

int al_client_stats(struct al_client *c, struct al_stats *out, struct al_err *err)
{
	redisReply *r, *tiers;
	struct al_call call;
	size_t cap = 0;
	int rc = AL_OK;

	*out = (struct al_stats){.dead_letters = -1};
	if (operator_only(c, "stats", err))
		return err->code;
	/* the tiers the schedulers' policies name (al:tiers), each band's stream */
	al_registry_call(&call, AL_KEY_TIERS);
	if (!(tiers = al_client_run_once(c, err, &call)))
		return AL_EREDIS;
	for (size_t i = 0; !rc && tiers->type == REDIS_REPLY_ARRAY && i < tiers->elements; i++) {
		char key[AL_KEY_MAX];

		if (tiers->element[i]->type != REDIS_REPLY_STRING)
			continue;
		for (int b = 0; !rc && b < AL_BANDS; b++)
			rc =
			    stats_queue(c, out, &cap, al_key_queue(key, tiers->element[i]->str, b));
	}
	freeReplyObject(tiers);
	if (rc || (rc = stats_schedulers_and_workers(c, out)))
		goto out_stats;
	al_dlq_len_call(&call);
	r = al_client_run_once(c, NULL, &call);
	if (r && r->type == REDIS_REPLY_INTEGER)
		out->dead_letters = r->integer;
	if (r)
		freeReplyObject(r);
	al_hash_all_call(&call, AL_KEY_STATS);
	r = al_client_run_once(c, NULL, &call);
	rc = kv_of(r, &out->counters, &out->ncounters);
	if (r)
		freeReplyObject(r);
	if (!rc)
		return AL_OK;
out_stats:
	al_stats_free(out);
	return out_of_memory(err);
}

static void nodes_free(struct al_stats_node *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].id);
		free(v[i].about);
	}
	free(v);
}

void al_stats_free(struct al_stats *s)
{
	for (size_t i = 0; i < s->nqueues; i++)
		free(s->queues[i].name);
	free(s->queues);
	nodes_free(s->schedulers, s->nschedulers);
	nodes_free(s->workers, s->nworkers);
	nodes_free(s->mismatched, s->nmismatched);
	kv_free(s->counters, s->ncounters);
	*s = (struct al_stats){.dead_letters = -1};
}

/* ---- dead letters ---- */

/* XRANGE's entries into out. */
static int dlq_of(const redisReply *r, struct al_dlq *out)
{
	if (!r->elements)
		return AL_OK;
	if (!(out->entries = calloc(r->elements, sizeof(*out->entries))))
		return AL_ENOMEM;
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i], *f;
		struct al_dlq_entry *d = &out->entries[out->n];

		if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
		    e->element[0]->type != REDIS_REPLY_STRING ||
		    e->element[1]->type != REDIS_REPLY_ARRAY)
			continue;
		f = e->element[1];
		out->n++;
		if (!(d->id = strdup(e->element[0]->str)) ||
		    (f->elements / 2 && !(d->fields = calloc(f->elements / 2, sizeof(*d->fields)))))
			return AL_ENOMEM;
		for (size_t k = 0; k + 1 < f->elements; k += 2) {
			struct al_dlq_field *x = &d->fields[d->nfields];
			const redisReply *key = f->element[k], *val = f->element[k + 1];

			if (key->type != REDIS_REPLY_STRING || val->type != REDIS_REPLY_STRING)
				continue;
			d->nfields++;
			x->len = val->len;
			if (!(x->key = strdup(key->str)) || !(x->value = malloc(val->len + 1)))
				return AL_ENOMEM;
			memcpy(x->value, val->str, val->len);
			x->value[val->len] = '\0';
		}
	}
	return AL_OK;
}

static int dlq_range(struct al_client *c, const char *from, const char *to, const char *count,
		     struct al_dlq *out, struct al_err *err)
{
	redisReply *r;

	*out = (struct al_dlq){0};
	if (operator_only(c, "dlq", err))
		return err->code;
	r = count ? redisCommand(c->rc, "XRANGE %s %s %s COUNT %s", AL_KEY_DLQ, from, to, count)
		  : redisCommand(c->rc, "XRANGE %s %s %s", AL_KEY_DLQ, from, to);
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return redis_failed(c, r, err);
	if (dlq_of(r, out)) {
		freeReplyObject(r);
		al_dlq_free(out);
		return out_of_memory(err);
	}
	freeReplyObject(r);
	return AL_OK;
}

int al_client_dlq_list(struct al_client *c, struct al_dlq *out, struct al_err *err)
{
	return dlq_range(c, "-", "+", "1000", out, err);
}

int al_client_dlq_show(struct al_client *c, const char *id, struct al_dlq *out, struct al_err *err)
{
	int rc = dlq_range(c, id, id, NULL, out, err);

	if (!rc && !out->n)
		return al_err_set(err, AL_EINVAL, "no dead letter %s", id);
	return rc;
}

int al_client_dlq_retry(struct al_client *c, const char *id, struct al_err *err)
{
	struct al_dlq d;
	const struct al_dlq_field *raw = NULL;
	size_t size = 0;
	redisReply *x, *del;
	int rc;

	if ((rc = al_client_dlq_show(c, id, &d, err)))
		return rc;
	for (size_t k = 0; k < d.entries[0].nfields; k++) {
		const struct al_dlq_field *f = &d.entries[0].fields[k];

		if (!strcmp(f->key, "raw"))
			raw = f;
		else if (!strcmp(f->key, "size"))
			size = strtoull(f->value, NULL, 10);
	}
	if (!raw || !raw->len)
		rc = al_err_set(err, AL_EINVAL, "dead letter %s has no job to retry", id);
	else if (size > raw->len)
		rc = al_err_set(err, AL_EINVAL,
				"dead letter %s keeps only the first %zu of its %zu bytes: it "
				"cannot be re-submitted; submit the job again",
				id, raw->len, size);
	if (rc) {
		al_dlq_free(&d);
		return rc;
	}
	x = redisCommand(c->rc, "XADD %s * job %b", AL_KEY_INTAKE, raw->value, raw->len);
	al_dlq_free(&d);
	if (!x || x->type != REDIS_REPLY_STRING)
		return redis_failed(c, x, err);
	freeReplyObject(x);
	if (!(del = redisCommand(c->rc, "XDEL %s %s", AL_KEY_DLQ, id)))
		return redis_failed(c, del, err);
	freeReplyObject(del);
	return AL_OK;
}

int al_client_dlq_purge(struct al_client *c, struct al_err *err)
{
	redisReply *r;

	if (operator_only(c, "dlq", err))
		return err->code;
	if (!(r = redisCommand(c->rc, "DEL %s", AL_KEY_DLQ)) || r->type == REDIS_REPLY_ERROR)
		return redis_failed(c, r, err);
	freeReplyObject(r);
	return AL_OK;
}

void al_dlq_free(struct al_dlq *d)
{
	for (size_t i = 0; i < d->n; i++) {
		for (size_t k = 0; k < d->entries[i].nfields; k++) {
			free(d->entries[i].fields[k].key);
			free(d->entries[i].fields[k].value);
		}
		free(d->entries[i].fields);
		free(d->entries[i].id);
	}
	free(d->entries);
	*d = (struct al_dlq){0};
}

/* ---- service VMs ---- */

int al_client_vm_list(struct al_client *c, struct al_vms *out, struct al_err *err)
{
	redisReply *r;

	*out = (struct al_vms){0};
	if (operator_only(c, "vm", err))
		return err->code;
	r = redisCommand(c->rc, "ZRANGE %s 0 -1", AL_KEY_VM_LEASES);
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return redis_failed(c, r, err);
	if (r->elements && !(out->vms = calloc(r->elements, sizeof(*out->vms)))) {
		freeReplyObject(r);
		return out_of_memory(err);
	}
	for (size_t i = 0; i < r->elements; i++) {
		struct al_vm_lease *v = &out->vms[out->n];
		redisReply *h;
		int bad;

		if (r->element[i]->type != REDIS_REPLY_STRING)
			continue;
		out->n++;
		h = redisCommand(c->rc, "HGETALL " AL_KEY_VM_PREFIX "%s", r->element[i]->str);
		bad = !(v->name = strdup(r->element[i]->str)) || kv_of(h, &v->fields, &v->nfields);
		if (h)
			freeReplyObject(h);
		if (bad) {
			freeReplyObject(r);
			al_vms_free(out);
			return out_of_memory(err);
		}
	}
	freeReplyObject(r);
	return AL_OK;
}

void al_vms_free(struct al_vms *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->vms[i].name);
		kv_free(v->vms[i].fields, v->vms[i].nfields);
	}
	free(v->vms);
	*v = (struct al_vms){0};
}

/* name a leased VM's, else AL_EINVAL. */
static int vm_leased(struct al_client *c, const char *name, struct al_err *err)
{
	redisReply *r;

	if (operator_only(c, "vm", err))
		return err->code;
	if (!name || strncmp(name, AL_VM_NAME_PREFIX, strlen(AL_VM_NAME_PREFIX)) ||
	    strlen(name) > AL_ID_MAX + 16 || strpbrk(name, " \t\r\n"))
		return al_err_set(err, AL_EINVAL,
				  "vm: expected a VM name (%s...), as `airlock vm list` prints",
				  AL_VM_NAME_PREFIX);
	if (!(r = redisCommand(c->rc, "ZSCORE %s %s", AL_KEY_VM_LEASES, name)))
		return redis_failed(c, r, err);
	if (r->type != REDIS_REPLY_STRING) {
		freeReplyObject(r);
		return al_err_set(err, AL_EINVAL, "vm: no running VM %s (ended, or never leased)",
				  name);
	}
	freeReplyObject(r);
	return AL_OK;
}

int al_client_vm_stop(struct al_client *c, const char *name, struct al_err *err)
{
	redisReply *a, *b;
	int rc;

	if ((rc = vm_leased(c, name, err)))
		return rc;
	/* The scheduler ends it on its next pass (about a second). */
	a = redisCommand(c->rc, "HSET " AL_KEY_VM_PREFIX "%s stop_reason %s", name,
			 "stopped by a client (airlock vm stop)");
	if (a)
		freeReplyObject(a);
	if (!(b = redisCommand(c->rc, "ZADD %s XX 0 %s", AL_KEY_VM_LEASES, name)))
		return redis_failed(c, b, err);
	freeReplyObject(b);
	return AL_OK;
}

/* A lease's field as a number (0 when missing). */
static uint64_t vm_field(struct al_client *c, const char *name, const char *field)
{
	redisReply *r = redisCommand(c->rc, "HGET " AL_KEY_VM_PREFIX "%s %s", name, field);
	uint64_t v = r && r->type == REDIS_REPLY_STRING ? strtoull(r->str, NULL, 10) : 0;

	if (r)
		freeReplyObject(r);
	return v;
}

int al_client_vm_extend(struct al_client *c, const char *name, uint64_t ms, uint64_t *expires_ms,
			bool *capped, struct al_err *err)
{
	uint64_t exp, max, now, want;
	redisReply *r;
	char v[24];
	int rc;

	if (ms == 0)
		return al_err_set(err, AL_EINVAL, "vm extend: expected a positive number of ms");
	if ((rc = vm_leased(c, name, err)))
		return rc;
	exp = vm_field(c, name, "expires_ms");
	max = vm_field(c, name, "max_until_ms");
	now = al_now_ms();
	want = (exp > now ? exp : now) + ms;
	*capped = max && want >= max;
	if (max && want > max)
		want = max;
	snprintf(v, sizeof(v), "%llu", (unsigned long long)want);
	if (!(r = redisCommand(c->rc, "ZADD %s XX %s %s", AL_KEY_VM_LEASES, v, name)))
		return redis_failed(c, r, err);
	freeReplyObject(r);
	r = redisCommand(c->rc, "HSET " AL_KEY_VM_PREFIX "%s expires_ms %s", name, v);
	if (r)
		freeReplyObject(r);
	*expires_ms = want;
	return AL_OK;
}
