/* kvm.h - whether this host's KVM can run a VM (kvm.c). */
#ifndef AL_KVM_H
#define AL_KVM_H

#include <stdbool.h>
#include <sys/types.h>

#include "../proto/err.h"

/* KVM is usable: the CPU has virtualisation extensions and /dev/kvm makes
 * a VM; *gid gets the device's group, why the reason when it is not. */
bool al_kvm_usable(gid_t *gid, struct al_err *why);

#endif
