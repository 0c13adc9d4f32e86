/* log.c - one-line structured logs and clocks (see log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

uint64_t al_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t al_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void al_log(const char *level, const char *event, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* one write per line, so lines from several processes do not mix */
	fprintf(stderr, "ts=%llu level=%s event=%s %s\n", (unsigned long long)al_now_ms(), level,
		event, msg);
}
