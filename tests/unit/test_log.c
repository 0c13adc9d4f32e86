/* test_log.c - no credential reaches a daemon's log (common/log.h): the
 * password of a URL's userinfo and every password=/pass= value, whatever
 * the URL scheme; what is not a credential stays as it was. */
#include <stdio.h>
#include <string.h>

#include "../../common/log.h"
#include "tap.h"

static const struct {
	const char *in, *out;
} cases[] = {
    {"redis=redis://airlock-worker:s3cret@127.0.0.1:6379/0",
     "redis=redis://airlock-worker:***@127.0.0.1:6379/0"},
    {"redis=rediss://u:p%40ss@host:6380", "redis=rediss://u:***@host:6380"},
    {"redis=redis+sentinel://u:pw@h1:26379,h2:26379/mymaster?sentinel_password=sp&x=1",
     "redis=redis+sentinel://u:***@h1:26379,h2:26379/mymaster?sentinel_password=***&x=1"},
    {"redis=redis://:onlypass@h:1", "redis=redis://:***@h:1"},
    {"redis=unix:///run/redis.sock?password=pw2&db=1",
     "redis=unix:///run/redis.sock?password=***&db=1"},
    {"url=redis://h:6379/0 pass=abc next=1", "url=redis://h:6379/0 pass=*** next=1"},
    {"PASSWORD=Xy done", "PASSWORD=*** done"},
    {"two: redis://a:b@h redis://c:d@h", "two: redis://a:***@h redis://c:***@h"},
    /* not credentials: unchanged */
    {"redis=redis://h:6379/0", "redis=redis://h:6379/0"},
    {"redis=redis://user@h:6379", "redis=redis://user@h:6379"},
    {"bypass=1 compass=2", "bypass=1 compass=2"},
    {"job=abc status=ok", "job=abc status=ok"},
    {"", ""},
};

int main(void)
{
	char out[256], small[8];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		al_log_redact(cases[i].in, out, sizeof(out));
		TAP_OK(!strcmp(out, cases[i].out), "\"%s\" -> \"%s\" (got \"%s\")", cases[i].in,
		       cases[i].out, out);
	}
	al_log_redact("redis://u:secretsecret@h", small, sizeof(small));
	TAP_OK(strlen(small) < sizeof(small) && !strstr(small, "secret"),
	       "a short buffer is cut, terminated, and holds no part of the password: \"%s\"",
	       small);
	return tap_done();
}
