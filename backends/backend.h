/* backend.h - the one interface every isolation boundary implements.
 *
 * The worker drives a backend only through a `const struct al_backend_ops`
 * table: prepare -> start -> (kill) -> reap -> destroy. Backends never block
 * the worker's event loop for long: start hands back file descriptors that
 * become readable when the job is done (a pidfd, a socket), and reap is
 * called when one does. A NULL slot means "unsupported"; al_backend_*()
 * below report that in one place, so no backend repeats the check.
 */
#ifndef AL_BACKEND_H
#define AL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/caps.h"
#include "../proto/err.h"
#include "../proto/job.h"
#include "../proto/result.h"

struct al_egress_rule; /* common/egress.h */

/* Capability bits (AL_CAP_*, each backend's AL_CAPS_*): proto/caps.h. */

/* Worker-wide configuration every backend may read (one struct, like
 * nsjail's; each field says its unit). Filled by the worker before init. */
struct al_backend_conf {
	const char *worker_id;	    /* unique per worker process; names cgroups, dirs */
	const char *state_dir;	    /* root for per-job directories, e.g. /var/lib/airlock */
	uid_t uid_base;		    /* slot i runs as uid_base + i (and gid the same) */
	unsigned slots;		    /* concurrent jobs per backend */
	uint64_t collect_max_bytes; /* cap per collected output file, bytes */
	unsigned nofile;	    /* RLIMIT_NOFILE for jobs */
	const char *helper_dir;	    /* where airlock-sandbox-init and airlock-oci-shim are;
				     * NULL = beside the worker's executable */
	const char *images_dir;	    /* the image catalogue (deploy/images/build.sh's --out):
				     * DIR/NAME and DIR/NAME.ext4; NULL = AL_IMAGES_DIR */
	const char *oci_runtime;    /* container: runc, crun or runsc; NULL = detect */
	uint32_t userns_base;	    /* container: slot i's root is host uid base + i*65536 */
	const char *bundle_copy;    /* benchmarks: keep each job's definition here (container:
				     * config.json; vm: domain XML, and the job frame in FILE.job) */
	const char *vmm;	    /* microvm: VMM driver, "qemu" (default) */
	const char *vmm_binary;	    /* microvm: the VMM's executable; NULL = found on PATH */
	const char *vm_accel;	    /* microvm: "kvm", "tcg" or NULL = KVM when usable */
	const char *vm_console; /* microvm: append guest consoles here (debugging); NULL = none */
	uint64_t vm_hang_ms;	/* microvm: a guest silent this long is broken, ms; 0 = default */
	bool vm_ksm; /* microvm: guest RAM mergeable by KSM (off: no cross-VM page sharing) */
	bool vm_template_share;	   /* microvm: a pool's copies map its template's RAM, shared */
	uint64_t vm_tcg_cache_mib; /* microvm under TCG: QEMU's code cache per VM; 0 = 64 */
	const char *libvirt_uri;   /* vm: NULL = qemu:///system */
	uint64_t
	    input_cache_bytes; /* the host's cache of inputs by URL (STATE/inputs-cache), bytes */
	uint64_t input_timeout_ms; /* one job's inputs: the fetch's time, ms */
};

/* Sandboxes of one shape to keep ready ahead of jobs (warm pools), from a
 * tier's policy. */
struct al_pool_spec {
	const char *tier;      /* jobs of this tier take them */
	unsigned size;	       /* how many to keep ready */
	uint64_t memory_bytes; /* the tier's default memory limit */
	uint64_t cpu_millis;   /* the tier's CPU bandwidth */
	const char *image;     /* the catalogue image its sandboxes boot, or NULL */
	const char *guest;     /* microvm: the tier's guest directory, or NULL */
	uint64_t max_idle_ms;  /* one idle this long is replaced */
};

/* What to run: the decoded job plus the operator's policy, resolved. */
/* Where a job with egress on a tier with egress.ca_file finds its CA
 * bundle: in its work directory (the same path on every boundary). */
#define AL_CA_BUNDLE_REL ".airlock/ca-certificates.crt"
#define AL_CA_BUNDLE	 "/work/" AL_CA_BUNDLE_REL

struct al_run_spec {
	const struct al_job *job;
	struct al_limits limits; /* effective limits: every field non-zero */
	uint64_t cpu_millis;	 /* CPU bandwidth, thousandths of a CPU (1000 = 1 CPU) */
	const struct al_kv *env; /* the policy's variables (set before the job's) */
	size_t nenv;
	enum al_network network; /* granted by policy */
	/* network egress through the worker's proxy: the rules that apply (the
	 * job's narrowed ones, else the tier's) and the caps */
	const struct al_egress_rule *egress_rules;
	size_t negress_rules;
	uint64_t egress_max_bytes;
	uint32_t egress_max_connections;
	uint32_t egress_max_open;    /* tunnels open at once */
	uint64_t egress_cache_bytes; /* the tier's egress.cache_bytes (0: no cache) */
	const char *proxy_url; /* set by a backend whose jobs reach the proxy: HTTP(S)_PROXY */
	const char *image;     /* the job's catalogue image (a name its tier allows), or NULL */
	const char *guest;     /* microvm/vm: the tier's guest directory, or NULL = built-in */
	char *const *binds;    /* process/container: host paths bound read-only at the
				* same place (the tier's policy); nbinds of them */
	size_t nbinds;
	/* container: the tier's OCI runtime (runc, crun, runsc) and runsc's
	 * platform (ptrace, kvm, systrap); NULL = the worker's default, picked */
	const char *oci_runtime;
	const char *oci_platform;
	unsigned slot;	  /* 0 .. conf.slots-1 */
	unsigned attempt; /* 1-based */
	/* vm (service VMs): from the tier's policy */
	const char *vm_network; /* the libvirt network; NULL = "airlock" */
	const uint16_t *ports;	/* the service's ports (readiness, reported) */
	size_t nports;
	uint64_t lease_ms, max_lease_ms;
	/* one step of a grading job (AL_CAP_GRADE): the host directory of the
	 * job's build tree (its files, then what the build made), mounted on
	 * /work, the step's cwd: writable for the build (grade_build), read-only
	 * for a test. The step's own tmpfs is then /tmp (HOME, a test's files)
	 * and /dev/shm. NULL = not a grading step. */
	const char *grade_tree;
	bool grade_build;
	/* inputs by URL (proto/inputs.h), fetched by the runner before the
	 * sandbox is made, through these rules (the job's narrowed ones, else
	 * the tier's), at most max_input_bytes; inputs_pack is then the file
	 * (backends/inpack.h) the backend unpacks into the work directory */
	const struct al_egress_rule *input_rules;
	size_t ninput_rules;
	uint64_t max_input_bytes;
	const char *inputs_pack;
	/* egress.ca_file: a PEM CA that the job's TLS clients trust beside the
	 * host's bundle (a job with egress gets both at AL_CA_BUNDLE_REL in its
	 * inputs pack; SSL_CERT_FILE and its kin point there), NULL = none */
	const char *ca_file;
	/* egress.cache_https: the worker's CA (worker/egress_ca.h), whose
	 * leaves its proxy shows the job's https, in the same bundle; NULL =
	 * the tier's https is not ended by the proxy */
	const char *cache_ca_file;
	/* a session (AL_CAP_SESSION): the job is the session server, which
	 * connects to AL_SESSION_SOCKET in its own network namespace */
	bool session;
	/* a session restored (AL_CAP_SNAPSHOT): restore_fd holds a snapshot
	 * the backend's snapshot op wrote, whole and checked (the worker's
	 * digest), from offset 0; the sandbox starts from it, its session
	 * server already serving, instead of starting the job. The backend
	 * reads it in prepare or start and never closes it. */
	bool restore;
	int restore_fd;
};

/* Whether the job gets a CA bundle at AL_CA_BUNDLE (a job with egress on a
 * tier with egress.ca_file or egress.cache_https). */
static inline bool al_spec_ca_bundle(const struct al_run_spec *spec)
{
	return spec->network == AL_NET_EGRESS && (spec->ca_file || spec->cache_ca_file);
}

/* The abstract unix name a session's server connects to: a name of the
 * sandbox's own network namespace, so nothing outside it reaches it. */
#define AL_SESSION_SOCKET "airlock-session"

#define AL_IMAGES_DIR "/var/lib/airlock/images"

/* The state directory (--state-dir) holds one directory per worker id,
 * STATE/<id>, and these, every worker's of the host (images: the default
 * catalogue): no worker id may be one of them. */
#define AL_STATE_SHARED                                                                            \
	{                                                                                          \
		"images", "empty-layer", "inputs", "egress-ca", "egress-cache", "snapshots",       \
		    "microvm-templates", NULL                                                      \
	}

/* Where a process or container job finds the proxy: its own loopback. */
#define AL_EGRESS_PROXY_PORT 3128
#define AL_EGRESS_PROXY_URL  "http://127.0.0.1:3128"

/* A catalogue image's root directory (container) or block image (microVM,
 * vm: disk true) into out; AL_ESANDBOX naming the command that builds it
 * when it is not built. */
int al_image_path(const struct al_backend_conf *conf, const char *name, bool disk, char *out,
		  size_t cap, struct al_err *err);
/* The content hash build.sh left in a catalogue image ("sha256:..."), or
 * "unknown". */
void al_image_hash(const struct al_backend_conf *conf, const char *name, char *out, size_t cap);
/* The image root dir (al_image_path) as a detached, read-only mount for a
 * sandbox's root (move_mount it; the caller closes the fd): an overlay of
 * dir alone, whose layers are named to the kernel as /proc/self/fd/N, so
 * that a job's /proc/self/mountinfo shows no host path (a bind of dir
 * shows dir). -1 with err. */
int al_image_tree(const struct al_backend_conf *conf, const char *dir, struct al_err *err);
/* "/proc/self/fd/A:/proc/self/fd/B" into out: dir (lower, opened into
 * *lower) over an empty directory of the worker's (*blank), the layers of
 * an overlay of dir alone (at least two lower layers are needed without
 * an upper one; one more in front does not). The caller closes both. */
int al_image_layers(const struct al_backend_conf *conf, const char *dir, int *lower, int *blank,
		    char *out, size_t cap, struct al_err *err);

#define AL_WATCH_MAX	 4
#define AL_USAGE_POLL_MS 100 /* how often a running job's usage is checked */

/* File descriptors the worker watches for readability after start. */
struct al_watch {
	int fds[AL_WATCH_MAX];
	int nfds;
	/* Time the sandbox may need before the job itself starts (a VM's
	 * boot), added to the worker's wall-clock timer. A backend that sets
	 * it enforces the job's own wall-clock limit itself. */
	uint64_t setup_ms;
	/* network egress: a listening socket only the job can reach (inside its
	 * network namespace), served by the worker's proxy; -1 = none (the
	 * worker starts it so). The worker takes it. */
	int egress_fd;
	/* ...a unix socket whose connections are the job's own (a runsc
	 * sandbox's relay), not a microVM forwarder's handoffs of one */
	bool egress_unix_clients;
	/* the sandbox outlives a successful result (a service VM): its proxy
	 * then serves on for this long (the lease's maximum), logging each
	 * connection; 0 = the proxy ends with the job */
	uint64_t egress_keep_ms;
	/* a session: the listening socket its server connects to (in the
	 * sandbox's network namespace); the worker takes it. -1 = none */
	int session_fd;
};

/* One job's sandbox. The worker allocates it with ops->priv_size bytes of
 * zeroed private state after it. */
struct al_sandbox {
	const struct al_backend_ops *ops;
	const struct al_backend_conf *conf;
	struct al_run_spec spec;
	void *priv;
};

/* What a running job has used so far, all its processes together. */
struct al_usage {
	uint64_t cpu_ns;		     /* CPU time since the job started */
	uint64_t stdout_bytes, stderr_bytes; /* written so far */
};

struct al_backend_ops {
	const char *name; /* MUST: "process", "container", ... */
	unsigned caps;	  /* MUST: AL_CAP_* bits */
	size_t priv_size; /* MUST: bytes of per-sandbox state */
	/* MUST: self-check and global set-up at worker start. A failure means
	 * the backend is not offered; its jobs fail closed. */
	int (*init)(const struct al_backend_conf *conf, struct al_err *err);
	/* MAY: remove what a crashed earlier run of this worker id left. */
	int (*sweep)(const struct al_backend_conf *conf, struct al_err *err);
	/* MUST: make the sandbox (directories, cgroup, bundle...). Quick. */
	int (*prepare)(struct al_sandbox *sb, struct al_err *err);
	/* MUST: start the job; fill *w with fds that turn readable when it ends. */
	int (*start)(struct al_sandbox *sb, struct al_watch *w, struct al_err *err);
	/* MUST: kill everything the job runs, now; reap follows. */
	int (*kill)(struct al_sandbox *sb, struct al_err *err);
	/* MUST: called when a watched fd is readable. Returns 1 and fills res
	 * (status, exit code or signal, output, usage) when the job is over,
	 * 0 when it is still running, negative on a sandbox failure. */
	int (*reap)(struct al_sandbox *sb, struct al_result *res, struct al_err *err);
	/* MAY: the running job's usage (polled every AL_USAGE_POLL_MS): the
	 * worker stops a job past its CPU-time limit or its output caps. A
	 * backend without it enforces those limits itself. 0 or negative. */
	int (*usage)(struct al_sandbox *sb, struct al_usage *u);
	/* MAY: how many of the sandbox's processes the OOM killer has taken so
	 * far (a session tells a call that ran out of memory by it). 0 or
	 * negative. */
	int (*oom_kills)(struct al_sandbox *sb, uint64_t *n);
	/* MAY: live output. Copy at most cap bytes of what the running job has
	 * written to stdout (stream 1) or stderr (stream 2), from byte off on,
	 * into buf; the count (0: nothing new yet), negative when unreadable.
	 * Polled with usage; what the job wrote last also comes with reap's
	 * result, so the worker streams the rest from there. */
	ssize_t (*output)(struct al_sandbox *sb, int stream, uint64_t off, void *buf, size_t cap);
	/* MUST: remove every process, file, cgroup... made for the job. */
	void (*destroy)(struct al_sandbox *sb);
	/* MAY: after the result is out, get the slot ready for its next job
	 * (pre-made sandboxes, warm pools). */
	void (*refill)(const struct al_backend_conf *conf, unsigned slot);
	/* MAY: keep ps->size sandboxes of this shape ready (called after init,
	 * once per tier that the backend serves and whose policy asks for it). */
	int (*pool)(const struct al_backend_conf *conf, const struct al_pool_spec *ps,
		    struct al_err *err);
	/* MAY: periodic upkeep off the job path (each heartbeat): replace pool
	 * members that died or waited too long. */
	void (*tick)(const struct al_backend_conf *conf);
	/* MAY (MUST with AL_CAP_GRADE): the host uids of slot's jobs: the one
	 * the job runs as (*job_uid: owner of a grading job's build tree) and
	 * the one that must own its directory to reach it (*dir_uid). */
	void (*slot_ids)(const struct al_backend_conf *conf, unsigned slot, uid_t *job_uid,
			 uid_t *dir_uid);
	/* MAY: tear down global state at worker exit. */
	void (*fini)(void);
	/* MAY: the accelerator its sandboxes run on after init ("kvm" or
	 * "tcg": a VM's CPU emulated, many times slower), for the worker's
	 * registry entry (airlock stats). */
	const char *(*accel)(void);
	/* MAY: whether a tier's OCI runtime (runsc) and platform can run here
	 * (after init; probed once): 0, or an error naming the runtime and
	 * why. A tier that fails it is logged at start and its jobs end
	 * sandbox_error with that reason, as a backend's that cannot start. */
	int (*runtime_ok)(const char *runtime, const char *platform, struct al_err *err);
	/* MAY (MUST with AL_CAP_SNAPSHOT): write the running sandbox's whole
	 * state (its memory, devices and files) to fd from its offset on, in
	 * the backend's own format, which a sandbox of the same spec with
	 * restore starts from. keep: the sandbox runs on after (a fork's
	 * parent, a microVM's pause until its record says paused), else it is
	 * stopped and only destroy follows. 0 or err: with keep, a sandbox
	 * whole after a failed save (its file's disk full, say) runs on as it
	 * was, err saying so; else it is of no more use (its watch sees it
	 * end; the caller destroys it). */
	int (*snapshot)(struct al_sandbox *sb, int fd, bool keep, struct al_err *err);
	/* MAY: a backend without AL_CAP_SNAPSHOT whose sessions on some tiers
	 * can pause (the container backend's on runsc): 0 when a session of a
	 * tier whose OCI runtime is runtime (NULL: the worker's default) can,
	 * else err says why not. Its snapshot op stops the sandbox (keep is
	 * refused), and its session server's connection to the worker, a host
	 * socket, must be let go first (the server's "release", which has the
	 * network relay let go of its connections to the egress proxy, whose
	 * listener and connections the worker closes first); a restored
	 * server connects to its listener anew (al_watch.session_fd). */
	int (*snapshot_ok)(const char *runtime, struct al_err *err);
	/* MAY: whether dir (where the snapshot goes) and the backend's own
	 * scratch space have room now for the sandbox's snapshot, by an
	 * estimate at least its size: a pause looks before it touches a
	 * sandbox whose save stops it (runsc's), which a failed save would
	 * lose. 0, or err saying what it needs and what there is. */
	int (*snapshot_room)(struct al_sandbox *sb, const char *dir, struct al_err *err);
	/* MAY: the running sandbox gives back to the host what it can spare
	 * now (an idle session's: a guest's page cache). Best effort. */
	void (*trim)(struct al_sandbox *sb);
};

/* The registry: every backend this build has (compile-time options live in
 * registry.c only). */
const struct al_backend_ops *al_backend_find(const char *name);
/* NULL-terminated list of all built-in backends. */
const struct al_backend_ops *const *al_backend_all(void);

/* Dispatchers: report a NULL slot as "unsupported" once, here. */
int al_backend_init(const struct al_backend_ops *ops, const struct al_backend_conf *conf,
		    struct al_err *err);
int al_backend_sweep(const struct al_backend_ops *ops, const struct al_backend_conf *conf,
		     struct al_err *err);
/* Allocate a sandbox (caller frees with al_sandbox_free). */
struct al_sandbox *al_sandbox_new(const struct al_backend_ops *ops,
				  const struct al_backend_conf *conf,
				  const struct al_run_spec *spec);
int al_backend_prepare(struct al_sandbox *sb, struct al_err *err);
int al_backend_start(struct al_sandbox *sb, struct al_watch *w, struct al_err *err);
int al_backend_kill(struct al_sandbox *sb, struct al_err *err);
int al_backend_reap(struct al_sandbox *sb, struct al_result *res, struct al_err *err);
/* The running job's usage; -1 when the backend does not report it. */
int al_backend_usage(struct al_sandbox *sb, struct al_usage *u);
/* The sandbox's OOM kills so far; -1 when the backend does not say. */
int al_backend_oom_kills(struct al_sandbox *sb, uint64_t *n);
/* The trim op, where the backend has one. */
void al_backend_trim(struct al_sandbox *sb);
/* The snapshot op; AL_EINVAL naming the backend when it has none. */
int al_backend_snapshot(struct al_sandbox *sb, int fd, bool keep, struct al_err *err);
/* The snapshot_room op; 0 when the backend has none. */
int al_backend_snapshot_room(struct al_sandbox *sb, const char *dir, struct al_err *err);
/* Live output (the output slot); -1 when the backend has none. */
ssize_t al_backend_output(struct al_sandbox *sb, int stream, uint64_t off, void *buf, size_t cap);
void al_sandbox_free(struct al_sandbox *sb); /* calls destroy; NULL is fine */

extern const struct al_backend_ops al_backend_process;
extern const struct al_backend_ops al_backend_container;
extern const struct al_backend_ops al_backend_noop;
extern const struct al_backend_ops al_backend_microvm;
extern const struct al_backend_ops al_backend_vm;

#endif
