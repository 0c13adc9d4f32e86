/* policy.c - the operator's policy as a model: looking up tiers and
 * tenants, and freeing it (loaded by policy_load.c, applied by admit.c). */
#include "policy.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

void al_policy_free(struct al_policy *pol)
{
	if (!pol)
		return;
	for (size_t i = 0; pol->tiers && i < pol->ntiers; i++) {
		struct al_tier_policy *t = &pol->tiers[i];

		free(t->name);
		free(t->backend);
		free(t->image);
		free(t->egress_rules);
		free(t->egress_ca_file);
		for (size_t j = 0; j < t->nimages; j++)
			free(t->images[j]);
		free(t->guest);
		free(t->snapshot_dir);
		free(t->vm_network);
		free(t->oci_runtime);
		free(t->oci_platform);
		for (size_t j = 0; j < t->nenv; j++) {
			free(t->env[j].key);
			free(t->env[j].value);
		}
		free(t->env);
		for (size_t j = 0; j < t->ncallback_hosts; j++)
			free(t->callback_hosts[j]);
		free(t->callback_hosts);
		for (size_t j = 0; j < t->nbinds; j++)
			free(t->binds[j]);
	}
	free(pol->tiers);
	for (size_t i = 0; pol->tenants && i < pol->ntenants; i++)
		free(pol->tenants[i].name);
	free(pol->tenants);
	free(pol->source);
	for (size_t i = 0; i < pol->nlanguages; i++) {
		struct al_language *l = &pol->languages[i];

		free(l->name);
		free(l->image);
		free(l->source);
		for (size_t j = 0; j < l->nbuild; j++)
			free(l->build[j]);
		free(l->build);
		for (size_t j = 0; j < l->nrun; j++)
			free(l->run[j]);
		free(l->run);
	}
	free(pol->languages);
	memset(pol, 0, sizeof(*pol));
}

/* The built-in languages: what the catalogue's images (deploy/images/
 * recipes) compile and run; a policy's `languages:` adds or replaces. */
/* the table is never written: its literals stand in char * fields */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#define A(...) ((char *[]){__VA_ARGS__})
#define N(...) (sizeof((char *[]){__VA_ARGS__}) / sizeof(char *))
#define LANG(nm, img, src, b, nb, r, nr)                                                           \
	{                                                                                          \
		(char *)nm, (char *)img, b, nb, r, nr, (char *)src, (nb) ? BUILD_WALL_MS : 0,      \
		    (nb) ? BUILD_MEMORY : 0                                                        \
	}
/* a compiled language's build: a minute and 512 MiB (each at most the
 * tier's maximum), whatever its tests' limits */
#define BUILD_WALL_MS 60000
#define BUILD_MEMORY  (512ull << 20)
static const struct al_language builtin_languages[] = {
    LANG("c11", "toolchain", "main.c",
	 A("gcc", "-std=c11", "-O2", "-pipe", "-o", "main", "main.c", "-lm"),
	 N("gcc", "-std=c11", "-O2", "-pipe", "-o", "main", "main.c", "-lm"), A("./main"), 1),
    LANG("cpp17", "toolchain", "main.cpp",
	 A("g++", "-std=c++17", "-O2", "-pipe", "-o", "main", "main.cpp"),
	 N("g++", "-std=c++17", "-O2", "-pipe", "-o", "main", "main.cpp"), A("./main"), 1),
    LANG("cpp20", "toolchain", "main.cpp",
	 A("g++", "-std=c++20", "-O2", "-pipe", "-o", "main", "main.cpp"),
	 N("g++", "-std=c++20", "-O2", "-pipe", "-o", "main", "main.cpp"), A("./main"), 1),
    LANG("python3", "python", "main.py", NULL, 0, A("python3", "main.py"), 2),
    LANG("node", "node", "main.js", NULL, 0, A("node", "main.js"), 2),
    LANG("go", "go", "main.go", A("go", "build", "-o", "main", "main.go"),
	 N("go", "build", "-o", "main", "main.go"), A("./main"), 1),
    LANG("rust", "rust", "main.rs", A("rustc", "-O", "-o", "main", "main.rs"),
	 N("rustc", "-O", "-o", "main", "main.rs"), A("./main"), 1),
};
#pragma GCC diagnostic pop
#undef A
#undef N
#undef LANG
#undef BUILD_WALL_MS
#undef BUILD_MEMORY

const struct al_language *al_policy_language(const struct al_policy *pol, const char *name)
{
	for (size_t i = 0; pol && i < pol->nlanguages; i++)
		if (!strcmp(pol->languages[i].name, name))
			return &pol->languages[i];
	for (size_t i = 0; i < sizeof(builtin_languages) / sizeof(builtin_languages[0]); i++)
		if (!strcmp(builtin_languages[i].name, name))
			return &builtin_languages[i];
	return NULL;
}

void al_policy_language_names(const struct al_policy *pol, char *out, size_t n)
{
	size_t k = 0;

	out[0] = '\0';
	for (size_t i = 0; pol && i < pol->nlanguages && k < n; i++)
		k +=
		    (size_t)snprintf(out + k, n - k, "%s%s", k ? ", " : "", pol->languages[i].name);
	for (size_t i = 0; i < sizeof(builtin_languages) / sizeof(builtin_languages[0]) && k < n;
	     i++) {
		bool own = false;

		for (size_t j = 0; pol && j < pol->nlanguages; j++)
			own |= !strcmp(pol->languages[j].name, builtin_languages[i].name);
		if (!own)
			k += (size_t)snprintf(out + k, n - k, "%s%s", k ? ", " : "",
					      builtin_languages[i].name);
	}
}

const struct al_tier_policy *al_policy_tier(const struct al_policy *pol, const char *name)
{
	for (size_t i = 0; i < pol->ntiers; i++)
		if (pol->tiers[i].name && !strcmp(pol->tiers[i].name, name))
			return &pol->tiers[i];
	return NULL;
}

const struct al_tenant_policy *al_policy_tenant(const struct al_policy *pol, const char *name)
{
	static const struct al_tenant_policy unlimited = {.name = (char *)"default",
							  .max_priority = AL_PRIORITY_MAX};
	const struct al_tenant_policy *def = NULL;

	for (size_t i = 0; i < pol->ntenants; i++) {
		if (!strcmp(pol->tenants[i].name, name))
			return &pol->tenants[i];
		if (!strcmp(pol->tenants[i].name, "default"))
			def = &pol->tenants[i];
	}
	return def ? def : &unlimited;
}

int al_tier_image_index(const struct al_tier_policy *t, const char *name)
{
	for (size_t i = 0; i < t->nimages; i++)
		if (!strcmp(t->images[i], name))
			return (int)i;
	return -1;
}
