/* test_opt.c - options from one table (common/opt.c): the strict number
 * parser, each kind, the environment under the flags, and every bad input
 * refused with the option's name. */
#include <stdlib.h>
#include <string.h>

#include "../../common/opt.h"
#include "tap.h"

struct conf {
	const char *url, *mode;
	uint64_t ttl_ms;
	unsigned slots;
	bool check;
};

#define S(f) offsetof(struct conf, f)
static const struct al_opt table[] = {
    {"url", AL_OPT_STR, S(url), 0, 0, 0, NULL, "URL", "where"},
    {"mode", AL_OPT_ONEOF, S(mode), 0, 0, 0, "on|off", "on|off", "a mode"},
    {"ttl-s", AL_OPT_U64, S(ttl_ms), 1, 86400, 1000, NULL, "N", "how long\n(default 1)"},
    {"slots", AL_OPT_UINT, S(slots), 1, 256, 0, NULL, NULL, NULL},
    {"check", AL_OPT_FLAG, S(check), 0, 0, 0, NULL, NULL, "check, and exit"},
    {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
#undef S

static int parse(struct conf *c, struct al_err *err, int argc, const char **argv)
{
	memset(c, 0, sizeof(*c));
	memset(err, 0, sizeof(*err));
	return al_opts_parse(table, c, argc, (char **)argv, err);
}

int main(void)
{
	static const struct {
		const char *v;
		bool ok;
		uint64_t want;
	} nums[] = {
	    {"0", true, 0},
	    {"42", true, 42},
	    {"18446744073709551615", true, UINT64_MAX},
	    {"18446744073709551616", false, 0},
	    {"99999999999999999999", false, 0},
	    {"", false, 0},
	    {"-1", false, 0},
	    {"+1", false, 0},
	    {" 5", false, 0},
	    {"5 ", false, 0},
	    {"5x", false, 0},
	    {"0x10", false, 0},
	};
	struct conf c;
	struct al_err err;
	uint64_t v;

	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		v = 7;
		TAP_OK(al_parse_u64(nums[i].v, 0, UINT64_MAX, &v) == nums[i].ok &&
			   v == (nums[i].ok ? nums[i].want : 7),
		       "\"%s\" is %s", nums[i].v, nums[i].ok ? "a number" : "refused, untouched");
	}
	TAP_OK(!al_parse_u64("10", 11, 20, &v) && !al_parse_u64("21", 11, 20, &v) &&
		   al_parse_u64("20", 11, 20, &v) && v == 20,
	       "the range is inclusive, and checked");

	unsetenv("AIRLOCK_URL");
	TAP_OK(parse(&c, &err, 7,
		     (const char *[]){"d", "--url", "redis://x", "--ttl-s", "60", "--check",
				      "--mode=off", NULL}) == AL_OK &&
		   !strcmp(c.url, "redis://x") && c.ttl_ms == 60000 && c.check &&
		   !strcmp(c.mode, "off"),
	       "each kind: a string, a number scaled (s to ms), a flag, one of a set");
	setenv("AIRLOCK_URL", "from-env", 1);
	setenv("AIRLOCK_SLOTS", "4", 1);
	TAP_OK(parse(&c, &err, 1, (const char *[]){"d", NULL}) == AL_OK &&
		   !strcmp(c.url, "from-env") && c.slots == 4,
	       "AIRLOCK_<NAME> sets an option");
	TAP_OK(parse(&c, &err, 3, (const char *[]){"d", "--url", "flag", NULL}) == AL_OK &&
		   !strcmp(c.url, "flag") && c.slots == 4,
	       "a flag wins over the environment");
	setenv("AIRLOCK_SLOTS", "999", 1);
	TAP_OK(parse(&c, &err, 1, (const char *[]){"d", NULL}) == AL_EINVAL &&
		   strstr(err.msg, "--slots: expected a whole number in 1..256, got \"999\""),
	       "a bad value in the environment is refused too: %s", err.msg);
	unsetenv("AIRLOCK_SLOTS");
	unsetenv("AIRLOCK_URL");
	TAP_OK(parse(&c, &err, 3, (const char *[]){"d", "--ttl-s", "99999999999999999999", NULL}) ==
		       AL_EINVAL &&
		   strstr(err.msg, "--ttl-s: expected a whole number in 1..86400"),
	       "an overflowing number is refused, not taken as the largest: %s", err.msg);
	TAP_OK(parse(&c, &err, 3, (const char *[]){"d", "--slots", "", NULL}) == AL_EINVAL,
	       "an empty number is refused, not taken as 0");
	TAP_OK(parse(&c, &err, 3, (const char *[]){"d", "--mode", "maybe", NULL}) == AL_EINVAL &&
		   strstr(err.msg, "expected one of on|off, got \"maybe\""),
	       "a value outside its set is refused, naming the set");
	TAP_OK(parse(&c, &err, 3, (const char *[]){"d", "--url", "", NULL}) == AL_EINVAL,
	       "an empty string value is refused");
	TAP_OK(parse(&c, &err, 2, (const char *[]){"d", "--nope", NULL}) == AL_EINVAL &&
		   strstr(err.msg, "--nope: unknown option"),
	       "an unknown flag is refused: %s", err.msg);
	TAP_OK(parse(&c, &err, 2, (const char *[]){"d", "--url", NULL}) == AL_EINVAL &&
		   strstr(err.msg, "--url: expected a value after it"),
	       "a flag missing its value is refused, saying so: %s", err.msg);
	TAP_OK(parse(&c, &err, 2, (const char *[]){"d", "stray", NULL}) == AL_EINVAL &&
		   strstr(err.msg, "unexpected argument \"stray\""),
	       "a stray argument is refused");
	{
		char *text = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&text, &n);

		al_opts_usage(f, table);
		fclose(f);
		TAP_OK(text && !strcmp(text, "  --url URL             where\n"
					     "  --mode on|off         a mode\n"
					     "  --ttl-s N             how long\n"
					     "                        (default 1)\n"
					     "  --check               check, and exit\n"),
		       "the usage text is the table's: each option with its help, further lines "
		       "beneath, none without a help");
		if (text && strncmp(text, "  --url", 7))
			fprintf(stderr, "# got:\n%s", text);
		free(text);
	}
	return tap_done();
}
