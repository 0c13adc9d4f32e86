/* log.h - one-line structured logs (key=value) for the Airlock daemons
 * (stamped with al_now_ms, clock.h). */
#ifndef AL_LOG_H
#define AL_LOG_H

#include <stddef.h>
#include <stdint.h>

/* "ts=<unix ms> level=<level> event=<event> <fmt...>" on stderr, one line,
 * redacted (al_log_redact) and with control characters escaped. */
void al_log(const char *level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* in with its credentials replaced by "***" into out (cap bytes, always
 * terminated): the password of every scheme://user:password@host, and the
 * value of every password= and pass= (so sentinel_password= too). */
void al_log_redact(const char *in, char *out, size_t cap);

#endif
