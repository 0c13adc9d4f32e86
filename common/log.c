/* log.c - one-line structured logs and clocks (see log.h). */
#include "log.h"

#include "clock.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Where a value that a redaction covers ends: at a separator of URLs,
 * query strings or log fields. */
static size_t value_len(const char *s)
{
	return strcspn(s, "@&/?# \"',;");
}

void al_log_redact(const char *in, char *out, size_t cap)
{
	size_t o = 0;

	if (!cap)
		return;
	for (const char *p = in; *p && o + 1 < cap;) {
		size_t n = 0;

		if (!strncmp(p, "://", 3)) {
			/* scheme://user:password@host: the password goes */
			const char *auth = p + 3, *colon, *at;
			size_t alen = strcspn(auth, "/?# \"");

			at = memchr(auth, '@', alen);
			while (at && memchr(at + 1, '@', alen - (size_t)(at + 1 - auth)))
				at = memchr(at + 1, '@', alen - (size_t)(at + 1 - auth));
			colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
			if (colon) {
				n = (size_t)(colon + 1 - p);
				o += (size_t)snprintf(out + o, cap - o, "%.*s***", (int)n, p);
				p = at;
				continue;
			}
		} else if ((p == in || !isalpha((unsigned char)p[-1])) &&
			   (!strncasecmp(p, "password=", 9) || !strncasecmp(p, "pass=", 5))) {
			/* ?password=, sentinel_password=, pass=: the value goes */
			n = (size_t)(strchr(p, '=') + 1 - p);
			o += (size_t)snprintf(out + o, cap - o, "%.*s***", (int)n, p);
			p += n;
			p += value_len(p);
			continue;
		}
		out[o++] = *p++;
	}
	if (o >= cap)
		o = cap - 1;
	out[o] = '\0';
}

void al_log(const char *level, const char *event, const char *fmt, ...)
{
	char raw[1024], msg[1024];
	va_list ap;

	char safe[sizeof(msg) * 4];
	size_t o = 0;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	/* no credential reaches a log: URLs' passwords and password= values */
	al_log_redact(raw, msg, sizeof(msg));
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
