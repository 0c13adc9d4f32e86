/* ctr.h - what the container backend's files share, top down:
 * container.c (the backend's ops: a job's container from start to result),
 * warm.c (a slot's next container, started with a warm interpreter before
 * its job comes), bundle.c (a container up to its bundle, and its shim),
 * runtime.c (which OCI runtime runs it: runc, crun or runsc, and runsc's
 * platform) and config.c (its config.json). Each calls only those after it. */
#ifndef AL_CTR_H
#define AL_CTR_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../proto/buf.h"
#include "../backend.h"
#include "../cgroup.h"
#include "../jobfs.h"

#define CTR_UID	     1000   /* the job's uid and gid inside the container */
#define CTR_ID_RANGE 65536u /* host ids per slot; slot i's root is userns_base + i*RANGE */
/* a warm container's CPU rlimit until its job's (warm.c), seconds */
#define CTR_WARM_CPU_S (1ull << 31)

/* The OCI runtime a job's container runs on (runtime.c). */
struct ctr_rt {
	const char *path;     /* the runtime's program */
	const char *root;     /* its state (--root) */
	bool gvisor;	      /* runsc: no descriptor passed in, files instead */
	const char *platform; /* runsc's platform (ptrace, kvm, systrap) */
	char flags[160];      /* its global flags beside --root, space-separated */
};

/* Where a runsc job finds its script and airlock-exec (config.c): a
 * directory of the job's tmpfs bound read-only there. */
#define CTR_GV_DIR    "/.airlock"
#define CTR_GV_SCRIPT CTR_GV_DIR "/script"
#define CTR_GV_EXEC   CTR_GV_DIR "/exec"
/* a runsc session's server connects here (bundle.c; worker/session_server.py) */
#define CTR_GV_SESSION CTR_GV_DIR "/session.sock"
/* network egress on runsc: airlock-exec's relay connects here for each
 * connection of the job to the proxy's address (relay.c) */
#define CTR_GV_EGRESS CTR_GV_DIR "/egress.sock"
/* a runsc warm container's airlock-exec gets the interpreter's socket here
 * (warm.c, shim.c) */
#define CTR_GV_WARM CTR_GV_DIR "/warm.sock"
/* host tasks a runsc sandbox needs: the Sentry's and the gofer's threads
 * (about 45 at start here), and per process of its job (config.c) */
#define CTR_GV_PIDS	 1024
#define CTR_GV_PIDS_EACH 8

struct ctr_sb {
	struct ctr_rt rt;
	struct al_jobfs fs;
	struct al_cg cg;
	bool cg_made;
	char name[AL_ID_MAX + 48];
	char rootfs[PATH_MAX]; /* the job's own overlay root ("" when it uses the image's) */
	char image[PATH_MAX];  /* the job's catalogue image's root ("" = the host image) */
	int code_fd, stdin_fd;
	pid_t pid; /* the shim (backends/container/shim.c) */
	int pidfd;
	int report_rd;	/* shim -> worker: "E<runtime status>" or "X<wait status> <counters>" */
	int netns_fd;	/* network egress: the job's network namespace, made here */
	int egress_fd;	/* ... and the proxy's socket in it, until the worker takes it */
	int session_fd; /* a session: its server's socket in that namespace, the same way */
	bool found;	/* its program is an executable of its root (config.c: direct_exec) */
	bool direct;	/* ...which the runtime executes itself */
	bool exited;
	/* a warm container (warm.c): it runs al_warm_python, and its job comes
	 * as descriptors over ctl (the container's fd 3) */
	bool warm;
	int ctl; /* our end of that socket, until the job is sent */
	/* on runsc, which passes no descriptor in: the socket file
	 * CTR_GV_WARM listening, for the shim, which hands the interpreter's
	 * end of ctl over when the sandbox connects */
	int warm_lfd;
	int spec_fd;	      /* the job's argv, environment and rlimits (a memfd) */
	uint64_t cpu_base_ns; /* the cgroup's CPU time when the job was sent */
	bool base_read;	      /* ...or the interpreter's when it took the job, read */
};

/* The backend's host-wide state, set by ctr_init (container.c), read by
 * the files below it. */
#define CTR_HOST_BINDS_MAX 32
#define CTR_PLATFORMS	   3 /* runsc's: ptrace, kvm, systrap */
struct ctr_host {
	const struct al_backend_conf *conf;
	struct al_cg_sys cg;
	char runtime[PATH_MAX]; /* the default OCI runtime's path */
	char root[PATH_MAX];	/* runc's and crun's state (--root) */
	char runc[PATH_MAX];	/* a tier's runc or crun, found when first named */
	char crun[PATH_MAX];
	char runsc[PATH_MAX]; /* runsc, "" when not installed (runtime.c) */
	char runsc_root[PATH_MAX];
	bool runsc_looked;
	char runsc_offered[32]; /* its platforms, comma-separated */
	struct ctr_platform {
		int state; /* 0 not tried yet, 1 works here, -1 does not (why) */
		char why[400];
	} plat[CTR_PLATFORMS];
	char exec_path[PATH_MAX]; /* airlock-exec, bound into a runsc job */
	char jobs[PATH_MAX];	  /* bundles */
	char hostimage[PATH_MAX]; /* the fast image: mount points for host /usr, /etc */
	int shim_fd;		  /* airlock-oci-shim, opened at start-up */
	int exec_fd;		  /* airlock-exec, every job's first program */
	bool ready;
	/* the fast image's read-only binds of the host (ctr_make_hostimage) */
	struct {
		char src[64], dst[64];
	} binds[CTR_HOST_BINDS_MAX];
	size_t nbinds;
};
extern struct ctr_host ctr_host;

/* A job's argv and environment, each string NUL-ended (al_argv_env). */
struct ctr_argv {
	struct al_buf strings;
	uint32_t argc, envc;
};

/* bundle.c */
/* Every descriptor of c unset (-1). */
void ctr_sb_init(struct ctr_sb *c);
/* The fast image at ctr_host.hostimage: a tmpfs of mount points for what
 * of the host a program needs (hostroot.h), and an /etc of its own. */
int ctr_make_hostimage(struct al_err *err);
/* Make sb's container, named c->name, up to its bundle: the job's
 * directory and tmpfs with its files, the cgroup's paths, the image's root,
 * its memfds, its network namespace, config.json with argv's strings. */
int ctr_make(struct al_sandbox *sb, const struct ctr_argv *argv, struct al_err *err);
/* Start the shim on the made bundle with src[0-3] as the container's
 * stdin, stdout, stderr and fd 3 (on runsc, which passes no fd 3, a warm
 * container's is the interpreter's socket, which the shim hands over):
 * c->pid, pidfd and report_rd set. */
int ctr_spawn_shim(struct ctr_sb *c, const int src[4], struct al_err *err);
/* A memfd holding data (offset 0), or a negative al_err_code. */
int ctr_memfd(const char *name, const void *data, size_t len, struct al_err *err);

/* runtime.c */
/* sb's runtime from its tier's (spec->oci_runtime, oci_platform), else the
 * worker's default: 0, or an error naming the runtime and why it cannot
 * run here. */
int ctr_runtime_of(const struct al_run_spec *spec, struct ctr_rt *rt, struct al_err *err);
/* runsc: let its sandbox connect to host socket files (--host-uds=open:
 * those the worker makes in the job's CTR_GV_DIR, which alone it sees). */
void ctr_runtime_host_uds(struct ctr_rt *rt);
/* The backend's runtime_ok op: ctr_runtime_of for a tier's runtime. */
int ctr_runtime_ok(const char *runtime, const char *platform, struct al_err *err);
/* Whether path is runsc's program. */
bool ctr_is_runsc(const char *path);
/* Run argv in a process group of its own with its stdout and stderr into
 * out (NUL-ended, at most cap - 1 bytes kept), for at most timeout_ms: then
 * the group is killed. Its wait status, or -1 when it did not start. */
int ctr_run_capture(const char *const *argv, char *out, size_t cap, int timeout_ms);

/* checkpoint.c: a runsc session's snapshot (the backend's snapshot op),
 * whether a tier's can be taken (runtime: its OCI runtime, NULL the
 * worker's default), and a restore's files and image put in place in a
 * new job's tmpfs and bundle (ctr_make; uid: the slot's job uid). */
int ctr_snapshot_ok(const char *runtime, struct al_err *err);
int ctr_snapshot(struct al_sandbox *sb, int fd, bool keep, struct al_err *err);
int ctr_snapshot_room(struct al_sandbox *sb, const char *dir, struct al_err *err);
int ctr_restore_unpack(struct al_sandbox *sb, uid_t uid, struct al_err *err);
/* runsc's sandbox ends 128 + N for a job killed by signal N: *ws made that
 * wait status (true) on a gVisor runtime; false (as it is) otherwise. */
bool ctr_end_status(const struct ctr_rt *rt, int *ws);

/* config.c */
/* Write sb's config.json in its bundle from its run spec and argv; sets
 * c->direct (the runtime executes the job's program itself). */
int ctr_write_config(struct al_sandbox *sb, const struct ctr_argv *argv, struct al_err *err);

/* warm.c */
/* Per-slot state for conf->slots slots; AL_OK or AL_ENOMEM. */
int ctr_warm_init(const struct al_backend_conf *conf, const struct al_backend_ops *ops,
		  struct al_err *err);
/* If slot's warm container fits sb's job, make it the job's: c takes its
 * container (fs, cgroup, shim), the job's files are written into its
 * work directory and its descriptors made. 1 when taken, 0 when the job
 * runs cold, negative on error (c then holds what it took, for destroy).
 * Either way the slot remembers what its next warm container should be. */
int ctr_warm_take(struct al_sandbox *sb, struct al_err *err);
/* Send a taken container its job; negative when it is gone (nothing was
 * sent: the caller runs the job cold). */
int ctr_warm_go(struct al_sandbox *sb, struct al_err *err);
/* A warm container's job: its CPU counts from the later of its hand-over
 * and the moment its interpreter, done starting, took it (what it says
 * after its 'G'); a no-op once read, or for a cold container. */
void ctr_warm_base(struct ctr_sb *c);
/* After a job: start the slot's next warm container if its last job could
 * have run in one, of that job's shape. */
void ctr_warm_refill(const struct al_backend_conf *conf, unsigned slot);
/* Remove every warm container. */
void ctr_warm_fini(void);

#endif
