/* policy_load.c - the policy from its YAML file: every key checked, every
 * error naming the file's line and what to write instead (see policy.h). */
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

const char al_policy_builtin[] =
    "result_ttl_s: 86400\n"
    "lease_ms: 15000\n"
    "tiers:\n"
    "  trusted:\n"
    "    backend: process\n"
    "    max_attempts: 3\n"
    "    defaults: {wall_ms: 10000, memory_bytes: 268435456, pids: 64}\n"
    "  internal:\n"
    "    backend: container\n"
    "    defaults: {wall_ms: 30000, memory_bytes: 268435456, pids: 64}\n"
    "  untrusted:\n"
    "    backend: microvm\n"
    "    images: [python, toolchain, node]\n"
    "    image: python\n"
    "    pool: 1\n"
    "    defaults: {wall_ms: 30000, memory_bytes: 134217728, pids: 64}\n"
    "  service:\n"
    "    backend: vm\n"
    "    image: python\n"
    "tenants:\n"
    "  default: {max_queued: 100000, max_running: 0, rate_per_s: 0}\n";

/* Limits every tier starts from before its own defaults and max. */
static const struct al_limits base_defaults = {10000,	 0,	   256u << 20, 64,
					       1u << 20, 1u << 20, 64u << 20};
static const struct al_limits base_max = {3600000,   3600000,	4ull << 30, 1024,
					  64u << 20, 64u << 20, 4ull << 30};

struct ctx {
	yaml_document_t doc;
	const char *file;
	struct al_err *err;
};

static int fail(struct ctx *c, yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct ctx *c, yaml_node_t *n, const char *fmt, ...)
{
	char msg[AL_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return al_err_set(c->err, AL_EINVAL, "%s:%zu: %s", c->file, n ? n->start_mark.line + 1 : 0,
			  msg);
}

static const char *scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int get_u64(struct ctx *c, yaml_node_t *n, const char *what, uint64_t *out)
{
	const char *s = scalar(n);
	char *end;

	if (!s || !*s || *s == '-')
		return fail(c, n, "%s: expected a non-negative integer", what);
	errno = 0;
	*out = strtoull(s, &end, 10);
	if (errno || *end)
		return fail(c, n, "%s: \"%s\" is not a non-negative integer", what, s);
	return AL_OK;
}

static int get_bool(struct ctx *c, yaml_node_t *n, const char *what, bool *out)
{
	const char *s = scalar(n);

	if (s && (!strcmp(s, "true") || !strcmp(s, "yes")))
		*out = true;
	else if (s && (!strcmp(s, "false") || !strcmp(s, "no")))
		*out = false;
	else
		return fail(c, n, "%s: expected true or false", what);
	return AL_OK;
}

static int get_str(struct ctx *c, yaml_node_t *n, const char *what, char **out)
{
	const char *s = scalar(n);

	if (!s)
		return fail(c, n, "%s: expected a string", what);
	free(*out);
	*out = strdup(s);
	return *out ? AL_OK : al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
}

/* Iterate a mapping's pairs with k and v; it names the cursor. */
#define FOR_PAIRS(c, map, k, v, it)                                                                \
	for (yaml_node_pair_t *it = (map)->data.mapping.pairs.start;                               \
	     it < (map)->data.mapping.pairs.top &&                                                 \
	     ((k) = yaml_document_get_node(&(c)->doc, it->key),                                    \
	     (v) = yaml_document_get_node(&(c)->doc, it->value), 1);                               \
	     it++)

/* Each node of sequence seq in n; the caller checked seq is a sequence. */
#define FOR_ITEMS(c, seq, n, it)                                                                   \
	for (yaml_node_item_t *it = (seq)->data.sequence.items.start;                              \
	     it < (seq)->data.sequence.items.top &&                                                \
	     ((n) = yaml_document_get_node(&(c)->doc, *it));                                       \
	     it++)

static int want_map(struct ctx *c, yaml_node_t *n, const char *what)
{
	if (!n || n->type != YAML_MAPPING_NODE)
		return fail(c, n, "%s: expected a mapping (key: value lines)", what);
	return AL_OK;
}

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

	if ((rc = want_map(c, n, what)))
		return rc;
	FOR_PAIRS(c, n, k, v, pp)
	{
		const char *key = scalar(k);
		uint64_t *dst = NULL;

		if (!key)
			return fail(c, k, "%s: keys must be strings", what);
		for (size_t i = 0; i < sizeof(limit_keys) / sizeof(limit_keys[0]) && !dst; i++)
			if (!strcmp(key, limit_keys[i].key))
				dst = (uint64_t *)(void *)((char *)l + limit_keys[i].off);
		if (!dst)
			return fail(c, k,
				    "%s: unknown limit \"%s\"; use wall_ms, cpu_ms, memory_bytes, "
				    "pids, stdout_bytes, stderr_bytes or disk_bytes",
				    what, key);
		if ((rc = get_u64(c, v, key, dst)))
			return rc;
		if (*dst == 0)
			return fail(c, v, "%s.%s: must be at least 1", what, key);
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
		return fail(c, v, "ports: expected a list of port numbers");
	FOR_ITEMS(c, v, pn, it)
	{
		if (t->nports == AL_PORTS_MAX)
			return fail(c, pn, "ports: at most %d", AL_PORTS_MAX);
		if ((rc = get_u64(c, pn, "ports[]", &u)))
			return rc;
		if (u < 1 || u > 65535)
			return fail(c, pn, "ports: expected 1..65535, got %llu",
				    (unsigned long long)u);
		t->ports[t->nports++] = (uint16_t)u;
	}
	return AL_OK;
}

static int parse_env(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t)
{
	yaml_node_t *ek, *ev;
	int rc;

	if ((rc = want_map(c, v, "env")))
		return rc;
	t->env = calloc((size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start) + 1,
			sizeof(*t->env));
	if (!t->env)
		return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	FOR_PAIRS(c, v, ek, ev, pe)
	{
		if (!scalar(ek) || !scalar(ev))
			return fail(c, ek, "env: names and values must be strings");
		t->env[t->nenv].key = strdup(scalar(ek));
		t->env[t->nenv].value = strdup(scalar(ev));
		if (!t->env[t->nenv++].key || !t->env[t->nenv - 1].value)
			return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	}
	return AL_OK;
}

/* egress: true|false, or {allow: [rules], max_bytes: N, max_connections: N,
 * max_open: N}; each cap at least 1, finite by default. */
/* sessions: {max_per_tenant: N, idle_s: S, max_life_s: S} (each may be
 * left out: 4, 600, 3600); the tier opens sessions (proto/session.h). */
static int parse_sessions(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t)
{
	static const struct {
		const char *key;
		uint64_t min, max, scale;
	} keys[] = {{"max_per_tenant", 1, 10000, 1},
		    {"idle_s", 1, 7 * 24 * 3600, 1000},
		    {"max_life_s", 1, 7 * 24 * 3600, 1000}};
	struct al_session_policy *sp = &t->sessions;
	yaml_node_t *k, *e;
	uint64_t u;
	int rc;

	if ((rc = want_map(c, v, "sessions")))
		return rc;
	*sp = (struct al_session_policy){true, 4, 600000, 3600000};
	FOR_PAIRS(c, v, k, e, ps)
	{
		const char *key = scalar(k);
		size_t i = 0;

		while (i < sizeof(keys) / sizeof(keys[0]) && (!key || strcmp(key, keys[i].key)))
			i++;
		if (i == sizeof(keys) / sizeof(keys[0]))
			return fail(c, k,
				    "sessions: unknown key \"%s\"; use max_per_tenant, idle_s or "
				    "max_life_s",
				    key ? key : "?");
		if ((rc = get_u64(c, e, key, &u)))
			return rc;
		if (u < keys[i].min || u > keys[i].max)
			return fail(c, e, "sessions.%s: expected %llu..%llu", key,
				    (unsigned long long)keys[i].min,
				    (unsigned long long)keys[i].max);
		if (i == 0)
			sp->max_per_tenant = (uint32_t)u;
		else if (i == 1)
			sp->idle_ms = u * keys[i].scale;
		else
			sp->max_life_ms = u * keys[i].scale;
	}
	return AL_OK;
}

static int parse_egress(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t)
{
	yaml_node_t *k, *e, *h, *cache_https = NULL;
	uint64_t u;
	int rc;

	if (v->type == YAML_SCALAR_NODE)
		return get_bool(c, v, "egress", &t->egress);
	if (v->type != YAML_MAPPING_NODE)
		return fail(c, v, "egress: expected true, false or {allow: [host:port, ...]}");
	FOR_PAIRS(c, v, k, e, pe)
	{
		const char *key = scalar(k);

		if (key && !strcmp(key, "allow")) {
			if (e->type != YAML_SEQUENCE_NODE)
				return fail(c, e, "egress.allow: expected a list of rules");
			free(t->egress_rules);
			t->negress_rules = 0;
			t->egress_rules = calloc(AL_EGRESS_RULES_MAX, sizeof(*t->egress_rules));
			if (!t->egress_rules)
				return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
			FOR_ITEMS(c, e, h, it)
			{
				struct al_err rerr = {0};
				const char *rule = scalar(h);

				if (t->negress_rules == AL_EGRESS_RULES_MAX)
					return fail(c, h, "egress.allow: at most %d rules",
						    AL_EGRESS_RULES_MAX);
				if (!rule)
					return fail(c, h, "egress.allow: rules are strings");
				if (al_egress_rule_parse(rule, &t->egress_rules[t->negress_rules],
							 &rerr))
					return fail(c, h, "%s", rerr.msg);
				t->negress_rules++;
			}
		} else if (key && (!strcmp(key, "max_bytes") || !strcmp(key, "max_connections") ||
				   !strcmp(key, "max_open"))) {
			if ((rc = get_u64(c, e, key, &u)))
				return rc;
			if (u == 0)
				return fail(c, e,
					    "egress.%s: at least 1 (every egress cap is finite; "
					    "leave it out for the default)",
					    key);
			if (key[4] == 'b')
				t->egress_max_bytes = u;
			else if (u > UINT32_MAX)
				return fail(c, e, "egress.%s: too large", key);
			else if (key[4] == 'c')
				t->egress_max_connections = (uint32_t)u;
			else
				t->egress_max_open = (uint32_t)u;
		} else if (key && !strcmp(key, "cache_bytes")) {
			if ((rc = get_u64(c, e, key, &t->egress_cache_bytes)))
				return rc;
		} else if (key && !strcmp(key, "cache_https")) {
			if ((rc = get_bool(c, e, "egress.cache_https", &t->egress_cache_https)))
				return rc;
			cache_https = e;
		} else if (key && !strcmp(key, "ca_file")) {
			const char *path = scalar(e);
			FILE *f;
			char line[128];
			bool pem = false;

			if (!path || path[0] != '/')
				return fail(c, e, "egress.ca_file: an absolute path to a PEM file");
			if (!(f = fopen(path, "r")))
				return fail(c, e, "egress.ca_file: %s: %s", path, strerror(errno));
			while (!pem && fgets(line, sizeof(line), f))
				pem = !strncmp(line, "-----BEGIN CERTIFICATE-----", 27);
			fclose(f);
			if (!pem)
				return fail(c, e,
					    "egress.ca_file: %s holds no PEM certificate "
					    "(-----BEGIN CERTIFICATE-----)",
					    path);
			free(t->egress_ca_file);
			if (!(t->egress_ca_file = strdup(path)))
				return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
		} else {
			return fail(
			    c, k,
			    "egress: unknown key \"%s\"; use allow, max_bytes, "
			    "max_connections, max_open, ca_file, cache_bytes or cache_https",
			    key ? key : "?");
		}
	}
	if (!t->negress_rules)
		return fail(c, v, "egress: an allow list with at least one rule");
	if (t->egress_cache_https && !t->egress_cache_bytes)
		return fail(c, cache_https,
			    "egress.cache_https: needs egress.cache_bytes (the cache it fills)");
	t->egress = true;
	return AL_OK;
}

static int parse_callback_hosts(struct ctx *c, yaml_node_t *v, struct al_tier_policy *t)
{
	yaml_node_t *h;
	int rc;

	if (v->type != YAML_SEQUENCE_NODE)
		return fail(c, v, "callback_hosts: expected a list of host names");
	t->callback_hosts =
	    calloc((size_t)(v->data.sequence.items.top - v->data.sequence.items.start) + 1,
		   sizeof(char *));
	if (!t->callback_hosts)
		return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	FOR_ITEMS(c, v, h, it)
	{
		if ((rc =
			 get_str(c, h, "callback_hosts[]", &t->callback_hosts[t->ncallback_hosts])))
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
		return fail(c, v, "binds: expected a list of absolute host paths");
	FOR_ITEMS(c, v, h, it)
	{
		char *b = NULL;

		if (t->nbinds == AL_BINDS_MAX)
			return fail(c, h, "binds: at most %d paths", AL_BINDS_MAX);
		if ((rc = get_str(c, h, "binds[]", &b)))
			return rc;
		t->binds[t->nbinds++] = b;
		if (!bind_path_ok(b))
			return fail(c, h,
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

static int get_image(struct ctx *c, yaml_node_t *v, const char *what, char **out)
{
	int rc = get_str(c, v, what, out);

	if (!rc && !image_name_ok(*out))
		return fail(c, v,
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
		return fail(c, v, "images: expected a list of catalogue image names");
	FOR_ITEMS(c, v, h, it)
	{
		char *name = NULL;

		if (t->nimages == AL_IMAGES_MAX)
			return fail(c, h, "images: at most %d", AL_IMAGES_MAX);
		if ((rc = get_image(c, h, "images[]", &name)))
			return free(name), rc;
		if (al_tier_image_index(t, name) >= 0) {
			rc = fail(c, h, "images: \"%s\" listed twice", name);
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
		if ((rc = get_u64(c, v, "pool", &u)))
			return rc;
		if (u > AL_POOL_MAX)
			return fail(c, v, "pool: expected 0..%d (pre-booted sandboxes per worker)",
				    AL_POOL_MAX);
		t->pool = (uint32_t)u;
		return AL_OK;
	}
	if (v->type != YAML_MAPPING_NODE)
		return fail(c, v, "pool: expected a number, or image: number pairs");
	FOR_PAIRS(c, v, k, e, pe)
	{
		if (*n == AL_IMAGES_MAX)
			return fail(c, k, "pool: at most %d images", AL_IMAGES_MAX);
		rc = get_image(c, k, "pool", &names[*n]);
		(*n)++; /* freed by the caller, also when refused */
		if (rc)
			return rc;
		if ((rc = get_u64(c, e, "pool", &u)))
			return rc;
		if (u > AL_POOL_MAX)
			return fail(c, e, "pool: expected 0..%d (pre-booted sandboxes per worker)",
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
		return fail(c, n, "tier %s: image \"%s\" is not in its images; add it there",
			    t->name, t->image);
	for (size_t i = 0; i < npools; i++) {
		int k = al_tier_image_index(t, names[i]);

		if (k < 0)
			return fail(c, n, "tier %s: pool: \"%s\" is not in its images", t->name,
				    names[i]);
		if (!strcmp(names[i], t->image))
			t->pool = counts[i];
		else
			t->pools[k] = counts[i];
	}
	if (t->nimages && t->nbinds && !strcmp(t->backend, "process"))
		return fail(c, n,
			    "tier %s: a process tier with images takes no binds (the image is its "
			    "whole, read-only root); use a container tier for both",
			    t->name);
	if (t->nimages && !strcmp(t->backend, "vm") && t->nimages > 1)
		return fail(c, n, "tier %s: a vm tier boots one image; give one", t->name);
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
	case KEY_STR: return get_str(c, v, tk->key, (char **)(void *)field);
	case KEY_IMAGE: return get_image(c, v, tk->key, (char **)(void *)field);
	case KEY_POOL: return parse_pool(c, v, t, pn->names, pn->counts, &pn->n);
	case KEY_LIMITS: return parse_limits(c, v, tk->key, (struct al_limits *)(void *)field);
	case KEY_LIST: return tk->parse(c, v, t);
	case KEY_U64:
	case KEY_U32:
		if ((rc = get_u64(c, v, tk->key, &u)))
			return rc;
		if (u < tk->min || u > tk->max)
			return fail(c, v, "%s: %s", tk->key, tk->hint ? tk->hint : "out of range");
		if (tk->kind == KEY_U32)
			*(uint32_t *)(void *)field = (uint32_t)u;
		else
			*(uint64_t *)(void *)field = u;
		return AL_OK;
	}
	return AL_OK;
}

static int read_tier(struct ctx *c, yaml_node_t *name, yaml_node_t *n, struct al_tier_policy *t,
		     struct pool_names *pn)
{
	yaml_node_t *k, *v;
	int rc;

	t->name = strdup(scalar(name));
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
	if ((rc = want_map(c, n, t->name)))
		return rc;
	FOR_PAIRS(c, n, k, v, pp)
	{
		const char *key = scalar(k);
		const struct tier_key *tk = NULL;

		if (!key)
			return fail(c, k, "tier %s: keys must be strings", t->name);
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
			return fail(c, k, "tier %s: unknown key \"%s\"; use %s", t->name, key, all);
		}
		if ((rc = parse_tier_key(c, tk, v, t, pn)))
			return rc;
	}
	if (!t->backend)
		return fail(
		    c, n,
		    "tier %s: no backend; add \"backend: process\" (or container, microvm, vm)",
		    t->name);

	if (!al_caps_find(t->backend))
		return fail(
		    c, n, "tier %s: unknown backend \"%s\"; use process, container, microvm or vm",
		    t->name, t->backend);
	/* What the policy grants, the backend must be able to give: never a
	 * job that asked for network run without it. */
	if (t->egress && !(al_caps_of(t->backend) & AL_CAP_EGRESS))
		return fail(
		    c, n,
		    "tier %s: egress granted, but the %s backend cannot give a job outbound "
		    "network; remove it, or use a backend that can "
		    "(process, container, microvm or vm)",
		    t->name, t->backend);
	if (t->egress && !t->negress_rules)
		return fail(c, n,
			    "tier %s: egress: true would let everything out, which no backend "
			    "offers; give the %s backend an allow list (egress: {allow: "
			    "[host:port, ...]})",
			    t->name, t->backend);
	if (t->nbinds && strcmp(t->backend, "process") && strcmp(t->backend, "container"))
		return fail(c, n,
			    "tier %s: binds are for the process and container backends; a %s "
			    "job has no host path to share",
			    t->name, t->backend);
	if (t->egress_cache_https && !strcmp(t->backend, "vm"))
		return fail(c, n,
			    "tier %s: egress.cache_https: a service VM's trust store is its "
			    "image's, which cannot trust the worker's CA; leave it out on a "
			    "vm tier",
			    t->name);
	if (t->max_lease_ms < t->lease_ms)
		return fail(c, n, "tier %s: vm_max_lease_ms is below vm_lease_ms; raise it",
			    t->name);
		/* Defaults must fit under the maxima. */
#define CHECK_DEF(f)                                                                               \
	do {                                                                                       \
		if (t->defaults.f > t->max.f)                                                      \
			return fail(c, n,                                                          \
				    "tier %s: defaults." #f " is above max." #f                    \
				    "; lower it or raise the max",                                 \
				    t->name);                                                      \
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

static int parse_tier(struct ctx *c, yaml_node_t *name, yaml_node_t *n, struct al_tier_policy *t)
{
	struct pool_names pn = {.n = 0};
	int rc = read_tier(c, name, n, t, &pn);

	for (size_t i = 0; i < pn.n; i++)
		free(pn.names[i]);
	return rc;
}

/* The numeric keys of a tenant and of the policy's root, as a table (the
 * tiers' richer keys are tier_keys): the value in min..max, stored times
 * scale (seconds to ms) as a uint64_t or, u32, a uint32_t. */
struct num_key {
	const char *key;
	size_t off;
	bool u32;
	uint64_t min, max, scale;
	const char *hint;
};

static const struct num_key tenant_keys[] = {
#define F(field) offsetof(struct al_tenant_policy, field)
    {"max_queued", F(max_queued), false, 0, UINT64_MAX, 1, NULL},
    {"max_running", F(max_running), false, 0, UINT64_MAX, 1, NULL},
    {"rate_per_s", F(rate_per_s), false, 0, UINT64_MAX, 1, NULL},
    {"max_priority", F(max_priority), true, 0, AL_PRIORITY_MAX, 1, "expected 0..9"},
#undef F
};

static const struct num_key root_keys[] = {
#define F(field) offsetof(struct al_policy, field)
    {"result_ttl_s", F(result_ttl_ms), false, 1, UINT64_MAX / 1000, 1000, "must be at least 1"},
    {"lease_ms", F(lease_ms), false, 500, UINT64_MAX, 1, "must be at least 500"},
    {"dlq_max_len", F(dlq_max_len), false, 10, 10000000, 1, "expected 10..10000000"},
#undef F
};

/* "a, b, c or d": the keys of a table, for "unknown key" errors. */
static const char *key_list(const struct num_key *t, size_t n, char *out, size_t cap)
{
	out[0] = '\0';
	for (size_t i = 0; i < n; i++)
		snprintf(out + strlen(out), cap - strlen(out), "%s%s",
			 i == 0	      ? ""
			 : i + 1 == n ? " or "
				      : ", ",
			 t[i].key);
	return out;
}

/* Set key of table t (n entries) in base from v: AL_OK; 1 when key is not
 * in the table; an error naming the file's line otherwise. */
static int set_num_key(struct ctx *c, const struct num_key *t, size_t n, const char *key,
		       yaml_node_t *v, void *base)
{
	uint64_t u;
	int rc;

	for (size_t i = 0; i < n; i++) {
		if (strcmp(key, t[i].key))
			continue;
		if ((rc = get_u64(c, v, key, &u)))
			return rc;
		if (u < t[i].min || u > t[i].max)
			return fail(c, v, "%s: %s", key, t[i].hint ? t[i].hint : "out of range");
		if (t[i].u32)
			*(uint32_t *)(void *)((char *)base + t[i].off) = (uint32_t)(u * t[i].scale);
		else
			*(uint64_t *)(void *)((char *)base + t[i].off) = u * t[i].scale;
		return AL_OK;
	}
	return 1;
}

static int parse_tenant(struct ctx *c, yaml_node_t *name, yaml_node_t *n,
			struct al_tenant_policy *t)
{
	const size_t nkeys = sizeof(tenant_keys) / sizeof(tenant_keys[0]);
	yaml_node_t *k, *v;
	int rc;

	t->name = strdup(scalar(name));
	t->max_priority = AL_PRIORITY_MAX;
	if (!t->name)
		return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	if ((rc = want_map(c, n, t->name)))
		return rc;
	FOR_PAIRS(c, n, k, v, pp)
	{
		const char *key = scalar(k);
		char all[256];

		rc = key ? set_num_key(c, tenant_keys, nkeys, key, v, t) : 1;
		if (rc == 1)
			return fail(c, k, "tenant %s: unknown key \"%s\"; use %s", t->name,
				    key ? key : "?",
				    key_list(tenant_keys, nkeys, all, sizeof(all)));
		if (rc)
			return rc;
	}
	return AL_OK;
}

/* A tenant of this name is in the policy already (al_policy_tenant also
 * answers "default" for unknown names: not this question). */
static bool tenant_defined(const struct al_policy *pol, const char *name)
{
	for (size_t i = 0; i < pol->ntenants; i++)
		if (pol->tenants[i].name && !strcmp(pol->tenants[i].name, name))
			return true;
	return false;
}

/* A list of command words, into (*out, *n). */
static int get_words(struct ctx *c, yaml_node_t *v, const char *what, char ***out, size_t *n)
{
	yaml_node_t *h;
	size_t cap;
	int rc;

	if (v->type != YAML_SEQUENCE_NODE)
		return fail(c, v, "%s: expected a list of words ([g++, -O2, ...])", what);
	cap = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
	if (cap == 0 || cap > AL_LANG_ARGS_MAX)
		return fail(c, v, "%s: 1..%d words", what, AL_LANG_ARGS_MAX);
	if (!(*out = calloc(cap + 1, sizeof(char *))))
		return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	FOR_ITEMS(c, v, h, it)
	{
		if ((rc = get_str(c, h, what, &(*out)[*n])))
			return rc;
		(*n)++;
	}
	return AL_OK;
}

/* languages: {NAME: {image, source, build: [...], run: [...]}} */
static int parse_languages(struct ctx *c, yaml_node_t *v, struct al_policy *pol)
{
	yaml_node_t *nk, *nv, *k2, *v2;
	size_t cap;
	int rc;

	if ((rc = want_map(c, v, "languages")))
		return rc;
	cap = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
	if (cap > AL_LANGUAGES_MAX)
		return fail(c, v, "languages: %zu defined, at most %d", cap, AL_LANGUAGES_MAX);
	if (pol->languages)
		return fail(c, v, "\"languages\" appears twice");
	if (!(pol->languages = calloc(cap + 1, sizeof(*pol->languages))))
		return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	FOR_PAIRS(c, v, nk, nv, pl)
	{
		const char *nm = scalar(nk);
		struct al_language *l = &pol->languages[pol->nlanguages];

		if (!nm || !*nm || strlen(nm) > 32 ||
		    strspn(nm, "abcdefghijklmnopqrstuvwxyz0123456789_+-") != strlen(nm))
			return fail(c, nk, "languages: a name is 1..32 of [a-z0-9_+-]");
		for (size_t i = 0; i < pol->nlanguages; i++)
			if (!strcmp(pol->languages[i].name, nm))
				return fail(c, nk, "language \"%s\" is defined twice", nm);
		if ((rc = want_map(c, nv, "languages.NAME")))
			return rc;
		if (!(l->name = strdup(nm)))
			return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
		pol->nlanguages++;
		FOR_PAIRS(c, nv, k2, v2, pk)
		{
			const char *key = scalar(k2);

			if (key && !strcmp(key, "image") && !l->image)
				rc = get_image(c, v2, "languages.image", &l->image);
			else if (key && !strcmp(key, "source") && !l->source)
				rc = get_str(c, v2, "languages.source", &l->source);
			else if (key && !strcmp(key, "build") && !l->build)
				rc = get_words(c, v2, "languages.build", &l->build, &l->nbuild);
			else if (key && !strcmp(key, "run") && !l->run)
				rc = get_words(c, v2, "languages.run", &l->run, &l->nrun);
			else
				return fail(
				    c, k2,
				    "languages.%s: unknown or repeated key \"%s\"; use image, "
				    "source, build or run",
				    nm, key ? key : "?");
			if (rc)
				return rc;
		}
		if (!l->run)
			return fail(c, nv, "language %s: run: missing (the tests' command)", nm);
	}
	return AL_OK;
}

static int parse_root(struct ctx *c, struct al_policy *pol)
{
	yaml_node_t *root = yaml_document_get_root_node(&c->doc), *k, *v;
	int rc;

	if (!root)
		return fail(c, NULL, "empty policy; see deploy/policy.example.yaml");
	if ((rc = want_map(c, root, "policy")))
		return rc;
	pol->result_ttl_ms = 86400000;
	pol->lease_ms = 15000;
	pol->dlq_max_len = 10000;
	FOR_PAIRS(c, root, k, v, pr)
	{
		const char *key = scalar(k);

		rc = key ? set_num_key(c, root_keys, sizeof(root_keys) / sizeof(root_keys[0]), key,
				       v, pol)
			 : 1;
		if (rc != 1) {
			if (rc)
				return rc;
		} else if (key && (!strcmp(key, "tiers") || !strcmp(key, "tenants"))) {
			bool tiers = !strcmp(key, "tiers");
			size_t cap;
			yaml_node_t *nk, *nv;

			if ((rc = want_map(c, v, key)))
				return rc;
			cap = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
			if (tiers && cap > AL_TIERS_MAX)
				return fail(c, v,
					    "tiers: %zu defined, at most %d (a worker serves every "
					    "tier of its policy, or those of --tiers)",
					    cap, AL_TIERS_MAX);
			if (tiers && !pol->tiers)
				pol->tiers = calloc(cap + 1, sizeof(*pol->tiers));
			else if (!tiers && !pol->tenants)
				pol->tenants = calloc(cap + 1, sizeof(*pol->tenants));
			else
				return fail(c, k, "\"%s\" appears twice", key);
			if (tiers ? !pol->tiers : !pol->tenants)
				return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
			FOR_PAIRS(c, v, nk, nv, pn)
			{
				const char *nm = scalar(nk);

				if (!nm || !*nm || strlen(nm) > AL_ID_MAX)
					return fail(c, nk, "%s: names must be 1..64 characters",
						    key);
				if (tiers ? al_policy_tier(pol, nm) != NULL
					  : tenant_defined(pol, nm))
					return fail(c, nk, "%s \"%s\" is defined twice",
						    tiers ? "tier" : "tenant", nm);
				if (tiers) {
					rc = parse_tier(c, nk, nv, &pol->tiers[pol->ntiers++]);
				} else {
					rc =
					    parse_tenant(c, nk, nv, &pol->tenants[pol->ntenants++]);
				}
				if (rc)
					return rc;
			}
		} else if (key && !strcmp(key, "languages")) {
			rc = parse_languages(c, v, pol);
		} else {
			return fail(c, k,
				    "unknown key \"%s\"; use result_ttl_s, lease_ms, dlq_max_len, "
				    "languages, tiers or tenants",
				    key ? key : "?");
		}
		if (rc)
			return rc;
	}
	if (pol->ntiers == 0)
		return fail(c, root,
			    "no tiers; add a \"tiers:\" mapping (see deploy/policy.example.yaml)");
	return AL_OK;
}

/* The whole policy file (a policy is small: at most 1 MiB), NUL-ended. */
static char *read_text(const char *path, size_t *len, struct al_err *err)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return al_err_sys(err, "%s: cannot open the policy", path), NULL;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			char *nb =
			    cap >= (1u << 20) ? NULL : realloc(buf, cap = cap ? cap * 2 : 8192);

			if (!nb) {
				free(buf);
				fclose(f);
				al_err_set(err, AL_EINVAL, "%s: over 1 MiB, or out of memory",
					   path);
				return NULL;
			}
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);

		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		free(buf);
		fclose(f);
		al_err_sys(err, "%s: cannot read the policy", path);
		return NULL;
	}
	fclose(f);
	buf[n] = 0;
	*len = n;
	return buf;
}

int al_policy_load(const char *path, struct al_policy *pol, struct al_err *err)
{
	struct ctx c = {.file = path ? path : "built-in policy", .err = err};
	yaml_parser_t parser;
	char *text = NULL;
	size_t len;
	unsigned char h[SHA256_DIGEST_LENGTH];
	int rc;

	memset(pol, 0, sizeof(*pol));
	if (path && !(text = read_text(path, &len, err)))
		return err->code;
	if (!path)
		len = strlen(al_policy_builtin);
	SHA256((const unsigned char *)(text ? text : al_policy_builtin), len, h);
	for (int i = 0; i < 8; i++)
		snprintf(pol->hash + 2 * i, 3, "%02x", h[i]);
	if (!yaml_parser_initialize(&parser)) {
		free(text);
		return al_err_set(err, AL_ENOMEM, "policy: out of memory");
	}
	yaml_parser_set_input_string(&parser,
				     (const unsigned char *)(text ? text : al_policy_builtin), len);
	if (!yaml_parser_load(&parser, &c.doc)) {
		rc =
		    al_err_set(err, AL_EINVAL, "%s:%zu: YAML syntax error: %s", c.file,
			       parser.problem_mark.line + 1, parser.problem ? parser.problem : "?");
		yaml_parser_delete(&parser);
		free(text);
		memset(pol, 0, sizeof(*pol));
		return rc;
	}
	rc = parse_root(&c, pol);
	yaml_document_delete(&c.doc);
	yaml_parser_delete(&parser);
	free(text);
	if (!rc && !(pol->source = strdup(c.file)))
		rc = al_err_set(err, AL_ENOMEM, "policy: out of memory");
	if (rc)
		al_policy_free(pol);
	return rc;
}
