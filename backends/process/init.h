/* init.h - what the process backend's worker side and its sandbox init
 * (backends/process/init.c, the static airlock-sandbox-init) agree on.
 *
 * The worker clones a child into new PID, network, mount, IPC and UTS
 * namespaces; the child puts the descriptors below in place, closes every
 * other one and executes the init binary (through a descriptor the worker
 * opened at start-up), with an empty environment and these arguments:
 *
 *   airlock-sandbox-init cg=<dir>... uid=<slot uid>
 *
 * (each cgroup directory to join; the slot's uid, for the generated
 * /etc/passwd). It builds the sandbox's own root (newroot.h) before the
 * job comes and erases its arguments (/proc/1/cmdline shows none). The init holds
 * none of the worker's memory: forking the job and its own exit stay cheap.
 * It sets up the sandbox, then waits on the control socket for the go
 * message: one byte with GO_NFDS descriptors (SCM_RIGHTS), then one
 * detached, read-only mount tree per bind of the tier's policy. The spec
 * memfd holds struct al_init_spec, then argc argv strings, envc environment
 * strings and nbinds paths (where each bind goes), each NUL-terminated;
 * with image set, the first bind (path "/") is the job's catalogue image: it
 * becomes the root (then only a grading job's build tree may follow, on
 * /work, which the image has); with work set, the last bind is that tree
 * and the job's cwd. The init reports on the
 * report pipe either "E<what failed>" (a set-up failure) or "X<wait status> R<maxrss KiB>
 * W<0|1>" (the job's main process ended; W1: it ran in the warm interpreter) and exits; the
 * kernel then kills whatever is left in the PID namespace.
 *
 * A warm interpreter: when the worker gives the init descriptor
 * AL_INIT_FD_WARM (a memfd of "ARGC\0ENVC\0", then the argv and the
 * environment of python3 -c al_warm_python LAUNCHER, each NUL-ended), the
 * init starts that interpreter while it waits, as it would start a job
 * (slot uid, no capabilities, no_new_privs, setsid, the job's seccomp
 * filter) on the sandbox's root (with AL_INIT_FD_IMAGE, that image becomes
 * the root first: then only jobs of that image may come), with /dev/null
 * as stdin, stdout and
 * stderr and its socket at fd 3. A go message whose spec says warm then
 * gives the job to it (the job's rlimits by prlimit, the start-up's CPU
 * time added to the CPU limit; its descriptors, argv, environment and
 * /work over the socket); any other job kills it first and starts cold. */
#ifndef AL_PROCESS_INIT_H
#define AL_PROCESS_INIT_H

#include <stdint.h>

/* Descriptors of the init while it waits (before the go message). */
enum {
	AL_INIT_FD_REPORT = 4,
	AL_INIT_FD_CTL = 5,
	AL_INIT_FD_SECCOMP = 6,
	AL_INIT_FD_BINARY = 7,
	AL_INIT_FD_WARM = 8, /* only for a warm interpreter: its argv and environment */
	AL_INIT_FD_IMAGE = 9 /* and the catalogue image it runs in (a detached tree) */
};

/* Descriptors sent with the go message, in this order. */
enum { AL_GO_WORK, AL_GO_STDIN, AL_GO_STDOUT, AL_GO_STDERR, AL_GO_CODE, AL_GO_SPEC, AL_GO_NFDS };

#define AL_INIT_MAX_ARGS  600 /* argv + envp pointers (caps: 256+3, 64+64+5) */
#define AL_INIT_MAX_BINDS 9   /* AL_BINDS_MAX of the policy, and a grading job's build tree */

struct al_init_spec {
	uint64_t rl_as, rl_cpu, rl_fsize, rl_nofile; /* rlimits (bytes, seconds, count) */
	uint32_t argc, envc, nbinds;
	uint32_t uid;	   /* the slot's uid (and gid) */
	uint32_t has_code; /* fd 3 holds the script */
	uint32_t inet;	   /* network egress: the filter that allows AF_INET sockets */
	uint32_t image;	   /* the first bind is the job's catalogue image: the new root */
	uint32_t work;	   /* the last bind is a grading job's build tree: on /work, the cwd */
	uint32_t cpus;	   /* CPUs the job is shown (/sys/devices/system/cpu/online); 0: all */
	uint32_t warm;	   /* the job may run in the warm interpreter, if there is one */
};

#endif
