/* snapshot.h - a paused session's snapshot file (worker/snapshot.c,
 * docs/snapshots.md). Internal to worker/. */
#ifndef AL_WK_SNAPSHOT_H
#define AL_WK_SNAPSHOT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../backends/backend.h"
#include "../common/policy.h"

#define WK_SNAP_DIGEST_HEX 64

struct wk_snap {
	char path[PATH_MAX];
	uint64_t size;
	char sha256[WK_SNAP_DIGEST_HEX + 1];
};

/* Where tier t's snapshots go (its snapshot_dir, else this worker's own
 * STATE/snapshots/<worker>), made 0700 and checked to be root's only. */
int wk_snap_dir(const struct al_tier_policy *t, const struct al_backend_conf *conf, char *out,
		size_t cap, struct al_err *err);
/* DIR/<sid>.snap */
void wk_snap_path(const char *dir, const char *sid, char *out, size_t cap);
/* sb's snapshot (the backend's op; keep: it runs on) into dir as sid's,
 * whole (synced, renamed into place) with its size and digest in out; on
 * failure nothing is left in dir. */
int wk_snap_save(struct al_sandbox *sb, const char *dir, const char *sid, bool keep,
		 struct wk_snap *out, struct al_err *err);
/* A sealed copy of the snapshot at path in a memfd (at offset 0), once its
 * size and SHA-256 are those given; else -1 with err naming the file. */
int wk_snap_open(const char *path, uint64_t size, const char *sha256, struct al_err *err);
/* A second name for a snapshot (a fork's copies share its bytes). */
int wk_snap_link(const char *from, const char *to, struct al_err *err);
void wk_snap_remove(const char *path);
/* Remove the halves of pauses that never finished (*.snap.part) in dir. */
void wk_snap_sweep(const char *dir);
/* fn(path, session id, age, arg) for each <id>.snap in dir, age the ms
 * since it was put in place (its inode's change: the rename). */
void wk_snap_each(const char *dir,
		  void (*fn)(const char *path, const char *sid, uint64_t age_ms, void *arg),
		  void *arg);

#endif
