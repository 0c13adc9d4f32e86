/* init.c - airlock-sandbox-init: PID 1 of a process-backend sandbox.
 *
 * Built static and small on purpose: the worker executes it in a child it
 * cloned into fresh namespaces (see init.h), so the init does not carry a
 * copy of the worker's address space (dozens of libraries): forking the job
 * and tearing the sandbox down stay cheap. Before the job (the slot's
 * "warm" sandbox) it joins the slot's cgroup, mounts a new /proc and hides
 * host paths, empties the capability bounding set and loads the seccomp
 * program the worker compiled. The go message brings the job's descriptors
 * and spec; the init moves the job's tmpfs onto /tmp, drops to the slot's
 * uid with no capabilities and no_new_privs, and starts the job (setsid,
 * rlimits, seccomp, exec). It reaps everything and reports the job's wait
 * status. The worker never runs this by hand; it refuses to run on its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
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

#include "../fdpass.h"
#include "../hostroot.h"
#include "../jobexec.h"
#include "../jobfs_layout.h"
#include "../newroot.h"
#include "../jobspec.h" /* AL_SEARCH_PATH */
#include "init.h"

/* Descriptor layout of the job (the warm interpreter's socket and exec
 * pipe go on FD_WARM_CTL and FD_WARM_EXEC while they are placed). */
enum { FD_STDIN = 0, FD_STDOUT = 1, FD_STDERR = 2, FD_CODE = 3, FD_WARM_CTL = 5, FD_WARM_EXEC = 6 };
#define FD_REPORT AL_INIT_FD_REPORT

#define BPF_MAX 4096 /* BPF_MAXINSNS */

static struct sock_filter bpf[BPF_MAX], bpf_inet[BPF_MAX];
/* the job's filter, and the one for network egress (AF_INET sockets too:
 * its network namespace holds only loopback and the proxy) */
static struct sock_fprog bpf_prog = {0, bpf}, bpf_inet_prog = {0, bpf_inet};

/* Report a set-up failure to the worker and die. */
static void __attribute__((noreturn)) die(const char *what)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "E%.300s: %.150s", what, strerror(errno));
	if (write(FD_REPORT, msg, strlen(msg)) < 0) {
		/* nothing more we can do */
	}
	_exit(127);
}

/* Put fds[i] on targets[i] (overlaps allowed; the targets are 0..n-1 in
 * some order), close every other fd. */
static void place_fds(int *fds, const int *targets, int n)
{
	for (int i = 0; i < n; i++) {
		int hi = fcntl(fds[i], F_DUPFD_CLOEXEC, 100);

		if (hi < 0)
			die("move a descriptor");
		fds[i] = hi;
	}
	for (int i = 0; i < n; i++)
		if (dup2(fds[i], targets[i]) < 0)
			die("place a descriptor");
	/* targets are 0..n-1 here: everything above them goes */
	if (syscall(SYS_close_range, (unsigned)n, ~0u, 0) < 0)
		die("close descriptors");
}

static void mount_or_die(const char *src, const char *dst, const char *type, unsigned long flags,
			 const char *data, const char *what)
{
	if (mount(src, dst, type, flags, data))
		die(what);
}

/* ---- the sandbox's own root (the bubblewrap model) ----
 *
 * A small tmpfs becomes "/": read-only binds of what programs need (/usr,
 * the /bin, /sbin and /lib* links or directories as the host has them), a
 * curated /etc (generated passwd, group, hosts, nsswitch.conf; read-only
 * binds of the loader cache, alternatives, certificates and a few
 * public tables), a minimal /dev, a fresh /proc, and mount points for the
 * job's /tmp and /dev/shm. Nothing else of the host: no /sys (no cgroup
 * tree), /var, /home, /root, /srv, /opt, /run, and none of the worker's
 * files. Built in the warm sandbox, off the job's path. */

#define STAGE "/tmp" /* where the new root is built, in our own mount namespace */

static const char *const etc_binds[] = AL_HOST_ETC;
static const char *const dev_nodes[] = AL_HOST_DEV;

static void make_etc(unsigned uid)
{
	char path[PATH_MAX], text[512];
	const char *what = "";
	bool bad = mkdir(STAGE "/etc", 0755) != 0;

	snprintf(text, sizeof(text), AL_ETC_PASSWD_FMT, uid, uid, "/work");
	bad = bad || al_root_write(STAGE "/etc/passwd", text, &what);
	snprintf(text, sizeof(text), AL_ETC_GROUP_FMT, uid);
	bad = bad || al_root_write(STAGE "/etc/group", text, &what) ||
	      al_root_write(STAGE "/etc/hosts", AL_ETC_HOSTS, &what) ||
	      al_root_write(STAGE "/etc/hostname", AL_ETC_HOSTNAME, &what) ||
	      al_root_write(STAGE "/etc/nsswitch.conf", AL_ETC_NSSWITCH, &what);
	for (const char *const *e = etc_binds; *e && !bad; e++) {
		char src[PATH_MAX];

		snprintf(src, sizeof(src), "/etc/%s", *e);
		snprintf(path, sizeof(path), STAGE "/etc/%s", *e);
		bad = al_root_keep(src, path, &what) != 0;
	}
	if (bad)
		die(*what ? what : "mkdir /etc");
}

static void build_root(unsigned uid)
{
	const char *what = "";

	if (al_root_begin(STAGE, &what) || al_root_host_top(STAGE, &what))
		die(what);
	make_etc(uid);
	if (al_root_dev(STAGE, dev_nodes, &what) || mkdir(STAGE "/tmp", 0755) ||
	    mkdir(STAGE "/work", 0755) || mkdir(STAGE "/sys", 0755) || al_root_enter(STAGE, &what))
		die(*what ? what : "mkdir /tmp, /work, /sys");
}

/* The CPUs the job is shown, as on the other tiers (a microVM has as many
 * vCPUs): /sys a small read-only tmpfs whose devices/system/cpu/online
 * says 0..n-1, which glibc's get_nprocs() (os.cpu_count(), sysconf) reads.
 * Nothing else of /sys is there (the image's /sys is an empty directory). */
static void show_cpus(unsigned n)
{
	char text[32];
	int len = al_cpu_online_text(n, text, sizeof(text));
	int fd;

	if (!n)
		return;
	mount_or_die("airlock-sys", "/sys", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		     "size=16k,nr_inodes=16,mode=0755", "mount /sys");
	if (len < 0 || mkdir("/sys/devices", 0755) || mkdir("/sys/devices/system", 0755) ||
	    mkdir("/sys/devices/system/cpu", 0755) ||
	    (fd = open("/sys/devices/system/cpu/online", O_WRONLY | O_CREAT | O_CLOEXEC, 0444)) < 0)
		die("make /sys/devices/system/cpu/online");
	if (write(fd, text, (size_t)len) != len)
		die("write /sys/devices/system/cpu/online");
	close(fd);
	mount_or_die(NULL, "/sys", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		     NULL, "make /sys read-only");
}

/* Join a cgroup: write 0 to <dir>/cgroup.procs. */
static void join_cgroup(const char *dir)
{
	char path[PATH_MAX];
	int fd;

	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
		die("cgroup path too long");
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "0", 1) != 1)
		die("join the job's cgroup");
	close(fd);
}

/* The worker's signal dispositions and mask do not belong here (exec reset
 * the handlers, not what was ignored or blocked); an init in a PID
 * namespace only gets the signals it handles, so it handles none. */
static void reset_signals(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &dfl, NULL); /* EINVAL for the libc-reserved ones */
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL))
		die("unblock signals");
}

/* The two programs (init.h): each a uint32 instruction count, then the
 * instructions. */
static void load_one(off_t *off, struct sock_fprog *p)
{
	uint32_t n;

	if (pread(AL_INIT_FD_SECCOMP, &n, sizeof(n), *off) != (ssize_t)sizeof(n) || n == 0 ||
	    n > BPF_MAX ||
	    pread(AL_INIT_FD_SECCOMP, p->filter, n * sizeof(p->filter[0]), *off + 4) !=
		(ssize_t)(n * sizeof(p->filter[0])))
		die("read the seccomp program");
	p->len = (unsigned short)n;
	*off += 4 + (off_t)(n * sizeof(p->filter[0]));
}

static void load_seccomp_program(void)
{
	off_t off = 0;

	load_one(&off, &bpf_prog);
	load_one(&off, &bpf_inet_prog);
	close(AL_INIT_FD_SECCOMP);
}

static void set_rlimit(int res, rlim_t soft, rlim_t hard, const char *what)
{
	struct rlimit rl = {soft, hard};

	if (setrlimit(res, &rl))
		die(what);
}

struct job_args {
	const struct al_init_spec *h;
	char **argv, **envp;
};

static int job_main(void *arg)
{
	const struct job_args *a = arg;
	const char *prog = a->argv[0];

	if (setsid() < 0)
		die("setsid");
	/* /work: a grading job's step's build tree, any other job's work dir
	 * (as on the other tiers) */
	if (chdir("/work"))
		die("chdir to the work dir");
	set_rlimit(RLIMIT_AS, a->h->rl_as, a->h->rl_as, "setrlimit AS");
	set_rlimit(RLIMIT_CPU, a->h->rl_cpu, a->h->rl_cpu + 1, "setrlimit CPU");
	set_rlimit(RLIMIT_FSIZE, a->h->rl_fsize, a->h->rl_fsize, "setrlimit FSIZE");
	set_rlimit(RLIMIT_NOFILE, a->h->rl_nofile, a->h->rl_nofile, "setrlimit NOFILE");
	set_rlimit(RLIMIT_CORE, 0, 0, "setrlimit CORE");
	set_rlimit(RLIMIT_MEMLOCK, 0, 0, "setrlimit MEMLOCK");
	if (!a->h->has_code)
		close(FD_CODE);
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, a->h->inet ? &bpf_inet_prog : &bpf_prog, 0,
		  0))
		die("seccomp");
	/* Last step: exec. A failure is the job's: it goes to the job's stderr
	 * with a shell's exit code (127 not found, 126 not executable). */
	{
		int code = al_exec_job(prog, a->argv, a->envp);

		dprintf(FD_STDERR, "airlock: cannot execute %s: %s\n", prog, strerror(errno));
		_exit(code);
	}
}

/* The job's stack while it shares the init's memory (until its exec). */
static char job_stack[64 << 10] __attribute__((aligned(16)));

static void drop_privileges(uid_t uid)
{
	const char *what = "";

	if (al_become(uid, uid, &what))
		die(what);
}

/* Receive the go message: AL_GO_NFDS descriptors, then the binds'. Returns
 * how many binds came, or -1 when the worker closed the socket (no job). */
static int recv_go(int fds[AL_GO_NFDS + AL_INIT_MAX_BINDS])
{
	char byte, ctl[CMSG_SPACE(sizeof(int) * (AL_GO_NFDS + AL_INIT_MAX_BINDS))];
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;
	ssize_t n;
	size_t nfds;

	do
		n = recvmsg(AL_INIT_FD_CTL, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	c = CMSG_FIRSTHDR(&mh);
	if (!c || c->cmsg_type != SCM_RIGHTS || (mh.msg_flags & MSG_CTRUNC) ||
	    c->cmsg_len < CMSG_LEN(sizeof(int) * AL_GO_NFDS))
		die("bad go message");
	nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	memcpy(fds, CMSG_DATA(c), sizeof(int) * nfds);
	return (int)(nfds - AL_GO_NFDS);
}

/* The job's catalogue image (a read-only tree the worker cloned) becomes
 * the root, with the sandbox's own /dev and /proc on it; the root built
 * above is detached (pivot_root onto itself: the image is read-only and
 * has no room for the old root). */
static void enter_image(int fd)
{
	mount_or_die(NULL, "/", NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL,
		     "make the sandbox root writable for the image");
	if (mkdir("/image", 0755) ||
	    syscall(SYS_move_mount, fd, "", AT_FDCWD, "/image", MOVE_MOUNT_F_EMPTY_PATH))
		die("place the image");
	close(fd);
	mount_or_die("/dev", "/image/dev", NULL, MS_BIND | MS_REC, NULL,
		     "bind /dev into the image");
	mount_or_die("/proc", "/image/proc", NULL, MS_BIND | MS_REC, NULL,
		     "bind /proc into the image");
	if (chdir("/image") || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) ||
	    chdir("/"))
		die("make the image the root");
}

/* The tier's binds (read-only trees the worker cloned) at their paths: the
 * root is writable for the moment it takes to make their mount points. */
/* The sandbox's root is a catalogue image already (a warm sandbox's). */
static bool in_image;

static void place_binds(const int *fds, char *const *paths, uint32_t n, bool image)
{
	char p[PATH_MAX];

	if (image) {
		/* the image is read-only: what follows it (a grading job's build
		 * tree, on /work) goes on a mount point the image has; a warm
		 * sandbox may be in it already (the worker checked it is the
		 * job's) */
		if (in_image)
			close(fds[0]);
		else
			enter_image(fds[0]);
		for (uint32_t i = 1; i < n; i++) {
			if (strcmp(paths[i], "/work"))
				die("only a build tree may follow an image");
			if (syscall(SYS_move_mount, fds[i], "", AT_FDCWD, paths[i],
				    MOVE_MOUNT_F_EMPTY_PATH))
				die("place the build tree in the image");
			close(fds[i]);
		}
		return;
	}
	if (n == 0)
		return;
	mount_or_die(NULL, "/", NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL,
		     "make the sandbox root writable for binds");
	for (uint32_t i = 0; i < n; i++) {
		struct stat st;

		if (snprintf(p, sizeof(p), "%s", paths[i]) >= (int)sizeof(p) || p[0] != '/')
			die("bad bind path");
		if (fstat(fds[i], &st))
			die("stat a bind");
		for (char *q = p + 1; *q; q++)
			if (*q == '/') {
				*q = '\0';
				if (mkdir(p, 0755) && errno != EEXIST)
					die("make a bind's parent directory");
				*q = '/';
			}
		if (S_ISDIR(st.st_mode)
			? mkdir(p, 0755) && errno != EEXIST
			: close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) && errno != EEXIST)
			die("make a bind's mount point");
		if (syscall(SYS_move_mount, fds[i], "", AT_FDCWD, p, MOVE_MOUNT_F_EMPTY_PATH))
			die("place a bind");
		close(fds[i]);
	}
	mount_or_die(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL,
		     "make the sandbox root read-only again");
}

/* Split the spec's strings into argv, envp and the binds' paths (pointers
 * into the private mapping). */
static void unpack_spec(const struct al_init_spec *h, size_t len, char **argv, char **envp,
			char **binds)
{
	char *p = (char *)(h + 1), *end = (char *)h + len;
	uint32_t n = 0;

	if (h->argc == 0 || h->argc + h->envc + 2 > AL_INIT_MAX_ARGS ||
	    h->nbinds > AL_INIT_MAX_BINDS)
		die("bad spec");
	for (uint32_t i = 0; i < h->argc + h->envc + h->nbinds; i++) {
		char *s = p;

		while (p < end && *p)
			p++;
		if (p >= end)
			die("truncated spec");
		p++;
		if (i < h->argc)
			argv[n++] = s;
		else if (i < h->argc + h->envc)
			envp[i - h->argc] = s;
		else
			binds[i - h->argc - h->envc] = s;
	}
	argv[h->argc] = NULL;
	envp[h->envc] = NULL;
}

/* ---- the warm interpreter (init.h) ---- */

static pid_t warm_pid = -1;   /* the interpreter, our child */
static int warm_ctl = -1;     /* our end of its socket */
static int warm_exec_rd = -1; /* closed by its exec, or "E" */

/* "ARGC\0ENVC\0" and that many strings into argv and envp (NULL-ended);
 * -1 when the text is not that. */
static int split_argv_env(char *p, size_t len, char **argv, char **envp)
{
	char *end = p + len;
	unsigned long n[2];

	for (int k = 0; k < 2; k++) {
		char *e;

		n[k] = strtoul(p, &e, 10);
		if (e == p || e >= end || *e)
			return -1;
		p = e + 1;
	}
	if (n[0] == 0 || n[0] + 1 > AL_INIT_MAX_ARGS || n[1] + 1 > AL_INIT_MAX_ARGS)
		return -1;
	for (unsigned long i = 0; i < n[0] + n[1]; i++) {
		char *s = p;

		while (p < end && *p)
			p++;
		if (p >= end)
			return -1;
		p++;
		*(i < n[0] ? &argv[i] : &envp[i - n[0]]) = s;
	}
	argv[n[0]] = envp[n[1]] = NULL;
	return 0;
}

/* Start the interpreter the worker asked for, if it asked: as a job starts
 * (below), but before any job, on /dev/null, with its socket at fd 3. Its
 * own failures end only it (the job then runs cold), never the sandbox. */
static void warm_start(unsigned uid, unsigned wuid)
{
	static char *argv[AL_INIT_MAX_ARGS], *envp[AL_INIT_MAX_ARGS];
	struct stat st;
	char *m;
	int sv[2], ep[2], nul;
	pid_t pid;

	if (fstat(AL_INIT_FD_WARM, &st))
		return; /* none asked for */
	if (wuid == 0 || wuid == uid)
		die("no warm uid");
	m = st.st_size > 0
		? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, AL_INIT_FD_WARM, 0)
		: MAP_FAILED;
	close(AL_INIT_FD_WARM);
	if (m == MAP_FAILED || split_argv_env(m, (size_t)st.st_size, argv, envp))
		die("read the warm interpreter's argv");
	/* the catalogue image the slot's last job had: the root now, so that
	 * the interpreter is the image's */
	if (fstat(AL_INIT_FD_IMAGE, &st) == 0) {
		enter_image(AL_INIT_FD_IMAGE);
		in_image = true;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) || pipe2(ep, O_CLOEXEC))
		die("the warm interpreter's socket");
	if ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
		die("open /dev/null");
	/* 0-3 are free here (the worker placed nothing there): off them, so
	 * that placing the child's descriptors there overwrites none */
	for (int k = 0; k < 5; k++) {
		int *f = (int *[]){&sv[0], &sv[1], &nul, &ep[0], &ep[1]}[k],
		    hi = fcntl(*f, F_DUPFD_CLOEXEC, 16);

		if (hi < 0)
			die("move the warm interpreter's descriptors");
		close(*f);
		*f = hi;
	}
	pid = fork();
	if (pid < 0)
		die("start the warm interpreter");
	if (pid == 0) {
		struct rlimit zero = {0, 0};

		/* The warm uid as its real uid, the slot's as its effective and
		 * saved one (an exec sets the saved uid to the effective one): not
		 * a process of the slot's uid until its job (the interpreter
		 * takes its effective uid as its real one then). fd 4, close-on-exec, tells
		 * the init how it went: closed by the exec, or 'E' before. After the exec the init,
		 * itself the slot's uid at go time, may kill it (its saved uid). */
		if (dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0 ||
		    dup2(sv[1], 3) < 0 || dup2(ep[1], 4) < 0 || fcntl(4, F_SETFD, FD_CLOEXEC) ||
		    syscall(SYS_close_range, 5u, ~0u, 0) < 0 || setgroups(0, NULL) ||
		    setresgid(uid, uid, uid) || setresuid(wuid, uid, uid) ||
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) ||
		    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) ||
		    setsid() < 0 || setrlimit(RLIMIT_CORE, &zero) ||
		    setrlimit(RLIMIT_MEMLOCK, &zero) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &bpf_prog, 0, 0) ||
		    execve(argv[0], argv, envp)) {
			if (write(4, "E", 1) < 0) {
				/* then the init reads EOF and finds it gone */
			}
			_exit(127);
		}
		_exit(127);
	}
	close(sv[1]);
	close(ep[1]);
	close(nul);
	munmap(m, (size_t)st.st_size);
	warm_pid = pid;
	warm_ctl = sv[0];
	warm_exec_rd = ep[0];
}

/* Whether the interpreter's python3 started (its exec closed the pipe):
 * by then it is the slot's (effective and saved) uid. */
static bool warm_started(void)
{
	char c = 0;
	ssize_t n;

	do
		n = read(FD_WARM_EXEC, &c, 1);
	while (n < 0 && errno == EINTR);
	return n == 0;
}

static void warm_kill(void)
{
	if (warm_pid > 0) {
		kill(warm_pid, SIGKILL);
		while (waitpid(warm_pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	warm_pid = -1;
}

/* Give the job (its descriptors at 0-3) to the interpreter: 'G' with
 * stdin, stdout, stderr, code and a memfd of its argv, environment, work
 * directory and rlimits, which the interpreter sets on itself before the
 * job's code (prlimit on it would need CAP_SYS_RESOURCE: its real uid is
 * the warm uid). -1 when the interpreter is gone. */
static int warm_go(const struct al_init_spec *h, char **argv, char **envp)
{
	char num[96];
	int fds[5] = {FD_STDIN, FD_STDOUT, FD_STDERR, FD_CODE, -1}, n[2] = {0, 0}, bad = 0, len;

	if ((fds[4] = memfd_create("job-argv", MFD_CLOEXEC)) < 0)
		return -1;
	while (argv[n[0]])
		n[0]++;
	while (envp[n[1]])
		n[1]++;
	for (int k = 0; k < 2; k++) {
		len = snprintf(num, sizeof(num), "%d", n[k]);
		bad |= write(fds[4], num, (size_t)len + 1) != len + 1;
	}
	for (int k = 0; k < n[0] + n[1]; k++) {
		const char *s = k < n[0] ? argv[k] : envp[k - n[0]];
		size_t sl = strlen(s) + 1;

		bad |= write(fds[4], s, sl) != (ssize_t)sl;
	}
	bad |= write(fds[4], "/work", 6) != 6;
	len = snprintf(num, sizeof(num), "%llu,%llu,%llu,%llu", (unsigned long long)h->rl_as,
		       (unsigned long long)h->rl_cpu, (unsigned long long)h->rl_fsize,
		       (unsigned long long)h->rl_nofile);
	bad |= write(fds[4], num, (size_t)len + 1) != len + 1;
	if (bad || lseek(fds[4], 0, SEEK_SET)) {
		close(fds[4]);
		return -1;
	}
	bad = al_send_fds(FD_WARM_CTL, 'G', fds, 5, 0) != 1;
	close(fds[4]);
	return bad ? -1 : 0;
}

/* The worker died (the death signal may have come too early to count). */
static void exit_if_orphaned(void)
{
	struct pollfd pf = {.fd = FD_REPORT, .events = POLLOUT};

	if (poll(&pf, 1, 0) < 0 || (pf.revents & (POLLERR | POLLHUP)))
		_exit(125);
}

int main(int argc, char **argv)
{
	static char *jargv[AL_INIT_MAX_ARGS], *jenvp[AL_INIT_MAX_ARGS];
	int go[AL_GO_NFDS + AL_INIT_MAX_BINDS], status = 0, ngot;
	char *binds[AL_INIT_MAX_BINDS];
	unsigned uid = 0, wuid = 0;
	const struct al_init_spec *h;
	struct stat st;
	pid_t job;
	long maxrss_kib = 0;

	/* Only ever started by the worker, as PID 1 of a new PID namespace. */
	if (getpid() != 1 || fstat(FD_REPORT, &st) || !S_ISFIFO(st.st_mode)) {
		fprintf(stderr, "airlock-sandbox-init: started by the process backend only\n");
		return 2;
	}
	exit_if_orphaned();
	reset_signals();
	load_seccomp_program();
	close(AL_INIT_FD_BINARY);

	/* Into the slot's fresh cgroup first, so every later fork is counted. */
	for (int i = 1; i < argc; i++)
		if (!strncmp(argv[i], "cg=", 3))
			join_cgroup(argv[i] + 3);
	if (unshare(CLONE_NEWCGROUP))
		die("cgroup namespace");
	/* Filesystem view: a root of our own. */
	for (int i = 1; i < argc; i++)
		if (!strncmp(argv[i], "uid=", 4))
			uid = (unsigned)strtoul(argv[i] + 4, NULL, 10);
		else if (!strncmp(argv[i], "warmuid=", 8))
			wuid = (unsigned)strtoul(argv[i] + 8, NULL, 10);
	if (uid == 0)
		die("no slot uid");
	build_root(uid);
	/* The arguments named host paths (cgroups): /proc/1/cmdline shows
	 * none of them to the job. */
	for (int i = 1; i < argc; i++)
		memset(argv[i], 0, strlen(argv[i]));
	if (sethostname("airlock", 7))
		die("sethostname");
	/* What an exec could ever gain: nothing. The init keeps its effective
	 * capabilities for the mounts below until drop_privileges. */
	if (al_drop_bounding_set())
		die("drop capability bounding set");
	warm_start(uid, wuid);

	/* Wait for a job. */
	if ((ngot = recv_go(go)) < 0)
		_exit(0);
	if (fstat(go[AL_GO_SPEC], &st) || st.st_size < (off_t)sizeof(*h) ||
	    (h = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, go[AL_GO_SPEC], 0)) ==
		MAP_FAILED)
		die("read the spec");
	unpack_spec(h, (size_t)st.st_size, jargv, jenvp, binds);
	if ((uint32_t)ngot != h->nbinds)
		die("binds and their paths do not match");
	/* a job that may not run in the warm interpreter, or whose root is
	 * not the one it started on (an image job in a sandbox on the host's
	 * root, or the other way round): it goes before the job's root and
	 * files are placed (the init is still root: it may) */
	if (warm_pid > 0 && (!h->warm || (h->image != 0) != in_image))
		warm_kill();
	place_binds(go + AL_GO_NFDS, binds, h->nbinds, h->image != 0);
	show_cpus(h->cpus);
	/* The job's tmpfs (one budget: the disk limit): its work/ on /tmp and
	 * /work (the work dir, HOME and cwd), its shm/ on /dev/shm. The
	 * tmpfs's root goes on /tmp first and is then covered by work/. */
	if (h->uid != uid)
		die("spec for another slot");
	if (syscall(SYS_move_mount, go[AL_GO_WORK], "", AT_FDCWD, "/tmp", MOVE_MOUNT_F_EMPTY_PATH))
		die("move the job's tmpfs onto /tmp");
	mount_or_die("/tmp/" AL_JOBFS_SHM, "/dev/shm", NULL, MS_BIND, NULL, "bind /dev/shm");
	mount_or_die(NULL, "/dev/shm", NULL,
		     MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
		     "make /dev/shm noexec");
	/* the work dir is /work too (the cwd and HOME, as on every tier), but
	 * for a grading job's step, whose build tree is there */
	if (!h->work)
		mount_or_die("/tmp/" AL_JOBFS_WORK, "/work", NULL, MS_BIND, NULL,
			     "bind the work dir on /work");
	mount_or_die("/tmp/" AL_JOBFS_WORK, "/tmp", NULL, MS_BIND, NULL,
		     "bind the work dir on /tmp");
	{
		int fds[7] = {go[AL_GO_STDIN], go[AL_GO_STDOUT], go[AL_GO_STDERR], go[AL_GO_CODE],
			      FD_REPORT,       warm_ctl,	 warm_exec_rd};
		const int tg[7] = {FD_STDIN,  FD_STDOUT,   FD_STDERR,	FD_CODE,
				   FD_REPORT, FD_WARM_CTL, FD_WARM_EXEC};

		/* closes the control socket, the spec, the work fd (and a
		 * killed interpreter's socket and pipe) */
		place_fds(fds, tg, warm_pid > 0 ? 7 : 5);
	}

	/* The job's descriptors survive its exec; the report pipe does not. */
	if (fcntl(FD_REPORT, F_SETFD, FD_CLOEXEC))
		die("cloexec report fd");

	drop_privileges(h->uid);
	/* Changing credentials cleared the death signal: arm it again, then
	 * make sure the worker did not die in between. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		die("death signal");
	exit_if_orphaned();

	/* A job the worker says may run in the warm interpreter runs there
	 * (if it cannot, it is killed and the job starts cold: the init, no
	 * longer root, may kill it once its python3 started). */
	if (warm_pid > 0) {
		if (!(warm_started() && warm_go(h, jargv, jenvp) == 0))
			warm_kill();
		close(FD_WARM_EXEC);
		if (warm_pid <= 0)
			close(FD_WARM_CTL); /* nothing of it reaches a cold job */
	}
	/* (Our end of the socket stays open while the interpreter runs:
	 * closing it with the 'R' unread would reset the connection under
	 * the 'G' it may not have read yet: ECONNRESET.) */

	/* The job shares the init's memory until its exec (vfork); the init
	 * waits meanwhile. */
	if (warm_pid > 0) {
		job = warm_pid;
	} else {
		struct job_args a = {h, jargv, jenvp};

		job = clone(job_main, job_stack + sizeof(job_stack),
			    CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	}
	if (job < 0)
		die("start the job");

	/* The init's own job: reap everything, report the job's status. */
	for (;;) {
		int st2;
		struct rusage ru = {0};
		pid_t w = wait4(-1, &st2, 0, &ru);

		if (w == job) {
			status = st2;
			maxrss_kib = ru.ru_maxrss; /* the job's, and what it waited for */
			break;
		}
		if (w < 0 && errno != EINTR)
			die("waitpid");
	}
	if (dprintf(FD_REPORT, "X%d R%ld W%d", status, maxrss_kib, warm_pid > 0) < 0)
		_exit(125);
	_exit(0); /* the kernel now kills whatever is left in the namespace */
}
