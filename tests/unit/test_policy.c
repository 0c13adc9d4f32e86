/* test_policy.c - the policy loader's limits on what a policy may define:
 * at most AL_TIERS_MAX tiers (a worker serves them all), no tier or tenant
 * defined twice; the hash that tells two daemons' policies apart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_file.h"
#include "tap.h"

/* A policy with n tiers t1..tn on the process backend. */
static char *tiers_policy(int n)
{
	size_t cap = 64 + (size_t)n * 64, len = 0;
	char *s = malloc(cap);

	if (!s)
		return NULL;
	len += (size_t)snprintf(s + len, cap - len, "tiers:\n");
	for (int i = 1; i <= n; i++)
		len += (size_t)snprintf(s + len, cap - len, "  t%d: {backend: process}\n", i);
	return s;
}

int main(void)
{
	struct al_policy pol = {0};
	struct al_err err = {0};
	char *text;

	text = tiers_policy(AL_TIERS_MAX);
	TAP_OK(text && load_policy_text(text, &pol, &err) == 0 && pol.ntiers == AL_TIERS_MAX,
	       "%d tiers load", AL_TIERS_MAX);
	al_policy_free(&pol);
	free(text);
	memset(&err, 0, sizeof(err));
	text = tiers_policy(AL_TIERS_MAX + 1);
	TAP_OK(text && load_policy_text(text, &pol, &err) == AL_EINVAL &&
		   strstr(err.msg, "tiers: 65 defined, at most 64"),
	       "%d tiers are refused at load, saying the cap: %s", AL_TIERS_MAX + 1, err.msg);
	free(text);
	memset(&err, 0, sizeof(err));
	TAP_OK(load_policy_text("tiers:\n  a: {backend: process}\n  a: {backend: process}\n", &pol,
				&err) == AL_EINVAL &&
		   strstr(err.msg, "tier \"a\" is defined twice"),
	       "a tier defined twice is refused: %s", err.msg);
	memset(&err, 0, sizeof(err));
	TAP_OK(load_policy_text("tiers:\n  a: {backend: process}\ntenants:\n  acme: {max_queued: "
				"5}\n  acme: {max_queued: 500}\n",
				&pol, &err) == AL_EINVAL &&
		   strstr(err.msg, "tenant \"acme\" is defined twice"),
	       "a tenant defined twice is refused (it silently took the first): %s", err.msg);
	memset(&err, 0, sizeof(err));
	TAP_OK(load_policy_text("tiers:\n  a: {backend: process}\ntenants:\n  acme: {max_queued: "
				"5}\n  beta: {max_queued: 500}\n",
				&pol, &err) == 0 &&
		   pol.ntenants == 2,
	       "two different tenants load");
	al_policy_free(&pol);

	/* sessions: {...}: defaults, each key's range, unknown keys, a map */
	memset(&err, 0, sizeof(err));
	TAP_OK(load_policy_text(
		   "tiers:\n  a: {backend: process, sessions: {}}\n  b: {backend: "
		   "process, sessions: {max_per_tenant: 2, idle_s: 5, max_life_s: "
		   "60, cpu_budget_s: 30, max_paused_per_tenant: 3, paused_max_s: 60, "
		   "on_idle: pause}, snapshot_dir: /srv/snaps}\n  c: {backend: process}\n",
		   &pol, &err) == 0 &&
		   pol.tiers[0].sessions.on && pol.tiers[0].sessions.max_per_tenant == 4 &&
		   pol.tiers[0].sessions.max_paused_per_tenant == 16 &&
		   pol.tiers[0].sessions.paused_max_ms == 7 * 86400000ull &&
		   !pol.tiers[0].sessions.pause_on_idle && !pol.tiers[0].snapshot_dir &&
		   pol.tiers[1].sessions.max_paused_per_tenant == 3 &&
		   pol.tiers[1].sessions.paused_max_ms == 60000 &&
		   pol.tiers[1].sessions.pause_on_idle &&
		   !strcmp(pol.tiers[1].snapshot_dir, "/srv/snaps") &&
		   pol.tiers[0].sessions.idle_ms == 600000 &&
		   pol.tiers[0].sessions.max_life_ms == 3600000 &&
		   pol.tiers[1].sessions.max_per_tenant == 2 &&
		   pol.tiers[1].sessions.idle_ms == 5000 &&
		   pol.tiers[1].sessions.max_life_ms == 60000 &&
		   pol.tiers[0].sessions.cpu_budget_ms == 0 &&
		   pol.tiers[1].sessions.cpu_budget_ms == 30000 && !pol.tiers[2].sessions.on,
	       "sessions: {} takes the defaults (4, 600 s, 3600 s, no CPU budget; 16 paused for "
	       "a week, idle ends), given keys theirs (snapshot_dir too); a tier without it "
	       "has none: %s",
	       err.msg);
	al_policy_free(&pol);
	{
		static const struct {
			const char *yaml, *want;
		} bad[] = {
		    {"sessions: {idle: 5}",
		     "sessions: unknown key \"idle\"; use max_per_tenant, "
		     "idle_s, max_life_s, cpu_budget_s, life_s, max_idle_s, memory_bytes, "
		     "max_paused_per_tenant, paused_max_s or on_idle"},
		    {"sessions: {on_idle: sleep}", "sessions.on_idle: expected pause or end"},
		    {"sessions: {paused_max_s: 0}", "sessions.paused_max_s: expected 1..7776000"},
		    {"sessions: {max_paused_per_tenant: 100001}",
		     "sessions.max_paused_per_tenant: expected 0..100000"},
		    {"snapshot_dir: snaps", "snapshot_dir: expected an absolute path"},
		    {"sessions: {cpu_budget_s: 0}", "sessions.cpu_budget_s: expected 1..604800"},
		    {"sessions: {life_s: 7200}",
		     "sessions.life_s: 7200 s is past max_life_s (3600 s)"},
		    {"sessions: {idle_s: 60, max_idle_s: 30}",
		     "idle_s: 60 s is past max_idle_s (30 s)"},
		    {"sessions: {max_per_tenant: 0}", "sessions.max_per_tenant: expected 1..10000"},
		    {"sessions: {idle_s: 99999999}", "sessions.idle_s: expected 1..604800"},
		    {"sessions: {max_life_s: -1}", "max_life_s"},
		    {"sessions: true", "sessions"},
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char yaml[256];

			memset(&err, 0, sizeof(err));
			snprintf(yaml, sizeof(yaml), "tiers:\n  a: {backend: process, %s}\n",
				 bad[i].yaml);
			TAP_OK(load_policy_text(yaml, &pol, &err) == AL_EINVAL &&
				   strstr(err.msg, bad[i].want),
			       "%s is refused: %s", bad[i].yaml, err.msg);
		}
	}
	{ /* the policy hash: the same text, the same hash; one byte more, another */
		struct al_policy a = {0}, b = {0}, c = {0}, builtin = {0};
		static const char yaml[] = "tiers:\n  a: {backend: process}\n";
		char big[1200000];

		memset(&err, 0, sizeof(err));
		TAP_OK(load_policy_text(yaml, &a, &err) == 0 &&
			   load_policy_text(yaml, &b, &err) == 0 &&
			   load_policy_text("tiers:\n  a: {backend: process} \n", &c, &err) == 0 &&
			   strlen(a.hash) == 16 && strspn(a.hash, "0123456789abcdef") == 16 &&
			   !strcmp(a.hash, b.hash) && strcmp(a.hash, c.hash),
		       "the hash: 16 hex digits, the same for the same text (%s), another for a "
		       "space more (%s)",
		       a.hash, c.hash);
		TAP_OK(al_policy_load(NULL, &builtin, &err) == 0 && strlen(builtin.hash) == 16 &&
			   strcmp(builtin.hash, a.hash),
		       "the built-in policy has its own hash (%s)", builtin.hash);
		al_policy_free(&a);
		al_policy_free(&b);
		al_policy_free(&c);
		al_policy_free(&builtin);
		memset(big, ' ', sizeof(big) - 1);
		big[sizeof(big) - 1] = 0;
		memcpy(big, yaml, sizeof(yaml) - 1);
		memset(&err, 0, sizeof(err));
		TAP_OK(load_policy_text(big, &a, &err) == AL_EINVAL &&
			   strstr(err.msg, "over 1 MiB"),
		       "a policy file over 1 MiB is refused: %s", err.msg);
	}
	return tap_done();
}
