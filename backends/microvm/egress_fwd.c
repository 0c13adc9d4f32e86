/* egress_fwd.c - airlock-egress-fwd: the microVM's way to the egress proxy.
 *
 * A microVM granted network egress has one network card, QEMU's user-mode
 * network with restrict=on: the guest reaches nothing but the guestfwd
 * address (AL_VMM_GUEST_PROXY). For each connection the guest opens there,
 * QEMU starts this program in its jail with the connection on fds 0-2 (a
 * socket). It hands that socket to the worker's proxy over the abstract
 * unix socket the worker listens on in the jail's own network namespace
 * (SCM_RIGHTS) and exits: the proxy then reads and writes the guest's
 * connection itself, with no copy through here. It can reach nothing
 * else: the jail's network namespace has no interface.
 *
 * Static and small; never sanitized. Exit 0 when handed over, 1 otherwise
 * (QEMU then closes the guest's connection). */
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../fdpass.h"
#include "egress_fwd.h"

int main(void)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	const int conn = 0;
	int s;
	socklen_t len;

	/* sun_path[0] stays '\0': the abstract name follows */
	memcpy(sun.sun_path + 1, AL_EGRESS_FWD_NAME, sizeof(AL_EGRESS_FWD_NAME) - 1);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof(AL_EGRESS_FWD_NAME));
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(s, (struct sockaddr *)&sun, len) || al_send_fds(s, 'C', &conn, 1, 0) != 1)
		return 1;
	return 0;
}
