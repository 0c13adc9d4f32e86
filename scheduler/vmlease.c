/* vmlease.c - the scheduler's side of service VMs (see vmlease.h). */
#include "vmlease.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "../backends/vm/lvhost.h"
#include "../proto/contract.h"
#include "../proto/keys.h"
#include "../common/clock.h"

struct sc_vmlease {
	virConnectPtr conn;
	struct al_aconn *cmd;
	uint64_t ttl_ms;
};

static void quiet(void *data, virErrorPtr e)
{
	(void)data;
	(void)e;
}

struct sc_vmlease *sc_vmlease_new(const char *uri, struct al_aconn *cmd, uint64_t ttl_ms,
				  struct al_err *err)
{
	struct sc_vmlease *v = calloc(1, sizeof(*v));

	if (!v) {
		al_err_set(err, AL_ENOMEM, "out of memory");
		return NULL;
	}
	virSetErrorFunc(NULL, quiet);
	v->conn = virConnectOpen(uri);
	if (!v->conn) {
		virErrorPtr e = virGetLastError();

		al_err_set(err, AL_ESANDBOX, "cannot connect to libvirt at %s: %s", uri,
			   e && e->message ? e->message : "unknown error");
		free(v);
		return NULL;
	}
	v->cmd = cmd;
	v->ttl_ms = ttl_ms;
	return v;
}

void sc_vmlease_free(struct sc_vmlease *v)
{
	if (!v)
		return;
	virConnectClose(v->conn);
	free(v);
}

/* Remove the DHCP host entry (reserved address) the worker added for mac. */
static void release_host(struct sc_vmlease *v, const char *netname, const char *mac)
{
	virNetworkPtr net = netname[0] && mac[0] ? virNetworkLookupByName(v->conn, netname) : NULL;
	char ip[16];

	if (net && al_lv_net_host_ip(net, mac, ip))
		al_lv_net_host(net, false, mac, ip);
	if (net)
		virNetworkFree(net);
}

/* Destroy a domain of ours and remove its overlay disk: the disk path comes
 * from libvirt (never from Redis), and only a file named after the domain
 * is removed. */
static void destroy_domain(struct sc_vmlease *v, const char *name, const char *why)
{
	struct al_lv_domain facts;
	char *disk = facts.disk, *mac = facts.mac, *net = facts.net;
	virDomainPtr d;

	if (strncmp(name, AL_VM_NAME_PREFIX, strlen(AL_VM_NAME_PREFIX)))
		return; /* never a domain Airlock did not make */
	d = virDomainLookupByName(v->conn, name);
	if (!d)
		return;
	al_lv_domain_facts(d, &facts, NULL);
	virDomainDestroy(d);
	virDomainFree(d);
	release_host(v, net, mac);
	if (disk[0]) {
		const char *base = strrchr(disk, '/');
		size_t nl = strlen(name);

		base = base ? base + 1 : disk;
		if (!strncmp(base, name, nl) && !strcmp(base + nl, ".qcow2"))
			unlink(disk);
	}
	al_log("info", "vm_end", "vm=%s reason=\"%s\"%s%s", name, why, disk[0] ? " disk=" : "",
	       disk);
}

static void on_due(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sc_vmlease *v = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return;
	for (size_t i = 0; i < r->elements; i++)
		if (r->element[i]->type == REDIS_REPLY_STRING)
			destroy_domain(v, r->element[i]->str, "lease ended");
}

void sc_vmlease_tick(struct sc_vmlease *v, uint64_t now_ms)
{
	struct al_call c;

	al_vm_end_due_call(&c, now_ms, v->ttl_ms);
	al_aconn_send(v->cmd, &c, on_due, v);
	al_call_free(&c);
}

static bool in_reply(const redisReply *r, const char *name)
{
	for (size_t i = 0; i < r->elements; i++)
		if (r->element[i]->type == REDIS_REPLY_STRING && !strcmp(r->element[i]->str, name))
			return true;
	return false;
}

static void on_leases(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sc_vmlease *v = priv;
	redisReply *r = reply;
	virDomainPtr *doms = NULL;
	int n;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return;
	n = virConnectListAllDomains(v->conn, &doms, 0);
	/* A domain of ours without a lease: nobody will ever end it. */
	for (int i = 0; i < n; i++) {
		const char *name = virDomainGetName(doms[i]);

		if (name && !strncmp(name, AL_VM_NAME_PREFIX, strlen(AL_VM_NAME_PREFIX)) &&
		    !in_reply(r, name))
			destroy_domain(v, name, "no lease in Redis (found at start-up)");
	}
	/* A lease whose domain is gone: end it, saying so. */
	for (size_t k = 0; k < r->elements; k++) {
		virDomainPtr d;
		const char *name = r->element[k]->str;

		if (r->element[k]->type != REDIS_REPLY_STRING)
			continue;
		d = virDomainLookupByName(v->conn, name);
		if (d) {
			virDomainFree(d);
			continue;
		}
		{
			struct al_call c;

			al_vm_end_one_call(
			    &c, name, "its domain vanished (found by the scheduler at start-up)",
			    al_now_ms(), v->ttl_ms);
			al_aconn_send(v->cmd, &c, NULL, NULL);
			al_call_free(&c);
		}
		al_log("warn", "vm_vanished", "vm=%s", name);
	}
	for (int i = 0; i < n; i++)
		virDomainFree(doms[i]);
	free(doms);
}

void sc_vmlease_reconcile(struct sc_vmlease *v)
{
	const char *argv[] = {"ZRANGE", AL_KEY_VM_LEASES, "0", "-1"};

	al_aconn_cmd(v->cmd, on_leases, v, 4, argv, NULL);
}
