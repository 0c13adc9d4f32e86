/* snapshot.c - a microVM session saved whole and started again from that
 * (AL_CAP_SNAPSHOT; docs/snapshots.md).
 *
 * A snapshot is one line naming its format, one JSON line saying what the
 * VM was (the VMM, the accelerator, the guest's or image's content hash,
 * memory, vCPUs, whether it had a network card and an inputs disk), then
 * the VMM's own saved state (the driver's save: QEMU's migration stream,
 * its memory and every device's state; the session's files are in that
 * memory, on the guest's tmpfs). A restore reads the two lines first and
 * refuses a snapshot of another shape, VMM, accelerator or image (its disk
 * would not be the one the guest's page cache remembers), then launches a
 * VMM of the same shape that reads the rest, runs it, and tells the guest
 * agent it was restored ('E': the host's time, and entropy that it mixes
 * in and reseeds its random generator with), so that copies restored from
 * one snapshot draw different random numbers and read the right time. The
 * worker keeps the file, its digest and where it is (worker/snapshot.c).
 * Called by microvm.c; calls pool.c.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../common/clock.h"
#include "../../common/log.h"
#include "../../proto/buf.h"
#include "../backend.h"
#include "../vmchan.h"
#include "mvm.h"

#define SNAP_MAGIC	   "airlock-microvm-snapshot 1\n"
#define SNAP_HEAD_MAX	   2048
#define SAVE_TIMEOUT_MS	   120000 /* writing a few GiB of guest memory */
#define RESTORE_TIMEOUT_MS 60000

/* What the snapshot says the VM was. */
static json_t *shape_of(const struct vm *vm)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:i, s:b, s:b}", "vmm", mvm_host.drv->name,
			      "accel", mvm_host.kvm ? "kvm" : "tcg", "image", vm->hash,
			      "memory_mib", (json_int_t)vm->memory_mib, "vcpus", (int)vm->vcpus,
			      "egress", vm->egress, "inputs", vm->inputs);

	/* its RAM a backend named "ram", no balloon (a shared template's VM,
	 * pool.c): a VM of that shape reads it */
	if (j && vm->ram_named)
		json_object_set_new(j, "ram_named", json_true());
	return j;
}

int mvm_snapshot(struct al_sandbox *sb, int fd, bool keep, struct al_err *err)
{
	struct mvm_sb *m = sb->priv;
	struct vm *vm = m->vm;
	json_t *shape;
	char *line;
	int rc;

	if (!vm || mvm_vm_exited(vm) || !m->sent)
		return al_err_set(err, AL_ESANDBOX, "microvm: snapshot: the VM is not running");
	if (!mvm_host.drv->save)
		return al_err_set(err, AL_EINVAL, "microvm: the %s driver cannot save a VM",
				  mvm_host.drv->name);
	shape = shape_of(vm);
	line = shape ? json_dumps(shape, JSON_COMPACT) : NULL;
	json_decref(shape);
	if (!line)
		return al_err_set(err, AL_ESANDBOX, "microvm: snapshot: out of memory");
	rc = al_write_all(fd, SNAP_MAGIC, strlen(SNAP_MAGIC)) ||
		     al_write_all(fd, line, strlen(line)) || al_write_all(fd, "\n", 1)
		 ? al_err_sys(err, "microvm: snapshot: write")
		 : mvm_host.drv->save(&vm->v, fd, false, SAVE_TIMEOUT_MS, err);
	free(line);
	if (rc && keep && !mvm_vm_exited(vm)) {
		/* a save that failed (its file's disk full, say) leaves the VM
		 * stopped but whole: it goes on, the failure said */
		struct al_err again = {0};

		if (!mvm_host.drv->resume(&vm->v, RESTORE_TIMEOUT_MS, &again)) {
			al_err_wrap(err, "microvm: snapshot (the VM goes on)");
			return rc;
		}
	} else if (rc == AL_OK && keep &&
		   (rc = mvm_host.drv->resume(&vm->v, RESTORE_TIMEOUT_MS, err))) {
		al_err_wrap(err, "microvm: running again after the snapshot");
	}
	if (rc)
		syscall(SYS_pidfd_send_signal, vm->v.pidfd, SIGKILL, NULL, 0);
	return rc;
}

/* The snapshot's shape line, checked against what this restore launches;
 * fd left at the VMM's state. */
static int read_head(int fd, const struct al_run_spec *s, uint64_t mib, unsigned vcpus,
		     json_t **shape, struct al_err *err)
{
	char buf[SNAP_HEAD_MAX + 1];
	ssize_t n = pread(fd, buf, SNAP_HEAD_MAX, 0);
	char *l1, *l2;
	json_int_t smib = 0;
	int svcpus = 0, segress = 0, sinputs = 0;
	const char *vmm = "", *accel = "";

	buf[n > 0 ? n : 0] = '\0';
	if (n < (ssize_t)strlen(SNAP_MAGIC) || memcmp(buf, SNAP_MAGIC, strlen(SNAP_MAGIC)))
		return al_err_set(err, AL_ESANDBOX, "microvm: not a microVM snapshot");
	l1 = buf + strlen(SNAP_MAGIC);
	if (!(l2 = strchr(l1, '\n')) || !(*shape = json_loadb(l1, (size_t)(l2 - l1), 0, NULL)) ||
	    json_unpack(*shape, "{s:s, s:s, s:I, s:i, s:b, s:b}", "vmm", &vmm, "accel", &accel,
			"memory_mib", &smib, "vcpus", &svcpus, "egress", &segress, "inputs",
			&sinputs))
		return al_err_set(err, AL_ESANDBOX, "microvm: the snapshot's header is malformed");
	if (strcmp(vmm, mvm_host.drv->name) || strcmp(accel, mvm_host.kvm ? "kvm" : "tcg"))
		return al_err_set(err, AL_ESANDBOX,
				  "microvm: the snapshot was made by %s with %s, this worker "
				  "runs %s with %s",
				  vmm, accel, mvm_host.drv->name, mvm_host.kvm ? "kvm" : "tcg");
	if ((uint64_t)smib != mib || (unsigned)svcpus != vcpus ||
	    !segress != (s->network != AL_NET_EGRESS) || !sinputs != !s->inputs_pack)
		return al_err_set(err, AL_ESANDBOX,
				  "microvm: the snapshot's VM (%lld MiB, %d vCPUs%s%s) is not the "
				  "session's (%llu MiB, %u vCPUs): its tier's policy changed",
				  (long long)smib, svcpus, segress ? ", egress" : "",
				  sinputs ? ", inputs" : "", (unsigned long long)mib, vcpus);
	if (lseek(fd, (off_t)(l2 + 1 - buf), SEEK_SET) < 0)
		return al_err_sys(err, "microvm: the snapshot: lseek");
	return AL_OK;
}

int mvm_restore(struct al_sandbox *sb, const char *guest, uint64_t mib, unsigned vcpus,
		struct al_err *err)
{
	struct mvm_sb *m = sb->priv;
	const struct al_run_spec *s = &sb->spec;
	json_t *shape = NULL;
	const char *hash;
	struct mvm_ram ram = {.fd = -1};
	uint64_t t0 = al_mono_ms();
	int rc;

	if ((rc = read_head(s->restore_fd, s, mib, vcpus, &shape, err)))
		goto out;
	ram.named = json_is_true(json_object_get(shape, "ram_named"));
	if (!(m->vm =
		  mvm_vm_launch(guest, s->image, s->inputs_pack, s->network == AL_NET_EGRESS, false,
				mib, vcpus, s->restore_fd, ram.named ? &ram : NULL, err))) {
		rc = AL_ESANDBOX;
		goto out;
	}
	hash = json_string_value(json_object_get(shape, "image"));
	if (!hash || strcmp(hash, m->vm->hash)) {
		rc = al_err_set(err, AL_ESANDBOX,
				"microvm: the snapshot's image (%.24s) is not the one this worker "
				"has (%.24s): rebuilt since the pause",
				hash ? hash : "?", m->vm->hash);
		goto out;
	}
	if ((rc = mvm_host.drv->resume(&m->vm->v, RESTORE_TIMEOUT_MS, err))) {
		al_err_wrap(err, "microvm: the restore");
		goto out;
	}
	m->vm->ready = m->vm->restored = m->vm->job_inside = true;
	m->vm->ready_ms = al_mono_ms();
	al_log("info", "vm_restored", "vmm_pid=%d ms=%llu", (int)m->vm->v.pid,
	       (unsigned long long)(m->vm->ready_ms - t0));
out:
	json_decref(shape);
	return rc;
}
