/* vmm_qemu.c - the QEMU driver of the microVM backend (see vmm.h):
 * `qemu-system-x86_64 -M microvm` with no default devices, the kernel and
 * initramfs given on the command line, the catalogue image as a read-only
 * virtio block device, virtio-serial ports for the job channel and for a
 * session's server, and QMP for control, all on socketpairs (no socket
 * files), and
 * QEMU's own seccomp sandbox on. KVM when asked, TCG otherwise. A snapshot
 * is QEMU's migration stream, written to a descriptor the worker passes
 * over QMP, and read back with -incoming fd: (MACHINE-FACTS.md). */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../common/clock.h"
#include "../fdpass.h"
#include "../vmchan.h"
#include "egress_fwd.h"
#include "vmm.h"

static int copy_incoming(struct al_vmm *vm, struct al_err *err);

static int qemu_launch(const struct al_vmm_cfg *cfg, struct al_vmm *vm, struct al_err *err)
{
	char mem[32], smp[32], cmdline[512], accel[64], ram[160], machine[96];
	int chan[2] = {-1, -1}, ctl[2] = {-1, -1}, sess[2] = {-1, -1}, rc;
	const char *argv[66];
	int n = 0;
	bool egress = cfg->egress_fwd != NULL;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sess)) {
		rc = al_err_sys(err, "qemu: socketpair");
		goto fail_fds;
	}
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)cfg->memory_mib);
	snprintf(smp, sizeof(smp), "%u", cfg->vcpus);
	if (cfg->kvm)
		snprintf(accel, sizeof(accel), "kvm");
	else
		snprintf(accel, sizeof(accel), "tcg,tb-size=%llu",
			 (unsigned long long)(cfg->tcg_cache_mib ? cfg->tcg_cache_mib : 64));
	/* panic=-1 and reboot=t with -no-reboot: a guest panic or the agent's
	 * power-off ends QEMU at once. Under TCG the TSC cannot be calibrated
	 * reliably without a PIT/HPET: give the kernel its rate. */
	snprintf(cmdline, sizeof(cmdline),
		 "console=ttyS0 %s panic=-1 reboot=t rdinit=/init cryptomgr.notests%s%s%s%s%s",
		 cfg->console ? "loglevel=4" : "quiet",
		 cfg->kvm ? "" : " tsc=reliable airlock.tcg=1", cfg->disk ? " airlock.image=1" : "",
		 egress ? " airlock.net=1" : "", cfg->warm ? " airlock.warm=1" : "",
		 cfg->inputs ? " airlock.inputs=1" : "");
	if (!cfg->kvm && cfg->tsc_khz) {
		size_t l = strlen(cmdline);

		snprintf(cmdline + l, sizeof(cmdline) - l, " tsc_early_khz=%llu",
			 (unsigned long long)cfg->tsc_khz);
	}
	argv[n++] = "qemu-system-x86_64";
	/* its firmware (qboot, pvh.bin): found relative to the executable
	 * otherwise, and in the jail that is /vm */
	argv[n++] = "-L";
	argv[n++] = "/usr/share/qemu";
	/* RAM in a backend of its own (the pool's shared template): its merge
	 * is the backend's; the memfd is fd 6, or 7 after a restore's state */
	snprintf(machine, sizeof(machine), "microvm,pit=off,pic=off,mem-merge=%s%s",
		 cfg->mem_merge ? "on" : "off", cfg->ram_named ? ",memory-backend=ram" : "");
	argv[n++] = "-M";
	argv[n++] = machine;
	if (cfg->ram_named) {
		if (cfg->ram_fd >= 0)
			snprintf(ram, sizeof(ram),
				 "memory-backend-file,id=ram,size=%lluM,mem-path=/proc/self/fd/%d,"
				 "share=%s,merge=%s",
				 (unsigned long long)cfg->memory_mib, cfg->incoming_fd >= 0 ? 7 : 6,
				 cfg->ram_private ? "off" : "on", cfg->mem_merge ? "on" : "off");
		else
			snprintf(ram, sizeof(ram), "memory-backend-ram,id=ram,size=%lluM,merge=%s",
				 (unsigned long long)cfg->memory_mib,
				 cfg->mem_merge ? "on" : "off");
		argv[n++] = "-object";
		argv[n++] = ram;
	}
	argv[n++] = "-accel";
	argv[n++] = accel;
	/* TCG: an AMD family-16 model with SSE4a. With qemu64 (family 15)
	 * Debian 12's matplotlib died of SIGILL drawing a chart (its stack
	 * picks code for that family that TCG does not run); max and the
	 * Intel models draw too, but make a session's call 1.5-2x slower
	 * under TCG (measured with tests/bench/session_latency.py). */
	argv[n++] = "-cpu";
	argv[n++] = cfg->kvm ? "host" : "Opteron_G3,+rdrand";
	argv[n++] = "-m";
	argv[n++] = mem;
	argv[n++] = "-smp";
	argv[n++] = smp;
	argv[n++] = "-nodefaults";
	argv[n++] = "-no-user-config";
	argv[n++] = "-display";
	argv[n++] = "none";
	argv[n++] = "-no-reboot";
	argv[n++] = "-serial";
	argv[n++] = cfg->console ? "stdio" : "null";
	argv[n++] = "-kernel";
	argv[n++] = AL_VMM_JAIL_KERNEL;
	argv[n++] = "-initrd";
	argv[n++] = AL_VMM_JAIL_INITRD;
	argv[n++] = "-append";
	argv[n++] = cmdline;
	/* The job channel: fd 3 in QEMU. */
	argv[n++] = "-chardev";
	argv[n++] = "socket,id=job,fd=3";
	argv[n++] = "-device";
	argv[n++] = "virtio-serial-device,max_ports=3";
	argv[n++] = "-device";
	argv[n++] = "virtserialport,chardev=job,name=airlock.0";
	/* The balloon, for its free page reporting only (it is never
	 * inflated): the guest hands back the pages it frees, and QEMU gives
	 * them to the host (what a session's call allocated and freed does
	 * not stay the VM's). */
	if (!cfg->ram_named) { /* a copy's discard would punch the template */
		argv[n++] = "-device";
		argv[n++] = "virtio-balloon-device,free-page-reporting=on";
	}
	/* A session's server speaks to the worker here (fd 5 in QEMU): every
	 * VM has it, so a pool VM can serve a session; only a session's job
	 * is given it inside the guest. */
	argv[n++] = "-chardev";
	argv[n++] = "socket,id=sess,fd=5";
	argv[n++] = "-device";
	argv[n++] = "virtserialport,chardev=sess,name=" AL_SESSION_PORT;
	/* The catalogue image: read-only, through the host's page cache (one
	 * copy for every VM that boots it). */
	if (cfg->disk) {
		argv[n++] = "-drive";
		argv[n++] = "file=" AL_VMM_JAIL_DISK ",if=none,id=image,format=raw,readonly=on";
		argv[n++] = "-device";
		argv[n++] = "virtio-blk-device,drive=image";
	}
	/* The job's inputs: their pack, read-only, found by its serial. */
	if (cfg->inputs) {
		argv[n++] = "-drive";
		argv[n++] = "file=" AL_VMM_JAIL_INPUTS ",if=none,id=inputs,format=raw,readonly=on";
		argv[n++] = "-device";
		argv[n++] = "virtio-blk-device,drive=inputs,serial=" AL_VMM_INPUTS_SERIAL;
	}
	/* Network egress: user-mode networking that lets the guest reach one
	 * address, the proxy's (restrict=on: nothing else, no DNS, and the
	 * jail's namespace has no way out anyway); each connection to it
	 * starts the forwarder, which hands it to the worker's proxy. */
	if (egress) {
		argv[n++] = "-netdev";
		argv[n++] = "user,id=net,restrict=on,ipv6=off,net=" AL_VMM_GUEST_NET
			    ",guestfwd=tcp:" AL_VMM_PROXY_ADDR ":" AL_VMM_PROXY_PORT
			    "-cmd:" AL_VMM_JAIL_FWD;
		argv[n++] = "-device";
		argv[n++] = "virtio-net-device,netdev=net";
	}
	/* QMP: fd 4. */
	argv[n++] = "-chardev";
	argv[n++] = "socket,id=qmp,fd=4";
	argv[n++] = "-mon";
	argv[n++] = "chardev=qmp,mode=control";
	/* QEMU's own system-call filter. With egress it must start the
	 * forwarder: fork and exec allowed, and the set*id calls, since its
	 * library's child calls setsid() (the filter is inherited). The VMM has
	 * no capability and no_new_privs, so a set*uid gains nothing, and the
	 * jail holds nothing to run but the host's /usr, read-only. */
	argv[n++] = "-sandbox";
	argv[n++] = egress
			? "on,obsolete=deny,resourcecontrol=deny"
			: "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny";
	/* A restore: the saved state on fd 6, read before the VM runs (it
	 * stays paused until qemu_resume: the state was saved stopped); a
	 * template's copy reads it once told that its RAM is not in it. */
	if (cfg->incoming_fd >= 0) {
		argv[n++] = "-incoming";
		argv[n++] = cfg->ram_private ? "defer" : "fd:6";
	}
	argv[n] = NULL;
	{
		int keep[5] = {chan[1], ctl[1], sess[1]}, nkeep = 3;

		if (cfg->incoming_fd >= 0)
			keep[nkeep++] = cfg->incoming_fd;
		if (cfg->ram_fd >= 0)
			keep[nkeep++] = cfg->ram_fd;
		if ((rc = al_vmm_spawn(cfg, (char *const *)argv, keep, nkeep, vm, err)))
			goto fail_fds;
	}
	close(chan[1]);
	close(ctl[1]);
	close(sess[1]);
	vm->chan_fd = chan[0];
	vm->ctl_fd = ctl[0];
	vm->sess_fd = sess[0];
	vm->ctl_ready = false;
	return cfg->ram_private && cfg->incoming_fd >= 0 ? copy_incoming(vm, err) : AL_OK;
fail_fds:
	for (int i = 0; i < 2; i++) {
		al_closep(&chan[i]);
		al_closep(&ctl[i]);
		al_closep(&sess[i]);
	}
	return rc;
}

/* ---- QMP, for save and resume ---- */

/* The next reply of QEMU's on its QMP socket within the time left until
 * deadline (monotonic ms): greetings and events are skipped. The reply's
 * "return" value (new reference) or NULL with err (its "error", the VMM
 * gone, silence). */
static json_t *qmp_reply(struct al_vmm *vm, uint64_t deadline, const char *what, struct al_err *err)
{
	char buf[8192];
	size_t have = 0;

	for (;;) {
		char *nl;
		struct pollfd p = {.fd = vm->ctl_fd, .events = POLLIN};
		uint64_t now = al_mono_ms();
		ssize_t r;

		while ((nl = memchr(buf, '\n', have))) {
			json_t *doc = json_loadb(buf, (size_t)(nl - buf), 0, NULL);
			json_t *ret = doc ? json_object_get(doc, "return") : NULL;
			json_t *e = doc ? json_object_get(doc, "error") : NULL;

			have -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, have);
			if (ret) {
				json_incref(ret);
				json_decref(doc);
				return ret;
			}
			if (e) {
				al_err_set(err, AL_ESANDBOX, "qemu: %s: %s", what,
					   json_string_value(json_object_get(e, "desc"))
					       ?: "an error");
				json_decref(doc);
				return NULL;
			}
			json_decref(doc); /* the greeting, an event */
		}
		if (have == sizeof(buf))
			have = 0; /* a line longer than any reply we want: dropped */
		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) == 0) {
			al_err_set(err, AL_ESANDBOX, "qemu: %s: no answer in time", what);
			return NULL;
		}
		r = read(vm->ctl_fd, buf + have, sizeof(buf) - have);
		if (r <= 0 && !(r < 0 && errno == EINTR)) {
			al_err_set(err, AL_ESANDBOX, "qemu: %s: the VMM went away", what);
			return NULL;
		}
		have += r > 0 ? (size_t)r : 0;
	}
}

/* One command (its JSON text, with fd passed alongside when >= 0) and its
 * reply's "return" value (new reference), or NULL with err. */
static json_t *qmp(struct al_vmm *vm, const char *cmd, int fd, uint64_t deadline, const char *what,
		   struct al_err *err)
{
	size_t len = strlen(cmd);

	if (!vm->ctl_ready) {
		static const char caps[] = "{\"execute\":\"qmp_capabilities\"}\n";
		json_t *r;

		if (write(vm->ctl_fd, caps, sizeof(caps) - 1) != (ssize_t)sizeof(caps) - 1) {
			al_err_sys(err, "qemu: QMP");
			return NULL;
		}
		if (!(r = qmp_reply(vm, deadline, "qmp_capabilities", err)))
			return NULL;
		json_decref(r);
		vm->ctl_ready = true;
	}
	/* the descriptor rides on the command's first byte */
	if ((fd >= 0 ? al_send_fds(vm->ctl_fd, cmd[0], &fd, 1, 0) != 1
		     : write(vm->ctl_fd, cmd, 1) != 1) ||
	    write(vm->ctl_fd, cmd + 1, len - 1) != (ssize_t)len - 1) {
		al_err_sys(err, "qemu: %s", what);
		return NULL;
	}
	return qmp_reply(vm, deadline, what, err);
}

/* One command whose return value is not needed: 0 or err. */
static int qmp_do(struct al_vmm *vm, const char *cmd, int fd, uint64_t deadline, const char *what,
		  struct al_err *err)
{
	json_t *r = qmp(vm, cmd, fd, deadline, what, err);

	json_decref(r);
	return r ? AL_OK : AL_ESANDBOX;
}

/* A query's string field (key of the "return" object) into out. */
static int qmp_query(struct al_vmm *vm, const char *cmd, const char *key, char *out, size_t cap,
		     uint64_t deadline, struct al_err *err)
{
	json_t *r = qmp(vm, cmd, -1, deadline, key, err);
	const char *v = r ? json_string_value(json_object_get(r, key)) : NULL;

	snprintf(out, cap, "%s", v ? v : "");
	json_decref(r);
	return r ? AL_OK : AL_ESANDBOX;
}

/* x-ignore-shared: a shared RAM backend's pages stay out of a saved state
 * (a template's), and a restore expects them where its RAM is mapped; off,
 * every block is in it (set either way before a save: a template's copy,
 * which had it on for its restore, saves its RAM whole). */
static int ignore_shared(struct al_vmm *vm, bool on, uint64_t deadline, struct al_err *err)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd),
		 "{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":"
		 "[{\"capability\":\"x-ignore-shared\",\"state\":%s}]}}\n",
		 on ? "true" : "false");
	return qmp_do(vm, cmd, -1, deadline, "migrate-set-capabilities", err);
}

/* A template's copy (-incoming defer): its state, saved without the RAM it
 * maps from the template, read from AL_VMM_INCOMING_FD. */
static int copy_incoming(struct al_vmm *vm, struct al_err *err)
{
	uint64_t deadline = al_mono_ms() + 10000;
	int rc = ignore_shared(vm, true, deadline, err);

	return rc ? rc
		  : qmp_do(vm,
			   "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":\"fd:6\"}}\n",
			   -1, deadline, "migrate-incoming", err);
}

/* Stop, then migrate to fd (QMP getfd: the jail opens nothing, the
 * sandbox spawns nothing): QEMU writes its stream there and says
 * "completed". Zero pages are a few bytes each in it. */
static int qemu_save(struct al_vmm *vm, int fd, bool without_ram, int timeout_ms,
		     struct al_err *err)
{
	uint64_t deadline = al_mono_ms() + (uint64_t)timeout_ms;
	char st[32] = "";
	int rc;

	if ((rc = qmp_do(vm, "{\"execute\":\"stop\"}\n", -1, deadline, "stop", err)) ||
	    (rc = ignore_shared(vm, without_ram, deadline, err)) ||
	    (rc = qmp_do(vm,
			 "{\"execute\":\"migrate-set-parameters\",\"arguments\":"
			 "{\"max-bandwidth\":1099511627776}}\n",
			 -1, deadline, "migrate-set-parameters", err)) ||
	    (rc = qmp_do(vm, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"snap\"}}\n", fd,
			 deadline, "getfd", err)) ||
	    (rc = qmp_do(vm, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:snap\"}}\n", -1,
			 deadline, "migrate", err)))
		return rc;
	for (;;) {
		if ((rc = qmp_query(vm, "{\"execute\":\"query-migrate\"}\n", "status", st,
				    sizeof(st), deadline, err)))
			return rc;
		if (!strcmp(st, "completed"))
			return AL_OK;
		if (!strcmp(st, "failed") || !strcmp(st, "cancelled")) {
			char why[AL_ERR_MSG_MAX / 2] = ""; /* e.g. no space left on the device */

			/* (best effort: without it the status says enough) */
			qmp_query(vm, "{\"execute\":\"query-migrate\"}\n", "error-desc", why,
				  sizeof(why), deadline, NULL);
			return al_err_set(err, AL_ESANDBOX, "qemu: migrate to the snapshot: %s%s%s",
					  st, why[0] ? ": " : "", why);
		}
		if (al_mono_ms() >= deadline)
			return al_err_set(err, AL_ESANDBOX,
					  "qemu: migrate to the snapshot: not done in %d ms (%s)",
					  timeout_ms, st);
		usleep(5000);
	}
}

/* Wait until an incoming state is loaded (the VM then paused), then run. */
static int qemu_resume(struct al_vmm *vm, int timeout_ms, struct al_err *err)
{
	uint64_t deadline = al_mono_ms() + (uint64_t)timeout_ms;
	char st[32] = "";
	int rc;

	for (;;) {
		/* one look (timeout 0) may wait a moment for QEMU's answer */
		if ((rc = qmp_query(vm, "{\"execute\":\"query-status\"}\n", "status", st,
				    sizeof(st), deadline + (timeout_ms ? 0 : 1000), err)))
			return rc;
		if (strcmp(st, "inmigrate"))
			break;
		if (!timeout_ms)
			return 1; /* still loading */
		if (al_mono_ms() >= deadline)
			return al_err_set(err, AL_ESANDBOX,
					  "qemu: the snapshot was not loaded in %d ms", timeout_ms);
		usleep(2000);
	}
	if (!strcmp(st, "running"))
		return AL_OK;
	return qmp_do(vm, "{\"execute\":\"cont\"}\n", -1, deadline + 1000, "cont", err);
}

/* QMP: leave negotiation mode, then quit; wait for the process to go. */
static int qemu_shutdown(struct al_vmm *vm, int timeout_ms)
{
	static const char cmds[] = "{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"quit\"}\n";
	/* once negotiated (a save), only the quit */
	const char *c = vm->ctl_ready ? strchr(cmds, '\n') + 1 : cmds;
	size_t len = strlen(c);
	struct pollfd p = {.fd = vm->pidfd, .events = POLLIN};

	if (vm->ctl_fd < 0 || write(vm->ctl_fd, c, len) != (ssize_t)len)
		return AL_ESYS;
	while (poll(&p, 1, timeout_ms) < 0 && errno == EINTR)
		;
	return p.revents ? 0 : -1;
}

const struct al_vmm_driver al_vmm_qemu = {
    .name = "qemu",
    .binary = "qemu-system-x86_64",
    .launch = qemu_launch,
    .shutdown = qemu_shutdown,
    .save = qemu_save,
    .resume = qemu_resume,
};
