/* agent.c - the microVM guest agent: PID 1 of every Airlock microVM.
 *
 * Built static (`make` -> build/airlock-agent) and packed as /init into the
 * guest initramfs by deploy/images/build.sh. It mounts /dev, /proc, /sys,
 * /tmp and the cgroup2 tree, loads the four virtio modules the job channel
 * needs, and, when the host gave the VM a catalogue image (airlock.image=1),
 * virtio_blk and mounts that disk read-only as the job's root-to-be; says
 * ready on the channel, takes one job, runs it (in its image) as
 * uid 1000 in a cgroup with the job's memory, pids and CPU limits, rlimits,
 * no capabilities, no_new_privs and the worker's system-call filter, with a
 * tmpfs of the disk limit as /work; then sends the result (status, exit code
 * or signal, capped stdout/stderr, collected files, CPU time, peak memory)
 * and powers the VM off. The wall-clock limit is the host's: it kills the
 * VMM. Any failure of the agent itself powers the VM off without a result,
 * which the host reports as sandbox_error.
 *
 * In a warm-pool VM whose image lists modules to preload, warm.c starts a
 * python job's interpreter at boot and may run the job there (agent.h).
 *
 * It reuses the worker's own code for the job's files (jobfs), cgroup,
 * argv/environment (built by the host), verdicts and system-call filter,
 * so that a job means the same inside a VM as on the process backend.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../proto/job.h"
#include "../../proto/keys.h"
#include "../../common/clock.h"
#include "../../proto/result.h"
#include "../backend.h" /* AL_USAGE_POLL_MS */
#include "../cgroup.h"
#include "vmm.h" /* AL_VMM_INPUTS_SERIAL */
#include "../judge.h"
#include "../jobexec.h"
#include "../jobfs.h"
#include "../jobfs_layout.h"
#include "../jobspec.h"
#include "../seccomp.h"
#include "../endstatus.h"
#include "../vmchan.h"
#include "agent.h"
#include "egress_fwd.h"

#define AGENT_VERSION "2" /* 2: the collect cap in the job frame, the host's acknowledgement */
#define PORT_WAIT_MS  10000
#define JOB_FRAME_MAX (AL_JOB_MAX_BYTES + (4u << 20)) /* job + argv + environment */

/* What each mode loads, in dependency order: a microVM only needs the job
 * channel (virtio-mmio); a service VM is a PC with a PCI network card, a
 * disk and the channel. */
static const char *const microvm_modules[] = {"virtio_ring", "virtio", "virtio_mmio",
					      "virtio_console", NULL};
static const char *const image_modules[] = {"virtio_blk", NULL}; /* ext4 is built in */
static const char *const net_modules[] = {"failover", "net_failover", "virtio_net", NULL};
static const char *const service_modules[] = {"virtio_ring",
					      "virtio",
					      "virtio_pci_legacy_dev",
					      "virtio_pci_modern_dev",
					      "virtio_pci",
					      "virtio_console",
					      "failover",
					      "net_failover",
					      "virtio_net",
					      "virtio_blk",
					      NULL};

/* A service VM (the vm backend) keeps running after its result. */
static bool service_mode;
/* A microVM with network egress (airlock.net=1): one card, whose only
 * reachable address is the host's proxy (QEMU's restricted user network). */
static bool net_mode;
static bool have_image;	    /* the job's image is mounted on IMAGE_ROOT */
static char inputs_dev[32]; /* the disk of the job's inputs pack ("" = none) */

void agent_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("airlock-agent: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Power off: QEMU runs with -no-reboot, so a reboot ends the VMM. */
static void __attribute__((noreturn)) power_off(void)
{
	sync();
	reboot(RB_AUTOBOOT);
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

static void __attribute__((noreturn)) fatal(const char *what)
{
	agent_say("%s: %s; powering off", what, strerror(errno));
	power_off();
}

static void mounts(void)
{
	static const struct {
		const char *src, *dst, *type, *opts;
		unsigned long flags;
	} m[] = {
	    {"dev", "/dev", "devtmpfs", "mode=0755", MS_NOSUID | MS_NOEXEC},
	    {"proc", "/proc", "proc", "hidepid=2", MS_NOSUID | MS_NODEV | MS_NOEXEC},
	    {"sys", "/sys", "sysfs", NULL, MS_NOSUID | MS_NODEV | MS_NOEXEC},
	    {"tmp", "/tmp", "tmpfs", "mode=1777,size=16m", MS_NOSUID | MS_NODEV},
	    {"run", "/run", "tmpfs", "mode=0755,size=4m", MS_NOSUID | MS_NODEV},
	};

	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (mount(m[i].src, m[i].dst, m[i].type, m[i].flags, m[i].opts) && errno != EBUSY)
			fatal(m[i].dst);
	if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		fatal("mount cgroup2");
	if (mkdir("/dev/shm", 0755) && errno != EEXIST)
		fatal("mkdir /dev/shm");
	if (mount("sys", "/sys", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL))
		fatal("remount /sys read-only");
}

static void load_modules(const char *const *modules)
{
	for (size_t i = 0; modules[i]; i++) {
		char path[128];
		int fd;

		snprintf(path, sizeof(path), "/lib/modules/%s.ko", modules[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			fatal(path);
		if (syscall(SYS_finit_module, fd, "", 0) && errno != EEXIST)
			fatal(path);
		close(fd);
	}
}

/* Run a busybox applet and wait; its exit status (-1 when it could not run). */
static int busybox(const char *const *args)
{
	char *argv[16];
	int n = 0, st;
	pid_t pid;

	argv[n++] = (char *)"/bin/busybox";
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Service VM: the network card by DHCP (the address the operator's libvirt
 * network gives it; a default route only when the policy grants egress,
 * see udhcpc.sh) and the per-VM disk on /data. */
static void service_setup(void)
{
	static const char *const lo[] = {"ip", "link", "set", "lo", "up", NULL};
	static const char *const up[] = {"ip", "link", "set", "eth0", "up", NULL};
	/* Until it has a lease (the host's readiness deadline bounds this):
	 * an emulated guest next to busy ones can miss a reply. */
	static const char *const dhcp[] = {
	    "udhcpc", "-i", "eth0", "-s", "/usr/share/airlock/udhcpc.sh", "-q", "-t", "5", "-T",
	    "2",      "-A", "1",    NULL};

	if (busybox(lo) || busybox(up) || busybox(dhcp)) {
		errno = ENETDOWN;
		fatal("service VM network (DHCP)");
	}
	mkdir("/data", 0755);
	if (access("/dev/vda", F_OK) == 0 &&
	    mount("/dev/vda", "/data", "ext4", MS_NOSUID | MS_NODEV, NULL))
		fatal("mount /dev/vda on /data");
}

/* A microVM's network card: a fixed address on QEMU's user network (no
 * DHCP: nothing to wait for), no route beyond it; the proxy's address is on
 * it and is the only one that answers. */
static void net_setup(void)
{
	static const char *const lo[] = {"ip", "link", "set", "lo", "up", NULL};
	static const char *const addr[] = {"ip",  "addr", "add", AL_VMM_GUEST_ADDR "/24",
					   "dev", "eth0", NULL};
	static const char *const up[] = {"ip", "link", "set", "eth0", "up", NULL};

	load_modules(net_modules);
	for (int i = 0; i < 200 && access("/sys/class/net/eth0", F_OK); i++)
		usleep(10000);
	if (busybox(lo) || busybox(addr) || busybox(up)) {
		errno = ENETDOWN;
		fatal("the network card for egress");
	}
}

/* What a job's first moments read (the image's /.airlock-preload, written
 * by build.sh) goes into the page cache now, before ready: a pool VM's job
 * then starts from memory. Only paths beneath the image; at most
 * PRELOAD_MAX bytes; a missing or odd entry is skipped (an optimisation,
 * never a failure). */
#define PRELOAD_MAX (64u << 20)
static void image_preload(void)
{
	int root = open(IMAGE_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int lfd = root >= 0 ? openat(root, ".airlock-preload", O_RDONLY | O_CLOEXEC) : -1;
	FILE *f = lfd >= 0 ? fdopen(lfd, "re") : NULL;
	char line[PATH_MAX];
	uint64_t total = 0;

	while (f && total < PRELOAD_MAX && fgets(line, sizeof(line), f)) {
		struct open_how how = {.flags = O_RDONLY | O_CLOEXEC,
				       .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
		const char *rel = line + strspn(line, "/");
		struct stat st;
		int fd;

		line[strcspn(line, "\n")] = '\0';
		fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));
		if (fd < 0)
			continue;
		if (!fstat(fd, &st) && S_ISREG(st.st_mode)) {
			readahead(fd, 0, (size_t)st.st_size);
			total += (uint64_t)st.st_size;
		}
		close(fd);
	}
	if (f)
		fclose(f);
	else if (lfd >= 0)
		close(lfd);
	al_closep(&root);
}

/* A microVM's disks (no udev here): once want of them have appeared, the
 * one whose serial is the inputs pack's (inputs) or the other one, as
 * "/dev/vdX" in out; "" when there is none. */
static void find_disk(int want, bool inputs, char *out, size_t cap)
{
	out[0] = '\0';
	for (int i = 0; i < 300; i++) {
		DIR *d = opendir("/sys/block");
		struct dirent *e;
		int n = 0;
		char found[32] = "";

		while (d && (e = readdir(d))) {
			char path[300], serial[64] = "";
			int fd;
			ssize_t r;
			bool is_inputs;

			if (strncmp(e->d_name, "vd", 2) || strlen(e->d_name) > 8)
				continue;
			n++;
			snprintf(path, sizeof(path), "/sys/block/%s/serial", e->d_name);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			r = fd >= 0 ? read(fd, serial, sizeof(serial) - 1) : -1;
			al_closep(&fd);
			serial[r > 0 ? r : 0] = '\0';
			serial[strcspn(serial, "\n")] = '\0';
			is_inputs = !strcmp(serial, AL_VMM_INPUTS_SERIAL);
			if (is_inputs == inputs && (!found[0] || strcmp(e->d_name, found + 5) < 0))
				snprintf(found, sizeof(found), "/dev/%s", e->d_name);
		}
		if (d)
			closedir(d);
		if (n >= want && found[0] && !access(found, F_OK)) {
			snprintf(out, cap, "%s", found);
			return;
		}
		usleep(10000);
	}
}

/* The job's catalogue image, read-only: a microVM's virtio disk (the one
 * that is not its inputs pack's), a service VM's second (its first is
 * /data). */
static void image_setup(int disks)
{
	char dev[32] = "/dev/vdb";

	if (!service_mode)
		find_disk(disks, false, dev, sizeof(dev));
	/* the device appears once the driver has probed it */
	for (int i = 0; i < 200 && access(dev, F_OK); i++)
		usleep(10000);
	if (mkdir(IMAGE_ROOT, 0755) && errno != EEXIST)
		fatal("mkdir " IMAGE_ROOT);
	if (mount(dev, IMAGE_ROOT, "ext4", MS_RDONLY | MS_NOSUID | MS_NODEV, "noload"))
		fatal("mount the image on " IMAGE_ROOT);
	have_image = true;
	image_preload();
}

static bool cmdline_has(const char *word)
{
	char buf[4096], *p;
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	size_t wl = strlen(word);

	al_closep(&fd);
	buf[n > 0 ? n : 0] = '\0';
	for (p = buf; (p = strstr(p, word)); p += wl)
		if ((p == buf || p[-1] == ' ') && (p[wl] == ' ' || p[wl] == '\n' || !p[wl]))
			return true;
	return false;
}

/* The device of the virtio port named name (no udev here, so look its
 * name up in sysfs), opened; -1 when it has not appeared in wait_ms. */
static int find_port(const char *want, int wait_ms)
{
	for (int waited = 0; waited < wait_ms; waited += 5) {
		DIR *d = opendir("/sys/class/virtio-ports");
		struct dirent *e;

		while (d && (e = readdir(d))) {
			char path[300], name[64] = "";
			int fd;
			ssize_t n;

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", e->d_name);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			n = fd >= 0 ? read(fd, name, sizeof(name) - 1) : -1;
			al_closep(&fd);
			name[n > 0 ? n : 0] = '\0';
			if (strncmp(name, want, strlen(want)) == 0 &&
			    (name[strlen(want)] == '\n' || !name[strlen(want)])) {
				snprintf(path, sizeof(path), "/dev/%s", e->d_name);
				closedir(d);
				return open(path, O_RDWR | O_CLOEXEC);
			}
		}
		if (d)
			closedir(d);
		usleep(5000);
	}
	errno = ENODEV;
	return -1;
}

/* The channel's device: the virtio port named AL_CHAN_PORT. Waits for the
 * driver to probe it. */
static int open_port(void)
{
	int fd = find_port(AL_CHAN_PORT, PORT_WAIT_MS);

	if (fd < 0)
		fatal("no virtio port " AL_CHAN_PORT);
	return fd;
}

static int parse_job(const uint8_t *p, size_t n, struct job_in *in, struct al_err *err)
{
	uint32_t jl, argc, envc;
	size_t off;
	char **v;

	if (n < 4 || (jl = al_get_u32(p)) > n - 4 || n - 4 - jl < 8)
		return al_err_set(err, AL_ESANDBOX, "agent: job frame too short");
	if (al_job_decode(p + 4, jl, &in->job, err))
		return AL_ESANDBOX;
	off = 4 + jl;
	argc = al_get_u32(p + off);
	envc = al_get_u32(p + off + 4);
	off += 8;
	if (argc == 0 || argc > AL_ARGV_MAX + 8 || envc > 4 * AL_ENV_MAX + 16)
		return al_err_set(err, AL_ESANDBOX, "agent: bad argv/environment counts");
	v = calloc(argc + envc + 2, sizeof(*v));
	if (!v)
		return al_err_set(err, AL_ESANDBOX, "agent: out of memory");
	for (uint32_t i = 0; i < argc + envc; i++) {
		const char *s = (const char *)p + off;
		const char *end = off < n ? memchr(s, '\0', n - off) : NULL;

		if (!end) {
			free(v);
			return al_err_set(err, AL_ESANDBOX,
					  "agent: argv/environment not NUL-ended");
		}
		v[i < argc ? i : i + 1] = (char *)s;
		off += (size_t)(end - s) + 1;
	}
	in->argv = v;
	in->envp = v + argc + 1;
	if (n - off < 4) {
		free(v);
		in->argv = in->envp = NULL;
		return al_err_set(err, AL_ESANDBOX, "agent: job frame without its collect cap");
	}
	in->collect_cap = al_get_u32(p + off);
	return AL_OK;
}

int agent_memfd(const char *name, const void *data, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	const char *c = data;

	if (fd < 0)
		return -1;
	while (len > 0) {
		ssize_t w = write(fd, c, len);

		if (w <= 0) {
			close(fd);
			return -1;
		}
		c += w;
		len -= (size_t)w;
	}
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* The job's set-up failed (the boundary's fault, never the job's): say
 * what on the set-up pipe, which an exec closes unread. */
static void __attribute__((noreturn)) setup_fail(int fd, const char *what)
{
	char msg[200];
	int n = snprintf(msg, sizeof(msg), "%s: %s", what, strerror(errno));

	if (write(fd, msg, n > 0 ? (size_t)n : 0) < 0) {
		/* the exit status still says it */
	}
	_exit(126);
}

static void set_rlimit(int res, rlim_t v, int setup_wr)
{
	struct rlimit rl = {v, res == RLIMIT_CPU ? v + 1 : v};

	if (setrlimit(res, &rl))
		setup_fail(setup_wr, "setrlimit");
}

/* In the job's mount namespace: its root becomes the image (read-only,
 * mounted at boot) with the guest's /dev, /proc and read-only /sys, the
 * cgroup tree masked, and its tmpfs (the disk limit) as /work, /tmp and
 * /dev/shm: the only writable places (and a service VM's /data disk). The
 * initramfs is left underneath (MS_MOVE + chroot, as switch_root does: the
 * initramfs cannot be pivoted away); the job has no capability to chroot
 * back. */
static int image_root(const char *work, const char *tmp, const char *shm)
{
	if (mount("/dev", IMAGE_ROOT "/dev", NULL, MS_BIND | MS_REC, NULL) ||
	    mount("/proc", IMAGE_ROOT "/proc", NULL, MS_BIND | MS_REC, NULL) ||
	    mount("/sys", IMAGE_ROOT "/sys", NULL, MS_BIND | MS_REC, NULL) ||
	    mount("airlock-mask", IMAGE_ROOT "/sys/fs/cgroup", "tmpfs",
		  MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555") ||
	    mount(work, IMAGE_ROOT "/work", NULL, MS_BIND, NULL) ||
	    mount(tmp, IMAGE_ROOT "/tmp", NULL, MS_BIND, NULL) ||
	    mount(shm, IMAGE_ROOT "/dev/shm", NULL, MS_BIND, NULL) ||
	    (service_mode && mount("/data", IMAGE_ROOT "/data", NULL, MS_BIND | MS_REC, NULL)))
		return -1;
	if (chdir(IMAGE_ROOT) || mount(".", "/", NULL, MS_MOVE, NULL) || chroot(".") || chdir("/"))
		return -1;
	return 0;
}

/* The child: from PID-1 root to the job. Only async-signal-safe calls. */
static void __attribute__((noreturn))
exec_job(const struct step *st, const struct al_cg *cg, const struct al_seccomp *sc,
	 const struct al_jobfs *fs, const int fds[JOB_FDS], int setup_wr)
{
	const struct al_limits *l = st->l;
	const char *prog = st->argv[0];
	char tmp[PATH_MAX + 8], shm[PATH_MAX + 8];
	/* a grading job's step: the build tree is its /work, its own work dir
	 * its /tmp (HOME, a test's files) */
	const char *work = st->tree ? st->tree : fs->home, *tmp_src = st->tree ? fs->home : tmp;
	const unsigned long ro = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV;

	/* the set-up pipe above the descriptors placed below, closed at exec */
	if ((setup_wr = fcntl(setup_wr, F_DUPFD_CLOEXEC, 20)) < 0)
		_exit(126);
	if (al_cg_enter_self(cg))
		setup_fail(setup_wr, "join the job's cgroup");
	/* One storage budget: the job's /tmp and /dev/shm are directories of
	 * its tmpfs; the guest's cgroup tree is not the job's to see. */
	snprintf(tmp, sizeof(tmp), "%s/" AL_JOBFS_TMP, fs->work);
	snprintf(shm, sizeof(shm), "%s/" AL_JOBFS_SHM, fs->work);
	if (unshare(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWIPC) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		setup_fail(setup_wr, "the job's mounts");
	if (have_image) {
		if (image_root(work, tmp_src, shm) ||
		    (st->tree && !st->tree_rw && mount(NULL, "/work", NULL, ro, NULL)))
			setup_fail(setup_wr, "the job's root in its image");
	} else if (mount(tmp_src, "/tmp", NULL, MS_BIND, NULL) ||
		   mount(shm, "/dev/shm", NULL, MS_BIND, NULL) ||
		   mount("airlock-mask", "/sys/fs/cgroup", "tmpfs",
			 MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555") ||
		   (st->tree && (mount(work, "/work", NULL, MS_BIND, NULL) ||
				 (!st->tree_rw && mount(NULL, "/work", NULL, ro, NULL)))))
		setup_fail(setup_wr, "the job's mounts");
	for (int i = 0; i < JOB_FDS; i++)
		if (fds[i] >= 0 && dup2(fds[i], 10 + i) < 0)
			setup_fail(setup_wr, "place descriptors");
	for (int i = 0; i < JOB_FDS; i++)
		if (fds[i] >= 0 && dup2(10 + i, i) < 0)
			setup_fail(setup_wr, "place descriptors");
	for (int i = 3; i < JOB_FDS; i++)
		if (fds[i] < 0)
			close(i);
	syscall(SYS_close_range, JOB_FDS, (unsigned)setup_wr - 1, 0);
	syscall(SYS_close_range, (unsigned)setup_wr + 1, ~0u, 0);
	if (setsid() < 0 || chdir(have_image || st->tree ? "/work" : fs->home))
		setup_fail(setup_wr, "chdir to the work dir");
	{
		const char *what = "drop the capability bounding set";

		/* a grading job's tests each have a uid of their own, and the
		 * build's group: they read what the build made */
		if (al_drop_bounding_set() || al_become(st->uid, JOB_UID, &what))
			setup_fail(setup_wr, what);
	}
	set_rlimit(RLIMIT_CPU, (rlim_t)((l->cpu_ms + 999) / 1000), setup_wr);
	set_rlimit(RLIMIT_FSIZE, (rlim_t)al_fsize_limit(l), setup_wr);
	set_rlimit(RLIMIT_CORE, 0, setup_wr);
	set_rlimit(RLIMIT_MEMLOCK, 0, setup_wr);
	set_rlimit(RLIMIT_NOFILE, 1024, setup_wr);
	if (al_seccomp_apply(sc))
		setup_fail(setup_wr, "seccomp");
	{
		/* the job's own fault, as a shell reports it */
		int code = al_exec_job(prog, st->argv, st->envp);

		dprintf(2, "airlock: cannot execute %s: %s\n", prog, strerror(errno));
		_exit(code);
	}
}

/* The set-up pipe closes unread at the exec. */
pid_t agent_start_job(const struct step *st, const struct al_cg *cg, const struct al_seccomp *sc,
		      const struct al_jobfs *fs, const int fds[JOB_FDS], struct al_err *err)
{
	int setup[2];
	char msg[200];
	ssize_t n;
	pid_t pid;

	if (pipe2(setup, O_CLOEXEC))
		return al_err_sys(err, "agent: pipe"), -1;
	pid = fork();
	if (pid == 0)
		exec_job(st, cg, sc, fs, fds, setup[1]);
	close(setup[1]);
	if (pid < 0) {
		close(setup[0]);
		return al_err_sys(err, "agent: fork"), -1;
	}
	n = read(setup[0], msg, sizeof(msg) - 1); /* empty at the exec */
	close(setup[0]);
	if (n > 0) {
		msg[n] = '\0';
		waitpid(pid, NULL, 0);
		al_err_set(err, AL_ESANDBOX, "agent: set up the job's process: %s", msg);
		return -1;
	}
	return pid;
}

/* Wait for the job, saying we are alive every second (the host tells a
 * hung guest from a long job by that), stopping it at its whole-job limits
 * (CPU time of all its processes, output); PID 1 also reaps the orphans
 * the job leaves. *ws gets its wait status. */
/* Live output: what the job wrote since the last look, as 'O' frames
 * (al_output_pump: within its caps); sent[] counts what went. */
static ssize_t read_memfd(void *fs, int stream, uint64_t off, void *buf, size_t cap)
{
	return al_jobfs_output(fs, stream, off, buf, cap);
}

struct out_port {
	int fd;
	struct al_err *err;
};

static int send_frame(void *to, int stream, const void *data, size_t len)
{
	struct out_port *o = to;
	unsigned char st = (unsigned char)stream;

	return al_chan_write(o->fd, AL_CHAN_OUTPUT, &st, 1, data, len, -1, o->err);
}

/* Say we are alive, at most once a second (the host tells a hung guest
 * from a long job by that): while a job runs, and between a grading job's
 * many short steps. */
static int beat(int port, struct al_err *err)
{
	static uint64_t last;

	if (last && al_mono_ms() - last < AL_CHAN_HEARTBEAT_MS)
		return AL_OK;
	last = al_mono_ms();
	return al_chan_write(port, AL_CHAN_HEARTBEAT, NULL, 0, NULL, 0, -1, err) ? AL_ESANDBOX
										 : AL_OK;
}

static int wait_job(pid_t pid, int port, const struct al_cg *cg, const struct al_jobfs *fs,
		    const struct step *stp, int *ws, long *maxrss_kib, bool *timed_out,
		    struct al_err *err)
{
	struct rusage ru;
	const struct al_limits *l = stp->l;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), rc = AL_OK;
	uint64_t t0 = al_mono_ms(), sent[3] = {0};

	for (bool done = false, stopped = false; !done;) {
		struct pollfd p = {.fd = pidfd, .events = POLLIN};
		int s;
		pid_t w;

		if (pidfd >= 0 && poll(&p, 1, AL_USAGE_POLL_MS) == 0) {
			/* a grading job's step has its own wall-clock limit (a
			 * plain job's is the host's: it kills the VM) */
			bool late = stp->tree && al_mono_ms() - t0 >= l->wall_ms;

			uint64_t cpu = al_cg_cpu_ns(cg);

			cpu = cpu > stp->cpu_base_ns ? cpu - stp->cpu_base_ns : 0;
			if (!stopped && (late || cpu / 1000000 >= l->cpu_ms ||
					 al_fd_size(fs->out_fd) > l->stdout_bytes ||
					 al_fd_size(fs->err_fd) > l->stderr_bytes)) {
				kill(pid, SIGKILL); /* the verdict reads why from the counters */
				stopped = true;
				*timed_out = late;
			}
			if (stp->live && al_output_pump(l, sent, read_memfd, (void *)fs, send_frame,
							&(struct out_port){port, err})) {
				rc = AL_ESANDBOX;
				break;
			}
			if ((rc = beat(port, err)))
				break;
			continue;
		}
		while ((w = wait4(-1, &s, pidfd >= 0 ? WNOHANG : 0, &ru)) > 0 ||
		       (w < 0 && errno == EINTR))
			if (w == pid) {
				*ws = s;
				*maxrss_kib = ru.ru_maxrss; /* the job's, and what it waited for */
				done = true;
			}
		if (w < 0 && errno != EINTR && !done) {
			rc = al_err_sys(err, "agent: wait");
			break;
		}
	}
	al_closep(&pidfd);
	return rc;
}

int agent_finish_step(const struct al_job *job, const struct step *st, pid_t pid, struct al_cg *cg,
		      struct al_jobfs *fs, int port, uint32_t collect_cap, uint64_t t0,
		      struct al_result *res, struct al_err *err)
{
	const struct al_limits *l = st->l;
	struct al_cg_stats stats = {0};
	bool disk_full = false, timed_out = false;
	int ws = 0, rc;
	long rss = 0;

	if ((rc = wait_job(pid, port, cg, fs, st, &ws, &rss, &timed_out, err)))
		return rc;
	res->max_rss_bytes = rss > 0 ? (uint64_t)rss * 1024 : 0;
	al_cg_stats(cg, &stats);
	stats.cpu_ns = stats.cpu_ns > st->cpu_base_ns ? stats.cpu_ns - st->cpu_base_ns : 0;
	al_cg_destroy(cg, NULL); /* the job's leftovers (daemons) die with it */
	/* each file cut to the host's cap here: no byte more crosses */
	if ((rc = al_jobfs_collect(fs, job, l, collect_cap, res, &disk_full, err)))
		return rc;
	al_end_status(res, ws, &stats, l, disk_full);
	if (timed_out && res->status != AL_ST_MEMORY_LIMIT) {
		res->status = AL_ST_TIMEOUT;
		res->has_exit_code = false;
		al_result_set_error(res, "wall-clock limit of %llu ms reached: killed",
				    (unsigned long long)l->wall_ms);
	}
	res->wall_ms = al_mono_ms() - t0;
	return AL_OK;
}

/* Run one command (the job, or a grading job's step) in a cgroup named
 * cgname with job's stdin, code and files; fill res. A returned error is
 * the sandbox's, not the job's. */
static int run_step(const struct al_job *job, const struct step *st, const char *cgname, int port,
		    uint32_t collect_cap, struct al_result *res, struct al_err *err)
{
	const struct al_limits *l = st->l;
	struct al_cg_limits cgl = {l->memory_bytes, l->pids, 0};
	struct al_cg_sys sys;
	struct al_cg cg;
	struct al_jobfs fs;
	struct al_seccomp sc;
	int fds[JOB_FDS] = {-1, -1, -1, -1, -1}, rc;
	uint64_t t0 = al_mono_ms();
	pid_t pid;

	if ((rc = al_seccomp_build_net(&sc, service_mode || net_mode, err)))
		return rc;
	if ((rc = al_cg_detect(&sys, "guest", NULL, err)) ||
	    (rc = al_cg_create(&cg, &sys, cgname, &cgl, err)))
		goto out_sc;
	if ((rc = al_jobfs_create(&fs, "/run/airlock", cgname, job, l->disk_bytes, st->uid, JOB_UID,
				  false, err)))
		goto out_cg;
	/* the inputs disk: the job's inputs, or only the CA bundle of a tier
	 * with egress.ca_file or cache_https */
	if ((job->ninputs || inputs_dev[0]) &&
	    (rc = inputs_dev[0] ? al_jobfs_unpack(&fs, inputs_dev, st->uid, JOB_UID, 0, err)
				: al_err_set(err, AL_ESANDBOX,
					     "agent: the job has inputs and the VM "
					     "no inputs disk"))) {
		al_jobfs_destroy(&fs);
		goto out_cg;
	}
	fds[0] = agent_memfd("stdin", job->stdin_data.data, job->stdin_data.len);
	fds[1] = fs.out_fd;
	fds[2] = fs.err_fd;
	if (job->code.len)
		fds[3] = agent_memfd("code", job->code.data, job->code.len);
	if (fds[0] < 0 || (job->code.len && fds[3] < 0)) {
		rc = al_err_sys(err, "agent: memfd");
		goto out;
	}
	/* a session's server: its port to the worker, on fd 4 */
	if (job->session && (fds[4] = find_port(AL_SESSION_PORT, 2000)) < 0) {
		rc = al_err_sys(err, "agent: the session port " AL_SESSION_PORT);
		goto out;
	}
	if ((pid = agent_start_job(st, &cg, &sc, &fs, fds, err)) < 0) {
		rc = AL_ESANDBOX;
		goto out;
	}
	if (service_mode) {
		/* The service runs on; the result says it started. Its files,
		 * cgroup and output stay for as long as the VM lives. */
		res->status = AL_ST_OK;
		al_seccomp_free(&sc);
		return AL_OK;
	}
	rc = agent_finish_step(job, st, pid, &cg, &fs, port, collect_cap, t0, res, err);
out:
	for (int i = 0; i < JOB_FDS; i++)
		if (i != 1 && i != 2 && fds[i] >= 0)
			close(fds[i]);
	al_jobfs_destroy(&fs);
out_cg:
	al_cg_destroy(&cg, NULL);
out_sc:
	al_seccomp_free(&sc);
	return rc;
}

/* Run the job; fill res. A returned error is the sandbox's, not the job's. */
static int run(struct job_in *in, int port, struct al_result *res, struct al_err *err)
{
	struct step st = {in->argv, in->envp, &in->job.limits, JOB_UID, NULL, false, true, 0};

	return run_step(&in->job, &st, "job", port, in->collect_cap, res, err);
}

#define TEST_UID_BASE 2000 /* test i of a grading job runs as 2000 + i */
#define CHECK_UID     2400 /* ...its checker as this one, never a test's */

/* One step of a grading job (sj, with lim) as uid in the build tree: its
 * command line made, then run_step. */
static int grade_step(const struct job_in *in, const struct al_job *sj, const struct al_limits *lim,
		      uid_t uid, const char *tree, bool build, const char *name, int port,
		      struct al_result *run, struct al_err *err)
{
	char *argv[AL_ARGV_MAX + 6], *p;
	struct al_buf ab = {0};
	uint32_t argc = 0;
	int rc;

	if (al_command_argv(sj, "/proc/self/fd/3", &ab, &argc) || argc > AL_ARGV_MAX + 4) {
		al_buf_free(&ab);
		return al_err_set(err, AL_ESANDBOX, "agent: out of memory");
	}
	p = ab.data;
	for (uint32_t k = 0; k < argc; k++, p += strlen(p) + 1)
		argv[k] = p;
	argv[argc] = NULL;
	{
		struct step st = {argv, in->envp, lim, uid, tree, build, false, 0};

		umask(022); /* what the build makes, its tests may read */
		rc = run_step(sj, &st, name, port, 0, run, err);
	}
	al_buf_free(&ab);
	return rc;
}

/* A grading job (proto/grade.h): its build tree (the job's files, the
 * build's), the build once, then each test in a cgroup and uid of its own
 * with the tree read-only on /work and its own tmpfs on /tmp; a verdict
 * each (backends/judge.c, as the worker gives them). */
static int run_grading(struct job_in *in, int port, struct al_result *res, struct al_err *err)
{
	const struct al_job *job = &in->job;
	struct al_test_result build = {0}, *tests = calloc(job->ntests, sizeof(*tests));
	struct al_result build_run = {0};
	struct al_jobfs tree;
	struct al_limits lim;
	size_t n = 0;
	bool failed = false;
	int rc = AL_OK;

	if (!tests)
		return al_err_set(err, AL_ESANDBOX, "agent: out of memory");
	al_step_limits(job->build ? &job->build->limits : &job->limits, &job->limits, &lim);
	if ((rc = al_jobfs_create(&tree, "/run/airlock", "tree", job, lim.disk_bytes, JOB_UID,
				  JOB_UID, false, err))) {
		free(tests);
		return rc;
	}
	close(tree.out_fd);
	close(tree.err_fd);
	tree.out_fd = tree.err_fd = -1;
	/* the tests (other uids, the build's group) enter it */
	if (chmod(tree.home, 0750)) {
		rc = al_err_sys(err, "agent: chmod the build tree");
		goto out;
	}
	for (long i = job->build ? -1 : 0; i < (long)job->ntests && !rc; i++) {
		char *av[AL_ARGV_MAX], name[32];
		struct al_result run = {0};
		struct al_job sj;

		if ((rc = beat(port, err)))
			break;
		if (failed && i >= 0 && job->stop_on_failure) {
			if (al_grade_skip(&job->tests[i], &tests[n++]))
				rc = al_err_set(err, AL_ESANDBOX, "agent: out of memory");
			continue;
		}
		al_grade_step_job(job, &job->limits, i, av, &sj, &lim);
		snprintf(name, sizeof(name), i < 0 ? "build" : "test-%ld", i);
		rc = grade_step(in, &sj, &lim, i < 0 ? JOB_UID : TEST_UID_BASE + (uid_t)i,
				tree.home, i < 0, name, port, &run, err);
		if (!rc && i < 0) {
			if (al_grade_build(&run, &build))
				rc = al_err_set(err, AL_ESANDBOX, "agent: out of memory");
			failed = build.verdict != AL_V_ACCEPTED;
			build_run = run; /* its output is the job's if it failed */
			run = (struct al_result){0};
			if (failed)
				break;
		} else if (!rc) {
			if (al_grade_test(&job->tests[i], &run, &tests[n]))
				rc = al_err_set(err, AL_ESANDBOX, "agent: out of memory");
			if (!rc && al_grade_wants_check(job, &tests[n])) {
				/* the job's checker on the test's whole output */
				struct al_file cf[3];
				struct al_result crun = {0};

				al_grade_checker_job(job, &job->limits, i, &run.out, av, cf, &sj,
						     &lim);
				snprintf(name, sizeof(name), "check-%ld", i);
				rc = grade_step(in, &sj, &lim, CHECK_UID, tree.home, false, name,
						port, &crun, err);
				if (!rc && al_grade_checked(&tests[n], &crun))
					rc = al_err_set(err, AL_ESANDBOX, "agent: out of memory");
				al_result_free(&crun);
			}
			failed |= al_verdict_failed(tests[n++].verdict);
		}
		al_result_free(&run);
	}
	if (!rc && al_grade_result(res, job->build ? &build : NULL, &build_run, tests, n))
		rc = al_err_set(err, AL_ESANDBOX, "agent: out of memory");
out:
	al_test_result_free(&build);
	for (size_t i = 0; i < n; i++)
		al_test_result_free(&tests[i]);
	free(tests);
	al_result_free(&build_run);
	al_jobfs_destroy(&tree);
	return rc;
}

/* What the agent wrote may still sit in the guest's buffers: power off
 * only once the host says the whole result arrived (or gave up). */
static void wait_ack(int port, struct al_chan_rd *rd)
{
	struct al_err err = {0};
	uint64_t t0 = al_mono_ms();

	al_chan_rd_reset(rd);
	for (;;) {
		struct pollfd p = {.fd = port, .events = POLLIN};
		uint64_t waited = al_mono_ms() - t0;
		int rc;

		if (waited >= AL_CHAN_ACK_WAIT_MS ||
		    poll(&p, 1, (int)(AL_CHAN_ACK_WAIT_MS - waited)) <= 0)
			break;
		rc = al_chan_read(rd, port, AL_CHAN_READY_MAX, &err);
		if (rc < 0 || (rc > 0 && rd->body.data[0] == AL_CHAN_ACK))
			return;
		if (rc > 0)
			al_chan_rd_reset(rd);
	}
	agent_say("no acknowledgement of the result from the host");
}

int main(void)
{
	struct al_chan_rd rd = {0};
	struct al_err err = {0};
	struct al_result res = {0};
	struct job_in in = {0};
	struct al_buf out = {0};
	int port, rc;

	if (getpid() != 1) {
		fprintf(stderr, "airlock-agent: runs only as PID 1 of an Airlock microVM\n");
		return 2;
	}
	setsid();
	mounts();
	/* Memory as on a host: an allocation is granted and its pages counted
	 * as they are touched, so a job past its limit is the cgroup's OOM kill
	 * (memory_limit), as on the process and container tiers, not a malloc
	 * the VM's small RAM refused (a MemoryError, a bad_alloc: runtime_error) */
	{
		int fd = open("/proc/sys/vm/overcommit_memory", O_WRONLY | O_CLOEXEC);

		if (fd < 0 || write(fd, "1", 1) != 1)
			agent_say("vm.overcommit_memory: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	service_mode = cmdline_has("airlock.mode=service");
	load_modules(service_mode ? service_modules : microvm_modules);
	if (service_mode)
		service_setup();
	if ((net_mode = !service_mode && cmdline_has("airlock.net=1")))
		net_setup();
	{
		bool image = cmdline_has("airlock.image=1");
		int disks = image + (!service_mode && cmdline_has("airlock.inputs=1"));

		if (disks && !service_mode)
			load_modules(image_modules);
		if (disks > image) /* the job's inputs pack, unpacked with its files */
			find_disk(disks, true, inputs_dev, sizeof(inputs_dev));
		if (image)
			image_setup(disks);
	}
	if (have_image && !service_mode && cmdline_has("airlock.warm=1"))
		agent_warm_start(net_mode);
	port = open_port();
	if (al_chan_write(port, AL_CHAN_READY, "agent " AGENT_VERSION,
			  strlen("agent " AGENT_VERSION), NULL, 0, -1, &err))
		fatal("send ready");
	do {
		agent_warm_wait(port);
		rc = al_chan_read(&rd, port, JOB_FRAME_MAX, &err);
	} while (rc == 0);
	if (rc < 0 || rd.body.data[0] != AL_CHAN_JOB) {
		agent_say("no job: %s", rc < 0 ? err.msg : "unexpected frame");
		power_off();
	}
	res.version = AL_PROTO_VERSION;
	if ((rc = parse_job((const uint8_t *)rd.body.data + 1, rd.body.len - 1, &in, &err)) == 0) {
		bool warm = false;

		rc = agent_warm_run(&in, port, &res, &warm, &err);
		if (!warm)
			rc = in.job.ntests && !service_mode ? run_grading(&in, port, &res, &err)
							    : run(&in, port, &res, &err);
	}
	if (rc) {
		res.status = rc == AL_EINVAL ? AL_ST_REJECTED : AL_ST_SANDBOX_ERROR;
		al_result_set_error(&res, "%s", err.msg);
	}
	res.id = strdup(in.job.id ? in.job.id : "unknown");
	if (!res.id || al_result_encode(&res, &out, &err)) {
		agent_say("cannot encode the result: %s", err.msg);
		power_off();
	}
	if (al_chan_write(port, AL_CHAN_RESULT, out.data, out.len, NULL, 0, -1, &err))
		agent_say("send result: %s", err.msg);
	else if (!service_mode)
		wait_ack(port, &rd);
	/* A service VM lives on (until its lease ends: the host destroys it),
	 * reaping what the service leaves; a failed start powers it off. */
	while (service_mode && res.status == AL_ST_OK)
		if (wait(NULL) < 0 && errno == ECHILD)
			pause();
	power_off();
}
