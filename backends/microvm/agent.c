/* agent.c - the microVM guest agent: PID 1 of every Airlock microVM.
 *
 * Built static (`make` -> build/airlock-agent) and packed as /init into the
 * guest initramfs by deploy/images/build.sh. It mounts /dev, /proc, /sys,
 * /tmp and the cgroup2 tree, loads the four virtio modules the job channel
 * needs, and, when the host gave the VM a catalogue image (airlock.image=1),
 * virtio_blk and mounts that disk read-only as the job's root-to-be; says
 * ready on the channel, takes one job, runs it (in its image) as
 * uid 1000 in a cgroup with the job's memory, pids and CPU limits, rlimits,
 * no capabilities, no_new_privs and the worker's system-call filter, with a
 * tmpfs of the disk limit as /work; then sends the result (status, exit code
 * or signal, capped stdout/stderr, collected files, CPU time, peak memory)
 * and powers the VM off. The wall-clock limit is the host's: it kills the
 * VMM. Any failure of the agent itself powers the VM off without a result,
 * which the host reports as sandbox_error.
 *
 * This file is the frame loop (a job in, its result out) and grading's
 * steps; the boot is boot.c's, one command's sandbox step.c's. In a
 * warm-pool VM whose image lists modules to preload, warm.c starts a
 * python job's interpreter at boot and may run the job there (agent.h).
 *
 * It reuses the worker's own code for the job's files (jobfs), cgroup,
 * argv/environment (built by the host), verdicts and system-call filter,
 * so that a job means the same inside a VM as on the process backend.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../proto/job.h"
#include "../../proto/keys.h"
#include "../../common/clock.h"
#include "../../proto/result.h"
#include "../backend.h" /* AL_USAGE_POLL_MS */
#include "../cgroup.h"
#include "vmm.h" /* AL_VMM_INPUTS_SERIAL */
#include "../judge.h"
#include "../jobexec.h"
#include "../jobfs.h"
#include "../jobfs_layout.h"
#include "../jobspec.h"
#include "../seccomp.h"
#include "../endstatus.h"
#include "../vmchan.h"
#include "agent.h"
#include "egress_fwd.h"

#define AGENT_VERSION "2" /* 2: the collect cap in the job frame, the host's acknowledgement */
#define JOB_FRAME_MAX (AL_JOB_MAX_BYTES + (4u << 20)) /* job + argv + environment */

static int parse_job(const uint8_t *p, size_t n, struct job_in *in, struct al_err *err)
{
	uint32_t jl, argc, envc;
	size_t off;
	char **v;

	if (n < 4 || (jl = al_get_u32(p)) > n - 4 || n - 4 - jl < 8)
		return al_err_set(err, AL_ESANDBOX, "agent: job frame too short");
	if (al_job_decode(p + 4, jl, &in->job, err))
		return AL_ESANDBOX;
	off = 4 + jl;
	argc = al_get_u32(p + off);
	envc = al_get_u32(p + off + 4);
	off += 8;
	if (argc == 0 || argc > AL_ARGV_MAX + 8 || envc > 4 * AL_ENV_MAX + 16)
		return al_err_set(err, AL_ESANDBOX, "agent: bad argv/environment counts");
	v = calloc(argc + envc + 2, sizeof(*v));
	if (!v)
		return al_err_set(err, AL_ESANDBOX, "agent: out of memory");
	for (uint32_t i = 0; i < argc + envc; i++) {
		const char *s = (const char *)p + off;
		const char *end = off < n ? memchr(s, '\0', n - off) : NULL;

		if (!end) {
			free(v);
			return al_err_set(err, AL_ESANDBOX,
					  "agent: argv/environment not NUL-ended");
		}
		v[i < argc ? i : i + 1] = (char *)s;
		off += (size_t)(end - s) + 1;
	}
	in->argv = v;
	in->envp = v + argc + 1;
	if (n - off < 4) {
		free(v);
		in->argv = in->envp = NULL;
		return al_err_set(err, AL_ESANDBOX, "agent: job frame without its collect cap");
	}
	in->collect_cap = al_get_u32(p + off);
	return AL_OK;
}

static int run(struct job_in *in, int port, struct al_result *res, struct al_err *err)
{
	struct step st = {in->argv, in->envp, &in->job.limits, JOB_UID, NULL, false, true, 0};

	return agent_run_step(&in->job, &st, "job", port, in->collect_cap, res, err);
}

#define TEST_UID_BASE 2000 /* test i of a grading job runs as 2000 + i */
#define CHECK_UID     2400 /* ...its checker as this one, never a test's */

/* One step of a grading job (sj, with lim) as uid in the build tree: its
 * command line made, then run_step. */
static int grade_step(const struct job_in *in, const struct al_job *sj, const struct al_limits *lim,
		      uid_t uid, const char *tree, bool build, const char *name, int port,
		      struct al_result *run, struct al_err *err)
{
	char *argv[AL_ARGV_MAX + 6], *p;
	struct al_buf ab = {0};
	uint32_t argc = 0;
	int rc;

	if (al_command_argv(sj, "/proc/self/fd/3", &ab, &argc) || argc > AL_ARGV_MAX + 4) {
		al_buf_free(&ab);
		return al_err_set(err, AL_ESANDBOX, "agent: out of memory");
	}
	p = ab.data;
	for (uint32_t k = 0; k < argc; k++, p += strlen(p) + 1)
		argv[k] = p;
	argv[argc] = NULL;
	{
		struct step st = {argv, in->envp, lim, uid, tree, build, false, 0};

		umask(022); /* what the build makes, its tests may read */
		rc = agent_run_step(sj, &st, name, port, 0, run, err);
	}
	al_buf_free(&ab);
	return rc;
}

/* A grading job (proto/grade.h): its build tree (the job's files, the
 * build's), the build once, then each test in a cgroup and uid of its own
 * with the tree read-only on /work and its own tmpfs on /tmp; a verdict
 * each (backends/judge.c, as the worker gives them). */
static int run_grading(struct job_in *in, int port, struct al_result *res, struct al_err *err)
{
	const struct al_job *job = &in->job;
	struct al_test_result build = {0}, *tests = calloc(job->ntests, sizeof(*tests));
	struct al_result build_run = {0};
	struct al_jobfs tree;
	struct al_limits lim;
	size_t n = 0;
	bool failed = false;
	int rc = AL_OK;

	if (!tests)
		return al_err_set(err, AL_ESANDBOX, "agent: out of memory");
	al_step_limits(job->build ? &job->build->limits : &job->limits, &job->limits, &lim);
	if ((rc = al_jobfs_create(&tree, "/run/airlock", "tree", job, lim.disk_bytes, JOB_UID,
				  JOB_UID, false, err))) {
		free(tests);
		return rc;
	}
	close(tree.out_fd);
	close(tree.err_fd);
	tree.out_fd = tree.err_fd = -1;
	/* the tests (other uids, the build's group) enter it */
	if (chmod(tree.home, 0750)) {
		rc = al_err_sys(err, "agent: chmod the build tree");
		goto out_results;
	}
	for (long i = job->build ? -1 : 0; i < (long)job->ntests && !rc; i++) {
		char *av[AL_ARGV_MAX], name[32];
		struct al_result run = {0};
		struct al_job sj;

		if ((rc = agent_beat(port, err)))
			break;
		if (failed && i >= 0 && job->stop_on_failure) {
			if (al_grade_skip(&job->tests[i], &tests[n++]))
				rc = al_err_set(err, AL_ESANDBOX, "agent: out of memory");
			continue;
		}
		al_grade_step_job(job, &job->limits, i, av, &sj, &lim);
		snprintf(name, sizeof(name), i < 0 ? "build" : "test-%ld", i);
		rc = grade_step(in, &sj, &lim, i < 0 ? JOB_UID : TEST_UID_BASE + (uid_t)i,
				tree.home, i < 0, name, port, &run, err);
		if (!rc && i < 0) {
			if (al_grade_build(&run, &build))
				rc = al_err_set(err, AL_ESANDBOX, "agent: out of memory");
			failed = build.verdict != AL_V_ACCEPTED;
			build_run = run; /* its output is the job's if it failed */
			run = (struct al_result){0};
			if (failed)
				break;
		} else if (!rc) {
			if (al_grade_test(&job->tests[i], &run, &tests[n]))
				rc = al_err_set(err, AL_ESANDBOX, "agent: out of memory");
			if (!rc && al_grade_wants_check(job, &tests[n])) {
				/* the job's checker on the test's whole output */
				struct al_file cf[3];
				struct al_result crun = {0};

				al_grade_checker_job(job, &job->limits, i, &run.out, av, cf, &sj,
						     &lim);
				snprintf(name, sizeof(name), "check-%ld", i);
				rc = grade_step(in, &sj, &lim, CHECK_UID, tree.home, false, name,
						port, &crun, err);
				if (!rc && al_grade_checked(&tests[n], &crun))
					rc = al_err_set(err, AL_ESANDBOX, "agent: out of memory");
				al_result_free(&crun);
			}
			failed |= al_verdict_failed(tests[n++].verdict);
		}
		al_result_free(&run);
	}
	if (!rc && al_grade_result(res, job->build ? &build : NULL, &build_run, tests, n))
		rc = al_err_set(err, AL_ESANDBOX, "agent: out of memory");
out_results:
	al_test_result_free(&build);
	for (size_t i = 0; i < n; i++)
		al_test_result_free(&tests[i]);
	free(tests);
	al_result_free(&build_run);
	al_jobfs_destroy(&tree);
	return rc;
}

/* What the agent wrote may still sit in the guest's buffers: power off
 * only once the host says the whole result arrived (or gave up). */
static void wait_ack(int port, struct al_chan_rd *rd)
{
	struct al_err err = {0};
	uint64_t t0 = al_mono_ms();

	al_chan_rd_reset(rd);
	for (;;) {
		struct pollfd p = {.fd = port, .events = POLLIN};
		uint64_t waited = al_mono_ms() - t0;
		int rc;

		if (waited >= AL_CHAN_ACK_WAIT_MS ||
		    poll(&p, 1, (int)(AL_CHAN_ACK_WAIT_MS - waited)) <= 0)
			break;
		rc = al_chan_read(rd, port, AL_CHAN_READY_MAX, &err);
		if (rc < 0 || (rc > 0 && rd->body.data[0] == AL_CHAN_ACK))
			return;
		if (rc > 0)
			al_chan_rd_reset(rd);
	}
	agent_say("no acknowledgement of the result from the host");
}

int main(void)
{
	struct al_chan_rd rd = {0};
	struct al_err err = {0};
	struct al_result res = {0};
	struct job_in in = {0};
	struct al_buf out = {0};
	int port, rc;

	if (getpid() != 1) {
		fprintf(stderr, "airlock-agent: runs only as PID 1 of an Airlock microVM\n");
		return 2;
	}
	setsid();
	agent_boot();
	if (agent_vm.image && !agent_vm.service && agent_cmdline_has("airlock.warm=1"))
		agent_warm_start(agent_vm.net);
	port = agent_open_port();
	if (al_chan_write(port, AL_CHAN_READY, "agent " AGENT_VERSION,
			  strlen("agent " AGENT_VERSION), NULL, 0, -1, &err))
		agent_fatal("send ready");
	do {
		agent_warm_wait(port);
		rc = al_chan_read(&rd, port, JOB_FRAME_MAX, &err);
		/* started from a pool's template: made unique before its job */
		if (rc == 1 && rd.body.data[0] == AL_CHAN_RESTORED) {
			agent_warm_restored(
			    agent_restored((const uint8_t *)rd.body.data + 1, rd.body.len - 1));
			al_chan_rd_reset(&rd);
			rc = 0;
		}
	} while (rc == 0);
	if (rc < 0 || rd.body.data[0] != AL_CHAN_JOB) {
		agent_say("no job: %s", rc < 0 ? err.msg : "unexpected frame");
		agent_power_off();
	}
	res.version = AL_PROTO_VERSION;
	if ((rc = parse_job((const uint8_t *)rd.body.data + 1, rd.body.len - 1, &in, &err)) == 0) {
		bool warm = false;

		rc = agent_warm_run(&in, port, &res, &warm, &err);
		if (!warm)
			rc = in.job.ntests && !agent_vm.service ? run_grading(&in, port, &res, &err)
								: run(&in, port, &res, &err);
	}
	if (rc) {
		res.status = rc == AL_EINVAL ? AL_ST_REJECTED : AL_ST_SANDBOX_ERROR;
		al_result_set_error(&res, "%s", err.msg);
	}
	res.id = strdup(in.job.id ? in.job.id : "unknown");
	if (!res.id || al_result_encode(&res, &out, &err)) {
		agent_say("cannot encode the result: %s", err.msg);
		agent_power_off();
	}
	if (al_chan_write(port, AL_CHAN_RESULT, out.data, out.len, NULL, 0, -1, &err))
		agent_say("send result: %s", err.msg);
	else if (!agent_vm.service)
		wait_ack(port, &rd);
	/* A service VM lives on (until its lease ends: the host destroys it),
	 * reaping what the service leaves; a failed start powers it off. */
	while (agent_vm.service && res.status == AL_ST_OK)
		if (wait(NULL) < 0 && errno == ECHILD)
			pause();
	agent_power_off();
}
