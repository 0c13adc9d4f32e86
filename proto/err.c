/* err.c - filling and wrapping struct al_err. */
#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void err_vfmt(struct al_err *err, const char *fmt, va_list ap)
{
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
}

int al_err_set(struct al_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	va_start(ap, fmt);
	err_vfmt(err, fmt, ap);
	va_end(ap);
	return code;
}

int al_err_sys(struct al_err *err, const char *fmt, ...)
{
	int saved = errno;
	size_t n;
	va_list ap;

	if (!err)
		return AL_ESYS;
	err->code = AL_ESYS;
	va_start(ap, fmt);
	err_vfmt(err, fmt, ap);
	va_end(ap);
	n = strlen(err->msg);
	snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(saved));
	errno = saved;
	return AL_ESYS;
}

int al_err_wrap(struct al_err *err, const char *fmt, ...)
{
	char prefix[AL_ERR_MSG_MAX];
	char old[AL_ERR_MSG_MAX];
	size_t n;
	va_list ap;

	if (!err)
		return AL_EINVAL;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* Truncation is fine: the message is capped by design. */
	n = strlen(prefix);
	if (n > sizeof(err->msg) - 3)
		n = sizeof(err->msg) - 3;
	memcpy(err->msg, prefix, n);
	memcpy(err->msg + n, ": ", 2);
	n += 2;
	for (size_t i = 0; old[i] && n < sizeof(err->msg) - 1; i++)
		err->msg[n++] = old[i];
	err->msg[n] = '\0';
	return err->code;
}

void al_err_clear(struct al_err *err)
{
	if (!err)
		return;
	err->code = AL_OK;
	err->msg[0] = '\0';
}
