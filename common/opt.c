/* opt.c - options from one table (see opt.h). */
#include "opt.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

#define OPTS_MAX 64

bool al_parse_u64(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long x;
	char *end;

	if (!v || *v < '0' || *v > '9') /* no sign, no space, not empty */
		return false;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || *end || x < min || x > max)
		return false;
	*out = x;
	return true;
}

static bool one_of(const char *choices, const char *v)
{
	size_t n = strlen(v);

	for (const char *p = choices; p && *p;) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);

		if (len == n && !strncmp(p, v, n))
			return true;
		p = bar ? bar + 1 : NULL;
	}
	return false;
}

int al_opt_set(const struct al_opt *o, void *settings, const char *v, struct al_err *err)
{
	char *at = (char *)settings + o->off;
	uint64_t n, scale = o->scale ? o->scale : 1;

	switch (o->kind) {
	case AL_OPT_STR:
		if (!v || !*v)
			return al_err_set(err, AL_EINVAL, "--%s: expected a value, got nothing",
					  o->name);
		*(const char **)at = v;
		return AL_OK;
	case AL_OPT_FLAG:
		if (v && !one_of("1|true|yes|on", v) && !one_of("0|false|no|off", v))
			return al_err_set(err, AL_EINVAL,
					  "--%s: expected true or false, got \"%s\"", o->name, v);
		*(bool *)at = !v || one_of("1|true|yes|on", v);
		return AL_OK;
	case AL_OPT_ONEOF:
		if (!v || !one_of(o->choices, v))
			return al_err_set(err, AL_EINVAL, "--%s: expected one of %s, got \"%s\"",
					  o->name, o->choices, v ? v : "");
		*(const char **)at = v;
		return AL_OK;
	case AL_OPT_U64:
	case AL_OPT_UINT:
		if (!al_parse_u64(v, o->min, o->max, &n) ||
		    (o->kind == AL_OPT_UINT && n * scale > 0xffffffffull))
			return al_err_set(err, AL_EINVAL,
					  "--%s: expected a whole number in %llu..%llu, got \"%s\"",
					  o->name, (unsigned long long)o->min,
					  (unsigned long long)o->max, v ? v : "");
		if (o->kind == AL_OPT_U64)
			*(uint64_t *)at = n * scale;
		else
			*(unsigned *)at = (unsigned)(n * scale);
		return AL_OK;
	}
	return al_err_set(err, AL_EINVAL, "--%s: unknown kind of option", o->name);
}

const struct al_opt *al_opt_find(const struct al_opt *table, const char *name)
{
	for (const struct al_opt *o = table; o->name; o++)
		if (!strcmp(o->name, name))
			return o;
	return NULL;
}

int al_opts_parse(const struct al_opt *table, void *settings, int argc, char **argv,
		  struct al_err *err)
{
	struct option lo[OPTS_MAX + 1];
	int n = 0, c, idx, rc;

	for (const struct al_opt *o = table; o->name; o++) {
		const char *v = al_opt_env(o->name, NULL);

		if (n == OPTS_MAX)
			return al_err_set(err, AL_EINVAL, "more than %d options", OPTS_MAX);
		if (v && (rc = al_opt_set(o, settings, v, err)))
			return rc;
		lo[n] = (struct option){
		    o->name, o->kind == AL_OPT_FLAG ? no_argument : required_argument, NULL, 0};
		n++;
	}
	lo[n] = (struct option){NULL, 0, NULL, 0};
	optind = 1;
	opterr = 0;
	/* ":" first: a missing value is ':' and an unknown option '?' */
	while ((c = getopt_long(argc, argv, ":", lo, &idx)) != -1) {
		if (c == ':')
			return al_err_set(err, AL_EINVAL, "%s: expected a value after it",
					  argv[optind - 1]);
		if (c == '?')
			return al_err_set(err, AL_EINVAL, "%s: unknown option", argv[optind - 1]);
		if ((rc = al_opt_set(&table[idx], settings, optarg, err)))
			return rc;
	}
	if (optind < argc)
		return al_err_set(err, AL_EINVAL, "unexpected argument \"%s\"", argv[optind]);
	return AL_OK;
}

void al_opts_usage(FILE *f, const struct al_opt *table)
{
	for (const struct al_opt *o = table; o->name; o++) {
		char head[64];
		const char *h = o->help;

		if (!h)
			continue;
		snprintf(head, sizeof(head), "--%s%s%s", o->name, o->value ? " " : "",
			 o->value ? o->value : "");
		if (strlen(head) > 20)
			fprintf(f, "  %s\n%24s", head, "");
		else
			fprintf(f, "  %-20s  ", head);
		for (;;) {
			size_t n = strcspn(h, "\n");

			fprintf(f, "%.*s\n", (int)n, h);
			if (!h[n])
				break;
			h += n + 1;
			fprintf(f, "%24s", "");
		}
	}
}
