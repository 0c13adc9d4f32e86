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
#include "cleanup.h"
#include "policy_int.h"

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
		if ((rc = al_pol_u64(c, v, key, &u)))
			return rc;
		if (u < t[i].min || u > t[i].max)
			return al_pol_fail(c, v, "%s: %s", key,
					   t[i].hint ? t[i].hint : "out of range");
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

	t->name = strdup(al_pol_scalar(name));
	t->max_priority = AL_PRIORITY_MAX;
	if (!t->name)
		return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	if ((rc = al_pol_map(c, n, t->name)))
		return rc;
	FOR_PAIRS(c, n, k, v, pp)
	{
		const char *key = al_pol_scalar(k);
		char all[256];

		rc = key ? set_num_key(c, tenant_keys, nkeys, key, v, t) : 1;
		if (rc == 1)
			return al_pol_fail(c, k, "tenant %s: unknown key \"%s\"; use %s", t->name,
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
		return al_pol_fail(c, v, "%s: expected a list of words ([g++, -O2, ...])", what);
	cap = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
	if (cap == 0 || cap > AL_LANG_ARGS_MAX)
		return al_pol_fail(c, v, "%s: 1..%d words", what, AL_LANG_ARGS_MAX);
	if (!(*out = calloc(cap + 1, sizeof(char *))))
		return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	FOR_ITEMS(c, v, h, it)
	{
		if ((rc = al_pol_str(c, h, what, &(*out)[*n])))
			return rc;
		(*n)++;
	}
	return AL_OK;
}

/* languages: {NAME: {image, source, build: [...], run: [...], build_wall_ms,
 * build_memory_bytes}} */
static int parse_languages(struct ctx *c, yaml_node_t *v, struct al_policy *pol)
{
	yaml_node_t *nk, *nv, *k2, *v2;
	size_t cap;
	int rc;

	if ((rc = al_pol_map(c, v, "languages")))
		return rc;
	cap = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
	if (cap > AL_LANGUAGES_MAX)
		return al_pol_fail(c, v, "languages: %zu defined, at most %d", cap,
				   AL_LANGUAGES_MAX);
	if (pol->languages)
		return al_pol_fail(c, v, "\"languages\" appears twice");
	if (!(pol->languages = calloc(cap + 1, sizeof(*pol->languages))))
		return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
	FOR_PAIRS(c, v, nk, nv, pl)
	{
		const char *nm = al_pol_scalar(nk);
		struct al_language *l = &pol->languages[pol->nlanguages];

		if (!nm || !*nm || strlen(nm) > 32 ||
		    strspn(nm, "abcdefghijklmnopqrstuvwxyz0123456789_+-") != strlen(nm))
			return al_pol_fail(c, nk, "languages: a name is 1..32 of [a-z0-9_+-]");
		for (size_t i = 0; i < pol->nlanguages; i++)
			if (!strcmp(pol->languages[i].name, nm))
				return al_pol_fail(c, nk, "language \"%s\" is defined twice", nm);
		if ((rc = al_pol_map(c, nv, "languages.NAME")))
			return rc;
		if (!(l->name = strdup(nm)))
			return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
		pol->nlanguages++;
		FOR_PAIRS(c, nv, k2, v2, pk)
		{
			const char *key = al_pol_scalar(k2);

			if (key && !strcmp(key, "image") && !l->image)
				rc = al_pol_image(c, v2, "languages.image", &l->image);
			else if (key && !strcmp(key, "source") && !l->source)
				rc = al_pol_str(c, v2, "languages.source", &l->source);
			else if (key && !strcmp(key, "build") && !l->build)
				rc = get_words(c, v2, "languages.build", &l->build, &l->nbuild);
			else if (key && !strcmp(key, "run") && !l->run)
				rc = get_words(c, v2, "languages.run", &l->run, &l->nrun);
			else if (key && !strcmp(key, "build_wall_ms") && !l->build_wall_ms)
				rc =
				    al_pol_u64(c, v2, "languages.build_wall_ms", &l->build_wall_ms);
			else if (key && !strcmp(key, "build_memory_bytes") &&
				 !l->build_memory_bytes)
				rc = al_pol_u64(c, v2, "languages.build_memory_bytes",
						&l->build_memory_bytes);
			else
				return al_pol_fail(
				    c, k2,
				    "languages.%s: unknown or repeated key \"%s\"; use image, "
				    "source, build, run, build_wall_ms or build_memory_bytes",
				    nm, key ? key : "?");
			if (rc)
				return rc;
		}
		if (!l->run)
			return al_pol_fail(c, nv, "language %s: run: missing (the tests' command)",
					   nm);
	}
	return AL_OK;
}

static int parse_root(struct ctx *c, struct al_policy *pol)
{
	yaml_node_t *root = yaml_document_get_root_node(&c->doc), *k, *v;
	int rc;

	if (!root)
		return al_pol_fail(c, NULL, "empty policy; see deploy/policy.example.yaml");
	if ((rc = al_pol_map(c, root, "policy")))
		return rc;
	pol->result_ttl_ms = 86400000;
	pol->lease_ms = 15000;
	pol->dlq_max_len = 10000;
	FOR_PAIRS(c, root, k, v, pr)
	{
		const char *key = al_pol_scalar(k);

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

			if ((rc = al_pol_map(c, v, key)))
				return rc;
			cap = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
			if (tiers && cap > AL_TIERS_MAX)
				return al_pol_fail(
				    c, v,
				    "tiers: %zu defined, at most %d (a worker serves every "
				    "tier of its policy, or those of --tiers)",
				    cap, AL_TIERS_MAX);
			if (tiers && !pol->tiers)
				pol->tiers = calloc(cap + 1, sizeof(*pol->tiers));
			else if (!tiers && !pol->tenants)
				pol->tenants = calloc(cap + 1, sizeof(*pol->tenants));
			else
				return al_pol_fail(c, k, "\"%s\" appears twice", key);
			if (tiers ? !pol->tiers : !pol->tenants)
				return al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
			FOR_PAIRS(c, v, nk, nv, pn)
			{
				const char *nm = al_pol_scalar(nk);

				if (!nm || !*nm || strlen(nm) > AL_ID_MAX)
					return al_pol_fail(
					    c, nk, "%s: names must be 1..64 characters", key);
				if (tiers ? al_policy_tier(pol, nm) != NULL
					  : tenant_defined(pol, nm))
					return al_pol_fail(c, nk, "%s \"%s\" is defined twice",
							   tiers ? "tier" : "tenant", nm);
				if (tiers) {
					rc = al_pol_tier(c, nk, nv, &pol->tiers[pol->ntiers++]);
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
			return al_pol_fail(
			    c, k,
			    "unknown key \"%s\"; use result_ttl_s, lease_ms, dlq_max_len, "
			    "languages, tiers or tenants",
			    key ? key : "?");
		}
		if (rc)
			return rc;
	}
	if (pol->ntiers == 0)
		return al_pol_fail(
		    c, root, "no tiers; add a \"tiers:\" mapping (see deploy/policy.example.yaml)");
	return AL_OK;
}

/* The whole policy file (a policy is small: at most 1 MiB), NUL-ended. */
static char *read_text(const char *path, size_t *len, struct al_err *err)
{
	cleanup_fclose FILE *f = fopen(path, "rb");
	cleanup_free char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return al_err_sys(err, "%s: cannot open the policy", path), NULL;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			char *nb =
			    cap >= (1u << 20) ? NULL : realloc(buf, cap = cap ? cap * 2 : 8192);

			if (!nb) {
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
		al_err_sys(err, "%s: cannot read the policy", path);
		return NULL;
	}
	buf[n] = 0;
	*len = n;
	return al_take_ptr(&buf);
}

int al_policy_load(const char *path, struct al_policy *pol, struct al_err *err)
{
	struct ctx c = {.file = path ? path : "built-in policy", .err = err};
	yaml_parser_t parser;
	cleanup_free char *text = NULL;
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
		return al_err_set(err, AL_ENOMEM, "policy: out of memory");
	}
	yaml_parser_set_input_string(&parser,
				     (const unsigned char *)(text ? text : al_policy_builtin), len);
	if (!yaml_parser_load(&parser, &c.doc)) {
		rc =
		    al_err_set(err, AL_EINVAL, "%s:%zu: YAML syntax error: %s", c.file,
			       parser.problem_mark.line + 1, parser.problem ? parser.problem : "?");
		yaml_parser_delete(&parser);
		memset(pol, 0, sizeof(*pol));
		return rc;
	}
	rc = parse_root(&c, pol);
	yaml_document_delete(&c.doc);
	yaml_parser_delete(&parser);
	if (!rc && !(pol->source = strdup(c.file)))
		rc = al_err_set(err, AL_ENOMEM, "policy: out of memory");
	if (rc)
		al_policy_free(pol);
	return rc;
}
