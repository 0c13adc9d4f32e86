/* jobfs.c - a job's files on the host (see jobfs.h). */
#include "jobfs.h"
#include "inpack.h"
#include "jobfs_layout.h"

#include "../common/cleanup.h"
#include "../proto/buf.h"
#include "../proto/keys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

int al_mkdir_p(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) && errno != EEXIST)
			return AL_ESYS;
		*p = '/';
	}
	return mkdir(tmp, mode) && errno != EEXIST ? -1 : 0;
}

/* Create the parent directories of rel inside dirfd, owned by uid:gid. */
static int make_parents(int dirfd, const char *rel, uid_t uid, gid_t gid)
{
	char tmp[AL_PATH_MAX + 1];

	snprintf(tmp, sizeof(tmp), "%s", rel);
	for (char *p = tmp; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdirat(dirfd, tmp, 0755) == 0) {
			if (fchownat(dirfd, tmp, uid, gid, AT_SYMLINK_NOFOLLOW))
				return AL_ESYS;
		} else if (errno != EEXIST) {
			return AL_ESYS;
		}
		*p = '/';
	}
	return 0;
}

/* A directory fd on the root of the job's tmpfs (caller closes). */
static int root_dirfd(const struct al_jobfs *fs)
{
	if (fs->mnt_fd >= 0)
		return openat(fs->mnt_fd, ".", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	return open(fs->work, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
}

/* A directory fd on the job's work directory (caller closes). */
static int work_dirfd(const struct al_jobfs *fs)
{
	cleanup_close int root = root_dirfd(fs);

	if (root < 0)
		return -1;
	return openat(root, AL_JOBFS_WORK, O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

/* The tmpfs's directories (jobfs_layout.h), owned by the job's uid (when
 * renewing, they are there: only their owner and modes are set again). */
static int make_layout(struct al_jobfs *fs, uid_t uid, gid_t gid, bool renew, struct al_err *err)
{
	static const struct {
		const char *name;
		mode_t mode;
	} dirs[] = {{AL_JOBFS_WORK, 0700}, {AL_JOBFS_TMP, 01777}, {AL_JOBFS_SHM, 01777}};
	cleanup_close int root = root_dirfd(fs);

	if (root < 0)
		return al_err_sys(err, "jobfs: open the job's tmpfs");
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if ((mkdirat(root, dirs[i].name, 0700) && !(renew && errno == EEXIST)) ||
		    fchownat(root, dirs[i].name, uid, gid, AT_SYMLINK_NOFOLLOW) ||
		    fchmodat(root, dirs[i].name, dirs[i].mode, 0))
			return al_err_sys(err, "jobfs: mkdir %s in the job's tmpfs", dirs[i].name);
	return AL_OK;
}

int al_jobfs_write_files(struct al_jobfs *fs, const struct al_job *job, uid_t uid, gid_t gid,
			 struct al_err *err)
{
	cleanup_close int dirfd = work_dirfd(fs);

	if (dirfd < 0)
		return al_err_sys(err, "jobfs: open %s", fs->work[0] ? fs->work : "the work tmpfs");
	for (size_t i = 0; i < job->nfiles; i++) {
		const struct al_file *f = &job->files[i];
		cleanup_close int fd = -1;

		if (make_parents(dirfd, f->path, uid, gid))
			return al_err_sys(err, "jobfs: input file %s: mkdir", f->path);
		fd = openat(dirfd, f->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
		if (fd < 0)
			return al_err_sys(err, "jobfs: input file %s", f->path);
		if (al_write_all(fd, f->data.data, f->data.len))
			return errno == ENOSPC
				   ? al_err_set(err, AL_EINVAL,
						"input files: more than the disk limit allows")
				   : al_err_sys(err, "jobfs: write %s", f->path);
		if (fchown(fd, uid, gid) || fchmod(fd, f->mode))
			return al_err_sys(err, "jobfs: chown/chmod %s", f->path);
	}
	return AL_OK;
}

int al_jobfs_create(struct al_jobfs *fs, const char *root, const char *name,
		    const struct al_job *job, uint64_t disk_bytes, uid_t uid, gid_t gid,
		    bool detached, struct al_err *err)
{
	char opts[128];
	int rc;

	memset(fs, 0, sizeof(*fs));
	fs->out_fd = fs->err_fd = fs->mnt_fd = -1;
	if (!detached &&
	    (al_mkdir_p(root, 0711) || al_pathf(fs->dir, sizeof(fs->dir), "%s/%s", root, name) ||
	     al_pathf(fs->work, sizeof(fs->work), "%s/work", fs->dir) || mkdir(fs->dir, 0700)))
		return al_err_sys(err, "jobfs: mkdir %s/%s", root, name);
	/* The disk limit is the tmpfs size: a disk-filling job gets ENOSPC. */
	if (detached) {
		cleanup_close int fsfd = fsopen("tmpfs", FSOPEN_CLOEXEC);
		char v[32];
		bool bad = fsfd < 0;

		snprintf(v, sizeof(v), "%llu", (unsigned long long)disk_bytes);
		bad = bad || fsconfig(fsfd, FSCONFIG_SET_STRING, "size", v, 0);
		bad = bad || fsconfig(fsfd, FSCONFIG_SET_STRING, "mode", "0700", 0);
		snprintf(v, sizeof(v), "%u", (unsigned)uid);
		bad = bad || fsconfig(fsfd, FSCONFIG_SET_STRING, "uid", v, 0);
		snprintf(v, sizeof(v), "%u", (unsigned)gid);
		bad = bad || fsconfig(fsfd, FSCONFIG_SET_STRING, "gid", v, 0);
		bad = bad || fsconfig(fsfd, FSCONFIG_SET_STRING, "nr_inodes", "65536", 0);
		bad = bad || fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0);
		if (!bad)
			fs->mnt_fd =
			    fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
		if (fs->mnt_fd < 0) {
			rc = al_err_sys(err, "jobfs: make a detached tmpfs (fsopen/fsmount)");
			goto out_destroy;
		}
	} else {
		if (mkdir(fs->work, 0700)) {
			rc = al_err_sys(err, "jobfs: mkdir %s", fs->work);
			goto out_destroy;
		}
		snprintf(opts, sizeof(opts), "size=%llu,mode=0700,uid=%u,gid=%u,nr_inodes=65536",
			 (unsigned long long)disk_bytes, (unsigned)uid, (unsigned)gid);
		if (mount("airlock-job", fs->work, "tmpfs", MS_NOSUID | MS_NODEV, opts)) {
			rc = al_err_sys(err, "jobfs: mount tmpfs on %s", fs->work);
			goto out_destroy;
		}
		fs->mounted = true;
	}
	if (fs->mnt_fd < 0 && al_pathf(fs->home, sizeof(fs->home), "%s/" AL_JOBFS_WORK, fs->work)) {
		rc = al_err_set(err, AL_EINVAL, "jobfs: path too long: %s", fs->work);
		goto out_destroy;
	}
	if ((rc = make_layout(fs, uid, gid, false, err)) ||
	    (rc = al_jobfs_write_files(fs, job, uid, gid, err)))
		goto out_destroy;
	/* stdout and stderr are memfds: nothing to create or remove on disk */
	fs->out_fd = memfd_create("job-stdout", MFD_CLOEXEC);
	fs->err_fd = memfd_create("job-stderr", MFD_CLOEXEC);
	if (fs->out_fd < 0 || fs->err_fd < 0) {
		rc = al_err_sys(err, "jobfs: memfd for stdout/stderr");
		goto out_destroy;
	}
	return AL_OK;

out_destroy:
	al_jobfs_destroy(fs);
	return rc;
}

int al_jobfs_unpack(struct al_jobfs *fs, const char *pack, uid_t uid, gid_t gid, uint64_t max_bytes,
		    struct al_err *err)
{
	cleanup_close int dirfd = work_dirfd(fs);
	cleanup_close int fd = open(pack, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (dirfd < 0 || fd < 0)
		return al_err_sys(err, "jobfs: open %s", dirfd < 0 ? "the work directory" : pack);
	return al_pack_unpack(fd, dirfd, uid, gid, max_bytes, err);
}

/* Remove everything inside directory dfd (closed here), following no
 * symlink and crossing no mount; at depth 0 the layout's directories are
 * emptied and kept (a sandbox has them bound in place). 0, or -1. */
static int empty_dir(int dfd, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int rc = 0;
	bool again = true;

	if (!d) {
		close(dfd);
		return AL_ESYS;
	}
	/* entries removed while reading may hide others: read until a pass
	 * finds nothing to remove */
	for (int pass = 0; again && pass < 8; pass++, rewinddir(d)) {
		again = false;
		while ((de = readdir(d))) {
			bool keep = depth == 0 && (!strcmp(de->d_name, AL_JOBFS_WORK) ||
						   !strcmp(de->d_name, AL_JOBFS_TMP) ||
						   !strcmp(de->d_name, AL_JOBFS_SHM));
			int sub;

			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (!keep && unlinkat(dirfd(d), de->d_name, 0) == 0) {
				again = true;
				continue;
			}
			if (!keep && errno != EISDIR) {
				rc = -1;
				continue;
			}
			sub = depth < 64 ? openat(dirfd(d), de->d_name,
						  O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC)
					 : -1;
			if (sub < 0 || empty_dir(sub, depth + 1) ||
			    (!keep && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR)))
				rc = -1;
			else if (!keep)
				again = true;
		}
	}
	closedir(d);
	return rc;
}

int al_jobfs_renew(struct al_jobfs *fs, const struct al_job *job, uint64_t disk_bytes, uid_t uid,
		   gid_t gid, struct al_err *err)
{
	char opts[96];
	int root, rc;

	if (!fs->mounted)
		return al_err_set(err, AL_ESANDBOX, "jobfs: only a mounted tmpfs can be renewed");
	if ((root = root_dirfd(fs)) < 0 || empty_dir(root, 0))
		return al_err_sys(err, "jobfs: empty %s", fs->work);
	snprintf(opts, sizeof(opts), "size=%llu", (unsigned long long)disk_bytes);
	if (mount(NULL, fs->work, NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, opts))
		return al_err_sys(err, "jobfs: resize %s to %s", fs->work, opts);
	if (ftruncate(fs->out_fd, 0) || ftruncate(fs->err_fd, 0))
		return al_err_sys(err, "jobfs: truncate stdout/stderr");
	if ((rc = make_layout(fs, uid, gid, true, err)))
		return rc;
	return al_jobfs_write_files(fs, job, uid, gid, err);
}

/* Read up to cap bytes from fd (from offset 0); *truncated when more. */
static int read_capped(int fd, uint64_t cap, struct al_bytes *out, bool *truncated)
{
	struct stat st;
	size_t want;
	ssize_t n;
	cleanup_free char *data = NULL;

	if (fstat(fd, &st))
		return AL_ESYS;
	want = (uint64_t)st.st_size > cap ? (size_t)cap : (size_t)st.st_size;
	*truncated = (uint64_t)st.st_size > cap;
	data = malloc(want + 1);
	if (!data)
		return AL_ENOMEM;
	n = want ? pread(fd, data, want, 0) : 0;
	if (n < 0)
		return AL_ESYS;
	data[n] = '\0';
	out->len = (size_t)n;
	out->data = al_take_ptr(&data);
	return 0;
}

static int open_beneath(int dirfd, const char *path)
{
	struct open_how how = {
	    .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
	    .resolve =
		RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/* collect's globs: the work tree walked (no symlink followed, no other
 * file system entered), bounded (GLOB_SEEN_MAX entries, GLOB_DEPTH_MAX
 * levels); the regular files a glob matches, their paths relative to the
 * work dir, in *found. */
#define GLOB_SEEN_MAX  4096 /* entries looked at, in all */
#define GLOB_DEPTH_MAX 8

struct found {
	char **paths;
	size_t n, seen;
	dev_t dev;
};

static void walk(int fd, const char *prefix, int depth, const struct al_job *job, struct found *f)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;

	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) && f->seen < GLOB_SEEN_MAX) {
		char path[AL_PATH_MAX + 2];
		struct stat st;
		int sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		f->seen++;
		if (snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "/" : "", de->d_name) >
			AL_PATH_MAX ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || st.st_dev != f->dev)
			continue;
		if (S_ISREG(st.st_mode) && al_collect_wanted(job, path)) {
			char *p = strdup(path);

			if (p)
				f->paths[f->n++] = p;
		} else if (S_ISDIR(st.st_mode) && depth < GLOB_DEPTH_MAX &&
			   (sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
			walk(sub, path, depth + 1, job, f);
		}
	}
	closedir(d);
}

static int by_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One file into the result (missing, a symlink, not regular or escaping
 * the work dir: not collected). */
static void collect_one(int dirfd, const char *path, uint64_t file_cap, struct al_result *res)
{
	struct al_out_file *o = &res->files[res->nfiles];
	struct stat st;
	cleanup_close int fd = open_beneath(dirfd, path);

	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    read_capped(fd, file_cap, &o->data, &o->truncated))
		return;
	if (!(o->path = strdup(path))) {
		free(o->data.data);
		o->data.data = NULL;
		return;
	}
	res->nfiles++;
}

static bool collected(const struct al_result *res, const char *path)
{
	for (size_t i = 0; i < res->nfiles; i++)
		if (!strcmp(res->files[i].path, path))
			return true;
	return false;
}

int al_jobfs_collect(struct al_jobfs *fs, const struct al_job *job, const struct al_limits *lim,
		     uint64_t file_cap, struct al_result *res, bool *disk_full, struct al_err *err)
{
	size_t max = al_collect_max_files(job);
	bool globs = max > job->ncollect;
	struct statvfs sv;
	cleanup_close int dirfd = -1;

	*disk_full = false;
	if (read_capped(fs->out_fd, lim->stdout_bytes, &res->out, &res->out_truncated) ||
	    read_capped(fs->err_fd, lim->stderr_bytes, &res->err, &res->err_truncated))
		return al_err_sys(err, "jobfs: read stdout/stderr");
	if (!fs->mounted && fs->mnt_fd < 0)
		return AL_OK;
	dirfd = work_dirfd(fs);
	if (dirfd < 0)
		return al_err_sys(err, "jobfs: open %s", fs->work[0] ? fs->work : "the work tmpfs");
	/* A few blocks of slack: tmpfs reports full slightly before size. */
	if (fstatvfs(dirfd, &sv) == 0 && sv.f_bavail * sv.f_frsize < 64 * 1024)
		*disk_full = true;
	if (max && !(res->files = calloc(max, sizeof(*res->files))))
		return al_err_set(err, AL_ENOMEM, "jobfs: out of memory");
	/* the paths asked for, in their order; then the globs' matches, by name */
	for (size_t i = 0; i < job->ncollect; i++)
		if (!al_collect_is_glob(job->collect[i]))
			collect_one(dirfd, job->collect[i], file_cap, res);
	if (globs) {
		/* every match (as many as entries looked at, at most), sorted:
		 * the first by name are taken, whatever order readdir gives */
		struct found f = {.paths = calloc(GLOB_SEEN_MAX, sizeof(char *))};
		struct stat st;
		int top = f.paths && !fstat(dirfd, &st) ? dup(dirfd) : -1;

		if (top >= 0) {
			f.dev = st.st_dev;
			walk(top, "", 0, job, &f);
		}
		qsort(f.paths, f.n, sizeof(char *), by_path);
		for (size_t i = 0; i < f.n; i++) {
			if (res->nfiles < max && !collected(res, f.paths[i]))
				collect_one(dirfd, f.paths[i], file_cap, res);
			free(f.paths[i]);
		}
		free(f.paths);
	}
	return AL_OK;
}

void al_jobfs_destroy(struct al_jobfs *fs)
{
	al_closep(&fs->out_fd);
	al_closep(&fs->err_fd);
	al_closep(&fs->mnt_fd); /* the last reference frees the detached tmpfs */
	fs->out_fd = fs->err_fd = fs->mnt_fd = -1;
	if (!fs->dir[0])
		return; /* detached: no directory */
	/* Unmounting the tmpfs frees everything the job wrote. */
	if (fs->mounted && umount2(fs->work, MNT_DETACH) == 0)
		fs->mounted = false;
	rmdir(fs->work);
	/* stdout, stderr and whatever else a backend put beside them
	 * (a bundle's config.json, a runtime log, an overlay root a crash
	 * left mounted): the directory is ours */
	{
		DIR *d = opendir(fs->dir);
		struct dirent *de;

		while (d && (de = readdir(d))) {
			char sub[PATH_MAX + 256];

			if (de->d_type != DT_DIR) {
				unlinkat(dirfd(d), de->d_name, 0);
			} else if (de->d_name[0] != '.' &&
				   !al_pathf(sub, sizeof(sub), "%s/%s", fs->dir, de->d_name)) {
				umount2(sub, MNT_DETACH);
				rmdir(sub);
			}
		}
		if (d)
			closedir(d);
	}
	if (rmdir(fs->dir) == 0 || errno == ENOENT)
		fs->dir[0] = '\0';
}

int al_jobfs_sweep(const char *root, struct al_err *err)
{
	struct dirent *de;
	DIR *d = opendir(root);
	int rc = AL_OK;

	if (!d)
		return errno == ENOENT ? AL_OK : al_err_sys(err, "jobfs: open %s", root);
	while ((de = readdir(d))) {
		struct al_jobfs fs = {.out_fd = -1, .err_fd = -1, .mnt_fd = -1, .mounted = true};

		if (de->d_name[0] == '.')
			continue;
		if (al_pathf(fs.dir, sizeof(fs.dir), "%s/%s", root, de->d_name) ||
		    al_pathf(fs.work, sizeof(fs.work), "%s/work", fs.dir))
			continue;
		umount2(fs.work, MNT_DETACH); /* may not be mounted: fine */
		fs.mounted = false;
		al_jobfs_destroy(&fs);
		if (fs.dir[0])
			rc = al_err_set(err, AL_ESANDBOX, "jobfs: could not remove %s", fs.dir);
	}
	closedir(d);
	return rc;
}

ssize_t al_read_text(const char *path, char *buf, size_t cap)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;

	buf[n > 0 ? n : 0] = '\0';
	return n > 0 ? n : 0;
}

ssize_t al_jobfs_output(const struct al_jobfs *fs, int stream, uint64_t off, void *buf, size_t cap)
{
	int fd = stream == 1 ? fs->out_fd : stream == 2 ? fs->err_fd : -1;
	ssize_t n;

	if (fd < 0)
		return -1;
	do
		n = pread(fd, buf, cap, (off_t)off);
	while (n < 0 && errno == EINTR);
	return n;
}

int al_output_pump(const struct al_limits *lim, uint64_t sent[3], al_out_read_fn read, void *src,
		   al_out_emit_fn emit, void *dst)
{
	static char buf[AL_OUT_CHUNK_MAX];

	for (int st = 1; st <= 2; st++) {
		uint64_t cap = st == 1 ? lim->stdout_bytes : lim->stderr_bytes;

		for (int i = 0; i < 4 && sent[st] < cap; i++) {
			uint64_t room = cap - sent[st];
			ssize_t n = read(src, st, sent[st], buf,
					 room < sizeof(buf) ? (size_t)room : sizeof(buf));
			int rc;

			if (n <= 0)
				break;
			sent[st] += (uint64_t)n;
			if ((rc = emit(dst, st, buf, (size_t)n)))
				return rc;
		}
	}
	return 0;
}

uint64_t al_fd_size(int fd)
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}
