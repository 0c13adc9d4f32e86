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
 * the tier's pool_max_idle_ms. The first pool VM that booted and warmed up
 * is saved as the pool's template (pool.c): the pool refills from it and
 * a job of its shape that finds the pool empty starts from it, a restore
 * instead of a boot, each VM still a fresh copy no job used, made unique
 * as it starts (its clock, its entropy: snapshot.c).
 *
 * This file is the backend's ops; one VM and the pools are pool.c's, the
 * guest's frames frames.c's, the VMM's jail jail.c's (mvm.h).
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
#include "mvm.h"

static int mvm_init(const struct al_backend_conf *conf, struct al_err *err)
{
	const char *accel = conf->vm_accel;
	const char *vmm = conf->vmm ? conf->vmm : "qemu";
	struct al_err why = {0};
	int rc;

	memset(&mvm_host, 0, sizeof(mvm_host));
	mvm_host.conf = conf;
	if (geteuid() != 0)
		return al_err_set(err, AL_ESANDBOX, "microvm: needs root (cgroups, VMM users)");
	if (strcmp(vmm, al_vmm_qemu.name))
		return al_err_set(err, AL_ESANDBOX,
				  "microvm: unknown VMM \"%s\" (this build has qemu)", vmm);
	mvm_host.drv = &al_vmm_qemu;
	if (!al_find_exec(conf->vmm_binary ? conf->vmm_binary : mvm_host.drv->binary,
			  mvm_host.binary, sizeof(mvm_host.binary)))
		return al_err_set(err, AL_ESANDBOX,
				  "microvm: %s not found (install qemu-system-x86)",
				  conf->vmm_binary ? conf->vmm_binary : mvm_host.drv->binary);
	if ((rc = al_cg_detect(&mvm_host.cg, conf->worker_id, "microvm", err)))
		return al_err_wrap(err, "microvm");
	/* KVM when /dev/kvm opens, unless told otherwise; TCG is slow but the
	 * same boundary. */
	if (!accel || !strcmp(accel, "kvm")) {
		mvm_host.kvm = al_kvm_usable(&mvm_host.kvm_gid, &why);
		if (accel && !mvm_host.kvm)
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
	al_log("info", "microvm_accel", "accel=%s%s%s", mvm_host.kvm ? "kvm" : "tcg",
	       mvm_host.kvm ? "" : " why=", mvm_host.kvm ? "" : why.msg);
	mvm_host.tsc_khz = mvm_host.kvm ? 0 : al_host_tsc_khz();
	if ((rc = al_find_helper(conf->helper_dir, "airlock-egress-fwd", mvm_host.fwd,
				 sizeof(mvm_host.fwd), err)))
		return al_err_wrap(err, "microvm");
	mvm_host.ready = true;
	return AL_OK;
}

static int mvm_sweep(const struct al_backend_conf *conf, struct al_err *err)
{
	(void)conf;
	/* A crashed run's VMMs died with it (parent-death signal); their
	 * cgroups are the only trace, swept with every other cgroup of this
	 * worker id. Nothing of a VM is ever on disk. */
	return al_cg_sweep(&mvm_host.cg, err);
}

static int mvm_prepare(struct al_sandbox *sb, struct al_err *err)
{
	struct mvm_sb *m = sb->priv;
	const struct al_run_spec *s = &sb->spec;
	const char *guest = s->guest ? s->guest : DEFAULT_GUEST;
	uint64_t mib;
	unsigned vcpus = mvm_vcpus_for(s->cpu_millis);
	bool egress = s->network == AL_NET_EGRESS;

	al_grade_envelope(s->job, &s->limits, &m->env);
	mib = mvm_memory_mib_for(m->env.memory_bytes);
	m->timer_fd = -1;
	if (!mvm_host.ready)
		return al_err_set(err, AL_ESANDBOX, "microvm: backend not initialised");
	if (egress)
		sb->spec.proxy_url = AL_VMM_PROXY_URL; /* in the job's environment */
	if (s->restore)
		return mvm_restore(sb, guest, mib, vcpus, err);
	/* pool VMs have no network card nor inputs disk: a job with egress or
	 * inputs boots its own */
	m->vm = egress || s->inputs_pack
		    ? NULL
		    : mvm_pool_take(s->job->tier ? s->job->tier : "", guest, s->image, mib, vcpus);
	m->warm = m->vm != NULL;
	/* else one restored from the pool's template (a VM no job used) */
	if (!m->vm && !egress && !s->inputs_pack)
		m->vm =
		    mvm_pool_restore(s->job->tier ? s->job->tier : "", guest, s->image, mib, vcpus);
	if (!m->vm && !(m->vm = mvm_vm_launch(guest, s->image, s->inputs_pack, egress, false, mib,
					      vcpus, -1, NULL, err)))
		return AL_ESANDBOX;
	return AL_OK;
}

/* How long a guest may stay silent: not ready yet, or no heartbeat while
 * its job runs. */
static uint64_t hang_ms(void)
{
	return mvm_host.conf->vm_hang_ms ? mvm_host.conf->vm_hang_ms
	       : mvm_host.kvm		 ? HANG_KVM_MS
					 : HANG_TCG_MS;
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
	if (m->vm->job_inside) { /* a session's: its job runs since before the snapshot */
		if ((rc = mvm_tell_restored(m->vm, false, err)))
			return rc;
		m->sent = true;
		m->sent_ms = m->heard_ms = m->start_ms;
	} else if ((rc = mvm_vm_poll_ready(m->vm, err)) < 0) {
		return rc;
	} else if (rc > 0 && (rc = send_job(sb, err))) {
		return rc;
	}
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

static void add_info(struct al_sandbox *sb, struct al_result *res)
{
	struct mvm_sb *m = sb->priv;
	char v[32];

	al_result_add_info(res, "image", m->vm->hash);
	al_result_add_info(res, "vmm", mvm_host.drv->name);
	al_result_add_info(res, "accel", mvm_host.kvm ? "kvm" : "tcg");
	/* warm: a pool's VM (booted, or restored from the pool's template);
	 * restored: one from the template for this job, or a session's */
	al_result_add_info(res, "boot", m->warm ? "warm" : m->vm->restored ? "restored" : "cold");
	snprintf(v, sizeof(v), "%llu", (unsigned long long)(m->vm->ready_ms - m->vm->born_ms));
	al_result_add_info(res, "boot_ms", v);
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
			if ((rc = mvm_vm_poll_ready(vm, err)) > 0 && !(rc = send_job(sb, err)))
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
				mvm_vm_took_warm(vm); /* said as the job went in: once, no more */
				continue;
			}
			if (type == AL_CHAN_OUTPUT) {
				if ((rc = mvm_take_output(sb, vm->rd.body.data + 1,
							  vm->rd.body.len - 1, err)))
					break;
				al_chan_rd_reset(&vm->rd);
				continue;
			}
			if (type != AL_CHAN_RESULT)
				rc = al_err_set(err, AL_ESANDBOX,
						"microvm: unexpected frame from the guest");
			else
				rc = mvm_take_result(sb, vm->rd.body.data + 1, vm->rd.body.len - 1,
						     res, err);
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
	if (rc < 0 && !mvm_vm_exited(vm)) {
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
				    mvm_host.kvm
					? ""
					: " (accel tcg: no KVM on this worker, the code ran "
					  "emulated, several times slower)");
		add_info(sb, res);
		return 1;
	}
	if (!mvm_vm_exited(vm)) {
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

	mvm_vm_free(m->vm, false);
	m->vm = NULL;
	al_closep(&m->timer_fd);
	m->timer_fd = -1;
	al_buf_free(&m->live[1]);
	al_buf_free(&m->live[2]);
}

/* 'C' to the guest (vmchan.h): an idle session's VM gives its page cache
 * back. */
static void mvm_trim(struct al_sandbox *sb)
{
	struct mvm_sb *m = sb->priv;
	struct al_err err = {0};

	if (m->vm && m->sent && !mvm_vm_exited(m->vm))
		al_chan_write(m->vm->v.chan_fd, AL_CHAN_TRIM, NULL, 0, NULL, 0, 100, &err);
}

static void mvm_fini(void)
{
	for (int i = 0; i < mvm_host.npools; i++) {
		for (unsigned k = 0; k < mvm_host.pools[i].n; k++)
			mvm_vm_free(mvm_host.pools[i].vms[k], true);
		mvm_host.pools[i].n = 0;
		if (mvm_host.pools[i].tmpl[0])
			unlink(mvm_host.pools[i].tmpl);
		al_closep(&mvm_host.pools[i].tmpl_ram);
	}
	mvm_host.npools = 0;
	if (mvm_host.ready)
		al_cg_release(&mvm_host.cg);
	mvm_host.ready = false;
}

static const char *mvm_accel(void)
{
	return mvm_host.kvm ? "kvm" : "tcg";
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
    .refill = mvm_pool_refill,
    .pool = mvm_pool_add,
    .tick = mvm_pool_tick,
    .fini = mvm_fini,
    .accel = mvm_accel,
    .snapshot = mvm_snapshot,
    .trim = mvm_trim,
};
