/* newroot.c - a root of its own for a sandboxed process (see newroot.h). */
#include "newroot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostroot.h"

static int fail(const char **what, const char *step)
{
	*what = step;
	return -1;
}

int al_root_begin(const char *stage, const char **what)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return fail(what, "make / private");
	if (mount("airlock-root", stage, "tmpfs", MS_NOSUID | MS_NODEV,
		  "size=1m,nr_inodes=4096,mode=0755"))
		return fail(what, "mount the sandbox root");
	return 0;
}

int al_root_bind_ro(const char *src, const char *dst, bool is_dir, const char **what)
{
	int fd;

	if (is_dir) {
		if (mkdir(dst, 0755))
			return fail(what, "make a mount point in the sandbox root");
	} else if ((fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) < 0 || close(fd)) {
		return fail(what, "make a mount point in the sandbox root");
	}
	if (mount(src, dst, NULL, MS_BIND, NULL) ||
	    mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL))
		return fail(what, "bind a host path read-only");
	return 0;
}

int al_root_keep(const char *src, const char *dst, const char **what)
{
	struct stat st;
	char target[PATH_MAX];
	ssize_t n;

	if (lstat(src, &st))
		return 0;
	if (S_ISLNK(st.st_mode)) {
		if ((n = readlink(src, target, sizeof(target) - 1)) < 0)
			return fail(what, "read a host symlink");
		target[n] = '\0';
		return symlink(target, dst) ? fail(what, "copy a host symlink") : 0;
	}
	if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))
		return al_root_bind_ro(src, dst, S_ISDIR(st.st_mode), what);
	return 0;
}

int al_root_host_top(const char *stage, const char **what)
{
	static const char *const top[] = AL_HOST_TOP;
	char src[64], dst[PATH_MAX];

	for (const char *const *t = top; *t; t++) {
		snprintf(src, sizeof(src), "/%s", *t);
		snprintf(dst, sizeof(dst), "%s/%s", stage, *t);
		if (al_root_keep(src, dst, what))
			return -1;
	}
	return 0;
}

int al_root_write(const char *path, const char *text, const char **what)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	size_t n = strlen(text);

	if (fd < 0 || write(fd, text, n) != (ssize_t)n || close(fd))
		return fail(what, "write a file of the sandbox root");
	return 0;
}

int al_root_dev(const char *stage, const char *const *nodes, const char **what)
{
	static const char *const links[][2] = {{"/proc/self/fd", "fd"},
					       {"/proc/self/fd/0", "stdin"},
					       {"/proc/self/fd/1", "stdout"},
					       {"/proc/self/fd/2", "stderr"}};
	char dev[PATH_MAX], path[PATH_MAX + 16];
	int fd;

	snprintf(dev, sizeof(dev), "%s/dev", stage);
	if (mkdir(dev, 0755) || mount("airlock-dev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC,
				      "size=64k,nr_inodes=64,mode=0755"))
		return fail(what, "mount /dev");
	for (const char *const *d = nodes; *d; d++) {
		char src[64];

		snprintf(src, sizeof(src), "/dev/%s", *d);
		snprintf(path, sizeof(path), "%s/%s", dev, *d);
		if ((fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666)) < 0 || close(fd) ||
		    mount(src, path, NULL, MS_BIND, NULL))
			return fail(what, "bind a device node");
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dev, links[i][1]);
		if (symlink(links[i][0], path))
			return fail(what, "make a /dev link");
	}
	snprintf(path, sizeof(path), "%s/shm", dev);
	if (mkdir(path, 0755))
		return fail(what, "mkdir /dev/shm");
	if (mount(NULL, dev, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL))
		return fail(what, "make /dev read-only");
	return 0;
}

int al_root_enter(const char *stage, const char **what)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/proc", stage);
	if (mkdir(path, 0555) ||
	    mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		return fail(what, "mount /proc");
	snprintf(path, sizeof(path), "%s/.old", stage);
	if (mkdir(path, 0700))
		return fail(what, "mkdir in the sandbox root");
	if (chdir(stage) || syscall(SYS_pivot_root, ".", ".old") || chdir("/"))
		return fail(what, "pivot into the sandbox root");
	if (umount2("/.old", MNT_DETACH) || rmdir("/.old"))
		return fail(what, "detach the host's root");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL))
		return fail(what, "make the sandbox root read-only");
	return 0;
}
