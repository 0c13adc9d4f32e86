/* hostlock.h - which worker ids are alive on this host. Each worker holds
 * an flock on <dir>/<id>.lock for as long as it runs (exclusive for a
 * service worker, shared for --run-one); the kernel drops it when the
 * process dies, however it dies. At start-up a worker sweeps what every dead
 * id left: cgroups under airlock/<id> in every cgroup mount (host-wide), its
 * job directories under the state directory, its lock file. */
#ifndef AL_HOSTLOCK_H
#define AL_HOSTLOCK_H

#include <stdbool.h>

#include "../proto/err.h"

#define AL_HOSTLOCK_DIR "/run/airlock/workers"

/* Take id's lock (held until the process ends) and write state_dir into
 * it: a sweeper removes a dead id's job directories there, whatever its own
 * --state-dir. A second service worker with the same id is refused
 * (AL_EINVAL, saying so). Returns the fd or a negative al_err_code. */
int wk_hostlock_take(const char *dir, const char *id, bool shared, const char *state_dir,
		     struct al_err *err);

/* Sweep every worker id other than self that no live process holds (its
 * job directories under the state directory its lock file names, else
 * under state_dir); returns how many were swept. */
int wk_hostlock_sweep_dead(const char *dir, const char *self, const char *state_dir);

#endif
