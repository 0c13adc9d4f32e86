/* shim.c - airlock-oci-shim: one container's keeper, started by the
 * container backend for each job (static and small, so that starting it and
 * its exit cost the worker almost nothing).
 *
 *   airlock-oci-shim RUNTIME ROOT BUNDLE NAME v1|v2 FLAGS CGDIR...
 *
 * (FLAGS: the runtime's global flags beside --root, space-separated, or
 * "-"; runsc's platform and network)
 * with the job's stdin, stdout, stderr and script on descriptors 0-3, the
 * report pipe on 4 and airlock-exec (backends/container/exec.c) on 5. The
 * container gets 3 (the script) and airlock-exec as 4: its first program
 * (with 5 closed, the runtime executes the job's program itself, and the
 * container gets 3 only; a warm container, backends/container/warm.c,
 * gets /dev/null as stdio and its socket as 3; on runsc, which passes no
 * descriptor in, a warm container's shim gets instead a socket file
 * listening in the container on 3 and the interpreter's socket on 5, and
 * hands that socket over to the connection airlock-exec makes as the
 * sandbox starts: hand_over). It starts the container
 * detached, then drops its own copies of 0-3 (so that the runtime hands the job's stdio to it as
 * they are: the file-size limit then caps a flood, and no copy runs), becomes its reaper, waits for
 * it, reads the counters of the job's cgroup (CGDIR: the runtime's cgroup, one directory per
 * hierarchy as in struct al_cg), removes the container from the runtime and reports "X<wait status>
 * C<cpu ns> M<peak bytes> O<oom kills> H<0|1>", or "E<runtime's wait status>" when the runtime
 * could not start it (its message is in BUNDLE/runtime.log). On runsc, a bundle
 * with BUNDLE/image/checkpoint.img (a paused session's, checkpoint.c) is
 * restored from it (`runsc restore`) instead of run. If the worker dies first (SIGTERM,
 * its parent-death signal), it removes the container, which kills its processes, and ends:
 * nothing of the job outlives its worker. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cgroup.h"
#include "../fdpass.h"

extern char **environ;

enum { FD_REPORT = 4, FD_EXEC = 5 };

/* The worker died (its parent-death signal, SIGTERM, came; or it had died
 * before the signal was armed: the report pipe has no reader). */
static volatile sig_atomic_t orphaned;

static void on_parent_death(int sig)
{
	(void)sig;
	orphaned = 1;
}

/* The signal mask with SIGTERM let through: only the wait for the
 * container (ppoll) takes it, so that it cannot come between a look at
 * orphaned and the wait. */
static sigset_t unblocked;

/* Arm SIGTERM as the parent-death signal, blocked but in the wait, then
 * see whether the worker is still there. */
static void watch_parent(int report)
{
	struct sigaction sa = {.sa_handler = on_parent_death};
	struct pollfd pf = {.fd = report, .events = POLLOUT};
	sigset_t term;

	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigemptyset(&sa.sa_mask);
	if (sigprocmask(SIG_BLOCK, &term, &unblocked) || sigaction(SIGTERM, &sa, NULL) ||
	    prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) || poll(&pf, 1, 0) < 0 ||
	    (pf.revents & (POLLERR | POLLHUP)))
		orphaned = 1;
}

static int report_fd = FD_REPORT;

/* A runsc warm container's airlock-exec connected to the listener (3):
 * the interpreter's socket (4) goes to it, with one byte, and neither
 * stays here (so that, as on runc, the interpreter alone is the peer of the
 * worker's end). */
static void hand_over(void)
{
	const int fd = 4;
	int conn = accept4(3, NULL, NULL, SOCK_CLOEXEC);

	/* (failing, the interpreter has no socket: its container ends) */
	if (conn >= 0) {
		(void)al_send_fds(conn, 'H', &fd, 1, 0);
		close(conn);
	}
	close(3);
	close(4);
}

static void report(const char *msg)
{
	if (write(report_fd, msg, strlen(msg)) < 0)
		_exit(1);
}

/* Run the runtime with args; its wait status, or -1 when it did not start.
 * With reap, any other child of ours that ends meanwhile is reaped too:
 * after a runsc container's sandbox, its gofer (ours as subreaper), which
 * `runsc delete` would otherwise wait 5 s for as a zombie. (Never while the
 * container may still end: its status is the main loop's.) */
static int runtime(const char *const *args, bool reap)
{
	posix_spawnattr_t at;
	pid_t pid;
	int rc;

	/* the runtime starts with no signal blocked (ours is, SIGTERM) */
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &unblocked);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
	rc = posix_spawn(&pid, args[0], NULL, &at, (char *const *)args, environ);
	posix_spawnattr_destroy(&at);
	if (rc)
		return AL_ESYS;
	for (;;) {
		int s;
		pid_t w = waitpid(reap ? -1 : pid, &s, 0);

		if (w == pid)
			return s;
		if (w < 0 && errno != EINTR)
			return AL_ESYS;
	}
}

/* Remove a stopped container from the runtime without running it again:
 * runc and crun keep only files in ROOT/NAME (runc: state.json), and the
 * container's cgroups are removed by the worker. false when the directory
 * holds anything else, or the runtime is another (runsc's sandbox outlives
 * its container until `runsc delete`): then the runtime deletes. */
static bool forget_stopped(const char *rt, const char *root, const char *name)
{
	const char *base = strrchr(rt, '/');
	char dir[PATH_MAX];
	struct dirent *de;
	DIR *d;
	bool ok = true;

	base = base ? base + 1 : rt;
	if ((strcmp(base, "runc") && strcmp(base, "crun")) ||
	    snprintf(dir, sizeof(dir), "%s/%s", root, name) >= (int)sizeof(dir) ||
	    !(d = opendir(dir)))
		return false;
	while (ok && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ok = de->d_type != DT_DIR && unlinkat(dirfd(d), de->d_name, 0) == 0;
	}
	closedir(d);
	return ok && rmdir(dir) == 0;
}

int main(int argc, char **argv)
{
	char log[PATH_MAX], pidf[PATH_MAX], image[PATH_MAX], msg[160], buf[32];
	char probe[PATH_MAX + 32];
	bool restore;
	struct al_cg_sys sys = {0};
	struct al_cg cg = {.sys = &sys};
	struct al_cg_stats cs;
	struct stat st0;
	pid_t ctr;
	int st = 0, pfd;
	long maxrss_kib = 0;

	if (argc < 8 || argc > 7 + 4 || fstat(FD_REPORT, &st0) || !S_ISFIFO(st0.st_mode)) {
		fprintf(stderr, "airlock-oci-shim: started by the container backend only\n");
		return 2;
	}
	const char *rt = argv[1], *root = argv[2], *bundle = argv[3], *name = argv[4];
	const char *rt_base = strrchr(rt, '/') ? strrchr(rt, '/') + 1 : rt;
	bool gvisor = !strcmp(rt_base, "runsc");

	sys.version = !strcmp(argv[5], "v2") ? AL_CG_V2 : AL_CG_V1;
	/* the runtime's global flags, then its command: runsc takes no
	 * descriptor beyond stdio (no --preserve-fds) */
	char flags[160], *gflag[8];
	int ngflags = 0;

	snprintf(flags, sizeof(flags), "%s", strcmp(argv[6], "-") ? argv[6] : "");
	for (char *save = NULL, *f = strtok_r(flags, " ", &save); f && ngflags < 8;
	     f = strtok_r(NULL, " ", &save))
		gflag[ngflags++] = f;
	for (int i = 7; i < argc; i++)
		snprintf(cg.dirs[cg.ndirs++], sizeof(cg.dirs[0]), "%s", argv[i]);
	/* Nothing of the worker's but the job's descriptors, the report and
	 * airlock-exec when it came; the report moves out of the container's
	 * way (the runtime passes 3, and 4 with airlock-exec, in) and out of
	 * the runtime's. */
	bool has_exec = fcntl(FD_EXEC, F_GETFD) >= 0;
	/* runsc: 3 a listener and 5 a socket: a warm container's (hand_over) */
	int lst = 0;
	socklen_t ll = sizeof(lst);
	bool handover =
	    gvisor && has_exec && !getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &lst, &ll) && lst;
	const char *keep = has_exec ? "2" : "1";

	if (syscall(SYS_close_range, FD_EXEC + 1, ~0u, 0) ||
	    (report_fd = fcntl(FD_REPORT, F_DUPFD_CLOEXEC, 10)) < 0 ||
	    (has_exec ? dup2(FD_EXEC, FD_REPORT) < 0 || close(FD_EXEC) : close(FD_REPORT)))
		return 2;
	/* (a warm runsc container's listener and socket are the shim's alone:
	 * no runtime process inherits them) */
	if (handover && (fcntl(3, F_SETFD, FD_CLOEXEC) || fcntl(4, F_SETFD, FD_CLOEXEC)))
		return 2;
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	watch_parent(report_fd);
	if (orphaned) /* the worker died before it could be told */
		return 4;
	snprintf(log, sizeof(log), "%s/runtime.log", bundle);
	snprintf(image, sizeof(image), "%s/image", bundle);
	snprintf(probe, sizeof(probe), "%s/checkpoint.img", image);
	restore = gvisor && !access(probe, F_OK);
	snprintf(pidf, sizeof(pidf), "%s/container.pid", bundle);
	{
		const char *run[32];
		int n = 0;

		run[n++] = rt;
		run[n++] = "--root";
		run[n++] = root;
		for (int i = 0; i < ngflags; i++)
			run[n++] = gflag[i];
		run[n++] = "--log";
		run[n++] = log;
		run[n++] = "--log-format";
		run[n++] = "json";
		if (restore) { /* a paused runsc session's (checkpoint.c) */
			run[n++] = "restore";
			run[n++] = "--image-path";
			run[n++] = image;
		} else {
			run[n++] = "run";
		}
		run[n++] = "--detach";
		run[n++] = "--pid-file";
		run[n++] = pidf;
		run[n++] = "--bundle";
		run[n++] = bundle;
		if (!gvisor) {
			run[n++] = "--preserve-fds";
			run[n++] = keep;
		}
		run[n++] = name;
		run[n] = NULL;
		st = runtime(run, false);
	}
	if (restore) /* the sandbox holds what it needed of the image; a pause writes anew */
		unlink(probe);
	if (st != 0) {
		snprintf(msg, sizeof(msg), "E%d", st);
		report(msg);
		return 0;
	}
	/* The container holds its own stdio and fd 3 now: ours go (a warm
	 * container's socket then has the interpreter alone as its peer, so
	 * that the worker's hand-over fails if it died), stdio onto /dev/null. */
	{
		/* above 3, which runsc's shim never had */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC),
		    hi = null >= 0 ? fcntl(null, F_DUPFD_CLOEXEC, 10) : -1;

		if (null >= 0)
			close(null);
		if (hi < 0 || dup2(hi, 0) < 0 || dup2(hi, 1) < 0 || dup2(hi, 2) < 0 ||
		    (!handover && close(3) && errno != EBADF) || close(hi))
			return 3;
	}
	{
		FILE *f = fopen(pidf, "re");

		ctr = f && fgets(buf, sizeof(buf), f) ? (pid_t)atoi(buf) : 0;
		if (f)
			fclose(f);
	}
	if (ctr <= 0) {
		report("E-1");
		return 0;
	}
	/* The container's init is ours now (we are its subreaper): wait for
	 * its end, or the worker's (SIGTERM, let through in ppoll alone). */
	pfd = (int)syscall(SYS_pidfd_open, ctr, 0);
	for (;;) {
		struct rusage ru = {0};
		struct pollfd pf[2] = {{.fd = pfd, .events = POLLIN},
				       {.fd = handover ? 3 : -1, .events = POLLIN}};
		pid_t w;

		if (orphaned) { /* no one to report to: the job ends with its worker */
			const char *del[] = {rt, "--root", root, "delete", "--force", name, NULL};

			runtime(del, true);
			return 4;
		}
		if (pfd >= 0 && ppoll(pf, 2, NULL, &unblocked) < 0 && errno == EINTR)
			continue; /* a signal: orphaned? (any other failure: wait below) */
		if (handover && (pf[1].revents & (POLLIN | POLLERR | POLLHUP))) {
			hand_over();
			handover = false;
			if (!(pf[0].revents & POLLIN))
				continue;
		}
		w = wait4(-1, &st, 0, &ru);
		if (w == ctr) {
			maxrss_kib = ru.ru_maxrss; /* the job's, and what it waited for */
			break;
		}
		if (w < 0 && errno != EINTR)
			return 3;
	}
	/* Read the job's counters before the container is removed (a
	 * runtime's delete removes its cgroup). */
	al_cg_stats(&cg, &cs);
	if (!forget_stopped(rt, root, name)) {
		const char *del[] = {rt, "--root", root, "delete", "--force", name, NULL};

		runtime(del, true);
	}
	snprintf(msg, sizeof(msg), "X%d C%llu M%llu O%llu H%d R%ld", st,
		 (unsigned long long)cs.cpu_ns, (unsigned long long)cs.peak_memory_bytes,
		 (unsigned long long)cs.oom_kills, cs.memory_hit ? 1 : 0, maxrss_kib);
	report(msg);
	return 0;
}
