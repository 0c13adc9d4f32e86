#!/usr/bin/python3
"""The service-VM backend with a real libvirtd (started here, with its state
under a temporary folder, inside a network namespace made here: the bridge,
dnsmasq and every VM address exist only there), through the real queue: a
service VM whose guest runs a tiny HTTP server is reached on its reported
address; a second VM gets another address; `airlock vm extend` stops at the
policy's maximum; `airlock vm stop` removes the VM and its disk; an expired
lease removes it; a scheduler restart reconciles libvirt with Redis; the VM
cannot reach the host's loopback services or the Redis socket and, without
egress, has no route out; a service that never listens times out and leaves
nothing."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import msgpack

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import CLI, Tap, skip_unless  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import policy, tier_def  # noqa: E402

t = Tap()
IMAGE = os.environ.get("AIRLOCK_MICROVM_IMAGE", "/var/lib/airlock/images/microvm")
skip_unless(os.geteuid() == 0 and os.access("/usr/sbin/libvirtd", os.X_OK),
            "needs root and libvirtd")
if not os.path.exists(os.path.join(IMAGE, "data.qcow2")):
    t.ok(False, "the VM image exists (make microvm-image; tests/run.sh builds it)", IMAGE)
    sys.exit(t.done())
from libvirtns import LibvirtNS  # noqa: E402

IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
if not os.path.exists(os.path.join(IMAGES, "python.ext4")):
    t.ok(False, "the python image exists (make images; tests/run.sh builds it)", IMAGES)
    sys.exit(t.done())
with open(os.path.join(IMAGES, "python", ".airlock-image")) as f:
    PY_HASH = f.read().strip()

VM_DEFAULTS = {"wall_ms": 90000, "memory_bytes": 134217728}
POLICY = policy(
    tier_def("service", "vm", image="python", ports=[8080], vm_lease_ms=300000,
             vm_max_lease_ms=600000, defaults=VM_DEFAULTS),
    tier_def("brief", "vm", image="python", ports=[8080], vm_lease_ms=4000, defaults=VM_DEFAULTS),
    tier_def("outbound", "vm", image="python", ports=[8080], vm_lease_ms=300000,
             egress={"allow": ["10.233.7.0/24:8000"]}, defaults=VM_DEFAULTS),
    tier_def("deaf", "vm", image="python", ports=[8080], defaults=dict(VM_DEFAULTS, wall_ms=15000)))

# The end of each service: serve `body` (its findings) on 8080; /again runs
# `again()` first when the service defines it.
SERVE = r"""
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        extra = globals()['again']().encode() if self.path == '/again' and 'again' in globals() else b''
        self.send_response(200); self.end_headers(); self.wfile.write(body + extra)
    def log_message(self, *a):
        pass
http.server.HTTPServer(('', 8080), H).serve_forever()
"""

# The service: probes what it can reach, then serves the findings over HTTP.
SERVICE = r"""
import http.server, os, socket, sys
host_port, sock_path, gateway = int(sys.argv[1]), sys.argv[2], sys.argv[3]
found = []
def probe(name, fam, addr):
    s = socket.socket(fam)
    s.settimeout(3)
    try:
        s.connect(addr); found.append('%s CONNECTED' % name)
    except OSError as e:
        found.append('%s blocked (%s)' % (name, e.strerror or e))
    finally:
        s.close()
probe('host-loopback', socket.AF_INET, ('127.0.0.1', host_port))
probe('gateway-loopback-port', socket.AF_INET, (gateway, host_port))
probe('outside', socket.AF_INET, ('10.254.254.254', 80))
found.append('redis-socket %s' % ('PRESENT' if os.path.exists(sock_path) else 'absent'))
routes = [l.split()[1] for l in open('/proc/net/route').read().splitlines()[1:]]
found.append('default-route %s' % ('YES' if '00000000' in routes else 'none'))
body = ('\n'.join(found) + '\n').encode()
import threading
extra = socket.socket(); extra.bind(('', 9090)); extra.listen(8)  # not in the policy's ports
threading.Thread(target=lambda: [extra.accept()[0].close() for _ in iter(int, 1)], daemon=True).start()
""" + SERVE

# A service on a tier with egress rules: what it reaches through the proxy
# (the test's server, on an address of the namespace), and what it cannot
# reach around it (the server directly, the network's own DNS server, a
# port of the proxy's address that is not the proxy's), served as findings.
EGRESS_SERVICE = r"""
import http.server, os, socket, sys, urllib.request
server, gateway = sys.argv[1], sys.argv[2]
found = ['proxy ' + os.environ.get('HTTP_PROXY', 'none')]
for url in ('http://%s:8000/hi.txt' % server, 'http://%s:8001/' % server):
    try:
        found.append('%s got %s' % (url, urllib.request.urlopen(url, timeout=10).read().decode().strip()))
    except Exception as e:
        found.append('%s failed %s' % (url, getattr(e, 'code', e)))
for name, addr in (('server-direct', (server, 8000)), ('gateway-dns-tcp', (gateway, 53))):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect(addr); found.append('%s CONNECTED' % name)
    except OSError as e:
        found.append('%s blocked (%s)' % (name, e.strerror or e))
    s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(2)
try:
    u.sendto(b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01a\x00\x00\x01\x00\x01', (gateway, 53))
    u.recv(512); found.append('gateway-dns-udp ANSWERED')
except OSError:
    found.append('gateway-dns-udp no answer')
body = ('\n'.join(found) + '\n').encode()
def again():  # after the result: the proxy serves on
    return 'again ' + urllib.request.urlopen('http://%s:8000/hi.txt' % server, timeout=10).read().decode()
""" + SERVE

SEQ = iter(range(1, 1 << 30))


def submit(c, tier="service", code=SERVICE, argv=(), **kw):
    jid = "vm-%d-%d" % (os.getpid(), next(SEQ))
    job = {"v": 1, "id": jid, "tier": tier, "runtime": "python", "code": code, "argv": list(argv)}
    job.update(kw)
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=msgpack.packb(job, use_bin_type=True), capture_output=True)
    return jid


def result(c, jid, timeout=120):
    end = time.time() + timeout
    while time.time() < end:
        c.wait_done(jid, 20)
        raw = c.rcli("GET", "al:res:" + jid, raw=True)
        if raw:
            return msgpack.unpackb(raw, raw=False)
    return {"status": "no result", "info": {}}


def http_get(lv, ip, port=8080):
    url = "http://%s:%d/" % (ip, port) if port else "http://%s" % ip
    p = subprocess.run(lv.wrap(["/usr/bin/curl", "-s", "-m", "20", url]),
                       capture_output=True, text=True, timeout=30)
    return p.stdout


def disks(c, wid):
    d = os.path.join(c.dir, "state", wid, "vm")
    return sorted(f for f in os.listdir(d) if f.endswith(".qcow2")) if os.path.isdir(d) else []


def lease(c, name):
    out = c.rcli("HGETALL", "al:vm:" + name).split("\n")
    return dict(zip(out[0::2], out[1::2]))


lv = LibvirtNS()
c = Cluster(policy=POLICY, prefix=lv.wrap([]))
host = None
WID = "vm-test"
try:
    # A loopback-only listener in the namespace (the VMs' host): no VM may reach it.
    host = subprocess.Popen(lv.wrap(["/usr/bin/python3", "-c",
                                     "import socket, time\ns = socket.socket()\n"
                                     "s.bind(('127.0.0.1', 0)); s.listen(8)\n"
                                     "print(s.getsockname()[1], flush=True)\n"
                                     "time.sleep(3600)"]),
                            stdout=subprocess.PIPE, text=True)
    host_port = host.stdout.readline().strip()
    sched_args = ("--libvirt", lv.uri)
    c.scheduler(extra=sched_args)
    c.worker(WID, uid_base=71000, slots=2, tiers="service,brief,deaf,outbound",
             extra=("--libvirt", lv.uri, "--images", IMAGES) +
             tuple(os.environ.get("VMT_EXTRA", "").split()))
    args = [host_port, c.sock, lv.gateway]
    a, b = submit(c, argv=args), submit(c, argv=args)
    ra, rb = result(c, a), result(c, b)
    ia, ib = ra.get("info", {}), rb.get("info", {})
    t.ok(ra["status"] == "ok" and ia.get("vm_name") == "al-svc-" + a and ia.get("ports") == "8080" and
         ia.get("image") == PY_HASH and
         ia.get("vm_ip", "").startswith(lv.subnet + ".") and
         int(ia.get("lease_expires_ms", 0)) > time.time() * 1000,
         "a service job ends ok in its catalogue image (python), naming its VM, address, ports "
         "and lease end (ready in %s ms)"
         % ia.get("ready_ms"), ra)
    st = os.stat(os.path.join(IMAGES, "python.ext4"))
    t.ok(st.st_uid == 0 and st.st_gid == 0 and st.st_mode & 0o777 == 0o644,
         "the shared image file is not relabeled by libvirt (still root's, 0644) while VMs run it",
         (st.st_uid, st.st_gid, oct(st.st_mode)))
    netxml = lv.virsh("net-dumpxml", lv.net).stdout
    t.ok(ia.get("address") == "reserved" and "ip='%s'" % ia.get("vm_ip") in netxml,
         "its address is reserved in the network's DHCP hosts and is the one libvirt's lease "
         "table reports", netxml)
    body = http_get(lv, ia.get("vm_ip", "0.0.0.0"))
    t.ok("redis-socket absent" in body, "the service answers on the reported address", body)
    t.ok(rb["status"] == "ok" and ib.get("vm_ip") and ib.get("vm_ip") != ia.get("vm_ip") and
         "redis-socket" in http_get(lv, ib["vm_ip"]),
         "a second VM gets another address and answers too", (ia.get("vm_ip"), ib.get("vm_ip")))
    p = subprocess.run(lv.wrap(["/usr/bin/python3", "-c",
                                "import socket, sys\n"
                                "for port in (8080, 9090):\n"
                                "    try:\n"
                                "        socket.create_connection((sys.argv[1], port), 3).close(); print(port, 'open')\n"
                                "    except OSError as e:\n"
                                "        print(port, 'closed', e)\n", ia.get("vm_ip", "0.0.0.0")]),
                       capture_output=True, text=True, timeout=30)
    t.ok("8080 open" in p.stdout and "9090 closed" in p.stdout,
         "inbound ports are the policy's: 8080 answers, 9090 (listening in the guest) does not",
         p.stdout + p.stderr)
    t.ok("host-loopback blocked" in body and "gateway-loopback-port blocked" in body and
         "redis-socket absent" in body,
         "the VM reaches neither the host's loopback services nor the Redis socket", body)
    t.ok("outside blocked (Network is unreachable)" in body and "default-route none" in body,
         "without egress in the policy the VM has no route out", body)
    names = sorted([ia.get("vm_name"), ib.get("vm_name")])
    listed = c.cli("vm", "list").stdout.decode()
    t.ok(sorted(lv.domains()) == names and all(n in listed for n in names) and
         len(disks(c, WID)) == 2 and "ip=%s" % ia.get("vm_ip") in listed,
         "libvirt runs both domains; `airlock vm list` shows both leases; each has its overlay disk",
         (lv.domains(), listed, disks(c, WID)))

    p = c.cli("vm", "extend", ia["vm_name"], "999999999")
    l = lease(c, ia["vm_name"])
    t.ok(p.returncode == 0 and b"maximum lease" in p.stdout and
         l.get("expires_ms") == l.get("max_until_ms"),
         "`airlock vm extend` stops at the policy's maximum lease", (p.stdout, l))
    p = c.cli("vm", "stop", ia["vm_name"])
    gone = c.wait_for(lambda: ia["vm_name"] not in lv.domains() and
                      ia["vm_name"] + ".qcow2" not in disks(c, WID), timeout=15)
    l = lease(c, ia["vm_name"])
    t.ok(p.returncode == 0 and gone and l.get("state") == "ended" and "stopped" in l.get("reason", "")
         and ia["vm_name"] not in c.cli("vm", "list").stdout.decode() and
         "ip='%s'" % ia["vm_ip"] not in lv.virsh("net-dumpxml", lv.net).stdout,
         "`airlock vm stop` destroys the VM, removes its disk and its address reservation; "
         "the lease says why", (p.stdout, l))
    p = c.cli("vm", "stop", "al-svc-nosuch")
    q = c.cli("vm", "extend", ib["vm_name"], "soon")
    q2 = c.cli("vm", "extend", ib["vm_name"], "")  # was taken as 0
    t.ok(p.returncode == 1 and b"no running VM" in p.stderr and q.returncode == 2 and
         b"expected a number" in q.stderr and q2.returncode == 2 and
         b"expected a number" in q2.stderr,
         "stopping an unknown VM and extending by a non-number are refused with a reason",
         (p.stderr, q.stderr))

    # Egress: the VM reaches the proxy and, through it, only what the rules
    # name; nothing around it (the filter lets out only the proxy's port).
    www = tempfile.mkdtemp(prefix="airlock-vmwww-", dir="/var/tmp")
    with open(os.path.join(www, "hi.txt"), "w") as f:
        f.write("hello through the proxy\n")
    os.chmod(www, 0o755)
    os.chmod(os.path.join(www, "hi.txt"), 0o644)
    for cmd in (["link", "add", "alwww0", "type", "veth", "peer", "name", "alwww1"],
                ["addr", "add", "10.233.7.1/24", "dev", "alwww0"], ["link", "set", "alwww0", "up"],
                ["link", "set", "alwww1", "up"]):
        subprocess.run(["ip", "-n", lv.ns, *cmd], check=True)
    www_srv = subprocess.Popen(lv.wrap(["/usr/bin/python3", "-m", "http.server", "8000", "--bind",
                                        "10.233.7.1", "--directory", www]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        g = submit(c, tier="outbound", code=EGRESS_SERVICE, argv=["10.233.7.1", lv.gateway],
                   network="egress")
        rg = result(c, g)
        ig = rg.get("info", {})
        body = http_get(lv, ig.get("vm_ip", "0.0.0.0"))
        t.ok(rg["status"] == "ok" and
             "proxy http://%s:" % lv.gateway in body and
             "8000/hi.txt got hello through the proxy" in body and
             "8001/ failed 403" in body,
             "a service VM granted egress reaches the allowed server through its proxy (on the "
             "network's own address, a port of its own); another port is refused", body)
        t.ok("server-direct blocked" in body and "gateway-dns-tcp blocked" in body and
             "gateway-dns-udp no answer" in body,
             "around the proxy the VM reaches nothing: not the server directly, not the "
             "network's DNS server (TCP or UDP)", body)
        eg = rg.get("egress", [])
        # (listed as they ended: the allowed one, kept alive, may close after)
        t.ok(sorted((e["port"], e["allowed"]) for e in eg) == [(8000, True), (8001, False)],
             "the result lists the connections made before it (one allowed, one refused)", eg)
        again = http_get(lv, ig.get("vm_ip", "0.0.0.0") + ":8080/again", port=None)
        log = c.wait_for(lambda: ("event=egress job=%s host=10.233.7.1 port=8000" % g) in
                         c.log(WID), timeout=10) and c.log(WID)
        t.ok("again hello through the proxy" in again and log and "allowed=yes" in log,
             "after the result the VM's proxy serves on and the worker logs each connection",
             (again, [l for l in (log or c.log(WID)).splitlines() if "event=egress" in l]))
        c.cli("vm", "stop", ig.get("vm_name", "al-svc-none"))
        c.wait_for(lambda: ig.get("vm_name") not in lv.domains(), timeout=15)
    finally:
        www_srv.kill()
        www_srv.wait()
        subprocess.run(["rm", "-rf", www])

    # Lease expiry.
    e = submit(c, tier="brief", argv=args)
    re_ = result(c, e)
    name = re_.get("info", {}).get("vm_name", "?")
    up = name in lv.domains()
    gone = c.wait_for(lambda: name not in lv.domains() and name + ".qcow2" not in disks(c, WID),
                      timeout=20)
    t.ok(re_["status"] == "ok" and up and gone and lease(c, name).get("reason") == "lease expired",
         "a VM whose lease expires is destroyed with its disk", (re_.get("status"), lease(c, name)))

    # Scheduler restart: a domain without a lease goes; a lease without a
    # domain is ended, saying so.
    c.signal("sched1", signal.SIGKILL)
    c.wait_exit("sched1")
    c.rcli("ZREM", "al:vm:leases", ib["vm_name"])
    c.rcli("HSET", "al:vm:al-svc-ghost", "state", "running", "job", "ghost")
    c.rcli("ZADD", "al:vm:leases", str(int(time.time() * 1000) + 600000), "al-svc-ghost")
    c.procs.pop("sched1")
    c.scheduler(extra=sched_args)
    fixed = c.wait_for(lambda: ib["vm_name"] not in lv.domains() and
                       lease(c, "al-svc-ghost").get("state") == "ended", timeout=15)
    t.ok(fixed and "vanished" in lease(c, "al-svc-ghost").get("reason", "") and
         ib["vm_name"] + ".qcow2" not in disks(c, WID),
         "a restarted scheduler reconciles: the unleased domain is destroyed, the lease whose "
         "domain vanished is ended", (lv.domains(), lease(c, "al-svc-ghost")))

    # A service that never listens: timeout within the job's limit, nothing left.
    t0 = time.time()
    d = submit(c, tier="deaf", code="import time\ntime.sleep(3600)")
    rd = result(c, d)
    took = time.time() - t0
    t.ok(rd["status"] == "timeout" and took < 40 and not lv.domains() and not disks(c, WID),
         "a service that never answers on its port: timeout (%.0f s, limit 15 s), no domain "
         "or disk left" % took, (rd, lv.domains(), disks(c, WID)))
except BaseException:
    sys.stderr.write(c.log(WID)[-3000:])
    sys.stderr.write(c.log("sched1")[-2000:])
    raise
finally:
    if host:
        host.kill()
        host.wait()
    c.close()
    lv.close()
sys.exit(t.done())
