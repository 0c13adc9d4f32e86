/* inpack.c - the inputs pack: write one, unpack one safely (inpack.h). */
#include "inpack.h"

#include "../proto/buf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/cleanup.h"

#define HDR 16

/* 1: n bytes read; 0: the end came first; -1: an error */
static int read_all(int fd, void *p, size_t n)
{
	char *c = p;

	while (n > 0) {
		ssize_t r = read(fd, c, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -1 : 0;
		c += r;
		n -= (size_t)r;
	}
	return 1;
}

bool al_pack_path_ok(const char *p)
{
	size_t n = strlen(p);

	if (n == 0 || n > AL_PACK_PATH_MAX || p[0] == '/')
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			return false;
	for (const char *c = p; *c;) {
		size_t len = strcspn(c, "/");

		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && !strncmp(c, "..", 2)))
			return false;
		c += len;
		c += *c == '/';
		if (c[-1] == '/' && !*c)
			return false; /* a trailing '/' */
	}
	return true;
}

bool al_pack_link_ok(const char *path, const char *target)
{
	long depth = 0;

	if (!target[0] || target[0] == '/' || strlen(target) > AL_PACK_PATH_MAX)
		return false;
	for (const char *c = path; *c; c++) /* the link's own directory's depth */
		depth += *c == '/';
	for (const char *c = target; *c;) {
		size_t len = strcspn(c, "/");

		if (len == 2 && !strncmp(c, "..", 2)) {
			if (--depth < 0)
				return false;
		} else if (len && !(len == 1 && c[0] == '.')) {
			depth++;
		}
		c += len;
		c += *c == '/';
	}
	return true;
}

int al_pack_w_entry(struct al_pack_w *w, int type, const char *path, unsigned mode, uint64_t size,
		    struct al_err *err)
{
	unsigned char h[HDR] = {0};
	size_t n = strlen(path);

	if (n > AL_PACK_PATH_MAX)
		return al_err_set(err, AL_EINVAL, "inputs: a path of %zu bytes, at most %d", n,
				  AL_PACK_PATH_MAX);
	if (++w->entries > (w->max_entries ? w->max_entries : AL_PACK_ENTRIES_MAX))
		return al_err_set(err, AL_EINVAL, "inputs: more than %u entries in all",
				  w->max_entries ? w->max_entries : AL_PACK_ENTRIES_MAX);
	h[0] = (unsigned char)type;
	h[2] = mode & 0xff;
	h[3] = (mode >> 8) & 0xff;
	for (int i = 0; i < 4; i++)
		h[4 + i] = (n >> (8 * i)) & 0xff;
	for (int i = 0; i < 8; i++)
		h[8 + i] = (size >> (8 * i)) & 0xff;
	if (al_write_all(w->fd, h, HDR) || al_write_all(w->fd, path, n))
		return al_err_sys(err, "inputs: write the pack");
	w->off += HDR + n;
	return AL_OK;
}

int al_pack_w_data(struct al_pack_w *w, const void *data, size_t len, struct al_err *err)
{
	if (al_write_all(w->fd, data, len))
		return al_err_sys(err, "inputs: write the pack");
	w->off += len;
	return AL_OK;
}

int al_pack_w_end(struct al_pack_w *w, struct al_err *err)
{
	static const char zeros[AL_PACK_SECTOR];
	int rc = al_pack_w_entry(w, AL_PACK_END, "", 0, 0, err);
	size_t pad = (AL_PACK_SECTOR - w->off % AL_PACK_SECTOR) % AL_PACK_SECTOR;

	return rc ? rc : al_pack_w_data(w, zeros, pad, err);
}

/* The directory that holds path's last component, walked from top with no
 * symlink followed, the missing ones made (uid:gid, 0755); *name points
 * at the last component. -1 with errno (ELOOP/ENOTDIR: a symlink or a
 * file on the way). */
static int walk_parent(int top, char *path, uid_t uid, gid_t gid, const char **name)
{
	int cur = dup(top);
	char *c = path, *slash;

	while (cur >= 0 && (slash = strchr(c, '/'))) {
		int next;

		*slash = '\0';
		next = openat(cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT) {
			if ((mkdirat(cur, c, 0755) && errno != EEXIST) ||
			    fchownat(cur, c, uid, gid, AT_SYMLINK_NOFOLLOW))
				next = -1;
			else
				next =
				    openat(cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		*slash = '/';
		{
			int e = errno;

			close(cur);
			errno = e;
		}
		cur = next;
		c = slash + 1;
	}
	*name = c;
	return cur;
}

/* Copy n bytes from in to out (either may be the pack). */
/* One file's bytes into the pack: exactly size of them (a file that
 * changed under us is an error, never a record of the wrong length). */
static int w_file(struct al_pack_w *w, int dirfd, const char *name, const char *path,
		  const struct stat *st, struct al_err *err)
{
	cleanup_close int in = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	uint64_t left = (uint64_t)st->st_size;
	char buf[65536];
	int rc;

	if (in < 0)
		return al_err_sys(err, "pack: open %.200s", path);
	if ((rc = al_pack_w_entry(w, AL_PACK_FILE, path, st->st_mode & 0777, left, err)))
		return rc;
	while (left > 0) {
		ssize_t n = read(in, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? al_err_sys(err, "pack: read %.200s", path)
				     : al_err_set(err, AL_ESYS, "pack: %.200s shrank while packed",
						  path);
		if ((rc = al_pack_w_data(w, buf, (size_t)n, err)))
			return rc;
		left -= (uint64_t)n;
	}
	return AL_OK;
}

static int w_tree(struct al_pack_w *w, int dirfd, char *path, size_t len, unsigned depth,
		  struct al_err *err)
{
	DIR *d;
	struct dirent *e;
	int rc = AL_OK, fd = dup(dirfd);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return al_err_sys(err, "pack: open %.200s", path);
	}
	while (!rc && (errno = 0, e = readdir(d))) {
		struct stat st;
		size_t n = strlen(e->d_name);

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (len + 1 + n > AL_PACK_PATH_MAX || depth > 256 ||
		    w->entries >= AL_PACK_TREE_ENTRIES_MAX) {
			rc = al_err_set(err, AL_EINVAL,
					"pack: %.200s/%.100s: past the pack's limits", path,
					e->d_name);
			break;
		}
		snprintf(path + len, AL_PACK_PATH_MAX + 1 - len, "/%s", e->d_name);
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			rc = al_err_sys(err, "pack: stat %.200s", path);
		} else if (S_ISDIR(st.st_mode)) {
			cleanup_close int sub = openat(
			    dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			rc = sub < 0
				 ? al_err_sys(err, "pack: open %.200s", path)
				 : al_pack_w_entry(w, AL_PACK_DIR, path, st.st_mode & 0777, 0, err);
			if (!rc)
				rc = w_tree(w, sub, path, len + 1 + n, depth + 1, err);
		} else if (S_ISREG(st.st_mode)) {
			rc = w_file(w, dirfd, e->d_name, path, &st, err);
		} else if (S_ISLNK(st.st_mode)) {
			char target[AL_PACK_PATH_MAX + 1];
			ssize_t t = readlinkat(dirfd, e->d_name, target, sizeof(target));

			if (t < 0 || t > AL_PACK_PATH_MAX)
				rc = al_err_sys(err, "pack: readlink %.200s", path);
			else if (!(rc = al_pack_w_entry(w, AL_PACK_SYMLINK, path, 0777, (uint64_t)t,
							err)))
				rc = al_pack_w_data(w, target, (size_t)t, err);
		} /* a fifo, a socket, a device: nothing a pack holds */
		path[len] = '\0';
	}
	if (!rc && errno)
		rc = al_err_sys(err, "pack: read the directory %.200s", path);
	closedir(d);
	return rc;
}

int al_pack_w_tree(struct al_pack_w *w, int dirfd, const char *prefix, struct al_err *err)
{
	char *path = malloc(AL_PACK_PATH_MAX + 1);
	struct stat st;
	int rc;

	if (!path)
		return al_err_set(err, AL_ENOMEM, "pack: out of memory");
	snprintf(path, AL_PACK_PATH_MAX + 1, "%s", prefix);
	w->max_entries = AL_PACK_TREE_ENTRIES_MAX;
	rc = fstat(dirfd, &st) ? al_err_sys(err, "pack: stat %.200s", prefix)
			       : al_pack_w_entry(w, AL_PACK_DIR, path, st.st_mode & 0777, 0, err);
	if (!rc)
		rc = w_tree(w, dirfd, path, strlen(path), 0, err);
	free(path);
	return rc;
}

static int copy_fd(int in, int out, uint64_t n)
{
	char buf[65536];

	while (n > 0) {
		size_t k = n < sizeof(buf) ? (size_t)n : sizeof(buf);
		int r = read_all(in, buf, k);

		if (r <= 0) {
			errno = r == 0 ? EPIPE : errno;
			return AL_ESYS;
		}
		if (al_write_all(out, buf, k))
			return AL_ESYS;
		n -= k;
	}
	return 0;
}

static int entry_failed(struct al_err *err, const char *path, const char *what)
{
	int e = errno;

	if (e == ENOSPC || e == EDQUOT)
		return al_err_set(err, AL_EINVAL,
				  "inputs: \"%.200s\": the inputs need more than the job's disk "
				  "limit",
				  path);
	if (e == EEXIST || e == ELOOP || e == ENOTDIR || e == EISDIR)
		return al_err_set(err, AL_EINVAL,
				  "inputs: \"%.200s\": %s (%s: two inputs or a file and an input "
				  "meet, or an entry lies under a symlink)",
				  path, what, strerror(e));
	return al_err_sys(err, "inputs: \"%.200s\": %s", path, what);
}

int al_pack_unpack_as(int fd, int dirfd, uid_t uid, gid_t gid, uint64_t max_bytes, bool tree,
		      struct al_err *err)
{
	uint64_t data = 0;
	char *path = malloc(AL_PACK_PATH_MAX + 1), *target = malloc(AL_PACK_PATH_MAX + 1);
	int rc = AL_OK;

	if (!path || !target) {
		rc = al_err_set(err, AL_ENOMEM, "inputs: out of memory");
		goto out_names;
	}
	for (uint32_t n = 0;; n++) {
		unsigned char h[HDR];
		uint64_t size = 0, plen = 0;
		unsigned mode;
		const char *name;
		cleanup_close int parent = -1, out = -1;

		if (n > (tree ? AL_PACK_TREE_ENTRIES_MAX : AL_PACK_ENTRIES_MAX)) {
			rc = al_err_set(err, AL_EINVAL, "inputs: more than %u entries",
					tree ? AL_PACK_TREE_ENTRIES_MAX : AL_PACK_ENTRIES_MAX);
			break;
		}
		if (read_all(fd, h, HDR) <= 0) {
			rc = al_err_set(err, AL_EINVAL, "inputs: the pack ends without its end");
			break;
		}
		for (int i = 3; i >= 0; i--)
			plen = plen << 8 | h[4 + i];
		for (int i = 7; i >= 0; i--)
			size = size << 8 | h[8 + i];
		mode = (unsigned)(h[2] | h[3] << 8) & 0777;
		if (h[0] == AL_PACK_END)
			break;
		if (plen > AL_PACK_PATH_MAX || read_all(fd, path, plen) <= 0) {
			rc = al_err_set(err, AL_EINVAL, "inputs: a bad record in the pack");
			break;
		}
		path[plen] = '\0';
		if (strlen(path) != plen || !al_pack_path_ok(path)) {
			rc = al_err_set(err, AL_EINVAL, "inputs: entry \"%.200s\": a bad path",
					path);
			break;
		}
		if (h[0] == AL_PACK_SYMLINK || h[0] == AL_PACK_COPY) {
			if (size > AL_PACK_PATH_MAX || read_all(fd, target, size) <= 0) {
				rc = al_err_set(err, AL_EINVAL, "inputs: a bad record in the pack");
				break;
			}
			target[size] = '\0';
			if (strlen(target) != size ||
			    (h[0] == AL_PACK_SYMLINK ? !tree && !al_pack_link_ok(path, target)
						     : !al_pack_path_ok(target))) {
				rc = al_err_set(err, AL_EINVAL,
						"inputs: \"%.200s\": a link to \"%.200s\" points "
						"out of the tree",
						path, target);
				break;
			}
		}
		if (h[0] == AL_PACK_FILE && max_bytes && (data += size) > max_bytes) {
			rc = al_err_set(err, AL_EINVAL,
					"inputs: more than %llu bytes unpacked (the tier's "
					"max_input_bytes)",
					(unsigned long long)max_bytes);
			break;
		}
		if ((parent = walk_parent(dirfd, path, uid, gid, &name)) < 0) {
			rc = entry_failed(err, path, "its directory");
			break;
		}
		switch (h[0]) {
		case AL_PACK_DIR:
			if (mkdirat(parent, name, 0700) && errno != EEXIST)
				rc = entry_failed(err, path, "mkdir");
			else if ((out = openat(parent, name,
					       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
				     0 ||
				 fchown(out, uid, gid) || fchmod(out, mode | 0700))
				rc = entry_failed(err, path, "a directory");
			break;
		case AL_PACK_FILE:
		case AL_PACK_COPY:
			out = openat(parent, name,
				     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (out < 0) {
				rc = entry_failed(err, path, "create");
			} else if (h[0] == AL_PACK_FILE) {
				if (copy_fd(fd, out, size))
					rc = errno == EPIPE ? al_err_set(err, AL_EINVAL,
									 "inputs: the pack ends "
									 "inside \"%.200s\"",
									 path)
							    : entry_failed(err, path, "write");
			} else {
				/* a hard link: a copy of the earlier file, which must be one */
				const char *oname;
				cleanup_close int op = walk_parent(dirfd, target, uid, gid, &oname);
				cleanup_close int of =
				    op < 0 ? -1
					   : openat(op, oname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
				struct stat st;

				if (of < 0 || fstat(of, &st) || !S_ISREG(st.st_mode))
					rc = al_err_set(err, AL_EINVAL,
							"inputs: \"%.200s\": a hard link to "
							"\"%.200s\", which is no file before it",
							path, target);
				else if (max_bytes && (data += (uint64_t)st.st_size) > max_bytes)
					rc =
					    al_err_set(err, AL_EINVAL,
						       "inputs: more than %llu bytes unpacked (the "
						       "tier's max_input_bytes)",
						       (unsigned long long)max_bytes);
				else if (copy_fd(of, out, (uint64_t)st.st_size))
					rc = entry_failed(err, path, "copy");
				mode = st.st_mode & 0777;
			}
			if (!rc && (fchown(out, uid, gid) || fchmod(out, mode | 0600)))
				rc = entry_failed(err, path, "chown");
			break;
		case AL_PACK_SYMLINK:
			if (symlinkat(target, parent, name) ||
			    fchownat(parent, name, uid, gid, AT_SYMLINK_NOFOLLOW))
				rc = entry_failed(err, path, "symlink");
			break;
		default:
			rc =
			    al_err_set(err, AL_EINVAL, "inputs: an unknown record '%c' in the pack",
				       h[0] >= 0x20 && h[0] < 0x7f ? h[0] : '?');
		}
		if (rc)
			break;
	}
out_names:
	free(path);
	free(target);
	return rc;
}

int al_pack_unpack(int fd, int dirfd, uid_t uid, gid_t gid, uint64_t max_bytes, struct al_err *err)
{
	return al_pack_unpack_as(fd, dirfd, uid, gid, max_bytes, false, err);
}
