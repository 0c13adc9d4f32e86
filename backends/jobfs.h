/* jobfs.h - a job's files on the host: a directory holding a size-limited
 * tmpfs work directory (the job's input files, owned by the job's uid), or,
 * detached, no directory (a tmpfs mounted nowhere); the memfds its stdout
 * and stderr go to; reading them back with caps, and
 * collecting output files without following symlinks out of the work dir.
 * Shared by the process and container backends. */
#ifndef AL_JOBFS_H
#define AL_JOBFS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/err.h"
#include "../proto/job.h"
#include "../proto/result.h"

struct al_jobfs {
	char dir[PATH_MAX];  /* <root>/<name>, 0700 root; "" when detached */
	char work[PATH_MAX]; /* <dir>/work: tmpfs of the job's disk limit, holding the
			      * directories of jobfs_layout.h */
	char home[PATH_MAX]; /* <work>/work: the job's work directory ("" when detached) */
	bool mounted;	     /* work is a mount point we made */
	int mnt_fd;	     /* detached mode: the tmpfs, mounted nowhere on the
			      * host (fsmount); the sandbox moves it into place */
	int out_fd;	     /* the job's stdout (a memfd), read back after the job */
	int err_fd;	     /* the job's stderr (a memfd) */
};

/* Make <root>/<name>, the job's tmpfs (size disk_bytes, mode 0700, owned by
 * uid:gid) with the directories of jobfs_layout.h, the input files in its
 * work directory, and the stdout/stderr memfds. The
 * tmpfs is mounted on <dir>/work; or, when detached, nothing is made under
 * root: the tmpfs is only held by fs->mnt_fd (never visible on the host;
 * gone when the fd and the sandbox are). On failure nothing is left.
 * AL_EINVAL when the input files do not fit. */
int al_jobfs_create(struct al_jobfs *fs, const char *root, const char *name,
		    const struct al_job *job, uint64_t disk_bytes, uid_t uid, gid_t gid,
		    bool detached, struct al_err *err);

/* Make a mounted fs (one a sandbox has used: a warm-pool microVM's, see
 * backends/microvm/warm.c) as al_jobfs_create makes it for job: everything
 * in its tmpfs removed (no symlink followed; the layout's directories kept,
 * emptied, their owner and modes set again), the tmpfs resized to
 * disk_bytes, stdout and stderr emptied, the input files written. AL_EINVAL
 * when they do not fit. */
int al_jobfs_renew(struct al_jobfs *fs, const struct al_job *job, uint64_t disk_bytes, uid_t uid,
		   gid_t gid, struct al_err *err);

/* Write job's input files into the work directory of fs, made for a job
 * without files and not used since (a warm container's, made before its
 * job: backends/container/warm.c), owned by uid:gid. AL_EINVAL when they do
 * not fit. */
int al_jobfs_write_files(struct al_jobfs *fs, const struct al_job *job, uid_t uid, gid_t gid,
			 struct al_err *err);

/* Unpack the inputs pack at path pack (backends/inpack.h) into the work
 * directory, owned by uid:gid: AL_EINVAL naming the entry when the inputs
 * cannot be that tree (a clash with a file, the disk limit). */
int al_jobfs_unpack(struct al_jobfs *fs, const char *pack, uid_t uid, gid_t gid, uint64_t max_bytes,
		    struct al_err *err);

/* Fill res->out/err (capped, with truncated flags) and res->files (each at
 * most file_cap bytes; missing files are skipped, symlinks and non-regular
 * files refused). *disk_full tells whether the work tmpfs filled up. */
int al_jobfs_collect(struct al_jobfs *fs, const struct al_job *job, const struct al_limits *lim,
		     uint64_t file_cap, struct al_result *res, bool *disk_full, struct al_err *err);

/* Unmount and remove everything. Safe to call twice. */
void al_jobfs_destroy(struct al_jobfs *fs);

/* Remove every job directory under root (what a crashed worker left). */
int al_jobfs_sweep(const char *root, struct al_err *err);

/* A small file's text, NUL-terminated ("" when it cannot be read, or a
 * symlink); the byte count. Only open, read and close: usable after fork. */
ssize_t al_read_text(const char *path, char *buf, size_t cap);

/* The size of what fd holds (a memfd of stdout or stderr); 0 when unknown. */
uint64_t al_fd_size(int fd);

/* Live output: at most cap bytes of the job's stdout (stream 1) or stderr
 * (2) memfd from off on (the backends' output slot); -1 when there is none. */
ssize_t al_jobfs_output(const struct al_jobfs *fs, int stream, uint64_t off, void *buf, size_t cap);

/* Live output, one poll: for stdout (1) and stderr (2), read what is new
 * from sent[stream] on (read: a backend's output slot, or al_jobfs_output)
 * and give it to emit, at most AL_OUT_CHUNK_MAX bytes a call and 4 calls a
 * stream, never past the stream's cap in lim; sent[] counts what went.
 * Returns emit's first non-zero answer (then stops), else 0. */
typedef ssize_t (*al_out_read_fn)(void *src, int stream, uint64_t off, void *buf, size_t cap);
typedef int (*al_out_emit_fn)(void *dst, int stream, const void *data, size_t len);
int al_output_pump(const struct al_limits *lim, uint64_t sent[3], al_out_read_fn read, void *src,
		   al_out_emit_fn emit, void *dst);

/* mkdir -p with mode for each level created: 0, or AL_ESYS with errno. */
int al_mkdir_p(const char *path, mode_t mode);

#endif
