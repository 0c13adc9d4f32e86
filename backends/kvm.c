/* kvm.c - whether this host's KVM can run a VM: the microVM backend's
 * accelerator and runsc's kvm platform ask the same (see kvm.h). */
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/cleanup.h"
#include "kvm.h"

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
