/* admin.h - the operator's calls of the C client, over direct Redis (the
 * operator's ACL user: README.md, "Access control"; through a gateway
 * each is AL_EINVAL): what the fleet holds, the dead letters, the service
 * VMs. Each returns data, the caller's to free with its _free; printing is
 * the caller's (the airlock CLI prints one line per row). */
#ifndef AL_CLIENT_ADMIN_H
#define AL_CLIENT_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "../proto/err.h"
#include "../proto/job.h" /* struct al_kv */
#include "client.h"

/* One ready stream: its name after al:q: (<tier>:<band>), its jobs queued
 * (the workers group's lag; -1 unknown) and running (its pending). */
struct al_stats_queue {
	char *name;
	long long queued, running;
};

/* A scheduler (about: its policy's hash), a live worker (about: its
 * registry entry, JSON), or a live worker whose policy's hash (about) is
 * none of the schedulers' (a reload it missed). */
struct al_stats_node {
	char *id, *about;
};

struct al_stats {
	struct al_stats_queue *queues; /* each tier's bands that exist */
	size_t nqueues;
	struct al_stats_node *schedulers, *workers, *mismatched;
	size_t nschedulers, nworkers, nmismatched;
	long long dead_letters; /* -1 when not read */
	struct al_kv *counters; /* al:stats: results by status and the like */
	size_t ncounters;
};

/* What the fleet holds, into *out (zeroed first). */
int al_client_stats(struct al_client *c, struct al_stats *out, struct al_err *err);
void al_stats_free(struct al_stats *s);

/* A dead letter: its stream entry's id and fields, each value len bytes
 * (raw: the job as it was submitted, msgpack; NUL-ended beyond len). */
struct al_dlq_field {
	char *key, *value;
	size_t len;
};
struct al_dlq_entry {
	char *id;
	struct al_dlq_field *fields;
	size_t nfields;
};
struct al_dlq {
	struct al_dlq_entry *entries;
	size_t n;
};

/* The first 1,000 dead letters, oldest first. */
int al_client_dlq_list(struct al_client *c, struct al_dlq *out, struct al_err *err);
/* Dead letter id alone; AL_EINVAL when there is none. */
int al_client_dlq_show(struct al_client *c, const char *id, struct al_dlq *out, struct al_err *err);
/* Submit dead letter id's job again (onto the intake) and delete the
 * letter; AL_EINVAL when there is none, it holds no job, or only a cut
 * copy of one. */
int al_client_dlq_retry(struct al_client *c, const char *id, struct al_err *err);
/* Delete every dead letter. */
int al_client_dlq_purge(struct al_client *c, struct al_err *err);
void al_dlq_free(struct al_dlq *d);

/* A leased service VM: its name and its lease's fields. */
struct al_vm_lease {
	char *name;
	struct al_kv *fields;
	size_t nfields;
};
struct al_vms {
	struct al_vm_lease *vms;
	size_t n;
};

int al_client_vm_list(struct al_client *c, struct al_vms *out, struct al_err *err);
/* The scheduler destroys it within about a second. Unknown names are
 * AL_EINVAL (as are all but al-vm-... names). */
int al_client_vm_stop(struct al_client *c, const char *name, struct al_err *err);
/* Extend its lease by ms (> 0), up to the policy's maximum: its new
 * expiry (epoch ms) in *expires_ms, *capped when the maximum cut it. */
int al_client_vm_extend(struct al_client *c, const char *name, uint64_t ms, uint64_t *expires_ms,
			bool *capped, struct al_err *err);
void al_vms_free(struct al_vms *v);

#endif
