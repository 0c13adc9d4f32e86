/* jobspec.h - what a job executes, the same for every backend: its argv
 * (python/sh runtimes read the script from a path the backend provides)
 * and its environment (the sandbox's base, the job's pairs, the policy's). */
#ifndef AL_JOBSPEC_H
#define AL_JOBSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../proto/buf.h"
#include "backend.h"

#include "jobexec.h" /* AL_SEARCH_PATH */

/* Append argv then environment strings to out, each NUL-terminated, and
 * count them. script is where the job's code is seen inside the sandbox
 * (e.g. /proc/self/fd/3). A name set again later is left to the later
 * entry: the operator's word wins over the job's, the job's over the base.
 * Returns 0 or -1 when out of memory. */
int al_argv_env(const struct al_run_spec *spec, const char *script, struct al_buf *out,
		uint32_t *argc, uint32_t *envc);
/* The launcher of a python job's code (python3 -c it SCRIPT ARGS...). */
extern const char al_python_launcher[];
/* The program of a warm interpreter: python3 -c it LAUNCHER MODULE...
 * (the microVM's pool VMs, the process tier's warm sandboxes) starts
 * before its job with the job's start-up environment, imports MODULEs,
 * compiles LAUNCHER, says 'R' on the socket at fd 3 and waits for one 'G'
 * with the job's stdin, stdout, stderr, code and a memfd of its argv,
 * environment and work directory (jobspec.c has the format); then it runs
 * the job as python3 -c LAUNCHER would. A file AL_WARM_PRECOMPILE in its
 * /tmp when it starts holds a text compiled there ahead (the session
 * server's, by the microVM's agent): a job whose code is that text runs
 * the code compiled then. */
extern const char al_warm_python[];
#define AL_WARM_PRECOMPILE ".airlock-precompile"
/* The first variable read at an interpreter's start-up (PYTHON*, LC_*,
 * LANG, HOME, TZ, thread-pool sizes, ...) that is in one NULL-ended list
 * of "NAME=value" and not, with that value, in the other; NULL when they
 * agree: a job whose environment differs so cannot run in an interpreter
 * started with the other. */
const char *al_startup_differs(char *const *a, char *const *b);
/* Whether "NAME=value" kv is such a variable. */
bool al_startup_var(const char *kv);
/* Only the argv part: the runtime's interpreter and script, then job's argv. */
int al_command_argv(const struct al_job *job, const char *script, struct al_buf *out,
		    uint32_t *argc);

/* RLIMIT_FSIZE for a job: its disk limit (one storage budget: no single
 * file, stdout and stderr included, can be larger than what the job may
 * store). */
uint64_t al_fsize_limit(const struct al_limits *l);

/* How many CPUs a job is shown (os.cpu_count(), nproc, sysconf): its CPU
 * bandwidth, cpu_millis, rounded up, at most this host's (a microVM has as
 * many vCPUs); 0 when it has no CPU limit (the host's are shown). cpu
 * online text: what /sys/devices/system/cpu/online says for n ("0-3\n"),
 * its length, or -1 when out does not hold it. */
unsigned al_job_cpus(uint64_t cpu_millis);
static inline int al_cpu_online_text(unsigned n, char *out, size_t cap)
{
	int k = n > 1 ? snprintf(out, cap, "0-%u\n", n - 1) : snprintf(out, cap, "0\n");

	return k < 0 || (size_t)k >= cap ? -1 : k;
}

/* Find an executable: name as given when it holds a '/', else in the
 * system's sbin and bin directories. out gets the path; false when none. */
bool al_find_exec(const char *name, char *out, size_t cap);

/* Open the helper program name (airlock-sandbox-init, airlock-oci-shim) in
 * dir, or beside the running executable when dir is NULL: a regular
 * executable file that only root can change (helpers run as root). The fd
 * (O_CLOEXEC; execute it with execveat or /proc/self/fd/N), or an error
 * naming the path. */
int al_open_helper(const char *dir, const char *name, struct al_err *err);
/* The same checks, for a helper used by path (bound into a jail): its
 * path into path; AL_OK or a negative al_err_code with err. */
int al_find_helper(const char *dir, const char *name, char *path, size_t size, struct al_err *err);

/* SIGKILL the process behind pidfd when kill is set, then wait until it
 * has exited (a child of ours: reaped). */
void al_pidfd_kill_wait(int pidfd, bool kill);

/* Run argv[0] (a path) with argv, stdio on /dev/null, and wait for it;
 * *status gets the wait status when status is not NULL. 0 when it exited 0. */
int al_spawn_wait(const char *const *argv, int *status);

/* clone3 with flags (new namespaces) and CLONE_PIDFD, like fork: 0 in the
 * child, the child's pid (and *pidfd) in the parent, -1 on error. */
pid_t al_clone_pidfd(uint64_t flags, int *pidfd);

#endif
