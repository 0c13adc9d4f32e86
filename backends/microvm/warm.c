/* warm.c - the guest agent's warm interpreter (agent.h).
 *
 * A warm-pool VM waits for its job with nothing to do, and a python job
 * then spends most of its time starting: the interpreter, then numpy,
 * pandas, matplotlib (seconds under emulation). So in a warm-pool VM
 * (airlock.warm=1) whose image lists modules in /.airlock-warm (its
 * recipe's `warm` file), the agent starts at boot the process a python job
 * would get, made by the same agent_start_job as a cold job's: its mount
 * namespace on the image with a tmpfs as /work, /tmp and /dev/shm, a
 * cgroup, uid 1000, no capabilities, no_new_privs, rlimits, the system-call
 * filter. It runs al_warm_python (jobspec.h): import those modules and compile
 * the launcher, say ready on its socket
 * (fd 3), wait. Nothing of any job is in it: it has run only the image's
 * own code.
 *
 * When the job comes and may run there (agent_warm_run says when not), the
 * agent gives that process what a cold job's had from its start: the job's
 * memory and pids limits on its cgroup, its CPU limit (the start-up's CPU
 * not counted, neither in the limit nor in the result) and file-size limit
 * (prlimit), the tmpfs emptied of what the start-up wrote, resized to the
 * job's disk limit and filled with its files; then it sends the job's
 * stdin, stdout, stderr and code as descriptors and its argv and
 * environment over the socket and closes its end. The interpreter puts
 * them at 0-3, closes the socket, sets os.environ and sys.argv and runs the
 * job's own launcher (al_python_launcher, as a cold job: the same
 * tracebacks, exit codes, sys.argv) in its untouched __main__. The job's
 * wait, limits, output and verdict are agent_finish_step's, as for any
 * job. Still one VM per job: the VM powers off after it.
 *
 * What a job can tell: the preloaded modules are in sys.modules (that is
 * the point); its peak memory includes what they hold.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../common/clock.h"
#include "../../proto/buf.h"
#include "../backend.h"
#include "../fdpass.h"
#include "../jobfs_layout.h"
#include "../jobspec.h"
#include "../vmchan.h"
#include "agent.h"

/* The session server's text (worker/session_server.py; the Makefile makes
 * it a C string), which a session's job runs as its code: the warm
 * interpreter compiles it ahead (AL_WARM_PRECOMPILE, jobspec.h), so that
 * a session that opens in a pool VM, or in a copy of its template, does
 * not compile it again (180 ms under TCG in a fresh copy). */
extern const char agent_session_server_py[];

#define WARM_MODULES_MAX 32
#define WARM_LIST_MAX	 4096
#define WARM_DISK_BYTES	 (64ull << 20) /* the tmpfs's size until the job's */
#define WARM_CPU_MS	 (1ull << 40)  /* no CPU or file-size limit until the job's */
#define WARM_FSIZE	 (1ull << 40)
#define WARM_SCRIPT_FD	 "/proc/self/fd/3"
/* A restored pool VM under emulation rehearses when no job came this long
 * after its restore (the restores of a busy pool's next VMs go first) */
#define REHEARSE_AFTER_MS 1000
#define REHEARSE_MAX_MS	  15000

static struct {
	pid_t pid;  /* the interpreter, our child; 0 = none */
	int ctl;    /* our end of its socket */
	bool ready; /* it said 'R': its imports are done */
	bool told;  /* the host was told (or never will be: it died importing) */
	bool cg_made, fs_made;
	uint64_t rehearse_at; /* when a restored pool VM rehearses (0: it does not) */
	bool rehearsing;      /* ...asked to ('Y'), its end ('H') not read yet */
	struct al_cg_sys sys;
	struct al_cg cg;
	struct al_jobfs fs;
	/* what a cold python job without variables gets from the host:
	 * python3 -c LAUNCHER SCRIPT, then the base environment */
	struct al_buf av;
	char *argv[5], **envp;
} W = {.ctl = -1};

/* The image's module list: names (a Python dotted name each) into out,
 * pointers in names; their count, or -1 when the image has none. */
static int read_modules(char *out, size_t cap, const char **names)
{
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
	cleanup_close int root = open(IMAGE_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cleanup_close int fd =
	    root < 0 ? -1 : (int)syscall(SYS_openat2, root, ".airlock-warm", &how, sizeof(how));
	ssize_t len = fd < 0 ? -1 : read(fd, out, cap - 1);
	int n = 0;

	if (len < 0)
		return -1;
	out[len] = '\0';
	for (char *save = NULL, *w = strtok_r(out, " \t\n", &save); w;
	     w = strtok_r(NULL, " \t\n", &save)) {
		/* a dotted Python name: no leading digit or dot */
		bool ok = !(w[0] >= '0' && w[0] <= '9') && w[0] != '.' && strlen(w) <= 128;

		for (const char *c = w; ok && *c; c++)
			ok = *c == '_' || *c == '.' || (*c >= '0' && *c <= '9') ||
			     ((*c | 32) >= 'a' && (*c | 32) <= 'z');
		if (!ok || n == WARM_MODULES_MAX) {
			agent_say("warm: skipped module name \"%.40s\" in /.airlock-warm", w);
			continue;
		}
		names[n++] = w;
	}
	return n;
}

/* The session server's text into the warm interpreter's /tmp (which the
 * job's renew empties). */
static void precompile_ahead(void)
{
	char path[PATH_MAX + 64];
	cleanup_close int fd = -1;

	snprintf(path, sizeof(path), "%s/%s/%s", W.fs.work, AL_JOBFS_TMP, AL_WARM_PRECOMPILE);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || al_write_all(fd, agent_session_server_py, strlen(agent_session_server_py)))
		agent_say("warm: %s: %s", path, strerror(errno));
}

/* The interpreter gone, with everything made for it. */
static void warm_stop(void)
{
	if (W.pid > 0) {
		kill(W.pid, SIGKILL);
		while (waitpid(W.pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	W.pid = 0;
	al_closep(&W.ctl);
	if (W.cg_made)
		al_cg_destroy(&W.cg, NULL);
	if (W.fs_made)
		al_jobfs_destroy(&W.fs);
	W.cg_made = W.fs_made = false;
}

void agent_warm_start(bool net)
{
	static char list[WARM_LIST_MAX];
	struct al_job job = {.runtime = AL_RUNTIME_PYTHON};
	struct al_run_spec spec = {.job = &job};
	struct al_limits open_lim = {.cpu_ms = WARM_CPU_MS, .disk_bytes = WARM_FSIZE};
	const char *mods[WARM_MODULES_MAX];
	char *argv[4 + WARM_MODULES_MAX + 1];
	struct al_seccomp sc = {0};
	struct al_err err = {0};
	uint32_t argc = 0, envc = 0;
	int n = read_modules(list, sizeof(list), mods), sp[2] = {-1, -1}, nul = -1;
	char *p;

	if (n < 0)
		return; /* the image asks for no warm interpreter */
	if (access(IMAGE_ROOT "/usr/bin/python3", X_OK)) {
		agent_say("warm: the image has no /usr/bin/python3: no warm interpreter");
		return;
	}
	/* what the host gives a python job without variables */
	if (al_argv_env(&spec, WARM_SCRIPT_FD, &W.av, &argc, &envc) || argc != 4 ||
	    !(W.envp = calloc(envc + 1, sizeof(*W.envp)))) {
		agent_say("warm: out of memory");
		goto fail_warm;
	}
	p = W.av.data;
	for (uint32_t i = 0; i < argc + envc; i++, p += strlen(p) + 1)
		*(i < argc ? &W.argv[i] : &W.envp[i - argc]) = p;
	argv[0] = W.argv[0];
	argv[1] = W.argv[1];
	argv[2] = (char *)al_warm_python;
	argv[3] = W.argv[2]; /* the launcher, compiled before the job */
	for (int i = 0; i < n; i++)
		argv[4 + i] = (char *)mods[i];
	argv[4 + n] = NULL;
	if (al_seccomp_build_net(&sc, net, &err) || al_cg_detect(&W.sys, "guest", NULL, &err) ||
	    al_cg_create(&W.cg, &W.sys, "warm", &(struct al_cg_limits){0}, &err))
		goto fail_warm;
	W.cg_made = true;
	if (al_jobfs_create(&W.fs, "/run/airlock", "warm", &job, WARM_DISK_BYTES, JOB_UID, JOB_UID,
			    false, &err))
		goto fail_warm;
	W.fs_made = true;
	precompile_ahead();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) ||
	    (nul = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
		al_err_sys(&err, "socketpair or /dev/null");
		goto fail_warm;
	}
	{
		struct step st = {argv, W.envp, &open_lim, JOB_UID, NULL, false, false, 0};
		int fds[JOB_FDS] = {nul, nul, nul, sp[1], -1};

		if ((W.pid = agent_start_job(&st, &W.cg, &sc, &W.fs, fds, &err)) < 0)
			goto fail_warm;
	}
	W.ctl = al_take_fd(&sp[0]);
	goto out_fds;
fail_warm:
	agent_say("warm: no warm interpreter: %s", err.msg[0] ? err.msg : "set-up failed");
	warm_stop();
out_fds:
	al_closep(&sp[0]);
	al_closep(&sp[1]);
	al_closep(&nul);
	al_seccomp_free(&sc);
}

/* Whether the interpreter said it is ready (once: it says it once). */
static bool warm_ready(void)
{
	char c = 0;

	if (!W.ready && recv(W.ctl, &c, 1, MSG_DONTWAIT) == 1)
		W.ready = c == 'R';
	return W.ready;
}

void agent_warm_wait(int port)
{
	while (!W.told && W.pid > 0 && W.ctl >= 0) {
		struct pollfd p[2] = {{.fd = port, .events = POLLIN},
				      {.fd = W.ctl, .events = POLLIN}};
		struct al_err err = {0};

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return;
		if (p[1].revents && !warm_ready()) {
			W.told = true; /* it died in its start-up: no word to say */
			agent_say("warm: the interpreter ended during its imports");
		} else if (p[1].revents) {
			W.told = true;
			if (al_chan_write(port, AL_CHAN_WARM, NULL, 0, NULL, 0, -1, &err))
				agent_say("warm: cannot tell the host: %s", err.msg);
		}
		if (p[0].revents)
			return;
	}
	/* a restored pool VM's rehearsal, when no job came for a moment */
	if (W.rehearse_at && W.pid > 0 && W.ctl >= 0) {
		struct pollfd p = {.fd = port, .events = POLLIN};
		uint64_t now = al_mono_ms();

		if (poll(&p, 1, W.rehearse_at > now ? (int)(W.rehearse_at - now) : 0) == 0)
			W.rehearsing = send(W.ctl, "Y", 1, MSG_NOSIGNAL) == 1;
	}
	W.rehearse_at = 0;
}

/* A rehearsal under way ended ('H'; its child is killed after 10 s): its
 * CPU and its process are not the job's. False when the interpreter did
 * not say so (it died, or hangs): then it serves no job. */
static bool rehearsal_end(void)
{
	struct pollfd p = {.fd = W.ctl, .events = POLLIN};
	char c = 0;
	bool ok = !W.rehearsing ||
		  (poll(&p, 1, REHEARSE_MAX_MS) == 1 && recv(W.ctl, &c, 1, 0) == 1 && c == 'H');

	W.rehearsing = false;
	return ok;
}

void agent_warm_restored(bool waits)
{
	if (W.pid <= 0 || W.ctl < 0)
		return;
	if (send(W.ctl, "Z", 1, MSG_NOSIGNAL) != 1)
		agent_say("warm: cannot tell the interpreter it was restored: %s", strerror(errno));
	else if (waits && agent_cmdline_has("airlock.tcg=1"))
		W.rehearse_at = al_mono_ms() + REHEARSE_AFTER_MS;
}

/* Why in may not run in the interpreter (a reason), or NULL. */
static const char *refusal(const struct job_in *in, char *buf, size_t cap)
{
	const struct al_limits *l = &in->job.limits;
	const char *var;
	uint64_t mem = 0, pids = 0;

	if (in->job.ntests)
		return "a grading job";
	for (int i = 0; i < 4; i++)
		if (!in->argv[i] || strcmp(in->argv[i], W.argv[i]))
			return "not a python job (or another launcher)";
	if (!in->job.code.len)
		return "a python job without code";
	if ((var = al_startup_differs(in->envp, W.envp))) {
		snprintf(buf, cap, "the job's environment differs in %.*s, read at start-up",
			 (int)strcspn(var, "="), var);
		return buf;
	}
	if (!warm_ready())
		return "the interpreter has not finished its imports";
	if (al_cg_usage(&W.cg, &mem, &pids))
		return "the interpreter's cgroup cannot be read";
	if ((l->memory_bytes && mem > l->memory_bytes / 2) || (l->pids && pids > l->pids / 2)) {
		snprintf(buf, cap,
			 "the interpreter holds %llu MiB and %llu task(s), over half the job's "
			 "limits (%llu MiB, %llu)",
			 (unsigned long long)(mem >> 20), (unsigned long long)pids,
			 (unsigned long long)(l->memory_bytes >> 20), (unsigned long long)l->pids);
		return buf;
	}
	return NULL;
}

/* The job's argv and environment as the interpreter reads them. */
static int spec_memfd(const struct job_in *in)
{
	struct al_buf b = {0};
	char n[32];
	size_t argc = 0, envc = 0;
	int bad = 0, fd;

	while (in->argv[argc])
		argc++;
	while (in->envp[envc])
		envc++;
	snprintf(n, sizeof(n), "%zu", argc);
	bad |= al_buf_append(&b, n, strlen(n) + 1);
	snprintf(n, sizeof(n), "%zu", envc);
	bad |= al_buf_append(&b, n, strlen(n) + 1);
	for (size_t i = 0; i < argc; i++)
		bad |= al_buf_append(&b, in->argv[i], strlen(in->argv[i]) + 1);
	for (size_t i = 0; i < envc; i++)
		bad |= al_buf_append(&b, in->envp[i], strlen(in->envp[i]) + 1);
	fd = bad ? -1 : agent_memfd("spec", b.data, b.len);
	al_buf_free(&b);
	return fd;
}

/* 'G' and the n descriptors (al_warm_python: five, or six for a session). */
static int send_go(const int *fds, int n)
{
	return al_send_fds(W.ctl, 'G', fds, n, 0) == 1 ? 0 : -1;
}

static int warm_go(struct job_in *in, int port, struct al_result *res, struct al_err *err)
{
	const struct al_limits *l = &in->job.limits;
	struct step st = {in->argv, in->envp, l, JOB_UID, NULL, false, true, 0};
	struct al_cg_limits cgl = {l->memory_bytes, l->pids, 0};
	uint64_t t0 = al_mono_ms(), base_s;
	struct rlimit cpu, fsize = {al_fsize_limit(l), al_fsize_limit(l)};
	int fds[6] = {-1, W.fs.out_fd, W.fs.err_fd, -1, -1, -1}, rc, n = in->job.session ? 6 : 5;

	/* the start-up's CPU is not the job's: its limit counts from here */
	st.cpu_base_ns = al_cg_cpu_ns(&W.cg);
	base_s = (st.cpu_base_ns + 999999999) / 1000000000;
	cpu.rlim_cur = base_s + (l->cpu_ms + 999) / 1000;
	cpu.rlim_max = cpu.rlim_cur + 1;
	if ((rc = al_cg_set_limits(&W.cg, &cgl, err)))
		return rc;
	if (prlimit(W.pid, RLIMIT_CPU, &cpu, NULL) || prlimit(W.pid, RLIMIT_FSIZE, &fsize, NULL))
		return al_err_sys(err, "agent: the warm interpreter's rlimits");
	if ((rc = al_jobfs_renew(&W.fs, &in->job, l->disk_bytes, JOB_UID, JOB_UID, err)))
		return rc;
	fds[0] = agent_memfd("stdin", in->job.stdin_data.data, in->job.stdin_data.len);
	fds[3] = agent_memfd("code", in->job.code.data, in->job.code.len);
	fds[n - 1] = spec_memfd(in);
	/* a session's server: its port to the worker, on fd 4 (as step.c's) */
	if (in->job.session && (fds[4] = agent_find_port(AL_SESSION_PORT, 2000)) < 0)
		rc = al_err_sys(err, "agent: the session port " AL_SESSION_PORT);
	else if (fds[0] < 0 || fds[3] < 0 || fds[n - 1] < 0)
		rc = al_err_sys(err, "agent: memfd");
	else if (send_go(fds, n))
		rc = al_err_sys(err, "agent: hand the job to the warm interpreter");
	al_closep(&W.ctl); /* nothing more goes either way */
	al_closep(&fds[0]);
	for (int i = 3; i < n; i++)
		al_closep(&fds[i]);
	if (rc)
		return rc;
	rc = agent_finish_step(&in->job, &st, W.pid, &W.cg, &W.fs, port, in->collect_cap, t0, res,
			       err);
	if (rc == AL_OK)
		W.pid = 0; /* reaped */
	return rc;
}

int agent_warm_run(struct job_in *in, int port, struct al_result *res, bool *ran,
		   struct al_err *err)
{
	char buf[200];
	const char *why;
	int rc;

	*ran = false;
	if (W.pid <= 0)
		return AL_OK;
	/* neither a rehearsal's CPU nor its process is the job's */
	why = rehearsal_end() ? refusal(in, buf, sizeof(buf)) : "its rehearsal did not end";
	if (why) {
		char said[240];

		agent_say("warm interpreter not used: %s", why);
		warm_stop();
		snprintf(said, sizeof(said), "cold (%s)", why);
		al_result_add_info(res, "interpreter", said);
		return AL_OK;
	}
	*ran = true;
	al_result_add_info(res, "interpreter", "warm");
	rc = warm_go(in, port, res, err);
	warm_stop();
	return rc;
}
