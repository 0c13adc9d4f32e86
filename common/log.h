/* log.h - one-line structured logs (key=value) for the Airlock daemons, and
 * the clocks they stamp them with. */
#ifndef AL_LOG_H
#define AL_LOG_H

#include <stdint.h>

/* "ts=<unix ms> level=<level> event=<event> <fmt...>" on stderr, one line. */
void al_log(const char *level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Unix time in ms, and a monotonic clock in ms. */
uint64_t al_now_ms(void);
uint64_t al_mono_ms(void);

#endif
