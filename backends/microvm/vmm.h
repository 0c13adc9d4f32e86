/* vmm.h - the microVM backend's VMM drivers. The backend (microvm.c) owns
 * the VM's life: its cgroup, its unprivileged uid, the job channel's
 * protocol, the pool; a driver only knows how to start its VMM with a
 * kernel, an initramfs, memory, vCPUs and one channel to the guest agent,
 * how to ask it to stop, and what it is called. QEMU is driven through its
 * command line and QMP; a Firecracker driver (REST on a unix socket, via
 * libcurl, channel over vsock) fits the same three calls. */
#ifndef AL_VMM_H
#define AL_VMM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../proto/err.h"
#include "../cgroup.h"
#include "../kvm.h"

/* Everything a launch needs; the backend fills it. */
struct al_vmm_cfg {
	const char *binary;  /* the VMM executable */
	const char *kernel;  /* uncompressed kernel (ELF) */
	const char *initrd;  /* initramfs */
	const char *disk;    /* a read-only root image for the guest (virtio block), or NULL */
	const char *inputs;  /* the job's inputs pack (backends/inpack.h): a read-only disk
			      * with serial AL_VMM_INPUTS_SERIAL, or NULL */
	uint64_t memory_mib; /* guest RAM */
	unsigned vcpus;
	bool kvm;		/* hardware virtualisation, else emulation (TCG) */
	uint64_t tsc_khz;	/* emulation: the host's TSC rate, for the guest kernel */
	const char *console;	/* append the guest console here, or NULL = discard */
	const struct al_cg *cg; /* the VMM runs in this cgroup... */
	uid_t uid;		/* ...as this user and group, without capabilities */
	gid_t gid;
	gid_t kvm_gid; /* supplementary group for /dev/kvm (kvm only) */
	/* Network egress (else NULL and -1: no network device at all):
	 * airlock-egress-fwd, which the VMM starts for each guest connection,
	 * and the network namespace the jail joins instead of a new empty one
	 * (the worker's proxy listens there, on AL_EGRESS_FWD_NAME) */
	const char *egress_fwd;
	int egress_netns_fd;
	/* a warm-pool VM: its agent may start the job's interpreter before
	 * the job comes (the guest's airlock.warm=1; backends/microvm/warm.c) */
	bool warm;
	/* a restore: the VMM starts from this saved state (its driver's save,
	 * read from here on) instead of booting, and stays paused until the
	 * driver's resume; -1 = boot */
	int incoming_fd;
	/* guest RAM offered to KSM (identical pages merged across VMs); off,
	 * no VM's page is ever shared with another's (a timing side channel) */
	bool mem_merge;
	/* emulation: QEMU's translated-code cache, MiB (tb-size): a VM holds
	 * it whole once it ran enough code; smaller is denser and slower;
	 * 0 = 64 */
	uint64_t tcg_cache_mib;
	/* guest RAM as a memory backend named "ram" instead of QEMU's own,
	 * without the balloon (the pool's shared template, pool.c): ram_fd a
	 * memfd it maps (-1: anonymous memory of its own, a resumed copy's),
	 * shared (a VM that may become the template: its RAM stays in the
	 * memfd, out of its saved state) or, ram_private, copy-on-write (a
	 * template's copy, whose incoming state was saved without its RAM) */
	bool ram_named;
	int ram_fd;
	bool ram_private;
};

/* A running VMM. */
struct al_vmm {
	pid_t pid;
	int pidfd;	/* readable when the VMM exited */
	int chan_fd;	/* host end of the guest agent's channel (non-blocking) */
	int ctl_fd;	/* the VMM's control socket (QMP, API), or -1 */
	int sess_fd;	/* host end of the session port (a session's server), or -1 */
	bool ctl_ready; /* the control protocol was negotiated (QMP's capabilities) */
};

struct al_vmm_driver {
	const char *name;   /* "qemu" */
	const char *binary; /* default executable name, looked up on PATH */
	/* Start the VMM (detached: returns once it runs). On failure nothing
	 * is left. */
	int (*launch)(const struct al_vmm_cfg *cfg, struct al_vmm *vm, struct al_err *err);
	/* Ask the VMM to stop the VM and exit; 0 when it acknowledged. The
	 * caller kills it if it has not exited soon after. */
	int (*shutdown)(struct al_vmm *vm, int timeout_ms);
	/* Stop the VM's vCPUs and write its whole state (memory, devices) to
	 * fd, from its offset on, within timeout_ms; the VM stays stopped (the
	 * caller ends it, or resumes it: a fork's parent); without_ram: the
	 * RAM of a shared ram_fd left out (it stays in that memfd: a template).
	 * 0 or err. */
	int (*save)(struct al_vmm *vm, int fd, bool without_ram, int timeout_ms,
		    struct al_err *err);
	/* Run the VM's vCPUs again: a VMM launched with incoming_fd once it
	 * has read that state (waited for, within timeout_ms; 0: one look,
	 * and 1 while it still reads), or one that save stopped. 0 or err
	 * (the caller kills the VMM). */
	int (*resume)(struct al_vmm *vm, int timeout_ms, struct al_err *err);
};

extern const struct al_vmm_driver al_vmm_qemu;

/* Where the VMM sees its files in its jail (al_vmm_spawn): drivers name
 * these in the command line, never the host's paths. */
#define AL_VMM_JAIL_BINARY   "/vm/vmm"
#define AL_VMM_JAIL_KERNEL   "/vm/vmlinux"
#define AL_VMM_JAIL_INITRD   "/vm/initrd"
#define AL_VMM_JAIL_DISK     "/vm/disk"
#define AL_VMM_JAIL_FWD	     "/vm/egress-fwd"
#define AL_VMM_JAIL_INPUTS   "/vm/inputs"
#define AL_VMM_INCOMING_FD   6 /* a restore's state, in the VMM: after keep's chan, ctl, sess */
#define AL_VMM_INPUTS_SERIAL "airlock-inputs" /* the inputs disk's serial, as the guest sees it */

/* For drivers: start cfg->binary with argv (argv[0] is only its name) in a
 * jail, the model being Firecracker's jailer: new mount, PID (it is PID 1),
 * network (empty), IPC, UTS and cgroup namespaces; a root of its own with
 * only the host's /usr and /lib* links read-only, the loader cache, a /dev
 * of null, zero, urandom (and kvm with KVM), a fresh /proc, and the binary,
 * kernel, initramfs, disk and egress forwarder (read-only) at the
 * AL_VMM_JAIL_* paths (with egress: cfg's network namespace instead of an
 * empty one, and a reaper as PID 1, for the forwarders); in cfg's cgroup, as
 * cfg's uid with no capabilities and no_new_privs, dying with the worker.
 * The parent's fds keep[i] are moved to 3+i and every other one closed,
 * stdin and stdout on /dev/null and stderr on the console file or
 * /dev/null. */
int al_vmm_spawn(const struct al_vmm_cfg *cfg, char *const argv[], const int *keep, int nkeep,
		 struct al_vmm *vm, struct al_err *err);

/* The host's TSC rate in kHz (for guest kernels under emulation). */
uint64_t al_host_tsc_khz(void);

#endif
