/* snapshot.c - a paused session's snapshot file (snapshot.h;
 * docs/snapshots.md): written whole or not at all, private, checked
 * against its digest before anything reads it.
 *
 * The backend writes the sandbox's state (its snapshot op) into
 * DIR/<session>.snap.part, created 0600 by root in a 0700 directory; the
 * file is synced, read back once for its SHA-256, and only then renamed to
 * DIR/<session>.snap (and the directory synced): a worker killed while
 * pausing leaves a .part, which no record names and the next start of a
 * worker on that directory removes, or a whole file. A restore copies the
 * file into a sealed memfd while hashing it, and hands the backend that
 * copy only when the size and digest are the record's: what is restored is
 * what was checked, even if the file changes meanwhile. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/cleanup.h"
#include "../common/log.h"
#include "../proto/job.h"
#include "snapshot.h"

#define COPY_CHUNK (1u << 20)

/* mkdir -p of dir, each level 0700 (an existing one is left as it is,
 * but the last must be a directory that only root can enter). */
static int make_dir(const char *dir, struct al_err *err)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s", dir);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0700) && errno != EEXIST)
				return al_err_sys(err, "snapshot: mkdir %s", p);
			*s = '/';
		}
	if (mkdir(p, 0700) && errno != EEXIST)
		return al_err_sys(err, "snapshot: mkdir %s", p);
	if (stat(p, &st) || !S_ISDIR(st.st_mode))
		return al_err_set(err, AL_ESANDBOX, "snapshot: %s is not a directory", p);
	if (st.st_uid != 0 || (st.st_mode & 077))
		return al_err_set(err, AL_ESANDBOX,
				  "snapshot: %s must be root's and closed to others (0700), it is "
				  "uid %u mode %03o",
				  p, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
	return AL_OK;
}

int wk_snap_dir(const struct al_tier_policy *t, const struct al_backend_conf *conf, char *out,
		size_t cap, struct al_err *err)
{
	if (t->snapshot_dir)
		snprintf(out, cap, "%s", t->snapshot_dir);
	else
		snprintf(out, cap, "%s/snapshots/%s", conf->state_dir, conf->worker_id);
	return make_dir(out, err);
}

void wk_snap_path(const char *dir, const char *sid, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s.snap", dir, sid);
}

/* SHA-256 of fd's bytes from offset 0 as hex; also copied into to (>= 0). */
static int digest(int fd, int to, uint64_t *size, char hex[WK_SNAP_DIGEST_HEX + 1],
		  struct al_err *err)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char out[32];
	unsigned len = 0;
	char *buf = malloc(COPY_CHUNK);
	off_t at = 0;
	int rc = AL_OK;

	if (!md || !buf || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
		rc = al_err_set(err, AL_ENOMEM, "snapshot: out of memory");
		goto out;
	}
	for (;;) {
		ssize_t n = pread(fd, buf, COPY_CHUNK, at);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = al_err_sys(err, "snapshot: read");
			goto out;
		}
		if (n == 0)
			break;
		EVP_DigestUpdate(md, buf, (size_t)n);
		if (to >= 0 && al_write_all(to, buf, (size_t)n)) {
			rc = al_err_sys(err, "snapshot: copy");
			goto out;
		}
		at += n;
	}
	EVP_DigestFinal_ex(md, out, &len);
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", out[i]);
	*size = (uint64_t)at;
out:
	EVP_MD_CTX_free(md);
	free(buf);
	return rc;
}

int wk_snap_save(struct al_sandbox *sb, const char *dir, const char *sid, bool keep,
		 struct wk_snap *out, struct al_err *err)
{
	char part[PATH_MAX + 16];
	int fd, dfd, rc;

	wk_snap_path(dir, sid, out->path, sizeof(out->path));
	snprintf(part, sizeof(part), "%s.part", out->path);
	unlink(part);
	fd = open(part, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return al_err_sys(err, "snapshot: create %s", part);
	if ((rc = al_backend_snapshot(sb, fd, keep, err)) || fsync(fd) ||
	    (rc = digest(fd, -1, &out->size, out->sha256, err))) {
		if (!rc)
			rc = al_err_sys(err, "snapshot: fsync %s", part);
		close(fd);
		unlink(part);
		return rc;
	}
	close(fd);
	if (rename(part, out->path)) {
		rc = al_err_sys(err, "snapshot: rename to %s", out->path);
		unlink(part);
		return rc;
	}
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return AL_OK;
}

int wk_snap_open(const char *path, uint64_t size, const char *sha256, struct al_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int mfd;
	uint64_t got = 0;
	char hex[WK_SNAP_DIGEST_HEX + 1] = "";
	struct stat st;

	if (fd < 0)
		return al_err_sys(err, "snapshot %s: open", path);
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077)) {
		close(fd);
		return al_err_set(err, AL_ESANDBOX,
				  "snapshot %s: not a private file of root's (0600): refused",
				  path);
	}
	if ((uint64_t)st.st_size != size) {
		close(fd);
		return al_err_set(err, AL_ESANDBOX,
				  "snapshot %s: %llu bytes, its record says %llu: changed or "
				  "truncated, refused",
				  path, (unsigned long long)st.st_size, (unsigned long long)size);
	}
	mfd = memfd_create("airlock-snapshot", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0) {
		close(fd);
		return al_err_sys(err, "snapshot: memfd_create");
	}
	if (digest(fd, mfd, &got, hex, err)) {
		close(fd);
		close(mfd);
		return AL_ESANDBOX;
	}
	close(fd);
	if (got != size || strcmp(hex, sha256)) {
		close(mfd);
		return al_err_set(err, AL_ESANDBOX,
				  "snapshot %s: its SHA-256 is not its record's: changed or "
				  "truncated, refused",
				  path);
	}
	fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
	lseek(mfd, 0, SEEK_SET);
	return mfd;
}

int wk_snap_link(const char *from, const char *to, struct al_err *err)
{
	unlink(to);
	if (link(from, to))
		return al_err_sys(err, "snapshot: link %s", to);
	return AL_OK;
}

void wk_snap_remove(const char *path)
{
	if (path && *path && unlink(path) && errno != ENOENT)
		al_log("warn", "snapshot_remove", "path=%s error=\"%s\"", path, strerror(errno));
}

void wk_snap_sweep(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		size_t l = strlen(e->d_name);

		if (l > 10 && !strcmp(e->d_name + l - 10, ".snap.part") &&
		    unlinkat(dirfd(d), e->d_name, 0) == 0)
			al_log("info", "snapshot_swept",
			       "dir=%s file=%s note=\"a pause that never "
			       "finished\"",
			       dir, e->d_name);
	}
	if (d)
		closedir(d);
}

void wk_snap_each(const char *dir,
		  void (*fn)(const char *path, const char *sid, uint64_t age_ms, void *arg),
		  void *arg)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	while (d && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		char path[PATH_MAX], sid[AL_ID_MAX + 1];
		struct stat st;

		if (l <= 5 || l - 5 > AL_ID_MAX || strcmp(e->d_name + l - 5, ".snap") ||
		    e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		snprintf(sid, sizeof(sid), "%.*s", (int)(l - 5), e->d_name);
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		fn(path, sid,
		   now.tv_sec > st.st_ctim.tv_sec
		       ? (uint64_t)(now.tv_sec - st.st_ctim.tv_sec) * 1000
		       : 0,
		   arg);
	}
	if (d)
		closedir(d);
}
