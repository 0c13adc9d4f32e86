/* domxml.h - a service VM's libvirt domain XML, built with libxml2's tree
 * API, so that every value (the operator's network name, console path,
 * image path; the VM's name) is escaped by the library, never pasted into
 * markup. No I/O. */
#ifndef AL_DOMXML_H
#define AL_DOMXML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct al_vm_domain {
	const char *type;      /* "kvm" or "qemu" (TCG) */
	const char *name;      /* the domain's name (al-svc-<job id>) */
	uint64_t memory_mib;   /* guest memory, MiB */
	unsigned vcpus;	       /* at least 1 */
	const char *kernel;    /* path of the uncompressed kernel */
	const char *initrd;    /* path of the initramfs */
	const char *cmdline;   /* the kernel's command line */
	bool host_cpu;	       /* KVM: host-passthrough; TCG: qemu64 with rdrand */
	const char *disk;      /* the VM's own qcow2 overlay (vda) */
	const char *image;     /* the catalogue image's raw block image (vdb, read only,
				  never relabelled), or NULL */
	const char *network;   /* the libvirt network of its interface */
	const char *mac;       /* its MAC address */
	const char *filter;    /* the nwfilter on its interface */
	const char *proxy_ip;  /* egress: the proxy's address (PROXY_IP), or NULL */
	unsigned proxy_port;   /* ...and port (PROXY_PORT) */
	const uint16_t *ports; /* the ports opened to it (PORT each; none: PORT 0) */
	size_t nports;
	const char *channel_sock; /* the host side of its virtio channel (a unix socket) */
	const char *channel_name; /* the channel's name in the guest */
	const char *console;	  /* a file the serial console appends to, or NULL (none) */
};

/* The domain's XML document; malloc'd (the caller frees), NULL when out of
 * memory (never a part of a document). */
char *al_vm_domain_xml(const struct al_vm_domain *d);

#endif
