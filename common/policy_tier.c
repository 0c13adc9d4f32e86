/* policy_tier.c - a tier of the policy file: its backend, limits
 * (defaults and max), images, pool, binds, ports, environment, sessions,
 * egress and callback hosts, each key checked (tier_keys). Called by
 * policy_load.c; calls policy_yaml.c. */
#include "policy.h"

#include "../proto/caps.h"
#include "egress.h"
#include "../proto/grade.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/sha.h>
#include <yaml.h>
#include "policy_int.h"

/* Limits every tier starts from before its own defaults and max. */
static const struct al_limits base_defaults = {10000,	 0,	   256u << 20, 64,
					       1u << 20, 1u << 20, 64u << 20};
static const struct al_limits base_max = {3600000,   3600000,	4ull << 30, 1024,
					  64u << 20, 64u << 20, 4ull << 30};

static const struct {
	const char *key;
	size_t off; /* the field in struct al_limits */
} limit_keys[] = {
#define L(f)                                                                                       \
	{                                                                                          \
#f, offsetof(struct al_limits, f)                                                  \
	}
    L(wall_ms),	     L(cpu_ms),	      L(memory_bytes), L(pids),
    L(stdout_bytes), L(stderr_bytes), L(disk_bytes),
#undef L
};

static int parse_limits(struct ctx *c, yaml_node_t *n, const char *what, struct al_limits *l)
{
	yaml_node_t *k, *v;
	int rc;

	if ((rc = al_pol_map(c, n, what)))
		return rc;
	FOR_PAIRS(c, n, k, v, pp)
	{
		const char *key = al_pol_scalar(k);
		uint64_t *dst = NULL;

		if (!key)
			return al_pol_fail(c, k, "%s: keys must be strings", what);
		for (size_t i = 0; i < sizeof(limit_keys) / sizeof(limit_keys[0]) && !dst; i++)
			if (!strcmp(key, limit_keys[i].key))
				dst = (uint64_t *)(void *)((char *)l + limit_keys[i].off);
		if (!dst)
			return al_pol_fail(
			    c, k,
			    "%s: unknown limit \"%s\"; use wall_ms, cpu_ms, memory_bytes, "
			    "pids, stdout_bytes, stderr_bytes or disk_bytes",
			    what, key);
		if ((rc = al_pol_u64(c, v, key, dst)))
			return rc;
		if (*dst == 0)
			return al_pol_fail(c, v, "%s.%s: must be at least 1", what, key);
	}
	return AL_OK;
}

/* An absolute, normalized path (what a bind names, at the same place in
 * the sandbox). */
static bool bind_path_ok(const char *p)
{
	size_t n = strlen(p);

	if (p[0] != '/' || n < 2 || n > AL_BIND_PATH_MAX || p[n - 1] == '/')
		return false;
	for (const char *c = p; *c; c++)
		if ((unsigned char)*c < 0x20)
			return false;
	/* the sandbox's own /proc, /dev and /tmp are never a host path's */
	for (const char *const *own = (const char *const[]){"/proc", "/dev", "/tmp", NULL}; *own;
	     own++)
		if (!strncmp(p, *own, strlen(*own)) && (!p[strlen(*own)] || p[strlen(*own)] == '/'))
			return false;
	return !strstr(p, "//") && !strstr(p, "/./") && !strstr(p, "/../") &&
	       strcmp(p + n - 2, "/.") && (n < 3 || strcmp(p + n - 3, "/.."));
}

/* The list-valued keys of a tier, each its own parser. */
static int parse_ports(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t)
{
	yaml_node_t *pn;
	uint64_t u;
	int rc;

	if (v->type != YAML_SEQUENCE_NODE)
		return al_pol_fail(c, v, "ports: expected a list of port numbers");
	FOR_ITEMS(c, v, pn, it)
	{
		if (t->nports == AL_PORTS_MAX)
			return al_pol_fail(c, pn, "ports: at most %d", AL_PORTS_MAX);
		if ((rc = al_pol_u64(c, pn, "ports[]", &u)))
			return rc;
		if (u < 1 || u > 65535)
			return al_pol_fail(c, pn, "ports: expected 1..65535, got %llu",
					   (unsigned long long)u);
		t->ports[t->nports++] = (uint16_t)u;
	}
	return AL_OK;
}

static int parse_env(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t)
{
	yaml_node_t *ek, *ev;
	int rc;

	if ((rc = al_pol_map(c, v, "env")))
		return rc;
	t->env = calloc((size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start) + 1,
			sizeof(*t->env));
	if (!t->env)
		return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	FOR_PAIRS(c, v, ek, ev, pe)
	{
		if (!al_pol_scalar(ek) || !al_pol_scalar(ev))
			return al_pol_fail(c, ek, "env: names and values must be strings");
		t->env[t->nenv].key = strdup(al_pol_scalar(ek));
		t->env[t->nenv].value = strdup(al_pol_scalar(ev));
		if (!t->env[t->nenv++].key || !t->env[t->nenv - 1].value)
			return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	}
	return AL_OK;
}

/* egress: true|false, or {allow: [rules], max_bytes: N, max_connections: N,
 * max_open: N}; each cap at least 1, finite by default. */
/* sessions: {max_per_tenant: N, idle_s: S, max_life_s: S} (each may be
 * left out: 4, 600, 3600); the tier opens sessions (proto/call.h). */
static int parse_sessions(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t)
{
	static const struct {
		const char *key;
		uint64_t min, max, scale;
	} keys[] = {
	    {"max_per_tenant", 1, 10000, 1},	       {"idle_s", 1, 7 * 24 * 3600, 1000},
	    {"max_life_s", 1, 7 * 24 * 3600, 1000},    {"cpu_budget_s", 1, 7 * 24 * 3600, 1000},
	    {"life_s", 1, 7 * 24 * 3600, 1000},	       {"max_idle_s", 1, 7 * 24 * 3600, 1000},
	    {"memory_bytes", 1u << 20, 1ull << 40, 1}, {"max_paused_per_tenant", 0, 100000, 1},
	    {"paused_max_s", 1, 90 * 24 * 3600, 1000}};
	struct al_session_policy *sp = &t->sessions;
	yaml_node_t *k, *e;
	uint64_t u;
	int rc;

	if ((rc = al_pol_map(c, v, "sessions")))
		return rc;
	*sp = (struct al_session_policy){true, 4, 600000, 3600000,	   0,	 0,
					 0,    0, 16,	  7 * 86400000ull, false};
	FOR_PAIRS(c, v, k, e, ps)
	{
		const char *key = al_pol_scalar(k);
		size_t i = 0;

		if (key && !strcmp(key, "on_idle")) {
			const char *how = al_pol_scalar(e);

			if (!how || (strcmp(how, "pause") && strcmp(how, "end")))
				return al_pol_fail(c, e, "sessions.on_idle: expected pause or end");
			sp->pause_on_idle = !strcmp(how, "pause");
			continue;
		}
		while (i < sizeof(keys) / sizeof(keys[0]) && (!key || strcmp(key, keys[i].key)))
			i++;
		if (i == sizeof(keys) / sizeof(keys[0]))
			return al_pol_fail(
			    c, k,
			    "sessions: unknown key \"%s\"; use max_per_tenant, idle_s, "
			    "max_life_s, cpu_budget_s, life_s, max_idle_s, memory_bytes, "
			    "max_paused_per_tenant, paused_max_s or on_idle",
			    key ? key : "?");
		if ((rc = al_pol_u64(c, e, key, &u)))
			return rc;
		if (u < keys[i].min || u > keys[i].max)
			return al_pol_fail(c, e, "sessions.%s: expected %llu..%llu", key,
					   (unsigned long long)keys[i].min,
					   (unsigned long long)keys[i].max);
		if (i == 0)
			sp->max_per_tenant = (uint32_t)u;
		else if (i == 1)
			sp->idle_ms = u * keys[i].scale;
		else if (i == 2)
			sp->max_life_ms = u * keys[i].scale;
		else if (i == 3)
			sp->cpu_budget_ms = u * keys[i].scale;
		else if (i == 4)
			sp->life_ms = u * keys[i].scale;
		else if (i == 5)
			sp->max_idle_ms = u * keys[i].scale;
		else if (i == 6)
			sp->memory_bytes = u;
		else if (i == 7)
			sp->max_paused_per_tenant = (uint32_t)u;
		else
			sp->paused_max_ms = u * keys[i].scale;
	}
	/* what an extend may move them up to: what they start at, unless said */
	if (!sp->life_ms)
		sp->life_ms = sp->max_life_ms;
	if (!sp->max_idle_ms)
		sp->max_idle_ms = sp->idle_ms;
	if (sp->life_ms > sp->max_life_ms)
		return al_pol_fail(c, v, "sessions.life_s: %llu s is past max_life_s (%llu s)",
				   (unsigned long long)(sp->life_ms / 1000),
				   (unsigned long long)(sp->max_life_ms / 1000));
	if (sp->idle_ms > sp->max_idle_ms)
		return al_pol_fail(c, v, "sessions.idle_s: %llu s is past max_idle_s (%llu s)",
				   (unsigned long long)(sp->idle_ms / 1000),
				   (unsigned long long)(sp->max_idle_ms / 1000));
	return AL_OK;
}

static int parse_egress(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t)
{
	yaml_node_t *k, *e, *h, *cache_https = NULL;
	uint64_t u;
	int rc;

	if (v->type == YAML_SCALAR_NODE)
		return al_pol_bool(c, v, "egress", &t->egress);
	if (v->type != YAML_MAPPING_NODE)
		return al_pol_fail(c, v,
				   "egress: expected true, false or {allow: [host:port, ...]}");
	FOR_PAIRS(c, v, k, e, pe)
	{
		const char *key = al_pol_scalar(k);

		if (key && !strcmp(key, "allow")) {
			if (e->type != YAML_SEQUENCE_NODE)
				return al_pol_fail(c, e, "egress.allow: expected a list of rules");
			free(t->egress_rules);
			t->negress_rules = 0;
			t->egress_rules = calloc(AL_EGRESS_RULES_MAX, sizeof(*t->egress_rules));
			if (!t->egress_rules)
				return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
			FOR_ITEMS(c, e, h, it)
			{
				struct al_err rerr = {0};
				const char *rule = al_pol_scalar(h);

				if (t->negress_rules == AL_EGRESS_RULES_MAX)
					return al_pol_fail(c, h, "egress.allow: at most %d rules",
							   AL_EGRESS_RULES_MAX);
				if (!rule)
					return al_pol_fail(c, h, "egress.allow: rules are strings");
				if (al_egress_rule_parse(rule, &t->egress_rules[t->negress_rules],
							 &rerr))
					return al_pol_fail(c, h, "%s", rerr.msg);
				t->negress_rules++;
			}
		} else if (key && (!strcmp(key, "max_bytes") || !strcmp(key, "max_connections") ||
				   !strcmp(key, "max_open"))) {
			if ((rc = al_pol_u64(c, e, key, &u)))
				return rc;
			if (u == 0)
				return al_pol_fail(
				    c, e,
				    "egress.%s: at least 1 (every egress cap is finite; "
				    "leave it out for the default)",
				    key);
			if (key[4] == 'b')
				t->egress_max_bytes = u;
			else if (u > UINT32_MAX)
				return al_pol_fail(c, e, "egress.%s: too large", key);
			else if (key[4] == 'c')
				t->egress_max_connections = (uint32_t)u;
			else
				t->egress_max_open = (uint32_t)u;
		} else if (key && !strcmp(key, "cache_bytes")) {
			if ((rc = al_pol_u64(c, e, key, &t->egress_cache_bytes)))
				return rc;
		} else if (key && !strcmp(key, "cache_https")) {
			if ((rc = al_pol_bool(c, e, "egress.cache_https", &t->egress_cache_https)))
				return rc;
			cache_https = e;
		} else if (key && !strcmp(key, "ca_file")) {
			const char *path = al_pol_scalar(e);
			FILE *f;
			char line[128];
			bool pem = false;

			if (!path || path[0] != '/')
				return al_pol_fail(
				    c, e, "egress.ca_file: an absolute path to a PEM file");
			if (!(f = fopen(path, "r")))
				return al_pol_fail(c, e, "egress.ca_file: %s: %s", path,
						   strerror(errno));
			while (!pem && fgets(line, sizeof(line), f))
				pem = !strncmp(line, "-----BEGIN CERTIFICATE-----", 27);
			fclose(f);
			if (!pem)
				return al_pol_fail(c, e,
						   "egress.ca_file: %s holds no PEM certificate "
						   "(-----BEGIN CERTIFICATE-----)",
						   path);
			free(t->egress_ca_file);
			if (!(t->egress_ca_file = strdup(path)))
				return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
		} else {
			return al_pol_fail(
			    c, k,
			    "egress: unknown key \"%s\"; use allow, max_bytes, "
			    "max_connections, max_open, ca_file, cache_bytes or cache_https",
			    key ? key : "?");
		}
	}
	if (!t->negress_rules)
		return al_pol_fail(c, v, "egress: an allow list with at least one rule");
	if (t->egress_cache_https && !t->egress_cache_bytes)
		return al_pol_fail(
		    c, cache_https,
		    "egress.cache_https: needs egress.cache_bytes (the cache it fills)");
	t->egress = true;
	return AL_OK;
}

static int parse_callback_hosts(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t)
{
	yaml_node_t *h;
	int rc;

	if (v->type != YAML_SEQUENCE_NODE)
		return al_pol_fail(c, v, "callback_hosts: expected a list of host names");
	t->callback_hosts =
	    calloc((size_t)(v->data.sequence.items.top - v->data.sequence.items.start) + 1,
		   sizeof(char *));
	if (!t->callback_hosts)
		return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	FOR_ITEMS(c, v, h, it)
	{
		if ((rc = al_pol_str(c, h, "callback_hosts[]",
				     &t->callback_hosts[t->ncallback_hosts])))
			return rc;
		t->ncallback_hosts++;
	}
	return AL_OK;
}

static int parse_binds(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t)
{
	yaml_node_t *h;
	int rc;

	if (v->type != YAML_SEQUENCE_NODE)
		return al_pol_fail(c, v, "binds: expected a list of absolute host paths");
	FOR_ITEMS(c, v, h, it)
	{
		char *b = NULL;

		if (t->nbinds == AL_BINDS_MAX)
			return al_pol_fail(c, h, "binds: at most %d paths", AL_BINDS_MAX);
		if ((rc = al_pol_str(c, h, "binds[]", &b)))
			return rc;
		t->binds[t->nbinds++] = b;
		if (!bind_path_ok(b))
			return al_pol_fail(
			    c, h,
			    "binds: \"%s\" must be an absolute, normalized host path other "
			    "than / (no \"..\", \".\", \"//\" or trailing \"/\"; not under "
			    "/proc, /dev or /tmp), at most %d bytes",
			    b, AL_BIND_PATH_MAX);
	}
	return AL_OK;
}

/* A catalogue image's name: what deploy/images/build.sh accepts. */
static bool image_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > AL_ID_MAX ||
	    !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		      s[i] == '-'))
			return false;
	return true;
}

int al_pol_image(struct ctx *c, yaml_node_t *v, const char *what, char **out)
{
	int rc = al_pol_str(c, v, what, out);

	if (!rc && !image_name_ok(*out))
		return al_pol_fail(
		    c, v,
		    "%s: \"%s\" is not an image name (a recipe of deploy/images/recipes: "
		    "[a-z0-9][a-z0-9_-]*, not a path)",
		    what, *out);
	return rc;
}

static int parse_images(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t)
{
	yaml_node_t *h;
	int rc;

	if (v->type != YAML_SEQUENCE_NODE)
		return al_pol_fail(c, v, "images: expected a list of catalogue image names");
	FOR_ITEMS(c, v, h, it)
	{
		char *name = NULL;

		if (t->nimages == AL_IMAGES_MAX)
			return al_pol_fail(c, h, "images: at most %d", AL_IMAGES_MAX);
		if ((rc = al_pol_image(c, h, "images[]", &name)))
			return free(name), rc;
		if (al_tier_image_index(t, name) >= 0) {
			rc = al_pol_fail(c, h, "images: \"%s\" listed twice", name);
			free(name);
			return rc;
		}
		t->images[t->nimages++] = name;
	}
	return AL_OK;
}

/* pool: N (the default image's), or {image: N, ...}; the names are checked
 * against images once the whole tier is read (pool_names). */
static int parse_pool(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t,
		      char *names[AL_IMAGES_MAX], uint32_t counts[AL_IMAGES_MAX], size_t *n)
{
	yaml_node_t *k, *e;
	uint64_t u;
	int rc;

	if (v->type == YAML_SCALAR_NODE) {
		if ((rc = al_pol_u64(c, v, "pool", &u)))
			return rc;
		if (u > AL_POOL_MAX)
			return al_pol_fail(c, v,
					   "pool: expected 0..%d (pre-booted sandboxes per worker)",
					   AL_POOL_MAX);
		t->pool = (uint32_t)u;
		return AL_OK;
	}
	if (v->type != YAML_MAPPING_NODE)
		return al_pol_fail(c, v, "pool: expected a number, or image: number pairs");
	FOR_PAIRS(c, v, k, e, pe)
	{
		if (*n == AL_IMAGES_MAX)
			return al_pol_fail(c, k, "pool: at most %d images", AL_IMAGES_MAX);
		rc = al_pol_image(c, k, "pool", &names[*n]);
		(*n)++; /* freed by the caller, also when refused */
		if (rc)
			return rc;
		if ((rc = al_pol_u64(c, e, "pool", &u)))
			return rc;
		if (u > AL_POOL_MAX)
			return al_pol_fail(c, e,
					   "pool: expected 0..%d (pre-booted sandboxes per worker)",
					   AL_POOL_MAX);
		counts[*n - 1] = (uint32_t)u;
	}
	return AL_OK;
}

/* Once a tier is read: its default image is one it offers (an image alone
 * offers itself; a list alone makes its first the default), and each
 * per-image pool names one. */
static int check_images(struct ctx *c, yaml_node_t *n, struct al_tier_policy *t,
			char *names[AL_IMAGES_MAX], const uint32_t counts[AL_IMAGES_MAX],
			size_t npools)
{
	if (t->image && !t->nimages) {
		if (!(t->images[0] = strdup(t->image)))
			return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
		t->nimages = 1;
	} else if (!t->image && t->nimages) {
		if (!(t->image = strdup(t->images[0])))
			return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	} else if (t->image && al_tier_image_index(t, t->image) < 0)
		return al_pol_fail(c, n, "tier %s: image \"%s\" is not in its images; add it there",
				   t->name, t->image);
	for (size_t i = 0; i < npools; i++) {
		int k = al_tier_image_index(t, names[i]);

		if (k < 0)
			return al_pol_fail(c, n, "tier %s: pool: \"%s\" is not in its images",
					   t->name, names[i]);
		if (!strcmp(names[i], t->image))
			t->pool = counts[i];
		else
			t->pools[k] = counts[i];
	}
	if (t->nimages && t->nbinds && !strcmp(t->backend, "process"))
		return al_pol_fail(
		    c, n,
		    "tier %s: a process tier with images takes no binds (the image is its "
		    "whole, read-only root); use a container tier for both",
		    t->name);
	if (t->nimages && !strcmp(t->backend, "vm") && t->nimages > 1)
		return al_pol_fail(c, n, "tier %s: a vm tier boots one image; give one", t->name);
	return AL_OK;
}

/* Every key a tier may have: adding one is a line here. Numbers are
 * checked against [min, max] with hint as the error ("key: hint"). */
enum key_kind { KEY_STR, KEY_IMAGE, KEY_U64, KEY_U32, KEY_LIMITS, KEY_LIST, KEY_POOL };

static const struct tier_key {
	const char *key;
	enum key_kind kind;
	size_t off; /* the field in struct al_tier_policy */
	uint64_t min, max;
	const char *hint;
	int (*parse)(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t); /* KEY_LIST */
} tier_keys[] = {
#define F(field) offsetof(struct al_tier_policy, field)
    {"backend", KEY_STR, F(backend), 0, 0, NULL, NULL},
    {"egress", KEY_LIST, 0, 0, 0, NULL, parse_egress},
    {"defaults", KEY_LIMITS, F(defaults), 0, 0, NULL, NULL},
    {"max", KEY_LIMITS, F(max), 0, 0, NULL, NULL},
    {"cpu_millis", KEY_U64, F(cpu_millis), 1, 256000, "expected 1..256000 (1000 = one CPU)", NULL},
    {"max_attempts", KEY_U32, F(max_attempts), 1, AL_ATTEMPTS_MAX, "expected 1..10", NULL},
    {"backoff_ms", KEY_U64, F(backoff_ms), 0, UINT64_MAX, NULL, NULL},
    {"image", KEY_IMAGE, F(image), 0, 0, NULL, NULL},
    {"images", KEY_LIST, 0, 0, 0, NULL, parse_images},
    {"guest", KEY_STR, F(guest), 0, 0, NULL, NULL},
    {"snapshot_dir", KEY_STR, F(snapshot_dir), 0, 0, NULL, NULL},
    {"pool", KEY_POOL, 0, 0, 0, NULL, NULL},
    {"pool_max_idle_ms", KEY_U64, F(pool_max_idle_ms), 1000, UINT64_MAX, "expected at least 1000",
     NULL},
    {"vm_network", KEY_STR, F(vm_network), 0, 0, NULL, NULL},
    {"ports", KEY_LIST, 0, 0, 0, NULL, parse_ports},
    {"vm_lease_ms", KEY_U64, F(lease_ms), 1000, UINT64_MAX, "expected at least 1000", NULL},
    {"vm_max_lease_ms", KEY_U64, F(max_lease_ms), 0, UINT64_MAX, NULL, NULL},
    {"env", KEY_LIST, 0, 0, 0, NULL, parse_env},
    {"callback_hosts", KEY_LIST, 0, 0, 0, NULL, parse_callback_hosts},
    {"binds", KEY_LIST, 0, 0, 0, NULL, parse_binds},
    {"oci_runtime", KEY_STR, F(oci_runtime), 0, 0, NULL, NULL},
    {"runsc_platform", KEY_STR, F(oci_platform), 0, 0, NULL, NULL},
    {"sessions", KEY_LIST, 0, 0, 0, NULL, parse_sessions},
    {"max_input_bytes", KEY_U64, F(max_input_bytes), 1, AL_LIMIT_DISK_MAX,
     "expected 1 .. 1 TiB (bytes a job's inputs by URL may fetch and unpack to)", NULL},
#undef F
};

/* A tier's pool entries until the tier is read whole (check_images). */
struct pool_names {
	char *names[AL_IMAGES_MAX];
	uint32_t counts[AL_IMAGES_MAX];
	size_t n;
};

static int parse_tier_key(struct ctx *c, const struct tier_key *tk, yaml_node_t *v,
			  struct al_tier_policy *t, struct pool_names *pn)
{
	char *field = (char *)t + tk->off;
	uint64_t u;
	int rc;

	switch (tk->kind) {
	case KEY_STR: return al_pol_str(c, v, tk->key, (char **)(void *)field);
	case KEY_IMAGE: return al_pol_image(c, v, tk->key, (char **)(void *)field);
	case KEY_POOL: return parse_pool(c, v, t, pn->names, pn->counts, &pn->n);
	case KEY_LIMITS: return parse_limits(c, v, tk->key, (struct al_limits *)(void *)field);
	case KEY_LIST: return tk->parse(c, v, t);
	case KEY_U64:
	case KEY_U32:
		if ((rc = al_pol_u64(c, v, tk->key, &u)))
			return rc;
		if (u < tk->min || u > tk->max)
			return al_pol_fail(c, v, "%s: %s", tk->key,
					   tk->hint ? tk->hint : "out of range");
		if (tk->kind == KEY_U32)
			*(uint32_t *)(void *)field = (uint32_t)u;
		else
			*(uint64_t *)(void *)field = u;
		return AL_OK;
	}
	return AL_OK;
}

/* oci_runtime and runsc_platform: a container tier's, each a name this
 * worker knows. */
static int check_runtime(struct ctx *c, yaml_node_t *n, const struct al_tier_policy *t)
{
	static const char *const runtimes[] = {"runc", "crun", "runsc", NULL};
	static const char *const platforms[] = {"ptrace", "kvm", "systrap", NULL};
	bool known = false;

	if (!t->oci_runtime && !t->oci_platform)
		return AL_OK;
	if (strcmp(t->backend, "container"))
		return al_pol_fail(c, n,
				   "tier %s: oci_runtime and runsc_platform are the container "
				   "backend's; a %s tier has no OCI runtime",
				   t->name, t->backend);
	for (size_t i = 0; t->oci_runtime && runtimes[i]; i++)
		known |= !strcmp(t->oci_runtime, runtimes[i]);
	if (t->oci_runtime && !known)
		return al_pol_fail(c, n,
				   "tier %s: oci_runtime: unknown \"%s\"; use runc, crun or runsc",
				   t->name, t->oci_runtime);
	if (t->oci_platform) {
		known = false;
		for (size_t i = 0; platforms[i]; i++)
			known |= !strcmp(t->oci_platform, platforms[i]);
		if (!t->oci_runtime || strcmp(t->oci_runtime, "runsc"))
			return al_pol_fail(
			    c, n, "tier %s: runsc_platform is for oci_runtime: runsc", t->name);
		if (!known)
			return al_pol_fail(c, n,
					   "tier %s: runsc_platform: unknown \"%s\"; use ptrace, "
					   "kvm or systrap (or leave it out: picked at start)",
					   t->name, t->oci_platform);
	}
	return AL_OK;
}

static int read_tier(struct ctx *c, yaml_node_t *name, yaml_node_t *n, struct al_tier_policy *t,
		     struct pool_names *pn)
{
	yaml_node_t *k, *v;
	int rc;

	t->name = strdup(al_pol_scalar(name));
	t->defaults = base_defaults;
	t->max = base_max;
	t->cpu_millis = 1000;
	t->max_attempts = 3;
	t->backoff_ms = 500;
	t->egress_max_bytes = AL_EGRESS_DEFAULT_BYTES;
	t->egress_max_connections = AL_EGRESS_DEFAULT_CONNS;
	t->egress_max_open = AL_EGRESS_DEFAULT_OPEN;
	t->max_input_bytes = AL_INPUT_BYTES_DEF;
	t->pool_max_idle_ms = 600000;
	t->lease_ms = 3600000;
	t->max_lease_ms = 86400000;
	if (!t->name)
		return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	if ((rc = al_pol_map(c, n, t->name)))
		return rc;
	FOR_PAIRS(c, n, k, v, pp)
	{
		const char *key = al_pol_scalar(k);
		const struct tier_key *tk = NULL;

		if (!key)
			return al_pol_fail(c, k, "tier %s: keys must be strings", t->name);
		for (size_t i = 0; i < sizeof(tier_keys) / sizeof(tier_keys[0]) && !tk; i++)
			if (!strcmp(key, tier_keys[i].key))
				tk = &tier_keys[i];
		if (!tk) {
			char all[512] = "";

			for (size_t i = 0; i < sizeof(tier_keys) / sizeof(tier_keys[0]); i++)
				snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s",
					 i == 0 ? ""
					 : i + 1 == sizeof(tier_keys) / sizeof(tier_keys[0])
					     ? " or "
					     : ", ",
					 tier_keys[i].key);
			return al_pol_fail(c, k, "tier %s: unknown key \"%s\"; use %s", t->name,
					   key, all);
		}
		if ((rc = parse_tier_key(c, tk, v, t, pn)))
			return rc;
	}
	if (!t->backend)
		return al_pol_fail(
		    c, n,
		    "tier %s: no backend; add \"backend: process\" (or container, microvm, vm)",
		    t->name);

	if (!al_caps_find(t->backend))
		return al_pol_fail(
		    c, n, "tier %s: unknown backend \"%s\"; use process, container, microvm or vm",
		    t->name, t->backend);
	/* What the policy grants, the backend must be able to give: never a
	 * job that asked for network run without it. */
	if (t->egress && !(al_caps_of(t->backend) & AL_CAP_EGRESS))
		return al_pol_fail(
		    c, n,
		    "tier %s: egress granted, but the %s backend cannot give a job outbound "
		    "network; remove it, or use a backend that can "
		    "(process, container, microvm or vm)",
		    t->name, t->backend);
	if (t->egress && !t->negress_rules)
		return al_pol_fail(
		    c, n,
		    "tier %s: egress: true would let everything out, which no backend "
		    "offers; give the %s backend an allow list (egress: {allow: "
		    "[host:port, ...]})",
		    t->name, t->backend);
	if (t->nbinds && strcmp(t->backend, "process") && strcmp(t->backend, "container"))
		return al_pol_fail(
		    c, n,
		    "tier %s: binds are for the process and container backends; a %s "
		    "job has no host path to share",
		    t->name, t->backend);
	if (t->snapshot_dir && (t->snapshot_dir[0] != '/' || strstr(t->snapshot_dir, "/../")))
		return al_pol_fail(
		    c, n,
		    "tier %s: snapshot_dir: expected an absolute path (storage every "
		    "worker of the tier mounts), got \"%s\"",
		    t->name, t->snapshot_dir);
	if ((rc = check_runtime(c, n, t)))
		return rc;
	if (t->egress_cache_https && !strcmp(t->backend, "vm"))
		return al_pol_fail(c, n,
				   "tier %s: egress.cache_https: a service VM's trust store is its "
				   "image's, which cannot trust the worker's CA; leave it out on a "
				   "vm tier",
				   t->name);
	if (t->max_lease_ms < t->lease_ms)
		return al_pol_fail(c, n, "tier %s: vm_max_lease_ms is below vm_lease_ms; raise it",
				   t->name);
		/* Defaults must fit under the maxima. */
#define CHECK_DEF(f)                                                                               \
	do {                                                                                       \
		if (t->defaults.f > t->max.f)                                                      \
			return al_pol_fail(c, n,                                                   \
					   "tier %s: defaults." #f " is above max." #f             \
					   "; lower it or raise the max",                          \
					   t->name);                                               \
	} while (0)
	CHECK_DEF(wall_ms);
	CHECK_DEF(cpu_ms);
	CHECK_DEF(memory_bytes);
	CHECK_DEF(pids);
	CHECK_DEF(stdout_bytes);
	CHECK_DEF(stderr_bytes);
	CHECK_DEF(disk_bytes);
#undef CHECK_DEF
	return check_images(c, n, t, pn->names, pn->counts, pn->n);
}

int al_pol_tier(struct ctx *c, yaml_node_t *name, yaml_node_t *n, struct al_tier_policy *t)
{
	struct pool_names pn = {.n = 0};
	int rc = read_tier(c, name, n, t, &pn);

	for (size_t i = 0; i < pn.n; i++)
		free(pn.names[i]);
	return rc;
}
