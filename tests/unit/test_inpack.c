/* test_inpack.c - the inputs pack (backends/inpack.h): a pack written and
 * unpacked gives the tree, and packs a rogue fetcher or a bit flip could
 * make are refused without writing outside the directory: bad paths,
 * links out, entries under a symlink, truncation, a clash, the byte cap,
 * and unpacking over a tmpfs too small (the disk limit). Runs as anyone
 * (no chown needed: the files go to the caller's own uid). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../backends/inpack.h"
#include "tap.h"

struct rec {
	int type;
	const char *path;
	unsigned mode;
	const char *data; /* file data, link target or copy's source */
	long size;	  /* -1: strlen(data); else claimed size (for lies) */
};

/* Write recs (then the end record unless noend) into a new temp file. */
static int pack_of(const struct rec *r, size_t n, int noend)
{
	char name[] = "/tmp/al-inpack-XXXXXX";
	int fd = mkstemp(name);
	struct al_pack_w w = {.fd = fd};
	struct al_err err = {0};

	unlink(name);
	for (size_t i = 0; i < n; i++) {
		size_t len = r[i].data ? strlen(r[i].data) : 0;
		uint64_t size = r[i].size >= 0 ? (uint64_t)r[i].size : len;

		if (al_pack_w_entry(&w, r[i].type, r[i].path, r[i].mode, size, &err) ||
		    (len && al_pack_w_data(&w, r[i].data, len, &err)))
			return -1;
	}
	if (!noend && al_pack_w_end(&w, &err))
		return -1;
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static char top[64];

static int fresh_dir(void)
{
	char cmd[128];

	if (top[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
		if (system(cmd))
			return -1;
	}
	snprintf(top, sizeof(top), "/tmp/al-inpack-dir-%d", (int)getpid());
	mkdir(top, 0700);
	return open(top, O_RDONLY | O_DIRECTORY);
}

static int unpack(const struct rec *r, size_t n, int noend, uint64_t max, struct al_err *err)
{
	int fd = pack_of(r, n, noend), dir = fresh_dir(), rc;

	memset(err, 0, sizeof(*err));
	rc = al_pack_unpack(fd, dir, getuid(), getgid(), max, err);
	close(fd);
	close(dir);
	return rc;
}

/* The tree under sfd packed whole as "work" (al_pack_w_tree) into a
 * temporary file, rewound; -1 (err says why) when it could not be. */
static int pack_tree(int sfd, struct al_err *err)
{
	int pfd = open("/tmp", O_TMPFILE | O_RDWR, 0600);
	struct al_pack_w w = {.fd = pfd};

	memset(err, 0, sizeof(*err));
	if (sfd < 0 || pfd < 0 || al_pack_w_tree(&w, sfd, "work", err) || al_pack_w_end(&w, err)) {
		if (pfd >= 0)
			close(pfd);
		return -1;
	}
	lseek(pfd, 0, SEEK_SET);
	return pfd;
}

/* The pack at pfd unpacked into a fresh top: as a tree (any symlink, more
 * entries), else as inputs. */
static int unpack_fd(int pfd, bool tree, struct al_err *err)
{
	int dir = fresh_dir(), rc;

	memset(err, 0, sizeof(*err));
	if (pfd < 0)
		rc = -1;
	else if (lseek(pfd, 0, SEEK_SET), tree)
		rc = al_pack_unpack_as(pfd, dir, getuid(), getgid(), 0, true, err);
	else
		rc = al_pack_unpack(pfd, dir, getuid(), getgid(), 0, err);
	close(dir);
	return rc;
}

static const char *in_top(const char *rel)
{
	static char p[256];

	snprintf(p, sizeof(p), "%s/%s", top, rel);
	return p;
}

int main(void)
{
	struct al_err err;
	struct stat st;
	char buf[64] = "";
	int rc;

	/* a good tree */
	{
		const struct rec good[] = {
		    {AL_PACK_DIR, "d", 0755, NULL, -1},
		    {AL_PACK_FILE, "d/run.sh", 0755, "#!/bin/sh\n", -1},
		    {AL_PACK_FILE, "deep/er/f.txt", 0400, "data", -1},
		    {AL_PACK_SYMLINK, "d/l", 0777, "run.sh", -1},
		    {AL_PACK_COPY, "d/copy", 0, "d/run.sh", -1},
		};
		rc = unpack(good, 5, 0, 0, &err);
		TAP_OK(rc == AL_OK, "a good pack unpacks (%s)", err.msg);
		TAP_OK(!stat(in_top("d/run.sh"), &st) && (st.st_mode & 0777) == 0755 &&
			   st.st_size == 10,
		       "a file with its mode and bytes");
		TAP_OK(!stat(in_top("deep/er/f.txt"), &st) && (st.st_mode & 0777) == 0600,
		       "missing directories are made; a file stays writable by the job (0400 -> "
		       "0600)");
		TAP_OK(readlink(in_top("d/l"), buf, sizeof(buf) - 1) == 6 && !strcmp(buf, "run.sh"),
		       "a relative symlink inside the tree");
		TAP_OK(!lstat(in_top("d/copy"), &st) && S_ISREG(st.st_mode) && st.st_size == 10 &&
			   st.st_nlink == 1,
		       "a hard link becomes a copy of its file");
	}

	/* refused: each names the entry, nothing lands outside */
	static const struct {
		const char *name;
		struct rec r[3];
		size_t n;
		int noend;
		uint64_t max;
		const char *needle;
	} bad[] = {
	    {"a path with ..", {{AL_PACK_FILE, "../out", 0644, "x", -1}}, 1, 0, 0, "a bad path"},
	    {"an absolute path",
	     {{AL_PACK_FILE, "/tmp/al-out", 0644, "x", -1}},
	     1,
	     0,
	     0,
	     "a bad path"},
	    {"an empty component", {{AL_PACK_FILE, "a//b", 0644, "x", -1}}, 1, 0, 0, "a bad path"},
	    {"a control character", {{AL_PACK_FILE, "a\nb", 0644, "x", -1}}, 1, 0, 0, "a bad path"},
	    {"an absolute symlink",
	     {{AL_PACK_SYMLINK, "l", 0777, "/etc", -1}},
	     1,
	     0,
	     0,
	     "points out of the tree"},
	    {"a symlink above the top",
	     {{AL_PACK_SYMLINK, "a/l", 0777, "../..", -1}},
	     1,
	     0,
	     0,
	     "points out of the tree"},
	    {"an entry under a symlink",
	     {{AL_PACK_DIR, "sub", 0755, NULL, -1},
	      {AL_PACK_SYMLINK, "d", 0777, "sub", -1},
	      {AL_PACK_FILE, "d/x", 0644, "x", -1}},
	     3,
	     0,
	     0,
	     "lies under a symlink"},
	    {"a file written twice",
	     {{AL_PACK_FILE, "f", 0644, "a", -1}, {AL_PACK_FILE, "f", 0644, "b", -1}},
	     2,
	     0,
	     0,
	     "File exists"},
	    {"a file through a file",
	     {{AL_PACK_FILE, "f", 0644, "a", -1}, {AL_PACK_FILE, "f/g", 0644, "b", -1}},
	     2,
	     0,
	     0,
	     "\"f/g\""},
	    {"a copy of nothing",
	     {{AL_PACK_COPY, "c", 0, "missing", -1}},
	     1,
	     0,
	     0,
	     "which is no file before it"},
	    {"a copy of a symlink",
	     {{AL_PACK_SYMLINK, "l", 0777, "x", -1}, {AL_PACK_COPY, "c", 0, "l", -1}},
	     2,
	     0,
	     0,
	     "which is no file before it"},
	    {"a file claiming more bytes than the pack holds",
	     {{AL_PACK_FILE, "f", 0644, "abc", 1000}},
	     1,
	     1,
	     0,
	     "ends inside"},
	    {"no end record", {{AL_PACK_DIR, "d", 0755, NULL, -1}}, 1, 1, 0, "without its end"},
	    {"an unknown record", {{'z', "d", 0755, NULL, -1}}, 1, 0, 0, "unknown record"},
	    {"more bytes than the cap",
	     {{AL_PACK_FILE, "a", 0644, "12345", -1}, {AL_PACK_FILE, "b", 0644, "67890", -1}},
	     2,
	     0,
	     8,
	     "max_input_bytes"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rc = unpack(bad[i].r, bad[i].n, bad[i].noend, bad[i].max, &err);
		TAP_OK(rc == AL_EINVAL && strstr(err.msg, bad[i].needle), "refused: %s (%s)",
		       bad[i].name, err.msg);
	}
	TAP_OK(access("/tmp/out", F_OK) && access("/tmp/al-out", F_OK) &&
		   access(in_top("sub/x"), F_OK),
	       "nothing of the refused packs landed outside, nor through the symlink");

	/* a directory packed whole (a runsc session's files in its snapshot):
	 * unpacked with any symlink allowed, it is the same tree; a fifo is
	 * left out; the inputs' unpack refuses the absolute link */
	{
		char src[64], cmd[1024];
		int sfd, pfd;

		snprintf(src, sizeof(src), "/tmp/al-inpack-src-%d", (int)getpid());
		snprintf(cmd, sizeof(cmd),
			 "rm -rf %s && mkdir -p %s/a/b && printf kept > %s/a/b/f.txt && "
			 "chmod 640 %s/a/b/f.txt && ln -s /usr/lib %s/abs && ln -s a/b %s/rel && "
			 "mkfifo %s/fifo && : > %s/empty",
			 src, src, src, src, src, src, src, src);
		sfd = system(cmd) ? -1 : open(src, O_RDONLY | O_DIRECTORY);
		pfd = pack_tree(sfd, &err);
		TAP_OK(pfd >= 0, "a directory packs whole (%s)", err.msg);
		rc = unpack_fd(pfd, true, &err);
		memset(buf, 0, sizeof(buf));
		TAP_OK(rc == AL_OK && !stat(in_top("work/a/b/f.txt"), &st) &&
			   (st.st_mode & 0777) == 0640 && st.st_size == 4 &&
			   readlink(in_top("work/abs"), buf, sizeof(buf) - 1) == 8 &&
			   !strcmp(buf, "/usr/lib") && !lstat(in_top("work/rel"), &st) &&
			   S_ISLNK(st.st_mode) && !stat(in_top("work/empty"), &st) &&
			   st.st_size == 0 && access(in_top("work/fifo"), F_OK),
		       "...and unpacks to the same tree: modes, bytes, an empty file, symlinks "
		       "absolute and relative; no fifo (%s)",
		       err.msg);
		rc = unpack_fd(pfd, false, &err);
		TAP_OK(rc == AL_EINVAL && strstr(err.msg, "points out of the tree"),
		       "...which the inputs' unpack refuses: a symlink out of the tree (%s)",
		       err.msg);
		if (sfd >= 0)
			close(sfd);
		if (pfd >= 0)
			close(pfd);
		snprintf(cmd, sizeof(cmd), "rm -rf %s", src);
		if (system(cmd))
			TAP_OK(0, "remove %s", src);
	}

	/* a tree of more entries than the inputs' cap (a session's files can
	 * fill its tmpfs's inodes): packed whole and unpacked as a tree; the
	 * inputs' unpack refuses it */
	{
		char src[64], name[96];
		int sfd, pfd, made = 0;
		unsigned n = AL_PACK_ENTRIES_MAX + 10;

		snprintf(src, sizeof(src), "/tmp/al-inpack-many-%d", (int)getpid());
		mkdir(src, 0700);
		sfd = open(src, O_RDONLY | O_DIRECTORY);
		for (unsigned i = 0; sfd >= 0 && i < n; i++) {
			int f;

			snprintf(name, sizeof(name), "f%u", i);
			if ((f = openat(sfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0) {
				close(f);
				made++;
			}
		}
		pfd = pack_tree(sfd, &err);
		rc = pfd < 0 ? -1 : unpack_fd(pfd, true, &err);
		TAP_OK(made == (int)n && rc == AL_OK && !access(in_top("work/f60009"), F_OK),
		       "a tree of %u entries (past the inputs' %d) packs whole and unpacks (%s)", n,
		       AL_PACK_ENTRIES_MAX, err.msg);
		rc = unpack_fd(pfd, false, &err);
		TAP_OK(rc == AL_EINVAL && strstr(err.msg, "more than 60000 entries"),
		       "...which the inputs' unpack refuses (%s)", err.msg);
		for (unsigned i = 0; sfd >= 0 && i < n; i++) {
			snprintf(name, sizeof(name), "f%u", i);
			unlinkat(sfd, name, 0);
		}
		if (sfd >= 0)
			close(sfd);
		if (pfd >= 0)
			close(pfd);
		rmdir(src);
	}

	/* the disk limit: a tmpfs of 64 KiB (as root) */
	if (getuid() == 0) {
		static char big[200000];
		const struct rec r[] = {{AL_PACK_FILE, "big", 0644, big, -1}};
		int fd, dir = fresh_dir();

		memset(big, 'x', sizeof(big) - 1);
		fd = pack_of(r, 1, 0);
		if (mount("al-test", top, "tmpfs", 0, "size=65536")) {
			TAP_OK(0, "mount a tmpfs: %s", strerror(errno));
		} else {
			close(dir);
			dir = open(top, O_RDONLY | O_DIRECTORY);
			memset(&err, 0, sizeof(err));
			rc = al_pack_unpack(fd, dir, 0, 0, 0, &err);
			TAP_OK(rc == AL_EINVAL && strstr(err.msg, "more than the job's disk limit"),
			       "inputs over the disk limit: a clear error (%s)", err.msg);
			close(dir);
			umount(top);
		}
		close(fd);
	} else {
		printf("ok %d - # SKIP the disk limit needs root (a tmpfs)\n", ++tap_n);
	}
	fresh_dir();
	rmdir(top);
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
