/* exec.c - airlock-exec: the first program of every container job.
 *
 *   airlock-exec PROGRAM [ARG...]
 *
 * The OCI runtime executes it through the descriptor the shim hands in
 * (/proc/self/fd/4; it is the host's static binary, nothing of it lives in
 * the image). It closes that descriptor and executes the job's program the
 * way the process and microVM backends do (a name without '/' is looked up
 * in AL_SEARCH_PATH). When that fails the failure is the job's, as a shell
 * reports it: a line on stderr and exit 127 (not found) or 126 (found, not
 * executable); the runtime's own exec cannot fail on a job's input, so a
 * runtime failure stays a fault of the boundary.
 *
 * On runsc (its program a file, CTR_GV_EXEC) with network egress, where the
 * worker left its proxy's socket file CTR_GV_EGRESS, it first starts the
 * relay to it (relay.c). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../jobexec.h"
#include "ctr.h"
#include "relay.h"

extern char **environ;

int main(int argc, char **argv)
{
	const char *prog = argc > 1 ? argv[1] : NULL;
	struct stat st;
	int code;

	if (!prog) {
		fprintf(stderr, "airlock-exec: started by the container backend only\n");
		return 2;
	}
	close(4);
	if (!lstat(CTR_GV_EGRESS, &st) && S_ISSOCK(st.st_mode) &&
	    ctr_relay_start(CTR_GV_EGRESS, AL_EGRESS_PROXY_PORT))
		fprintf(stderr, "airlock: no network egress: the relay to the proxy: %s\n",
			strerror(errno));
	code = al_exec_job(prog, argv + 1, environ);
	fprintf(stderr, "airlock: cannot execute %s: %s\n", prog, strerror(errno));
	return code;
}
