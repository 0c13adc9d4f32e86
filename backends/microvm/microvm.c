/* microvm.c - the microVM backend: one VM per job, destroyed after, with a
 * warm pool of pre-booted VMs per tier.
 *
 * Each VM is a VMM process (a driver of vmm.h; QEMU -M microvm here) booting
 * the image's kernel and initramfs, whose /init is the guest agent
 * (backends/microvm/agent.c). The VMM runs in its own cgroup
 * (airlock/<worker>/vm-<n>: guest RAM plus the VMM's own overhead, pids,
 * CPU), as an unprivileged uid of its own (uid_base + 256 + n), without
 * capabilities, with no_new_privs, dying with the worker, and without any
 * host file but the kernel and initramfs: no disk, no network device, no
 * shared directory. The agent says ready over a virtio-serial channel (a
 * socketpair, never a file), gets the job, runs it and sends the result;
 * then the VM powers off. The host bounds every frame (vmchan.h), trusts
 * the guest's result only about the job's own outcome (every field checked
 * against the job's caps), and enforces the wall-clock limit by killing the
 * VMM; a VM that stops without a result is a sandbox_error.
 *
 * Warm pool: for each tier whose policy says `pool: N`, N VMs of the tier's
 * default shape boot ahead of jobs; a job of that tier that fits takes one
 * (each VM still serves exactly one job) and the pool refills after the
 * result; each heartbeat replaces pool VMs that died or idled longer than
 * the tier's pool_max_idle_ms.
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
#include "../../common/clock.h"

#define MIB		     (1024ull * 1024ull)
#define GUEST_OVERHEAD_MIB   128 /* kernel, initramfs (unpacked), agent */
#define VMM_OVERHEAD_TCG_MIB 320 /* QEMU itself plus the TCG code cache */
#define VMM_OVERHEAD_KVM_MIB 96
#define VMM_PIDS	     64	 /* QEMU's threads */
#define VM_UID_OFFSET	     256 /* VMM uids: uid_base + 256 + n, after the slots' */
#define VM_UIDS		     512
#define JOB_SEND_TIMEOUT_MS  5000
#define FRAMES_PER_PASS	     64 /* channel frames handled per event-loop pass */
/* heartbeats a guest may send in ms since the job went in (one a second) */
#define HEARTBEATS_ALLOWED(ms) (16 + 4 * ((ms) / 1000))
#define HANG_TCG_MS	       20000 /* a guest silent this long (no ready, no heartbeat) is broken */
#define HANG_KVM_MS	       5000
#define DEFAULT_GUEST	       AL_IMAGES_DIR "/microvm"

struct vm {
	struct al_vmm v;
	struct al_cg cg;
	bool cg_made;
	int uid_idx;
	struct al_chan_rd rd;
	bool ready;  /* the agent said ready */
	bool warm;   /* ...and that the job's interpreter waits, warm (AL_CHAN_WARM) */
	bool exited; /* the VMM was reaped */
	uint64_t born_ms, ready_ms;
	uint64_t memory_mib;
	unsigned vcpus;
	char hash[80];	      /* the job's catalogue image's content hash, else the guest's */
	char guest[PATH_MAX]; /* kernel and initramfs */
	char disk[PATH_MAX];  /* the catalogue image's block image ("" = none) */
	int egress_fd;	      /* network egress: the proxy's socket, until the worker takes it */
};

struct pool {
	char tier[AL_ID_MAX + 1];
	char guest[PATH_MAX];
	char image[AL_ID_MAX + 1]; /* catalogue image name ("" = none) */
	unsigned size, vcpus;
	uint64_t memory_mib, max_idle_ms;
	struct vm *vms[64];
	unsigned n;
};

static struct {
	const struct al_backend_conf *conf;
	const struct al_vmm_driver *drv;
	struct al_cg_sys cg;
	char binary[PATH_MAX];
	bool kvm;
	gid_t kvm_gid;
	uint64_t tsc_khz;
	bool uid_used[VM_UIDS];
	unsigned seq;
	struct pool pools[8];
	int npools;
	char fwd[PATH_MAX]; /* airlock-egress-fwd, found at start-up */
	bool ready;
} G;

struct mvm_sb {
	struct vm *vm;
	bool warm;			      /* taken from the pool */
	bool sent;			      /* the job went in */
	int timer_fd;			      /* fires at the nearest deadline (see deadline()) */
	uint64_t start_ms, sent_ms, heard_ms; /* monotonic */
	uint64_t beats;			      /* heartbeats heard since the job went in */
	struct al_buf live[3];		      /* live output: stdout [1], stderr [2] not yet read */
	uint64_t live_base[3];		      /* ...the stream's offset of live[i]'s first byte */
	struct al_limits env; /* what the VM needs: the job's limits, or a grading job's
			       * envelope (all its steps, al_grade_envelope) */
};

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
		/* keep[i] -> 3+i, by way of fds above every target */
		for (int i = 0; i < nkeep; i++)
			if (dup2(keep[i], 64 + i) < 0)
				_exit(121);
		for (int i = 0; i < nkeep; i++)
			if (dup2(64 + i, 3 + i) < 0)
				_exit(121);
		if (dup2(nul, 0) < 0 || dup2(con >= 0 ? con : nul, 1) < 0 ||
		    dup2(con >= 0 ? con : nul, 2) < 0 || dup2(parent, 63) < 0)
			_exit(121);
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

/* ---- one VM ---- */

static bool vm_exited(struct vm *vm)
{
	struct pollfd p = {.fd = vm->v.pidfd, .events = POLLIN};

	return vm->exited || poll(&p, 1, 0) > 0;
}

/* Stop the VMM (politely first when graceful: the driver's shutdown), reap
 * it, remove its cgroup: nothing of the VM is left. */
static void vm_free(struct vm *vm, bool graceful)
{
	if (!vm)
		return;
	if (vm->v.pidfd >= 0) {
		al_pidfd_kill_wait(vm->v.pidfd,
				   !vm_exited(vm) &&
				       !(graceful && G.drv->shutdown(&vm->v, 200) == 0));
		close(vm->v.pidfd);
	}
	al_closep(&vm->v.chan_fd);
	al_closep(&vm->v.ctl_fd);
	al_closep(&vm->v.sess_fd);
	al_closep(&vm->egress_fd);
	if (vm->cg_made)
		al_cg_destroy(&vm->cg, NULL);
	if (vm->uid_idx >= 0)
		G.uid_used[vm->uid_idx] = false;
	al_chan_rd_free(&vm->rd);
	free(vm);
}

/* The guest directory: vmlinux, initramfs.lz4, .airlock-image. */
static int guest_check(const char *dir, struct al_err *err)
{
	char p[PATH_MAX + 32];

	snprintf(p, sizeof(p), "%s/vmlinux", dir);
	if (access(p, R_OK))
		return al_err_set(
		    err, AL_ESANDBOX,
		    "microvm: guest %s is not built (no vmlinux): run `make microvm-image`", dir);
	snprintf(p, sizeof(p), "%s/initramfs.lz4", dir);
	if (access(p, R_OK))
		return al_err_set(
		    err, AL_ESANDBOX,
		    "microvm: guest %s is not built (no initramfs.lz4): run `make microvm-image`",
		    dir);
	return AL_OK;
}

/* Boot a VM of guest with catalogue image (NULL: none) as its disk; a
 * pool's (warm) may start its job's interpreter ahead. */
static struct vm *vm_launch(const char *guest, const char *image, const char *inputs, bool egress,
			    bool warm, uint64_t memory_mib, unsigned vcpus, struct al_err *err)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	struct al_vmm_cfg cfg = {0};
	char kernel[PATH_MAX + 16], initrd[PATH_MAX + 16], name[32], p[PATH_MAX + 32];
	struct al_cg_limits lim;
	int rc;

	if (!vm) {
		al_err_set(err, AL_ESANDBOX, "microvm: out of memory");
		return NULL;
	}
	vm->v.pid = -1;
	vm->v.pidfd = vm->v.chan_fd = vm->v.ctl_fd = vm->v.sess_fd = vm->egress_fd = -1;
	vm->uid_idx = -1;
	vm->memory_mib = memory_mib;
	vm->vcpus = vcpus;
	snprintf(vm->guest, sizeof(vm->guest), "%s", guest);
	if (guest_check(guest, err))
		goto fail;
	if (image) {
		if (al_image_path(G.conf, image, true, vm->disk, sizeof(vm->disk), err)) {
			al_err_wrap(err, "microvm");
			goto fail;
		}
		al_image_hash(G.conf, image, vm->hash, sizeof(vm->hash));
	} else {
		snprintf(p, sizeof(p), "%s/.airlock-image", guest);
		if (!al_read_text(p, vm->hash, sizeof(vm->hash)))
			snprintf(vm->hash, sizeof(vm->hash), "unhashed");
		vm->hash[strcspn(vm->hash, "\n")] = '\0';
	}
	for (int i = 0; i < VM_UIDS; i++)
		if (!G.uid_used[i]) {
			vm->uid_idx = i;
			G.uid_used[i] = true;
			break;
		}
	if (vm->uid_idx < 0) {
		al_err_set(err, AL_ESANDBOX, "microvm: more than %d VMs at once", VM_UIDS);
		goto fail;
	}
	snprintf(name, sizeof(name), "vm-%u", G.seq++);
	lim = (struct al_cg_limits){
	    .memory_bytes =
		(memory_mib + (G.kvm ? VMM_OVERHEAD_KVM_MIB : VMM_OVERHEAD_TCG_MIB)) * MIB,
	    .pids = VMM_PIDS,
	    .cpu_millis = (uint64_t)vcpus * 1000,
	};
	if ((rc = al_cg_create(&vm->cg, &G.cg, name, &lim, err)))
		goto fail;
	vm->cg_made = true;
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", guest);
	snprintf(initrd, sizeof(initrd), "%s/initramfs.lz4", guest);
	cfg = (struct al_vmm_cfg){
	    .binary = G.binary,
	    .kernel = kernel,
	    .initrd = initrd,
	    .disk = vm->disk[0] ? vm->disk : NULL,
	    .inputs = inputs,
	    .memory_mib = memory_mib,
	    .vcpus = vcpus,
	    .kvm = G.kvm,
	    .tsc_khz = G.tsc_khz,
	    .console = G.conf->vm_console,
	    .cg = &vm->cg,
	    .uid = G.conf->uid_base + VM_UID_OFFSET + (uid_t)vm->uid_idx,
	    .gid = G.conf->uid_base + VM_UID_OFFSET + (gid_t)vm->uid_idx,
	    .kvm_gid = G.kvm_gid,
	    .egress_netns_fd = -1,
	    .warm = warm,
	};
	/* Network egress: the jail's network namespace is made here, with the
	 * proxy's socket in it before the VMM can start a forwarder. */
	if (egress) {
		if ((vm->egress_fd =
			 al_netns_new(0, AL_EGRESS_FWD_NAME, &cfg.egress_netns_fd, err)) < 0) {
			al_err_wrap(err, "microvm");
			goto fail;
		}
		cfg.egress_fwd = G.fwd;
	}
	vm->born_ms = al_mono_ms();
	rc = G.drv->launch(&cfg, &vm->v, err);
	al_closep(&cfg.egress_netns_fd); /* the VMM's jail holds it now */
	if (rc)
		goto fail;
	fcntl(vm->v.chan_fd, F_SETFL, fcntl(vm->v.chan_fd, F_GETFL) | O_NONBLOCK);
	return vm;
fail:
	vm_free(vm, false);
	return NULL;
}

/* The guest said its interpreter is warm (AL_CHAN_WARM, once). */
static void vm_took_warm(struct vm *vm)
{
	al_chan_rd_reset(&vm->rd);
	vm->warm = true;
	al_log("info", "vm_warm", "vmm_pid=%d ms_since_launch=%llu", (int)vm->v.pid,
	       (unsigned long long)(al_mono_ms() - vm->born_ms));
}

/* Read what the channel holds before the job: the ready frame, then a
 * warm pool VM's word that its interpreter is warm. 1 when the agent is
 * ready, 0 not yet, negative when the VM is of no use. */
static int vm_poll_ready(struct vm *vm, struct al_err *err)
{
	int rc;

	if (vm->ready && !vm->warm) {
		struct al_err e = {0};

		/* an error (the VM ended) is for whoever reads next to report */
		if (al_chan_read(&vm->rd, vm->v.chan_fd, AL_CHAN_READY_MAX, &e) <= 0)
			return 1;
		if (vm->rd.body.len != 1 || vm->rd.body.data[0] != AL_CHAN_WARM)
			return al_err_set(err, AL_ESANDBOX,
					  "microvm: the guest spoke out of turn before its job");
		vm_took_warm(vm);
		return 1;
	}
	if (vm->ready)
		return 1;
	rc = al_chan_read(&vm->rd, vm->v.chan_fd, AL_CHAN_READY_MAX, err);
	if (rc <= 0)
		return rc;
	if (vm->rd.body.data[0] != AL_CHAN_READY)
		return al_err_set(err, AL_ESANDBOX, "microvm: the guest spoke before it was ready");
	al_chan_rd_reset(&vm->rd);
	vm->ready = true;
	vm->ready_ms = al_mono_ms();
	return 1;
}

/* ---- the pool ---- */

static unsigned vcpus_for(uint64_t cpu_millis)
{
	unsigned v = (unsigned)((cpu_millis + 999) / 1000);

	return v < 1 ? 1 : v > 16 ? 16 : v;
}

/* The VM's RAM: the job's limit (enforced inside by its cgroup), the
 * guest's own (kernel, initramfs, agent) and an eighth more (at most
 * 512 MiB), so that the cgroup's limit is reached before the VM runs out:
 * a job past its limit is memory_limit here too. */
static uint64_t memory_mib_for(uint64_t memory_bytes)
{
	uint64_t mib = (memory_bytes + MIB - 1) / MIB, extra = mib / 8 > 512 ? 512 : mib / 8;

	return mib + GUEST_OVERHEAD_MIB + extra;
}

static void pool_fill(struct pool *p)
{
	while (p->n < p->size) {
		struct al_err err = {0};
		struct vm *vm = vm_launch(p->guest, p->image[0] ? p->image : NULL, NULL, false,
					  true, p->memory_mib, p->vcpus, &err);

		if (!vm) {
			fprintf(stderr, "airlock-worker: microvm: pool %s: %s\n", p->tier, err.msg);
			return;
		}
		p->vms[p->n++] = vm;
	}
}

/* Take the pool VM that fits the job best (one whose interpreter is warm,
 * then a ready one, then one still booting); NULL if none does. */
static struct vm *pool_take(const char *tier, const char *guest, const char *image,
			    uint64_t memory_mib, unsigned vcpus)
{
	for (int i = 0; i < G.npools; i++) {
		struct pool *p = &G.pools[i];
		int best = -1;

		if (strcmp(p->tier, tier) || strcmp(p->guest, guest) ||
		    strcmp(p->image, image ? image : "") || p->vcpus != vcpus ||
		    p->memory_mib < memory_mib)
			continue;
		for (unsigned k = 0, score = 0; k < p->n && score < 3; k++) {
			struct al_err err = {0};
			int rc = vm_poll_ready(p->vms[k], &err);
			/* still booting is better than a cold boot */
			unsigned s = rc > 0				? (p->vms[k]->warm ? 3 : 2)
				     : rc == 0 && !vm_exited(p->vms[k]) ? 1
									: 0;

			if (s > score) {
				best = (int)k;
				score = s;
			}
		}
		if (best >= 0) {
			struct vm *vm = p->vms[best];

			p->vms[best] = p->vms[--p->n];
			return vm;
		}
	}
	return NULL;
}

static void mvm_tick(const struct al_backend_conf *conf)
{
	uint64_t now = al_mono_ms();

	(void)conf;
	for (int i = 0; i < G.npools; i++) {
		struct pool *p = &G.pools[i];

		for (unsigned k = 0; k < p->n;) {
			struct vm *vm = p->vms[k];
			struct al_err err = {0};
			bool stale = now - vm->born_ms > p->max_idle_ms;

			if (vm_poll_ready(vm, &err) < 0 || vm_exited(vm) || stale) {
				p->vms[k] = p->vms[--p->n];
				vm_free(vm, stale);
				continue;
			}
			k++;
		}
		pool_fill(p);
	}
}

static int mvm_pool(const struct al_backend_conf *conf, const struct al_pool_spec *ps,
		    struct al_err *err)
{
	struct pool *p;

	if (ps->size == 0)
		return AL_OK;
	if (G.npools == (int)(sizeof(G.pools) / sizeof(G.pools[0])))
		return al_err_set(err, AL_ESANDBOX, "microvm: at most %zu pooled tiers",
				  sizeof(G.pools) / sizeof(G.pools[0]));
	if (ps->size > sizeof(p->vms) / sizeof(p->vms[0]))
		return al_err_set(err, AL_EINVAL, "microvm: pool of %u is over %zu", ps->size,
				  sizeof(p->vms) / sizeof(p->vms[0]));
	p = &G.pools[G.npools];
	memset(p, 0, sizeof(*p));
	snprintf(p->tier, sizeof(p->tier), "%s", ps->tier);
	snprintf(p->guest, sizeof(p->guest), "%s", ps->guest ? ps->guest : DEFAULT_GUEST);
	snprintf(p->image, sizeof(p->image), "%s", ps->image ? ps->image : "");
	if (guest_check(p->guest, err))
		return AL_ESANDBOX;
	if (ps->image) {
		char disk[PATH_MAX];

		if (al_image_path(conf, ps->image, true, disk, sizeof(disk), err))
			return al_err_wrap(err, "microvm: pool %s", ps->tier);
	}
	p->size = ps->size;
	p->vcpus = vcpus_for(ps->cpu_millis);
	p->memory_mib = memory_mib_for(ps->memory_bytes);
	p->max_idle_ms = ps->max_idle_ms ? ps->max_idle_ms : 600000;
	G.npools++;
	pool_fill(p);
	return AL_OK;
}

static void mvm_refill(const struct al_backend_conf *conf, unsigned slot)
{
	(void)conf;
	(void)slot;
	for (int i = 0; i < G.npools; i++)
		pool_fill(&G.pools[i]);
}

/* ---- the backend ---- */

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

/* KVM is usable when the CPU has virtualisation extensions and /dev/kvm
 * makes a VM (a /dev/kvm node alone is not enough: nested hosts may have
 * one that fails later). *gid gets the device's group; why, when it is
 * not usable, the reason. */
bool al_kvm_usable(gid_t *gid, struct al_err *why)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[4096];
	bool ext = false;
	struct stat st;
	int fd, vm;

	while (f && !ext && fgets(line, sizeof(line), f))
		ext = !strncmp(line, "flags", 5) && (strstr(line, " vmx") || strstr(line, " svm"));
	if (f)
		fclose(f);
	if (!ext) {
		al_err_set(why, AL_ESANDBOX,
			   "the CPU shows no virtualisation extensions (vmx/svm)");
		return false;
	}
	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		al_err_sys(why, "open /dev/kvm");
		return false;
	}
	vm =
	    ioctl(fd, KVM_GET_API_VERSION, 0) == KVM_API_VERSION ? ioctl(fd, KVM_CREATE_VM, 0) : -1;
	al_closep(&vm);
	if (fstat(fd, &st) == 0)
		*gid = st.st_gid;
	close(fd);
	if (vm < 0)
		al_err_set(why, AL_ESANDBOX, "/dev/kvm opens but cannot make a VM");
	return vm >= 0;
}

static int mvm_init(const struct al_backend_conf *conf, struct al_err *err)
{
	const char *accel = conf->vm_accel;
	const char *vmm = conf->vmm ? conf->vmm : "qemu";
	struct al_err why = {0};
	int rc;

	memset(&G, 0, sizeof(G));
	G.conf = conf;
	if (geteuid() != 0)
		return al_err_set(err, AL_ESANDBOX, "microvm: needs root (cgroups, VMM users)");
	if (strcmp(vmm, al_vmm_qemu.name))
		return al_err_set(err, AL_ESANDBOX,
				  "microvm: unknown VMM \"%s\" (this build has qemu)", vmm);
	G.drv = &al_vmm_qemu;
	if (!al_find_exec(conf->vmm_binary ? conf->vmm_binary : G.drv->binary, G.binary,
			  sizeof(G.binary)))
		return al_err_set(err, AL_ESANDBOX,
				  "microvm: %s not found (install qemu-system-x86)",
				  conf->vmm_binary ? conf->vmm_binary : G.drv->binary);
	if ((rc = al_cg_detect(&G.cg, conf->worker_id, "microvm", err)))
		return al_err_wrap(err, "microvm");
	/* KVM when /dev/kvm opens, unless told otherwise; TCG is slow but the
	 * same boundary. */
	if (!accel || !strcmp(accel, "kvm")) {
		G.kvm = al_kvm_usable(&G.kvm_gid, &why);
		if (accel && !G.kvm)
			return al_err_set(err, AL_ESANDBOX,
					  "microvm: --vm-accel kvm: KVM cannot be used here: %s",
					  why.msg);
	} else if (strcmp(accel, "tcg")) {
		return al_err_set(err, AL_ESANDBOX,
				  "microvm: --vm-accel must be kvm or tcg, not \"%s\"", accel);
	} else {
		al_err_set(&why, AL_ESANDBOX, "--vm-accel tcg");
	}
	/* emulation is the same boundary, many times slower: say so once */
	al_log("info", "microvm_accel", "accel=%s%s%s", G.kvm ? "kvm" : "tcg",
	       G.kvm ? "" : " why=", G.kvm ? "" : why.msg);
	G.tsc_khz = G.kvm ? 0 : al_host_tsc_khz();
	if ((rc =
		 al_find_helper(conf->helper_dir, "airlock-egress-fwd", G.fwd, sizeof(G.fwd), err)))
		return al_err_wrap(err, "microvm");
	G.ready = true;
	return AL_OK;
}

static int mvm_sweep(const struct al_backend_conf *conf, struct al_err *err)
{
	(void)conf;
	/* A crashed run's VMMs died with it (parent-death signal); their
	 * cgroups are the only trace, swept with every other cgroup of this
	 * worker id. Nothing of a VM is ever on disk. */
	return al_cg_sweep(&G.cg, err);
}

static int mvm_prepare(struct al_sandbox *sb, struct al_err *err)
{
	struct mvm_sb *m = sb->priv;
	const struct al_run_spec *s = &sb->spec;
	const char *guest = s->guest ? s->guest : DEFAULT_GUEST;
	uint64_t mib;
	unsigned vcpus = vcpus_for(s->cpu_millis);
	bool egress = s->network == AL_NET_EGRESS;

	al_grade_envelope(s->job, &s->limits, &m->env);
	mib = memory_mib_for(m->env.memory_bytes);
	m->timer_fd = -1;
	if (!G.ready)
		return al_err_set(err, AL_ESANDBOX, "microvm: backend not initialised");
	/* pool VMs have no network card nor inputs disk: a job with egress or
	 * inputs boots its own */
	m->vm = egress || s->inputs_pack
		    ? NULL
		    : pool_take(s->job->tier ? s->job->tier : "", guest, s->image, mib, vcpus);
	m->warm = m->vm != NULL;
	if (!m->vm &&
	    !(m->vm = vm_launch(guest, s->image, s->inputs_pack, egress, false, mib, vcpus, err)))
		return AL_ESANDBOX;
	if (egress)
		sb->spec.proxy_url = AL_VMM_PROXY_URL; /* in the job's environment */
	return AL_OK;
}

/* How long a guest may stay silent: not ready yet, or no heartbeat while
 * its job runs. */
static uint64_t hang_ms(void)
{
	return G.conf->vm_hang_ms ? G.conf->vm_hang_ms : G.kvm ? HANG_KVM_MS : HANG_TCG_MS;
}

/* The nearest deadline: the boot's before the job went in; then the job's
 * wall-clock limit and the guest's next heartbeat. */
static uint64_t deadline(const struct al_sandbox *sb)
{
	const struct mvm_sb *m = sb->priv;
	uint64_t wall = m->sent_ms + m->env.wall_ms, hang = m->heard_ms + hang_ms();

	return !m->sent ? m->start_ms + hang_ms() : wall < hang ? wall : hang;
}

static void arm(const struct al_sandbox *sb)
{
	const struct mvm_sb *m = sb->priv;
	uint64_t at = deadline(sb), now = al_mono_ms(), ms = at > now ? at - now : 1;
	struct itimerspec it = {.it_value = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000}};

	timerfd_settime(m->timer_fd, 0, &it, NULL);
}

static int send_job(struct al_sandbox *sb, struct al_err *err)
{
	struct mvm_sb *m = sb->priv;
	int rc = al_chan_send_job(m->vm->v.chan_fd, &sb->spec, sb->conf->collect_max_bytes,
				  JOB_SEND_TIMEOUT_MS, err);

	m->sent = rc == 0;
	m->sent_ms = m->heard_ms = al_mono_ms(); /* the job's clock starts now */
	return rc;
}

static int mvm_start(struct al_sandbox *sb, struct al_watch *w, struct al_err *err)
{
	struct mvm_sb *m = sb->priv;
	int rc;

	m->start_ms = al_mono_ms();
	m->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (m->timer_fd < 0)
		return al_err_sys(err, "microvm: timerfd_create");
	if ((rc = vm_poll_ready(m->vm, err)) < 0)
		return rc;
	if (rc > 0 && (rc = send_job(sb, err)))
		return rc;
	arm(sb);
	w->fds[w->nfds++] = m->vm->v.chan_fd;
	w->fds[w->nfds++] = m->vm->v.pidfd;
	w->fds[w->nfds++] = m->timer_fd;
	w->egress_fd = m->vm->egress_fd; /* the worker's now */
	m->vm->egress_fd = -1;
	if (sb->spec.session) { /* the session port's host end: the worker's now */
		w->session_fd = m->vm->v.sess_fd;
		m->vm->v.sess_fd = -1;
	}
	/* The boot does not count against the job: the wall-clock limit is
	 * enforced here from the moment the job went in. */
	w->setup_ms = hang_ms();
	return AL_OK;
}

static int mvm_kill(struct al_sandbox *sb, struct al_err *err)
{
	struct mvm_sb *m = sb->priv;

	(void)err;
	if (m->vm && !m->vm->exited)
		syscall(SYS_pidfd_send_signal, m->vm->v.pidfd, SIGKILL, NULL, 0);
	return AL_OK;
}

/* What a guest may say of its interpreter (warm.c): "warm", or "cold (...)"
 * of at most 240 printable ASCII characters. */
static bool interpreter_word(const char *v)
{
	size_t n = strlen(v);

	if (!strcmp(v, "warm"))
		return true;
	if (n > 240 || strncmp(v, "cold (", 6) || v[n - 1] != ')')
		return false;
	for (size_t i = 0; i < n; i++)
		if (v[i] < 0x20 || v[i] > 0x7e)
			return false;
	return true;
}

/* Take the guest's result into res, believing it only about the job's own
 * outcome and only within the job's caps. */
static int take_result(struct al_sandbox *sb, const char *p, size_t n, struct al_result *res,
		       struct al_err *err)
{
	struct al_result g = {0};
	struct al_err e = {0};
	int rc = AL_ESANDBOX;

	if (al_result_decode(p, n, &g, &e))
		return al_err_set(err, AL_ESANDBOX, "microvm: the guest sent an invalid result: %s",
				  e.msg);
	if (!g.id || strcmp(g.id, sb->spec.job->id)) {
		al_err_set(err, AL_ESANDBOX, "microvm: the guest answered for another job");
		goto out;
	}
	switch (g.status) {
	case AL_ST_OK:
	case AL_ST_NONZERO_EXIT:
	case AL_ST_CPU_LIMIT:
	case AL_ST_MEMORY_LIMIT:
	case AL_ST_OUTPUT_LIMIT: break;
	case AL_ST_COMPILE_ERROR:
		if (sb->spec.job->build)
			break; /* a grading job's build failed */
		al_err_set(err, AL_ESANDBOX,
			   "microvm: compile_error from the guest for a job "
			   "without a build");
		goto out;
	case AL_ST_REJECTED:
		rc = al_err_set(err, AL_EINVAL, "%s", g.error ? g.error : "refused by the guest");
		goto out;
	case AL_ST_SANDBOX_ERROR:
		al_err_set(err, AL_ESANDBOX, "microvm guest: %s",
			   g.error ? g.error : "agent failure");
		goto out;
	default:
		al_err_set(err, AL_ESANDBOX, "microvm: the guest reported status %s",
			   al_status_name(g.status));
		goto out;
	}
	if (al_chan_check_result(&sb->spec, sb->conf->collect_max_bytes, &g, err))
		goto out;
	res->status = g.status;
	res->has_exit_code = g.has_exit_code;
	res->exit_code = g.exit_code;
	res->signal = g.signal;
	res->out = g.out;
	res->out_truncated = g.out_truncated;
	res->err = g.err;
	res->err_truncated = g.err_truncated;
	res->files = g.files;
	res->nfiles = g.nfiles;
	res->cpu_ms = g.cpu_ms;
	res->peak_memory_bytes = g.peak_memory_bytes;
	res->max_rss_bytes = g.max_rss_bytes;
	if (g.error)
		al_result_set_error(res, "%s", g.error);
	/* of the guest's own facts only this one: "warm", or "cold (why)" in
	 * a line of plain text */
	for (size_t i = 0; i < g.ninfo; i++)
		if (!strcmp(g.info[i].key, "interpreter") && interpreter_word(g.info[i].value))
			al_result_add_info(res, "interpreter", g.info[i].value);
	res->build = g.build; /* a grading job's verdicts */
	res->tests = g.tests;
	res->ntests = g.ntests;
	g.out = g.err = (struct al_bytes){0};
	g.files = NULL;
	g.nfiles = 0;
	g.build = NULL;
	g.tests = NULL;
	g.ntests = 0;
	rc = AL_OK;
out:
	al_result_free(&g);
	return rc;
}

static void add_info(struct al_sandbox *sb, struct al_result *res)
{
	struct mvm_sb *m = sb->priv;
	char v[32];

	al_result_add_info(res, "image", m->vm->hash);
	al_result_add_info(res, "vmm", G.drv->name);
	al_result_add_info(res, "accel", G.kvm ? "kvm" : "tcg");
	al_result_add_info(res, "boot", m->warm ? "warm" : "cold");
	snprintf(v, sizeof(v), "%llu", (unsigned long long)(m->vm->ready_ms - m->vm->born_ms));
	al_result_add_info(res, "boot_ms", v);
}

/* An 'O' frame: the next bytes of one of the job's streams, believed only
 * within the job's cap (the agent stops there; more is a guest misbehaving). */
static int take_output(struct al_sandbox *sb, const char *p, size_t n, struct al_err *err)
{
	struct mvm_sb *m = sb->priv;
	int st = n ? (unsigned char)p[0] : 0;
	uint64_t cap = st == 1 ? m->env.stdout_bytes : m->env.stderr_bytes;

	if ((st != 1 && st != 2) || n < 2 || n - 1 > AL_OUT_CHUNK_MAX)
		return al_err_set(err, AL_ESANDBOX,
				  "microvm: a malformed output frame from the guest");
	if (m->live_base[st] + m->live[st].len + (n - 1) > cap)
		return al_err_set(
		    err, AL_ESANDBOX,
		    "microvm: the guest sends more %s than the job's cap of %llu bytes",
		    st == 1 ? "stdout" : "stderr", (unsigned long long)cap);
	if (al_buf_append(&m->live[st], p + 1, n - 1))
		return al_err_set(err, AL_ESANDBOX, "microvm: out of memory for live output");
	return AL_OK;
}

/* Live output: what the guest's 'O' frames brought since the last read.
 * The worker reads each stream in order, so what it has read is dropped
 * (once more than 1 MiB of it): the buffer holds the unread window only. */
static ssize_t mvm_output(struct al_sandbox *sb, int stream, uint64_t off, void *buf, size_t cap)
{
	struct mvm_sb *m = sb->priv;
	struct al_buf *b;
	size_t at, n;

	if (stream != 1 && stream != 2)
		return -1;
	b = &m->live[stream];
	if (off < m->live_base[stream])
		return -1; /* read before: not kept */
	at = (size_t)(off - m->live_base[stream]);
	if (at >= b->len)
		return 0;
	n = b->len - at < cap ? b->len - at : cap;
	memcpy(buf, b->data + at, n);
	if (at + n > (1u << 20)) {
		memmove(b->data, b->data + at + n, b->len - at - n);
		b->len -= at + n;
		b->data[b->len] = '\0';
		m->live_base[stream] += at + n;
	}
	return (ssize_t)n;
}

static int mvm_reap(struct al_sandbox *sb, struct al_result *res, struct al_err *err)
{
	struct mvm_sb *m = sb->priv;
	struct vm *vm = m->vm;
	uint64_t ticks, now;
	int rc;

	/* What the channel holds first: a result beats a deadline. A bounded
	 * number of frames per pass (each read bounded too): a guest cannot
	 * keep the worker's event loop here. */
	for (int frames = 0; frames < FRAMES_PER_PASS; frames++) {
		if (!m->sent) {
			if ((rc = vm_poll_ready(vm, err)) > 0 && !(rc = send_job(sb, err)))
				continue;
		} else if ((rc = al_chan_read(
				&vm->rd, vm->v.chan_fd,
				al_chan_result_cap(&sb->spec, sb->conf->collect_max_bytes), err)) >
			   0) {
			char type = vm->rd.body.data[0];

			if (type == AL_CHAN_HEARTBEAT && vm->rd.body.len == 1) {
				m->heard_ms = al_mono_ms();
				al_chan_rd_reset(&vm->rd);
				/* one a second is the protocol; a flood is an attack */
				if (++m->beats > HEARTBEATS_ALLOWED(m->heard_ms - m->sent_ms)) {
					rc = al_err_set(
					    err, AL_ESANDBOX,
					    "the guest floods its channel (%llu heartbeats in %llu "
					    "ms)",
					    (unsigned long long)m->beats,
					    (unsigned long long)(m->heard_ms - m->sent_ms));
					break;
				}
				continue;
			}
			if (type == AL_CHAN_WARM && vm->rd.body.len == 1 && !vm->warm) {
				vm_took_warm(vm); /* said as the job went in: once, no more */
				continue;
			}
			if (type == AL_CHAN_OUTPUT) {
				if ((rc = take_output(sb, vm->rd.body.data + 1, vm->rd.body.len - 1,
						      err)))
					break;
				al_chan_rd_reset(&vm->rd);
				continue;
			}
			if (type != AL_CHAN_RESULT)
				rc = al_err_set(err, AL_ESANDBOX,
						"microvm: unexpected frame from the guest");
			else
				rc = take_result(sb, vm->rd.body.data + 1, vm->rd.body.len - 1, res,
						 err);
			if (rc == AL_OK) {
				/* the agent powers off once it knows the result arrived */
				struct al_err ignored = {0};

				al_chan_write(vm->v.chan_fd, AL_CHAN_ACK, NULL, 0, NULL, 0, 100,
					      &ignored);
				add_info(sb, res);
			}
			return rc == AL_OK ? 1 : rc;
		}
		break;
	}
	if (rc < 0 && vm->rd.eof) {
		/* The VMM closes the channel as it exits: give it a moment so
		 * that the report says how it ended. */
		struct pollfd p = {.fd = vm->v.pidfd, .events = POLLIN};

		poll(&p, 1, 500);
	}
	if (rc < 0 && !vm_exited(vm)) {
		syscall(SYS_pidfd_send_signal, vm->v.pidfd, SIGKILL, NULL, 0);
		return al_err_wrap(err, "microvm");
	}
	if (read(m->timer_fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		return al_err_sys(err, "microvm: timerfd");
	now = al_mono_ms();
	if (now >= deadline(sb)) {
		syscall(SYS_pidfd_send_signal, vm->v.pidfd, SIGKILL, NULL, 0);
		if (!m->sent)
			return al_err_set(err, AL_ESANDBOX,
					  "microvm: the guest did not boot within %llu ms",
					  (unsigned long long)hang_ms());
		if (now < m->sent_ms + m->env.wall_ms)
			return al_err_set(err, AL_ESANDBOX,
					  "microvm: the guest stopped answering (no heartbeat for "
					  "%llu ms): hung or overloaded",
					  (unsigned long long)(now - m->heard_ms));
		res->status = AL_ST_TIMEOUT;
		al_result_set_error(res, "wall-clock limit of %llu ms reached: the VM was killed%s",
				    (unsigned long long)m->env.wall_ms,
				    G.kvm ? ""
					  : " (accel tcg: no KVM on this worker, the code ran "
					    "emulated, several times slower)");
		add_info(sb, res);
		return 1;
	}
	if (!vm_exited(vm)) {
		arm(sb);
		return 0; /* more to come */
	}
	/* The VM stopped without a result. */
	{
		siginfo_t si = {0};

		waitid(P_PIDFD, (id_t)vm->v.pidfd, &si, WEXITED | WNOHANG);
		vm->exited = si.si_pid != 0;
		return al_err_set(err, AL_ESANDBOX,
				  "microvm: the VM stopped before it sent a result (guest panic, "
				  "agent failure or VMM crash; %s %d)",
				  si.si_code == CLD_EXITED ? "VMM exit status"
							   : "VMM killed by signal",
				  si.si_status);
	}
}

static void mvm_destroy(struct al_sandbox *sb)
{
	struct mvm_sb *m = sb->priv;

	vm_free(m->vm, false);
	m->vm = NULL;
	al_closep(&m->timer_fd);
	m->timer_fd = -1;
	al_buf_free(&m->live[1]);
	al_buf_free(&m->live[2]);
}

static void mvm_fini(void)
{
	for (int i = 0; i < G.npools; i++) {
		for (unsigned k = 0; k < G.pools[i].n; k++)
			vm_free(G.pools[i].vms[k], true);
		G.pools[i].n = 0;
	}
	G.npools = 0;
	if (G.ready)
		al_cg_release(&G.cg);
	G.ready = false;
}

static const char *mvm_accel(void)
{
	return G.kvm ? "kvm" : "tcg";
}

const struct al_backend_ops al_backend_microvm = {
    .name = "microvm",
    .caps = AL_CAPS_MICROVM,
    .priv_size = sizeof(struct mvm_sb),
    .init = mvm_init,
    .sweep = mvm_sweep,
    .prepare = mvm_prepare,
    .start = mvm_start,
    .kill = mvm_kill,
    .reap = mvm_reap,
    .output = mvm_output,
    .destroy = mvm_destroy,
    .refill = mvm_refill,
    .pool = mvm_pool,
    .tick = mvm_tick,
    .fini = mvm_fini,
    .accel = mvm_accel,
};
