/* jail.c - the VMM's start in its jail, for the drivers (vmm.h): its own
 * mount namespace holding only the guest's files, its uid, no
 * capabilities, its cgroup, death with the worker; and what the host
 * offers a VMM (KVM, the TSC's rate). Calls nothing of the backend's.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/kvm.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../common/log.h"
#include "../../common/clock.h"
#include "../../proto/keys.h"
#include "../backend.h"
#include "../cgroup.h"
#include "../judge.h"
#include "../jobfs.h"
#include "../jobspec.h"
#include "../netns.h"
#include "../newroot.h"
#include "../vmchan.h"
#include "egress_fwd.h"
#include "vmm.h"

/* ---- spawning a VMM (for drivers) ---- */

#define JAIL_STAGE "/tmp" /* where the jail's root is built, in its own mount namespace */

static void rc_close(int a, int b, int c)
{
	al_closep(&a);
	al_closep(&b);
	al_closep(&c);
}

/* The VMM's root (see vmm.h); in the child, as root, before the exec. */
static int build_jail(const struct al_vmm_cfg *cfg, const char **what)
{
	static const char *const nodes[] = {"null", "zero", "urandom", NULL};
	static const char *const nodes_kvm[] = {"null", "zero", "urandom", "kvm", NULL};
	char src[32];
	const char *files[6][2] = {{cfg->binary, JAIL_STAGE AL_VMM_JAIL_BINARY},
				   {cfg->kernel, JAIL_STAGE AL_VMM_JAIL_KERNEL},
				   {cfg->initrd, JAIL_STAGE AL_VMM_JAIL_INITRD},
				   {cfg->egress_fwd, JAIL_STAGE AL_VMM_JAIL_FWD}};
	int nfiles = 3, fds[6];

	/* by path, opened here: a mount of the worker's namespace cannot be
	 * bound into this one */
	if (cfg->egress_fwd)
		nfiles++;
	if (cfg->disk) {
		files[nfiles][0] = cfg->disk;
		files[nfiles++][1] = JAIL_STAGE AL_VMM_JAIL_DISK;
	}
	if (cfg->inputs) {
		files[nfiles][0] = cfg->inputs;
		files[nfiles++][1] = JAIL_STAGE AL_VMM_JAIL_INPUTS;
	}
	/* the host paths first: the stage may cover them */
	for (int i = 0; i < nfiles; i++)
		if ((fds[i] = open(files[i][0], O_PATH | O_CLOEXEC)) < 0) {
			*what = "open the VMM's files";
			return -1;
		}
	if (al_root_begin(JAIL_STAGE, what) || al_root_host_top(JAIL_STAGE, what))
		return -1;
	if (mkdir(JAIL_STAGE "/etc", 0755) || mkdir(JAIL_STAGE "/vm", 0755)) {
		*what = "mkdir in the jail";
		return -1;
	}
	if (al_root_keep("/etc/ld.so.cache", JAIL_STAGE "/etc/ld.so.cache", what) ||
	    al_root_dev(JAIL_STAGE, cfg->kvm ? nodes_kvm : nodes, what))
		return -1;
	for (int i = 0; i < nfiles; i++) {
		snprintf(src, sizeof(src), "/proc/self/fd/%d", fds[i]);
		if (al_root_bind_ro(src, files[i][1], false, what))
			return -1;
		close(fds[i]);
	}
	return al_root_enter(JAIL_STAGE, what);
}

/* With egress the VMM starts a forwarder per guest connection, which its
 * library detaches (a double fork): the orphans come to PID 1. So PID 1
 * stays behind as their reaper and the VMM runs as its child; PID 1 ends
 * with it (and the namespace with PID 1: a SIGKILL to it still ends all). */
static void reaper(void)
{
	pid_t vmm = fork(), w;
	int st = 0;

	if (vmm < 0)
		_exit(126);
	if (vmm == 0)
		return;
	syscall(SYS_close_range, 0, ~0u, 0);
	while ((w = waitpid(-1, &st, 0)) != vmm)
		if (w < 0 && errno != EINTR)
			_exit(127);
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

int al_vmm_spawn(const struct al_vmm_cfg *cfg, char *const argv[], const int *keep, int nkeep,
		 struct al_vmm *vm, struct al_err *err)
{
	static const char *const envp[] = {"PATH=/usr/bin:/bin", "LANG=C", NULL};
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	int con =
	    cfg->console ? open(cfg->console, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;
	/* readable once the worker is gone: a PID namespace has no getppid */
	int parent = (int)syscall(SYS_pidfd_open, getpid(), 0);
	pid_t pid;

	if (nul < 0 || parent < 0) {
		rc_close(nul, con, parent);
		return al_err_sys(err, "vmm: open /dev/null or the worker's pidfd");
	}
	vm->pidfd = -1;
	/* with egress the network namespace is the one the worker made */
	pid = al_clone_pidfd(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
				 (cfg->egress_netns_fd >= 0 ? 0 : CLONE_NEWNET),
			     &vm->pidfd);
	if (pid < 0) {
		rc_close(nul, con, parent);
		return al_err_sys(err, "vmm: clone into new namespaces");
	}
	if (pid == 0) {
		gid_t groups[1] = {cfg->kvm_gid};
		const char *what = "";
		struct pollfd pf = {.fd = parent, .events = POLLIN};

		if (al_cg_enter_self(cfg->cg) ||
		    (cfg->egress_netns_fd >= 0 && setns(cfg->egress_netns_fd, CLONE_NEWNET)))
			_exit(120);
		if (unshare(CLONE_NEWCGROUP) || build_jail(cfg, &what))
			_exit(119);
		/* keep[i] -> 3+i, null, the console and the worker's pidfd to
		 * theirs, each by way of a copy above every target and every
		 * source (any of which may be a target's number: the worker has
		 * many descriptors open) */
		{
			int hi = 64, tmp[8], n2, c2, p2;

			if (nkeep > 8)
				_exit(121);
			for (int i = 0; i < nkeep; i++)
				hi = keep[i] >= hi ? keep[i] + 1 : hi;
			hi = nul >= hi ? nul + 1 : hi;
			hi = con >= hi ? con + 1 : hi;
			hi = parent >= hi ? parent + 1 : hi;
			for (int i = 0; i < nkeep; i++)
				if ((tmp[i] = fcntl(keep[i], F_DUPFD, hi)) < 0)
					_exit(121);
			if ((n2 = fcntl(nul, F_DUPFD, hi)) < 0 ||
			    (c2 = con >= 0 ? fcntl(con, F_DUPFD, hi) : n2) < 0 ||
			    (p2 = fcntl(parent, F_DUPFD, hi)) < 0)
				_exit(121);
			for (int i = 0; i < nkeep; i++)
				if (dup2(tmp[i], 3 + i) < 0)
					_exit(121);
			if (dup2(n2, 0) < 0 || dup2(c2, 1) < 0 || dup2(c2, 2) < 0 ||
			    dup2(p2, 63) < 0)
				_exit(121);
		}
		pf.fd = 63;
		syscall(SYS_close_range, 3 + nkeep, 62, 0);
		syscall(SYS_close_range, 64, ~0u, 0);
		if (setgroups(cfg->kvm ? 1 : 0, groups) ||
		    setresgid(cfg->gid, cfg->gid, cfg->gid) ||
		    setresuid(cfg->uid, cfg->uid, cfg->uid))
			_exit(122);
		/* after the uid change, which clears it; then the worker must
		 * still be there (it may have died before the signal was armed) */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || poll(&pf, 1, 0) != 0)
			_exit(123);
		close(63);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
			_exit(124);
		if (cfg->egress_fwd)
			reaper();
		execve(AL_VMM_JAIL_BINARY, argv, (char *const *)envp);
		_exit(125);
	}
	rc_close(nul, con, parent);
	vm->pid = pid;
	return AL_OK;
}

/* The host's TSC rate in kHz, for guests under emulation. */
uint64_t al_host_tsc_khz(void)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[256];
	double mhz = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "cpu MHz : %lf", &mhz) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)(mhz * 1000);
}
