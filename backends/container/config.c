/* config.c - the container backend's OCI configuration: a job's
 * config.json (written with jansson) from its run spec, the argv and
 * environment it is handed (ctr_write_config), and the binds of the fast
 * image (ctr_host's ctr_host.binds). Called by bundle.c; calls nothing of
 * the backend's other files.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../common/log.h"
#include "../../proto/jbuild.h"
#include "../../proto/buf.h"
#include "../backend.h"
#include "../cgroup.h"
#include "../jobfs.h"
#include "../jobfs_layout.h"
#include "../jobspec.h"
#include "../netns.h"
#include "../seccomp.h"
#include "ctr.h"

/* the backend's host-wide state (ctr.h): here, in the lowest file that
 * reads it */
struct ctr_host ctr_host;

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
	for (size_t i = 0; i < ctr_host.nbinds; i++)
		jadd(mounts,
		     mount_of(ctr_host.binds[i].dst, "none", ctr_host.binds[i].src, ro_bind));
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
	argv = c->direct      ? json_array()
	       : c->rt.gvisor ? json_pack("[s]", CTR_GV_EXEC)
			      : json_pack("[s]", "/proc/self/fd/4");
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
	if (c->rt.gvisor) /* the pids limit inside the Sentry (bundle_linux) */
		jadd(rl, rlimit("RLIMIT_NPROC", l->pids, l->pids));
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
	if (c->rt.gvisor) {
		/* runsc mounts only on what the root has (/dev is its own: its
		 * /dev/shm is the sandbox's memory), shows the CPUs of its share
		 * itself (--cpu-num-from-quota), and takes no descriptor but
		 * stdio: the script and airlock-exec are files */
		snprintf(path, sizeof(path), "%s/airlock", c->fs.work);
		jadd(mounts, mount_of(CTR_GV_DIR, "none", path, ro_bind));
		if (!c->direct)
			jadd(mounts, mount_of(CTR_GV_EXEC, "none", ctr_host.exec_path, ro_bind));
		return mounts;
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
	/* runsc's sandbox is in the cgroup too: the Sentry's and the gofer's
	 * threads, and on ptrace a stub process and a tracing thread per
	 * process of the job, whose count the Sentry limits itself
	 * (RLIMIT_NPROC, bundle_process): past this the Sentry, not the job,
	 * would fail */
	jset(res, "pids",
	     json_pack(
		 "{s:I}", "limit",
		 (json_int_t)(c->rt.gvisor ? CTR_GV_PIDS + CTR_GV_PIDS_EACH * l->pids : l->pids)));
	jset(res, "cpu",
	     json_pack("{s:I, s:I}", "quota", (json_int_t)(sb->spec.cpu_millis * 100), "period",
		       (json_int_t)100000));
	jset(res, "devices", json_pack("[{s:b, s:s}]", "allow", 0, "access", "rwm"));
	jset(linux_, "resources", res);
	snprintf(cgpath, sizeof(cgpath), "/airlock/%s/%s", ctr_host.cg.subtree, c->name);
	jset(linux_, "cgroupsPath", json_string(cgpath));
	jset(linux_, "maskedPaths", strs(masked));
	jset(linux_, "readonlyPaths", strs(readonly));
	jset(linux_, "seccomp", seccomp_profile(sb->spec.network == AL_NET_EGRESS));
	return linux_;
}

int ctr_write_config(struct al_sandbox *sb, const struct ctr_argv *argv, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	const struct al_buf *strings = &argv->strings;
	char path[PATH_MAX + 16];
	json_t *root;
	int rc = AL_OK;

	c->found = argv->argc > 0 && direct_exec(sb, strings->data);
	/* but on runsc airlock-exec is needed for a job's network egress (its
	 * relay: relay.c) and a warm interpreter (its fd 3: warm.c) */
	c->direct = c->found && !(c->rt.gvisor && (sb->spec.network == AL_NET_EGRESS || c->warm));
	{ /* /sys/devices/system/cpu/online as the job's CPU limit has it: a
	   * file at the root of the job's tmpfs, out of the job's reach, whose
	   * bind shows no host path in the job's mountinfo (one under the
	   * state directory showed the worker's) */
		/* (runsc shows its CPUs itself: no file, no bind) */
		unsigned n = c->rt.gvisor ? 0 : al_job_cpus(sb->spec.cpu_millis);
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
		if (bad)
			return al_err_sys(err, "container: write %s", path);
	}
	bundle = (struct al_jb){0};
	root = json_object();
	jset(root, "ociVersion", json_string("1.0.2"));
	jset(root, "process", bundle_process(sb, strings, argv->argc, argv->envc));
	jset(root, "root",
	     json_pack("{s:s, s:b}", "path",
		       c->rootfs[0]  ? c->rootfs
		       : c->image[0] ? c->image
				     : ctr_host.hostimage,
		       "readonly", 1));
	jset(root, "hostname", json_string("airlock"));
	jset(root, "mounts", bundle_mounts(sb));
	jset(root, "linux", bundle_linux(sb));
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
	if (!rc && ctr_host.conf->bundle_copy && !c->warm &&
	    json_dump_file(root, ctr_host.conf->bundle_copy, JSON_INDENT(1)))
		rc = al_err_sys(err, "container: write %s", ctr_host.conf->bundle_copy);
	json_decref(root);
	return rc;
}
