/* vm.c - the service-VM backend: a libvirt-managed VM per `service` job that
 * keeps running after its result, with its own IP on a libvirt network.
 *
 * prepare makes the VM's disk, a copy-on-write overlay (qemu-img) of the
 * image's data.qcow2; start defines and starts a transient domain named
 * al-svc-<job id> (a PC: the image's kernel and initramfs, the overlay as
 * /dev/vda, one virtio NIC on the tier's network, the agent's virtio-serial
 * channel on a unix socket); the guest agent (service mode) configures the
 * card by DHCP, says ready, takes the job and starts it as uid 1000. The job
 * is ready when its address is in libvirt's lease table and every port of
 * the tier's policy accepts a TCP connection (not when a lease exists:
 * leases can be stale); the result (ok) names the VM, its address, ports
 * and lease end. The worker records the lease in Redis; the scheduler ends
 * it (destroys the domain and removes the overlay) when it expires or is
 * stopped, and reconciles libvirt's domains with Redis.
 *
 * A job that fails before it is ready leaves nothing: the domain is
 * destroyed (transient: it is gone) and the overlay and socket removed.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../common/cleanup.h"
#include "../../proto/buf.h"
#include "../../common/log.h"
#include "../../proto/keys.h"
#include "../backend.h"
#include "../jobfs.h"
#include "../jobspec.h"
#include "../vmchan.h"
#include "../microvm/vmm.h"
#include "domxml.h"
#include "lvhost.h"
#include "../../common/clock.h"

#define MIB		   (1024ull * 1024ull)
#define GUEST_OVERHEAD_MIB 128
#define TICK_MS		   100
#define AL_PORTS_TEXT	   64
#define DEFAULT_GUEST	   AL_IMAGES_DIR "/microvm"

static struct {
	const struct al_backend_conf *conf;
	virConnectPtr conn;
	char dir[PATH_MAX]; /* <state>/<worker>/vm: overlays, sockets, base copies */
	char qemu_img[PATH_MAX];
	bool kvm;
	uint64_t tsc_khz;
} G;

enum vm_state { VM_BOOTING, VM_STARTING, VM_PROBING };

struct vm_sb {
	char name[AL_ID_MAX + 16];
	char disk[PATH_MAX], sock[PATH_MAX], base[PATH_MAX], hash[80];
	char image[PATH_MAX]; /* the catalogue image's block image, read-only ("" = none) */
	char image_hash[80];  /* its content hash */
	virDomainPtr dom;
	int chan_fd, timer_fd, probe_fd;
	unsigned probe_port; /* index into spec.ports */
	struct al_chan_rd rd;
	enum vm_state state;
	char ip[INET_ADDRSTRLEN];
	char mac[18];
	char reserved[INET_ADDRSTRLEN]; /* the DHCP host entry we added, or "" */
	uint64_t start_ms;
	int egress_fd;	     /* network egress: the proxy's socket, until the worker takes it */
	char proxy_ip[16];   /* ...on the network's own address */
	unsigned proxy_port; /* ...and a port of its own */
	char proxy_url[64];  /* http://proxy_ip:proxy_port, in the job's environment */
	unsigned name_hash;  /* FNV-1a of the name: the MAC, where the address search starts */
	bool keep;	     /* ready: the VM outlives the job */
};

static void quiet(void *data, virErrorPtr e)
{
	(void)data;
	(void)e;
}

/* libvirt's last error, for messages. */
static const char *lv_err(void)
{
	virErrorPtr e = virGetLastError();

	return e && e->message ? e->message : "unknown libvirt error";
}

static int copy_file(const char *from, const char *to)
{
	char tmp[PATH_MAX + 8], buf[1 << 16];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n = 0;

	if (al_pathf(tmp, sizeof(tmp), "%s.new", to)) {
		al_closep(&in);
		return AL_ESYS;
	}
	out = in >= 0 ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
	while (out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			n = -1;
			break;
		}
	al_closep(&in);
	if (out >= 0 && close(out) == 0 && n == 0 && rename(tmp, to) == 0)
		return 0;
	unlink(tmp);
	return AL_ESYS;
}

/* The image's files, copied once per worker and image content: libvirt
 * chowns what it boots, so it never gets the image itself. */
static int base_copy(struct vm_sb *v, const char *image, struct al_err *err)
{
	static const char *const files[] = {"vmlinux", "initramfs.lz4", "data.qcow2"};
	char p[PATH_MAX + 32], q[PATH_MAX + 32], h[16];

	snprintf(p, sizeof(p), "%s/.airlock-image", image);
	if (!al_read_text(p, v->hash, sizeof(v->hash)))
		snprintf(v->hash, sizeof(v->hash), "unhashed");
	v->hash[strcspn(v->hash, "\n")] = '\0';
	/* the hash names the copy; unhashed images are copied per job */
	snprintf(h, sizeof(h), "%.12s", strncmp(v->hash, "sha256:", 7) ? v->name : v->hash + 7);
	if (al_pathf(v->base, sizeof(v->base), "%s/base-%s", G.dir, h) ||
	    (mkdir(v->base, 0755) && errno != EEXIST))
		return al_err_sys(err, "vm: mkdir %s", v->base);
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", image, files[i]);
		snprintf(q, sizeof(q), "%s/%s", v->base, files[i]);
		if (access(q, F_OK) == 0)
			continue;
		if (access(p, R_OK))
			return al_err_set(err, AL_ESANDBOX,
					  "vm: image %s has no %s: run `make microvm-image` (the "
					  "service VM template uses the same image)",
					  image, files[i]);
		if (copy_file(p, q))
			return al_err_sys(err, "vm: copy %s", p);
	}
	return AL_OK;
}

/* Inbound ports are the policy's: an nwfilter on every service VM's card
 * (ebtables, so it needs no bridge netfilter) lets in TCP to $PORT (a list)
 * and the replies to it, DHCP and ARP, and drops every other IPv4 and IPv6
 * packet either way. A tier granted egress gets the same filter plus TCP to
 * its VM's egress proxy ($PROXY_IP:$PROXY_PORT, the network's own address)
 * and the replies from it: nothing else leaves the VM. */
#define NWFILTER	"airlock-service"
#define NWFILTER_EGRESS "airlock-service-egress"
#define FILTER_PORTS                                                                               \
	"<rule action='accept' direction='inout' priority='100'><arp/></rule>"                     \
	"<rule action='accept' direction='out' priority='200'>"                                    \
	"<ip protocol='udp' srcportstart='68' dstportstart='67'/></rule>"                          \
	"<rule action='accept' direction='in' priority='200'>"                                     \
	"<ip protocol='udp' srcportstart='67' dstportstart='68'/></rule>"                          \
	"<rule action='accept' direction='in' priority='300'>"                                     \
	"<ip protocol='tcp' dstportstart='$PORT'/></rule>"                                         \
	"<rule action='accept' direction='out' priority='300'>"                                    \
	"<ip protocol='tcp' srcportstart='$PORT'/></rule>"
#define FILTER_DROP                                                                                \
	"<rule action='drop' direction='inout' priority='900'><ip/></rule>"                        \
	"<rule action='drop' direction='inout' priority='901'><ipv6/></rule>"
static const char nwfilter_xml[] =
    "<filter name='" NWFILTER "' chain='root'>" FILTER_PORTS FILTER_DROP "</filter>";
static const char nwfilter_egress_xml[] =
    "<filter name='" NWFILTER_EGRESS "' chain='root'>" FILTER_PORTS
    "<rule action='accept' direction='out' priority='400'>"
    "<ip protocol='tcp' dstipaddr='$PROXY_IP' dstportstart='$PROXY_PORT'/></rule>"
    "<rule action='accept' direction='in' priority='400'>"
    "<ip protocol='tcp' srcipaddr='$PROXY_IP' srcportstart='$PROXY_PORT'/></rule>" FILTER_DROP
    "</filter>";

static int define_filter(struct al_err *err)
{
	const char *const xml[] = {nwfilter_xml, nwfilter_egress_xml};

	for (int i = 0; i < 2; i++) {
		virNWFilterPtr f = virNWFilterDefineXML(G.conn, xml[i]);

		if (!f)
			return al_err_set(err, AL_ESANDBOX,
					  "vm: cannot define the ports filter (libvirt's nwfilter "
					  "driver): %s",
					  lv_err());
		virNWFilterFree(f);
	}
	return AL_OK;
}

static int vm_init(const struct al_backend_conf *conf, struct al_err *err)
{
	const char *uri = conf->libvirt_uri ? conf->libvirt_uri : "qemu:///system";
	struct al_err why = {0};
	gid_t gid;

	if (G.conn)
		virConnectClose(G.conn);
	memset(&G, 0, sizeof(G));
	G.conf = conf;
	virSetErrorFunc(NULL, quiet);
	if (!al_find_exec("qemu-img", G.qemu_img, sizeof(G.qemu_img)))
		return al_err_set(err, AL_ESANDBOX, "vm: qemu-img not found (install qemu-utils)");
	G.conn = virConnectOpen(uri);
	if (!G.conn)
		return al_err_set(err, AL_ESANDBOX, "vm: cannot connect to libvirt at %s: %s", uri,
				  lv_err());
	snprintf(G.dir, sizeof(G.dir), "%s/%s/vm", conf->state_dir, conf->worker_id);
	if (al_mkdir_p(G.dir, 0711))
		return al_err_sys(err, "vm: mkdir %s", G.dir);
	if (define_filter(err))
		return AL_ESANDBOX;
	/* libvirt's QEMU user must reach the overlays, sockets and copies */
	chmod(G.dir, 0755);
	G.kvm = al_kvm_usable(&gid, &why);
	al_log("info", "vm_accel", "accel=%s%s%s", G.kvm ? "kvm" : "tcg",
	       G.kvm ? "" : " why=", G.kvm ? "" : why.msg);
	G.tsc_khz = G.kvm ? 0 : al_host_tsc_khz();
	return AL_OK;
}

/* A crashed run's files whose domain is gone (a leased VM keeps its own). */
static int vm_sweep(const struct al_backend_conf *conf, struct al_err *err)
{
	char path[PATH_MAX + 300];
	struct dirent *e;
	DIR *d = opendir(G.dir);

	(void)conf;
	(void)err;
	while (d && (e = readdir(d))) {
		char name[300];
		virDomainPtr dom;
		size_t l = strlen(e->d_name);

		if (strncmp(e->d_name, AL_VM_NAME_PREFIX, strlen(AL_VM_NAME_PREFIX)) || l < 6 ||
		    l >= sizeof(name))
			continue;
		snprintf(name, sizeof(name), "%s", e->d_name);
		name[strcspn(name, ".")] = '\0';
		dom = virDomainLookupByName(G.conn, name);
		if (dom) {
			virDomainFree(dom);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", G.dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	return AL_OK;
}

/* Network egress: the VM's proxy listens on the network's own address (the
 * host's side of the bridge), on a port of its own that the VM's filter
 * names; the job's environment points there. */
static int egress_listen(struct al_sandbox *sb, struct al_err *err)
{
	struct vm_sb *v = sb->priv;
	const char *netname = sb->spec.vm_network ? sb->spec.vm_network : "airlock";
	virNetworkPtr net = virNetworkLookupByName(G.conn, netname);
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	bool have = net && al_lv_net_address(net, v->proxy_ip);

	if (net)
		virNetworkFree(net);
	if (!have)
		return al_err_set(err, AL_ESANDBOX,
				  "vm: network %s has no IPv4 address of the host's for the egress "
				  "proxy",
				  netname);
	inet_pton(AF_INET, v->proxy_ip, &sin.sin_addr);
	if ((v->egress_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0 ||
	    bind(v->egress_fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(v->egress_fd, 128) ||
	    getsockname(v->egress_fd, (struct sockaddr *)&sin, &len))
		return al_err_sys(err, "vm: listen for the egress proxy on %s", v->proxy_ip);
	v->proxy_port = ntohs(sin.sin_port);
	snprintf(v->proxy_url, sizeof(v->proxy_url), "http://%s:%u", v->proxy_ip, v->proxy_port);
	sb->spec.proxy_url = v->proxy_url;
	return AL_OK;
}

static int vm_prepare(struct al_sandbox *sb, struct al_err *err)
{
	struct vm_sb *v = sb->priv;
	const char *image = sb->spec.guest ? sb->spec.guest : DEFAULT_GUEST;
	char backing[PATH_MAX + 16];
	virDomainPtr old;
	int rc;

	v->chan_fd = v->timer_fd = v->probe_fd = v->egress_fd = -1;
	if (!G.conn)
		return al_err_set(err, AL_ESANDBOX, "vm: backend not initialised");
	if (sb->spec.network == AL_NET_EGRESS && (rc = egress_listen(sb, err)))
		return rc;
	/* Ids may hold ':' and '.'; domain and file names get '-' instead. */
	snprintf(v->name, sizeof(v->name), "%s%s", AL_VM_NAME_PREFIX, sb->spec.job->id);
	for (char *c = v->name; *c; c++)
		if (*c == ':' || *c == '.')
			*c = '-';
	if (al_pathf(v->disk, sizeof(v->disk), "%s/%s.qcow2", G.dir, v->name) ||
	    al_pathf(v->sock, sizeof(v->sock), "%s/%s.sock", G.dir, v->name) ||
	    strlen(v->sock) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return al_err_set(err, AL_ESANDBOX, "vm: socket path too long: %s", v->sock);
	/* An earlier attempt of this job that never became ready (its worker
	 * died): its domain is ours to replace. */
	if ((old = virDomainLookupByName(G.conn, v->name))) {
		virDomainDestroy(old);
		virDomainFree(old);
	}
	unlink(v->sock);
	v->name_hash = 2166136261u;
	for (const char *c = v->name; *c; c++)
		v->name_hash = (v->name_hash ^ (unsigned char)*c) * 16777619u;
	snprintf(v->mac, sizeof(v->mac), "52:54:00:%02x:%02x:%02x", (v->name_hash >> 16) & 0xff,
		 (v->name_hash >> 8) & 0xff, v->name_hash & 0xff);
	if ((rc = base_copy(v, image, err)))
		return rc;
	/* The catalogue image: shared read-only by every VM that boots it;
	 * libvirt must not relabel it (domain_xml says so), only read it. */
	if (sb->spec.image) {
		if ((rc = al_image_path(sb->conf, sb->spec.image, true, v->image, sizeof(v->image),
					err)))
			return al_err_wrap(err, "vm");
		al_image_hash(sb->conf, sb->spec.image, v->image_hash, sizeof(v->image_hash));
	}
	snprintf(backing, sizeof(backing), "%s/data.qcow2", v->base);
	{
		const char *argv[] = {G.qemu_img, "create", "-q",    "-f",    "qcow2", "-F",
				      "qcow2",	  "-b",	    backing, v->disk, NULL};

		if (al_spawn_wait(argv, NULL))
			return al_err_set(err, AL_ESANDBOX, "vm: qemu-img create %s failed",
					  v->disk);
	}
	return AL_OK;
}

static char *domain_xml(const struct al_sandbox *sb)
{
	const struct vm_sb *v = sb->priv;
	const struct al_run_spec *s = &sb->spec;
	unsigned vcpus = (unsigned)((s->cpu_millis + 999) / 1000);
	char kernel[PATH_MAX + 16], initrd[PATH_MAX + 16], cmdline[256], tsc[48] = "";
	char console[PATH_MAX + AL_ID_MAX + 32] = "";

	if (!G.kvm && G.tsc_khz)
		snprintf(tsc, sizeof(tsc), " tsc_early_khz=%llu", (unsigned long long)G.tsc_khz);
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", v->base);
	snprintf(initrd, sizeof(initrd), "%s/initramfs.lz4", v->base);
	/* no default route: the proxy is on-link */
	snprintf(cmdline, sizeof(cmdline),
		 "console=ttyS0 %s panic=-1 reboot=t rdinit=/init cryptomgr.notests"
		 " airlock.mode=service%s%s%s",
		 G.conf->vm_console ? "loglevel=4" : "quiet", G.kvm ? "" : " tsc=reliable", tsc,
		 v->image[0] ? " airlock.image=1" : "");
	if (G.conf->vm_console)
		snprintf(console, sizeof(console), "%s.%s", G.conf->vm_console, v->name);
	return al_vm_domain_xml(&(struct al_vm_domain){
	    .type = G.kvm ? "kvm" : "qemu",
	    .name = v->name,
	    .memory_mib = (s->limits.memory_bytes + MIB - 1) / MIB + GUEST_OVERHEAD_MIB,
	    .vcpus = vcpus < 1 ? 1 : vcpus,
	    .kernel = kernel,
	    .initrd = initrd,
	    .cmdline = cmdline,
	    .host_cpu = G.kvm,
	    .disk = v->disk,
	    .image = v->image[0] ? v->image : NULL,
	    .network = s->vm_network ? s->vm_network : "airlock",
	    .mac = v->mac,
	    .filter = v->egress_fd >= 0 ? NWFILTER_EGRESS : NWFILTER,
	    .proxy_ip = v->egress_fd >= 0 ? v->proxy_ip : NULL,
	    .proxy_port = v->proxy_port,
	    .ports = s->ports,
	    .nports = s->nports,
	    .channel_sock = v->sock,
	    .channel_name = AL_CHAN_PORT,
	    .console = console[0] ? console : NULL,
	});
}

/* A reserved address: a DHCP host entry (MAC -> IP) in the tier's network,
 * so that the guest gets its address at the first request and we know it
 * before it boots. The address is the first free one in the network's DHCP
 * range from a place given by the VM's name. Without a range (or when the
 * update is refused) the VM takes a dynamic lease. */
static void reserve_address(struct al_sandbox *sb)
{
	struct vm_sb *v = sb->priv;
	const char *netname = sb->spec.vm_network ? sb->spec.vm_network : "airlock";
	virNetworkPtr net = virNetworkLookupByName(G.conn, netname);
	uint32_t lo = 0, hi = 0;

	if (net && al_lv_net_range(net, &lo, &hi))
		for (uint32_t k = 0; k <= hi - lo; k++) {
			struct in_addr a = {htonl(lo + (v->name_hash + k) % (hi - lo + 1))};
			char ip[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &a, ip, sizeof(ip));
			if (al_lv_net_ip_taken(net, ip))
				continue;
			if (al_lv_net_host(net, true, v->mac, ip) == 0) {
				snprintf(v->reserved, sizeof(v->reserved), "%s", ip);
				break;
			}
		}
	if (net)
		virNetworkFree(net);
}

static void release_address(const struct al_sandbox *sb)
{
	const struct vm_sb *v = sb->priv;
	virNetworkPtr net;

	if (!v->reserved[0])
		return;
	net = virNetworkLookupByName(G.conn, sb->spec.vm_network ? sb->spec.vm_network : "airlock");
	if (net) {
		al_lv_net_host(net, false, v->mac, v->reserved);
		virNetworkFree(net);
	}
}

/* Benchmarks: keep the domain XML and the job frame for a bare run. */
static void keep_copy(const char *path, const char *suffix, const void *p, size_t n)
{
	char file[PATH_MAX];
	FILE *f;

	if (al_pathf(file, sizeof(file), "%s%s", path, suffix) || !(f = fopen(file, "we")))
		return;
	fwrite(p, 1, n, f);
	fclose(f);
}

static int vm_start(struct al_sandbox *sb, struct al_watch *w, struct al_err *err)
{
	struct vm_sb *v = sb->priv;
	struct itimerspec it = {{0, TICK_MS * 1000000}, {0, TICK_MS * 1000000}};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char *xml;

	v->start_ms = al_now_ms();
	reserve_address(sb);
	xml = domain_xml(sb);
	if (!xml)
		return al_err_set(err, AL_ESANDBOX, "vm: out of memory");
	if (G.conf->bundle_copy)
		keep_copy(G.conf->bundle_copy, "", xml, strlen(xml));
	v->dom = virDomainCreateXML(G.conn, xml, 0);
	free(xml);
	if (!v->dom)
		return al_err_set(err, AL_ESANDBOX, "vm: libvirt could not start %s: %s", v->name,
				  lv_err());
	/* QEMU made the channel's socket before the domain started. */
	memcpy(sa.sun_path, v->sock, strlen(v->sock) + 1); /* length checked in prepare */
	v->chan_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (v->chan_fd < 0 || connect(v->chan_fd, (struct sockaddr *)&sa, sizeof(sa)))
		return al_err_sys(err, "vm: connect to %s", v->sock);
	v->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (v->timer_fd < 0 || timerfd_settime(v->timer_fd, 0, &it, NULL))
		return al_err_sys(err, "vm: timerfd");
	w->fds[w->nfds++] = v->chan_fd;
	w->fds[w->nfds++] = v->timer_fd;
	/* the worker's proxy now, serving as long as the VM may live */
	w->egress_fd = v->egress_fd;
	w->egress_keep_ms =
	    sb->spec.max_lease_ms > sb->spec.lease_ms ? sb->spec.max_lease_ms : sb->spec.lease_ms;
	v->egress_fd = -1;
	return AL_OK;
}

static int vm_kill(struct al_sandbox *sb, struct al_err *err)
{
	struct vm_sb *v = sb->priv;

	(void)err;
	if (v->dom && !v->keep)
		virDomainDestroy(v->dom);
	return AL_OK;
}

/* The VM's IPv4 address from libvirt's lease table ("" until it has one). */
static void lease_ip(struct vm_sb *v)
{
	virDomainInterfacePtr *ifs = NULL;
	int n =
	    virDomainInterfaceAddresses(v->dom, &ifs, VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE, 0);

	for (int i = 0; i < n; i++) {
		for (unsigned k = 0; k < ifs[i]->naddrs && !v->ip[0]; k++)
			if (ifs[i]->addrs[k].type == VIR_IP_ADDR_TYPE_IPV4 && ifs[i]->addrs[k].addr)
				snprintf(v->ip, sizeof(v->ip), "%s", ifs[i]->addrs[k].addr);
		virDomainInterfaceFree(ifs[i]);
	}
	free(ifs);
}

/* One step of the readiness probe: 1 when every port accepted a TCP
 * connection, 0 not yet. Non-blocking: a connect in progress is looked at
 * on the next tick. */
static int probe(struct al_sandbox *sb)
{
	struct vm_sb *v = sb->priv;

	if (!v->ip[0])
		lease_ip(v);
	if (!v->ip[0])
		return 0;
	while (v->probe_port < sb->spec.nports) {
		if (v->probe_fd >= 0) {
			struct pollfd p = {.fd = v->probe_fd, .events = POLLOUT};
			int e = 1;
			socklen_t el = sizeof(e);

			if (poll(&p, 1, 0) == 0)
				return 0; /* still connecting */
			getsockopt(v->probe_fd, SOL_SOCKET, SO_ERROR, &e, &el);
			close(v->probe_fd);
			v->probe_fd = -1;
			if (e)
				return 0; /* refused: try again next tick */
			v->probe_port++;
			continue;
		}
		{
			struct sockaddr_in a = {.sin_family = AF_INET,
						.sin_port = htons(sb->spec.ports[v->probe_port])};

			inet_pton(AF_INET, v->ip, &a.sin_addr);
			v->probe_fd =
			    socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
			if (v->probe_fd < 0)
				return 0;
			if (connect(v->probe_fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
				close(v->probe_fd);
				v->probe_fd = -1;
				v->probe_port++;
			}
		}
	}
	return 1;
}

static void ready_result(struct al_sandbox *sb, struct al_result *res)
{
	struct vm_sb *v = sb->priv;
	char ports[AL_PORTS_TEXT], n[32];
	size_t l = 0;

	ports[0] = '\0';
	for (size_t i = 0; i < sb->spec.nports && l < sizeof(ports) - 8; i++)
		l += (size_t)snprintf(ports + l, sizeof(ports) - l, "%s%u", i ? "," : "",
				      (unsigned)sb->spec.ports[i]);
	res->status = AL_ST_OK;
	al_result_add_info(res, "vm_name", v->name);
	al_result_add_info(res, "vm_ip", v->ip);
	al_result_add_info(res, "ports", ports);
	al_result_add_info(res, "image", v->image[0] ? v->image_hash : v->hash);
	al_result_add_info(res, "accel", G.kvm ? "kvm" : "tcg");
	al_result_add_info(res, "address", v->reserved[0] ? "reserved" : "dynamic");
	/* The lease runs from readiness; its maximum from creation. */
	snprintf(n, sizeof(n), "%llu", (unsigned long long)(al_now_ms() + sb->spec.lease_ms));
	al_result_add_info(res, "lease_expires_ms", n);
	snprintf(n, sizeof(n), "%llu", (unsigned long long)(v->start_ms + sb->spec.max_lease_ms));
	al_result_add_info(res, "lease_max_ms", n);
	snprintf(n, sizeof(n), "%llu", (unsigned long long)(al_now_ms() - v->start_ms));
	al_result_add_info(res, "ready_ms", n);
	v->keep = true;
}

static int vm_reap(struct al_sandbox *sb, struct al_result *res, struct al_err *err)
{
	struct vm_sb *v = sb->priv;
	uint64_t ticks;
	int rc, active;

	if (read(v->timer_fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		return al_err_sys(err, "vm: timerfd");
	/* a bounded number of frames per pass: the guest cannot hold the loop */
	for (int frames = 0; v->state != VM_PROBING && frames < 64; frames++) {
		rc = al_chan_read(&v->rd, v->chan_fd,
				  v->state == VM_BOOTING ? AL_CHAN_READY_MAX : AL_CHAN_RESULT_SLACK,
				  err);
		if (rc == 0)
			break;
		if (rc < 0) {
			char why[sizeof(err->msg)];

			snprintf(why, sizeof(why), "%s", err->msg);
			return al_err_set(err, AL_ESANDBOX, "vm: the guest's channel failed: %s",
					  why);
		}
		if (v->state == VM_BOOTING && v->rd.body.data[0] == AL_CHAN_READY) {
			struct al_buf frame = {0};

			al_chan_rd_reset(&v->rd);
			rc = al_chan_job_frame(&sb->spec, sb->conf->collect_max_bytes, &frame, err);
			if (rc == AL_OK && G.conf->bundle_copy)
				keep_copy(G.conf->bundle_copy, ".job", frame.data, frame.len);
			if (rc == AL_OK)
				rc =
				    al_chan_write_raw(v->chan_fd, frame.data, frame.len, 5000, err);
			al_buf_free(&frame);
			if (rc)
				return rc;
			v->state = VM_STARTING;
		} else if (v->state == VM_STARTING && v->rd.body.data[0] == AL_CHAN_RESULT) {
			struct al_result g = {0};
			struct al_err e = {0};

			rc = al_result_decode(v->rd.body.data + 1, v->rd.body.len - 1, &g, &e);
			if (rc || g.status != AL_ST_OK) {
				al_err_set(err, AL_ESANDBOX,
					   "vm: the guest could not start the service: %s",
					   rc	     ? e.msg
					   : g.error ? g.error
						     : al_status_name(g.status));
				al_result_free(&g);
				return AL_ESANDBOX;
			}
			al_result_free(&g);
			/* the channel has done its work; the service runs on */
			v->state = VM_PROBING;
		} else if (v->rd.body.data[0] != AL_CHAN_HEARTBEAT) {
			return al_err_set(err, AL_ESANDBOX, "vm: unexpected frame from the guest");
		} else {
			al_chan_rd_reset(&v->rd);
		}
	}
	if (v->state == VM_PROBING) {
		/* Nothing more should come; the end of the channel is the VM's. */
		char junk[512];
		ssize_t n;

		n = -1;
		for (int k = 0; k < 64 && (n = read(v->chan_fd, junk, sizeof(junk))) > 0; k++)
			; /* bounded: a chatty guest cannot hold the loop */
		if (n == 0)
			return al_err_set(err, AL_ESANDBOX, "vm: %s stopped before it was ready",
					  v->name);
	}
	active = virDomainIsActive(v->dom);
	if (active == 0)
		return al_err_set(err, AL_ESANDBOX,
				  "vm: %s stopped before it was ready (guest panic or VMM crash)",
				  v->name);
	if (v->state == VM_PROBING && probe(sb)) {
		ready_result(sb, res);
		return 1;
	}
	return 0;
}

static void vm_destroy(struct al_sandbox *sb)
{
	struct vm_sb *v = sb->priv;

	al_closep(&v->chan_fd);
	al_closep(&v->timer_fd);
	al_closep(&v->probe_fd);
	al_closep(&v->egress_fd);
	v->egress_fd = -1;
	al_chan_rd_free(&v->rd);
	if (!v->keep) {
		/* Not ready (failed, timed out, cancelled): nothing of it stays. */
		if (v->dom)
			virDomainDestroy(v->dom);
		if (v->disk[0])
			unlink(v->disk);
		release_address(sb);
	}
	if (v->sock[0])
		unlink(v->sock);
	if (v->dom)
		virDomainFree(v->dom);
	v->dom = NULL;
	v->chan_fd = v->timer_fd = v->probe_fd = -1;
}

static void vm_fini(void)
{
	if (G.conn)
		virConnectClose(G.conn);
	G.conn = NULL;
}

static const char *vm_accel(void)
{
	return G.kvm ? "kvm" : "tcg";
}

const struct al_backend_ops al_backend_vm = {
    .name = "vm",
    .caps = AL_CAPS_VM,
    .priv_size = sizeof(struct vm_sb),
    .init = vm_init,
    .sweep = vm_sweep,
    .prepare = vm_prepare,
    .start = vm_start,
    .kill = vm_kill,
    .reap = vm_reap,
    .destroy = vm_destroy,
    .fini = vm_fini,
    .accel = vm_accel,
};
