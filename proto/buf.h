/* buf.h - a growable byte buffer. */
#ifndef AL_BUF_H
#define AL_BUF_H

#include <stddef.h>

struct al_buf {
	char *data; /* NUL-terminated when non-NULL; owned, free with al_buf_free */
	size_t len;
	size_t cap;
};

/* Append n bytes; returns 0 or -1 on allocation failure (buf unchanged). */
int al_buf_append(struct al_buf *buf, const void *p, size_t n);
void al_buf_reset(struct al_buf *buf);
void al_buf_free(struct al_buf *buf);

#endif
