/* callback.h - where a job's webhook may go (callback.c). */
#ifndef AL_CALLBACK_H
#define AL_CALLBACK_H

#include <stdbool.h>
#include <stddef.h>

#include "../proto/err.h"

/* callback_url against a tier's callback_hosts: an http(s) URL whose host
 * and port an entry names ("host": the scheme's default port; "host:port").
 * AL_EINVAL with the reason. */
int al_callback_url_ok(char *const *hosts, size_t n, const char *url, const char *tier,
		       struct al_err *err);
/* The address a callback is about to connect to: true when it is public,
 * or internal (loopback, private, link-local such as the metadata endpoint,
 * CGNAT, multicast...) and named as that very address in hosts. text gets
 * the address as text. */
struct sockaddr;
bool al_callback_addr_ok(char *const *hosts, size_t n, const struct sockaddr *sa, char *text,
			 size_t cap);

#endif
