/* process.c - the process backend: a hardened child process.
 *
 * Each job runs under a tiny init that is PID 1 of fresh PID, network
 * (empty), mount, IPC and UTS namespaces, inside its own cgroup. For speed
 * every slot keeps one such init ready ("warm"): made in advance, it has
 * joined a fresh cgroup (slow on cgroup v1: an RCU grace period), mounted a
 * new /proc and empty tmpfs over the host paths a job must not see, closed
 * every descriptor, and waits on a socket. A job then costs one message: the
 * worker sets the cgroup's limits and sends the job's descriptors (its work
 * tmpfs, a detached mount never visible on the host; stdin; stdout and
 * stderr files; the script) and a spec (argv, environment, rlimits). The init
 * moves the tmpfs onto /tmp, drops to the slot's uid with no capabilities
 * and no_new_privs, and forks the job: setsid, rlimits, seccomp, exec. When
 * the job's main process exits the init reports its wait status and exits,
 * and the kernel kills everything left in the PID namespace, so no daemon
 * outlives the job. A timeout SIGKILLs the init through its pidfd, which does
 * the same. The init dies with the worker (PR_SET_PDEATHSIG).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../proto/buf.h"
#include "backend.h"
#include "cgroup.h"
#include "jobfs.h"
#include "jobspec.h"
#include "seccomp.h"
#include "verdict.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

/* Descriptor layout inside the sandbox. */
enum { FD_STDIN = 0, FD_STDOUT = 1, FD_STDERR = 2, FD_CODE = 3, FD_REPORT = 4, FD_CTL = 5 };

/* Descriptors sent with the go message, in this order. */
enum { GO_WORK, GO_STDIN, GO_STDOUT, GO_STDERR, GO_CODE, GO_SPEC, GO_NFDS };

#define MAX_ARGS 600 /* argv + envp pointers the init unpacks (caps: 256+3, 64+64+5) */

/* The spec memfd: this header, then argc argv strings and envc environment
 * strings, each NUL-terminated. Written by the worker, read by the init. */
struct spec_hdr {
	uint64_t rl_as, rl_cpu, rl_fsize, rl_nofile; /* rlimits (bytes, seconds, count) */
	uint64_t shm_bytes;			    /* size of the private /dev/shm */
	uint32_t argc, envc;
	uint32_t uid;				    /* the slot's uid (and gid) */
	uint32_t has_code;			    /* fd 3 holds the script */
};

/* One pre-made init per slot. */
struct warm {
	pid_t pid;
	int pidfd;
	int mntns;	/* the sandbox's mount namespace, held (see proc_destroy) */
	int ctl;	/* our end of the control socket */
	int report_rd;	/* init -> worker: "E<message>" or "X<wait status>" */
	struct al_cg cg;
	bool cg_made;
	bool ready;
};

/* Global state filled by init (one worker process, one configuration). */
static struct {
	struct al_cg_sys cg;
	struct al_seccomp seccomp;
	const struct al_backend_conf *conf;
	char jobs_root[PATH_MAX]; /* <state_dir>/<worker_id>/process */
	struct warm *warm;	  /* conf->slots entries */
	int *grave;		  /* per slot: a finished sandbox's mount namespace */
	unsigned seq;		  /* names the cgroups of warm inits */
	bool ready;
} G;

struct proc_sb {
	struct al_jobfs fs;
	struct al_cg cg;
	bool cg_made;
	int code_fd;	/* memfd with the script, -1 for argv jobs */
	int stdin_fd;	/* memfd with stdin */
	int spec_fd;	/* memfd with the spec */
	int report_rd;
	int pidfd;
	int mntns;
	pid_t pid;
	bool exited;
	uint64_t cpu_base_ns; /* the cgroup's CPU time before the job */
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

/* Put fds[i] on targets[i] (overlaps allowed), close every other fd. */
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
	for (int fd = 0; fd < 100; fd++) {
		bool keep = false;

		for (int i = 0; i < n; i++)
			keep |= targets[i] == fd;
		if (!keep)
			close(fd);
	}
	if (syscall(SYS_close_range, 100u, ~0u, 0) < 0) {
		for (int fd = 100; fd < 65536; fd++)
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

static void __attribute__((noreturn)) run_job(const struct spec_hdr *h, char **argv, char **envp)
{
	const char *prog = argv[0];

	if (setsid() < 0)
		die("setsid");
	if (chdir("/tmp"))
		die("chdir /tmp");
	set_rlimit(RLIMIT_AS, h->rl_as, h->rl_as, "setrlimit AS");
	set_rlimit(RLIMIT_CPU, h->rl_cpu, h->rl_cpu + 1, "setrlimit CPU");
	set_rlimit(RLIMIT_FSIZE, h->rl_fsize, h->rl_fsize, "setrlimit FSIZE");
	set_rlimit(RLIMIT_NOFILE, h->rl_nofile, h->rl_nofile, "setrlimit NOFILE");
	set_rlimit(RLIMIT_CORE, 0, 0, "setrlimit CORE");
	set_rlimit(RLIMIT_MEMLOCK, 0, 0, "setrlimit MEMLOCK");
	if (!h->has_code)
		close(FD_CODE);
	if (al_seccomp_apply(&G.seccomp))
		die("seccomp");
	/* Last step: exec. A failure is the job's (a missing program): it goes
	 * to the job's stderr with the shell's exit code 127. */
	if (strchr(prog, '/')) {
		execve(prog, argv, envp);
	} else {
		char path[PATH_MAX];
		const char *dir = AL_SEARCH_PATH;

		while (*dir) {
			const char *end = strchr(dir, ':');
			size_t dn = end ? (size_t)(end - dir) : s_len(dir);

			if (dn + 1 + s_len(prog) < sizeof(path)) {
				memcpy(path, dir, dn);
				path[dn] = '/';
				memcpy(path + dn + 1, prog, s_len(prog) + 1);
				execve(path, argv, envp);
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

/* Receive the go message: GO_NFDS descriptors. Returns 0, or -1 when the
 * worker closed the socket (no job will come). */
static int recv_go(int fds[GO_NFDS])
{
	char byte, ctl[CMSG_SPACE(sizeof(int) * GO_NFDS)];
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			     .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;
	ssize_t n;

	do
		n = recvmsg(FD_CTL, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	c = CMSG_FIRSTHDR(&mh);
	if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int) * GO_NFDS))
		die("bad go message");
	memcpy(fds, CMSG_DATA(c), sizeof(int) * GO_NFDS);
	return 0;
}

/* Split the spec's strings into argv and envp (pointers into the mapping). */
static void unpack_spec(const struct spec_hdr *h, size_t len, char **argv, char **envp)
{
	char *p = (char *)(h + 1), *end = (char *)h + len;
	uint32_t n = 0;

	if (h->argc == 0 || h->argc + h->envc + 2 > MAX_ARGS)
		die("bad spec");
	for (uint32_t i = 0; i < h->argc + h->envc; i++) {
		char *s = p;

		while (p < end && *p)
			p++;
		if (p >= end)
			die("truncated spec");
		p++;
		if (i < h->argc)
			argv[n++] = s;
		else
			envp[i - h->argc] = s;
	}
	argv[h->argc] = NULL;
	envp[h->envc] = NULL;
}

static void __attribute__((noreturn)) warm_init(int ctl, int report_wr, const struct al_cg *cg)
{
	int keep[2] = { report_wr, ctl };
	const int targets[2] = { FD_REPORT, FD_CTL };
	int go[GO_NFDS], status = 0;
	char *argv[MAX_ARGS], *envp[MAX_ARGS];
	const struct spec_hdr *h;
	struct stat st;
	char shm[64];
	pid_t job;

	/* If the worker dies, the init dies, and with it the namespace. The
	 * worker may have died before the death signal was armed: then the
	 * read end of the report pipe is closed (poll says POLLERR). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		_exit(125);
	{
		struct pollfd pf = { .fd = report_wr, .events = POLLOUT };

		if (poll(&pf, 1, 0) < 0 || (pf.revents & (POLLERR | POLLHUP)))
			_exit(125);
	}
	place_fds(keep, targets, 2);
	if (fcntl(FD_REPORT, F_SETFD, FD_CLOEXEC) || fcntl(FD_CTL, F_SETFD, FD_CLOEXEC))
		die("cloexec");
	signal(SIGPIPE, SIG_DFL);

	/* Into the slot's fresh cgroup first, so every later fork is counted. */
	if (al_cg_enter_self(cg))
		die("join the job's cgroup");
	if (unshare(CLONE_NEWCGROUP))
		die("cgroup namespace");
	/* Filesystem view: private propagation, new /proc, host paths hidden. */
	mount_or_die(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL, "make / private");
	mount_or_die("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
		     "mount /proc");
	hide("/root");
	hide("/home");
	hide("/run");
	hide("/var/lib/airlock");
	hide(G.conf->state_dir);
	for (const char *const *p = G.conf->hide_paths; p && *p; p++)
		hide(*p);
	if (sethostname("airlock", 7))
		die("sethostname");

	/* Wait for a job. */
	if (recv_go(go))
		_exit(0);
	if (fstat(go[GO_SPEC], &st) || st.st_size < (off_t)sizeof(*h) ||
	    (h = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, go[GO_SPEC], 0)) == MAP_FAILED)
		die("read the spec");
	unpack_spec(h, (size_t)st.st_size, argv, envp);
	/* The job's tmpfs on /tmp (its work dir, HOME and cwd), a private
	 * /dev/shm. */
	if (move_mount(go[GO_WORK], "", AT_FDCWD, "/tmp", MOVE_MOUNT_F_EMPTY_PATH))
		die("move the work dir onto /tmp");
	snprintf(shm, sizeof(shm), "size=%llu,mode=1777", (unsigned long long)h->shm_bytes);
	if (access("/dev/shm", F_OK) == 0)
		mount_or_die("airlock-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, shm,
			     "mount /dev/shm");
	{
		int fds[6] = { go[GO_STDIN], go[GO_STDOUT], go[GO_STDERR], go[GO_CODE], FD_REPORT };
		const int tg[5] = { FD_STDIN, FD_STDOUT, FD_STDERR, FD_CODE, FD_REPORT };

		place_fds(fds, tg, 5); /* closes the control socket, the spec, the work fd */
	}
	if (fcntl(FD_REPORT, F_SETFD, FD_CLOEXEC))
		die("cloexec report fd");

	drop_privileges(h->uid);
	/* Changing credentials cleared the death signal: arm it again, then
	 * make sure the worker did not die in between. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		die("death signal");
	{
		struct pollfd pf = { .fd = FD_REPORT, .events = POLLOUT };

		if (poll(&pf, 1, 0) < 0 || (pf.revents & (POLLERR | POLLHUP)))
			_exit(125);
	}

	job = fork();
	if (job < 0)
		die("fork the job");
	if (job == 0)
		run_job(h, argv, envp);

	/* The init's own job: reap everything, report the job's status. */
	for (;;) {
		int st2;
		pid_t w = waitpid(-1, &st2, 0);

		if (w == job) {
			status = st2;
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

static void warm_discard(struct warm *w)
{
	if (w->pidfd >= 0) {
		siginfo_t si;

		syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
		waitid(P_PIDFD, (id_t)w->pidfd, &si, WEXITED);
		close(w->pidfd);
	}
	if (w->ctl >= 0)
		close(w->ctl);
	if (w->report_rd >= 0)
		close(w->report_rd);
	if (w->mntns >= 0)
		close(w->mntns);
	if (w->cg_made)
		al_cg_destroy(&w->cg, NULL);
	memset(w, 0, sizeof(*w));
	w->pidfd = w->ctl = w->report_rd = w->mntns = -1;
}

/* Make slot's warm init. */
static int warm_spawn(unsigned slot, struct al_err *err)
{
	struct warm *w = &G.warm[slot];
	struct al_cg_limits none = { 0 };
	char name[48];
	int sv[2], pipefd[2], pidfd = -1, rc;
	pid_t pid;

	warm_discard(w);
	snprintf(name, sizeof(name), "%u-%u", slot, ++G.seq);
	if ((rc = al_cg_create(&w->cg, &G.cg, name, &none, err)))
		return al_err_wrap(err, "process");
	w->cg_made = true;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		rc = al_err_sys(err, "process: socketpair");
		goto out_discard;
	}
	if (pipe2(pipefd, O_CLOEXEC)) {
		close(sv[0]);
		close(sv[1]);
		rc = al_err_sys(err, "process: pipe");
		goto out_discard;
	}
	pid = clone3_pidfd(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS,
			   &pidfd);
	if (pid == 0)
		warm_init(sv[1], pipefd[1], &w->cg); /* never returns */
	close(sv[1]);
	close(pipefd[1]);
	w->ctl = sv[0];
	w->report_rd = pipefd[0];
	if (pid < 0) {
		rc = al_err_sys(err, "process: clone3 with new PID/network/mount namespaces");
		goto out_discard;
	}
	w->pid = pid;
	w->pidfd = pidfd;
	{
		char ns[64];

		snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
		w->mntns = open(ns, O_RDONLY | O_CLOEXEC); /* -1 is fine: slower exit */
	}
	fcntl(w->report_rd, F_SETFL, O_NONBLOCK);
	w->ready = true;
	return AL_OK;
out_discard:
	warm_discard(w);
	return rc;
}

static bool warm_alive(const struct warm *w)
{
	struct pollfd pf = { .fd = w->pidfd, .events = POLLIN };

	return w->ready && w->pidfd >= 0 && poll(&pf, 1, 0) == 0;
}

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

static int proc_init(const struct al_backend_conf *conf, struct al_err *err)
{
	uid_t me = getuid();
	int rc;

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
	/* Self-check: the kernel must load seccomp filters. */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, NULL) == 0 || errno != EFAULT) {
		al_seccomp_free(&G.seccomp);
		return al_err_set(err, AL_ESANDBOX, "process: seccomp filters unavailable in the kernel");
	}
	G.warm = calloc(conf->slots, sizeof(*G.warm));
	G.grave = malloc(conf->slots * sizeof(*G.grave));
	if (!G.warm || !G.grave) {
		free(G.warm);
		free(G.grave);
		al_seccomp_free(&G.seccomp);
		return al_err_set(err, AL_ENOMEM, "process: out of memory");
	}
	for (unsigned i = 0; i < conf->slots; i++) {
		G.warm[i].pidfd = G.warm[i].ctl = G.warm[i].report_rd = G.warm[i].mntns = -1;
		G.grave[i] = -1;
	}
	G.ready = true;
	/* Self-check: one warm init per slot, each in new PID, network and mount
	 * namespaces and a cgroup: any failure means this backend is not
	 * offered (fail closed). */
	for (unsigned i = 0; i < conf->slots; i++) {
		if ((rc = warm_spawn(i, err))) {
			for (unsigned k = 0; k < conf->slots; k++)
				warm_discard(&G.warm[k]);
			free(G.warm);
			free(G.grave);
			G.warm = NULL;
			G.grave = NULL;
			al_seccomp_free(&G.seccomp);
			G.ready = false;
			return rc;
		}
	}
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
	uid_t uid = sb->conf->uid_base + sb->spec.slot;
	struct al_buf spec = { 0 };
	struct spec_hdr h = { 0 };
	char name[AL_ID_MAX + 16];
	int rc;

	p->code_fd = p->stdin_fd = p->spec_fd = p->report_rd = p->pidfd = p->mntns = -1;
	p->fs.out_fd = p->fs.err_fd = p->fs.mnt_fd = -1;
	if (!G.ready || sb->spec.slot >= sb->conf->slots)
		return al_err_set(err, AL_ESANDBOX, "process: backend not initialised");
	snprintf(name, sizeof(name), "%u-%s", sb->spec.slot, job->id);
	if ((rc = al_jobfs_create(&p->fs, G.jobs_root, name, job, l->disk_bytes, uid, uid, true,
				  err)))
		return al_err_wrap(err, "process");
	if (job->runtime != AL_RUNTIME_ARGV &&
	    (p->code_fd = memfd_with("job-code", job->code.data, job->code.len, err)) < 0)
		return p->code_fd;
	if ((p->stdin_fd = memfd_with("job-stdin", job->stdin_data.data, job->stdin_data.len, err)) < 0)
		return p->stdin_fd;
	/* The cgroup is the real memory limit; the address-space limit only
	 * stops absurd reservations, with room for runtimes that map a lot.
	 * stdout and stderr are files: the file-size limit stops a flood. */
	h.rl_as = l->memory_bytes + (1ull << 30);
	h.rl_cpu = (l->cpu_ms + 999) / 1000;
	h.rl_fsize = (l->stdout_bytes > l->stderr_bytes ? l->stdout_bytes : l->stderr_bytes) + 1;
	if (h.rl_fsize < sb->conf->collect_max_bytes + 1)
		h.rl_fsize = sb->conf->collect_max_bytes + 1;
	h.rl_nofile = sb->conf->nofile;
	h.shm_bytes = l->disk_bytes < (64u << 20) ? l->disk_bytes : (64u << 20);
	h.uid = uid;
	h.has_code = p->code_fd >= 0;
	if (al_buf_append(&spec, &h, sizeof(h)) ||
	    al_argv_env(&sb->spec, "/proc/self/fd/3", &spec, &h.argc, &h.envc)) {
		al_buf_free(&spec);
		return al_err_set(err, AL_ENOMEM, "process: out of memory");
	}
	memcpy(spec.data, &h, sizeof(h)); /* argc/envc known now */
	p->spec_fd = memfd_with("job-spec", spec.data, spec.len, err);
	al_buf_free(&spec);
	return p->spec_fd < 0 ? p->spec_fd : AL_OK;
}

static int send_go(struct warm *w, const int fds[GO_NFDS])
{
	char byte = 'G', ctl[CMSG_SPACE(sizeof(int) * GO_NFDS)];
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			     .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	memset(ctl, 0, sizeof(ctl));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * GO_NFDS);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * GO_NFDS);
	return sendmsg(w->ctl, &mh, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

static int proc_start(struct al_sandbox *sb, struct al_watch *wt, struct al_err *err)
{
	struct proc_sb *p = sb->priv;
	struct warm *w = &G.warm[sb->spec.slot];
	const struct al_limits *l = &sb->spec.limits;
	struct al_cg_limits cgl = {
		.memory_bytes = l->memory_bytes,
		.pids = l->pids + 1, /* the sandbox's init counts too */
		.cpu_millis = sb->spec.cpu_millis,
	};
	int fds[GO_NFDS] = { p->fs.mnt_fd, p->stdin_fd, p->fs.out_fd, p->fs.err_fd,
			     p->code_fd >= 0 ? p->code_fd : p->stdin_fd, p->spec_fd };
	struct al_cg_stats st;
	int rc;

	/* A warm init that died while waiting (or was never made) is made
	 * again now, at the cost of the cold path. */
	if (!warm_alive(w) && (rc = warm_spawn(sb->spec.slot, err)))
		return rc;
	if ((rc = al_cg_set_limits(&w->cg, &cgl, err)))
		return al_err_wrap(err, "process");
	al_cg_stats(&w->cg, &st);
	p->cpu_base_ns = st.cpu_ns;
	if (send_go(w, fds)) {
		/* died between the check and the message: one retry, cold */
		if ((rc = warm_spawn(sb->spec.slot, err)) || (rc = al_cg_set_limits(&w->cg, &cgl, err)))
			return rc;
		if (send_go(w, fds))
			return al_err_sys(err, "process: hand the job to its sandbox");
	}
	/* The sandbox is this job's now. */
	p->pid = w->pid;
	p->pidfd = w->pidfd;
	p->mntns = w->mntns;
	p->report_rd = w->report_rd;
	p->cg = w->cg;
	p->cg_made = w->cg_made;
	close(w->ctl);
	memset(w, 0, sizeof(*w));
	w->pidfd = w->ctl = w->report_rd = w->mntns = -1;
	wt->fds[wt->nfds++] = p->pidfd;
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
	st.cpu_ns = st.cpu_ns > p->cpu_base_ns ? st.cpu_ns - p->cpu_base_ns : 0;
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
	if (p->spec_fd >= 0)
		close(p->spec_fd);
	if (p->report_rd >= 0)
		close(p->report_rd);
	/* Tearing down a mount namespace waits for an RCU grace period; while
	 * we hold it the job's init exits without that wait, and the
	 * namespace (already empty of processes) goes in proc_refill, after
	 * the result. */
	if (p->mntns >= 0 && G.grave && sb->spec.slot < sb->conf->slots) {
		if (G.grave[sb->spec.slot] >= 0)
			close(G.grave[sb->spec.slot]);
		G.grave[sb->spec.slot] = p->mntns;
	} else if (p->mntns >= 0) {
		close(p->mntns);
	}
	p->pidfd = p->code_fd = p->stdin_fd = p->spec_fd = p->report_rd = p->mntns = -1;
	p->cg_made = false;
}

/* The slot's next sandbox is made after the result is out, between jobs: on
 * cgroup v1, joining a cgroup holds a global lock through an RCU grace
 * period that stalls every fork and exit on the host, and a running job
 * must not pay for it. */
static void proc_refill(const struct al_backend_conf *conf, unsigned slot)
{
	if (!G.ready || slot >= conf->slots)
		return;
	if (G.grave[slot] >= 0) {
		close(G.grave[slot]);
		G.grave[slot] = -1;
	}
	if (!G.warm[slot].ready)
		warm_spawn(slot, NULL);
}

static void proc_fini(void)
{
	char *slash;

	for (unsigned i = 0; G.warm && i < G.conf->slots; i++) {
		warm_discard(&G.warm[i]);
		if (G.grave[i] >= 0)
			close(G.grave[i]);
	}
	free(G.warm);
	free(G.grave);
	G.warm = NULL;
	G.grave = NULL;
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
	.refill = proc_refill,
	.fini = proc_fini,
};
