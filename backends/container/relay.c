/* relay.c - network egress of a runsc job. gVisor's Sentry keeps a network
 * stack of its own (--network=none: its loopback alone), so the proxy
 * cannot listen where the job connects, as it does in a runc job's network
 * namespace. airlock-exec, before it executes the job, listens on the
 * proxy's address on that loopback and leaves a child that relays each
 * connection to a unix socket file of the worker's in the job's /.airlock,
 * which the Sentry lets it reach (--host-uds=open) and the worker's proxy
 * serves as its client: the rules, caps and transcript are the proxy's, as
 * on every boundary. Nothing else leaves: no other address exists there.
 *
 * The relay runs as the job's user, in a session of its own: the job can
 * end it (and with it only its own network); it holds nothing of the job's
 * and counts as one of the job's processes.
 *
 * A session that pauses (runsc's checkpoint, which cannot save a host
 * socket that is connected) has its relay let go first: the session's
 * server connects to the relay's control socket (CTR_RELAY_CONTROL, an
 * abstract name of the Sentry's own, which a checkpoint saves), and the
 * relay closes every connection it holds, both sides, then answers one
 * byte. The worker has closed its proxy's socket by then, so no new
 * connection reaches the host until the sandbox runs again, restored,
 * where the worker listens anew. The job's own code can ask too: it ends
 * only its own connections. */
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define RELAY_CONNS 64	  /* at once; more wait in the listener's backlog */
#define RELAY_BUF   16384 /* per direction */

/* One connection of the job's: fd[0] the job's, fd[1] the proxy's; bytes
 * read from fd[d] wait in buf[d] until written to fd[!d]. */
struct pair {
	int fd[2];
	char buf[2][RELAY_BUF];
	size_t len[2], off[2];
	bool eof[2], shut[2];
};

static struct pair pairs[RELAY_CONNS];
static int npairs;

static void pair_close(int i)
{
	close(pairs[i].fd[0]);
	close(pairs[i].fd[1]);
	pairs[i] = pairs[--npairs];
}

static void take(int lfd, const struct sockaddr_un *sun)
{
	int a = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), b;

	if (a < 0)
		return;
	b = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (b < 0 || connect(b, (const struct sockaddr *)sun, sizeof(*sun)) ||
	    fcntl(b, F_SETFL, O_NONBLOCK)) {
		close(a); /* the job sees its connection closed: no proxy */
		if (b >= 0)
			close(b);
		return;
	}
	memset(&pairs[npairs], 0, sizeof(pairs[npairs]));
	pairs[npairs].fd[0] = a;
	pairs[npairs++].fd[1] = b;
}

/* One pass over pair i after poll (in: the events seen on each side).
 * false when the pair is done or broken. */
static bool pass(struct pair *p, const short in[2])
{
	for (int d = 0; d < 2; d++) {
		if (!p->eof[d] && !p->len[d] && (in[d] & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = read(p->fd[d], p->buf[d], RELAY_BUF);

			if (n > 0)
				p->len[d] = (size_t)n, p->off[d] = 0;
			else if (n == 0)
				p->eof[d] = true;
			else if (errno != EAGAIN && errno != EINTR)
				return false;
		}
		if (p->len[d] && (in[!d] & (POLLOUT | POLLERR))) {
			ssize_t n = write(p->fd[!d], p->buf[d] + p->off[d], p->len[d] - p->off[d]);

			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return false;
			if (n > 0 && (p->off[d] += (size_t)n) == p->len[d])
				p->len[d] = p->off[d] = 0;
		}
		if (p->eof[d] && !p->len[d] && !p->shut[d]) {
			shutdown(p->fd[!d], SHUT_WR);
			p->shut[d] = true;
		}
	}
	return !(p->shut[0] && p->shut[1]);
}

/* The control socket's caller: every connection closed, then told so. */
static void let_go(int cfd)
{
	int c = accept4(cfd, NULL, NULL, SOCK_CLOEXEC);

	if (c < 0)
		return;
	while (npairs > 0)
		pair_close(npairs - 1);
	(void)!write(c, "1", 1);
	close(c);
}

static void relay(int lfd, int cfd, const struct sockaddr_un *sun)
{
	struct pollfd pfd[2 + 2 * RELAY_CONNS];

	for (;;) {
		int n = 2;

		pfd[0] = (struct pollfd){.fd = npairs < RELAY_CONNS ? lfd : -1, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = cfd, .events = POLLIN};
		for (int i = 0; i < npairs; i++)
			for (int s = 0; s < 2; s++) {
				struct pair *p = &pairs[i];
				short ev = (short)((!p->eof[s] && !p->len[s] ? POLLIN : 0) |
						   (p->len[!s] ? POLLOUT : 0));

				/* a side waited on for nothing is left out, so that
				 * its hang-up cannot wake the loop for ever */
				pfd[n++] = (struct pollfd){.fd = ev ? p->fd[s] : -1, .events = ev};
			}
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		/* from the last, as a closed pair takes the last one's place */
		for (int i = npairs - 1; i >= 0; i--) {
			const short in[2] = {pfd[2 + 2 * i].revents, pfd[3 + 2 * i].revents};

			if ((in[0] | in[1]) && !pass(&pairs[i], in))
				pair_close(i);
		}
		if (pfd[0].revents & POLLIN)
			take(lfd, sun);
		if (pfd[1].revents & POLLIN)
			let_go(cfd);
	}
}

/* The control socket (bound before the job runs: the name is the relay's) */
static int control(void)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	socklen_t len =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(CTR_RELAY_CONTROL + 1));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memcpy(sun.sun_path, CTR_RELAY_CONTROL, 1 + strlen(CTR_RELAY_CONTROL + 1));
	if (fd >= 0 && (bind(fd, (struct sockaddr *)&sun, len) || listen(fd, 4))) {
		int e = errno;

		close(fd);
		return errno = e, -1;
	}
	return fd;
}

int ctr_relay_start(const char *sock, unsigned port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int one = 1, lfd, cfd, null;
	pid_t pid;

	if (strlen(sock) >= sizeof(sun.sun_path))
		return errno = ENAMETOOLONG, -1;
	strcpy(sun.sun_path, sock);
	/* listening before the job runs: its first connection finds it */
	if ((lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return -1;
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) || listen(lfd, 128)) {
		int e = errno;

		close(lfd);
		return errno = e, -1;
	}
	if ((cfd = control()) < 0 || (pid = fork()) < 0) {
		int e = errno;

		close(lfd);
		if (cfd >= 0)
			close(cfd);
		return errno = e, -1;
	}
	if (pid > 0) {
		close(lfd);
		close(cfd);
		return 0;
	}
	/* the relay: nothing of the job's held (its output would stay open) */
	setsid();
	prctl(PR_SET_NAME, "airlock-relay", 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	if ((null = open("/dev/null", O_RDWR)) >= 0) {
		for (int fd = 0; fd < 3; fd++)
			dup2(null, fd);
		if (null > 2)
			close(null);
	}
	for (int fd = 3; fd < 1024; fd++)
		if (fd != lfd && fd != cfd)
			close(fd);
	relay(lfd, cfd, &sun);
	_exit(0);
}
