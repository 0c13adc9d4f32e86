/* vmm_qemu.c - the QEMU driver of the microVM backend (see vmm.h):
 * `qemu-system-x86_64 -M microvm` with no default devices, the kernel and
 * initramfs given on the command line, the catalogue image as a read-only
 * virtio block device, virtio-serial ports for the job channel and for a
 * session's server, and QMP for control, all on socketpairs (no socket
 * files), and
 * QEMU's own seccomp sandbox on. KVM when asked, TCG otherwise. */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../vmchan.h"
#include "egress_fwd.h"
#include "vmm.h"

static int qemu_launch(const struct al_vmm_cfg *cfg, struct al_vmm *vm, struct al_err *err)
{
	char mem[32], smp[32], cmdline[512], accel[64];
	int chan[2] = {-1, -1}, ctl[2] = {-1, -1}, sess[2] = {-1, -1}, rc;
	const char *argv[64];
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
	snprintf(accel, sizeof(accel), "%s", cfg->kvm ? "kvm" : "tcg,tb-size=64");
	/* panic=-1 and reboot=t with -no-reboot: a guest panic or the agent's
	 * power-off ends QEMU at once. Under TCG the TSC cannot be calibrated
	 * reliably without a PIT/HPET: give the kernel its rate. */
	snprintf(cmdline, sizeof(cmdline),
		 "console=ttyS0 %s panic=-1 reboot=t rdinit=/init cryptomgr.notests%s%s%s%s%s",
		 cfg->console ? "loglevel=4" : "quiet", cfg->kvm ? "" : " tsc=reliable",
		 cfg->disk ? " airlock.image=1" : "", egress ? " airlock.net=1" : "",
		 cfg->warm ? " airlock.warm=1" : "", cfg->inputs ? " airlock.inputs=1" : "");
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
	argv[n++] = "-M";
	argv[n++] = "microvm,pit=off,pic=off";
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
	argv[n] = NULL;
	{
		int keep[3] = {chan[1], ctl[1], sess[1]};

		if ((rc = al_vmm_spawn(cfg, (char *const *)argv, keep, 3, vm, err)))
			goto fail_fds;
	}
	close(chan[1]);
	close(ctl[1]);
	close(sess[1]);
	vm->chan_fd = chan[0];
	vm->ctl_fd = ctl[0];
	vm->sess_fd = sess[0];
	return AL_OK;
fail_fds:
	for (int i = 0; i < 2; i++) {
		al_closep(&chan[i]);
		al_closep(&ctl[i]);
		al_closep(&sess[i]);
	}
	return rc;
}

/* QMP: leave negotiation mode, then quit; wait for the process to go. */
static int qemu_shutdown(struct al_vmm *vm, int timeout_ms)
{
	static const char cmds[] = "{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"quit\"}\n";
	struct pollfd p = {.fd = vm->pidfd, .events = POLLIN};

	if (vm->ctl_fd < 0 ||
	    write(vm->ctl_fd, cmds, sizeof(cmds) - 1) != (ssize_t)sizeof(cmds) - 1)
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
};
