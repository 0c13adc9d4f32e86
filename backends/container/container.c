/* container.c - the container backend: an OCI container per job, driven
 * through the runtime's command line (runc, crun or runsc).
 *
 * The job's bundle is <state>/<worker>/container/<slot>-<id>/: config.json
 * (written with jansson), stdout and stderr files, and work/, a tmpfs of the
 * job's disk limit holding its input files, owned by the container user's
 * host uid and bound on /work. The job runs as uid 1000 inside a user
 * namespace whose root is an unprivileged host range per slot, with pid,
 * network (loopback only; with egress one made here, where the worker's
 * proxy listens on 127.0.0.1:3128), ipc, uts, mount and cgroup namespaces, a
 * read-only root filesystem, no capabilities, noNewPrivileges, the same
 * system-call filter as the process backend, rlimits and masked /proc and
 * /sys paths. The runtime's cgroup (…/<name>/c) sits in one of ours
 * (airlock/<worker>/<name>) that holds the memory, pids and CPU limits for
 * the whole subtree and outlives the runtime's, so that its counters (OOM
 * kills, peak memory, CPU time) can be read after the runtime removed the
 * container; the bundle repeats the pids and CPU limits.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../common/log.h"
#include "../../proto/jbuild.h"
#include "../../proto/buf.h"
#include "../backend.h"
#include "../cgroup.h"
#include "../hostroot.h"
#include "../jobfs.h"
#include "../jobfs_layout.h"
#include "../jobspec.h"
#include "../netns.h"
#include "../seccomp.h"
#include "../endstatus.h"
#include "ctr.h"

/* Run the runtime rt (its root) with args, wait for it; 0 when it exited 0. */
static int runtime_do(const char *rt, const char *root, const char *const *args, int *status)
{
	const char *argv[16];
	int n = 0;

	argv[n++] = rt;
	argv[n++] = "--root";
	argv[n++] = root;
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return al_spawn_wait(argv, status);
}
static int ctr_init(const struct al_backend_conf *conf, struct al_err *err)
{
	const char *want = conf->oci_runtime;
	int rc, st;

	memset(&ctr_host, 0, sizeof(ctr_host));
	ctr_host.conf = conf;
	if (geteuid() != 0)
		return al_err_set(err, AL_ESANDBOX,
				  "container: needs root to drive the OCI runtime");
	if (conf->userns_base < 65536)
		return al_err_set(err, AL_ESANDBOX,
				  "container: --userns-base %u would map container users onto host "
				  "system ids; use 100000 or more",
				  conf->userns_base);
	ctr_host.shim_fd = ctr_host.exec_fd = -1;
	if ((rc = al_cg_detect(&ctr_host.cg, conf->worker_id, "container", err)) ||
	    (rc = al_cg_enable_subtree(&ctr_host.cg, err)))
		return al_err_wrap(err, "container");
	/* crun 1.8 refuses hybrid hosts (v1 controllers and a cgroup2 mount
	 * beside them): there runc is the default. */
	if (!want)
		want = ctr_host.cg.version == AL_CG_V1 ||
			       !al_find_exec("crun", ctr_host.runtime, sizeof(ctr_host.runtime))
			   ? "runc"
			   : "crun";
	if (!al_find_exec(want, ctr_host.runtime, sizeof(ctr_host.runtime)))
		return al_err_set(err, AL_ESANDBOX,
				  "container: OCI runtime %s not found (install runc or crun)",
				  want);
	snprintf(ctr_host.root, sizeof(ctr_host.root), "%s/%s/runtime", conf->state_dir,
		 conf->worker_id);
	snprintf(ctr_host.runsc_root, sizeof(ctr_host.runsc_root), "%s/%s/runtime-runsc",
		 conf->state_dir, conf->worker_id);
	snprintf(ctr_host.jobs, sizeof(ctr_host.jobs), "%s/%s/container", conf->state_dir,
		 conf->worker_id);
	snprintf(ctr_host.hostimage, sizeof(ctr_host.hostimage), "%s/%s/hostimage", conf->state_dir,
		 conf->worker_id);
	/* The container's root user (a host uid of the slot's range) must
	 * traverse to the image and the bundle: 0711 on the way there. */
	if (al_mkdir_p(ctr_host.jobs, 0711) || al_mkdir_p(ctr_host.root, 0700) ||
	    al_mkdir_p(ctr_host.runsc_root, 0700))
		return al_err_sys(err, "container: mkdir %s", ctr_host.root);
	{
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s/%s", conf->state_dir, conf->worker_id);
		chmod(dir, 0711);
		chmod(conf->state_dir, 0711);
	}
	{
		const char *args[] = {"list", NULL};

		if (runtime_do(ctr_host.runtime,
			       ctr_is_runsc(ctr_host.runtime) ? ctr_host.runsc_root : ctr_host.root,
			       args, &st))
			return al_err_set(err, AL_ESANDBOX,
					  "container: `%s list` failed (status %d)",
					  ctr_host.runtime, st);
	}
	/* the worker's default runtime is runsc: it must start here */
	if (ctr_is_runsc(ctr_host.runtime)) {
		struct ctr_rt rt;

		if ((rc = ctr_runtime_of(&(struct al_run_spec){0}, &rt, err)))
			return al_err_wrap(err, "container");
	}
	if ((rc = ctr_make_hostimage(err)))
		return rc;
	if ((ctr_host.shim_fd = al_open_helper(conf->helper_dir, "airlock-oci-shim", err)) < 0)
		return al_err_wrap(err, "container: shim");
	if ((ctr_host.exec_fd = al_open_helper(conf->helper_dir, "airlock-exec", err)) < 0 ||
	    (rc = al_find_helper(conf->helper_dir, "airlock-exec", ctr_host.exec_path,
				 sizeof(ctr_host.exec_path), err)))
		return al_err_wrap(err, "container: exec helper");
	/* never one of the descriptors a shim's are put on (0-5) */
	for (int *fd = &ctr_host.shim_fd; fd;
	     fd = fd == &ctr_host.shim_fd ? &ctr_host.exec_fd : NULL)
		if (*fd < 10) {
			int hi = fcntl(*fd, F_DUPFD_CLOEXEC, 10);

			close(*fd);
			if ((*fd = hi) < 0)
				return al_err_sys(err, "container: dup a helper's descriptor");
		}
	if ((rc = ctr_warm_init(conf, &al_backend_container, err)))
		return rc;
	ctr_host.ready = true;
	return AL_OK;
}

static void ctr_teardown(struct ctr_sb *c);

/* A job's own container, made now (ctr_make) with the job's argv and
 * environment. */
static int make_cold(struct al_sandbox *sb, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	struct ctr_argv argv = {0};
	int rc;

	snprintf(c->name, sizeof(c->name), "al-%s-%u-%s", ctr_host.conf->worker_id, sb->spec.slot,
		 sb->spec.job->id);
	/* the proxy's address, for the job's environment: ctr_make makes
	 * the namespace it listens in, or fails */
	if (sb->spec.network == AL_NET_EGRESS)
		sb->spec.proxy_url = AL_EGRESS_PROXY_URL;
	if (al_argv_env(&sb->spec, c->rt.gvisor ? CTR_GV_SCRIPT : "/proc/self/fd/3", &argv.strings,
			&argv.argc, &argv.envc)) {
		al_buf_free(&argv.strings);
		return al_err_set(err, AL_ENOMEM, "container: out of memory");
	}
	rc = ctr_make(sb, &argv, err);
	al_buf_free(&argv.strings);
	return rc;
}

/* A job's container: the slot's warm one when it fits (warm.c), else its
 * own, made now. */
static int ctr_prepare(struct al_sandbox *sb, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	int rc;

	ctr_sb_init(c);
	if (!ctr_host.ready)
		return al_err_set(err, AL_ESANDBOX, "container: backend not initialised");
	if ((rc = ctr_runtime_of(&sb->spec, &c->rt, err)))
		return al_err_wrap(err, "container");
	if ((rc = ctr_warm_take(sb, err)))
		return rc < 0 ? rc : AL_OK;
	return make_cold(sb, err);
}

/* The job's container starts now; a warm one (warm.c) gets its job, and
 * one gone before that is made again, cold. */
static int ctr_start(struct al_sandbox *sb, struct al_watch *w, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	int rc;

	if (c->warm && ctr_warm_go(sb, err) < 0) {
		al_log("warn", "warm_discarded", "slot=%u error=\"%s\" note=\"retrying cold\"",
		       sb->spec.slot, err->msg);
		*err = (struct al_err){0};
		ctr_teardown(c);
		memset(c, 0, sizeof(*c));
		ctr_sb_init(c);
		if ((rc = ctr_runtime_of(&sb->spec, &c->rt, err)))
			return al_err_wrap(err, "container");
		if ((rc = make_cold(sb, err)))
			return rc;
	}
	if (!c->warm) {
		const int src[4] = {c->stdin_fd, c->fs.out_fd, c->fs.err_fd,
				    c->code_fd >= 0 ? c->code_fd : c->stdin_fd};

		if ((rc = ctr_spawn_shim(c, src, err)))
			return rc;
	}
	w->fds[w->nfds++] = c->pidfd;
	w->egress_fd = c->egress_fd; /* the worker's now */
	w->egress_unix_clients = c->rt.gvisor;
	c->egress_fd = -1;
	w->session_fd = c->session_fd;
	c->session_fd = -1;
	return AL_OK;
}

/* SIGKILL every task of the container's cgroup (its init first dies, then
 * the runtime returns). */
static void kill_tasks(struct ctr_sb *c)
{
	for (int i = 0; i < c->cg.ndirs; i++) {
		char path[PATH_MAX + 32], buf[4096];

		snprintf(path, sizeof(path), "%s/cgroup.procs", c->cg.dirs[i]);
		al_read_text(path, buf, sizeof(buf));
		for (char *s = buf; *s;) {
			char *end;
			long pid = strtol(s, &end, 10);

			if (end == s)
				break;
			kill((pid_t)pid, SIGKILL);
			s = end + (*end == '\n');
		}
	}
}

static int ctr_kill(struct al_sandbox *sb, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;

	(void)err;
	if (c->exited)
		return AL_OK;
	kill_tasks(c);
	return AL_OK;
}

/* The runtime could not start c's container ("E<its wait status>" from the
 * shim, or nothing: the shim died): the sandbox's failure, not the job's,
 * said with the runtime's name, its step and its own words (its log's
 * message, else its first line on the job's stderr, where no job wrote:
 * none ran). */
static int runtime_failed(struct ctr_sb *c, const char *report, struct al_err *err)
{
	char path[PATH_MAX + 16], buf[2048], how[48] = "was lost (its shim died)", words[400] = "";
	const char *m = NULL,
		   *name = strrchr(c->rt.path, '/') ? strrchr(c->rt.path, '/') + 1 : c->rt.path;
	ssize_t n;
	int ws;

	snprintf(path, sizeof(path), "%s/runtime.log", c->fs.dir);
	al_read_text(path, buf, sizeof(buf));
	/* its last message: runsc logs more than its failure */
	for (const char *q = buf; (q = strstr(q, "\"msg\":\"")); q++)
		m = q;
	if (m) { /* the JSON string, its escapes undone, up to its closing quote */
		size_t k = 0;

		for (const char *q = m + 7; *q && *q != '"' && k + 1 < sizeof(words); q++) {
			char ch = *q;

			if (ch == '\\' && q[1]) { /* \" and \\ as themselves, \n a space */
				ch = *++q;
				ch = ch == 'n' || ch == 't' ? ' ' : ch;
			}
			words[k++] = ch;
		}
		words[k] = '\0';
	} else if (c->fs.err_fd >= 0 && (n = pread(c->fs.err_fd, buf, sizeof(buf) - 1, 0)) > 0) {
		buf[n] = '\0';
		m = buf + strspn(buf, "\n");
		snprintf(words, sizeof(words), "%.*s", (int)strcspn(m, "\n"), m);
	}
	if (report[0] == 'E' && sscanf(report + 1, "%d", &ws) == 1) {
		if (ws < 0)
			snprintf(how, sizeof(how), "could not be started");
		else if (WIFSIGNALED(ws))
			snprintf(how, sizeof(how), "was killed by signal %d", WTERMSIG(ws));
		else
			snprintf(how, sizeof(how), "exited %d", WEXITSTATUS(ws));
	}
	return al_err_set(err, AL_ESANDBOX,
			  "container: %s (%s) %s at its run step (create and start): %.300s", name,
			  c->rt.path, how, words[0] ? words : "no message");
}

static int ctr_reap(struct al_sandbox *sb, struct al_result *res, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	struct al_cg_stats st;
	siginfo_t si = {0};
	bool disk_full = false;
	int rc, ws;

	if (waitid(P_PIDFD, (id_t)c->pidfd, &si, WEXITED | WNOHANG) < 0)
		return al_err_sys(err, "container: waitid");
	if (si.si_pid == 0)
		return 0;
	c->exited = true;
	memset(&st, 0, sizeof(st));
	if ((rc = al_jobfs_collect(&c->fs, sb->spec.job, &sb->spec.limits,
				   sb->conf->collect_max_bytes, res, &disk_full, err)))
		return al_err_wrap(err, "container");
	{
		char report[160];
		ssize_t n = read(c->report_rd, report, sizeof(report) - 1);

		report[n > 0 ? n : 0] = '\0';
		if (report[0] != 'X')
			return runtime_failed(c, report, err);
		{
			unsigned long long cpu = 0, peak = 0, oom = 0;
			long rss = 0;
			int hit = 0;

			if (sscanf(report, "X%d C%llu M%llu O%llu H%d R%ld", &ws, &cpu, &peak, &oom,
				   &hit, &rss) < 5)
				return al_err_set(err, AL_ESANDBOX,
						  "container: bad report from the shim: %.60s",
						  report);
			/* a warm container's start-up is not the job's */
			ctr_warm_base(c);
			cpu = cpu > c->cpu_base_ns ? cpu - c->cpu_base_ns : 0;
			st = (struct al_cg_stats){cpu, peak, oom, hit != 0};
			res->max_rss_bytes = rss > 0 ? (uint64_t)rss * 1024 : 0;
		}
	}
	ctr_end_status(&c->rt, &ws);
	al_end_status(res, ws, &st, &sb->spec.limits, disk_full);
	{
		char image[128];

		if (sb->spec.image)
			al_image_hash(sb->conf, sb->spec.image, image, sizeof(image));
		else
			snprintf(image, sizeof(image), "host");
		if (al_result_add_info(res, "runtime", c->rt.path) ||
		    (c->rt.gvisor && al_result_add_info(res, "platform", c->rt.platform)) ||
		    al_result_add_info(res, "image", image) ||
		    /* a python job says which interpreter ran it, as on the process tier */
		    (sb->spec.job->runtime == AL_RUNTIME_PYTHON &&
		     al_result_add_info(res, "interpreter", c->warm ? "warm" : "cold")))
			return al_err_set(err, AL_ENOMEM, "container: out of memory");
	}
	return 1;
}

static void ctr_teardown(struct ctr_sb *c)
{
	/* a warm interpreter still waiting for its job ends at this EOF */
	al_closep(&c->ctl);
	if (c->pidfd >= 0) {
		if (!c->exited) {
			siginfo_t si;

			kill_tasks(c);
			waitid(P_PIDFD, (id_t)c->pidfd, &si, WEXITED);
		}
		close(c->pidfd);
		if (!c->exited && c->name[0] && c->rt.path) {
			/* the shim did not get to remove it */
			const char *args[] = {"delete", "--force", c->name, NULL};

			runtime_do(c->rt.path, c->rt.root, args, NULL);
		}
	}
	al_closep(&c->report_rd);
	c->report_rd = -1;
	if (c->cg_made) /* the runtime's cgroup, in every hierarchy it made it in */
		al_cg_remove_everywhere(&ctr_host.cg, c->name);
	if (c->rootfs[0] && umount2(c->rootfs, MNT_DETACH) == 0)
		rmdir(c->rootfs);
	c->rootfs[0] = '\0';
	al_jobfs_destroy(&c->fs);
	al_closep(&c->code_fd);
	al_closep(&c->stdin_fd);
	al_closep(&c->netns_fd);
	al_closep(&c->egress_fd);
	al_closep(&c->session_fd);
	al_closep(&c->ctl);
	al_closep(&c->spec_fd);
	al_closep(&c->warm_lfd);
	c->pidfd = c->code_fd = c->stdin_fd = c->netns_fd = c->egress_fd = c->ctl = c->spec_fd =
	    c->warm_lfd = -1;
	c->cg_made = false;
}

static void ctr_destroy(struct al_sandbox *sb)
{
	ctr_teardown(sb->priv);
}

/* What a crashed run left: containers (the runtime's state names them
 * al-<worker>-…), their cgroups, their bundles. */
static int ctr_sweep(const struct al_backend_conf *conf, struct al_err *err)
{
	char root[PATH_MAX], prefix[96];
	struct al_cg_sys sys;
	DIR *d;
	struct dirent *de;
	int rc;

	snprintf(prefix, sizeof(prefix), "al-%s-", conf->worker_id);
	/* runc's and crun's state: a directory per container; runsc's: files
	 * NAME_sandbox:NAME.state (and .lock) */
	for (int gv = 0; gv < 2; gv++) {
		char runsc[PATH_MAX];
		const char *rt = ctr_host.runtime;

		if (gv && !al_find_exec("runsc", runsc, sizeof(runsc)))
			break;
		if (gv)
			rt = runsc;
		else if (ctr_is_runsc(rt))
			continue;
		d = opendir(gv ? ctr_host.runsc_root : ctr_host.root);
		while (d && (de = readdir(d))) {
			char id[256];
			const char *args[] = {"delete", "--force", id, NULL};
			const char *end = gv ? strstr(de->d_name, "_sandbox:") : NULL;

			if (strncmp(de->d_name, prefix, strlen(prefix)) || (gv && !end) ||
			    (gv && strstr(de->d_name, ".lock")))
				continue;
			snprintf(id, sizeof(id), "%.*s",
				 (int)(end ? (size_t)(end - de->d_name) : strlen(de->d_name)),
				 de->d_name);
			runtime_do(rt, gv ? ctr_host.runsc_root : ctr_host.root, args, NULL);
		}
		if (d)
			closedir(d);
	}
	if (al_cg_detect(&sys, conf->worker_id, "container", NULL) == AL_OK)
		al_cg_sweep(&sys, NULL);
	snprintf(root, sizeof(root), "%s/%s/container", conf->state_dir, conf->worker_id);
	rc = al_jobfs_sweep(root, err);
	return rc;
}

static void ctr_fini(void)
{
	ctr_warm_fini(); /* before the host image they bind */
	if (ctr_host.hostimage[0] && umount2(ctr_host.hostimage, MNT_DETACH) == 0)
		rmdir(ctr_host.hostimage);
	al_closep(&ctr_host.shim_fd);
	al_closep(&ctr_host.exec_fd);
	ctr_host.shim_fd = ctr_host.exec_fd = -1;
	al_cg_release(&ctr_host.cg);
	ctr_host.ready = false;
}

/* The runtime's cgroup holds every process of the container; before the
 * runtime made it (or after it removed it) it reads as nothing used. */
static int ctr_usage(struct al_sandbox *sb, struct al_usage *u)
{
	struct ctr_sb *c = sb->priv;

	ctr_warm_base(c);
	u->cpu_ns = c->cg_made ? al_cg_cpu_ns(&c->cg) : 0;
	u->cpu_ns = u->cpu_ns > c->cpu_base_ns ? u->cpu_ns - c->cpu_base_ns : 0;
	u->stdout_bytes = al_fd_size(c->fs.out_fd);
	u->stderr_bytes = al_fd_size(c->fs.err_fd);
	return 0;
}

static int ctr_oom_kills(struct al_sandbox *sb, uint64_t *n)
{
	struct ctr_sb *c = sb->priv;
	struct al_cg_stats st = {0};

	if (!c->cg_made || al_cg_stats(&c->cg, &st))
		return -1;
	*n = st.oom_kills;
	return 0;
}

/* Live output: what the job has written to its memfds so far. */
static ssize_t ctr_output(struct al_sandbox *sb, int stream, uint64_t off, void *buf, size_t cap)
{
	struct ctr_sb *c = sb->priv;

	return al_jobfs_output(&c->fs, stream, off, buf, cap);
}

/* A slot's jobs are uid CTR_UID of its user namespace; the runtime, as the
 * namespace's root, must own the directories it mounts from. */
static void ctr_slot_ids(const struct al_backend_conf *conf, unsigned slot, uid_t *job_uid,
			 uid_t *dir_uid)
{
	*dir_uid = conf->userns_base + slot * CTR_ID_RANGE;
	*job_uid = *dir_uid + CTR_UID;
}

const struct al_backend_ops al_backend_container = {
    .name = "container",
    .caps = AL_CAPS_CONTAINER,
    .priv_size = sizeof(struct ctr_sb),
    .init = ctr_init,
    .sweep = ctr_sweep,
    .prepare = ctr_prepare,
    .start = ctr_start,
    .kill = ctr_kill,
    .usage = ctr_usage,
    .oom_kills = ctr_oom_kills,
    .output = ctr_output,
    .reap = ctr_reap,
    .destroy = ctr_destroy,
    .refill = ctr_warm_refill,
    .slot_ids = ctr_slot_ids,
    .fini = ctr_fini,
    .runtime_ok = ctr_runtime_ok,
    .snapshot = ctr_snapshot,
    .snapshot_ok = ctr_snapshot_ok,
    .snapshot_room = ctr_snapshot_room,
};
