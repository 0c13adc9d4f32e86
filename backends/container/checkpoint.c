/* checkpoint.c - a runsc session's snapshot (docs/snapshots.md): `runsc
 * checkpoint` saves the Sentry (the session's processes, their memory,
 * the sandbox's own /dev) and stops the sandbox; the session's files live
 * on the host, in the job's tmpfs (its work directory and /tmp, bound in
 * through the gofer), so the snapshot carries them too. Its format:
 *
 *   "airlock-runsc-snapshot 1\n", a JSON line {"image": the catalogue
 *   image's hash (or "host"), "platform": runsc's}, the checkpoint's size
 *   (8 bytes, little-endian), runsc's checkpoint.img, then an inputs pack
 *   (inpack.h) of the tmpfs's work/ and tmp/.
 *
 * A restore (ctr_restore_unpack, from ctr_make) refuses a snapshot of
 * another image (rebuilt since the pause: the restored processes map its
 * files) or platform, puts the files into the new job's tmpfs, owned by
 * its slot's job uid, and the image in its bundle, where the shim finds it
 * and runs `runsc restore` instead of `run` (shim.c). runsc's checkpoint
 * cannot save a host socket that is connected (it fails and the sandbox is
 * gone): the worker has its session server let go of its connection
 * first, and the restored server connects again
 * (worker/session_server.py, "release"); with network egress the relay
 * (relay.c) closes its connections to the worker's proxy before that, and
 * a job's connections open at the pause are closed. runc and crun cannot
 * checkpoint at all here (CRIU). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../proto/buf.h"
#include "../inpack.h"
#include "../jobfs_layout.h"
#include "ctr.h"

#define MAGIC	      "airlock-runsc-snapshot 1\n"
#define CHECKPOINT_MS 120000	 /* runsc's checkpoint of a large session, at most */
#define ROOM_SLACK    (4u << 20) /* a snapshot's head, its files' pack headers, and more */
#define HEAD_MAX      512	 /* the JSON line's bytes, at most */

static const char *const no_criu =
    "it cannot save its processes (a checkpoint needs CRIU, which does not work on the "
    "kernels Airlock runs on): close the session and open another, or use a microVM or "
    "runsc tier";

int ctr_snapshot_ok(const char *runtime, struct al_err *err)
{
	const char *rt = runtime ? runtime : ctr_host.runtime;

	return ctr_is_runsc(rt[0] ? rt : "runc") ? AL_OK
						 : al_err_set(err, AL_EINVAL, "%s", no_criu);
}

/* BUNDLE/image: where runsc writes checkpoint.img, and where the shim
 * looks for one to restore */
static int image_dir(const struct ctr_sb *c, char *out, size_t cap, struct al_err *err)
{
	if (al_pathf(out, cap, "%s/image", c->fs.dir))
		return al_err_set(err, AL_EINVAL, "container: a path too long under %s", c->fs.dir);
	return AL_OK;
}

static int put_u64(int fd, uint64_t v, struct al_err *err)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	return al_write_all(fd, b, 8) ? al_err_sys(err, "container: write the snapshot") : AL_OK;
}

/* What a restore must find the same: the JSON line of the head. */
static int shape_line(const struct al_sandbox *sb, char *out, size_t cap, struct al_err *err)
{
	const struct ctr_sb *c = sb->priv;
	char hash[128] = "host";
	json_t *doc;
	char *text;

	if (sb->spec.image)
		al_image_hash(sb->conf, sb->spec.image, hash, sizeof(hash));
	doc = json_pack("{s:s, s:s}", "image", hash, "platform",
			c->rt.platform ? c->rt.platform : "");
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!text || strlen(text) + 2 > cap || strlen(text) + 1 > HEAD_MAX) {
		free(text);
		return al_err_set(err, AL_ENOMEM, "container: the snapshot's head");
	}
	snprintf(out, cap, "%s\n", text);
	free(text);
	return AL_OK;
}

/* The job's work/ and tmp/ as a pack on fd. */
static int pack_files(const struct ctr_sb *c, int fd, struct al_err *err)
{
	static const char *const dirs[] = {AL_JOBFS_WORK, AL_JOBFS_TMP};
	struct al_pack_w w = {.fd = fd};
	cleanup_close int root = open(c->fs.work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (root < 0)
		return al_err_sys(err, "container: open %s", c->fs.work);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		cleanup_close int d =
		    openat(root, dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (d < 0)
			return al_err_sys(err, "container: open %s/%s", c->fs.work, dirs[i]);
		if ((rc = al_pack_w_tree(&w, d, dirs[i], err)))
			return al_err_wrap(err, "container: the session's files");
	}
	return al_pack_w_end(&w, err);
}

/* Bytes free to root on path's filesystem (avail), and those in use
 * (used); either may be NULL. */
static int room_at(const char *path, uint64_t *avail, uint64_t *used, struct al_err *err)
{
	struct statvfs v;

	if (statvfs(path, &v))
		return al_err_sys(err, "container: statvfs %s", path);
	if (avail)
		*avail = (uint64_t)v.f_bfree * v.f_frsize;
	if (used)
		*used = (uint64_t)(v.f_blocks - v.f_bfree) * v.f_frsize;
	return AL_OK;
}

/* The checkpoint (at most the sandbox's memory: the Sentry's, its
 * processes' and their tmpfs pages) goes to BUNDLE/image first, then with
 * the session's files (their tmpfs's use) into dir. */
int ctr_snapshot_room(struct al_sandbox *sb, const char *dir, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	uint64_t mem = 0, pids, files = 0, at_dir = 0, at_image = 0;
	int rc;

	if (!c->rt.gvisor)
		return AL_OK; /* (it cannot: ctr_snapshot says why) */
	if (c->cg_made && al_cg_usage(&c->cg, &mem, &pids))
		return al_err_sys(err, "container: the sandbox's memory use");
	if ((rc = room_at(c->fs.work, NULL, &files, err)) ||
	    (rc = room_at(c->fs.dir, &at_image, NULL, err)) ||
	    (rc = room_at(dir, &at_dir, NULL, err)))
		return rc;
	mem += ROOM_SLACK;
	if (at_image < mem || at_dir < mem + files)
		return al_err_set(
		    err, AL_ESANDBOX,
		    "no room for the snapshot: it needs up to %llu MiB in %s (%llu "
		    "free) and %llu MiB where runsc writes its checkpoint (%llu free)",
		    (unsigned long long)((mem + files) >> 20), dir,
		    (unsigned long long)(at_dir >> 20), (unsigned long long)(mem >> 20),
		    (unsigned long long)(at_image >> 20));
	return AL_OK;
}

int ctr_snapshot(struct al_sandbox *sb, int fd, bool keep, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	char dir[PATH_MAX], img[PATH_MAX + 32], flags[sizeof(c->rt.flags)], out[1024];
	char head[HEAD_MAX + 1];
	const char *argv[16];
	int n = 0, st, rc;
	struct stat ist;

	if (!c->rt.gvisor)
		return al_err_set(err, AL_EINVAL, "unsupported: %s", no_criu);
	if (keep) /* its restore into the same name blocks until it ends: not for us */
		return al_err_set(
		    err, AL_EINVAL,
		    "unsupported: runsc's checkpoint stops its sandbox (a sandbox that "
		    "runs on after it cannot be saved)");
	if ((rc = image_dir(c, dir, sizeof(dir), err)) ||
	    (rc = shape_line(sb, head, sizeof(head), err)))
		return rc;
	snprintf(img, sizeof(img), "%s/checkpoint.img", dir);
	if ((mkdir(dir, 0700) && errno != EEXIST) || (unlink(img) && errno != ENOENT))
		return al_err_sys(err, "container: make %s", dir);
	snprintf(flags, sizeof(flags), "%s", c->rt.flags);
	argv[n++] = c->rt.path;
	argv[n++] = "--root";
	argv[n++] = c->rt.root;
	for (char *save = NULL, *f = strtok_r(flags, " ", &save); f && n < 10;
	     f = strtok_r(NULL, " ", &save))
		argv[n++] = f;
	argv[n++] = "checkpoint";
	snprintf(img, sizeof(img), "--image-path=%s", dir);
	argv[n++] = img;
	argv[n++] = c->name;
	argv[n] = NULL;
	st = ctr_run_capture(argv, out, sizeof(out), CHECKPOINT_MS);
	snprintf(img, sizeof(img), "%s/checkpoint.img", dir);
	if (st != 0) {
		char *nl = strchr(out, '\n');

		if (nl && strlen(nl) > 1 && !strncmp(out, "checkpoint", 10))
			*nl = '\0'; /* its first line: a Go trace follows */
		unlink(img);
		rmdir(dir);
		return al_err_set(err, AL_ESANDBOX, "container: runsc checkpoint failed: %.300s",
				  out[0] ? out : "(it said nothing)");
	}
	{
		cleanup_close int in = open(img, O_RDONLY | O_CLOEXEC);

		rc =
		    in < 0 || fstat(in, &ist) ? al_err_sys(err, "container: open %s", img)
		    : al_write_all(fd, MAGIC, strlen(MAGIC)) || al_write_all(fd, head, strlen(head))
			? al_err_sys(err, "container: write the snapshot")
			: put_u64(fd, (uint64_t)ist.st_size, err);
		for (off_t off = 0; !rc && off < ist.st_size;) {
			ssize_t k = sendfile(fd, in, &off, (size_t)(ist.st_size - off));

			if (k <= 0 && !(k < 0 && errno == EINTR))
				rc = al_err_sys(err, "container: copy %s", img);
		}
	}
	unlink(img);
	rmdir(dir);
	return rc ? rc : pack_files(c, fd, err);
}

static int get_u64(int fd, uint64_t *v)
{
	unsigned char b[8];
	size_t got = 0;

	while (got < 8) {
		ssize_t k = read(fd, b + got, 8 - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	*v = 0;
	for (int i = 7; i >= 0; i--)
		*v = *v << 8 | b[i];
	return 0;
}

/* The head's JSON line (at in's offset, which it moves past) against what
 * this sandbox would save. */
static int check_shape(const struct al_sandbox *sb, int in, struct al_err *err)
{
	char line[HEAD_MAX + 1], want[HEAD_MAX + 2];
	off_t at = lseek(in, 0, SEEK_CUR);
	ssize_t n = read(in, line, HEAD_MAX);
	char *nl = n > 0 ? memchr(line, '\n', (size_t)n) : NULL;
	json_t *got, *exp;
	int rc;

	if (!nl || lseek(in, at + (nl - line) + 1, SEEK_SET) < 0)
		return al_err_set(err, AL_EINVAL, "container: the snapshot's head is not whole");
	*nl = '\0';
	if ((rc = shape_line(sb, want, sizeof(want), err)))
		return rc;
	got = json_loads(line, 0, NULL);
	exp = json_loads(want, 0, NULL);
	rc = got && exp && json_equal(got, exp);
	if (!rc) {
		const char *gi = json_string_value(json_object_get(got, "image"));
		const char *gp = json_string_value(json_object_get(got, "platform"));
		const char *ei = json_string_value(json_object_get(exp, "image"));
		const char *ep = json_string_value(json_object_get(exp, "platform"));

		al_err_set(err, AL_ESANDBOX,
			   "container: the snapshot was made with image %.24s on runsc's %s "
			   "platform, this sandbox has %.24s on %s: %s",
			   gi ? gi : "?", gp ? gp : "?", ei ? ei : "?", ep ? ep : "?",
			   gi && ei && strcmp(gi, ei) ? "its image was rebuilt since the pause"
						      : "its platform changed");
	}
	json_decref(got);
	json_decref(exp);
	return rc ? AL_OK : AL_ESANDBOX;
}

int ctr_restore_unpack(struct al_sandbox *sb, uid_t uid, struct al_err *err)
{
	struct ctr_sb *c = sb->priv;
	int in = sb->spec.restore_fd;
	char magic[sizeof(MAGIC) - 1], dir[PATH_MAX], img[PATH_MAX + 32];
	uint64_t size;
	int rc;

	if (!c->rt.gvisor)
		return al_err_set(err, AL_EINVAL, "container: only runsc restores a snapshot");
	if (lseek(in, 0, SEEK_SET) || read(in, magic, sizeof(magic)) != (ssize_t)sizeof(magic) ||
	    memcmp(magic, MAGIC, sizeof(magic)))
		return al_err_set(err, AL_EINVAL,
				  "container: the snapshot is not a runsc session's snapshot");
	if ((rc = check_shape(sb, in, err)))
		return rc;
	if (get_u64(in, &size))
		return al_err_set(err, AL_EINVAL, "container: the snapshot ends in its head");
	if ((rc = image_dir(c, dir, sizeof(dir), err)))
		return rc;
	snprintf(img, sizeof(img), "%s/checkpoint.img", dir);
	if (mkdir(dir, 0700) && errno != EEXIST)
		return al_err_sys(err, "container: mkdir %s", dir);
	{
		cleanup_close int out =
		    open(img, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

		if (out < 0)
			return al_err_sys(err, "container: create %s", img);
		while (size > 0) {
			ssize_t k = sendfile(out, in, NULL, size > (1u << 30) ? 1u << 30 : size);

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				return k < 0 ? al_err_sys(err, "container: write %s", img)
					     : al_err_set(err, AL_EINVAL,
							  "container: the snapshot ends inside its "
							  "image");
			size -= (uint64_t)k; /* (in's offset moves past it: the pack follows) */
		}
	}
	{
		cleanup_close int root = open(c->fs.work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (root < 0)
			return al_err_sys(err, "container: open %s", c->fs.work);
		/* the same disk limit as the session's: what it held fits */
		if ((rc = al_pack_unpack_as(in, root, uid, uid, 0, true, err)))
			return al_err_wrap(err, "container: the session's files");
	}
	return AL_OK;
}
