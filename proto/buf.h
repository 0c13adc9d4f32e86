/* buf.h - a growable byte buffer. */
#ifndef AL_BUF_H
#define AL_BUF_H

#include <stddef.h>

struct al_buf {
	char *data; /* NUL-terminated when non-NULL; owned, free with al_buf_free */
	size_t len;
	size_t cap;
};

/* Append n bytes; returns 0 or AL_ENOMEM (buf unchanged). */
int al_buf_append(struct al_buf *buf, const void *p, size_t n);
void al_buf_reset(struct al_buf *buf);
void al_buf_free(struct al_buf *buf);

/* snprintf into a fixed buffer that refuses to truncate: returns 0, or AL_EINVAL
 * with errno ENAMETOOLONG when the result would not fit (paths). */
int al_pathf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Write all n bytes of p to fd (a short write goes on, EINTR is retried):
 * 0, or AL_ESYS with errno. */
int al_write_all(int fd, const void *p, size_t n);

#endif
