/* cgroup.h - per-job cgroups on cgroup v1 or v2, detected at start-up.
 * A job's cgroup lives at airlock/<subtree>/<name> (the subtree is
 * <worker_id>/<backend>: each backend sweeps only its own) under each hierarchy that
 * carries a controller we need (v1: memory, pids, cpu, cpuacct; v2: the one
 * unified tree with memory, pids and cpu enabled). */
#ifndef AL_CGROUP_H
#define AL_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/err.h"

enum al_cg_version { AL_CG_NONE = 0, AL_CG_V1 = 1, AL_CG_V2 = 2 };

/* Where the hierarchies are; filled once by al_cg_detect. */
struct al_cg_sys {
	enum al_cg_version version;
	char v2[PATH_MAX];     /* v2: the unified mount */
	char memory[PATH_MAX]; /* v1: one mount per controller ("" if absent) */
	char pids[PATH_MAX];
	char cpu[PATH_MAX];
	char cpuacct[PATH_MAX];
	char subtree[128]; /* airlock/<subtree>: "<worker_id>/<backend>" or "<worker_id>" */
	char all[16][256]; /* every cgroup mount (v1 and v2): OCI runtimes use them all */
	int nall;
};

struct al_cg_limits {
	uint64_t memory_bytes; /* memory (and memory+swap) limit, bytes; 0 = none */
	uint64_t pids;	       /* max tasks; 0 = none */
	uint64_t cpu_millis;   /* CPU bandwidth in thousandths of a CPU; 0 = none */
};

/* One job's cgroup: the directory in each hierarchy. */
struct al_cg {
	const struct al_cg_sys *sys;
	char dirs[4][PATH_MAX]; /* v2: dirs[0]; v1: memory, pids, cpu, cpuacct */
	int ndirs;
};

struct al_cg_stats {
	uint64_t cpu_ns;	    /* CPU time of every task, nanoseconds */
	uint64_t peak_memory_bytes; /* high-water mark of memory */
	uint64_t oom_kills;	    /* tasks the OOM killer took */
	bool memory_hit;	    /* the memory limit was reached at least once */
};

/* Detect the layout from /proc/self/mountinfo; the subtree is
 * <worker_id>/<backend> (backend NULL: <worker_id>). Fails (AL_ESANDBOX) when
 * neither a v2 tree with memory+pids+cpu nor v1 memory+pids+cpu+cpuacct can
 * be used. */
int al_cg_detect(struct al_cg_sys *sys, const char *worker_id, const char *backend,
		 struct al_err *err);
/* Create airlock/<subtree>/<name> with limits. On failure nothing is left. */
int al_cg_create(struct al_cg *cg, const struct al_cg_sys *sys, const char *name,
		 const struct al_cg_limits *lim, struct al_err *err);
/* Fill cg with the paths of airlock/<subtree>/<name> (one another program,
 * such as an OCI runtime, makes), creating nothing. */
int al_cg_at(struct al_cg *cg, const struct al_cg_sys *sys, const char *name, struct al_err *err);
/* v2: enable memory, pids and cpu from the root down to airlock/<subtree>,
 * so that cgroups made below it get them (v1: nothing to do). */
int al_cg_enable_subtree(const struct al_cg_sys *sys, struct al_err *err);
/* Set (or change) the limits of an existing cgroup; zero fields are left
 * as they are. */
int al_cg_set_limits(struct al_cg *cg, const struct al_cg_limits *lim, struct al_err *err);
/* Move the calling process into cg (async-signal-safe: usable after fork):
 * 0, or AL_ESYS with errno. */
int al_cg_enter_self(const struct al_cg *cg);
int al_cg_stats(const struct al_cg *cg, struct al_cg_stats *st);
/* Only the CPU time of every task, nanoseconds (0 when unreadable). */
uint64_t al_cg_cpu_ns(const struct al_cg *cg);
/* What cg's tasks hold now: memory a limit cannot reclaim (bytes: the
 * usage less its page cache, tmpfs pages counted) and tasks (threads
 * count). 0, or AL_ESYS (errno) when unreadable. */
int al_cg_usage(const struct al_cg *cg, uint64_t *memory_bytes, uint64_t *pids);
/* SIGKILL every task in cg, wait until it is empty, remove it. Returns 0 when
 * the cgroup is gone. */
int al_cg_destroy(struct al_cg *cg, struct al_err *err);
/* Remove airlock/<subtree>/<name> (and what is inside it) from every
 * cgroup mount, also those we do not manage (an OCI runtime creates its
 * cgroup in all of them). */
void al_cg_remove_everywhere(const struct al_cg_sys *sys, const char *name);
/* Kill and remove every cgroup under airlock/<subtree> (a crashed run's). */
int al_cg_sweep(const struct al_cg_sys *sys, struct al_err *err);
/* Kill and remove airlock/<worker_id> and everything below it in every
 * cgroup mount (a dead worker's leftovers, whatever backend made them).
 * How many mounts had one (*left: how many of those are still there). */
int al_cg_remove_worker(const struct al_cg_sys *sys, const char *worker_id, int *left);
/* Remove the empty airlock/<subtree> directories (and airlock/<worker_id>
 * once empty) at worker exit. */
void al_cg_release(const struct al_cg_sys *sys);

#endif
