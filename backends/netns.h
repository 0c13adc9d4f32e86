/* netns.h - a listening socket inside another network namespace (a job's),
 * made from a short-lived thread that enters it: the socket stays in that
 * namespace, the worker serves it from its own. */
#ifndef AL_NETNS_H
#define AL_NETNS_H

#include <stdint.h>

#include "../proto/err.h"

/* In the namespace nsfd (an open /proc/PID/ns/net): bring loopback up and
 * listen on 127.0.0.1:port (non-blocking, close-on-exec). The socket, or a
 * negative al_err_code with err. */
int al_netns_listen(int nsfd, uint16_t port, struct al_err *err);
/* The same on the abstract unix name (of that namespace only). */
int al_netns_listen_unix(int nsfd, const char *unix_name, struct al_err *err);

/* The same in a new network namespace (of the worker's user namespace:
 * nothing in a job's own can reconfigure it), whose fd is left in *nsfd
 * (close-on-exec) for the job to join; with unix_name, the socket listens
 * on that abstract unix name instead (of that namespace only: a microVM's
 * forwarder in its VMM's jail reaches it, nothing outside does). */
int al_netns_new(uint16_t port, const char *unix_name, int *nsfd, struct al_err *err);

#endif
