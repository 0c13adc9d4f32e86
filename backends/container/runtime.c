/* runtime.c - which OCI runtime runs a container job: the worker's default
 * (runc or crun, found by ctr_init), or its tier's (oci_runtime in the
 * policy), and for runsc (gVisor) its platform: the one the tier names, or
 * kvm where runsc offers it and /dev/kvm opens, else systrap where runsc
 * offers it, else ptrace. Each runsc platform is tried once (a `runsc do`
 * of /bin/true) before its first job, and a runsc that cannot start says
 * why: the tier is then unavailable (the worker logs it at start and its
 * jobs end sandbox_error with that reason), never a bare exit status.
 *
 * runsc differs from runc in what a bundle may ask: no descriptor beyond
 * stdio is passed in (no --preserve-fds), so the job's script and
 * airlock-exec come as files (config.c), and a mount's destination must
 * exist in the root (bundle.c gives such a job an overlay root); its
 * sandbox reports a job killed by signal N as exit status 128 + N
 * (ctr_end_status). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/clock.h"
#include "../../common/log.h"
#include "../jobspec.h"
#include "../kvm.h"
#include "ctr.h"

extern char **environ;

static const char *const platforms[CTR_PLATFORMS] = {"ptrace", "kvm", "systrap"};

/* How long runsc may take to start a sandbox that runs /bin/true. */
#define PROBE_MS 15000

bool ctr_is_runsc(const char *path)
{
	const char *base = strrchr(path, '/');

	return !strcmp(base ? base + 1 : path, "runsc");
}

/* (ctr.h; a runsc on a platform that cannot run here may spin for ever) */
int ctr_run_capture(const char *const *argv, char *out, size_t cap, int timeout_ms)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	int p[2], st = -1;
	size_t len = 0;
	pid_t pid;

	out[0] = '\0';
	if (pipe2(p, O_CLOEXEC))
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	posix_spawnattr_init(&at);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
	if (posix_spawn(&pid, argv[0], &fa, &at, (char *const *)argv, environ))
		pid = -1;
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	for (uint64_t end = al_mono_ms() + (uint64_t)timeout_ms; pid > 0;) {
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		uint64_t now = al_mono_ms();
		char buf[512];
		ssize_t n;

		if (now >= end || poll(&pf, 1, (int)(end - now)) == 0) {
			kill(-pid, SIGKILL);
			snprintf(out + len, cap - len, "%s(no answer in %d s: killed)",
				 len ? "\n" : "", timeout_ms / 1000);
			len += strlen(out + len);
			break;
		}
		if ((n = read(p[0], buf, sizeof(buf))) < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && len + 1 < cap; i++)
			out[len++] = buf[i];
		out[len] = '\0';
	}
	close(p[0]);
	if (pid > 0)
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	return st;
}

/* The platforms the installed runsc names in its flags' help: the line
 * after "-platform string", "specifies which platform to use: ptrace
 * (default), kvm." */
static void offered(void)
{
	const char *argv[] = {ctr_host.runsc, "flags", NULL};
	char out[16384], *p, *line, *end;

	ctr_host.runsc_offered[0] = '\0';
	ctr_run_capture(argv, out, sizeof(out), 10000);
	if (!(p = strstr(out, "-platform string")) || !(line = strchr(p, '\n')))
		return;
	line++;
	if ((end = strchr(line, '\n')))
		*end = '\0';
	for (int i = 0; i < CTR_PLATFORMS; i++)
		if (strstr(line, platforms[i]))
			snprintf(ctr_host.runsc_offered + strlen(ctr_host.runsc_offered),
				 sizeof(ctr_host.runsc_offered) - strlen(ctr_host.runsc_offered),
				 "%s%s", ctr_host.runsc_offered[0] ? "," : "", platforms[i]);
}

static int platform_index(const char *name)
{
	for (int i = 0; i < CTR_PLATFORMS; i++)
		if (!strcmp(name, platforms[i]))
			return i;
	return -1;
}

static bool is_offered(const char *name)
{
	const char *o = ctr_host.runsc_offered;
	size_t n = strlen(name);

	for (const char *p = o; (p = strstr(p, name)); p += n)
		if ((p == o || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

/* Find runsc and what it offers (once). */
static void find_runsc(void)
{
	if (ctr_host.runsc_looked)
		return;
	ctr_host.runsc_looked = true;
	/* the worker's --oci-runtime when it is a runsc (a path), else the
	 * one in the programs' directories (al_find_exec) */
	if (ctr_is_runsc(ctr_host.runtime))
		snprintf(ctr_host.runsc, sizeof(ctr_host.runsc), "%s", ctr_host.runtime);
	else if (!al_find_exec("runsc", ctr_host.runsc, sizeof(ctr_host.runsc)))
		ctr_host.runsc[0] = '\0';
	if (ctr_host.runsc[0])
		offered();
}

/* Try runsc on platform i once: a `runsc do /bin/true`. */
static int probe(int i, struct al_err *err)
{
	struct ctr_platform *pl = &ctr_host.plat[i];
	char flag[32], out[2048];
	int st;

	if (pl->state > 0)
		return AL_OK;
	if (pl->state < 0)
		return al_err_set(err, AL_ESANDBOX, "%s", pl->why);
	snprintf(flag, sizeof(flag), "--platform=%s", platforms[i]);
	if (!is_offered(platforms[i])) {
		snprintf(pl->why, sizeof(pl->why),
			 "runsc (%.100s) does not offer the %s platform (it offers %s)",
			 ctr_host.runsc, platforms[i],
			 ctr_host.runsc_offered[0] ? ctr_host.runsc_offered : "none");
	} else {
		const char *argv[] = {ctr_host.runsc,	"--root", ctr_host.runsc_root, flag,
				      "--network=none", "do",	  "/bin/true",	       NULL};
		char *nl;

		st = ctr_run_capture(argv, out, sizeof(out), PROBE_MS);
		if (st == 0) {
			pl->state = 1;
			al_log("info", "runsc", "path=%s platform=%s offered=%s", ctr_host.runsc,
			       platforms[i], ctr_host.runsc_offered);
			return AL_OK;
		}
		/* its last words: the line that says why */
		while ((nl = strrchr(out, '\n')) && !nl[1])
			*nl = '\0';
		nl = strrchr(out, '\n');
		snprintf(pl->why, sizeof(pl->why),
			 "runsc (%.100s) cannot start a sandbox on the %s platform here: `runsc do "
			 "/bin/true` %s %d: %.180s",
			 ctr_host.runsc, platforms[i],
			 st >= 0 && WIFSIGNALED(st) ? "killed by signal" : "exited",
			 st < 0		   ? -1
			 : WIFSIGNALED(st) ? WTERMSIG(st)
					   : WEXITSTATUS(st),
			 nl	  ? nl + 1
			 : out[0] ? out
				  : "(no output)");
	}
	pl->state = -1;
	al_log("error", "runsc", "platform=%s why=\"%s\"", platforms[i], pl->why);
	return al_err_set(err, AL_ESANDBOX, "%s", pl->why);
}

/* The platform a tier that names none gets on this host: the first of kvm
 * (where runsc offers it and KVM makes a VM), systrap (where offered) and
 * ptrace whose probe starts a sandbox; one that fails its probe is logged
 * (probe) and the next tried. Else the first one's error. */
static int auto_platform(const char **out, struct al_err *err)
{
	static const char *const order[] = {"kvm", "systrap", "ptrace"};
	struct al_err first = {0}, why = {0};
	const char *failed = NULL;
	gid_t gid;

	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
		int i = platform_index(order[k]);
		bool fresh = ctr_host.plat[i].state == 0;

		if ((k == 0 && (!is_offered("kvm") || !al_kvm_usable(&gid, &why))) ||
		    (k == 1 && !is_offered("systrap")))
			continue;
		if (probe(i, failed ? &why : &first) == AL_OK) {
			if (failed && fresh)
				al_log("warn", "runsc_fallback",
				       "platform=%s instead_of=%s note=\"a tier that names no "
				       "platform runs on %s\"",
				       order[k], failed, order[k]);
			*out = platforms[i];
			return AL_OK;
		}
		failed = failed ? failed : order[k];
	}
	*err = first;
	return first.code;
}

/* runsc's platform for a tier that names platform (NULL: picked here). */
static int runsc_platform(const char *platform, const char **out, struct al_err *err)
{
	int i;

	find_runsc();
	if (!ctr_host.runsc[0])
		return al_err_set(err, AL_ESANDBOX,
				  "OCI runtime runsc not found (install gVisor: apt-get install "
				  "runsc)");
	if (!platform)
		return auto_platform(out, err);
	if ((i = platform_index(platform)) < 0)
		return al_err_set(err, AL_ESANDBOX, "runsc: unknown platform \"%s\"", platform);
	*out = platforms[i];
	return probe(i, err);
}

int ctr_runtime_ok(const char *runtime, const char *platform, struct al_err *err)
{
	struct ctr_rt rt;
	struct al_run_spec spec = {.oci_runtime = runtime, .oci_platform = platform};

	return ctr_runtime_of(&spec, &rt, err);
}

int ctr_runtime_of(const struct al_run_spec *spec, struct ctr_rt *rt, struct al_err *err)
{
	const char *want = spec->oci_runtime, *base = strrchr(ctr_host.runtime, '/');
	int rc;

	memset(rt, 0, sizeof(*rt));
	if (!want || !strcmp(want, base ? base + 1 : ctr_host.runtime)) {
		rt->path = ctr_host.runtime;
		rt->root = ctr_host.root;
	} else if (!strcmp(want, "runsc")) {
		find_runsc();
		rt->path = ctr_host.runsc;
		rt->root = ctr_host.runsc_root;
	} else if (!strcmp(want, "runc") || !strcmp(want, "crun")) {
		char *slot = !strcmp(want, "runc") ? ctr_host.runc : ctr_host.crun;

		if (!slot[0] && !al_find_exec(want, slot, PATH_MAX))
			slot[0] = '\0';
		if (!slot[0])
			return al_err_set(err, AL_ESANDBOX, "OCI runtime %s not found", want);
		if (!strcmp(want, "crun") && ctr_host.cg.version == AL_CG_V1)
			return al_err_set(err, AL_ESANDBOX,
					  "crun refuses this host's hybrid cgroup layout (v1 "
					  "controllers); use runc");
		rt->path = slot;
		rt->root = ctr_host.root;
	} else {
		return al_err_set(err, AL_ESANDBOX, "unknown OCI runtime \"%s\"", want);
	}
	rt->gvisor = ctr_is_runsc(rt->path[0] ? rt->path : "runsc");
	if (!rt->gvisor)
		return AL_OK;
	rt->root = ctr_host.runsc_root; /* runsc's state apart from runc's */
	if ((rc = runsc_platform(spec->oci_platform, &rt->platform, err)))
		return rc;
	rt->path = ctr_host.runsc;
	/* the job's network is its sandbox's own loopback (with egress, the
	 * proxy's address there is airlock-exec's relay); the CPUs it is
	 * shown follow its CPU share (at least 2); a session's server and the
	 * relay connect to the worker through host socket files in its
	 * CTR_GV_DIR (bundle.c) */
	snprintf(rt->flags, sizeof(rt->flags), "--platform=%s --network=none --cpu-num-from-quota",
		 rt->platform);
	if (spec->session || spec->network == AL_NET_EGRESS)
		ctr_runtime_host_uds(rt);
	return AL_OK;
}

void ctr_runtime_host_uds(struct ctr_rt *rt)
{
	size_t n = strlen(rt->flags);

	if (!strstr(rt->flags, "--host-uds"))
		snprintf(rt->flags + n, sizeof(rt->flags) - n, " --host-uds=open");
}

bool ctr_end_status(const struct ctr_rt *rt, int *ws)
{
	/* runsc's sandbox exits 128 + N for a job killed by signal N */
	if (!rt->gvisor || !WIFEXITED(*ws) || WEXITSTATUS(*ws) <= 128 ||
	    WEXITSTATUS(*ws) > 128 + SIGRTMAX)
		return false;
	*ws = WEXITSTATUS(*ws) - 128; /* a wait status: killed by that signal */
	return true;
}
