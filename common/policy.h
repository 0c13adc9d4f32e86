/* policy.h - the operator's policy: for each trust tier the backend, limits,
 * network, image, injected environment, webhook hosts and retries; for each
 * tenant its quotas. Read from YAML (libyaml); shared by the scheduler (which
 * admits jobs against it) and the worker (which maps tiers to backends and
 * re-checks limits). See deploy/policy.example.yaml. */
#ifndef AL_POLICY_H
#define AL_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/err.h"
#include "../proto/job.h"
#include "egress.h"

#define AL_PORTS_MAX	 8
#define AL_BINDS_MAX	 8 /* host paths a tier may bind into its sandboxes */
#define AL_BIND_PATH_MAX 512
#define AL_IMAGES_MAX	 16 /* catalogue images one tier may offer */

struct al_tier_policy {
	char *name;
	char *backend;			     /* "process", "container", "microvm", "vm", "noop" */
	bool egress;			     /* jobs may ask for network "egress" */
	struct al_egress_rule *egress_rules; /* egress: {allow: [...]}: what they may reach */
	size_t negress_rules;		 /* at least one with egress (egress: true is refused) */
	uint64_t egress_max_bytes;	 /* per job, both directions (default 1 GiB) */
	uint32_t egress_max_connections; /* per job, in all (default 1024) */
	uint32_t egress_max_open;	 /* per job, open at once (default 64) */
	char *egress_ca_file;		 /* egress: {ca_file}: a PEM CA the job's TLS clients and
					  * the input fetcher trust too, or NULL */
	uint64_t egress_cache_bytes;	 /* egress: {cache_bytes}: each tenant's cache of what its
					  * jobs fetched over plain HTTP (and https with
					  * cache_https) on this tier, at most
					  * this many bytes per host (0: no cache) */
	bool egress_cache_https;	 /* egress: {cache_https}: the proxy ends their https
					  * too (the worker's CA in the job's bundle), so the
					  * cache keeps what they fetch over TLS */
	uint64_t max_input_bytes;	 /* a job's inputs by URL: fetched and unpacked, bytes
					  * (default AL_INPUT_BYTES_DEF, 1 GiB) */
	struct al_limits defaults;	 /* filled into jobs that leave a limit out */
	struct al_limits max;		 /* a job asking for more is rejected */
	uint64_t cpu_millis;		 /* CPU bandwidth, thousandths of a CPU */
	uint32_t max_attempts;		 /* delivery attempts, 1..10 */
	uint64_t backoff_ms;		 /* first retry delay; doubles, with jitter */
	struct al_kv *env;		 /* injected by the operator, never from the job */
	size_t nenv;
	char **callback_hosts; /* hosts allowed in callback_url */
	size_t ncallback_hosts;
	char *image;		     /* the default catalogue image (a name), or NULL */
	char *images[AL_IMAGES_MAX]; /* the catalogue images its jobs may name */
	size_t nimages;
	uint32_t pools[AL_IMAGES_MAX]; /* microvm: pool per image (images[i]); pool is the
					* default image's */
	char *guest; /* microvm/vm: the guest (kernel, initramfs) directory; NULL = built-in */
	char *oci_runtime;	   /* container: runc, crun or runsc; NULL = the worker's default */
	char *oci_platform;	   /* runsc: ptrace, kvm or systrap; NULL = picked at start */
	char *binds[AL_BINDS_MAX]; /* process/container: host paths bound read-only at the
				    * same place in every sandbox of the tier */
	size_t nbinds;
	uint32_t pool;		      /* microvm: pre-booted VMs per worker (0..AL_POOL_MAX) of
				       * the default image */
	uint64_t pool_max_idle_ms;    /* microvm: a pool VM idle this long is recycled */
	char *vm_network;	      /* vm: the libvirt network its VMs join ("airlock") */
	uint16_t ports[AL_PORTS_MAX]; /* vm: the ports the service listens on */
	size_t nports;
	uint64_t lease_ms;     /* vm: a VM's lease at start, ms */
	uint64_t max_lease_ms; /* vm: the most `vm extend` may reach, from creation */
	struct al_session_policy {
		bool on;		 /* sessions: {...} given: the tier opens sessions */
		uint32_t max_per_tenant; /* open at once per tenant (default 4) */
		uint64_t idle_ms;	 /* ended after this long without a call (default 600 s) */
		uint64_t max_life_ms;	 /* ended this long after it opened (default 3600 s),
					  * at most: an extend call moves its end up to it */
		uint64_t life_ms;	 /* ...its end when it opens (life_s; default max_life) */
		uint64_t max_idle_ms;	 /* an extend call moves idle_s up to it (default idle_s) */
		uint64_t cpu_budget_ms;	 /* the CPU of all its calls, at most (0: none) */
		uint64_t memory_bytes;	 /* a session's memory when its job gives none (0: the
					  * tier's defaults, as a job's) */
		/* pause (docs/snapshots.md): a tenant's paused sessions at most
		 * (max_paused_per_tenant, default 16), how long one is kept
		 * paused before it ends with its snapshot (paused_max_s,
		 * default a week), and whether an idle one pauses instead of
		 * ending (on_idle: pause | end, default end) */
		uint32_t max_paused_per_tenant;
		uint64_t paused_max_ms;
		bool pause_on_idle;
	} sessions;
	char *snapshot_dir; /* paused sessions' snapshots, on storage every worker of the tier
			     * mounts (any of them resumes one); NULL = each worker's own
			     * state directory (only it resumes its own) */
};

#define AL_POOL_MAX 64

struct al_tenant_policy {
	char *name;
	uint64_t max_queued;   /* jobs waiting at once; 0 = unlimited */
	uint64_t max_running;  /* jobs running at once; 0 = unlimited */
	uint64_t rate_per_s;   /* submissions admitted per second; 0 = unlimited */
	uint32_t max_priority; /* highest priority it may use (0..9) */
};

#define AL_TIERS_MAX 64 /* tiers one policy may define; a worker serves them all */

/* A grading language (a job's `language`): the image, build and run
 * commands it stands for. The policy's `languages:` add to the built-in
 * table (al_languages_builtin) or replace an entry of it by name. */
#define AL_LANGUAGES_MAX 32
#define AL_LANG_ARGS_MAX 32
struct al_language {
	char *name;
	char *image;  /* a catalogue image, or NULL: the tier's default */
	char **build; /* the build's argv, or NULL: none */
	size_t nbuild;
	char **run; /* the tests' command */
	size_t nrun;
	char *source; /* the file name the solution must have (main.cpp) */
	/* its build's own limits (0: the tests'), never above the tier's
	 * maxima: a compiler needs more time and memory than a solution */
	uint64_t build_wall_ms, build_memory_bytes;
};

struct al_policy {
	struct al_tier_policy *tiers;
	size_t ntiers;
	struct al_tenant_policy *tenants; /* "default" applies to unnamed tenants */
	size_t ntenants;
	uint64_t result_ttl_ms;	       /* how long results are kept */
	uint64_t lease_ms;	       /* a silent worker's jobs are re-delivered after this */
	uint64_t dlq_max_len;	       /* al:dlq keeps about this many dead letters */
	char *source;		       /* file name, or "built-in" */
	struct al_language *languages; /* the policy's own (languages:) */
	size_t nlanguages;
	char hash[17]; /* the first 16 hex digits of the SHA-256 of its text: the
			* same in every daemon that loaded the same policy */
};

/* Load path (NULL = the built-in default policy). On error nothing is
 * kept and err says "file:line: what is wrong; how to fix it". */
int al_policy_load(const char *path, struct al_policy *pol, struct al_err *err);
void al_policy_free(struct al_policy *pol);
const struct al_tier_policy *al_policy_tier(const struct al_policy *pol, const char *name);
/* The tenant's entry, else "default", else an unlimited one. */
const struct al_tenant_policy *al_policy_tenant(const struct al_policy *pol, const char *name);
/* The language called name: the policy's, else the built-in one; NULL. */
const struct al_language *al_policy_language(const struct al_policy *pol, const char *name);
/* Every language's name the policy knows, comma-separated, into out. */
void al_policy_language_names(const struct al_policy *pol, char *out, size_t n);

/* The index of image name in t's images, or -1 when the tier does not
 * offer it. */
int al_tier_image_index(const struct al_tier_policy *t, const char *name);

/* Admission: check job against its tier and tenant and fill the defaults
 * (limits, max_attempts). AL_EINVAL with the specific reason when refused. */
int al_policy_admit(const struct al_policy *pol, struct al_job *job, uint64_t now_ms,
		    struct al_err *err);
/* The part of admission that picks the job's image: one its tier offers
 * (else AL_EINVAL naming the allowed ones), or the tier's default. */
int al_policy_admit_image(const struct al_tier_policy *t, struct al_job *job, struct al_err *err);

/* The built-in policy text (also shipped as deploy/policy.example.yaml). */
extern const char al_policy_builtin[];

#endif
