/* hostlock.c - which worker ids are alive on this host, and the sweep of
 * the leftovers of those that are not (see hostlock.h). */
#include "hostlock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../backends/backend.h" /* AL_STATE_SHARED */
#include "../backends/cgroup.h"
#include "../backends/jobfs.h"
#include "../common/log.h"
#include "../proto/buf.h"
#include "../proto/job.h"

/* Open and lock dir/<id>.lock; the file must still be the one at that path
 * once locked (a sweeper unlinks the files of dead ids). -1 when another
 * process holds it (errno EWOULDBLOCK) or on error. */
static int lock_id(const char *dir, const char *id, int how)
{
	char path[PATH_MAX];

	if (al_pathf(path, sizeof(path), "%s/%s.lock", dir, id))
		return -1;
	for (int tries = 0; tries < 10; tries++) {
		struct stat a, b;
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

		if (fd < 0)
			return -1;
		if (flock(fd, how | LOCK_NB)) {
			int e = errno;

			close(fd);
			errno = e;
			return -1;
		}
		if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
		    a.st_dev == b.st_dev)
			return fd;
		close(fd); /* unlinked under us by a sweeper: take the new file */
	}
	errno = EAGAIN;
	return -1;
}

/* Whether id names an entry of the state directory that is no worker's. */
static bool state_shared(const char *id)
{
	static const char *const names[] = AL_STATE_SHARED;

	for (size_t i = 0; names[i]; i++)
		if (!strcmp(id, names[i]))
			return true;
	return false;
}

int wk_hostlock_take(const char *dir, const char *id, bool shared, const char *state_dir,
		     struct al_err *err)
{
	int fd;

	if (!al_job_id_ok(id, strlen(id)))
		return al_err_set(
		    err, AL_EINVAL,
		    "--worker-id: expected 1..64 characters of [A-Za-z0-9._:-], got \"%.64s\"", id);
	if (state_shared(id))
		return al_err_set(err, AL_EINVAL,
				  "--worker-id \"%s\" names an entry of the state directory that "
				  "every worker shares; choose another id",
				  id);
	if (al_mkdir_p(dir, 0700))
		return al_err_sys(err, "worker: mkdir %s", dir);
	/* another worker starting on this host may hold the lock a moment,
	 * looking whether this id is a dead one to sweep: a live worker holds
	 * it for good, so only a lock held past a second refuses the id */
	fd = lock_id(dir, id, shared ? LOCK_SH : LOCK_EX);
	for (int tries = 0; fd < 0 && errno == EWOULDBLOCK && tries < 20; tries++) {
		usleep(50000);
		fd = lock_id(dir, id, shared ? LOCK_SH : LOCK_EX);
	}
	if (fd < 0 && errno == EWOULDBLOCK)
		return al_err_set(err, AL_EINVAL,
				  "another worker with id \"%s\" runs on this host (it holds "
				  "%s/%s.lock); give each worker its own --worker-id",
				  id, dir, id);
	if (fd < 0)
		return al_err_sys(err, "worker: lock %s/%s.lock", dir, id);
	if (state_dir && state_dir[0] == '/' &&
	    (ftruncate(fd, 0) || pwrite(fd, state_dir, strlen(state_dir), 0) < 0))
		al_log("warn", "hostlock",
		       "worker=%s error=\"cannot write the state dir into "
		       "the lock file: %s\"",
		       id, strerror(errno));
	return fd; /* held until the process ends: never closed */
}

/* The state directory the dead id's lock file (fd) names, into out; else
 * fallback. A name that is not a plain absolute path is not taken. */
static const char *state_dir_of(int fd, const char *fallback, char out[PATH_MAX])
{
	ssize_t n = pread(fd, out, PATH_MAX - 1, 0);

	if (n <= 1 || out[0] != '/')
		return fallback;
	out[n] = '\0';
	if (strlen(out) != (size_t)n || strstr(out, "/../") || strchr(out, '\n'))
		return fallback;
	return out;
}

/* Every leftover of dead worker id: its cgroups in every mount, its job
 * directories (and their mounts) under the state directory its lock file
 * (fd) names, else state_dir, then its lock file. */
static void sweep_id(const char *dir, const char *self, const char *id, int fd,
		     const char *state_dir, const struct al_cg_sys *cg)
{
	char path[PATH_MAX], sub[PATH_MAX + 256], own[PATH_MAX];
	DIR *d;
	struct dirent *de;
	int cgroups, cg_left, dirs = 0, dirs_left = 0, mounts = 0;

	state_dir = state_dir_of(fd, state_dir, own);
	/* its lock file is not held (we hold it now): no process on this host
	 * runs as that worker, whatever Redis's registry says of it */
	al_log("info", "sweep",
	       "worker=%s by=%s state_dir=%s note=\"no live worker on this host holds its lock "
	       "(%s/%s.lock); removing what it left\"",
	       id, self, state_dir ? state_dir : "-", dir, id);
	cgroups = al_cg_remove_worker(cg, id, &cg_left);
	if (state_dir && !al_pathf(path, sizeof(path), "%s/%s", state_dir, id) &&
	    (d = opendir(path))) {
		while ((de = readdir(d)))
			if (de->d_name[0] != '.' && de->d_type == DT_DIR &&
			    !al_pathf(sub, sizeof(sub), "%s/%s", path, de->d_name)) {
				/* the container image's tmpfs */
				mounts += umount2(sub, MNT_DETACH) == 0;
				al_jobfs_sweep(sub, NULL);
				dirs++;
				dirs_left += rmdir(sub) != 0 && errno != ENOENT;
			}
		closedir(d);
		rmdir(path);
	}
	if (!al_pathf(path, sizeof(path), "%s/%s.lock", dir, id))
		unlink(path);
	al_log(cg_left || dirs_left ? "warn" : "info", "sweep_done",
	       "worker=%s by=%s cgroups=%d cgroups_left=%d dirs=%d dirs_left=%d mounts=%d", id,
	       self, cgroups, cg_left, dirs, dirs_left, mounts);
}

/* Sweep id unless a live process holds its lock (we hold it meanwhile). */
static int maybe_sweep(const char *dir, const char *self, const char *id, const char *state_dir,
		       const struct al_cg_sys *cg)
{
	int fd;

	if (!strcmp(id, self) || !al_job_id_ok(id, strlen(id)) || state_shared(id))
		return 0; /* (a lock of such an id: no worker's state to sweep) */
	fd = lock_id(dir, id, LOCK_EX);
	if (fd < 0)
		return 0; /* alive (or unlockable): not ours to touch */
	sweep_id(dir, self, id, fd, state_dir, cg);
	close(fd);
	return 1;
}

int wk_hostlock_sweep_dead(const char *dir, const char *self, const char *state_dir)
{
	struct al_cg_sys cg;
	char path[PATH_MAX];
	int n = 0;

	if (al_cg_detect(&cg, self, NULL, NULL))
		cg.nall = 0;
	/* ids that have cgroups (host-wide), and ids with a lock file */
	for (int i = 0; i < cg.nall; i++) {
		DIR *d;
		struct dirent *de;

		if (al_pathf(path, sizeof(path), "%s/airlock", cg.all[i]) || !(d = opendir(path)))
			continue;
		while ((de = readdir(d)))
			if (de->d_type == DT_DIR && de->d_name[0] != '.')
				n += maybe_sweep(dir, self, de->d_name, state_dir, &cg);
		closedir(d);
	}
	{
		DIR *d = opendir(dir);
		struct dirent *de;

		while (d && (de = readdir(d))) {
			size_t l = strlen(de->d_name);
			char id[AL_ID_MAX + 1];

			if (l <= 5 || l - 5 > AL_ID_MAX || strcmp(de->d_name + l - 5, ".lock"))
				continue;
			snprintf(id, sizeof(id), "%.*s", (int)(l - 5), de->d_name);
			n += maybe_sweep(dir, self, id, state_dir, &cg);
		}
		if (d)
			closedir(d);
	}
	return n;
}
