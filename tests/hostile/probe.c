/* probe.c - a hostile C program for the hostile suite: tries the syscalls a
 * sandbox must refuse and prints one line per attempt: "<name> ok" when the
 * kernel allowed it (an escape), "<name> refused <errno name>" otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static void report(const char *name, long rc)
{
	if (rc < 0)
		printf("%s refused %s\n", name, strerrorname_np(errno));
	else
		printf("%s ok\n", name);
	fflush(stdout);
}

int main(void)
{
	report("ptrace_attach_init", ptrace(PTRACE_ATTACH, 1, NULL, NULL));
	report("mount_tmpfs", mount("x", "/tmp", "tmpfs", 0, NULL));
	report("unshare_user", unshare(CLONE_NEWUSER));
	report("unshare_net", unshare(CLONE_NEWNET));
	report("socket_inet", socket(AF_INET, SOCK_STREAM, 0));
	report("socket_inet6", socket(AF_INET6, SOCK_DGRAM, 0));
	report("socket_netlink", socket(AF_NETLINK, SOCK_RAW, 0));
	report("socket_packet", socket(AF_PACKET, SOCK_RAW, 0));
	report("bpf", syscall(SYS_bpf, 0, NULL, 0));
	report("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0));
	report("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	report("userfaultfd", syscall(SYS_userfaultfd, 0));
	report("chroot", chroot("/tmp"));
	report("setuid_root", setuid(0));
	report("reboot", syscall(SYS_reboot, 0, 0, 0, NULL));
	return 0;
}
