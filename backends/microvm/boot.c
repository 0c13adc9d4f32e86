/* boot.c - the guest agent's boot, as PID 1: the file systems, the
 * virtio modules of its mode (microVM, service VM, with a network card),
 * the network and /data of a service VM, the job's image disk mounted as
 * its root-to-be and preloaded, the inputs disk found; and the console
 * (agent_say), power-off and the virtio ports. Calls nothing else of the
 * agent's.
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

#define PORT_WAIT_MS 10000

struct agent_vm agent_vm;

/* What each mode loads, in dependency order: a microVM needs the job
 * channel (virtio-mmio) and the balloon, through which the kernel reports
 * the pages it frees to the host (free page reporting: the host's memory
 * follows what the guest uses, not what it once touched); a service VM is a PC with a PCI network
 * card, a disk and the channel. */
static const char *const microvm_modules[] = {"virtio_ring",	"virtio",	  "virtio_mmio",
					      "virtio_console", "virtio_balloon", NULL};
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
void agent_power_off(void)
{
	sync();
	reboot(RB_AUTOBOOT);
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

void agent_fatal(const char *what)
{
	agent_say("%s: %s; powering off", what, strerror(errno));
	agent_power_off();
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
			agent_fatal(m[i].dst);
	if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		agent_fatal("mount cgroup2");
	if (mkdir("/dev/shm", 0755) && errno != EEXIST)
		agent_fatal("mkdir /dev/shm");
	if (mount("sys", "/sys", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL))
		agent_fatal("remount /sys read-only");
}

static void load_modules(const char *const *modules)
{
	for (size_t i = 0; modules[i]; i++) {
		char path[128];
		int fd;

		snprintf(path, sizeof(path), "/lib/modules/%s.ko", modules[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			agent_fatal(path);
		if (syscall(SYS_finit_module, fd, "", 0) && errno != EEXIST)
			agent_fatal(path);
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
		return AL_ESYS;
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
		agent_fatal("service VM network (DHCP)");
	}
	mkdir("/data", 0755);
	if (access("/dev/vda", F_OK) == 0 &&
	    mount("/dev/vda", "/data", "ext4", MS_NOSUID | MS_NODEV, NULL))
		agent_fatal("mount /dev/vda on /data");
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
		agent_fatal("the network card for egress");
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

	if (!agent_vm.service)
		find_disk(disks, false, dev, sizeof(dev));
	/* the device appears once the driver has probed it */
	for (int i = 0; i < 200 && access(dev, F_OK); i++)
		usleep(10000);
	if (mkdir(IMAGE_ROOT, 0755) && errno != EEXIST)
		agent_fatal("mkdir " IMAGE_ROOT);
	if (mount(dev, IMAGE_ROOT, "ext4", MS_RDONLY | MS_NOSUID | MS_NODEV, "noload"))
		agent_fatal("mount the image on " IMAGE_ROOT);
	agent_vm.image = true;
	image_preload();
}

bool agent_cmdline_has(const char *word)
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
int agent_find_port(const char *want, int wait_ms)
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
int agent_open_port(void)
{
	int fd = agent_find_port(AL_CHAN_PORT, PORT_WAIT_MS);

	if (fd < 0)
		agent_fatal("no virtio port " AL_CHAN_PORT);
	return fd;
}

void agent_boot(void)
{
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
	agent_vm.service = agent_cmdline_has("airlock.mode=service");
	load_modules(agent_vm.service ? service_modules : microvm_modules);
	if (agent_vm.service)
		service_setup();
	if ((agent_vm.net = !agent_vm.service && agent_cmdline_has("airlock.net=1")))
		net_setup();
	{
		bool image = agent_cmdline_has("airlock.image=1");
		int disks = image + (!agent_vm.service && agent_cmdline_has("airlock.inputs=1"));

		if (disks && !agent_vm.service)
			load_modules(image_modules);
		if (disks > image) /* the job's inputs pack, unpacked with its files */
			find_disk(disks, true, agent_vm.inputs_dev, sizeof(agent_vm.inputs_dev));
		if (image)
			image_setup(disks);
	}
}
