/* policy_yaml.c - the policy file's YAML values read and checked: a
 * scalar, a non-negative integer, a boolean, a string, a mapping; each
 * error naming the file's line (al_pol_fail). Below policy_tier.c and
 * policy_load.c, which call it. */
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

int al_pol_fail(struct ctx *c, yaml_node_t *n, const char *fmt, ...)
{
	char msg[AL_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return al_err_set(c->err, AL_EINVAL, "%s:%zu: %s", c->file, n ? n->start_mark.line + 1 : 0,
			  msg);
}

const char *al_pol_scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int al_pol_u64(struct ctx *c, yaml_node_t *n, const char *what, uint64_t *out)
{
	const char *s = al_pol_scalar(n);
	char *end;

	if (!s || !*s || *s == '-')
		return al_pol_fail(c, n, "%s: expected a non-negative integer", what);
	errno = 0;
	*out = strtoull(s, &end, 10);
	if (errno || *end)
		return al_pol_fail(c, n, "%s: \"%s\" is not a non-negative integer", what, s);
	return AL_OK;
}

int al_pol_bool(struct ctx *c, yaml_node_t *n, const char *what, bool *out)
{
	const char *s = al_pol_scalar(n);

	if (s && (!strcmp(s, "true") || !strcmp(s, "yes")))
		*out = true;
	else if (s && (!strcmp(s, "false") || !strcmp(s, "no")))
		*out = false;
	else
		return al_pol_fail(c, n, "%s: expected true or false", what);
	return AL_OK;
}

int al_pol_str(struct ctx *c, yaml_node_t *n, const char *what, char **out)
{
	const char *s = al_pol_scalar(n);

	if (!s)
		return al_pol_fail(c, n, "%s: expected a string", what);
	free(*out);
	*out = strdup(s);
	return *out ? AL_OK : al_err_set(c->err, AL_ENOMEM, "policy: out of memory");
}

int al_pol_map(struct ctx *c, yaml_node_t *n, const char *what)
{
	if (!n || n->type != YAML_MAPPING_NODE)
		return al_pol_fail(c, n, "%s: expected a mapping (key: value lines)", what);
	return AL_OK;
}
