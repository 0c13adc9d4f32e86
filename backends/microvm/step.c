/* step.c - the guest agent's step runner: one command (a job, a grading
 * job's build, test or checker) in a cgroup with its limits, rlimits, the
 * system-call filter and its files, started (agent_start_job), waited for
 * with its live output and heartbeats, and its verdict into a result
 * (agent_finish_step). Called by agent.c and warm.c; calls down to
 * boot.c for the console and the ports.
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
#include <linux/random.h>
#include <sys/ioctl.h>
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

int agent_memfd(const char *name, const void *data, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	const char *c = data;

	if (fd < 0)
		return -1;
	while (len > 0) {
		ssize_t w = write(fd, c, len);

		if (w <= 0) {
			close(fd);
			return -1;
		}
		c += w;
		len -= (size_t)w;
	}
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* The job's set-up failed (the boundary's fault, never the job's): say
 * what on the set-up pipe, which an exec closes unread. */
static void __attribute__((noreturn)) setup_fail(int fd, const char *what)
{
	char msg[200];
	int n = snprintf(msg, sizeof(msg), "%s: %s", what, strerror(errno));

	if (write(fd, msg, n > 0 ? (size_t)n : 0) < 0) {
		/* the exit status still says it */
	}
	_exit(126);
}

static void set_rlimit(int res, rlim_t v, int setup_wr)
{
	struct rlimit rl = {v, res == RLIMIT_CPU ? v + 1 : v};

	if (setrlimit(res, &rl))
		setup_fail(setup_wr, "setrlimit");
}

/* In the job's mount namespace: its root becomes the image (read-only,
 * mounted at boot) with the guest's /dev, /proc and read-only /sys, the
 * cgroup tree masked, and its tmpfs (the disk limit) as /work, /tmp and
 * /dev/shm: the only writable places (and a service VM's /data disk). The
 * initramfs is left underneath (MS_MOVE + chroot, as switch_root does: the
 * initramfs cannot be pivoted away); the job has no capability to chroot
 * back. */
static int image_root(const char *work, const char *tmp, const char *shm)
{
	if (mount("/dev", IMAGE_ROOT "/dev", NULL, MS_BIND | MS_REC, NULL) ||
	    mount("/proc", IMAGE_ROOT "/proc", NULL, MS_BIND | MS_REC, NULL) ||
	    mount("/sys", IMAGE_ROOT "/sys", NULL, MS_BIND | MS_REC, NULL) ||
	    mount("airlock-mask", IMAGE_ROOT "/sys/fs/cgroup", "tmpfs",
		  MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555") ||
	    mount(work, IMAGE_ROOT "/work", NULL, MS_BIND, NULL) ||
	    mount(tmp, IMAGE_ROOT "/tmp", NULL, MS_BIND, NULL) ||
	    mount(shm, IMAGE_ROOT "/dev/shm", NULL, MS_BIND, NULL) ||
	    (agent_vm.service && mount("/data", IMAGE_ROOT "/data", NULL, MS_BIND | MS_REC, NULL)))
		return AL_ESYS;
	if (chdir(IMAGE_ROOT) || mount(".", "/", NULL, MS_MOVE, NULL) || chroot(".") || chdir("/"))
		return AL_ESYS;
	return 0;
}

/* The child: from PID-1 root to the job. Only async-signal-safe calls. */
static void __attribute__((noreturn))
exec_job(const struct step *st, const struct al_cg *cg, const struct al_seccomp *sc,
	 const struct al_jobfs *fs, const int fds[JOB_FDS], int setup_wr)
{
	const struct al_limits *l = st->l;
	const char *prog = st->argv[0];
	char tmp[PATH_MAX + 8], shm[PATH_MAX + 8];
	/* a grading job's step: the build tree is its /work, its own work dir
	 * its /tmp (HOME, a test's files) */
	const char *work = st->tree ? st->tree : fs->home, *tmp_src = st->tree ? fs->home : tmp;
	const unsigned long ro = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV;

	/* the set-up pipe above the descriptors placed below, closed at exec */
	if ((setup_wr = fcntl(setup_wr, F_DUPFD_CLOEXEC, 20)) < 0)
		_exit(126);
	if (al_cg_enter_self(cg))
		setup_fail(setup_wr, "join the job's cgroup");
	/* One storage budget: the job's /tmp and /dev/shm are directories of
	 * its tmpfs; the guest's cgroup tree is not the job's to see. */
	snprintf(tmp, sizeof(tmp), "%s/" AL_JOBFS_TMP, fs->work);
	snprintf(shm, sizeof(shm), "%s/" AL_JOBFS_SHM, fs->work);
	if (unshare(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWIPC) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		setup_fail(setup_wr, "the job's mounts");
	if (agent_vm.image) {
		if (image_root(work, tmp_src, shm) ||
		    (st->tree && !st->tree_rw && mount(NULL, "/work", NULL, ro, NULL)))
			setup_fail(setup_wr, "the job's root in its image");
	} else if (mount(tmp_src, "/tmp", NULL, MS_BIND, NULL) ||
		   mount(shm, "/dev/shm", NULL, MS_BIND, NULL) ||
		   mount("airlock-mask", "/sys/fs/cgroup", "tmpfs",
			 MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555") ||
		   (st->tree && (mount(work, "/work", NULL, MS_BIND, NULL) ||
				 (!st->tree_rw && mount(NULL, "/work", NULL, ro, NULL)))))
		setup_fail(setup_wr, "the job's mounts");
	for (int i = 0; i < JOB_FDS; i++)
		if (fds[i] >= 0 && dup2(fds[i], 10 + i) < 0)
			setup_fail(setup_wr, "place descriptors");
	for (int i = 0; i < JOB_FDS; i++)
		if (fds[i] >= 0 && dup2(10 + i, i) < 0)
			setup_fail(setup_wr, "place descriptors");
	for (int i = 3; i < JOB_FDS; i++)
		if (fds[i] < 0)
			close(i);
	syscall(SYS_close_range, JOB_FDS, (unsigned)setup_wr - 1, 0);
	syscall(SYS_close_range, (unsigned)setup_wr + 1, ~0u, 0);
	if (setsid() < 0 || chdir(agent_vm.image || st->tree ? "/work" : fs->home))
		setup_fail(setup_wr, "chdir to the work dir");
	{
		const char *what = "drop the capability bounding set";

		/* a grading job's tests each have a uid of their own, and the
		 * build's group: they read what the build made */
		if (al_drop_bounding_set() || al_become(st->uid, JOB_UID, &what))
			setup_fail(setup_wr, what);
	}
	set_rlimit(RLIMIT_CPU, (rlim_t)((l->cpu_ms + 999) / 1000), setup_wr);
	set_rlimit(RLIMIT_FSIZE, (rlim_t)al_fsize_limit(l), setup_wr);
	set_rlimit(RLIMIT_CORE, 0, setup_wr);
	set_rlimit(RLIMIT_MEMLOCK, 0, setup_wr);
	set_rlimit(RLIMIT_NOFILE, 1024, setup_wr);
	if (al_seccomp_apply(sc))
		setup_fail(setup_wr, "seccomp");
	{
		/* the job's own fault, as a shell reports it */
		int code = al_exec_job(prog, st->argv, st->envp);

		dprintf(2, "airlock: cannot execute %s: %s\n", prog, strerror(errno));
		_exit(code);
	}
}

/* The set-up pipe closes unread at the exec. */
pid_t agent_start_job(const struct step *st, const struct al_cg *cg, const struct al_seccomp *sc,
		      const struct al_jobfs *fs, const int fds[JOB_FDS], struct al_err *err)
{
	int setup[2];
	char msg[200];
	ssize_t n;
	pid_t pid;

	if (pipe2(setup, O_CLOEXEC))
		return al_err_sys(err, "agent: pipe"), -1;
	pid = fork();
	if (pid == 0)
		exec_job(st, cg, sc, fs, fds, setup[1]);
	close(setup[1]);
	if (pid < 0) {
		close(setup[0]);
		return al_err_sys(err, "agent: fork"), -1;
	}
	n = read(setup[0], msg, sizeof(msg) - 1); /* empty at the exec */
	close(setup[0]);
	if (n > 0) {
		msg[n] = '\0';
		waitpid(pid, NULL, 0);
		al_err_set(err, AL_ESANDBOX, "agent: set up the job's process: %s", msg);
		return -1;
	}
	return pid;
}

/* Wait for the job, saying we are alive every second (the host tells a
 * hung guest from a long job by that), stopping it at its whole-job limits
 * (CPU time of all its processes, output); PID 1 also reaps the orphans
 * the job leaves. *ws gets its wait status. */
/* Live output: what the job wrote since the last look, as 'O' frames
 * (al_output_pump: within its caps); sent[] counts what went. */
static ssize_t read_memfd(void *fs, int stream, uint64_t off, void *buf, size_t cap)
{
	return al_jobfs_output(fs, stream, off, buf, cap);
}

struct out_port {
	int fd;
	struct al_err *err;
};

static int send_frame(void *to, int stream, const void *data, size_t len)
{
	struct out_port *o = to;
	unsigned char st = (unsigned char)stream;

	return al_chan_write(o->fd, AL_CHAN_OUTPUT, &st, 1, data, len, -1, o->err);
}

/* Say we are alive, at most once a second (the host tells a hung guest
 * from a long job by that): while a job runs, and between a grading job's
 * many short steps. */
int agent_beat(int port, struct al_err *err)
{
	static uint64_t last;

	if (last && al_mono_ms() - last < AL_CHAN_HEARTBEAT_MS)
		return AL_OK;
	last = al_mono_ms();
	return al_chan_write(port, AL_CHAN_HEARTBEAT, NULL, 0, NULL, 0, -1, err) ? AL_ESANDBOX
										 : AL_OK;
}

/* The host restored this VM from a snapshot ('E', vmchan.h): the clock
 * set to the host's, its entropy mixed in and credited, the generator
 * reseeded from it at once (RNDRESEEDCRNG), so that copies of one snapshot
 * part ways from here. Best effort: said on the console when it fails. */
bool agent_restored(const uint8_t *p, size_t n)
{
	struct {
		int entropy_count, buf_size;
		uint8_t buf[32];
	} add = {.entropy_count = 256, .buf_size = 32};
	struct timespec ts;
	uint64_t ms = 0;
	int fd;

	if (n != 8 + sizeof(add.buf) + 1) {
		agent_say("restored: a frame of %zu bytes, ignored", n);
		return false;
	}
	for (int i = 0; i < 8; i++)
		ms = ms << 8 | p[i];
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000;
	if (clock_settime(CLOCK_REALTIME, &ts))
		agent_say("restored: clock_settime: %s", strerror(errno));
	memcpy(add.buf, p + 8, sizeof(add.buf));
	fd = open("/dev/random", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, RNDADDENTROPY, &add) || ioctl(fd, RNDRESEEDCRNG))
		agent_say("restored: reseeding: %s", strerror(errno));
	al_closep(&fd);
	return p[8 + sizeof(add.buf)] == 1;
}

/* 'C': the clean page cache dropped (what the job reads again comes from
 * the image's disk, that is the host's page cache), free memory compacted
 * into the large blocks that free page reporting hands to the host. */
static void trim(void)
{
	static const char *const knobs[] = {"/proc/sys/vm/drop_caches",
					    "/proc/sys/vm/compact_memory"};

	sync();
	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		int fd = open(knobs[i], O_WRONLY | O_CLOEXEC);

		if (fd < 0 || write(fd, "1", 1) != 1)
			agent_say("trim: %s: %s", knobs[i], strerror(errno));
		al_closep(&fd);
	}
}

/* A frame from the host while the job runs: 'E' and 'C' mean something. */
static void host_frame(int port, struct al_chan_rd *rd)
{
	struct al_err err = {0};

	if (al_chan_read(rd, port, 256, &err) != 1)
		return;
	if (rd->body.data[0] == AL_CHAN_RESTORED)
		agent_restored((const uint8_t *)rd->body.data + 1, rd->body.len - 1);
	else if (rd->body.data[0] == AL_CHAN_TRIM)
		trim();
	al_chan_rd_reset(rd);
}

static int wait_job(pid_t pid, int port, const struct al_cg *cg, const struct al_jobfs *fs,
		    const struct step *stp, int *ws, long *maxrss_kib, bool *timed_out,
		    struct al_err *err)
{
	struct rusage ru;
	const struct al_limits *l = stp->l;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), rc = AL_OK;
	uint64_t t0 = al_mono_ms(), sent[3] = {0};
	struct al_chan_rd rd = {0};
	int host = port; /* -1 once the host's end hangs up: not polled again */

	for (bool done = false, stopped = false; !done;) {
		struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN},
				      {.fd = host, .events = POLLIN}};
		int s;
		pid_t w;

		if (pidfd >= 0 && poll(p, 2, AL_USAGE_POLL_MS) >= 0 && !p[0].revents) {
			if (p[1].revents & POLLIN)
				host_frame(port, &rd);
			else if (p[1].revents)
				host = -1;
			/* a grading job's step has its own wall-clock limit (a
			 * plain job's is the host's: it kills the VM) */
			bool late = stp->tree && al_mono_ms() - t0 >= l->wall_ms;

			uint64_t cpu = al_cg_cpu_ns(cg);

			cpu = cpu > stp->cpu_base_ns ? cpu - stp->cpu_base_ns : 0;
			if (!stopped && (late || cpu / 1000000 >= l->cpu_ms ||
					 al_fd_size(fs->out_fd) > l->stdout_bytes ||
					 al_fd_size(fs->err_fd) > l->stderr_bytes)) {
				kill(pid, SIGKILL); /* the verdict reads why from the counters */
				stopped = true;
				*timed_out = late;
			}
			if (stp->live && al_output_pump(l, sent, read_memfd, (void *)fs, send_frame,
							&(struct out_port){port, err})) {
				rc = AL_ESANDBOX;
				break;
			}
			if ((rc = agent_beat(port, err)))
				break;
			continue;
		}
		while ((w = wait4(-1, &s, pidfd >= 0 ? WNOHANG : 0, &ru)) > 0 ||
		       (w < 0 && errno == EINTR))
			if (w == pid) {
				*ws = s;
				*maxrss_kib = ru.ru_maxrss; /* the job's, and what it waited for */
				done = true;
			}
		if (w < 0 && errno != EINTR && !done) {
			rc = al_err_sys(err, "agent: wait");
			break;
		}
	}
	al_closep(&pidfd);
	al_chan_rd_free(&rd);
	return rc;
}

int agent_finish_step(const struct al_job *job, const struct step *st, pid_t pid, struct al_cg *cg,
		      struct al_jobfs *fs, int port, uint32_t collect_cap, uint64_t t0,
		      struct al_result *res, struct al_err *err)
{
	const struct al_limits *l = st->l;
	struct al_cg_stats stats = {0};
	bool disk_full = false, timed_out = false;
	int ws = 0, rc;
	long rss = 0;

	if ((rc = wait_job(pid, port, cg, fs, st, &ws, &rss, &timed_out, err)))
		return rc;
	res->max_rss_bytes = rss > 0 ? (uint64_t)rss * 1024 : 0;
	al_cg_stats(cg, &stats);
	stats.cpu_ns = stats.cpu_ns > st->cpu_base_ns ? stats.cpu_ns - st->cpu_base_ns : 0;
	al_cg_destroy(cg, NULL); /* the job's leftovers (daemons) die with it */
	/* each file cut to the host's cap here: no byte more crosses */
	if ((rc = al_jobfs_collect(fs, job, l, collect_cap, res, &disk_full, err)))
		return rc;
	al_end_status(res, ws, &stats, l, disk_full);
	if (timed_out && res->status != AL_ST_MEMORY_LIMIT) {
		res->status = AL_ST_TIMEOUT;
		res->has_exit_code = false;
		al_result_set_error(res, "wall-clock limit of %llu ms reached: killed",
				    (unsigned long long)l->wall_ms);
	}
	res->wall_ms = al_mono_ms() - t0;
	return AL_OK;
}

/* Run one command (the job, or a grading job's step) in a cgroup named
 * cgname with job's stdin, code and files; fill res. A returned error is
 * the sandbox's, not the job's. */
int agent_run_step(const struct al_job *job, const struct step *st, const char *cgname, int port,
		   uint32_t collect_cap, struct al_result *res, struct al_err *err)
{
	const struct al_limits *l = st->l;
	struct al_cg_limits cgl = {l->memory_bytes, l->pids, 0};
	struct al_cg_sys sys;
	struct al_cg cg;
	struct al_jobfs fs;
	struct al_seccomp sc;
	int fds[JOB_FDS] = {-1, -1, -1, -1, -1}, rc;
	uint64_t t0 = al_mono_ms();
	pid_t pid;

	if ((rc = al_seccomp_build_net(&sc, agent_vm.service || agent_vm.net, err)))
		return rc;
	if ((rc = al_cg_detect(&sys, "guest", NULL, err)) ||
	    (rc = al_cg_create(&cg, &sys, cgname, &cgl, err)))
		goto out_sc;
	if ((rc = al_jobfs_create(&fs, "/run/airlock", cgname, job, l->disk_bytes, st->uid, JOB_UID,
				  false, err)))
		goto out_cg;
	/* the inputs disk: the job's inputs, or only the CA bundle of a tier
	 * with egress.ca_file or cache_https */
	if ((job->ninputs || agent_vm.inputs_dev[0]) &&
	    (rc = agent_vm.inputs_dev[0]
		      ? al_jobfs_unpack(&fs, agent_vm.inputs_dev, st->uid, JOB_UID, 0, err)
		      : al_err_set(err, AL_ESANDBOX,
				   "agent: the job has inputs and the VM "
				   "no inputs disk"))) {
		al_jobfs_destroy(&fs);
		goto out_cg;
	}
	fds[0] = agent_memfd("stdin", job->stdin_data.data, job->stdin_data.len);
	fds[1] = fs.out_fd;
	fds[2] = fs.err_fd;
	if (job->code.len)
		fds[3] = agent_memfd("code", job->code.data, job->code.len);
	if (fds[0] < 0 || (job->code.len && fds[3] < 0)) {
		rc = al_err_sys(err, "agent: memfd");
		goto out_fs;
	}
	/* a session's server: its port to the worker, on fd 4 */
	if (job->session && (fds[4] = agent_find_port(AL_SESSION_PORT, 2000)) < 0) {
		rc = al_err_sys(err, "agent: the session port " AL_SESSION_PORT);
		goto out_fs;
	}
	if ((pid = agent_start_job(st, &cg, &sc, &fs, fds, err)) < 0) {
		rc = AL_ESANDBOX;
		goto out_fs;
	}
	if (agent_vm.service) {
		/* The service runs on; the result says it started. Its files,
		 * cgroup and output stay for as long as the VM lives. */
		res->status = AL_ST_OK;
		al_seccomp_free(&sc);
		return AL_OK;
	}
	rc = agent_finish_step(job, st, pid, &cg, &fs, port, collect_cap, t0, res, err);
out_fs:
	for (int i = 0; i < JOB_FDS; i++)
		if (i != 1 && i != 2 && fds[i] >= 0)
			close(fds[i]);
	al_jobfs_destroy(&fs);
out_cg:
	al_cg_destroy(&cg, NULL);
out_sc:
	al_seccomp_free(&sc);
	return rc;
}

/* Run the job; fill res. A returned error is the sandbox's, not the job's. */
