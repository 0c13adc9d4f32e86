/* policy.c - the operator's policy as a model: looking up tiers and
 * tenants, and freeing it (loaded by policy_load.c, applied by admit.c). */
#include "policy.h"

#include <stdlib.h>
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
		free(t->vm_network);
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
	memset(pol, 0, sizeof(*pol));
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
