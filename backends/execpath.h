/* execpath.h - executing a job's program the same way on every backend
 * (the process backend's init, airlock-exec in containers, the microVM's
 * agent): a name without '/' is looked up in AL_SEARCH_PATH. Header-only
 * (static inline), for the static helpers; no allocation, usable after
 * fork or vfork. */
#ifndef AL_EXECPATH_H
#define AL_EXECPATH_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define AL_SEARCH_PATH "/usr/local/bin:/usr/bin:/bin"

/* Execute prog with argv and envp; returns only on failure, with the exit
 * code a shell gives: 127 when no such program exists, 126 when one exists
 * but cannot be executed (errno then says why, EACCES for the latter). */
static inline int al_exec_job(const char *prog, char *const *argv, char *const *envp)
{
	bool found = false;
	char path[4096];

	if (strchr(prog, '/')) {
		execve(prog, argv, envp);
		found = errno != ENOENT && errno != ENOTDIR;
	} else {
		const char *dir = AL_SEARCH_PATH;

		for (;;) {
			const char *end = strchr(dir, ':');
			int dn = end ? (int)(end - dir) : (int)strlen(dir);

			if (snprintf(path, sizeof(path), "%.*s/%s", dn, dir, prog) <
			    (int)sizeof(path)) {
				execve(path, argv, envp);
				found = found || (errno != ENOENT && errno != ENOTDIR);
			}
			if (!end)
				break;
			dir = end + 1;
		}
	}
	errno = found ? EACCES : ENOENT;
	return found ? 126 : 127;
}

#endif
