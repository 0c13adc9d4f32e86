/* bundle.c - a container's bundle, below the backend's ops and its warm
 * path, both of which call down to it: the fast image (the host's
 * programs as mount points, made at start), a job's directory and tmpfs,
 * its cgroup's paths, its image's root (an overlay), its memfds and
 * network namespace, config.json (config.c), and its shim
 * (backends/container/shim.c) started on the bundle.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../common/log.h"
#include "../backend.h"
#include "../cgroup.h"
#include "../hostroot.h"
#include "../jobfs.h"
#include "../jobspec.h"
#include "../netns.h"
#include "ctr.h"

/* The fast image (no image in the policy): a root of mount points for what
 * of the host a program needs (hostroot.h), bound read-only by each bundle,
 * and an /etc of its own: generated passwd, group, hosts, nsswitch.conf and
 * the host's loader cache, alternatives, certificates... never the host's
 * whole /etc. */
/* Mirror host path src (absolute) at dst inside the image: a symlink as a
 * symlink, a directory or file as a mount point bound read-only. */
static int mirror(const char *src, const char *dst, struct al_err *err)
{
	char p[PATH_MAX + 80], target[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (lstat(src, &st))
		return AL_OK; /* missing on this host */
	snprintf(p, sizeof(p), "%s%s", ctr_host.hostimage, dst);
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
	if (ctr_host.nbinds == CTR_HOST_BINDS_MAX)
		return al_err_set(err, AL_ESANDBOX, "container: too many host binds");
	snprintf(ctr_host.binds[ctr_host.nbinds].src, sizeof(ctr_host.binds[0].src), "%s", src);
	snprintf(ctr_host.binds[ctr_host.nbinds].dst, sizeof(ctr_host.binds[0].dst), "%s", dst);
	ctr_host.nbinds++;
	return AL_OK;
}

static int write_text(const char *name, const char *text, struct al_err *err)
{
	char p[PATH_MAX + 32];
	FILE *f;

	snprintf(p, sizeof(p), "%s/etc/%s", ctr_host.hostimage, name);
	if (!(f = fopen(p, "we")) || fputs(text, f) < 0 || fclose(f))
		return al_err_sys(err, "container: write %s", p);
	return AL_OK;
}

int ctr_make_hostimage(struct al_err *err)
{
	static const char *const dirs[] = {"etc", "proc", "dev", "sys", "tmp", "work"};
	static const char *const top[] = AL_HOST_TOP, *const etc[] = AL_HOST_ETC;
	char p[PATH_MAX + 32], text[512];
	int rc;

	ctr_host.nbinds = 0;
	/* A tmpfs of its own, so that the container's mountinfo shows "/" as
	 * its root, not a host path (the state dir, the worker id); what an
	 * earlier run of this id left there goes first. */
	umount2(ctr_host.hostimage, MNT_DETACH);
	if (al_mkdir_p(ctr_host.hostimage, 0755) ||
	    mount("airlock-image", ctr_host.hostimage, "tmpfs", MS_NOSUID | MS_NODEV,
		  "size=1m,nr_inodes=4096,mode=0755"))
		return al_err_sys(err, "container: mount a tmpfs on %s", ctr_host.hostimage);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", ctr_host.hostimage, dirs[i]);
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
	const char *lower = c->image[0] ? c->image : ctr_host.hostimage;
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
	if (!sb->spec.nbinds && !c->rt.gvisor) { /* the image alone, read-only */
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
	/* runsc's gofer remounts the root read-only from the user namespace
	 * with no other flag, which a nosuid or nodev mount refuses (flags
	 * locked there); its jobs run with no_new_privs and its devices are
	 * the Sentry's own */
	if (mount("airlock-root", c->rootfs, "overlay", c->rt.gvisor ? 0 : MS_NOSUID | MS_NODEV,
		  opts)) {
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
	/* runsc mounts only on what the root has: its script's directory */
	if (c->rt.gvisor && (rc = make_mount_point(c->rootfs, CTR_GV_DIR, true, err)))
		return rc;
	return AL_OK;
}

/* A runsc job's directory of what runc passes it as descriptors: its
 * script (the job's code, read-only) and a mount point for airlock-exec,
 * in the job's tmpfs, bound read-only on CTR_GV_DIR (config.c). */
static int gvisor_dir(struct ctr_sb *c, const struct al_job *job, struct al_err *err)
{
	char p[PATH_MAX + 32];
	cleanup_close int fd = -1;

	if (al_pathf(p, sizeof(p), "%s/airlock", c->fs.work) || mkdir(p, 0755))
		return al_err_sys(err, "container: make %s", p);
	if (al_pathf(p, sizeof(p), "%s/airlock/exec", c->fs.work) ||
	    close(open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444)))
		return al_err_sys(err, "container: make %s", p);
	if (job->runtime == AL_RUNTIME_ARGV)
		return AL_OK;
	if (al_pathf(p, sizeof(p), "%s/airlock/script", c->fs.work) ||
	    (fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444)) < 0 ||
	    (job->code.len && al_write_all(fd, job->code.data, job->code.len)) ||
	    close(al_take_fd(&fd)))
		return al_err_sys(err, "container: write %s", p);
	return AL_OK;
}

/* A runsc session's server socket: CTR_GV_SESSION in the job's directory
 * (bound through /proc/self/fd: the directory's path may be longer than
 * an address holds), listening. Only the container's root reaches it there
 * (the directories on the way are its own, 0700). */
static int gvisor_socket(struct ctr_sb *c, const char *path, int type, struct al_err *err)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char p[PATH_MAX + 16];
	cleanup_close int dir = -1, fd = -1;

	if (al_pathf(p, sizeof(p), "%s/airlock", c->fs.work) ||
	    (dir = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return al_err_sys(err, "container: open %s", p);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "/proc/self/fd/%d/%s", dir,
		 strrchr(path, '/') + 1);
	if ((fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0 ||
	    bind(fd, (struct sockaddr *)&sun, sizeof(sun)) || chmod(sun.sun_path, 0666) ||
	    listen(fd, 128))
		return al_err_sys(err, "container: a socket %s in %s", strrchr(path, '/') + 1, p);
	return al_take_fd(&fd);
}

void ctr_sb_init(struct ctr_sb *c)
{
	c->code_fd = c->stdin_fd = c->pidfd = c->report_rd = c->netns_fd = c->egress_fd =
	    c->session_fd = c->ctl = c->spec_fd = c->warm_lfd = -1;
	c->fs.out_fd = c->fs.err_fd = c->fs.mnt_fd = -1;
}

int ctr_make(struct al_sandbox *sb, const struct ctr_argv *argv, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	const struct al_job *job = sb->spec.job;
	const struct al_limits *l = &sb->spec.limits;
	uid_t uid = sb->conf->userns_base + sb->spec.slot * CTR_ID_RANGE + CTR_UID;
	/* a restored session's files are the snapshot's (checkpoint.c), not its job's */
	struct al_job bare = *job;
	int rc;

	if (sb->spec.restore) {
		bare.files = NULL;
		bare.nfiles = 0;
	}
	if ((rc = al_jobfs_create(&c->fs, ctr_host.jobs, c->name, &bare, l->disk_bytes, uid, uid,
				  false, err)) ||
	    (sb->spec.inputs_pack && !sb->spec.restore &&
	     (rc = al_jobfs_unpack(&c->fs, sb->spec.inputs_pack, uid, uid, sb->spec.max_input_bytes,
				   err))))
		return al_err_wrap(err, "container");
	if (sb->spec.restore && (rc = ctr_restore_unpack(sb, uid, err)))
		return rc;
	/* 0700 and owned by the slot's container root: the runtime, in the
	 * user namespace, reaches work/; no other host uid reaches anything */
	{
		uid_t host_root = sb->conf->userns_base + sb->spec.slot * CTR_ID_RANGE;

		if (chown(c->fs.dir, host_root, host_root) || chmod(c->fs.dir, 0700))
			return al_err_sys(err, "container: chown %s", c->fs.dir);
	}
	/* The job's cgroup is the one the runtime makes from the bundle: the
	 * paths only, for its counters and for removing it. */
	if ((rc = al_cg_at(&c->cg, &ctr_host.cg, c->name, err)))
		return al_err_wrap(err, "container");
	if (sb->spec.image &&
	    (rc = al_image_path(sb->conf, sb->spec.image, false, c->image, sizeof(c->image), err)))
		return al_err_wrap(err, "container");
	/* a catalogue image's root is the container's through an overlay of
	 * it, so that the job's mountinfo names no host path */
	if ((sb->spec.nbinds || c->image[0] || c->rt.gvisor) && (rc = own_rootfs(sb, err)))
		return rc;
	if (c->rt.gvisor && (rc = gvisor_dir(c, job, err)))
		return rc;
	c->cg_made = true;
	/* its job's descriptors come with the job (warm.c); on runsc, which
	 * passes none in, its socket reaches the interpreter through a socket
	 * file airlock-exec connects to, which the shim listens on */
	if (c->warm && c->rt.gvisor &&
	    (c->warm_lfd = gvisor_socket(c, CTR_GV_WARM, SOCK_SEQPACKET, err)) < 0)
		return c->warm_lfd;
	if (c->warm)
		return ctr_write_config(sb, argv, err);
	/* runsc's script is a file (gvisor_dir), never passed as a descriptor */
	if (job->runtime != AL_RUNTIME_ARGV && !c->rt.gvisor &&
	    (c->code_fd = ctr_memfd("job-code", job->code.data, job->code.len, err)) < 0)
		return c->code_fd;
	if ((c->stdin_fd = ctr_memfd("job-stdin", job->stdin_data.data, job->stdin_data.len, err)) <
	    0)
		return c->stdin_fd;
	/* On runsc, whose Sentry has a network stack of its own (loopback
	 * only, --network=none: runtime.c), the worker's sockets are files in
	 * the job's CTR_GV_DIR, which the job's side connects to as host
	 * sockets (--host-uds=open): a session's server, and for network
	 * egress airlock-exec's relay (relay.c) of each connection the job
	 * makes to the proxy's address on its loopback. */
	if (c->rt.gvisor) {
		if (sb->spec.network == AL_NET_EGRESS &&
		    (c->egress_fd = gvisor_socket(c, CTR_GV_EGRESS, SOCK_STREAM, err)) < 0)
			return c->egress_fd;
		if (sb->spec.session &&
		    (c->session_fd = gvisor_socket(c, CTR_GV_SESSION, SOCK_STREAM, err)) < 0)
			return c->session_fd;
		return ctr_write_config(sb, argv, err);
	}
	/* Network egress: the job's namespace, made here with the proxy
	 * listening on its loopback before anything of the job runs. */
	if (sb->spec.network == AL_NET_EGRESS &&
	    (c->egress_fd = al_netns_new(AL_EGRESS_PROXY_PORT, NULL, &c->netns_fd, err)) < 0)
		return al_err_wrap(err, "container");
	/* A session: its server's socket, an abstract name of a namespace made
	 * here (loopback only; with egress, the job's one), where nothing
	 * outside the container reaches. */
	if (sb->spec.session &&
	    (c->session_fd = sb->spec.network == AL_NET_EGRESS
				 ? al_netns_listen_unix(c->netns_fd, AL_SESSION_SOCKET, err)
				 : al_netns_new(0, AL_SESSION_SOCKET, &c->netns_fd, err)) < 0)
		return al_err_wrap(err, "container");
	return ctr_write_config(sb, argv, err);
}

static const char *const shim_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

/* Start the container's shim (backends/container/shim.c): src[0-3] on 0-3
 * (the job's stdio and script; a warm container's /dev/null and its
 * socket), the report pipe on 4, airlock-exec on 5 (closed when the
 * runtime executes the job's program itself). */
int ctr_spawn_shim(struct ctr_sb *c, const int src4[4], struct al_err *err)
{
	/* runsc takes no descriptor beyond stdio: its job's script and
	 * airlock-exec are files (CTR_GV_DIR); a warm container's shim gets
	 * the listener (3) and the interpreter's socket (5) instead, to hand
	 * that over (shim.c) */
	int src[6] = {src4[0], src4[1], src4[2], src4[3], -1, c->direct ? -1 : ctr_host.exec_fd};

	if (c->rt.gvisor) {
		src[3] = c->warm ? c->warm_lfd : -1;
		src[5] = c->warm ? src4[3] : -1;
	}
	char exe[32];
	const char *args[7 + 4 + 1] = {"airlock-oci-shim",
				       c->rt.path,
				       c->rt.root,
				       c->fs.dir,
				       c->name,
				       ctr_host.cg.version == AL_CG_V2 ? "v2" : "v1",
				       c->rt.flags[0] ? c->rt.flags : "-"};
	int pipefd[2], hi[6] = {-1, -1, -1, -1, -1, -1}, n = 7, rc = AL_OK;
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
			goto out_fds;
		}
	}
	posix_spawn_file_actions_init(&fa);
	for (int i = 0; i < 6; i++)
		if (hi[i] >= 0)
			posix_spawn_file_actions_adddup2(&fa, hi[i], i);
		else
			posix_spawn_file_actions_addclose(&fa, i);
	snprintf(exe, sizeof(exe), "/proc/self/fd/%d", ctr_host.shim_fd);
	/* nothing of the worker's environment: the shim and the runtime need none */
	if ((errno = posix_spawn(&c->pid, exe, &fa, NULL, (char *const *)args,
				 (char *const *)shim_env)))
		rc = al_err_sys(err, "container: start the shim");
	posix_spawn_file_actions_destroy(&fa);
out_fds:
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
