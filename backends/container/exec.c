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
 * On runsc (its program a file, CTR_GV_EXEC), which passes no descriptor
 * in, it first connects to what the worker left in CTR_GV_DIR: with
 * network egress its proxy's socket file CTR_GV_EGRESS, for the relay to it
 * (relay.c); in a warm container CTR_GV_WARM, where its shim hands it the
 * warm interpreter's fd 3 (warm.c, shim.c). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../jobexec.h"
#include "ctr.h"
#include "relay.h"

extern char **environ;

/* fd 3: the warm interpreter's socket, which the container's shim hands
 * over (one byte, one descriptor) on a connection to the socket file at
 * path. 0, or -1 with errno. */
static int warm_socket(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *cm;
	int conn = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), fd = -1;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (conn < 0 || connect(conn, (struct sockaddr *)&sun, sizeof(sun)) ||
	    recvmsg(conn, &mh, 0) != 1)
		return -1;
	close(conn);
	if ((cm = CMSG_FIRSTHDR(&mh)) && cm->cmsg_level == SOL_SOCKET &&
	    cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (fd < 0)
		return errno = EPROTO, -1;
	return fd == 3 || (dup2(fd, 3) == 3 && !close(fd)) ? 0 : -1;
}

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
	if (!lstat(CTR_GV_WARM, &st) && S_ISSOCK(st.st_mode) && warm_socket(CTR_GV_WARM)) {
		fprintf(stderr, "airlock-exec: %s: %s\n", CTR_GV_WARM, strerror(errno));
		return 126;
	}
	code = al_exec_job(prog, argv + 1, environ);
	fprintf(stderr, "airlock: cannot execute %s: %s\n", prog, strerror(errno));
	return code;
}
