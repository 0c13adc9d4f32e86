/* vmlease.h - the scheduler's side of service VMs: it ends leases that
 * expired or were stopped (`airlock vm stop`: the lease's score is set to 0)
 * by destroying their libvirt domains and overlay disks, and at start-up it
 * reconciles libvirt with Redis: a domain of ours (name prefix al-svc-)
 * without a lease is destroyed, a lease whose domain vanished is ended with
 * a record saying so. Only with `--libvirt URI`; the scheduler must run on
 * the host whose libvirt holds the VMs. */
#ifndef AL_VMLEASE_H
#define AL_VMLEASE_H

#include <stdint.h>

#include "../common/aconn.h"
#include "../proto/err.h"

struct sc_vmlease;

/* ttl_ms: how long an ended lease's record is kept. */
struct sc_vmlease *sc_vmlease_new(const char *uri, struct al_aconn *cmd, uint64_t ttl_ms,
				  struct al_err *err);
void sc_vmlease_free(struct sc_vmlease *v);
/* End what is due (call about once a second). */
void sc_vmlease_tick(struct sc_vmlease *v, uint64_t now_ms);
/* Compare libvirt's domains with Redis's leases (at start-up). */
void sc_vmlease_reconcile(struct sc_vmlease *v);

#endif
