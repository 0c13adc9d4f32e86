/* opt.h - a daemon's options from one table: each option's name, kind,
 * range and place in the daemon's settings struct, applied alike to
 * AIRLOCK_<NAME> in the environment (env.h) and to --name flags (a flag
 * wins). Numbers are whole decimals in their range, checked for overflow:
 * "99999999999999999999", "", "-1", "5x" and " 5" are refused, saying what
 * was expected. */
#ifndef AL_OPT_H
#define AL_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../proto/err.h"

enum al_opt_kind {
	AL_OPT_STR,   /* const char *: the value itself (argv or environ outlive it) */
	AL_OPT_U64,   /* uint64_t: a number in min..max, stored times scale */
	AL_OPT_UINT,  /* unsigned: the same */
	AL_OPT_FLAG,  /* bool: set by --name alone (AIRLOCK_NAME=1/true/yes) */
	AL_OPT_ONEOF, /* const char *: one of choices ("on|off") */
};

struct al_opt {
	const char *name; /* --name, AIRLOCK_NAME */
	enum al_opt_kind kind;
	size_t off;	     /* offsetof(settings struct, its field) */
	uint64_t min, max;   /* numbers: the range of the value given */
	uint64_t scale;	     /* numbers: stored as value * scale (0: 1); s -> ms is 1000 */
	const char *choices; /* AL_OPT_ONEOF: "a|b|c" */
	/* the usage text (al_opts_usage): the value's name (NULL: a flag) and
	 * what it does; no help: not listed (an
	 * option kept only to be refused, saying why) */
	const char *value, *help;
};

/* A whole decimal number in min..max into *out; false (and *out untouched)
 * for anything else. */
bool al_parse_u64(const char *v, uint64_t min, uint64_t max, uint64_t *out);

/* Set one option from text v (NULL for a flag): AL_OK, or AL_EINVAL with
 * "--name: expected ..., got \"v\"" in err. */
int al_opt_set(const struct al_opt *o, void *settings, const char *v, struct al_err *err);

/* The option of table named name, or NULL (a config file's keys). */
const struct al_opt *al_opt_find(const struct al_opt *table, const char *name);

/* The options of table (ended by a NULL name) from the environment, then
 * from argv's flags. AL_OK; AL_EINVAL with err for a bad value, an unknown
 * flag, a missing value or a positional argument. */
int al_opts_parse(const struct al_opt *table, void *settings, int argc, char **argv,
		  struct al_err *err);

/* The options of table with a help, one "  --name VALUE  help" each, the
 * help's further lines beneath its first: the usage text is the parser's
 * own table, so the two cannot drift. */
void al_opts_usage(FILE *f, const struct al_opt *table);

#endif
