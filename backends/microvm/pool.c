/* pool.c - one microVM (launched by the driver in its cgroup and uid, its
 * ready and warm words read, stopped) and the warm pools of them, per
 * tier, that jobs take from. Called by microvm.c.
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
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
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
#include "mvm.h"

struct mvm_host mvm_host;

/* ---- one VM ---- */

bool mvm_vm_exited(struct vm *vm)
{
	struct pollfd p = {.fd = vm->v.pidfd, .events = POLLIN};

	return vm->exited || poll(&p, 1, 0) > 0;
}

/* Stop the VMM (politely first when graceful: the driver's shutdown), reap
 * it, remove its cgroup: nothing of the VM is left. */
void mvm_vm_free(struct vm *vm, bool graceful)
{
	if (!vm)
		return;
	if (vm->v.pidfd >= 0) {
		al_pidfd_kill_wait(vm->v.pidfd,
				   !mvm_vm_exited(vm) &&
				       !(graceful && mvm_host.drv->shutdown(&vm->v, 200) == 0));
		close(vm->v.pidfd);
	}
	al_closep(&vm->v.chan_fd);
	al_closep(&vm->v.ctl_fd);
	al_closep(&vm->v.sess_fd);
	al_closep(&vm->egress_fd);
	al_closep(&vm->ram_fd);
	if (vm->cg_made)
		al_cg_destroy(&vm->cg, NULL);
	if (vm->uid_idx >= 0)
		mvm_host.uid_used[vm->uid_idx] = false;
	al_chan_rd_free(&vm->rd);
	free(vm);
}

/* The guest directory: vmlinux, initramfs.lz4, .airlock-image. */
int mvm_guest_check(const char *dir, struct al_err *err)
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

/* The content hash of guest and image as a VM of them reports it. */
static void hash_of(const char *guest, const char *image, char *out, size_t cap)
{
	char p[PATH_MAX + 32];

	if (image) {
		al_image_hash(mvm_host.conf, image, out, cap);
		return;
	}
	snprintf(p, sizeof(p), "%s/.airlock-image", guest);
	if (!al_read_text(p, out, cap))
		snprintf(out, cap, "unhashed");
	out[strcspn(out, "\n")] = '\0';
}

/* Boot a VM of guest with catalogue image (NULL: none) as its disk; a
 * pool's (warm) may start its job's interpreter ahead. */
struct vm *mvm_vm_launch(const char *guest, const char *image, const char *inputs, bool egress,
			 bool warm, uint64_t memory_mib, unsigned vcpus, int incoming_fd,
			 const struct mvm_ram *ram, struct al_err *err)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	struct al_vmm_cfg cfg = {0};
	char kernel[PATH_MAX + 16], initrd[PATH_MAX + 16], name[32];
	struct al_cg_limits lim;
	int rc;

	if (!vm) {
		if (ram && !ram->private && ram->fd >= 0)
			close(ram->fd);
		al_err_set(err, AL_ESANDBOX, "microvm: out of memory");
		return NULL;
	}
	vm->v.pid = -1;
	vm->v.pidfd = vm->v.chan_fd = vm->v.ctl_fd = vm->v.sess_fd = vm->egress_fd = -1;
	vm->ram_named = ram && ram->named;
	vm->ram_fd = ram && !ram->private ? ram->fd : -1;
	vm->uid_idx = -1;
	vm->memory_mib = memory_mib;
	vm->vcpus = vcpus;
	vm->egress = egress;
	vm->inputs = inputs != NULL;
	snprintf(vm->guest, sizeof(vm->guest), "%s", guest);
	if (mvm_guest_check(guest, err))
		goto fail_vm;
	if (image) {
		if (al_image_path(mvm_host.conf, image, true, vm->disk, sizeof(vm->disk), err)) {
			al_err_wrap(err, "microvm");
			goto fail_vm;
		}
	}
	hash_of(guest, image, vm->hash, sizeof(vm->hash));
	for (int i = 0; i < VM_UIDS; i++)
		if (!mvm_host.uid_used[i]) {
			vm->uid_idx = i;
			mvm_host.uid_used[i] = true;
			break;
		}
	if (vm->uid_idx < 0) {
		al_err_set(err, AL_ESANDBOX, "microvm: more than %d VMs at once", VM_UIDS);
		goto fail_vm;
	}
	snprintf(name, sizeof(name), "vm-%u", mvm_host.seq++);
	lim = (struct al_cg_limits){
	    .memory_bytes =
		(memory_mib + (mvm_host.kvm ? VMM_OVERHEAD_KVM_MIB : VMM_OVERHEAD_TCG_MIB)) * MIB,
	    .pids = VMM_PIDS,
	    .cpu_millis = (uint64_t)vcpus * 1000,
	};
	if ((rc = al_cg_create(&vm->cg, &mvm_host.cg, name, &lim, err)))
		goto fail_vm;
	vm->cg_made = true;
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", guest);
	snprintf(initrd, sizeof(initrd), "%s/initramfs.lz4", guest);
	cfg = (struct al_vmm_cfg){
	    .binary = mvm_host.binary,
	    .kernel = kernel,
	    .initrd = initrd,
	    .disk = vm->disk[0] ? vm->disk : NULL,
	    .inputs = inputs,
	    .memory_mib = memory_mib,
	    .vcpus = vcpus,
	    .kvm = mvm_host.kvm,
	    .tsc_khz = mvm_host.tsc_khz,
	    .console = mvm_host.conf->vm_console,
	    .cg = &vm->cg,
	    .uid = mvm_host.conf->uid_base + VM_UID_OFFSET + (uid_t)vm->uid_idx,
	    .gid = mvm_host.conf->uid_base + VM_UID_OFFSET + (gid_t)vm->uid_idx,
	    .kvm_gid = mvm_host.kvm_gid,
	    .egress_netns_fd = -1,
	    .warm = warm,
	    .incoming_fd = incoming_fd,
	    .mem_merge = mvm_host.conf->vm_ksm,
	    .tcg_cache_mib = mvm_host.conf->vm_tcg_cache_mib,
	    .ram_named = vm->ram_named,
	    .ram_fd = ram ? ram->fd : -1,
	    .ram_private = ram && ram->private,
	};
	/* Network egress: the jail's network namespace is made here, with the
	 * proxy's socket in it before the VMM can start a forwarder. */
	if (egress) {
		if ((vm->egress_fd =
			 al_netns_new(0, AL_EGRESS_FWD_NAME, &cfg.egress_netns_fd, err)) < 0) {
			al_err_wrap(err, "microvm");
			goto fail_vm;
		}
		cfg.egress_fwd = mvm_host.fwd;
	}
	vm->born_ms = al_mono_ms();
	rc = mvm_host.drv->launch(&cfg, &vm->v, err);
	al_closep(&cfg.egress_netns_fd); /* the VMM's jail holds it now */
	if (rc)
		goto fail_vm;
	fcntl(vm->v.chan_fd, F_SETFL, fcntl(vm->v.chan_fd, F_GETFL) | O_NONBLOCK);
	return vm;
fail_vm:
	mvm_vm_free(vm, false);
	return NULL;
}

/* The guest said its interpreter is warm (AL_CHAN_WARM, once). */
void mvm_vm_took_warm(struct vm *vm)
{
	al_chan_rd_reset(&vm->rd);
	vm->warm = true;
	al_log("info", "vm_warm", "vmm_pid=%d ms_since_launch=%llu", (int)vm->v.pid,
	       (unsigned long long)(al_mono_ms() - vm->born_ms));
}

/* 'E' to the guest agent: the host's time (ms since the epoch, 8 bytes big
 * endian), 32 bytes of its entropy, and 1 if the VM waits in its pool. */
int mvm_tell_restored(struct vm *vm, bool waits, struct al_err *err)
{
	uint8_t p[8 + 32 + 1];
	struct timespec ts;
	uint64_t ms;

	clock_gettime(CLOCK_REALTIME, &ts);
	ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(ms >> (56 - 8 * i));
	if (getrandom(p + 8, 32, 0) != 32)
		return al_err_sys(err, "microvm: getrandom");
	p[40] = waits;
	return al_chan_write(vm->v.chan_fd, AL_CHAN_RESTORED, p, sizeof(p), NULL, 0,
			     JOB_SEND_TIMEOUT_MS, err);
}

/* A pool VM restored from its template is running: ready, its interpreter
 * warm (it was when the template was made), told it was restored and
 * whether it waits in the pool (else its job comes now). */
static int restore_done(struct vm *vm, bool waits, struct al_err *err)
{
	vm->restoring = false;
	vm->ready = vm->restored = true;
	vm->warm = vm->tmpl_warm; /* else its agent says so when it is */
	vm->ready_ms = al_mono_ms();
	if (vm->warm) /* as a booted pool VM says it */
		al_log("info", "vm_warm", "vmm_pid=%d ms_since_launch=%llu restored=1",
		       (int)vm->v.pid, (unsigned long long)(vm->ready_ms - vm->born_ms));
	return mvm_tell_restored(vm, waits, err);
}

/* Read what the channel holds before the job: the ready frame, then a
 * warm pool VM's word that its interpreter is warm. 1 when the agent is
 * ready, 0 not yet, negative when the VM is of no use. A VM restoring
 * from its pool's template is ready once QEMU has read it. */
int mvm_vm_poll_ready(struct vm *vm, struct al_err *err)
{
	int rc;

	if (vm->restoring) {
		rc = mvm_host.drv->resume(&vm->v, 0, err);
		return rc == 1 ? 0 : rc ? rc : restore_done(vm, true, err) ? AL_ESANDBOX : 1;
	}

	if (vm->ready && !vm->warm) {
		struct al_err e = {0};

		/* an error (the VM ended) is for whoever reads next to report */
		if (al_chan_read(&vm->rd, vm->v.chan_fd, AL_CHAN_READY_MAX, &e) <= 0)
			return 1;
		if (vm->rd.body.len != 1 || vm->rd.body.data[0] != AL_CHAN_WARM)
			return al_err_set(err, AL_ESANDBOX,
					  "microvm: the guest spoke out of turn before its job");
		mvm_vm_took_warm(vm);
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

unsigned mvm_vcpus_for(uint64_t cpu_millis)
{
	unsigned v = (unsigned)((cpu_millis + 999) / 1000);

	return v < 1 ? 1 : v > 16 ? 16 : v;
}

/* The VM's RAM: the job's limit (enforced inside by its cgroup), the
 * guest's own (kernel, initramfs, agent) and an eighth more (at most
 * 512 MiB), so that the cgroup's limit is reached before the VM runs out:
 * a job past its limit is memory_limit here too. */
uint64_t mvm_memory_mib_for(uint64_t memory_bytes)
{
	uint64_t mib = (memory_bytes + MIB - 1) / MIB, extra = mib / 8 > 512 ? 512 : mib / 8;

	return mib + GUEST_OVERHEAD_MIB + extra;
}

/* ---- the pool's template ---- */

/* A pool VM ready this long without saying its interpreter is warm (an
 * image with no warm list, or one whose imports failed) makes the template
 * as it is: its copies say warm when they are, if ever. */
#define TMPL_COLD_WAIT_MS 20000

/* A VM of p started from its template (its state still being read: it
 * is restoring), or NULL: no template, or one of an image since rebuilt
 * (then dropped: the next warm VM makes another). */
static struct vm *tmpl_launch(struct pool *p, struct al_err *err)
{
	char now[80];
	struct vm *vm;
	int fd;

	if (!p->tmpl_ok)
		return NULL;
	hash_of(p->guest, p->image[0] ? p->image : NULL, now, sizeof(now));
	if (strcmp(now, p->tmpl_hash)) {
		al_log("info", "microvm_template", "tier=%s note=\"its image changed: made again\"",
		       p->tier);
		unlink(p->tmpl);
		al_closep(&p->tmpl_ram);
		p->tmpl_ok = false;
		return NULL;
	}
	if ((fd = open(p->tmpl, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		al_err_sys(err, "microvm: template %s", p->tmpl);
		p->tmpl_ok = false;
		return NULL;
	}
	{
		struct mvm_ram copy = {.named = true, .fd = p->tmpl_ram, .private = true};

		vm = mvm_vm_launch(p->guest, p->image[0] ? p->image : NULL, NULL, false, true,
				   p->memory_mib, p->vcpus, fd, p->tmpl_ram >= 0 ? &copy : NULL,
				   err);
	}
	close(fd);
	if (vm) {
		vm->restoring = true;
		vm->tmpl_warm = p->tmpl_warm;
	}
	return vm;
}

/* A shared template's RAM, once no VMM maps it writable (its VM is gone):
 * sealed, so that no copy's VMM can ever write it (a write or a shared
 * writable mapping through any descriptor fails; its copies map it
 * private, copy-on-write). */
static int tmpl_seal(int ram, struct al_err *err)
{
	return fcntl(ram, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
		   ? al_err_sys(err, "microvm: seal the template's memory")
		   : AL_OK;
}

/* p's template from vm, one of its VMs booted and warm (or ready a while
 * without a warm interpreter), which this stops and frees: its whole state
 * written to a private file, whole or not at all (with a memfd of its own
 * as its RAM, --vm-template-share: its devices' state, the RAM kept in
 * that memfd, sealed). */
static void tmpl_make(struct pool *p, struct vm *vm)
{
	char part[PATH_MAX + 8], hash[sizeof(vm->hash)];
	struct al_err err = {0};
	uint64_t t0 = al_mono_ms();
	struct stat st;
	bool warm = vm->warm, saved;
	int fd, ram = vm->ram_fd;

	snprintf(hash, sizeof(hash), "%s", vm->hash);
	snprintf(part, sizeof(part), "%s.part", p->tmpl);
	unlink(part);
	fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	vm->ram_fd = -1;
	saved = fd >= 0 && !mvm_host.drv->save(&vm->v, fd, ram >= 0, 120000, &err) && !fsync(fd) &&
		!fstat(fd, &st);
	mvm_vm_free(vm, false); /* its VMM gone, nothing maps its RAM writable */
	if (!saved || (ram >= 0 && tmpl_seal(ram, &err)) || rename(part, p->tmpl)) {
		if (!err.msg[0])
			al_err_sys(&err, "microvm: template %s", part);
		al_log("warn", "microvm_template", "tier=%s error=\"%s\" note=\"its VMs boot\"",
		       p->tier, err.msg);
		p->tmpl_off = true;
		if (fd >= 0)
			close(fd);
		if (ram >= 0)
			close(ram);
		unlink(part);
		return;
	}
	close(fd);
	p->tmpl_ram = ram;
	snprintf(p->tmpl_hash, sizeof(p->tmpl_hash), "%s", hash);
	p->tmpl_warm = warm;
	p->tmpl_bytes = (uint64_t)st.st_size;
	p->tmpl_ok = true;
	al_log("info", "microvm_template", "tier=%s bytes=%llu ms=%llu shared=%d", p->tier,
	       (unsigned long long)p->tmpl_bytes, (unsigned long long)(al_mono_ms() - t0),
	       ram >= 0);
}

static void pool_fill(struct pool *p)
{
	while (p->n < p->size) {
		struct al_err err = {0};
		struct vm *vm = tmpl_launch(p, &err);

		if (!vm) { /* a boot; one that may become a shared template has its own memfd */
			struct mvm_ram own = {.named = true, .fd = -1};

			if (mvm_host.conf->vm_template_share && !p->tmpl_ok && !p->tmpl_off &&
			    ((own.fd = memfd_create("airlock-template",
						    MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0 ||
			     ftruncate(own.fd, (off_t)(p->memory_mib * MIB)))) {
				al_log("warn", "microvm_template",
				       "tier=%s error=\"memfd: %s\" note=\"not shared\"", p->tier,
				       strerror(errno));
				al_closep(&own.fd);
			}
			vm = mvm_vm_launch(p->guest, p->image[0] ? p->image : NULL, NULL, false,
					   true, p->memory_mib, p->vcpus, -1,
					   own.fd >= 0 ? &own : NULL, &err);
		}

		if (!vm) {
			fprintf(stderr, "airlock-worker: microvm: pool %s: %s\n", p->tier, err.msg);
			return;
		}
		p->vms[p->n++] = vm;
	}
}

/* Whether pool p's VMs fit a job of tier, guest, image, memory and vCPUs. */
static bool fits(const struct pool *p, const char *tier, const char *guest, const char *image,
		 uint64_t memory_mib, unsigned vcpus)
{
	return !strcmp(p->tier, tier) && !strcmp(p->guest, guest) &&
	       !strcmp(p->image, image ? image : "") && p->vcpus == vcpus &&
	       p->memory_mib >= memory_mib;
}

/* Take the pool VM that fits the job best (one whose interpreter is warm,
 * then a copy of a warm template still being restored: warm in a moment,
 * where a ready VM's interpreter may import for seconds more; then a
 * ready one, then one still booting); NULL if none does. */
struct vm *mvm_pool_take(const char *tier, const char *guest, const char *image,
			 uint64_t memory_mib, unsigned vcpus)
{
	for (int i = 0; i < mvm_host.npools; i++) {
		struct pool *p = &mvm_host.pools[i];
		int best = -1;

		if (!fits(p, tier, guest, image, memory_mib, vcpus))
			continue;
		for (unsigned k = 0, score = 0; k < p->n && score < 4; k++) {
			struct al_err err = {0};
			int rc = mvm_vm_poll_ready(p->vms[k], &err);
			bool live = rc == 0 && !mvm_vm_exited(p->vms[k]);
			/* still booting is better than a cold boot */
			unsigned s = rc > 0 ? (p->vms[k]->warm ? 4 : 2)
				     : live ? (p->vms[k]->restoring && p->vms[k]->tmpl_warm ? 3 : 1)
					    : 0;

			if (s > score) {
				best = (int)k;
				score = s;
			}
		}
		if (best >= 0) {
			struct vm *vm = p->vms[best];
			struct al_err err = {0};

			p->vms[best] = p->vms[--p->n];
			/* still reading its template: a moment more, not a boot */
			if (vm->restoring && (mvm_host.drv->resume(&vm->v, 30000, &err) ||
					      restore_done(vm, false, &err))) {
				mvm_vm_free(vm, false);
				return NULL;
			}
			return vm;
		}
	}
	return NULL;
}

struct vm *mvm_pool_restore(const char *tier, const char *guest, const char *image,
			    uint64_t memory_mib, unsigned vcpus)
{
	for (int i = 0; i < mvm_host.npools; i++) {
		struct pool *p = &mvm_host.pools[i];
		struct al_err err = {0};
		struct vm *vm;

		if (!fits(p, tier, guest, image, memory_mib, vcpus) || !(vm = tmpl_launch(p, &err)))
			continue;
		if (mvm_host.drv->resume(&vm->v, 30000, &err) || restore_done(vm, false, &err)) {
			al_log("warn", "microvm_template", "tier=%s error=\"%s\"", p->tier,
			       err.msg);
			mvm_vm_free(vm, false);
			return NULL;
		}
		return vm;
	}
	return NULL;
}

void mvm_pool_tick(const struct al_backend_conf *conf)
{
	uint64_t now = al_mono_ms();

	(void)conf;
	for (int i = 0; i < mvm_host.npools; i++) {
		struct pool *p = &mvm_host.pools[i];

		for (unsigned k = 0; k < p->n;) {
			struct vm *vm = p->vms[k];
			struct al_err err = {0};
			bool stale = now - vm->born_ms > p->max_idle_ms;

			if (mvm_vm_poll_ready(vm, &err) < 0 || mvm_vm_exited(vm) || stale) {
				p->vms[k] = p->vms[--p->n];
				mvm_vm_free(vm, stale);
				continue;
			}
			/* the first VM booted and warm (or ready a while: an image
			 * without a warm interpreter) makes the pool's template */
			if (!p->tmpl_ok && !p->tmpl_off && !vm->restored && vm->ready &&
			    (vm->warm || now - vm->ready_ms > TMPL_COLD_WAIT_MS)) {
				p->vms[k] = p->vms[--p->n];
				tmpl_make(p, vm);
				continue;
			}
			k++;
		}
		pool_fill(p);
	}
}

int mvm_pool_add(const struct al_backend_conf *conf, const struct al_pool_spec *ps,
		 struct al_err *err)
{
	struct pool *p;

	if (ps->size == 0)
		return AL_OK;
	if (mvm_host.npools == (int)(sizeof(mvm_host.pools) / sizeof(mvm_host.pools[0])))
		return al_err_set(err, AL_ESANDBOX, "microvm: at most %zu pooled tiers",
				  sizeof(mvm_host.pools) / sizeof(mvm_host.pools[0]));
	if (ps->size > sizeof(p->vms) / sizeof(p->vms[0]))
		return al_err_set(err, AL_EINVAL, "microvm: pool of %u is over %zu", ps->size,
				  sizeof(p->vms) / sizeof(p->vms[0]));
	p = &mvm_host.pools[mvm_host.npools];
	memset(p, 0, sizeof(*p));
	p->tmpl_ram = -1;
	snprintf(p->tier, sizeof(p->tier), "%s", ps->tier);
	snprintf(p->guest, sizeof(p->guest), "%s", ps->guest ? ps->guest : DEFAULT_GUEST);
	snprintf(p->image, sizeof(p->image), "%s", ps->image ? ps->image : "");
	if (mvm_guest_check(p->guest, err))
		return AL_ESANDBOX;
	if (ps->image) {
		char disk[PATH_MAX];

		if (al_image_path(conf, ps->image, true, disk, sizeof(disk), err))
			return al_err_wrap(err, "microvm: pool %s", ps->tier);
	}
	p->size = ps->size;
	p->vcpus = mvm_vcpus_for(ps->cpu_millis);
	p->memory_mib = mvm_memory_mib_for(ps->memory_bytes);
	p->max_idle_ms = ps->max_idle_ms ? ps->max_idle_ms : 600000;
	{
		char dir[PATH_MAX];
		struct al_err derr = {0};

		/* STATE/microvm-templates/<worker>/<tier>.snap, root's only */
		mkdir(conf->state_dir, 0755); /* made at the worker's start, after its backends */
		snprintf(dir, sizeof(dir), "%s/microvm-templates", conf->state_dir);
		mkdir(dir, 0700);
		snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "/%s", conf->worker_id);
		if ((mkdir(dir, 0700) && errno != EEXIST) || chmod(dir, 0700)) {
			al_err_sys(&derr, "microvm: %s", dir);
			al_log("warn", "microvm_template", "tier=%s error=\"%s\"", p->tier,
			       derr.msg);
			p->tmpl_off = true;
		}
		snprintf(p->tmpl, sizeof(p->tmpl), "%s/%s.snap", dir, ps->tier);
		unlink(p->tmpl); /* an earlier run's: its guest may not be this one */
	}
	mvm_host.npools++;
	pool_fill(p);
	return AL_OK;
}

void mvm_pool_refill(const struct al_backend_conf *conf, unsigned slot)
{
	(void)conf;
	(void)slot;
	for (int i = 0; i < mvm_host.npools; i++)
		pool_fill(&mvm_host.pools[i]);
}
