/* mvm.h - what the microVM backend's files share, top down: microvm.c
 * (the backend's ops: a job's VM from start to result), snapshot.c (a VM
 * saved, and restored), pool.c (one VM, and the warm pools), frames.c (the
 * guest's result and output frames), jail.c (the VMM's start, for the
 * drivers). Each calls only those after it. */
#ifndef AL_MVM_H
#define AL_MVM_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../proto/buf.h"
#include "../backend.h"
#include "../cgroup.h"
#include "../vmchan.h"
#include "vmm.h"

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
	bool egress, inputs;  /* with a network card, with an inputs disk */
	bool restored;	      /* started from a snapshot, not booted */
	bool restoring;	      /* ...whose state QEMU still reads (a pool's, from its template) */
	bool job_inside;      /* ...of a session: its job runs since before the snapshot */
	bool tmpl_warm;	      /* ...of a template whose interpreter was warm */
	bool ram_named;	      /* its RAM a backend named "ram", no balloon (struct mvm_ram) */
	int ram_fd;	      /* ...in this memfd of its own, shared: it may become a template */
};

/* A VM's RAM other than QEMU's own (vmm.h's ram_*), for a pool whose copies
 * map its template's memory (--vm-template-share; pool.c): named, the
 * VM's RAM is a backend named "ram" and it has no balloon (a resumed copy:
 * fd -1, anonymous); fd, a memfd it maps, shared (a VM that may become
 * the template; the VM owns fd) or private (a copy: the template's memfd,
 * sealed; the pool owns it). */
struct mvm_ram {
	bool named;
	int fd;
	bool private;
};

struct pool {
	char tier[AL_ID_MAX + 1];
	char guest[PATH_MAX];
	char image[AL_ID_MAX + 1]; /* catalogue image name ("" = none) */
	unsigned size, vcpus;
	uint64_t memory_mib, max_idle_ms;
	struct vm *vms[64];
	unsigned n;
	/* its template: a snapshot of one of its VMs booted and warm, which
	 * the pool's VMs and cold jobs of its shape start from (pool.c) */
	char tmpl[PATH_MAX];
	char tmpl_hash[80]; /* the image it was made with */
	uint64_t tmpl_bytes;
	bool tmpl_ok, tmpl_off; /* made; given up (a save failed: VMs boot) */
	bool tmpl_warm;		/* made of a VM whose interpreter was warm */
	int tmpl_ram; /* shared templates: its RAM, a sealed memfd its copies map (else -1) */
};

/* The backend's host-wide state, set by mvm_init (microvm.c). */
struct mvm_host {
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
};
extern struct mvm_host mvm_host;

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

/* snapshot.c */
/* The snapshot op (backend.h). */
int mvm_snapshot(struct al_sandbox *sb, int fd, bool keep, struct al_err *err);
/* sb's VM (m->vm) from the snapshot on spec.restore_fd, checked against
 * this shape, running; err when refused or failed. */
int mvm_restore(struct al_sandbox *sb, const char *guest, uint64_t mib, unsigned vcpus,
		struct al_err *err);

/* pool.c */
/* Tell the guest agent it was restored: the time, fresh entropy and
 * whether it waits in its pool before its job ('E'). */
int mvm_tell_restored(struct vm *vm, bool waits, struct al_err *err);
/* A VM of the shape of a pool of tier whose template is made, restored
 * from it and running (a cold job's, instead of a boot); NULL if none. */
struct vm *mvm_pool_restore(const char *tier, const char *guest, const char *image,
			    uint64_t memory_mib, unsigned vcpus);
/* Whether vm's VMM has exited. */
bool mvm_vm_exited(struct vm *vm);
/* Stop the VMM (politely first when graceful: the driver's shutdown), reap
 * it, remove its cgroup: nothing of the VM is left. NULL is nothing. */
void mvm_vm_free(struct vm *vm, bool graceful);
/* AL_OK when dir holds a guest (a kernel and an initramfs), else err. */
int mvm_guest_check(const char *dir, struct al_err *err);
/* Launch a VM of guest (with the catalogue image's disk, the inputs pack,
 * egress; warm: a pool VM) of memory_mib and vcpus, booting, or from the
 * saved state on incoming_fd (>= 0: snapshot.c's), its RAM as ram says
 * (NULL: QEMU's own); NULL with err (a shared ram->fd is the VM's either
 * way). */
struct vm *mvm_vm_launch(const char *guest, const char *image, const char *inputs, bool egress,
			 bool warm, uint64_t memory_mib, unsigned vcpus, int incoming_fd,
			 const struct mvm_ram *ram, struct al_err *err);
/* The guest said its interpreter is warm (AL_CHAN_WARM, once). */
void mvm_vm_took_warm(struct vm *vm);
/* Read what the channel holds before the job: 1 when the agent is ready,
 * 0 not yet, negative when the VM is of no use. */
int mvm_vm_poll_ready(struct vm *vm, struct al_err *err);
/* The vCPUs of a VM for a job's CPU share, 1 to 16. */
unsigned mvm_vcpus_for(uint64_t cpu_millis);
/* The VM's RAM for a job's memory limit: the limit, the guest's own, an
 * eighth more (at most 512 MiB). */
uint64_t mvm_memory_mib_for(uint64_t memory_bytes);
/* The pool VM that fits the job best; NULL if none does. */
struct vm *mvm_pool_take(const char *tier, const char *guest, const char *image,
			 uint64_t memory_mib, unsigned vcpus);
/* The backend's ops: each heartbeat, a tier's new pool, a refill. */
void mvm_pool_tick(const struct al_backend_conf *conf);
int mvm_pool_add(const struct al_backend_conf *conf, const struct al_pool_spec *ps,
		 struct al_err *err);
void mvm_pool_refill(const struct al_backend_conf *conf, unsigned slot);

/* frames.c */
/* Take the guest's result (its frame's body) into res, believing it only
 * about the job's own outcome and only within the job's caps. */
int mvm_take_result(struct al_sandbox *sb, const char *p, size_t n, struct al_result *res,
		    struct al_err *err);
/* An 'O' frame: the next bytes of one of the job's streams, within its cap. */
int mvm_take_output(struct al_sandbox *sb, const char *p, size_t n, struct al_err *err);

#endif
