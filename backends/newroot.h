/* newroot.h - a root of its own for a sandboxed process (the bubblewrap
 * model): a small tmpfs mounted at a staging path in the caller's private
 * mount namespace, filled with read-only binds and generated files, then
 * made "/" (pivot_root; the old root detached) and read-only. Used by the
 * process backend's static init and by the microVM's VMM jail, both as
 * root in fresh mount and PID namespaces, between clone and exec: no
 * allocation, only system calls. Each returns 0, or -1 with errno and
 * *what naming the step. */
#ifndef AL_NEWROOT_H
#define AL_NEWROOT_H

#include <stdbool.h>

/* Private propagation for everything, then a tmpfs on stage. */
int al_root_begin(const char *stage, const char **what);
/* src (a host path, or /proc/self/fd/N) bound read-only on dst, made as a
 * directory or an empty file. */
int al_root_bind_ro(const char *src, const char *dst, bool is_dir, const char **what);
/* Host path src at dst: a symlink copied as a symlink, a directory or file
 * bound read-only; missing is fine. */
int al_root_keep(const char *src, const char *dst, const char **what);
/* The host's /usr and /bin, /sbin, /lib* as the host has them
 * (hostroot.h), under stage. */
int al_root_host_top(const char *stage, const char **what);
/* A new file with text. */
int al_root_write(const char *path, const char *text, const char **what);
/* stage/dev: a read-only tmpfs with the host's device nodes named in
 * nodes (NULL-ended), fd/stdin/stdout/stderr links and an empty shm/. */
int al_root_dev(const char *stage, const char *const *nodes, const char **what);
/* A fresh /proc (of the caller's PID namespace), then stage becomes "/",
 * the old root is detached, and the new one is remounted read-only. */
int al_root_enter(const char *stage, const char **what);

#endif
