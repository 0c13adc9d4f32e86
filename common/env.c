/* env.c - see env.h. */
#include "env.h"

#include <stdio.h>
#include <stdlib.h>

const char *al_opt_env(const char *name, const char *dflt)
{
	char env[64], *p;
	const char *v;

	if (snprintf(env, sizeof(env), "AIRLOCK_%s", name) >= (int)sizeof(env))
		return dflt;
	for (p = env; *p; p++)
		*p = *p == '-' ? '_' : (char)((*p >= 'a' && *p <= 'z') ? *p - 32 : *p);
	v = getenv(env);
	return v && *v ? v : dflt;
}
