/* err.h - the one error type: a status code plus a message, filled where a
 * failure happens and wrapped with context on the way up. */
#ifndef AL_ERR_H
#define AL_ERR_H

#include <stdarg.h>

/* Append-only: a code, once given, keeps its number and meaning forever
 * (clients and logs read them); a new kind of failure gets a new code at
 * the end, never a reused or renumbered one. */
enum al_err_code {
	AL_OK = 0,
	AL_EINVAL = -1,	 /* bad input: the message names the field and the problem */
	AL_ENOMEM = -2,	 /* allocation failed */
	AL_ESYS = -3,	 /* a system call failed: the message carries strerror */
	AL_EREDIS = -4,	 /* Redis unreachable or answered an error */
	AL_ESANDBOX = -5 /* an isolation boundary could not be set up */
};

#define AL_ERR_MSG_MAX 256

/* Success leaves an al_err untouched; a failing function returns a negative
 * al_err_code and fills *err (if err is not NULL). */
struct al_err {
	int code;		  /* enum al_err_code, AL_OK when none */
	char msg[AL_ERR_MSG_MAX]; /* one line, NUL-terminated */
};

/* Fill *err and return code. err may be NULL. */
int al_err_set(struct al_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like al_err_set, appending ": strerror(errno)". */
int al_err_sys(struct al_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix the message already in *err with context ("ctx: old message");
 * returns err->code. */
int al_err_wrap(struct al_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void al_err_clear(struct al_err *err);

#endif
