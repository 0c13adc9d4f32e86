/* process.c - the process backend: a hardened child process.
 *
 * Each job runs under a small init (backends/process/init.c, the static
 * airlock-sandbox-init) that is PID 1 of fresh PID, network (empty), mount,
 * IPC and UTS namespaces, inside its own cgroup. For speed every slot keeps
 * one such init ready ("warm"): the worker clones a child into the new
 * namespaces, which executes the init binary; the init joins a fresh cgroup
 * (slow on cgroup v1: an RCU grace period), mounts a new /proc and empty
 * tmpfs over the host paths a job must not see, and waits on a socket. A job
 * then costs one message: the worker sets the cgroup's limits and sends the
 * job's descriptors (its work tmpfs, a detached mount never visible on the
 * host; stdin; stdout and stderr memfds; the script) and a spec (argv,
 * environment, rlimits). The init moves the tmpfs onto /tmp, drops to the
 * slot's uid with no capabilities and no_new_privs, and starts the job:
 * setsid, rlimits, seccomp, exec. When the job's main process exits the init
 * reports its wait status and exits, and the kernel kills everything left in
 * the PID namespace, so no daemon outlives the job. A timeout SIGKILLs the
 * init through its pidfd, which does the same. The init dies with the worker
 * (PR_SET_PDEATHSIG).
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

#include "../../common/cleanup.h"
#include "../../proto/buf.h"
#include "../backend.h"
#include "../cgroup.h"
#include "../fdpass.h"
#include "../jobfs.h"
#include "../jobspec.h"
#include "../netns.h"
#include "../seccomp.h"
#include "../../common/log.h"
#include "../endstatus.h"
#include "init.h"

/* Longest catalogue image name a warm sandbox remembers (longer: no
 * warm interpreter in it). */
#define AL_IMAGE_NAME_MAX 128

/* One pre-made init per slot. */
struct warm {
	pid_t pid;
	int pidfd;
	int mntns;     /* the sandbox's mount namespace, held (see proc_destroy) */
	int ctl;       /* our end of the control socket */
	int report_rd; /* init -> worker: "E<message>" or "X<wait status>" */
	struct al_cg cg;
	bool cg_made;
	bool ready;
	bool py;		       /* its init starts a warm interpreter */
	char image[AL_IMAGE_NAME_MAX]; /* in this catalogue image ("": the host's root) */
	unsigned born;		       /* G.seq when made: a slot's next job takes the oldest */
};

/* Warm inits per slot. With two, a slot's next job takes the one made a
 * whole job earlier: a job that follows another at once does not wait for
 * its sandbox to finish joining its cgroup (on cgroup v1 an RCU grace
 * period, up to ~12 ms here). */
#define WARM_PER_SLOT 2

/* A warm interpreter's real uid until its job comes (its effective and
 * saved uid are the slot's), so that no process of a slot's uid runs
 * between its jobs: the one after the slots', in the block of 256 the
 * worker's slots have (--uid-base N: slots from N, microVM VMMs from
 * N + 256). A worker with 256 slots has none left: no warm interpreter. */
#define AL_WARM_UID(conf) ((conf)->uid_base + (conf)->slots)
#define WARM_SLOTS_MAX	  255

/* A job with less memory than this runs cold: the warm interpreter holds
 * ~10 MiB before the job's limit is set on its cgroup. */
#define WARM_MIN_MEMORY (64ull << 20)

/* Global state filled by init (one worker process, one configuration). */
static struct {
	struct al_cg_sys cg;
	int bpf_fd;  /* the seccomp program (sealed memfd), for the inits */
	int init_fd; /* the init binary, opened at start-up */
	const struct al_backend_conf *conf;
	char jobs_root[PATH_MAX]; /* <state_dir>/<worker_id>/process */
	struct warm *warm;	  /* conf->slots * WARM_PER_SLOT entries */
	int *grave;		  /* per slot: a finished sandbox's mount namespace */
	unsigned seq;		  /* names the cgroups of warm inits */
	bool ready;
	/* The warm interpreter (init.h): its argv and environment for the
	 * inits (warm_fd); the argv and environment a python job without
	 * variables gets (wargv, wenvp, in wbuf): a job runs there only when
	 * its own start the same; per slot, whether its last job could have
	 * and in which image (its next sandboxes start one there then). */
	int warm_fd;
	struct al_buf wbuf;
	char *wargv[4], **wenvp;
	struct want {
		bool py;
		char image[AL_IMAGE_NAME_MAX];
	} * want;
} G;

struct proc_sb {
	struct al_jobfs fs;
	struct al_cg cg;
	bool cg_made;
	int code_fd;  /* memfd with the script, -1 for argv jobs */
	int stdin_fd; /* memfd with stdin */
	int spec_fd;  /* memfd with the spec */
	int report_rd;
	int pidfd;
	int mntns;
	pid_t pid;
	bool exited;
	uint64_t cpu_base_ns;		/* the cgroup's CPU time before the job */
	int bind_fd[AL_INIT_MAX_BINDS]; /* the tier's binds: detached read-only trees */
	size_t nbinds;
};

/* ---- the child, between clone3 and the exec of the init: no allocation ---- */

/* Put the init's descriptors in place, close every other one, and execute
 * the init binary with args (see init.h). */
static void __attribute__((noreturn))
warm_exec(int ctl, int report_wr, char *const *args, bool py, int image_fd)
{
	int fds[6] = {report_wr, ctl, G.bpf_fd, G.init_fd, G.warm_fd, image_fd};
	static const int tg[6] = {AL_INIT_FD_REPORT, AL_INIT_FD_CTL,  AL_INIT_FD_SECCOMP,
				  AL_INIT_FD_BINARY, AL_INIT_FD_WARM, AL_INIT_FD_IMAGE};
	int nfds = !py || G.warm_fd < 0 ? 4 : image_fd < 0 ? 5 : 6;
	static char *const noenv[] = {NULL};
	char msg[200];

	/* If the worker dies, the init dies, and with it the namespace. The
	 * worker may have died before the death signal was armed: then the
	 * read end of the report pipe is closed (poll says POLLERR). The
	 * signal is kept across the exec. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		_exit(125);
	{
		struct pollfd pf = {.fd = report_wr, .events = POLLOUT};

		if (poll(&pf, 1, 0) < 0 || (pf.revents & (POLLERR | POLLHUP)))
			_exit(125);
	}
	for (int i = 0; i < nfds; i++)
		if ((fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 100)) < 0)
			_exit(126);
	for (int i = 0; i < nfds; i++)
		if (dup2(fds[i], tg[i]) < 0)
			_exit(126);
	for (int fd = 0; fd < AL_INIT_FD_REPORT; fd++)
		close(fd);
	if (syscall(SYS_close_range, (unsigned)tg[nfds - 1] + 1, ~0u, 0))
		_exit(126);
	syscall(SYS_execveat, AL_INIT_FD_BINARY, "", args, noenv, AT_EMPTY_PATH);
	snprintf(msg, sizeof(msg), "Eexecute the sandbox init: %s", strerror(errno));
	if (write(AL_INIT_FD_REPORT, msg, strlen(msg)) < 0) {
		/* nothing more we can do */
	}
	_exit(127);
}

/* ---- parent side ---- */

static void warm_discard(struct warm *w)
{
	if (w->pidfd >= 0) {
		al_pidfd_kill_wait(w->pidfd, true);
		close(w->pidfd);
	}
	al_closep(&w->ctl);
	al_closep(&w->report_rd);
	al_closep(&w->mntns);
	if (w->cg_made)
		al_cg_destroy(&w->cg, NULL);
	memset(w, 0, sizeof(*w));
	w->pidfd = w->ctl = w->report_rd = w->mntns = -1;
}

static struct warm *warm_of(unsigned slot, unsigned k)
{
	return &G.warm[slot * WARM_PER_SLOT + k];
}

static int clone_tree(const char *path, bool rw, const char *what, struct al_err *err);

/* The catalogue image name as a detached tree for a warm interpreter, if it
 * has python3; -1 when not (no interpreter then). */
static int warm_image_tree(const char *name)
{
	char dir[PATH_MAX], py[PATH_MAX + 32];
	struct al_err e = {0};

	if (al_image_path(G.conf, name, false, dir, sizeof(dir), &e))
		return -1;
	snprintf(py, sizeof(py), "%s/usr/bin/python3", dir);
	return access(py, X_OK) ? -1 : al_image_tree(G.conf, dir, &e);
}

/* Make a warm init for slot in w; py: with a warm interpreter, in image
 * when not "" or NULL. */
static int warm_spawn(struct warm *w, unsigned slot, bool py, const char *image, struct al_err *err)
{
	struct al_cg_limits none = {0};
	char name[48], cg_args[4][PATH_MAX + 4], uid_arg[24], wuid_arg[32];
	char *args[1 + 4 + 3];
	int nargs = 0;
	int sv[2], pipefd[2], pidfd = -1, rc, image_fd = -1;
	pid_t pid;

	warm_discard(w);
	w->born = ++G.seq;
	snprintf(name, sizeof(name), "%u-%u", slot, w->born);
	if ((rc = al_cg_create(&w->cg, &G.cg, name, &none, err)))
		return al_err_wrap(err, "process");
	w->cg_made = true;
	args[nargs++] = (char *)"airlock-sandbox-init";
	for (int i = 0; i < w->cg.ndirs; i++) {
		snprintf(cg_args[i], sizeof(cg_args[i]), "cg=%s", w->cg.dirs[i]);
		args[nargs++] = cg_args[i];
	}
	snprintf(uid_arg, sizeof(uid_arg), "uid=%u", (unsigned)(G.conf->uid_base + slot));
	args[nargs++] = uid_arg;
	snprintf(wuid_arg, sizeof(wuid_arg), "warmuid=%u", (unsigned)AL_WARM_UID(G.conf));
	args[nargs++] = wuid_arg;
	args[nargs] = NULL;
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
	py = py && G.warm_fd >= 0;
	if (py && image && image[0] && (image_fd = warm_image_tree(image)) < 0)
		py = false; /* no python3 there, or no such image now */
	pid = al_clone_pidfd(
	    CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS, &pidfd);
	if (pid == 0)
		warm_exec(sv[1], pipefd[1], args, py, image_fd); /* never returns */
	al_closep(&image_fd);
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
	w->py = py;
	snprintf(w->image, sizeof(w->image), "%s", py && image ? image : "");
	return AL_OK;
out_discard:
	warm_discard(w);
	return rc;
}

static bool warm_alive(const struct warm *w)
{
	struct pollfd pf = {.fd = w->pidfd, .events = POLLIN};

	return w->ready && w->pidfd >= 0 && poll(&pf, 1, 0) == 0;
}

/* The slot's oldest live warm init; else, made now (the cold path), in the
 * first of its entries. NULL on failure. */
static struct warm *warm_take(unsigned slot, struct al_err *err)
{
	struct warm *best = NULL;

	for (unsigned k = 0; k < WARM_PER_SLOT; k++) {
		struct warm *w = warm_of(slot, k);

		if (warm_alive(w) && (!best || w->born < best->born))
			best = w;
	}
	if (!best && warm_spawn(best = warm_of(slot, 0), slot, false, NULL, err))
		return NULL;
	return best;
}

static int memfd_with(const char *name, const char *data, size_t len, struct al_err *err)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return al_err_sys(err, "process: memfd_create");
	if (al_write_all(fd, data, len)) {
		close(fd);
		return al_err_sys(err, "process: write memfd");
	}
	if (lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)) {
		close(fd);
		return al_err_sys(err, "process: seal memfd");
	}
	return fd;
}

static void proc_free_globals(void)
{
	for (unsigned k = 0; G.warm && k < G.conf->slots * WARM_PER_SLOT; k++)
		warm_discard(&G.warm[k]);
	for (unsigned k = 0; G.grave && k < G.conf->slots; k++)
		if (G.grave[k] >= 0)
			close(G.grave[k]);
	free(G.warm);
	free(G.grave);
	free(G.want);
	free(G.wenvp);
	al_buf_free(&G.wbuf);
	G.warm = NULL;
	G.grave = NULL;
	G.want = NULL;
	G.wenvp = NULL;
	al_closep(&G.warm_fd);
	al_closep(&G.bpf_fd);
	al_closep(&G.init_fd);
	G.bpf_fd = G.init_fd = -1;
	G.ready = false;
}

static int open_init_binary(const struct al_backend_conf *conf, struct al_err *err)
{
	G.init_fd = al_open_helper(conf->helper_dir, "airlock-sandbox-init", err);
	return G.init_fd < 0 ? al_err_wrap(err, "process: sandbox init") : AL_OK;
}

/* The seccomp programs, compiled here once, in a sealed memfd the inits
 * read: the job's, then the one for network egress (AF_INET allowed), each
 * a uint32 instruction count and the instructions (init.h). */
static int make_bpf_fd(struct al_err *err)
{
	struct al_seccomp sc[2];
	struct al_buf b = {0};
	int rc, bad = 0;

	if ((rc = al_seccomp_build(&sc[0], err)))
		return al_err_wrap(err, "process");
	if ((rc = al_seccomp_build_net(&sc[1], true, err))) {
		al_seccomp_free(&sc[0]);
		return al_err_wrap(err, "process");
	}
	for (int i = 0; i < 2; i++) {
		uint32_t n = sc[i].prog.len;

		bad |= al_buf_append(&b, &n, sizeof(n)) ||
		       al_buf_append(&b, sc[i].prog.filter, n * sizeof(*sc[i].prog.filter));
		al_seccomp_free(&sc[i]);
	}
	if (bad) {
		al_buf_free(&b);
		return al_err_set(err, AL_ENOMEM, "process: out of memory");
	}
	G.bpf_fd = memfd_with("airlock-seccomp", b.data, b.len, err);
	al_buf_free(&b);
	return G.bpf_fd < 0 ? G.bpf_fd : AL_OK;
}

/* The warm interpreter's argv and environment for the inits (init.h), and
 * what a python job without variables gets, to compare each job with.
 * None (warm_fd -1) on a host without /usr/bin/python3, or with no warm
 * uid left. */
static int make_warm(struct al_err *err)
{
	struct al_job job = {.runtime = AL_RUNTIME_PYTHON};
	struct al_run_spec spec = {.job = &job};
	struct al_buf b = {0};
	uint32_t argc = 0, envc = 0;
	char num[2][24], *p;
	int bad = 0;

	if (access("/usr/bin/python3", X_OK) || G.conf->slots > WARM_SLOTS_MAX)
		return AL_OK;
	if (al_argv_env(&spec, "/proc/self/fd/3", &G.wbuf, &argc, &envc) || argc != 4 ||
	    !(G.wenvp = calloc(envc + 1, sizeof(*G.wenvp))))
		return al_err_set(err, AL_ENOMEM, "process: out of memory");
	p = G.wbuf.data;
	for (uint32_t i = 0; i < argc + envc; i++, p += strlen(p) + 1)
		*(i < argc ? &G.wargv[i] : &G.wenvp[i - argc]) = p;
	snprintf(num[0], sizeof(num[0]), "4");
	snprintf(num[1], sizeof(num[1]), "%u", (unsigned)envc);
	{
		const char *const head[] = {num[0],	num[1],		G.wargv[0],
					    G.wargv[1], al_warm_python, G.wargv[2]};

		for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
			bad |= al_buf_append(&b, head[i], strlen(head[i]) + 1);
	}
	for (uint32_t i = 0; i < envc; i++)
		bad |= al_buf_append(&b, G.wenvp[i], strlen(G.wenvp[i]) + 1);
	G.warm_fd = bad ? al_err_set(err, AL_ENOMEM, "process: out of memory")
			: memfd_with("airlock-warm", b.data, b.len, err);
	al_buf_free(&b);
	return G.warm_fd < 0 ? G.warm_fd : AL_OK;
}

/* What a crashed earlier run of this worker id left: cgroups (its
 * sandboxes died with it), and job directories of older versions. Run by
 * init before it makes the warm sandboxes, which a later sweep would take. */
static void sweep_leftovers(const struct al_backend_conf *conf)
{
	char root[PATH_MAX];

	al_cg_sweep(&G.cg, NULL);
	snprintf(root, sizeof(root), "%s/%s/process", conf->state_dir, conf->worker_id);
	al_jobfs_sweep(root, NULL);
}

static int proc_init(const struct al_backend_conf *conf, struct al_err *err)
{
	uid_t me = getuid();
	int rc;

	memset(&G, 0, sizeof(G));
	G.conf = conf;
	G.bpf_fd = G.init_fd = G.warm_fd = -1;
	if (geteuid() != 0)
		return al_err_set(err, AL_ESANDBOX,
				  "process: needs root (it makes namespaces, mounts and cgroups), "
				  "running as uid %u",
				  (unsigned)geteuid());
	if (conf->uid_base == 0 || conf->slots == 0 ||
	    (me >= conf->uid_base && me <= AL_WARM_UID(conf)))
		return al_err_set(err, AL_ESANDBOX,
				  "process: slot uids %u..%u and the warm uid %u must not include "
				  "root or the worker's uid %u",
				  (unsigned)conf->uid_base,
				  (unsigned)(conf->uid_base + conf->slots - 1),
				  (unsigned)AL_WARM_UID(conf), (unsigned)me);
	if ((rc = al_cg_detect(&G.cg, conf->worker_id, "process", err)))
		return al_err_wrap(err, "process");
	sweep_leftovers(conf);
	snprintf(G.jobs_root, sizeof(G.jobs_root), "%s/%s/process", conf->state_dir,
		 conf->worker_id);
	/* Self-check: the kernel must load seccomp filters. */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, NULL) == 0 || errno != EFAULT)
		return al_err_set(err, AL_ESANDBOX,
				  "process: seccomp filters unavailable in the kernel");
	if ((rc = open_init_binary(conf, err)) || (rc = make_bpf_fd(err)) || (rc = make_warm(err)))
		goto fail_globals;
	G.warm = calloc((size_t)conf->slots * WARM_PER_SLOT, sizeof(*G.warm));
	G.grave = malloc(conf->slots * sizeof(*G.grave));
	G.want = calloc(conf->slots, sizeof(*G.want));
	if (!G.warm || !G.grave || !G.want)
		goto fail_oom;
	for (unsigned i = 0; i < conf->slots * WARM_PER_SLOT; i++)
		G.warm[i].pidfd = G.warm[i].ctl = G.warm[i].report_rd = G.warm[i].mntns = -1;
	for (unsigned i = 0; i < conf->slots; i++)
		G.grave[i] = -1;
	G.ready = true;
	/* Self-check: one warm init per slot, each in new PID, network and mount
	 * namespaces and a cgroup: any failure means this backend is not
	 * offered (fail closed). */
	for (unsigned i = 0; i < conf->slots; i++)
		for (unsigned k = 0; k < WARM_PER_SLOT; k++)
			if ((rc = warm_spawn(warm_of(i, k), i, false, NULL, err)))
				goto fail_globals;
	return AL_OK;
fail_oom:
	rc = al_err_set(err, AL_ENOMEM, "process: out of memory");
fail_globals:
	proc_free_globals();
	return rc;
}

/* The binds' paths after argv and environment (init.h); the image is the
 * bind at "/". */
static int append_binds(const struct al_run_spec *spec, size_t n, struct al_buf *out)
{
	size_t tier = spec->image ? 0 : n - (spec->grade_tree != NULL);

	if (spec->image && al_buf_append(out, "/", 2))
		return AL_ENOMEM;
	for (size_t i = 0; i < tier; i++)
		if (al_buf_append(out, spec->binds[i], strlen(spec->binds[i]) + 1))
			return AL_ENOMEM;
	/* a grading job's build tree, the last bind, on the step's cwd */
	return spec->grade_tree ? al_buf_append(out, "/work", 6) : 0;
}

/* A detached copy of the host's tree at path, read-only (unless rw),
 * nosuid, nodev before the sandbox sees it; -1 with err. */
static int clone_tree(const char *path, bool rw, const char *what, struct al_err *err)
{
	struct mount_attr ro = {.attr_set = (rw ? 0 : MOUNT_ATTR_RDONLY) | MOUNT_ATTR_NOSUID |
					    MOUNT_ATTR_NODEV};
	int fd = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);

	if (fd < 0)
		return al_err_sys(err, "process: %s %s", what, path);
	if (mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &ro, sizeof(ro))) {
		close(fd);
		return al_err_sys(err, "process: set the mount flags of %s %s", what, path);
	}
	return fd;
}

/* Whether the job may run in a warm interpreter: a python job with its
 * code, run as the interpreter would run it (the same interpreter and
 * launcher, no binds or build tree, not a session, not the egress
 * filter, room in its memory limit) whose variables read at start-up are
 * the interpreter's. strs: its argv, then its environment. */
static bool warm_fits(const struct al_sandbox *sb, const char *strs, uint32_t argc, uint32_t envc)
{
	const uint64_t mem = sb->spec.limits.memory_bytes;
	char **env;
	bool fits = true;

	if (G.warm_fd < 0 || sb->spec.job->runtime != AL_RUNTIME_PYTHON || sb->spec.nbinds ||
	    sb->spec.grade_tree || sb->spec.session || sb->spec.network == AL_NET_EGRESS ||
	    (mem && mem < WARM_MIN_MEMORY) || argc < 4 ||
	    !(env = calloc((size_t)envc + 1, sizeof(*env))))
		return false;
	for (uint32_t i = 0; i < argc + envc; i++, strs += strlen(strs) + 1) {
		if (i < 4)
			fits = fits && !strcmp(strs, G.wargv[i]);
		else if (i >= argc)
			env[i - argc] = (char *)strs;
	}
	fits = fits && !al_startup_differs(env, G.wenvp);
	free(env);
	return fits;
}

static int proc_prepare(struct al_sandbox *sb, struct al_err *err)
{
	struct proc_sb *p = sb->priv;
	const struct al_job *job = sb->spec.job;
	const struct al_limits *l = &sb->spec.limits;
	uid_t uid = sb->conf->uid_base + sb->spec.slot;
	struct al_buf spec = {0};
	struct al_init_spec h = {0};
	char name[AL_ID_MAX + 16];
	int rc;

	p->code_fd = p->stdin_fd = p->spec_fd = p->report_rd = p->pidfd = p->mntns = -1;
	p->fs.out_fd = p->fs.err_fd = p->fs.mnt_fd = -1;
	if (sb->spec.nbinds > AL_INIT_MAX_BINDS)
		return al_err_set(err, AL_ESANDBOX, "process: more than %d binds",
				  AL_INIT_MAX_BINDS);
	if (!G.ready || sb->spec.slot >= sb->conf->slots)
		return al_err_set(err, AL_ESANDBOX, "process: backend not initialised");
	snprintf(name, sizeof(name), "%u-%s", sb->spec.slot, job->id);
	if ((rc = al_jobfs_create(&p->fs, G.jobs_root, name, job, l->disk_bytes, uid, uid, true,
				  err)) ||
	    (sb->spec.inputs_pack && (rc = al_jobfs_unpack(&p->fs, sb->spec.inputs_pack, uid, uid,
							   sb->spec.max_input_bytes, err))))
		return al_err_wrap(err, "process");
	if (job->runtime != AL_RUNTIME_ARGV &&
	    (p->code_fd = memfd_with("job-code", job->code.data, job->code.len, err)) < 0)
		return p->code_fd;
	if ((p->stdin_fd =
		 memfd_with("job-stdin", job->stdin_data.data, job->stdin_data.len, err)) < 0)
		return p->stdin_fd;
	/* The job's catalogue image (its root: an overlay of it, which names no
	 * host path), or the tier's binds: each a detached read-only copy of
	 * the host's tree. */
	if (sb->spec.image) {
		char dir[PATH_MAX];

		if ((rc = al_image_path(sb->conf, sb->spec.image, false, dir, sizeof(dir), err)))
			return al_err_wrap(err, "process");
		if ((p->bind_fd[0] = al_image_tree(sb->conf, dir, err)) < 0)
			return al_err_wrap(err, "process");
		p->nbinds = 1;
	}
	for (size_t i = 0; !sb->spec.image && i < sb->spec.nbinds && i < AL_INIT_MAX_BINDS; i++) {
		if ((p->bind_fd[i] = clone_tree(sb->spec.binds[i], false, "the tier's bind", err)) <
		    0)
			return AL_ESYS;
		p->nbinds = i + 1;
	}
	/* A grading job's step: its build tree, writable for the build only. */
	if (sb->spec.grade_tree) {
		if ((p->bind_fd[p->nbinds] = clone_tree(sb->spec.grade_tree, sb->spec.grade_build,
							"the build tree", err)) < 0)
			return AL_ESYS;
		p->nbinds++;
		h.work = 1;
	}
	/* The cgroup is the real memory limit; the address-space limit only
	 * stops absurd reservations, with room for runtimes that map a lot. */
	h.rl_as = l->memory_bytes + (1ull << 30);
	h.rl_cpu = (l->cpu_ms + 999) / 1000;
	h.rl_fsize = al_fsize_limit(l);
	h.rl_nofile = sb->conf->nofile;
	h.uid = uid;
	h.has_code = p->code_fd >= 0;
	h.image = sb->spec.image != NULL;
	h.cpus = al_job_cpus(sb->spec.cpu_millis);
	h.inet = sb->spec.network == AL_NET_EGRESS;
	if (h.inet)
		sb->spec.proxy_url = AL_EGRESS_PROXY_URL;
	h.nbinds = (uint32_t)p->nbinds;
	if (al_buf_append(&spec, &h, sizeof(h)) ||
	    al_argv_env(&sb->spec, "/proc/self/fd/3", &spec, &h.argc, &h.envc) ||
	    append_binds(&sb->spec, p->nbinds, &spec)) {
		al_buf_free(&spec);
		return al_err_set(err, AL_ENOMEM, "process: out of memory");
	}
	h.warm = warm_fits(sb, (const char *)spec.data + sizeof(h), h.argc, h.envc);
	G.want[sb->spec.slot].py = h.warm;
	snprintf(G.want[sb->spec.slot].image, sizeof(G.want[0].image), "%s",
		 sb->spec.image ? sb->spec.image : "");
	memcpy(spec.data, &h, sizeof(h)); /* argc/envc known now */
	p->spec_fd = memfd_with("job-spec", spec.data, spec.len, err);
	al_buf_free(&spec);
	return p->spec_fd < 0 ? p->spec_fd : AL_OK;
}

static int send_go(struct warm *w, const int *fds, size_t nfds)
{
	return al_send_fds(w->ctl, 'G', fds, nfds, 0) == 1 ? 0 : -1;
}

static int proc_start(struct al_sandbox *sb, struct al_watch *wt, struct al_err *err)
{
	struct proc_sb *p = sb->priv;
	struct warm *w;
	const struct al_limits *l = &sb->spec.limits;
	struct al_cg_limits cgl = {
	    .memory_bytes = l->memory_bytes,
	    .pids = l->pids + 1, /* the sandbox's init counts too */
	    .cpu_millis = sb->spec.cpu_millis,
	};
	int fds[AL_GO_NFDS + AL_INIT_MAX_BINDS] = {p->fs.mnt_fd,
						   p->stdin_fd,
						   p->fs.out_fd,
						   p->fs.err_fd,
						   p->code_fd >= 0 ? p->code_fd : p->stdin_fd,
						   p->spec_fd};
	size_t nfds = AL_GO_NFDS + p->nbinds;
	int rc;

	memcpy(fds + AL_GO_NFDS, p->bind_fd, p->nbinds * sizeof(int));

	/* None alive (died while waiting, or never made): one is made now, at
	 * the cost of the cold path. */
	if (!(w = warm_take(sb->spec.slot, err)))
		return err->code ? err->code : AL_ESANDBOX;
	/* a sandbox already in an image serves only jobs of that image: for
	 * another job one is made now (the cold path) */
	if (w->image[0] && strcmp(w->image, sb->spec.image ? sb->spec.image : "") &&
	    (rc = warm_spawn(w, sb->spec.slot, false, NULL, err)))
		return al_err_wrap(err, "process");
	if (al_cg_set_limits(&w->cg, &cgl, err)) {
		/* a warm sandbox whose set-up fails (its cgroup gone from under
		 * it, say) is never offered again: discarded, and the job tries
		 * once in a sandbox made now */
		al_log("warn", "warm_discarded", "slot=%u error=\"%s\" note=\"retrying cold\"",
		       sb->spec.slot, err->msg);
		*err = (struct al_err){0};
		if ((rc = warm_spawn(w, sb->spec.slot, false, NULL, err)) ||
		    (rc = al_cg_set_limits(&w->cg, &cgl, err))) {
			warm_discard(w);
			return al_err_wrap(err, "process");
		}
	}
	p->cpu_base_ns = al_cg_cpu_ns(&w->cg);
	/* Network egress: the proxy listens on the sandbox's own loopback (its
	 * network namespace has nothing else), before the job can run; so does
	 * a session's socket, on an abstract name of that namespace. */
	if (sb->spec.network == AL_NET_EGRESS || sb->spec.session) {
		char ns[64];
		cleanup_close int nsfd = -1;

		snprintf(ns, sizeof(ns), "/proc/%d/ns/net", (int)w->pid);
		if ((nsfd = open(ns, O_RDONLY | O_CLOEXEC)) < 0)
			return al_err_sys(err, "process: open the sandbox's network namespace");
		if (sb->spec.network == AL_NET_EGRESS &&
		    (wt->egress_fd = al_netns_listen(nsfd, AL_EGRESS_PROXY_PORT, err)) < 0)
			return al_err_wrap(err, "process");
		if (sb->spec.session &&
		    (wt->session_fd = al_netns_listen_unix(nsfd, AL_SESSION_SOCKET, err)) < 0) {
			al_closep(&wt->egress_fd);
			return al_err_wrap(err, "process");
		}
	}
	if (send_go(w, fds, nfds)) {
		/* died between the check and the message: one retry, cold */
		if ((rc = warm_spawn(w, sb->spec.slot, false, NULL, err)) ||
		    (rc = al_cg_set_limits(&w->cg, &cgl, err)))
			return rc;
		if (send_go(w, fds, nfds))
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

/* The job's share of its cgroup's CPU time (the warm sandbox's set-up
 * came before it). */
static uint64_t job_cpu_ns(const struct proc_sb *p, uint64_t cgroup_ns)
{
	return cgroup_ns > p->cpu_base_ns ? cgroup_ns - p->cpu_base_ns : 0;
}

static int proc_usage(struct al_sandbox *sb, struct al_usage *u)
{
	struct proc_sb *p = sb->priv;
	u->cpu_ns = job_cpu_ns(p, al_cg_cpu_ns(&p->cg));
	u->stdout_bytes = al_fd_size(p->fs.out_fd);
	u->stderr_bytes = al_fd_size(p->fs.err_fd);
	return 0;
}

static int proc_oom_kills(struct al_sandbox *sb, uint64_t *n)
{
	struct proc_sb *p = sb->priv;
	struct al_cg_stats st = {0};

	if (al_cg_stats(&p->cg, &st))
		return -1;
	*n = st.oom_kills;
	return 0;
}

/* Live output: what the job has written to its memfds so far. */
static ssize_t proc_output(struct al_sandbox *sb, int stream, uint64_t off, void *buf, size_t cap)
{
	struct proc_sb *p = sb->priv;

	return al_jobfs_output(&p->fs, stream, off, buf, cap);
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
	siginfo_t si = {0};
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
	st.cpu_ns = job_cpu_ns(p, st.cpu_ns);
	if ((rc = al_jobfs_collect(&p->fs, sb->spec.job, &sb->spec.limits,
				   sb->conf->collect_max_bytes, res, &disk_full, err)))
		return al_err_wrap(err, "process");
	if (report[0] == 'E')
		return al_err_set(err, AL_ESANDBOX, "process: sandbox set-up failed: %s",
				  report + 1);
	if (report[0] == 'X') {
		long rss = 0;
		int warm = 0;

		if (sscanf(report, "X%d R%ld W%d", &ws, &rss, &warm) < 1)
			ws = atoi(report + 1);
		res->max_rss_bytes = rss > 0 ? (uint64_t)rss * 1024 : 0;
		/* a python job says which interpreter ran it */
		if (sb->spec.job->runtime == AL_RUNTIME_PYTHON &&
		    al_result_add_info(res, "interpreter", warm == 1 ? "warm" : "cold"))
			return al_err_set(err, AL_ENOMEM, "process: out of memory");
	} else {
		/* The init died without a word: SIGKILLed by us (timeout, cancel)
		 * or by the OOM killer. The runner knows about our kills. */
		ws = si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED ? si.si_status : SIGKILL;
		ws &= 0x7f; /* a "killed by signal" wait status */
		if (st.oom_kills == 0 && si.si_code == CLD_EXITED)
			return al_err_set(err, AL_ESANDBOX,
					  "process: sandbox init exited %d without a report",
					  si.si_status);
	}
	al_end_status(res, ws, &st, &sb->spec.limits, disk_full);
	/* The job's image, or the host's own files (read-only): PROTOCOL.md's "host" */
	{
		char image[128] = "host";

		if (sb->spec.image)
			al_image_hash(sb->conf, sb->spec.image, image, sizeof(image));
		if (al_result_add_info(res, "image", image))
			return al_err_set(err, AL_ENOMEM, "process: out of memory");
	}
	return 1;
}

static void proc_destroy(struct al_sandbox *sb)
{
	struct proc_sb *p = sb->priv;

	if (p->pidfd >= 0) {
		if (!p->exited)
			al_pidfd_kill_wait(p->pidfd, true);
		close(p->pidfd);
	}
	if (p->cg_made)
		al_cg_destroy(&p->cg, NULL);
	al_jobfs_destroy(&p->fs);
	al_closep(&p->code_fd);
	al_closep(&p->stdin_fd);
	al_closep(&p->spec_fd);
	al_closep(&p->report_rd);
	for (size_t i = 0; i < p->nbinds; i++)
		close(p->bind_fd[i]);
	p->nbinds = 0;
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
	/* a slot whose last job could have run in a warm interpreter gets
	 * one in each of its sandboxes (one that lacks it is made again) */
	for (unsigned k = 0; k < WARM_PER_SLOT; k++) {
		struct warm *w = warm_of(slot, k);

		if (!warm_alive(w) || (G.want[slot].py && G.warm_fd >= 0 &&
				       (!w->py || strcmp(w->image, G.want[slot].image))))
			warm_spawn(w, slot, G.want[slot].py, G.want[slot].image, NULL);
	}
}

static void proc_fini(void)
{
	char *slash;

	proc_free_globals();
	al_cg_release(&G.cg);
	rmdir(G.jobs_root); /* <state>/<worker>/process, then <state>/<worker> */
	slash = strrchr(G.jobs_root, '/');
	if (slash) {
		*slash = '\0';
		rmdir(G.jobs_root);
	}
}

/* A slot's jobs run as uid_base + slot; the worker (root) reaches their
 * directories. */
static void proc_slot_ids(const struct al_backend_conf *conf, unsigned slot, uid_t *job_uid,
			  uid_t *dir_uid)
{
	*job_uid = conf->uid_base + slot;
	*dir_uid = 0;
}

const struct al_backend_ops al_backend_process = {
    .name = "process",
    .caps = AL_CAPS_PROCESS,
    .priv_size = sizeof(struct proc_sb),
    .init = proc_init,
    .prepare = proc_prepare,
    .start = proc_start,
    .kill = proc_kill,
    .usage = proc_usage,
    .oom_kills = proc_oom_kills,
    .output = proc_output,
    .reap = proc_reap,
    .destroy = proc_destroy,
    .refill = proc_refill,
    .slot_ids = proc_slot_ids,
    .fini = proc_fini,
};
