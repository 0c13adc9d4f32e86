/* egress_fwd.h - what the microVM backend, its forwarder (egress_fwd.c)
 * and the worker's proxy agree on for a microVM's network egress. */
#ifndef AL_EGRESS_FWD_H
#define AL_EGRESS_FWD_H

/* The abstract unix socket the worker listens on in the VMM jail's network
 * namespace; each connection to it carries one guest connection's socket
 * (SCM_RIGHTS). */
#define AL_EGRESS_FWD_NAME "airlock-egress"

/* In the guest: its own address, and the one address it can reach, where
 * the proxy answers (QEMU's guestfwd). */
#define AL_VMM_GUEST_ADDR "10.0.2.15"
#define AL_VMM_GUEST_NET  "10.0.2.0/24"
#define AL_VMM_PROXY_ADDR "10.0.2.100"
#define AL_VMM_PROXY_PORT "3128"
#define AL_VMM_PROXY_URL  "http://" AL_VMM_PROXY_ADDR ":" AL_VMM_PROXY_PORT

#endif
