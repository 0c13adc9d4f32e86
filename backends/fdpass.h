/* fdpass.h - one byte with descriptors over a unix socket (SCM_RIGHTS):
 * how the worker and the sandboxes' helpers hand descriptors on (a job to
 * a warm interpreter on every tier, a runsc warm interpreter its socket
 * from the container shim, a microVM guest's connection to the egress
 * proxy). Header-only (static inline) for the static helpers. */
#ifndef AL_FDPASS_H
#define AL_FDPASS_H

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#define AL_FDPASS_MAX 16 /* the process tier's hand-over: 6, and 9 binds */

/* Send byte with fds[0..n) on sock: sendmsg's result (1 when sent), flags
 * sendmsg's (MSG_NOSIGNAL added); -1 with EINVAL past AL_FDPASS_MAX. */
static inline ssize_t al_send_fds(int sock, char byte, const int *fds, size_t n, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * AL_FDPASS_MAX)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.buf,
			    .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
	struct cmsghdr *cm;

	if (!n || n > AL_FDPASS_MAX)
		return errno = EINVAL, -1;
	memset(&ctl, 0, sizeof(ctl));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
	return sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
}

#endif
