/* inpack.h - the inputs pack: what a job's inputs unpack to (files,
 * directories, symlinks), made by the worker's input fetcher
 * (worker/inputs/) after every check, as one flat file that the job's
 * sandbox unpacks into its work directory: the process and container
 * backends from the host's file, a microVM's agent from a read-only disk.
 *
 * A record is a 16-byte header (type, 0, mode as 2 bytes, the path's
 * length as 4, the size as 8, little-endian), the path, then size bytes:
 * a file's data ('f'), a symlink's target ('l'), an earlier file's path
 * to copy ('c': an archive's hard link), or none ('d', a directory).
 * 'e' ends the pack, zeros pad it to 512 bytes (a disk's sector).
 *
 * Unpacking trusts nothing of the pack: every path is checked again, no
 * symlink is followed (one met on the way to an entry is an error), a
 * file is never written twice, and the disk limit ends it with a clear
 * error, never a half tree left to run. */
#ifndef AL_INPACK_H
#define AL_INPACK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/err.h"

#define AL_PACK_PATH_MAX    4095  /* bytes of an entry's path */
#define AL_PACK_ENTRIES_MAX 60000 /* entries of a pack (a job's tmpfs has 65536 inodes) */
/* ...of a sandbox's own tree saved whole (al_pack_w_tree, al_pack_unpack_as
 * with tree): more than its tmpfs can hold, so that a tree never meets it */
#define AL_PACK_TREE_ENTRIES_MAX (1u << 20)
#define AL_PACK_SECTOR		 512

enum {
	AL_PACK_DIR = 'd',
	AL_PACK_FILE = 'f',
	AL_PACK_SYMLINK = 'l',
	AL_PACK_COPY = 'c',
	AL_PACK_END = 'e',
};

/* A pack being written to fd (the caller's: open, closed by it). */
struct al_pack_w {
	int fd;
	uint64_t off;	      /* bytes written */
	uint32_t entries;     /* records written */
	uint32_t max_entries; /* at most (0: AL_PACK_ENTRIES_MAX) */
};

/* A record's header and path, then (al_pack_w_data) its size bytes. */
int al_pack_w_entry(struct al_pack_w *w, int type, const char *path, unsigned mode, uint64_t size,
		    struct al_err *err);
int al_pack_w_data(struct al_pack_w *w, const void *data, size_t len, struct al_err *err);
/* The tree under dirfd as entries under prefix (a path as below): its
 * directories, files and symlinks, none followed; a fifo, socket or device
 * is left out. Up to AL_PACK_TREE_ENTRIES_MAX entries in w. */
int al_pack_w_tree(struct al_pack_w *w, int dirfd, const char *prefix, struct al_err *err);
/* The end record and the padding. */
int al_pack_w_end(struct al_pack_w *w, struct al_err *err);

/* A path as a pack may hold it: relative, no empty, "." or ".."
 * component, no control character, at most AL_PACK_PATH_MAX bytes. */
bool al_pack_path_ok(const char *p);
/* A symlink's target that stays inside the tree from the link at path:
 * relative, and never above the top when read as text. */
bool al_pack_link_ok(const char *path, const char *target);

/* Unpack the pack read from fd (at its start) into the directory dirfd,
 * everything owned by uid:gid, directories and files at least u+rwx /
 * u+rw. At most max_bytes of file data in all (0: no cap). AL_EINVAL
 * naming the entry for what the job's inputs cannot become (a bad path, a
 * clash, the disk limit), AL_ESYS when the host fails. */
int al_pack_unpack(int fd, int dirfd, uid_t uid, gid_t gid, uint64_t max_bytes, struct al_err *err);
/* ...and tree: a sandbox's own tree saved whole (al_pack_w_tree), whose
 * symlinks may point anywhere (nothing here follows one either way) and
 * whose entries may be up to AL_PACK_TREE_ENTRIES_MAX. */
int al_pack_unpack_as(int fd, int dirfd, uid_t uid, gid_t gid, uint64_t max_bytes, bool tree,
		      struct al_err *err);

#endif
