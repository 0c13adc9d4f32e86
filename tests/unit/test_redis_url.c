/* test_redis_url.c - Redis addresses (client/redis_url.h): plain, unix and
 * Sentinel URLs, their credentials and databases, and each malformed one
 * refused with what is wrong. */
#include <string.h>

#include "../../common/redis_url.h"
#include "tap.h"

static void bad(const char *url, const char *needle)
{
	struct al_redis_url u;
	struct al_err err = {0};

	TAP_OK(al_redis_url_parse(url, &u, &err) == AL_EINVAL, "refused: %s", url);
	TAP_CONTAINS(err.msg, needle, "...saying so");
}

int main(void)
{
	struct al_redis_url u;
	struct al_err err = {0};
	char where[300];

	/* an error quotes the URL, never its password */
	TAP_OK(al_redis_url_parse("redis://u:hunter2@h:notaport", &u, &err) == AL_EINVAL &&
		   !strstr(err.msg, "hunter2") && strstr(err.msg, "u:***@"),
	       "a refused URL's error hides its password: %s", err.msg);
	TAP_OK(al_redis_url_parse("unix:///r.sock?password=hunter2&bogus=1", &u, &err) ==
		       AL_EINVAL &&
		   !strstr(err.msg, "hunter2"),
	       "...and a password= in its query: %s", err.msg);
	memset(&err, 0, sizeof(err));

	TAP_OK(!al_redis_url_parse("redis://u1:p@ss@10.0.0.1:6380/2", &u, &err) &&
		   !strcmp(u.host, "10.0.0.1") && u.port == 6380 && u.db == 2 &&
		   !strcmp(u.user, "u1") && !strcmp(u.password, "p@ss") && !u.nsentinels,
	       "redis://user:password@host:port/db (a password may hold '@')");
	TAP_OK(!al_redis_url_parse("unix:///run/r.sock?user=w&password=x&db=3", &u, &err) &&
		   !strcmp(u.path, "/run/r.sock") && !strcmp(u.user, "w") && u.db == 3,
	       "unix:///path?user&password&db");
	TAP_OK(!al_redis_url_parse("redis+sentinel://worker:pw@h1:26380,h2,10.1.2.3:5000/mymaster/1"
				   "?sentinel_password=sp",
				   &u, &err) &&
		   u.nsentinels == 3 && !strcmp(u.sentinels[0].host, "h1") &&
		   u.sentinels[0].port == 26380 && u.sentinels[1].port == 26379 &&
		   !strcmp(u.sentinels[2].host, "10.1.2.3") && u.sentinels[2].port == 5000 &&
		   !strcmp(u.master, "mymaster") && u.db == 1 && !strcmp(u.user, "worker") &&
		   !strcmp(u.password, "pw") && !strcmp(u.sentinel_password, "sp") && !u.host[0],
	       "redis+sentinel://user:pw@h1:p1,h2,h3:p3/master/db?sentinel_password (%s)", err.msg);
	al_redis_url_where(&u, where, sizeof(where));
	TAP_CONTAINS(where, "master mymaster of sentinel h1:26380",
		     "before a sentinel answered, where says which master");
	bad("redis+sentinel://h1:26379", "no master name");
	bad("redis+sentinel:///mymaster", "no sentinel");
	bad("redis+sentinel://h1:0/m", "bad sentinel port");
	bad("redis+sentinel://h1:x/m", "bad sentinel port");
	bad("redis+sentinel://h1,,h2/m", "empty sentinel host");
	bad("redis+sentinel://h1:1,h2:2,h3:3,h4:4,h5:5,h6:6,h7:7,h8:8,h9:9/m", "more than 8");
	bad("redis+sentinel://h1/", "missing master name");
	bad("redis+sentinel://h1/m?colour=red",
	    "use user, password, db, min_replicas, replica_timeout_ms, sentinel_user");
	TAP_OK(!al_redis_url_parse("redis://h/0?min_replicas=1&replica_timeout_ms=250", &u, &err) &&
		   u.min_replicas == 1 && u.replica_timeout_ms == 250,
	       "?min_replicas&replica_timeout_ms (durability across a failover)");
	TAP_OK(!al_redis_url_parse("redis://h", &u, &err) && u.min_replicas == 0 &&
		   u.replica_timeout_ms == 1000,
	       "...off by default, a second's wait when on");
	bad("redis://h?min_replicas=-1", "min_replicas: expected a number, 0..600000");
	bad("redis://h?replica_timeout_ms=0", "replica_timeout_ms: expected a number, 1..600000");
	bad("redis://h?sentinel_password=x", "unknown parameter \"sentinel_password\"");
	bad("redis://h:99999", "bad port");
	bad("rediss://h", "expected redis://host:port, redis+sentinel://");
	bad("", "empty");
	return tap_done();
}
