/* agent.h - what the guest agent's parts share, top down: agent.c (PID 1's
 * frame loop: a job in, its result out, grading), warm.c (the warm
 * interpreter of a warm-pool VM), step.c (one command in its sandbox, to
 * its verdict) and boot.c (the VM's boot, its console and ports). Each
 * calls only those after it. Only the agent includes it. */
#ifndef AL_AGENT_H
#define AL_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../proto/err.h"
#include "../../proto/job.h"
#include "../../proto/result.h"
#include "../cgroup.h"
#include "../jobfs.h"
#include "../seccomp.h"

#define JOB_UID 1000
/* The job's catalogue image, mounted read-only here at boot (before ready):
 * the job's root. Without one the job runs in the initramfs. */
#define IMAGE_ROOT "/image"
/* A job's descriptors: stdin, stdout, stderr, its code (python, sh), and
 * a session's port to the worker (fd 4 in the job); -1 where none. */
#define JOB_FDS 5

/* The job frame's payload: the job, then argv and environment. */
struct job_in {
	struct al_job job;
	char **argv, **envp;
	uint32_t collect_cap; /* bytes kept of each collected file (the host's cap) */
};

/* One command to run: the job's, or one step of a grading job. */
struct step {
	char **argv, **envp;
	const struct al_limits *l;
	uid_t uid;
	const char *tree;     /* a grading job's step: its build tree (on /work, the cwd),
			       * and the step's own work dir on /tmp; NULL = a plain job */
	bool tree_rw;	      /* the build writes it; tests see it read-only */
	bool live;	      /* stream its output ('O' frames) */
	uint64_t cpu_base_ns; /* CPU time the cgroup had before the job began (a warm
			       * interpreter's start-up): not the job's, not counted */
};

/* boot.c */
/* What the VM is, found at boot (the kernel's command line). */
struct agent_vm {
	bool service;	     /* a service VM (the vm backend): runs on after its result */
	bool net;	     /* a microVM with network egress (airlock.net=1): one card,
			      * whose only reachable address is the host's proxy */
	bool image;	     /* the job's image is mounted on IMAGE_ROOT */
	char inputs_dev[32]; /* the disk of the job's inputs pack ("" = none) */
};
extern struct agent_vm agent_vm;
/* Mount the file systems, load the mode's modules, set up a service VM,
 * the network card and the disks: agent_vm said. Fatal on failure. */
void agent_boot(void);
/* A line on the console (the VM's serial port), "airlock-agent: " first. */
void agent_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Power off: QEMU runs with -no-reboot, so a reboot ends the VMM. */
void agent_power_off(void) __attribute__((noreturn));
/* Say what failed (with errno) and power off. */
void agent_fatal(const char *what) __attribute__((noreturn));
/* Whether the kernel's command line holds word. */
bool agent_cmdline_has(const char *word);
/* The device of the virtio port named want, opened; -1 (ENODEV) when it
 * has not appeared in wait_ms. */
int agent_find_port(const char *want, int wait_ms);
/* The job channel's port (AL_CHAN_PORT), waited for; fatal without it. */
int agent_open_port(void);

/* step.c */
/* A memfd (O_CLOEXEC) holding len bytes of data, at offset 0; -1 on error. */
int agent_memfd(const char *name, const void *data, size_t len);

/* Fork the step's process in cg (its mounts in the image, its uid,
 * rlimits, the filter sc, fds placed at 0..JOB_FDS-1) and wait until it has
 * executed its program or said why it could not (then it is reaped: the
 * boundary's failure). The pid, or -1 with err. */
pid_t agent_start_job(const struct step *st, const struct al_cg *cg, const struct al_seccomp *sc,
		      const struct al_jobfs *fs, const int fds[JOB_FDS], struct al_err *err);

/* The rest of a step once its process pid runs: wait for it (its limits,
 * live output, heartbeats to the host on port), then its CPU and memory,
 * files and end status into res. cg is emptied (the job's leftovers die
 * with it); the caller still destroys cg and fs. A returned error is the
 * sandbox's. t0: when the step began (its wall time). */
int agent_finish_step(const struct al_job *job, const struct step *st, pid_t pid, struct al_cg *cg,
		      struct al_jobfs *fs, int port, uint32_t collect_cap, uint64_t t0,
		      struct al_result *res, struct al_err *err);

/* The host restored this VM from a snapshot ('E': its time, 8 bytes, 32
 * bytes of its entropy and a byte, 1 when the VM waits in its pool before
 * its job; vmchan.h): the clock set, the entropy credited, the kernel's
 * generator reseeded at once. Whether the VM waits. */
bool agent_restored(const uint8_t *p, size_t n);
/* Say on port that the agent is alive, at most once a second (the host
 * tells a hung guest from a long job by that). */
int agent_beat(int port, struct al_err *err);
/* Run one command (the job, or a grading job's step) in a cgroup named
 * cgname with job's stdin, code and files; fill res. A returned error is
 * the sandbox's, not the job's. */
int agent_run_step(const struct al_job *job, const struct step *st, const char *cgname, int port,
		   uint32_t collect_cap, struct al_result *res, struct al_err *err);

/* warm.c */
/* The warm interpreter. At boot of a warm-pool VM (airlock.warm=1)
 * whose image names modules in /.airlock-warm: start python3 in a job's
 * sandbox, importing them, waiting for a job. Never fatal: without it jobs
 * run as in any VM. net: the VM has a network card (the filter's rules). */
void agent_warm_start(bool net);
/* Run in->job in the warm interpreter when it may (a plain python job, the
 * interpreter ready, the environment it started with the job's, the job's
 * limits above what it holds): *ran then, and the return is run_step's
 * (res filled, or the sandbox's error; AL_EINVAL: the files do not fit).
 * Else !*ran (the reason said on the console), the interpreter is gone and
 * the job runs cold. res->info's "interpreter" says "warm" or "cold". */
/* Wait until port is readable; meanwhile, once the interpreter says it is
 * ready, tell the host (an AL_CHAN_WARM frame on port). */
void agent_warm_wait(int port);
/* The VM was restored from its pool's template (agent_restored done): the
 * interpreter draws its random generators anew and, under emulation
 * (airlock.tcg=1) in a VM that waits in its pool, rehearses a job's path
 * ('Z', 'Y': al_warm_python). */
void agent_warm_restored(bool waits);
int agent_warm_run(struct job_in *in, int port, struct al_result *res, bool *ran,
		   struct al_err *err);

#endif
