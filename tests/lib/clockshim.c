/* clockshim.c - a fault injector for tests (not a mock of anything): with
 * LD_PRELOAD, the process's wall clock (clock_gettime CLOCK_REALTIME*,
 * gettimeofday, time) runs ahead or behind by the milliseconds written in
 * the file $AIRLOCK_CLOCK_SHIM, re-read every 50 ms, so a test steps one
 * process's clock while it runs, as an NTP step or an operator would. The
 * monotonic clock is left alone. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

typedef int (*cg_fn)(clockid_t, struct timespec *);

static cg_fn real_cg(void)
{
	static cg_fn fn;

	if (!fn)
		fn = (cg_fn)dlsym(RTLD_NEXT, "clock_gettime");
	return fn;
}

static long long offset_ms(void)
{
	static long long off, at_ms = -1000;
	struct timespec m;
	long long now;
	const char *path = getenv("AIRLOCK_CLOCK_SHIM");
	FILE *f;

	real_cg()(CLOCK_MONOTONIC, &m);
	now = (long long)m.tv_sec * 1000 + m.tv_nsec / 1000000;
	if (path && now - at_ms >= 50) {
		at_ms = now;
		if ((f = fopen(path, "re"))) {
			if (fscanf(f, "%lld", &off) != 1)
				off = 0;
			fclose(f);
		}
	}
	return off;
}

static void shift(struct timespec *ts)
{
	long long ns = (long long)ts->tv_nsec + (offset_ms() % 1000) * 1000000;

	ts->tv_sec += (time_t)(offset_ms() / 1000) + (time_t)(ns >= 1000000000 ? 1
							      : ns < 0	       ? -1
									       : 0);
	ts->tv_nsec = (long)(ns >= 1000000000 ? ns - 1000000000 : ns < 0 ? ns + 1000000000 : ns);
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
	int rc = real_cg()(id, ts);

	if (!rc && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
		shift(ts);
	return rc;
}

int gettimeofday(struct timeval *tv, void *tz)
{
	struct timespec ts;

	(void)tz;
	if (clock_gettime(CLOCK_REALTIME, &ts))
		return -1;
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t time(time_t *t)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}
