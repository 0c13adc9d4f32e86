/* netns.c - a listening socket inside another network namespace (netns.h). */
#include "netns.h"

#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

struct job {
	int nsfd, fd, err;
	uint16_t port;
	const char *what;
};

/* setns(CLONE_NEWNET) moves only this thread; it ends right after. */
static void *in_namespace(void *arg)
{
	struct job *j = arg;
	struct ifreq ifr;
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons(j->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int s, one = 1;

	j->fd = -1;
	if (setns(j->nsfd, CLONE_NEWNET)) {
		j->what = "enter the job's network namespace";
		goto fail;
	}
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
		j->what = "a socket in the job's network namespace";
		goto fail;
	}
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr)) {
			close(s);
			j->what = "bring up loopback in the job's network namespace";
			goto fail;
		}
	}
	close(s);
	if ((j->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0 ||
	    setsockopt(j->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(j->fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(j->fd, 128)) {
		j->what = "listen for the egress proxy in the job's network namespace";
		goto fail;
	}
	return NULL;
fail:
	j->err = errno;
	if (j->fd >= 0)
		close(j->fd);
	j->fd = -1;
	return NULL;
}

int al_netns_listen(int nsfd, uint16_t port, struct al_err *err)
{
	struct job j = {.nsfd = nsfd, .fd = -1, .port = port};
	pthread_t t;
	int rc = pthread_create(&t, NULL, in_namespace, &j);

	if (rc) {
		errno = rc;
		return al_err_sys(err, "egress: a thread to enter the job's network namespace");
	}
	pthread_join(t, NULL);
	if (j.fd < 0) {
		errno = j.err;
		return al_err_sys(err, "egress: %s", j.what);
	}
	return j.fd;
}
