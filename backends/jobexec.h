/* jobexec.h - the last steps before a job's program, the same in every
 * sandbox that starts one itself (the process backend's init, the microVM's
 * agent; airlock-exec in containers, where the runtime drops privileges):
 * giving up every privilege, each step checked, and executing the program
 * (a name without '/' is looked up in AL_SEARCH_PATH). Header-only (static
 * inline) for the static helpers; no allocation, usable after fork or
 * vfork. */
#ifndef AL_JOBEXEC_H
#define AL_JOBEXEC_H

#include <errno.h>
#include <grp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

#define AL_SEARCH_PATH "/usr/local/bin:/usr/bin:/bin"

/* Empty the capability bounding set, up to the running kernel's last
 * capability (EINVAL past it): no exec can ever gain one. 0, or -1. */
static inline int al_drop_bounding_set(void)
{
	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)) {
			if (errno == EINVAL && cap > 0)
				return 0;
			return -1;
		}
	return 0;
}

/* From root to uid:gid for good: no supplementary group, every capability
 * gone (switching uids clears them; ambient ones are cleared too),
 * no_new_privs (setuid programs do not elevate), not dumpable (no ptrace
 * of it by its own uid, no core). 0, or -1 with *what naming the step. */
static inline int al_become(uid_t uid, gid_t gid, const char **what)
{
	if (setgroups(0, NULL))
		return *what = "setgroups", -1;
	if (setresgid(gid, gid, gid))
		return *what = "setresgid", -1;
	if (setresuid(uid, uid, uid))
		return *what = "setresuid", -1;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return *what = "clear ambient capabilities", -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return *what = "no_new_privs", -1;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return *what = "not dumpable", -1;
	return 0;
}

/* Execute prog with argv and envp; returns only on failure, with the exit
 * code a shell gives: 127 when no such program exists (errno ENOENT), 126
 * when one exists but cannot be executed, errno then saying why: EACCES
 * (no right to run it), ENOEXEC (not a program this kernel runs), ETXTBSY,
 * E2BIG, ELOOP, ... as execve(2) said. A name without '/' is searched as
 * execvp(3) does: past a directory whose entry may not be executed
 * (EACCES), to the first that exists but fails for another reason. */
static inline int al_exec_job(const char *prog, char *const *argv, char *const *envp)
{
	int why = 0; /* the errno of the first program found that did not run */
	char path[4096];

	if (strchr(prog, '/')) {
		execve(prog, argv, envp);
		if (errno != ENOENT && errno != ENOTDIR)
			why = errno;
	} else {
		const char *dir = AL_SEARCH_PATH;

		for (;;) {
			const char *end = strchr(dir, ':');
			int dn = end ? (int)(end - dir) : (int)strlen(dir);

			if (snprintf(path, sizeof(path), "%.*s/%s", dn, dir, prog) <
			    (int)sizeof(path)) {
				execve(path, argv, envp);
				if (errno != ENOENT && errno != ENOTDIR && !why)
					why = errno;
				if (why && why != EACCES)
					break; /* found, and it cannot run: as execvp */
			}
			if (!end)
				break;
			dir = end + 1;
		}
	}
	errno = why ? why : ENOENT;
	return why ? 126 : 127;
}

#endif
