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

static struct {
	const struct al_backend_conf *conf;
	struct al_cg_sys cg;
	char runtime[PATH_MAX];	  /* the OCI runtime's path */
	char root[PATH_MAX];	  /* the runtime's state (--root) */
	char jobs[PATH_MAX];	  /* bundles */
	char hostimage[PATH_MAX]; /* the fast image: mount points for host /usr, /etc */
	int shim_fd;		  /* airlock-oci-shim, opened at start-up */
	int exec_fd;		  /* airlock-exec, every job's first program */
	bool ready;
} G;

/* Run the runtime with args, wait for it; 0 when it exited 0. */
static int runtime_do(const char *const *args, int *status)
{
	const char *argv[16];
	int n = 0;

	argv[n++] = G.runtime;
	argv[n++] = "--root";
	argv[n++] = G.root;
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return al_spawn_wait(argv, status);
}

/* The fast image (no image in the policy): a root of mount points for what
 * of the host a program needs (hostroot.h), bound read-only by each bundle,
 * and an /etc of its own: generated passwd, group, hosts, nsswitch.conf and
 * the host's loader cache, alternatives, certificates... never the host's
 * whole /etc. */
#define HOST_BINDS_MAX 32

static struct {
	char src[64], dst[64];
} host_binds[HOST_BINDS_MAX];
static size_t nhost_binds;

/* Mirror host path src (absolute) at dst inside the image: a symlink as a
 * symlink, a directory or file as a mount point bound read-only. */
static int mirror(const char *src, const char *dst, struct al_err *err)
{
	char p[PATH_MAX + 80], target[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (lstat(src, &st))
		return AL_OK; /* missing on this host */
	snprintf(p, sizeof(p), "%s%s", G.hostimage, dst);
	if (S_ISLNK(st.st_mode)) {
		if ((n = readlink(src, target, sizeof(target) - 1)) < 0)
			return al_err_sys(err, "container: readlink %s", src);
		target[n] = '\0';
		unlink(p);
		if (symlink(target, p))
			return al_err_sys(err, "container: symlink %s", p);
		return AL_OK;
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return AL_OK;
	if (S_ISDIR(st.st_mode) ? mkdir(p, 0755) && errno != EEXIST
				: close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)))
		return al_err_sys(err, "container: mount point %s", p);
	if (nhost_binds == HOST_BINDS_MAX)
		return al_err_set(err, AL_ESANDBOX, "container: too many host binds");
	snprintf(host_binds[nhost_binds].src, sizeof(host_binds[0].src), "%s", src);
	snprintf(host_binds[nhost_binds].dst, sizeof(host_binds[0].dst), "%s", dst);
	nhost_binds++;
	return AL_OK;
}

static int write_text(const char *name, const char *text, struct al_err *err)
{
	char p[PATH_MAX + 32];
	FILE *f;

	snprintf(p, sizeof(p), "%s/etc/%s", G.hostimage, name);
	if (!(f = fopen(p, "we")) || fputs(text, f) < 0 || fclose(f))
		return al_err_sys(err, "container: write %s", p);
	return AL_OK;
}

static int make_hostimage(struct al_err *err)
{
	static const char *const dirs[] = {"etc", "proc", "dev", "sys", "tmp", "work"};
	static const char *const top[] = AL_HOST_TOP, *const etc[] = AL_HOST_ETC;
	char p[PATH_MAX + 32], text[512];
	int rc;

	nhost_binds = 0;
	/* A tmpfs of its own, so that the container's mountinfo shows "/" as
	 * its root, not a host path (the state dir, the worker id); what an
	 * earlier run of this id left there goes first. */
	umount2(G.hostimage, MNT_DETACH);
	if (al_mkdir_p(G.hostimage, 0755) ||
	    mount("airlock-image", G.hostimage, "tmpfs", MS_NOSUID | MS_NODEV,
		  "size=1m,nr_inodes=4096,mode=0755"))
		return al_err_sys(err, "container: mount a tmpfs on %s", G.hostimage);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", G.hostimage, dirs[i]);
		if (mkdir(p, 0755) && errno != EEXIST)
			return al_err_sys(err, "container: mkdir %s", p);
	}
	for (size_t i = 0; top[i]; i++) {
		char src[64];

		snprintf(src, sizeof(src), "/%s", top[i]);
		if ((rc = mirror(src, src, err)))
			return rc;
	}
	for (size_t i = 0; etc[i]; i++) {
		char src[64];

		snprintf(src, sizeof(src), "/etc/%s", etc[i]);
		if ((rc = mirror(src, src, err)))
			return rc;
	}
	snprintf(text, sizeof(text), AL_ETC_PASSWD_FMT, CTR_UID, CTR_UID, "/work");
	if ((rc = write_text("passwd", text, err)))
		return rc;
	snprintf(text, sizeof(text), AL_ETC_GROUP_FMT, CTR_UID);
	if ((rc = write_text("group", text, err)) ||
	    (rc = write_text("hosts", AL_ETC_HOSTS, err)) ||
	    (rc = write_text("hostname", AL_ETC_HOSTNAME, err)) ||
	    (rc = write_text("nsswitch.conf", AL_ETC_NSSWITCH, err)))
		return rc;
	return AL_OK;
}

static int ctr_init(const struct al_backend_conf *conf, struct al_err *err)
{
	const char *want = conf->oci_runtime;
	int rc, st;

	memset(&G, 0, sizeof(G));
	G.conf = conf;
	if (geteuid() != 0)
		return al_err_set(err, AL_ESANDBOX,
				  "container: needs root to drive the OCI runtime");
	if (conf->userns_base < 65536)
		return al_err_set(err, AL_ESANDBOX,
				  "container: --userns-base %u would map container users onto host "
				  "system ids; use 100000 or more",
				  conf->userns_base);
	G.shim_fd = G.exec_fd = -1;
	if ((rc = al_cg_detect(&G.cg, conf->worker_id, "container", err)) ||
	    (rc = al_cg_enable_subtree(&G.cg, err)))
		return al_err_wrap(err, "container");
	/* crun 1.8 refuses hybrid hosts (v1 controllers and a cgroup2 mount
	 * beside them): there runc is the default. */
	if (!want)
		want =
		    G.cg.version == AL_CG_V1 || !al_find_exec("crun", G.runtime, sizeof(G.runtime))
			? "runc"
			: "crun";
	if (!al_find_exec(want, G.runtime, sizeof(G.runtime)))
		return al_err_set(err, AL_ESANDBOX,
				  "container: OCI runtime %s not found (install runc or crun)",
				  want);
	snprintf(G.root, sizeof(G.root), "%s/%s/runtime", conf->state_dir, conf->worker_id);
	snprintf(G.jobs, sizeof(G.jobs), "%s/%s/container", conf->state_dir, conf->worker_id);
	snprintf(G.hostimage, sizeof(G.hostimage), "%s/%s/hostimage", conf->state_dir,
		 conf->worker_id);
	/* The container's root user (a host uid of the slot's range) must
	 * traverse to the image and the bundle: 0711 on the way there. */
	if (al_mkdir_p(G.jobs, 0711) || al_mkdir_p(G.root, 0700))
		return al_err_sys(err, "container: mkdir %s", G.root);
	{
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s/%s", conf->state_dir, conf->worker_id);
		chmod(dir, 0711);
		chmod(conf->state_dir, 0711);
	}
	{
		const char *args[] = {"list", NULL};

		if (runtime_do(args, &st))
			return al_err_set(err, AL_ESANDBOX,
					  "container: `%s list` failed (status %d)", G.runtime, st);
	}
	if ((rc = make_hostimage(err)))
		return rc;
	if ((G.shim_fd = al_open_helper(conf->helper_dir, "airlock-oci-shim", err)) < 0)
		return al_err_wrap(err, "container: shim");
	if ((G.exec_fd = al_open_helper(conf->helper_dir, "airlock-exec", err)) < 0)
		return al_err_wrap(err, "container: exec helper");
	/* never one of the descriptors a shim's are put on (0-5) */
	for (int *fd = &G.shim_fd; fd; fd = fd == &G.shim_fd ? &G.exec_fd : NULL)
		if (*fd < 10) {
			int hi = fcntl(*fd, F_DUPFD_CLOEXEC, 10);

			close(*fd);
			if ((*fd = hi) < 0)
				return al_err_sys(err, "container: dup a helper's descriptor");
		}
	if ((rc = ctr_warm_init(conf, err)))
		return rc;
	G.ready = true;
	return AL_OK;
}

/* ---- the bundle ---- */

/* jansson calls of the bundle being built: a failure (out of memory) marks
 * it, and a marked bundle is refused whole. One worker thread builds one
 * bundle at a time. */
static struct al_jb bundle;

static void jset(json_t *obj, const char *key, json_t *v)
{
	al_jb_set(&bundle, obj, key, v);
}

static void jadd(json_t *arr, json_t *v)
{
	al_jb_add(&bundle, arr, v);
}

static json_t *mount_of(const char *dst, const char *type, const char *src,
			const char *const *opts);

/* The fast image's read-only binds of the host (make_hostimage). */
static void add_host_mounts(json_t *mounts, const char *const *ro_bind)
{
	for (size_t i = 0; i < nhost_binds; i++)
		jadd(mounts, mount_of(host_binds[i].dst, "none", host_binds[i].src, ro_bind));
}

static json_t *strs(const char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; v[i]; i++)
		jadd(a, json_string(v[i]));
	return a;
}

static json_t *mount_of(const char *dst, const char *type, const char *src, const char *const *opts)
{
	json_t *m = json_object();

	jset(m, "destination", json_string(dst));
	jset(m, "type", json_string(type));
	jset(m, "source", json_string(src));
	jset(m, "options", strs(opts));
	return m;
}

static json_t *idmap(uint32_t host)
{
	json_t *a = json_array(), *m = json_object();

	jset(m, "containerID", json_integer(0));
	jset(m, "hostID", json_integer(host));
	jset(m, "size", json_integer(CTR_ID_RANGE));
	jadd(a, m);
	return a;
}

static json_t *rlimit(const char *type, uint64_t soft, uint64_t hard)
{
	json_t *r = json_object();

	jset(r, "type", json_string(type));
	jset(r, "hard", json_integer((json_int_t)hard));
	jset(r, "soft", json_integer((json_int_t)soft));
	return r;
}

/* socket() of family fam refused with EPERM */
static json_t *socket_refused(int fam, const char *op)
{
	return json_pack("{s:[s], s:s, s:i, s:[{s:i, s:i, s:s}]}", "names", "socket", "action",
			 "SCMP_ACT_ERRNO", "errnoRet", EPERM, "args", "index", 0, "value", fam,
			 "op", op);
}

/* The same refusals as the process backend's filter, in OCI form; with
 * inet (network egress), socket() of AF_INET and AF_INET6 too, as there. */
static json_t *seccomp_profile(bool inet)
{
	json_t *sc = json_object(), *calls = json_array(), *names = json_array(), *r;
	static const char *const arches[] = {"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32",
					     NULL};

	jset(sc, "defaultAction", json_string("SCMP_ACT_ALLOW"));
	jset(sc, "architectures", strs(arches));
	for (size_t i = 0; al_seccomp_denied[i]; i++)
		jadd(names, json_string(al_seccomp_denied[i]));
	r = json_object();
	jset(r, "names", names);
	jset(r, "action", json_string("SCMP_ACT_ERRNO"));
	jset(r, "errnoRet", json_integer(EPERM));
	jadd(calls, r);
	/* socket(): AF_UNIX only, or with inet each other family refused by name
	 * (one comparison per rule) and every number past the last */
	if (!inet)
		jadd(calls, socket_refused(AF_UNIX, "SCMP_CMP_NE"));
	for (int fam = 0; inet && fam < AF_MAX; fam++)
		if (fam != AF_UNIX && fam != AF_INET && fam != AF_INET6)
			jadd(calls, socket_refused(fam, "SCMP_CMP_EQ"));
	if (inet)
		jadd(calls, socket_refused(AF_MAX, "SCMP_CMP_GE"));
	/* clone() with any namespace bit */
	for (int bit = 0; bit < 64; bit++) {
		unsigned long b = 1ul << bit;

		if (!(AL_SECCOMP_NS_FLAGS & b))
			continue;
		r = json_pack("{s:[s], s:s, s:i, s:[{s:i, s:I, s:I, s:s}]}", "names", "clone",
			      "action", "SCMP_ACT_ERRNO", "errnoRet", EPERM, "args", "index", 0,
			      "value", (json_int_t)b, "valueTwo", (json_int_t)b, "op",
			      "SCMP_CMP_MASKED_EQ");
		jadd(calls, r);
	}
	r = json_pack("{s:[s], s:s, s:i}", "names", "clone3", "action", "SCMP_ACT_ERRNO",
		      "errnoRet", ENOSYS);
	jadd(calls, r);
	jset(sc, "syscalls", calls);
	return sc;
}

/* Whether the runtime may execute prog, the job's first program, itself:
 * only the backend's own interpreter of a python or sh job (never a
 * program the job names), in a root without the tier's binds (nothing
 * covers it), where it is an executable ELF file (openat2 resolving in
 * that root, as the runtime will). Its exec then cannot fail on the job's
 * input, and airlock-exec before it (one exec more: 0.4 ms of a print(1),
 * tests/bench/README.md) is not needed; otherwise airlock-exec runs it,
 * and its absence is the job's exit 127. The host image resolves in the
 * host's "/": it mirrors the host's paths (symlinks as symlinks,
 * directories bound, mirror() above). */
static bool direct_exec(const struct al_sandbox *sb, const char *prog)
{
	const struct ctr_sb *c = sb->priv;
	struct open_how how = {.flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	cleanup_close int root = -1, fd = -1;
	struct stat st;
	char magic[4];

	if ((sb->spec.job->runtime != AL_RUNTIME_PYTHON &&
	     sb->spec.job->runtime != AL_RUNTIME_SH) ||
	    sb->spec.nbinds || prog[0] != '/' ||
	    (root = open(c->image[0] ? c->image : "/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (fd = (int)syscall(SYS_openat2, root, prog + 1, &how, sizeof(how))) < 0 ||
	    fstat(fd, &st))
		return false;
	/* the job's uid is no owner or group of an image's file: others' x */
	return S_ISREG(st.st_mode) && (st.st_mode & S_IXOTH) &&
	       pread(fd, magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) &&
	       !memcmp(magic, "\177ELF", 4);
}

/* The bundle's process: the job's argv (behind airlock-exec unless the
 * runtime executes it directly), its environment, no capabilities, the
 * rlimits. */
static json_t *bundle_process(const struct al_sandbox *sb, const struct al_buf *strings,
			      uint32_t argc, uint32_t envc)
{
	const struct al_limits *l = &sb->spec.limits;
	const struct ctr_sb *c = sb->priv;
	/* as the process backend: the cgroup is the memory limit, the
	 * file-size limit is the disk limit, SIGXCPU at the CPU limit */
	uint64_t fsize = al_fsize_limit(l), cpu = (l->cpu_ms + 999) / 1000;
	json_t *process = json_object(), *argv, *env, *rl;
	const char *p = strings->data;

	jset(process, "terminal", json_false());
	jset(process, "user",
	     json_pack("{s:i, s:i, s:[i]}", "uid", CTR_UID, "gid", CTR_UID, "additionalGids",
		       CTR_UID));
	/* the first program is airlock-exec (fd 4 in the container), so that
	 * a job's missing or unexecutable program is the job's exit 127/126;
	 * or the job's interpreter itself (direct_exec) */
	argv = c->direct ? json_array() : json_pack("[s]", "/proc/self/fd/4");
	env = json_array();
	for (uint32_t i = 0; i < argc + envc; i++, p += strlen(p) + 1)
		jadd(i < argc ? argv : env, json_string(p)); /* HOME: /work (jobspec.c) */
	jset(process, "args", argv);
	jset(process, "env", env);
	jset(process, "cwd", json_string("/work"));
	jset(process, "capabilities",
	     json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective", "inheritable",
		       "permitted", "ambient"));
	jset(process, "noNewPrivileges", json_true());
	rl = json_array();
	jadd(rl,
	     rlimit("RLIMIT_AS", l->memory_bytes + (1ull << 30), l->memory_bytes + (1ull << 30)));
	/* a warm interpreter sets the job's own when the job comes (the
	 * start-up's CPU seconds added, as the process tier's), lowering this
	 * hard limit: the CPU limit is no part of a warm container's shape */
	jadd(rl, c->warm ? rlimit("RLIMIT_CPU", CTR_WARM_CPU_S, CTR_WARM_CPU_S)
			 : rlimit("RLIMIT_CPU", cpu, cpu + 1));
	jadd(rl, rlimit("RLIMIT_FSIZE", fsize, fsize));
	jadd(rl, rlimit("RLIMIT_NOFILE", sb->conf->nofile, sb->conf->nofile));
	jadd(rl, rlimit("RLIMIT_CORE", 0, 0));
	jset(process, "rlimits", rl);
	return process;
}

/* The bundle's mounts: /proc, a minimal /dev, a fresh sysfs, the host image's
 * read-only binds, the tier's binds, and the job's one tmpfs. */
static json_t *bundle_mounts(const struct al_sandbox *sb)
{
	const struct ctr_sb *c = sb->priv;
	static const char *const ro_bind[] = {"rbind", "ro", "nosuid", "nodev", NULL};
	static const char *const rw_bind[] = {"rbind", "rw", "nosuid", "nodev", NULL};
	static const char *const proc_opts[] = {"nosuid", "noexec", "nodev", NULL};
	static const char *const dev_opts[] = {"nosuid", "strictatime", "mode=755", "size=65536k",
					       NULL};
	static const char *const pts_opts[] = {"nosuid",	"noexec",    "newinstance",
					       "ptmxmode=0666", "mode=0620", NULL};
	static const char *const sys_opts[] = {"nosuid", "noexec", "nodev", "ro", NULL};
	static const char *const sys_tmpfs[] = {"nosuid", "noexec", "nodev", "ro", "size=4k", NULL};
	static const char *const shm_bind[] = {"rbind", "rw", "nosuid", "nodev", "noexec", NULL};
	json_t *mounts = json_array();
	char path[PATH_MAX + 16];

	jadd(mounts, mount_of("/proc", "proc", "proc", proc_opts));
	jadd(mounts, mount_of("/dev", "tmpfs", "tmpfs", dev_opts));
	jadd(mounts, mount_of("/dev/pts", "devpts", "devpts", pts_opts));
	/* a fresh sysfs of the container's network namespace: no cgroup tree
	 * under it (nothing mounted on /sys/fs/cgroup) */
	if (c->netns_fd < 0)
		jadd(mounts, mount_of("/sys", "sysfs", "sysfs", sys_opts));
	else /* the namespace is the worker's (egress, a session), not the
	      * container's: a sysfs there is refused, and runc's fallback
	      * binds the host's */
		jadd(mounts, mount_of("/sys", "tmpfs", "tmpfs", sys_tmpfs));
	if (!c->image[0])
		add_host_mounts(mounts, ro_bind);
	/* the tier's binds, read-only at the same place */
	for (size_t i = 0; i < sb->spec.nbinds; i++)
		jadd(mounts, mount_of(sb->spec.binds[i], "none", sb->spec.binds[i], ro_bind));
	/* One budget: /work, /tmp and /dev/shm are directories of the job's
	 * tmpfs (jobfs_layout.h). */
	if (sb->spec.grade_tree) {
		/* a grading job's step: its build tree on /work (writable for the
		 * build only), its own work dir (HOME, a test's files) on /tmp */
		jadd(mounts, mount_of("/work", "none", sb->spec.grade_tree,
				      sb->spec.grade_build ? rw_bind : ro_bind));
		jadd(mounts, mount_of("/tmp", "none", c->fs.home, rw_bind));
	} else {
		jadd(mounts, mount_of("/work", "none", c->fs.home, rw_bind));
		snprintf(path, sizeof(path), "%s/" AL_JOBFS_TMP, c->fs.work);
		jadd(mounts, mount_of("/tmp", "none", path, rw_bind));
	}
	snprintf(path, sizeof(path), "%s/" AL_JOBFS_SHM, c->fs.work);
	jadd(mounts, mount_of("/dev/shm", "none", path, shm_bind));
	/* the CPUs it is shown, as on every tier (write_bundle wrote the file) */
	if (al_job_cpus(sb->spec.cpu_millis)) {
		snprintf(path, sizeof(path), "%s/cpu-online", c->fs.work);
		jadd(mounts, mount_of("/sys/devices/system/cpu/online", "none", path, ro_bind));
	}
	return mounts;
}

/* The bundle's linux section: namespaces, id maps, cgroup limits, masked
 * paths, the seccomp profile. */
static json_t *bundle_linux(const struct al_sandbox *sb)
{
	const struct ctr_sb *c = sb->priv;
	const struct al_limits *l = &sb->spec.limits;
	uint32_t host_root = sb->conf->userns_base + sb->spec.slot * CTR_ID_RANGE;
	static const char *const masked[] = {"/proc/acpi",
					     "/proc/asound",
					     "/proc/kcore",
					     "/proc/keys",
					     "/proc/latency_stats",
					     "/proc/timer_list",
					     "/proc/timer_stats",
					     "/proc/sched_debug",
					     "/sys/firmware",
					     "/proc/scsi",
					     NULL};
	static const char *const readonly[] = {
	    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", NULL};
	json_t *linux_ = json_object(), *res = json_object(), *ns;
	char cgpath[PATH_MAX], netns[64];

	ns = json_pack("[{s:s},{s:s},{s:s},{s:s},{s:s},{s:s}]", "type", "pid", "type", "ipc",
		       "type", "uts", "type", "mount", "type", "user", "type", "cgroup");
	/* network: a new one of its own (loopback only), or with egress the
	 * one made in prepare, where the proxy listens (the worker holds it
	 * open; the runtime joins it through the worker's fd) */
	snprintf(netns, sizeof(netns), "/proc/%d/fd/%d", (int)getpid(), c->netns_fd);
	jadd(ns, c->netns_fd < 0 ? json_pack("{s:s}", "type", "network")
				 : json_pack("{s:s, s:s}", "type", "network", "path", netns));
	jset(linux_, "namespaces", ns);
	jset(linux_, "uidMappings", idmap(host_root));
	jset(linux_, "gidMappings", idmap(host_root));
	/* memory+swap equal to memory: no swap escape */
	jset(res, "memory",
	     json_pack("{s:I, s:I}", "limit", (json_int_t)l->memory_bytes, "swap",
		       (json_int_t)l->memory_bytes));
	jset(res, "pids", json_pack("{s:I}", "limit", (json_int_t)l->pids));
	jset(res, "cpu",
	     json_pack("{s:I, s:I}", "quota", (json_int_t)(sb->spec.cpu_millis * 100), "period",
		       (json_int_t)100000));
	jset(res, "devices", json_pack("[{s:b, s:s}]", "allow", 0, "access", "rwm"));
	jset(linux_, "resources", res);
	snprintf(cgpath, sizeof(cgpath), "/airlock/%s/%s", G.cg.subtree, c->name);
	jset(linux_, "cgroupsPath", json_string(cgpath));
	jset(linux_, "maskedPaths", strs(masked));
	jset(linux_, "readonlyPaths", strs(readonly));
	jset(linux_, "seccomp", seccomp_profile(sb->spec.network == AL_NET_EGRESS));
	return linux_;
}

static int write_bundle(struct al_sandbox *sb, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	struct al_buf strings = {0};
	uint32_t argc = 0, envc = 0;
	char path[PATH_MAX + 16];
	json_t *root;
	int rc = AL_OK;

	if (c->netns_fd >= 0 && sb->spec.network == AL_NET_EGRESS)
		sb->spec.proxy_url = AL_EGRESS_PROXY_URL;
	if (c->warm ? ctr_warm_argv_env(sb, &strings, &argc, &envc)
		    : al_argv_env(&sb->spec, "/proc/self/fd/3", &strings, &argc, &envc))
		return al_err_set(err, AL_ENOMEM, "container: out of memory");
	c->direct = argc > 0 && direct_exec(sb, strings.data);
	{ /* /sys/devices/system/cpu/online as the job's CPU limit has it: a
	   * file at the root of the job's tmpfs, out of the job's reach, whose
	   * bind shows no host path in the job's mountinfo (one under the
	   * state directory showed the worker's) */
		unsigned n = al_job_cpus(sb->spec.cpu_millis);
		char text[32];
		int len = al_cpu_online_text(n, text, sizeof(text)), fd;

		bool bad;

		snprintf(path, sizeof(path), "%s/cpu-online", c->fs.work);
		fd = n && len > 0
			 ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444)
			 : -1;
		bad = n && (fd < 0 || write(fd, text, (size_t)len) != len);
		if (fd >= 0 && close(fd))
			bad = true;
		if (bad) {
			al_buf_free(&strings);
			return al_err_sys(err, "container: write %s", path);
		}
	}
	bundle = (struct al_jb){0};
	root = json_object();
	jset(root, "ociVersion", json_string("1.0.2"));
	jset(root, "process", bundle_process(sb, &strings, argc, envc));
	jset(root, "root",
	     json_pack("{s:s, s:b}", "path",
		       c->rootfs[0]  ? c->rootfs
		       : c->image[0] ? c->image
				     : G.hostimage,
		       "readonly", 1));
	jset(root, "hostname", json_string("airlock"));
	jset(root, "mounts", bundle_mounts(sb));
	jset(root, "linux", bundle_linux(sb));
	al_buf_free(&strings);
	/* whole or not at all: never a config.json with a part left out */
	if (!(root = al_jb_done(&bundle, root)))
		return al_err_set(err, AL_ENOMEM, "container: out of memory building config.json");
	/* The job's argv and environment: root's only (0600, made so) */
	snprintf(path, sizeof(path), "%s/config.json", c->fs.dir);
	{
		/* one write: json_dumpfd writes each token by itself (1,700
		 * system calls, about 3 ms of a job) */
		cleanup_free char *text = json_dumps(root, JSON_COMPACT);
		cleanup_close int fd =
		    text ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
			 : -1;

		if (!text)
			rc = al_err_set(err, AL_ENOMEM,
					"container: out of memory writing config.json");
		else if (fd < 0 || al_write_all(fd, text, strlen(text)) || close(al_take_fd(&fd)))
			rc = al_err_sys(err, "container: write %s", path);
	}
	if (!rc && G.conf->bundle_copy && !c->warm &&
	    json_dump_file(root, G.conf->bundle_copy, JSON_INDENT(1)))
		rc = al_err_sys(err, "container: write %s", G.conf->bundle_copy);
	json_decref(root);
	return rc;
}

/* ---- lifecycle ---- */

int ctr_memfd(const char *name, const void *data, size_t len, struct al_err *err)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	if (fd < 0 || (len && write(fd, data, len) != (ssize_t)len) || lseek(fd, 0, SEEK_SET) < 0) {
		al_closep(&fd);
		return al_err_sys(err, "container: memfd");
	}
	return fd;
}

/* A mount point for path inside the root file system at rootfs (as host
 * root: the runtime, in the user namespace, may not create it there),
 * never following a symlink of the image out of it. */
static int make_mount_point(const char *rootfs, const char *path, bool is_dir, struct al_err *err)
{
	char comp[PATH_MAX];
	const char *p = path + 1;
	int dir = open(rootfs, O_DIRECTORY | O_RDONLY | O_CLOEXEC), rc = AL_OK;

	while (dir >= 0 && *p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		bool last = !slash;
		int next;

		snprintf(comp, sizeof(comp), "%.*s", (int)n, p);
		if (last && !is_dir) {
			next = openat(dir, comp, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
		} else {
			if (mkdirat(dir, comp, 0755) && errno != EEXIST)
				break;
			next = openat(dir, comp, O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		}
		close(dir);
		dir = next;
		p += n + (slash ? 1 : 0);
	}
	if (dir < 0 || *p)
		rc =
		    al_err_sys(err, "container: a mount point for the bind %s in %s", path, rootfs);
	al_closep(&dir);
	return rc;
}

/* A tier with binds needs mount points the image does not have, and the
 * image is shared (by the other tiers, by the other slots): the job gets a
 * root of its own, an overlay of the image with its upper layer in the
 * job's tmpfs, in which the mount points are made. Without binds, a
 * catalogue image's root is a read-only overlay of it alone
 * (al_image_tree). Either way the layers are named /proc/self/fd/N: the
 * job's mountinfo shows no host path. */
static int own_rootfs(struct al_sandbox *sb, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	const char *lower = c->image[0] ? c->image : G.hostimage;
	char up[PATH_MAX + 16], wk[PATH_MAX + 16], opts[160];
	cleanup_close int lo = -1, upfd = -1, wkfd = -1, tree = -1;
	int rc;

	if (al_pathf(c->rootfs, sizeof(c->rootfs), "%s/rootfs", c->fs.dir) ||
	    al_pathf(up, sizeof(up), "%s/ovl-up", c->fs.work) ||
	    al_pathf(wk, sizeof(wk), "%s/ovl-work", c->fs.work))
		return al_err_set(err, AL_ESANDBOX, "container: paths too long for an overlay");
	if (mkdir(c->rootfs, 0755)) {
		rc = al_err_sys(err, "container: make %s", c->rootfs);
		c->rootfs[0] = '\0';
		return rc;
	}
	if (!sb->spec.nbinds) { /* the image alone, read-only */
		if ((tree = al_image_tree(sb->conf, lower, err)) < 0) {
			c->rootfs[0] = '\0';
			return al_err_wrap(err, "container");
		}
		if (move_mount(tree, "", AT_FDCWD, c->rootfs, MOVE_MOUNT_F_EMPTY_PATH)) {
			rc = al_err_sys(err, "container: place the image's root at %s", c->rootfs);
			c->rootfs[0] = '\0';
			return rc;
		}
		return AL_OK;
	}
	/* the layers by descriptor: the options, which the job reads in its
	 * mountinfo, name no host path */
	if (mkdir(up, 0755) || mkdir(wk, 0700) ||
	    (lo = open(lower, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (upfd = open(up, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (wkfd = open(wk, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = al_err_sys(err, "container: the overlay's layers");
		c->rootfs[0] = '\0';
		return rc;
	}
	snprintf(opts, sizeof(opts),
		 "lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d,workdir=/proc/self/fd/%d", lo,
		 upfd, wkfd);
	if (mount("airlock-root", c->rootfs, "overlay", MS_NOSUID | MS_NODEV, opts)) {
		rc = al_err_sys(err, "container: an overlay root for the tier's binds");
		c->rootfs[0] = '\0';
		return rc;
	}
	for (size_t i = 0; i < sb->spec.nbinds; i++) {
		struct stat st;

		if (stat(sb->spec.binds[i], &st))
			return al_err_sys(err, "container: bind %s (the tier's binds)",
					  sb->spec.binds[i]);
		if ((rc = make_mount_point(c->rootfs, sb->spec.binds[i], S_ISDIR(st.st_mode), err)))
			return rc;
	}
	return AL_OK;
}

void ctr_sb_init(struct ctr_sb *c)
{
	c->code_fd = c->stdin_fd = c->pidfd = c->report_rd = c->netns_fd = c->egress_fd =
	    c->session_fd = c->ctl = c->spec_fd = -1;
	c->fs.out_fd = c->fs.err_fd = c->fs.mnt_fd = -1;
}

/* A job's container: the slot's warm one when it fits (warm.c), else its
 * own, made now (ctr_make). */
static int ctr_prepare(struct al_sandbox *sb, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	int rc;

	ctr_sb_init(c);
	if (!G.ready)
		return al_err_set(err, AL_ESANDBOX, "container: backend not initialised");
	if ((rc = ctr_warm_take(sb, err)))
		return rc < 0 ? rc : AL_OK;
	snprintf(c->name, sizeof(c->name), "al-%s-%u-%s", G.conf->worker_id, sb->spec.slot,
		 sb->spec.job->id);
	return ctr_make(sb, err);
}

int ctr_make(struct al_sandbox *sb, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	const struct al_job *job = sb->spec.job;
	const struct al_limits *l = &sb->spec.limits;
	uid_t uid = sb->conf->userns_base + sb->spec.slot * CTR_ID_RANGE + CTR_UID;
	int rc;

	if ((rc = al_jobfs_create(&c->fs, G.jobs, c->name, job, l->disk_bytes, uid, uid, false,
				  err)) ||
	    (sb->spec.inputs_pack && (rc = al_jobfs_unpack(&c->fs, sb->spec.inputs_pack, uid, uid,
							   sb->spec.max_input_bytes, err))))
		return al_err_wrap(err, "container");
	/* 0700 and owned by the slot's container root: the runtime, in the
	 * user namespace, reaches work/; no other host uid reaches anything */
	{
		uid_t host_root = sb->conf->userns_base + sb->spec.slot * CTR_ID_RANGE;

		if (chown(c->fs.dir, host_root, host_root) || chmod(c->fs.dir, 0700))
			return al_err_sys(err, "container: chown %s", c->fs.dir);
	}
	/* The job's cgroup is the one the runtime makes from the bundle: the
	 * paths only, for its counters and for removing it. */
	if ((rc = al_cg_at(&c->cg, &G.cg, c->name, err)))
		return al_err_wrap(err, "container");
	if (sb->spec.image &&
	    (rc = al_image_path(sb->conf, sb->spec.image, false, c->image, sizeof(c->image), err)))
		return al_err_wrap(err, "container");
	/* a catalogue image's root is the container's through an overlay of
	 * it, so that the job's mountinfo names no host path */
	if ((sb->spec.nbinds || c->image[0]) && (rc = own_rootfs(sb, err)))
		return rc;
	c->cg_made = true;
	if (c->warm) /* its job's descriptors come with the job (warm.c) */
		return write_bundle(sb, err);
	if (job->runtime != AL_RUNTIME_ARGV &&
	    (c->code_fd = ctr_memfd("job-code", job->code.data, job->code.len, err)) < 0)
		return c->code_fd;
	if ((c->stdin_fd = ctr_memfd("job-stdin", job->stdin_data.data, job->stdin_data.len, err)) <
	    0)
		return c->stdin_fd;
	/* Network egress: the job's namespace, made here with the proxy
	 * listening on its loopback before anything of the job runs. */
	if (sb->spec.network == AL_NET_EGRESS &&
	    (c->egress_fd = al_netns_new(AL_EGRESS_PROXY_PORT, NULL, &c->netns_fd, err)) < 0)
		return al_err_wrap(err, "container");
	/* A session: its server's socket, an abstract name of a namespace made
	 * here (loopback only), where nothing outside the container reaches. */
	if (sb->spec.session && sb->spec.network != AL_NET_EGRESS &&
	    (c->session_fd = al_netns_new(0, AL_SESSION_SOCKET, &c->netns_fd, err)) < 0)
		return al_err_wrap(err, "container");
	return write_bundle(sb, err);
}

static const char *const shim_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

/* Start the container's shim (backends/container/shim.c): src[0-3] on 0-3
 * (the job's stdio and script; a warm container's /dev/null and its
 * socket), the report pipe on 4, airlock-exec on 5 (closed when the
 * runtime executes the job's program itself). */
int ctr_spawn_shim(struct ctr_sb *c, const int src4[4], struct al_err *err)
{
	const int src[6] = {src4[0], src4[1], src4[2], src4[3], -1, c->direct ? -1 : G.exec_fd};
	char exe[32];
	const char *args[6 + 4 + 1] = {
	    "airlock-oci-shim", G.runtime, G.root,
	    c->fs.dir,		c->name,   G.cg.version == AL_CG_V2 ? "v2" : "v1"};
	int pipefd[2], hi[6] = {-1, -1, -1, -1, -1, -1}, n = 6, rc = AL_OK;
	posix_spawn_file_actions_t fa;

	for (int i = 0; i < c->cg.ndirs; i++)
		args[n++] = c->cg.dirs[i];
	args[n] = NULL;
	if (pipe2(pipefd, O_CLOEXEC))
		return al_err_sys(err, "container: pipe");
	/* above the targets, so that no dup2 overwrites a later source */
	for (int i = 0; i < 6; i++) {
		int from = i != 4 ? src[i] : pipefd[1];

		if (from >= 0 && (hi[i] = fcntl(from, F_DUPFD_CLOEXEC, 10)) < 0) {
			rc = al_err_sys(err, "container: dup");
			goto out;
		}
	}
	posix_spawn_file_actions_init(&fa);
	for (int i = 0; i < 6; i++)
		if (hi[i] >= 0)
			posix_spawn_file_actions_adddup2(&fa, hi[i], i);
		else
			posix_spawn_file_actions_addclose(&fa, i);
	snprintf(exe, sizeof(exe), "/proc/self/fd/%d", G.shim_fd);
	/* nothing of the worker's environment: the shim and the runtime need none */
	if ((errno = posix_spawn(&c->pid, exe, &fa, NULL, (char *const *)args,
				 (char *const *)shim_env)))
		rc = al_err_sys(err, "container: start the shim");
	posix_spawn_file_actions_destroy(&fa);
out:
	for (int i = 0; i < 6; i++)
		if (hi[i] >= 0)
			close(hi[i]);
	close(pipefd[1]);
	if (rc) {
		close(pipefd[0]);
		return rc;
	}
	c->report_rd = pipefd[0];
	fcntl(c->report_rd, F_SETFL, O_NONBLOCK);
	c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	if (c->pidfd < 0)
		return al_err_sys(err, "container: pidfd_open");
	return AL_OK;
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
		snprintf(c->name, sizeof(c->name), "al-%s-%u-%s", G.conf->worker_id, sb->spec.slot,
			 sb->spec.job->id);
		if ((rc = ctr_make(sb, err)))
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
		if (report[0] != 'X') {
			/* The runtime's own failure (the container never ran) is
			 * the sandbox's, not the job's: it is in the runtime's log. */
			char path[PATH_MAX + 16], buf[2048];

			snprintf(path, sizeof(path), "%s/runtime.log", c->fs.dir);
			al_read_text(path, buf, sizeof(buf));
			{
				char *m = strstr(buf, "\"msg\":\"");

				return al_err_set(err, AL_ESANDBOX, "container: %s failed: %.200s",
						  G.runtime,
						  m	      ? m + 7
						  : report[0] ? report
							      : "the shim died");
			}
		}
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
			cpu = cpu > c->cpu_base_ns ? cpu - c->cpu_base_ns : 0;
			st = (struct al_cg_stats){cpu, peak, oom, hit != 0};
			res->max_rss_bytes = rss > 0 ? (uint64_t)rss * 1024 : 0;
		}
	}
	al_end_status(res, ws, &st, &sb->spec.limits, disk_full);
	{
		char image[128];

		if (sb->spec.image)
			al_image_hash(sb->conf, sb->spec.image, image, sizeof(image));
		else
			snprintf(image, sizeof(image), "host");
		if (al_result_add_info(res, "runtime", G.runtime) ||
		    al_result_add_info(res, "image", image) ||
		    /* a python job says which interpreter ran it, as on the process tier */
		    (sb->spec.job->runtime == AL_RUNTIME_PYTHON &&
		     al_result_add_info(res, "interpreter", c->warm ? "warm" : "cold")))
			return al_err_set(err, AL_ENOMEM, "container: out of memory");
	}
	return 1;
}

void ctr_teardown(struct ctr_sb *c)
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
		if (!c->exited && c->name[0]) {
			/* the shim did not get to remove it */
			const char *args[] = {"delete", "-f", c->name, NULL};

			runtime_do(args, NULL);
		}
	}
	al_closep(&c->report_rd);
	c->report_rd = -1;
	if (c->cg_made) /* the runtime's cgroup, in every hierarchy it made it in */
		al_cg_remove_everywhere(&G.cg, c->name);
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
	c->pidfd = c->code_fd = c->stdin_fd = c->netns_fd = c->egress_fd = c->ctl = c->spec_fd = -1;
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
	d = opendir(G.root);
	while (d && (de = readdir(d))) {
		const char *args[] = {"delete", "-f", de->d_name, NULL};

		if (!strncmp(de->d_name, prefix, strlen(prefix)))
			runtime_do(args, NULL);
	}
	if (d)
		closedir(d);
	if (al_cg_detect(&sys, conf->worker_id, "container", NULL) == AL_OK)
		al_cg_sweep(&sys, NULL);
	snprintf(root, sizeof(root), "%s/%s/container", conf->state_dir, conf->worker_id);
	rc = al_jobfs_sweep(root, err);
	return rc;
}

static void ctr_fini(void)
{
	ctr_warm_fini(); /* before the host image they bind */
	if (G.hostimage[0] && umount2(G.hostimage, MNT_DETACH) == 0)
		rmdir(G.hostimage);
	al_closep(&G.shim_fd);
	al_closep(&G.exec_fd);
	G.shim_fd = G.exec_fd = -1;
	al_cg_release(&G.cg);
	G.ready = false;
}

/* The runtime's cgroup holds every process of the container; before the
 * runtime made it (or after it removed it) it reads as nothing used. */
static int ctr_usage(struct al_sandbox *sb, struct al_usage *u)
{
	struct ctr_sb *c = sb->priv;

	u->cpu_ns = c->cg_made ? al_cg_cpu_ns(&c->cg) : 0;
	u->cpu_ns = u->cpu_ns > c->cpu_base_ns ? u->cpu_ns - c->cpu_base_ns : 0;
	u->stdout_bytes = al_fd_size(c->fs.out_fd);
	u->stderr_bytes = al_fd_size(c->fs.err_fd);
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
    .output = ctr_output,
    .reap = ctr_reap,
    .destroy = ctr_destroy,
    .refill = ctr_warm_refill,
    .slot_ids = ctr_slot_ids,
    .fini = ctr_fini,
};
