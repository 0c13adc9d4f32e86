/* relay.h - a runsc job's way to the worker's egress proxy (relay.c, part
 * of airlock-exec). */
#ifndef AL_CTR_RELAY_H
#define AL_CTR_RELAY_H

/* The relay's control socket, an abstract name in the sandbox: a
 * connection to it has the relay close every connection it holds, then
 * read one byte (worker/session_server.py, before a pause). */
#define CTR_RELAY_CONTROL "\0airlock-relay"

/* Listen on 127.0.0.1:port in the job's network (the Sentry's own
 * loopback), then fork a relay that connects, for each connection taken
 * there, to the unix socket file sock (the worker's proxy, which serves it
 * as its client) and copies bytes both ways until both sides are done.
 * The relay is a child of the caller, which goes on to execute the job;
 * it holds no descriptor of the caller's but its listener and its control
 * socket, and ends when the sandbox does. 0, or -1 with errno (nothing
 * forked). */
int ctr_relay_start(const char *sock, unsigned port);

#endif
