/* keys.c - API keys: loaded hashed, compared in constant time (gw.h). */
#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../common/cleanup.h"
#include "gw.h"

void gw_hash_text(const char *key, size_t len, char out[72])
{
	unsigned char h[SHA256_DIGEST_LENGTH];

	SHA256((const unsigned char *)key, len, h);
	memcpy(out, "sha256:", 7);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", h[i]);
}

static bool tenant_ok(const char *t)
{
	size_t n = strlen(t);

	if (n == 0 || n > AL_ID_MAX)
		return false;
	for (const char *c = t; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("._:-", *c))
			return false;
	return true;
}

static int unhex(const char *s, unsigned char out[32])
{
	for (int i = 0; i < 32; i++) {
		unsigned v;

		if (!isxdigit((unsigned char)s[2 * i]) || !isxdigit((unsigned char)s[2 * i + 1]) ||
		    sscanf(s + 2 * i, "%2x", &v) != 1)
			return AL_EINVAL;
		out[i] = (unsigned char)v;
	}
	return s[64] == '\0' ? 0 : -1;
}

/* The tenant's entry, made at its first key; entries are never taken back
 * (a request holds its tenant's while it runs, a reload keeps them), so a
 * gateway knows at most GW_KEYS_MAX tenants between restarts. NULL: full. */
static struct gw_tenant *tenant_of(struct gw *g, const char *name)
{
	for (size_t i = 0; i < g->ntenants; i++)
		if (!strcmp(g->tenants[i].name, name))
			return &g->tenants[i];
	if (g->ntenants == GW_KEYS_MAX)
		return NULL;
	snprintf(g->tenants[g->ntenants].name, sizeof(g->tenants[0].name), "%s", name);
	return &g->tenants[g->ntenants++];
}

/* One line of the key file into its tenant's name and the key's hash. */
static int parse_line(const char *path, int lineno, const char *line, char tenant[128],
		      unsigned char hash[32], struct al_err *err)
{
	char text[128], extra[8];
	int n = sscanf(line, "%127s %127s %7s", tenant, text, extra);

	if (n != 2 || strncmp(text, "sha256:", 7) || strlen(text) != 7 + 64)
		return al_err_set(err, AL_EINVAL,
				  "%s:%d: expected \"TENANT sha256:HEX\" (make the hash with "
				  "airlock-gateway --hash-key)",
				  path, lineno);
	if (!tenant_ok(tenant))
		return al_err_set(err, AL_EINVAL,
				  "%s:%d: tenant \"%s\": 1..64 chars of [A-Za-z0-9._:-]", path,
				  lineno, tenant);
	if (unhex(text + 7, hash))
		return al_err_set(err, AL_EINVAL, "%s:%d: the hash is not 64 hex digits", path,
				  lineno);
	if (!strcmp(tenant, "default"))
		return al_err_set(
		    err, AL_EINVAL,
		    "%s:%d: tenant \"default\" is reserved (the tenant of jobs that name "
		    "none, as the CLI's do): a key for it would share their idempotency "
		    "keys and quotas; give this tenant a name of its own",
		    path, lineno);
	return AL_OK;
}

int gw_keys_load(struct gw *g, const char *path, struct al_err *err)
{
	cleanup_fclose FILE *f = fopen(path, "re");
	static char names[GW_KEYS_MAX][128]; /* the loop's thread only */
	static unsigned char hashes[GW_KEYS_MAX][32];
	size_t n = 0, had = g->ntenants;
	char line[512];
	int lineno = 0, rc;

	if (!f)
		return al_err_sys(err, "--keys %s", path);
	/* the whole file first: one that does not load changes nothing */
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		if (!line[strspn(line, " \t")] || line[strspn(line, " \t")] == '#')
			continue;
		if (n == GW_KEYS_MAX)
			return al_err_set(err, AL_EINVAL, "%s: more than %d keys", path,
					  GW_KEYS_MAX);
		if ((rc = parse_line(path, lineno, line, names[n], hashes[n], err)))
			return rc;
		n++;
	}
	if (ferror(f))
		return al_err_sys(err, "--keys %s", path);
	if (!n)
		return al_err_set(err, AL_EINVAL, "%s: no keys: no one could use the gateway",
				  path);
	for (size_t i = 0; i < n; i++)
		if (!tenant_of(g, names[i])) {
			g->ntenants = had; /* the new ones, unused, given back */
			return al_err_set(err, AL_EINVAL,
					  "%s: more than %d tenants since the gateway started: "
					  "restart it",
					  path, GW_KEYS_MAX);
		}
	for (size_t i = 0; i < n; i++) {
		g->keys[i].tenant = tenant_of(g, names[i]);
		memcpy(g->keys[i].hash, hashes[i], sizeof(hashes[i]));
	}
	g->nkeys = n;
	return AL_OK;
}

struct gw_tenant *gw_auth(struct gw *g, const char *authorization)
{
	unsigned char h[SHA256_DIGEST_LENGTH];
	const char *tok;
	struct gw_tenant *found = NULL;

	if (!authorization || strncasecmp(authorization, "Bearer ", 7))
		return NULL;
	tok = authorization + 7;
	while (*tok == ' ')
		tok++;
	if (!*tok)
		return NULL;
	SHA256((const unsigned char *)tok, strlen(tok), h);
	/* every entry, each in constant time: the time says nothing of which */
	for (size_t i = 0; i < g->nkeys; i++)
		if (CRYPTO_memcmp(h, g->keys[i].hash, sizeof(h)) == 0 && !found)
			found = g->keys[i].tenant;
	return found;
}
