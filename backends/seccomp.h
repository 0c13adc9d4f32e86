/* seccomp.h - the sandbox's syscall filter: compiled once by the parent with
 * libseccomp, applied by the child just before exec with no allocation. */
#ifndef AL_SECCOMP_H
#define AL_SECCOMP_H

#include <linux/filter.h>
#include <stdbool.h>

#include "../proto/err.h"

/* The system calls that fail with EPERM (NULL-terminated), and the clone
 * flags that make clone fail: shared with the OCI profile of the container
 * backend, so both boundaries refuse the same. */
extern const char *const al_seccomp_denied[];
#define AL_SECCOMP_NS_FLAGS 0x7e020080ul /* CLONE_NEW{NS,UTS,IPC,USER,PID,NET,CGROUP,TIME} */

struct al_seccomp {
	struct sock_fprog prog; /* owned; free with al_seccomp_free */
};

/* Build the filter: default allow; EPERM for ptrace, mount/umount,
 * pivot_root, chroot, unshare/setns and namespace flags to clone, keyctl
 * family, bpf, perf_event_open, kexec, module loading, reboot, swapon/off,
 * userfaultfd, io_uring, and socket() of any family but AF_UNIX. */
int al_seccomp_build(struct al_seccomp *sc, struct al_err *err);
/* The same, except that with inet socket() of AF_INET and AF_INET6 is
 * allowed too (service VMs: the network is what the service is for). */
int al_seccomp_build_net(struct al_seccomp *sc, bool inet, struct al_err *err);
/* Apply in the child (async-signal-safe). Requires no_new_privs or
 * CAP_SYS_ADMIN. Returns 0 or -1 with errno. */
int al_seccomp_apply(const struct al_seccomp *sc);
void al_seccomp_free(struct al_seccomp *sc);

#endif
