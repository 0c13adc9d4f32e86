/* fdpass.h - one byte with descriptors over a unix socket (SCM_RIGHTS):
 * how the worker hands a job to a warm interpreter, and the container
 * shim a runsc warm interpreter its socket. Header-only (static inline) for
 * the static helpers. */
#ifndef AL_FDPASS_H
#define AL_FDPASS_H

#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#define AL_FDPASS_MAX 8

/* Send byte with fds[0..n) (n <= AL_FDPASS_MAX) on sock; sendmsg's result
 * (1 when sent), flags sendmsg's (MSG_NOSIGNAL is added). */
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

	if (n > AL_FDPASS_MAX)
		n = AL_FDPASS_MAX;
	memset(&ctl, 0, sizeof(ctl));
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
	return sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
}

#endif
