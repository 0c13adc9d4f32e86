/* process.c - the process backend: a hardened child process.
 *
 * Each job runs under a tiny init that is PID 1 of fresh PID, network
 * (empty), mount, IPC and UTS namespaces, inside its own cgroup. The init
 * mounts the job's tmpfs work dir on /tmp, a new /proc and empty tmpfs over
 * the host paths a job must not see, closes every other descriptor, drops to
 * the slot's uid with no capabilities and no_new_privs, then forks the job:
 * setsid, rlimits, seccomp, exec. When the job's main process exits the init
 * reports its wait status and exits, and the kernel kills everything left in
 * the PID namespace, so no daemon outlives the job. A timeout SIGKILLs the
 * init through its pidfd, which does the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "cgroup.h"
#include "jobfs.h"
#include "seccomp.h"
#include "verdict.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

/* Descriptor layout inside the sandbox. */
enum { FD_STDIN = 0, FD_STDOUT = 1, FD_STDERR = 2, FD_CODE = 3, FD_REPORT = 4 };

#define SEARCH_PATH "/usr/local/bin:/usr/bin:/bin"

/* Global state filled by init (one worker process, one configuration). */
static struct {
	struct al_cg_sys cg;
	struct al_seccomp seccomp;
	const struct al_backend_conf *conf;
	char jobs_root[PATH_MAX]; /* <state_dir>/<worker_id>/process */
	bool ready;
} G;

struct proc_sb {
	struct al_jobfs fs;
	struct al_cg cg;
	bool cg_made;
	int code_fd;	/* memfd with the script, -1 for argv jobs */
	int stdin_fd;	/* memfd with stdin */
	int report_rd;	/* init -> worker: "E<message>" or "X<wait status>" */
	int report_wr;
	int pidfd;
	pid_t pid;
	uid_t uid;
	bool exited;
	int init_status; /* wait status of the init */
	char **argv;
	char **envp;
};

/* clone3's argument block (linux/sched.h clashes with sched.h). */
struct clone_args_v2 {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls,
		set_tid, set_tid_size, cgroup;
};

static pid_t clone3_pidfd(uint64_t flags, int *pidfd)
{
	struct clone_args_v2 args = { 0 };

	args.flags = flags | CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)pidfd;
	args.exit_signal = SIGCHLD;
	return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
}

/* ---- child side: only async-signal-safe calls, no allocation ---- */

static size_t s_len(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

/* Report a set-up failure to the worker and die. */
static void __attribute__((noreturn)) die(const char *what)
{
	char msg[512];
	const char *e = strerror(errno);
	size_t n = 0, k;

	msg[n++] = 'E';
	k = s_len(what);
	if (k > 300)
		k = 300;
	memcpy(msg + n, what, k);
	n += k;
	memcpy(msg + n, ": ", 2);
	n += 2;
	k = s_len(e);
	if (k > 150)
		k = 150;
	memcpy(msg + n, e, k);
	n += k;
	if (write(FD_REPORT, msg, n) < 0) {
		/* nothing more we can do */
	}
	_exit(127);
}

/* Put fd on target, surviving overlaps: dup everything high first. */
static void place_fds(int *fds, const int *targets, int n)
{
	for (int i = 0; i < n; i++) {
		int hi = fcntl(fds[i], F_DUPFD, 100);

		if (hi < 0)
			_exit(126);
		fds[i] = hi;
	}
	for (int i = 0; i < n; i++)
		if (dup2(fds[i], targets[i]) < 0)
			_exit(126);
	if (syscall(SYS_close_range, (unsigned)n, ~0u, 0) < 0) {
		for (int fd = n; fd < 65536; fd++)
			close(fd);
	}
}

static void mount_or_die(const char *src, const char *dst, const char *type, unsigned long flags,
			 const char *data, const char *what)
{
	if (mount(src, dst, type, flags, data))
		die(what);
}

/* Hide a host path: an empty read-only tmpfs over a directory, /dev/null
 * over anything else (a socket becomes unconnectable). Missing is fine. */
static void hide(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return;
	if (S_ISDIR(st.st_mode)) {
		if (mount("airlock-hide", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  "size=4k,mode=0755"))
			die("hide a host directory");
	} else if (!S_ISLNK(st.st_mode)) {
		if (mount("/dev/null", path, NULL, MS_BIND, NULL))
			die("hide a host file");
	}
}

static void set_rlimit(int res, rlim_t soft, rlim_t hard, const char *what)
{
	struct rlimit rl = { soft, hard };

	if (setrlimit(res, &rl))
		die(what);
}

static void __attribute__((noreturn)) run_job(struct al_sandbox *sb)
{
	struct proc_sb *p = sb->priv;
	const struct al_limits *l = &sb->spec.limits;
	rlim_t cpu_s = (rlim_t)((l->cpu_ms + 999) / 1000);
	/* stdout and stderr are files: the file-size limit stops a flood. */
	rlim_t fsize = (l->stdout_bytes > l->stderr_bytes ? l->stdout_bytes : l->stderr_bytes) + 1;
	const char *prog = p->argv[0];

	if (setsid() < 0)
		die("setsid");
	if (chdir("/tmp"))
		die("chdir /tmp");
	/* The cgroup is the real memory limit; the address-space limit only
	 * stops absurd reservations, with room for runtimes that map a lot. */
	set_rlimit(RLIMIT_AS, l->memory_bytes + (1ull << 30), l->memory_bytes + (1ull << 30),
		   "setrlimit AS");
	set_rlimit(RLIMIT_CPU, cpu_s, cpu_s + 1, "setrlimit CPU");
	if (fsize < sb->conf->collect_max_bytes + 1)
		fsize = sb->conf->collect_max_bytes + 1;
	set_rlimit(RLIMIT_FSIZE, fsize, fsize, "setrlimit FSIZE");
	set_rlimit(RLIMIT_NOFILE, sb->conf->nofile, sb->conf->nofile, "setrlimit NOFILE");
	set_rlimit(RLIMIT_CORE, 0, 0, "setrlimit CORE");
	set_rlimit(RLIMIT_MEMLOCK, 0, 0, "setrlimit MEMLOCK");
	if (p->code_fd < 0)
		close(FD_CODE);
	if (al_seccomp_apply(&G.seccomp))
		die("seccomp");
	/* Last step: exec. A failure is the job's (a missing program): it goes
	 * to the job's stderr with the shell's exit code 127. */
	if (strchr(prog, '/')) {
		execve(prog, p->argv, p->envp);
	} else {
		char path[PATH_MAX];
		const char *dir = SEARCH_PATH;

		while (*dir) {
			const char *end = strchr(dir, ':');
			size_t dn = end ? (size_t)(end - dir) : s_len(dir);

			if (dn + 1 + s_len(prog) < sizeof(path)) {
				memcpy(path, dir, dn);
				path[dn] = '/';
				memcpy(path + dn + 1, prog, s_len(prog) + 1);
				execve(path, p->argv, p->envp);
			}
			if (!end)
				break;
			dir = end + 1;
		}
	}
	{
		const char *e = strerror(errno);

		if (write(FD_STDERR, "airlock: cannot execute ", 24) < 0 ||
		    write(FD_STDERR, prog, s_len(prog)) < 0 || write(FD_STDERR, ": ", 2) < 0 ||
		    write(FD_STDERR, e, s_len(e)) < 0 || write(FD_STDERR, "\n", 1) < 0) {
			/* stderr gone: nothing to report */
		}
	}
	_exit(127);
}

static void drop_privileges(uid_t uid)
{
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL)
			die("drop capability bounding set");
	if (setgroups(0, NULL))
		die("setgroups");
	if (setresgid(uid, uid, uid))
		die("setresgid");
	if (setresuid(uid, uid, uid))
		die("setresuid");
	/* Switching from root to a non-root uid clears every capability; make
	 * sure, and that none can be regained through exec. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		die("clear ambient capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		die("no_new_privs");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		die("dumpable");
}

static void __attribute__((noreturn)) sandbox_init(struct al_sandbox *sb)
{
	struct proc_sb *p = sb->priv;
	int fds[5] = { p->stdin_fd, p->fs.out_fd, p->fs.err_fd, p->code_fd, p->report_wr };
	const int targets[5] = { FD_STDIN, FD_STDOUT, FD_STDERR, FD_CODE, FD_REPORT };
	char devshm[64];
	int status = 0;
	pid_t job;

	/* If the worker dies, the init dies, and with it the namespace. The
	 * worker may have died before the death signal was armed: then the
	 * read end of the report pipe is closed (poll says POLLERR). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		_exit(125);
	{
		struct pollfd pf = { .fd = p->report_wr, .events = POLLOUT };

		if (poll(&pf, 1, 0) < 0 || (pf.revents & (POLLERR | POLLHUP)))
			_exit(125);
	}
	if (fds[3] < 0)
		fds[3] = p->stdin_fd; /* placeholder, closed before exec */
	place_fds(fds, targets, 5);
	if (fcntl(FD_REPORT, F_SETFD, FD_CLOEXEC))
		die("cloexec report fd");
	signal(SIGPIPE, SIG_DFL);

	/* Into the job's cgroup first, so every later fork is counted. */
	if (al_cg_enter_self(&p->cg))
		die("join the job's cgroup");
	if (unshare(CLONE_NEWCGROUP))
		die("cgroup namespace");

	/* Filesystem view: private propagation, work dir on /tmp, new /proc,
	 * private /dev/shm, host paths hidden. */
	mount_or_die(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL, "make / private");
	mount_or_die(p->fs.work, "/tmp", NULL, MS_BIND, NULL, "bind work dir on /tmp");
	mount_or_die(NULL, "/tmp", NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL,
		     "remount /tmp nosuid,nodev");
	snprintf(devshm, sizeof(devshm), "size=%llu,mode=1777",
		 (unsigned long long)(sb->spec.limits.disk_bytes < (64u << 20)
					      ? sb->spec.limits.disk_bytes
					      : (64u << 20)));
	if (access("/dev/shm", F_OK) == 0)
		mount_or_die("airlock-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			     devshm, "mount /dev/shm");
	mount_or_die("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
		     "mount /proc");
	hide("/root");
	hide("/home");
	hide("/run");
	hide("/var/lib/airlock");
	hide(sb->conf->state_dir);
	for (const char *const *h = sb->conf->hide_paths; h && *h; h++)
		hide(*h);
	if (sethostname("airlock", 7))
		die("sethostname");

	drop_privileges(p->uid);

	job = fork();
	if (job < 0)
		die("fork the job");
	if (job == 0)
		run_job(sb);

	/* The init's own job: reap everything, report the job's status. */
	for (;;) {
		int st;
		pid_t w = waitpid(-1, &st, 0);

		if (w == job) {
			status = st;
			break;
		}
		if (w < 0 && errno != EINTR)
			die("waitpid");
	}
	{
		char msg[32];
		int n = snprintf(msg, sizeof(msg), "X%d", status);

		if (write(FD_REPORT, msg, (size_t)n) < 0)
			_exit(125);
	}
	_exit(0); /* the kernel now kills whatever is left in the namespace */
}

/* ---- parent side ---- */

static int memfd_with(const char *name, const char *data, size_t len, struct al_err *err)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	size_t off = 0;

	if (fd < 0)
		return al_err_sys(err, "process: memfd_create");
	while (off < len) {
		ssize_t w = write(fd, data + off, len - off);

		if (w <= 0) {
			close(fd);
			return al_err_sys(err, "process: write memfd");
		}
		off += (size_t)w;
	}
	if (lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)) {
		close(fd);
		return al_err_sys(err, "process: seal memfd");
	}
	return fd;
}

static void free_strv(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

/* "NAME=value" strings: base, then the job's, then the policy's (the
 * operator's word wins over the job's for the same name). */
static char **build_env(const struct al_run_spec *spec)
{
	static const char *const base[] = { "PATH=" SEARCH_PATH, "HOME=/tmp", "TMPDIR=/tmp",
					    "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1" };
	const size_t nbase = sizeof(base) / sizeof(base[0]);
	size_t cap = nbase + spec->job->nenv + spec->nenv + 1, n = 0;
	char **env = calloc(cap, sizeof(*env));

	if (!env)
		return NULL;
	for (size_t i = 0; i < nbase + spec->job->nenv + spec->nenv; i++) {
		const char *k, *v;
		char *kv;
		size_t klen;

		if (i < nbase) {
			kv = strdup(base[i]);
		} else {
			const struct al_kv *p = i < nbase + spec->job->nenv
							? &spec->job->env[i - nbase]
							: &spec->env[i - nbase - spec->job->nenv];

			k = p->key;
			v = p->value;
			if (asprintf(&kv, "%s=%s", k, v) < 0)
				kv = NULL;
		}
		if (!kv)
			goto fail;
		klen = (size_t)(strchr(kv, '=') - kv) + 1;
		for (size_t j = 0; j < n; j++) {
			if (strncmp(env[j], kv, klen) == 0) {
				free(env[j]);
				env[j] = env[--n];
				break;
			}
		}
		env[n++] = kv;
	}
	return env;
fail:
	free_strv(env);
	return NULL;
}

static char **build_argv(const struct al_job *job)
{
	const char *head[3];
	size_t nh = 0, n = 0;
	char **argv;

	if (job->runtime == AL_RUNTIME_PYTHON) {
		head[nh++] = "/usr/bin/python3";
		head[nh++] = "-I";
		head[nh++] = "/proc/self/fd/3";
	} else if (job->runtime == AL_RUNTIME_SH) {
		head[nh++] = "/bin/sh";
		head[nh++] = "/proc/self/fd/3";
	}
	argv = calloc(nh + job->argc + 1, sizeof(*argv));
	if (!argv)
		return NULL;
	for (size_t i = 0; i < nh + job->argc; i++) {
		argv[n] = strdup(i < nh ? head[i] : job->argv[i - nh]);
		if (!argv[n++]) {
			free_strv(argv);
			return NULL;
		}
	}
	return argv;
}

static int proc_init(const struct al_backend_conf *conf, struct al_err *err)
{
	uid_t me = getuid();
	int rc, pidfd = -1;
	pid_t pid;

	memset(&G, 0, sizeof(G));
	G.conf = conf;
	if (geteuid() != 0)
		return al_err_set(err, AL_ESANDBOX,
				  "process: needs root (it makes namespaces, mounts and cgroups), running as uid %u",
				  (unsigned)geteuid());
	if (conf->uid_base == 0 || conf->slots == 0 ||
	    (me >= conf->uid_base && me < conf->uid_base + conf->slots))
		return al_err_set(err, AL_ESANDBOX,
				  "process: slot uids %u..%u must not include root or the worker's uid %u",
				  (unsigned)conf->uid_base, (unsigned)(conf->uid_base + conf->slots - 1),
				  (unsigned)me);
	if ((rc = al_cg_detect(&G.cg, conf->worker_id, err)))
		return al_err_wrap(err, "process");
	if ((rc = al_seccomp_build(&G.seccomp, err)))
		return al_err_wrap(err, "process");
	snprintf(G.jobs_root, sizeof(G.jobs_root), "%s/%s/process", conf->state_dir,
		 conf->worker_id);

	/* Self-check: a child in new PID, network and mount namespaces. */
	pid = clone3_pidfd(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS,
			   &pidfd);
	if (pid == 0)
		_exit(prctl(PR_SET_SECCOMP, 2 /* SECCOMP_MODE_FILTER */, NULL) < 0 &&
				      errno == EFAULT
			      ? 0
			      : 3);
	if (pid < 0) {
		al_seccomp_free(&G.seccomp);
		return al_err_sys(err, "process: cannot create PID/network/mount namespaces (clone3)");
	} else {
		int st = 0;

		waitpid(pid, &st, 0);
		close(pidfd);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			al_seccomp_free(&G.seccomp);
			return al_err_set(err, AL_ESANDBOX, "process: seccomp filters unavailable in the kernel");
		}
	}
	{
		struct al_cg cg;
		struct al_cg_limits lim = { 1u << 30, 64, 1000 };

		if ((rc = al_cg_create(&cg, &G.cg, "selfcheck", &lim, err)) ||
		    (rc = al_cg_destroy(&cg, err))) {
			al_seccomp_free(&G.seccomp);
			return al_err_wrap(err, "process: cgroup %s self-check",
					   al_cg_version_name(G.cg.version));
		}
	}
	G.ready = true;
	return AL_OK;
}

static int proc_sweep(const struct al_backend_conf *conf, struct al_err *err)
{
	struct al_cg_sys sys;
	char root[PATH_MAX];
	int rc = AL_OK;

	if (al_cg_detect(&sys, conf->worker_id, NULL) == AL_OK && al_cg_sweep(&sys, err))
		rc = AL_ESANDBOX;
	snprintf(root, sizeof(root), "%s/%s/process", conf->state_dir, conf->worker_id);
	if (al_jobfs_sweep(root, err))
		rc = AL_ESANDBOX;
	return rc;
}

static int proc_prepare(struct al_sandbox *sb, struct al_err *err)
{
	struct proc_sb *p = sb->priv;
	const struct al_job *job = sb->spec.job;
	const struct al_limits *l = &sb->spec.limits;
	struct al_cg_limits cgl = {
		.memory_bytes = l->memory_bytes,
		.pids = l->pids + 1, /* the sandbox's init counts too */
		.cpu_millis = sb->spec.cpu_millis,
	};
	char name[AL_ID_MAX + 16];
	int pipefd[2];
	int rc;

	p->code_fd = p->stdin_fd = p->report_rd = p->report_wr = p->pidfd = -1;
	p->fs.out_fd = p->fs.err_fd = -1;
	if (!G.ready)
		return al_err_set(err, AL_ESANDBOX, "process: backend not initialised");
	p->uid = sb->conf->uid_base + sb->spec.slot;
	snprintf(name, sizeof(name), "%u-%s", sb->spec.slot, job->id);
	if ((rc = al_jobfs_create(&p->fs, G.jobs_root, name, job, l->disk_bytes, p->uid, p->uid, err)))
		return al_err_wrap(err, "process");
	if ((rc = al_cg_create(&p->cg, &G.cg, name, &cgl, err)))
		return al_err_wrap(err, "process");
	p->cg_made = true;
	if (job->runtime != AL_RUNTIME_ARGV &&
	    (p->code_fd = memfd_with("job-code", job->code.data, job->code.len, err)) < 0)
		return p->code_fd;
	if ((p->stdin_fd = memfd_with("job-stdin", job->stdin_data.data, job->stdin_data.len, err)) < 0)
		return p->stdin_fd;
	if (pipe2(pipefd, O_CLOEXEC))
		return al_err_sys(err, "process: pipe");
	p->report_rd = pipefd[0];
	p->report_wr = pipefd[1];
	p->argv = build_argv(job);
	p->envp = build_env(&sb->spec);
	if (!p->argv || !p->envp)
		return al_err_set(err, AL_ENOMEM, "process: out of memory");
	return AL_OK;
}

static int proc_start(struct al_sandbox *sb, struct al_watch *w, struct al_err *err)
{
	struct proc_sb *p = sb->priv;
	int pidfd = -1;
	pid_t pid;

	pid = clone3_pidfd(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS,
			   &pidfd);
	if (pid < 0)
		return al_err_sys(err, "process: clone3 with new PID/network/mount namespaces");
	if (pid == 0)
		sandbox_init(sb); /* never returns */
	p->pid = pid;
	p->pidfd = pidfd;
	close(p->report_wr);
	p->report_wr = -1;
	fcntl(p->report_rd, F_SETFL, O_NONBLOCK);
	w->fds[w->nfds++] = pidfd;
	return AL_OK;
}

static int proc_kill(struct al_sandbox *sb, struct al_err *err)
{
	struct proc_sb *p = sb->priv;

	if (p->pidfd < 0 || p->exited)
		return AL_OK;
	/* Killing the namespace's init kills every process in it. */
	if (syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0) && errno != ESRCH)
		return al_err_sys(err, "process: kill the sandbox");
	return AL_OK;
}

static int proc_reap(struct al_sandbox *sb, struct al_result *res, struct al_err *err)
{
	struct proc_sb *p = sb->priv;
	struct al_cg_stats st;
	char report[600];
	siginfo_t si = { 0 };
	bool disk_full = false;
	ssize_t n;
	int rc, ws;

	if (waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED | WNOHANG) < 0)
		return al_err_sys(err, "process: waitid");
	if (si.si_pid == 0)
		return 0; /* still running */
	p->exited = true;
	n = read(p->report_rd, report, sizeof(report) - 1);
	report[n > 0 ? n : 0] = '\0';
	al_cg_stats(&p->cg, &st);
	if ((rc = al_jobfs_collect(&p->fs, sb->spec.job, &sb->spec.limits,
				   sb->conf->collect_max_bytes, res, &disk_full, err)))
		return al_err_wrap(err, "process");
	if (report[0] == 'E')
		return al_err_set(err, AL_ESANDBOX, "process: sandbox set-up failed: %s", report + 1);
	if (report[0] == 'X') {
		ws = atoi(report + 1);
	} else {
		/* The init died without a word: SIGKILLed by us (timeout, cancel)
		 * or by the OOM killer. The runner knows about our kills. */
		ws = si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED ? si.si_status : SIGKILL;
		ws &= 0x7f; /* a "killed by signal" wait status */
		if (st.oom_kills == 0 && si.si_code == CLD_EXITED)
			return al_err_set(err, AL_ESANDBOX, "process: sandbox init exited %d without a report",
					  si.si_status);
	}
	al_verdict(res, ws, &st, &sb->spec.limits, disk_full);
	return 1;
}

static void proc_destroy(struct al_sandbox *sb)
{
	struct proc_sb *p = sb->priv;

	if (p->pidfd >= 0) {
		if (!p->exited) {
			siginfo_t si;

			syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
			waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED);
		}
		close(p->pidfd);
	}
	if (p->cg_made)
		al_cg_destroy(&p->cg, NULL);
	al_jobfs_destroy(&p->fs);
	if (p->code_fd >= 0)
		close(p->code_fd);
	if (p->stdin_fd >= 0)
		close(p->stdin_fd);
	if (p->report_rd >= 0)
		close(p->report_rd);
	if (p->report_wr >= 0)
		close(p->report_wr);
	free_strv(p->argv);
	free_strv(p->envp);
	p->argv = p->envp = NULL;
	p->pidfd = p->code_fd = p->stdin_fd = p->report_rd = p->report_wr = -1;
}

static void proc_fini(void)
{
	char *slash;

	al_seccomp_free(&G.seccomp);
	al_cg_release(&G.cg);
	rmdir(G.jobs_root); /* <state>/<worker>/process, then <state>/<worker> */
	slash = strrchr(G.jobs_root, '/');
	if (slash) {
		*slash = '\0';
		rmdir(G.jobs_root);
	}
	G.ready = false;
}

const struct al_backend_ops al_backend_process = {
	.name = "process",
	.caps = AL_CAP_NO_NETWORK | AL_CAP_MEMORY | AL_CAP_PIDS | AL_CAP_CPU | AL_CAP_FILES,
	.priv_size = sizeof(struct proc_sb),
	.init = proc_init,
	.sweep = proc_sweep,
	.prepare = proc_prepare,
	.start = proc_start,
	.kill = proc_kill,
	.reap = proc_reap,
	.destroy = proc_destroy,
	.fini = proc_fini,
};
