/* buf.c - a growable byte buffer. */
#include "buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"

int al_buf_append(struct al_buf *buf, const void *p, size_t n)
{
	if (n > ((size_t)-1) / 2 - buf->len)
		return AL_ENOMEM;
	if (buf->len + n + 1 > buf->cap) {
		size_t cap = buf->cap ? buf->cap : 256;
		char *d;

		while (cap < buf->len + n + 1)
			cap *= 2;
		d = realloc(buf->data, cap);
		if (!d)
			return AL_ENOMEM;
		buf->data = d;
		buf->cap = cap;
	}
	if (n)
		memcpy(buf->data + buf->len, p, n);
	buf->len += n;
	buf->data[buf->len] = '\0';
	return 0;
}

void al_buf_reset(struct al_buf *buf)
{
	buf->len = 0;
	if (buf->data)
		buf->data[0] = '\0';
}

void al_buf_free(struct al_buf *buf)
{
	if (!buf)
		return;
	free(buf->data);
	buf->data = NULL;
	buf->len = buf->cap = 0;
}

int al_pathf(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, cap, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= cap) {
		errno = ENAMETOOLONG;
		return AL_EINVAL;
	}
	return 0;
}

int al_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return AL_ESYS;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}
