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

	char safe[sizeof(msg) * 4];
	size_t o = 0;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Values come from jobs, results and guests: no control character
	 * reaches the log as it is, so no input can start a line of its own
	 * (or move a terminal's cursor). */
	for (const unsigned char *p = (const unsigned char *)msg; *p && o + 5 < sizeof(safe); p++) {
		if (*p == '\n' || *p == '\r' || *p == '\t')
			o += (size_t)snprintf(safe + o, sizeof(safe) - o, "\\%c",
					      *p == '\n'   ? 'n'
					      : *p == '\r' ? 'r'
							   : 't');
		else if (*p < 0x20 || *p == 0x7f)
			o += (size_t)snprintf(safe + o, sizeof(safe) - o, "\\x%02x", *p);
		else
			safe[o++] = (char)*p;
	}
	safe[o] = '\0';
	/* one write per line, so lines from several processes do not mix */
	fprintf(stderr, "ts=%llu level=%s event=%s %s\n", (unsigned long long)al_now_ms(), level,
		event, safe);
}
