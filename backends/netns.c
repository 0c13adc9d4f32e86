/* netns.c - a listening socket inside another network namespace (netns.h). */
#include "netns.h"

#include "../common/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct job {
	int nsfd, fd, err; /* nsfd < 0: a new namespace, its fd left there */
	uint16_t port;
	const char *unix_name; /* instead of 127.0.0.1:port: this abstract unix name */
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
	cleanup_close int s = -1;
	int one = 1;

	j->fd = -1;
	if (j->nsfd >= 0 && setns(j->nsfd, CLONE_NEWNET)) {
		j->what = "enter the job's network namespace";
		goto fail_fd;
	}
	if (j->nsfd < 0 && (unshare(CLONE_NEWNET) || (j->nsfd = open("/proc/thread-self/ns/net",
								     O_RDONLY | O_CLOEXEC)) < 0)) {
		j->what = "a network namespace for the job";
		goto fail_fd;
	}
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
		j->what = "a socket in the job's network namespace";
		goto fail_fd;
	}
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr)) {
			j->what = "bring up loopback in the job's network namespace";
			goto fail_fd;
		}
	}
	if (j->unix_name) {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};
		size_t n = strlen(j->unix_name);
		socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);

		/* sun_path[0] '\0': abstract, of this network namespace only */
		memcpy(sun.sun_path + 1, j->unix_name, n);
		if ((j->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0 ||
		    bind(j->fd, (struct sockaddr *)&sun, len) || listen(j->fd, 128)) {
			j->what = "listen for the egress forwarder in the VMM's network namespace";
			goto fail_fd;
		}
		return NULL;
	}
	if ((j->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0 ||
	    setsockopt(j->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(j->fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(j->fd, 128)) {
		j->what = "listen for the egress proxy in the job's network namespace";
		goto fail_fd;
	}
	return NULL;
fail_fd:
	j->err = errno;
	al_closep(&j->fd);
	j->fd = -1;
	return NULL;
}

static int run_job(struct job *j, struct al_err *err)
{
	pthread_t t;
	int rc = pthread_create(&t, NULL, in_namespace, j);

	if (rc) {
		errno = rc;
		return al_err_sys(err, "egress: a thread to enter the job's network namespace");
	}
	pthread_join(t, NULL);
	if (j->fd < 0) {
		errno = j->err;
		return al_err_sys(err, "egress: %s", j->what);
	}
	return j->fd;
}

int al_netns_listen(int nsfd, uint16_t port, struct al_err *err)
{
	struct job j = {.nsfd = nsfd, .fd = -1, .port = port};

	return run_job(&j, err);
}

int al_netns_listen_unix(int nsfd, const char *unix_name, struct al_err *err)
{
	struct job j = {.nsfd = nsfd, .fd = -1, .unix_name = unix_name};

	return run_job(&j, err);
}

int al_netns_new(uint16_t port, const char *unix_name, int *nsfd, struct al_err *err)
{
	struct job j = {.nsfd = -1, .fd = -1, .port = port, .unix_name = unix_name};
	int fd = run_job(&j, err);

	if (fd < 0 && j.nsfd >= 0)
		close(j.nsfd);
	*nsfd = fd < 0 ? -1 : j.nsfd;
	return fd;
}
