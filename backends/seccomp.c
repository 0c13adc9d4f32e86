/* seccomp.c - the sandbox's syscall filter (see seccomp.h). */
#include "seccomp.h"
#include "../common/cleanup.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

const char *const al_seccomp_denied[] = {
    "ptrace",
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_by_handle_at",
    "name_to_handle_at",
    "acct",
    "quotactl",
    "lookup_dcookie",
    "process_vm_readv",
    "process_vm_writev",
    "fsopen",
    "fsmount",
    "fsconfig",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "syslog",
    "vhangup",
    "personality",
    NULL,
};

int al_seccomp_build(struct al_seccomp *sc, struct al_err *err)
{
	return al_seccomp_build_net(sc, false, err);
}

int al_seccomp_build_net(struct al_seccomp *sc, bool inet, struct al_err *err)
{
	const unsigned long ns_flags = AL_SECCOMP_NS_FLAGS;
	scmp_filter_ctx ctx;
	char *mem = NULL;
	off_t len;
	int rc = 0, fd = -1;

	memset(sc, 0, sizeof(*sc));
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return al_err_set(err, AL_ESANDBOX, "seccomp: seccomp_init failed");
	for (size_t i = 0; al_seccomp_denied[i]; i++) {
		int nr = seccomp_syscall_resolve_name(al_seccomp_denied[i]);

		/* __NR_SCMP_ERROR: not on this architecture */
		if (nr != __NR_SCMP_ERROR &&
		    (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0)))
			goto out_rule;
	}
	/* socket(): only AF_UNIX; with inet, also AF_INET and AF_INET6 (one
	 * rule per refused family: a rule cannot test one argument twice) */
	if (!inet && (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
					    SCMP_A0(SCMP_CMP_NE, AF_UNIX))))
		goto out_rule;
	for (int fam = 0; inet && fam < AF_MAX; fam++)
		if (fam != AF_UNIX && fam != AF_INET && fam != AF_INET6 &&
		    (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
					   SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam))))
			goto out_rule;
	if (inet && (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
					   SCMP_A0(SCMP_CMP_GE, (scmp_datum_t)AF_MAX))))
		goto out_rule;
	/* clone() with any namespace bit: one rule per bit */
	for (int bit = 0; bit < 64; bit++) {
		unsigned long b = 1ul << bit;

		if ((ns_flags & b) &&
		    (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
					   SCMP_A0(SCMP_CMP_MASKED_EQ, b, b))))
			goto out_rule;
	}
	/* clone3 passes its flags in memory a filter cannot read: ENOSYS makes
	 * libc fall back to clone, which the rules above check. */
	if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)))
		goto out_rule;

	/* Export the BPF program so that the child only calls prctl. */
	fd = memfd_create("airlock-seccomp", MFD_CLOEXEC);
	if (fd < 0 || (rc = seccomp_export_bpf(ctx, fd)) < 0) {
		rc = al_err_set(err, AL_ESANDBOX, "seccomp: exporting the filter failed");
		goto out_ctx;
	}
	len = lseek(fd, 0, SEEK_END);
	mem = malloc(len > 0 ? (size_t)len : 1);
	if (len <= 0 || !mem || pread(fd, mem, (size_t)len, 0) != len) {
		rc = al_err_set(err, AL_ESANDBOX, "seccomp: reading the exported filter failed");
		goto out_ctx;
	}
	sc->prog.len = (unsigned short)((size_t)len / sizeof(struct sock_filter));
	sc->prog.filter = (struct sock_filter *)mem;
	mem = NULL;
	rc = AL_OK;
	goto out_ctx;
out_rule:
	rc = al_err_set(err, AL_ESANDBOX, "seccomp: adding a rule failed: %s", strerror(-rc));
out_ctx:
	al_closep(&fd);
	free(mem);
	seccomp_release(ctx);
	return rc;
}

int al_seccomp_apply(const struct al_seccomp *sc)
{
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &sc->prog, 0, 0);
}

void al_seccomp_free(struct al_seccomp *sc)
{
	if (!sc)
		return;
	free(sc->prog.filter);
	sc->prog.filter = NULL;
	sc->prog.len = 0;
}
