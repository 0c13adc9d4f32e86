#!/usr/bin/python3
"""Benchmark: a service VM from create to reachable, through the service tier
(client XADD -> scheduler -> worker -> libvirt -> guest -> the service answers
on its port -> result), against a bare `virsh create` of the same domain XML
(the worker's own, kept with --bundle-copy; its name, disk, socket and MAC
changed) followed by the least a bare run needs to get the same service up:
connect to the agent's channel, wait for ready, send the same job frame, and
poll the port. Both with a reserved address. Interleaved rounds in one libvirtd
inside a private network namespace (tests/lib/libvirtns.py). Then how many
service VMs this machine holds at once: K started together, how many became
reachable, and their VMMs' total RSS.

Usage: vm_latency.py [ROUNDS] [K]   (root, libvirtd, `make microvm-image`)
Target: service tier / bare virsh create <= 1.2x (p50)."""
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cluster import Cluster  # noqa: E402
from libvirtns import LibvirtNS  # noqa: E402

import msgpack  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
K = int(sys.argv[2]) if len(sys.argv) > 2 else 4
SERVICE = ("import http.server\n"
           "http.server.HTTPServer(('', 8080), http.server.SimpleHTTPRequestHandler).serve_forever()\n")
POLICY = """\
result_ttl_s: 600
lease_ms: 30000
tiers:
  service:
    backend: vm
    image: python
    max_attempts: 1
    ports: [8080]
    defaults: {wall_ms: 120000, memory_bytes: 134217728}
"""
SEQ = iter(range(1, 1 << 30))


def airlock_round(c, lv):
    jid = "bench-%d-%d" % (os.getpid(), next(SEQ))
    job = {"v": 1, "id": jid, "tier": "service", "runtime": "python", "code": SERVICE}
    t0 = time.monotonic()
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=msgpack.packb(job, use_bin_type=True), capture_output=True)
    for _ in range(10):
        c.wait_done(jid, 20)
        raw = c.rcli("GET", "al:res:" + jid, raw=True)
        if raw:
            break
    ms = (time.monotonic() - t0) * 1000
    res = msgpack.unpackb(raw, raw=False)
    if res["status"] != "ok":
        raise RuntimeError("service job failed: %r" % res)
    name = res["info"]["vm_name"]
    c.cli("vm", "stop", name)
    c.wait_for(lambda: name not in lv.domains(), timeout=20)
    return ms


def port_open(lv, ip):
    p = subprocess.run(lv.wrap(["/usr/bin/python3", "-c",
                                "import socket,sys\n"
                                "for _ in range(1200):\n"
                                "    try:\n"
                                "        socket.create_connection((sys.argv[1], 8080), 0.5).close(); sys.exit(0)\n"
                                "    except OSError:\n"
                                "        __import__('time').sleep(0.1)\n"
                                "sys.exit(1)\n", ip]), capture_output=True)
    return p.returncode == 0


def bare_round(lv, kept, tmp, n):
    xml = open(kept).read()
    frame = open(kept + ".job", "rb").read()
    old = re.search(r"<name>([^<]+)</name>", xml).group(1)
    name = "bare-%d" % n
    disk = os.path.join(tmp, name + ".qcow2")
    sock = os.path.join(tmp, name + ".sock")
    # one MAC and address for every bare round: dnsmasq keeps a lease per
    # MAC, so a new MAC on a reused address would wait for the old lease
    mac = "52:54:00:be:00:01"
    ip = "%s.251" % lv.subnet
    backing = re.search(r"<source file='([^']+)'", xml).group(1)
    backing = subprocess.run(["qemu-img", "info", "--output=json", backing], capture_output=True,
                             text=True).stdout
    backing = re.search(r'"backing-filename": "([^"]+)"', backing).group(1)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", backing, disk],
                   check=True)
    xml = xml.replace("<name>%s</name>" % old, "<name>%s</name>" % name)
    xml = re.sub(r"(<disk.*?<source file=')[^']+", r"\g<1>" + disk, xml, flags=re.S)
    xml = re.sub(r"(<channel.*?<source mode='bind' path=')[^']+", r"\g<1>" + sock, xml, flags=re.S)
    xml = re.sub(r"<mac address='[^']+'", "<mac address='%s'" % mac, xml)
    path = os.path.join(tmp, name + ".xml")
    with open(path, "w") as f:
        f.write(xml)
    host = "<host mac='%s' ip='%s'/>" % (mac, ip)
    lv.virsh("net-update", lv.net, "add", "ip-dhcp-host", host, "--live")
    t0 = time.monotonic()
    lv.virsh("create", path)
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.settimeout(120)
    got = b""
    while len(got) < 5 or len(got) < 4 + int.from_bytes(got[:4], "big"):
        got += s.recv(4096)  # the ready frame
    s.sendall(frame)
    ok = port_open(lv, ip)
    ms = (time.monotonic() - t0) * 1000
    s.close()
    lv.virsh("destroy", name, check=False)
    lv.virsh("net-update", lv.net, "delete", "ip-dhcp-host", host, "--live", check=False)
    for p in (disk, sock, path):
        if os.path.exists(p):
            os.unlink(p)
    if not ok:
        raise RuntimeError("the bare VM's service never answered")
    return ms


def vmm_rss_mb():
    total = 0
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/status" % pid) as f:
                st = f.read()
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"qemu-system" in cmd and b"guest=al-svc-" in cmd:
            total += int(re.search(r"VmRSS:\s+(\d+)", st).group(1))
    return total / 1024


def main():
    if os.geteuid() != 0:
        print("needs root")
        return 1
    lv = LibvirtNS()
    c = Cluster(policy=POLICY, prefix=lv.wrap([]))
    tmp = tempfile.mkdtemp(prefix="airlock-vmbench-", dir="/var/tmp")
    os.chmod(tmp, 0o755)
    kept = os.path.join(tmp, "kept.xml")
    try:
        c.scheduler(extra=("--libvirt", lv.uri))
        c.worker("bench-vm", uid_base=72000, slots=K, tiers="service",
                 extra=("--libvirt", lv.uri, "--bundle-copy", kept))
        airlock_round(c, lv)  # warm-up: caches, the kept definition
        lat = {"airlock": [], "bare": []}
        for i in range(ROUNDS):
            lat["bare"].append(bare_round(lv, kept, tmp, i))
            lat["airlock"].append(airlock_round(c, lv))
        # service VMs at once
        ids = []
        t0 = time.monotonic()
        for _ in range(K):
            jid = "many-%d-%d" % (os.getpid(), next(SEQ))
            ids.append(jid)
            job = {"v": 1, "id": jid, "tier": "service", "runtime": "python", "code": SERVICE}
            subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                           input=msgpack.packb(job, use_bin_type=True), capture_output=True)
        ok = 0
        for jid in ids:
            for _ in range(10):
                c.wait_done(jid, 20)
                raw = c.rcli("GET", "al:res:" + jid, raw=True)
                if raw:
                    ok += msgpack.unpackb(raw, raw=False)["status"] == "ok"
                    break
        all_ms = (time.monotonic() - t0) * 1000
        rss = vmm_rss_mb()
        with open("/proc/meminfo") as f:
            avail = int([l for l in f if l.startswith("MemAvailable:")][0].split()[1]) / 1024
    finally:
        c.close()
        lv.close()
        subprocess.run(["rm", "-rf", tmp])
    p50 = {k: statistics.median(v) for k, v in lat.items()}
    print("service VM create -> reachable (python http.server on 8080), %d interleaved rounds, "
          "reserved addresses, %d CPUs" % (ROUNDS, os.cpu_count()))
    print("%-10s %9s %9s %9s" % ("series", "p50 ms", "max ms", "ratio"))
    for k in ("bare", "airlock"):
        print("%-10s %9.0f %9.0f %8.2fx" % (k, p50[k], max(lat[k]), p50[k] / p50["bare"]))
    print("service tier / bare virsh create: %.2fx (target <= 1.2x)" % (p50["airlock"] / p50["bare"]))
    print("at once: %d of %d service VMs reachable, all within %.1f s; VMM RSS %.0f MB in all "
          "(%.0f MB each); memory-bound estimate %d VMs in %.1f GB available"
          % (ok, K, all_ms / 1000, rss, rss / max(ok, 1), avail / (rss / max(ok, 1)) if rss else 0,
             avail / 1024))
    return 0


if __name__ == "__main__":
    sys.exit(main())
