#!/usr/bin/python3
"""Network egress through the worker's proxy, through the real queue, on
each boundary that can give it: process, container (runc, and runsc:
gVisor's own network stack, its loopback holding only the proxy) and
microVM (the python image). A test "internet" lives in a network namespace this test makes (a
veth pair to the host, addresses 10.231.N.0/24): an HTTP server with a small
Python package index serving a wheel built here and a large file, and the
same over TLS with a certificate made here. The tiers' policy allows that
range explicitly (it is private, so a name rule alone would not reach it).
Checked on each tier: pip installs over TLS through the proxy and the
transcript lists its connections; a host not on the list is denied and
listed; a program that ignores the proxy variables reaches nothing; a name
resolving to 127.0.0.1 and 169.254.169.254 are refused; hostile programs
(a scan, CONNECT tricks) find only the proxy and are refused; the byte cap
cuts a large download; a job can narrow the list and cannot widen it; a
tier without rules refuses egress at admission."""
import hashlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
from altest import Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402
from pkgs import wheel  # noqa: E402
from testinet import TestInternet  # noqa: E402

import airlock  # noqa: E402

t = Tap()
need_root()

WWW = "/var/tmp/airlock-inet-%d" % os.getpid()
INET = TestInternet("inet", 231, WWW, tls=True)
NET, SRV = INET.net, INET.srv


def internet():
    os.makedirs(os.path.join(WWW, "simple", "airlock-demo"))
    with open(os.path.join(WWW, "airlock_demo-1.0-py3-none-any.whl"), "wb") as f:
        f.write(wheel("airlock-demo", "1.0", {"airlock_demo/__init__.py": b"VALUE = 42\n"}))
    with open(os.path.join(WWW, "simple", "airlock-demo", "index.html"), "w") as f:
        f.write('<html><body><a href="../../airlock_demo-1.0-py3-none-any.whl">'
                'airlock_demo-1.0-py3-none-any.whl</a></body></html>\n')
    with open(os.path.join(WWW, "big.bin"), "wb") as f:
        f.write(os.urandom(4 << 20))
    with open(os.path.join(WWW, "hi.txt"), "w") as f:
        f.write("hello from the test internet\n")
    return INET.start()


IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
NET_KEYS = {"egress": {"allow": ["%s.0/24:8000" % NET, "%s.0/24:8443" % NET, "localhost:8000",
                                  "pypi.example.invalid:443"],
                        "max_bytes": 3000000, "max_connections": 20},
            "defaults": dict(DEFAULTS, wall_ms=60000, memory_bytes=536870912),
            "sessions": {"max_per_tenant": 4, "idle_s": 600, "max_life_s": 600}}
# the same with the test internet's own CA trusted (egress.ca_file): what an
# intercepting proxy's network needs
CA_KEYS = dict(NET_KEYS, egress=dict(NET_KEYS["egress"], ca_file=INET.ca))
CA_TIERS = {"ca": "process", "ca-ctr": "container", "ca-gv": "gVisor", "ca-vm": "microvm"}
POLICY = policy(tier_def("ca", "process", **CA_KEYS), tier_def("ca-ctr", "container", **CA_KEYS),
                tier_def("ca-gv", "container", oci_runtime="runsc", **CA_KEYS),
                tier_def("ca-vm", "microvm", image="python", **CA_KEYS),
                tier_def("trusted", "process"), tier_def("net", "process", **NET_KEYS),
                tier_def("net-ctr", "container", **NET_KEYS),
                tier_def("net-gv", "container", oci_runtime="runsc", **NET_KEYS),
                tier_def("net-vm", "microvm", image="python", **NET_KEYS),
                tier_def("ctr-none", "container"), tier_def("vm-none", "microvm", image="python"))
# The microVM tier runs emulated here (no KVM): the checks that need a job
# in the sandbox run there too, the admission checks once.
TIERS = {"net": "process", "net-ctr": "container", "net-gv": "gVisor", "net-vm": "microvm"}

SEQ = iter(range(1, 1 << 30))


def run(c, code, tier="net", network="egress", **kw):
    j = {"v": 1, "id": "eg-%d-%d" % (os.getpid(), next(SEQ)), "tier": tier, "runtime": "python",
         "code": code, "network": network}
    j.update(kw)
    r = c.run_job(j, timeout=240)
    for k in ("stdout", "stderr"):
        r[k] = r.get(k, b"").decode(errors="replace")
    return r


FETCH = ("import sys, urllib.request, ssl\n"
         "ctx = ssl.create_default_context(cafile='ca.pem') if len(sys.argv) > 1 and "
         "any(u.startswith('https') for u in sys.argv[1:]) else None\n"
         "for url in sys.argv[1:]:\n"
         "    try:\n"
         "        d = urllib.request.urlopen(url, timeout=20, context=ctx).read(); "
         "print(url, 'got', len(d))\n"
         "    except Exception as e:\n"
         "        print(url, 'failed', getattr(e, 'code', ''), str(e)[:80])\n")


def files_ca():
    with open(INET.ca, "rb") as f:
        return [{"path": "ca.pem", "data": f.read()}]


# plain `pip install`, as a user or a model types it (no --target, no
# --user, no venv): PEP 668 does not stop it, it lands in HOME/.local and
# imports in the same program after
PIP = ("import os, subprocess, sys\n"
       "p = subprocess.run(['pip', 'install', '--index-url', sys.argv[1], '--cert', 'ca.pem',\n"
       "    'airlock-demo'], capture_output=True, text=True)\n"
       "print('pip', p.returncode, p.stderr[-300:])\n"
       "import airlock_demo; print('value', airlock_demo.VALUE, airlock_demo.__file__)\n")

# Hostile programs on an egress tier: a port scan of what the job can reach
# (loopback and the proxy's own address), CONNECT to the worker's Redis and
# the metadata endpoint, address spellings that are names to the proxy, a
# name with a trailing dot, an absolute URI whose Host header names another
# host.
HOSTILE = ("import os, socket\n"
           "proxy = os.environ['HTTP_PROXY'].split('//')[1].split(':')[0]\n"
           "open_ = sorted({p for h in {'127.0.0.1', proxy} for p in range(1, 4096)\n"
           "                if socket.socket().connect_ex((h, p)) == 0})\n"
           "print('open', open_)\n"
           "def connect(target):\n"
           "    s = socket.create_connection((proxy, 3128), 5)\n"
           "    s.sendall(b'CONNECT %s HTTP/1.1\\r\\n\\r\\n' % target.encode())\n"
           "    print(target, s.recv(200).split(b'\\r\\n')[0].decode())\n"
           "for t in ['127.0.0.1:6379', '169.254.169.254:80', '[::ffff:127.0.0.1]:8000',\n"
           "          '2130706433:8000', '0x7f000001:8000', '127.1:8000', 'localhost.:8000',\n"
           "          '@SRV@:22']:\n"
           "    connect(t)\n"
           "s = socket.create_connection((proxy, 3128), 5)\n"
           "s.sendall(b'GET http://other.example.invalid:8000/ HTTP/1.1\\r\\nHost: @SRV@:8000\\r\\n\\r\\n')\n"
           "print('host-header', s.recv(200).split(b'\\r\\n')[0].decode())\n").replace("@SRV@", SRV)


def tier_suite(c, tier):
    """What every boundary must do with network egress: the same jobs."""
    b = TIERS[tier]
    r = run(c, PIP, tier=tier, argv=["https://%s:8443/simple" % SRV], files=files_ca())
    eg = r.get("egress", [])
    t.ok(r["status"] == "ok" and "pip 0" in r["stdout"] and
         "value 42 /work/.local/lib/python3.11/site-packages/airlock_demo/__init__.py" in
         r["stdout"] and
         eg and all(e["allowed"] and e["addr"] == SRV and e["port"] == 8443 and
                    e["why"] == NET + ".0/24:8443" for e in eg) and
         any(e["down"] > 0 for e in eg),
         "%s: a plain pip install (PEP 668 no obstacle) fetches a package over TLS (CONNECT) "
         "through the proxy from the allowed "
         "range; the transcript lists %d connections, each allowed by the range rule, with "
         "bytes" % (b, len(eg)), r)

    r = run(c, FETCH, tier=tier, files=files_ca(),
            argv=["http://%s:8000/hi.txt" % SRV, "https://%s:8443/hi.txt" % SRV,
                  "http://other.example.invalid:8000/x", "http://localhost:8000/hi.txt",
                  "http://169.254.169.254/latest/meta-data/"])
    lines = r["stdout"].splitlines()
    eg = r.get("egress", [])
    by = {(e["host"], e["port"]): e for e in eg}
    t.ok(r["status"] == "ok" and len(lines) == 5 and lines[0].endswith("got 29") and
         lines[1].endswith("got 29") and "failed 403" in lines[2] and
         "failed" in lines[3] and "failed" in lines[4] and len(eg) == 5 and
         by[(SRV, 8000)]["allowed"] and by[(SRV, 8443)]["allowed"] and
         not by[("other.example.invalid", 8000)]["allowed"] and
         "no rule allows other.example.invalid:8000" in by[("other.example.invalid", 8000)]["why"] and
         not by[("localhost", 8000)]["allowed"] and
         by[("localhost", 8000)]["addr"] in ("127.0.0.1", "::1") and
         "internal address" in by[("localhost", 8000)]["why"] and
         not by[("169.254.169.254", 80)]["allowed"] and
         "no range rule names this address" in by[("169.254.169.254", 80)]["why"],
         "%s: allowed host fetched over HTTP and HTTPS; a host not on the list, a name "
         "resolving to loopback and the metadata address are refused and listed with the "
         "reason" % b, (lines, eg))

    r = run(c, "import socket\n"
               "for host in ['%s', '127.0.0.1', '10.0.2.2', '1.1.1.1']:\n"
               "    for port in [8000, 8443, 6379]:\n"
               "        try:\n"
               "            socket.create_connection((host, port), 2).close(); print(host, port, 'CONNECTED')\n"
               "        except OSError as e: print(host, port, 'blocked', e.errno)\n" % SRV,
            tier=tier)
    t.ok(r["status"] == "ok" and "CONNECTED" not in r["stdout"] and
         r["stdout"].count("blocked") == 12 and not r.get("egress"),
         "%s: a program ignoring the proxy variables reaches nothing (no route but the "
         "proxy)" % b, r["stdout"])

    r = run(c, HOSTILE, tier=tier)
    out = r["stdout"].splitlines()
    t.ok(r["status"] == "ok" and out and out[0] == "open [3128]" and
         all(l.endswith("403 Forbidden") for l in out[1:]) and len(out) == 10 and
         all(not e["allowed"] for e in r.get("egress", [])),
         "%s: hostile programs: a scan finds only the proxy; CONNECT to the worker's Redis, "
         "the metadata endpoint, a v4-mapped loopback, numeric and short spellings of "
         "127.0.0.1, a trailing-dot name, another port, and a Host header naming an allowed "
         "server: all refused" % b, r["stdout"])

    r = run(c, FETCH, tier=tier, argv=["http://%s:8000/big.bin" % SRV])
    eg = r.get("egress", [])
    t.ok(r["status"] == "ok" and "got 4194304" not in r["stdout"] and len(eg) == 1 and
         "max_bytes of 3000000 reached" in eg[0]["why"] and
         eg[0]["down"] + eg[0]["up"] <= 3000000,
         "%s: the byte cap (3 MB) cuts a 4 MB download; the transcript says so" % b,
         (r["stdout"], eg))

    r = run(c, FETCH, tier=tier, argv=["http://%s:8000/hi.txt" % SRV],
            egress_allow=["localhost:8000"])
    t.ok(r["status"] == "ok" and "failed 403" in r["stdout"] and
         "no range rule" in r["egress"][0]["why"],
         "%s: with a narrowed list, what the tier allows but the job's list does not is "
         "refused" % b, (r["stdout"], r.get("egress")))
    r = run(c, FETCH, tier=tier, argv=["http://%s:8000/hi.txt" % SRV],
            egress_allow=["evil.example:443"])
    t.ok(r["status"] == "rejected" and "is not within tier %s's egress rules" % tier in r["error"],
         "%s: a job cannot widen the list: rejected at admission" % b, r.get("error"))


def session_suite(c, tier):
    """Network in a session, as deliberate as a job's (issue 58): a plain
    pip install from the test's index in one call, the package imported in
    the next, each call's transcript its own; a host off the list refused
    and listed."""
    b = TIERS[tier]
    with open(INET.ca, "rb") as f:
        ca = f.read()
    with airlock.Client(redis=c.url, tier=tier).session(network="egress", timeout=120) as s:
        s.put("ca.pem", ca)
        r1 = s.exec("pip install --index-url https://%s:8443/simple --cert ca.pem airlock-demo"
                    % SRV)
        r2 = s.run_python("import airlock_demo\nprint(airlock_demo.VALUE)")
        r3 = s.run_python("import urllib.request\ntry:\n    urllib.request.urlopen("
                          "'http://off.example.invalid:8000/', timeout=20)\nexcept Exception "
                          "as e:\n    print('refused', getattr(e, 'code', ''))")
    ok1 = r1.status == "ok" and r1.egress and all(
        e["allowed"] and e["addr"] == SRV and e["port"] == 8443 for e in r1.egress)
    t.ok(ok1 and r2.stdout == b"42\n" and not r2.egress and
         b"refused 403" in r3.stdout and
         [(e["host"], e["allowed"]) for e in r3.egress] == [("off.example.invalid", False)],
         "%s: a session with network egress: pip install from the allowed index in one call "
         "(its transcript: %d connections, allowed), the package imported in the next (no "
         "connection), a host off the list refused and in that call's transcript"
         % (b, len(r1.egress)),
         (r1.status, r1.stderr[-400:], r1.egress, r2, r3.stdout, r3.egress))


c = None
try:
    internet()
    c = Cluster(policy=POLICY)
    c.scheduler()
    c.worker("egress-w", uid_base=63500, slots=2,
             tiers=",".join(["trusted", "ctr-none", "vm-none"] + list(TIERS) + list(CA_TIERS)),
             extra=["--images", IMAGES])
    for tier in TIERS:
        tier_suite(c, tier)
        session_suite(c, tier)

    # egress.ca_file: the job's TLS clients and the worker's input fetcher
    # trust the tier's CA (here the test server's own), on every boundary
    TLS = ("import os, ssl, urllib.request\n"
           "print('env', os.environ.get('SSL_CERT_FILE'), os.environ.get('NODE_EXTRA_CA_CERTS'))\n"
           "try:\n"
           "    print('got', urllib.request.urlopen('https://%s:8443/hi.txt', timeout=20).read())\n"
           "except Exception as e:\n"
           "    print('failed', str(e)[:120])\n" % SRV)
    with open(os.path.join(WWW, "hi.txt"), "rb") as f:
        hi = f.read()
    hi_input = [{"url": "https://%s:8443/hi.txt" % SRV, "sha256": hashlib.sha256(hi).hexdigest(),
                 "path": "hi.txt"}]
    for tier, b in CA_TIERS.items():
        r = run(c, TLS + "print('input', open('hi.txt', 'rb').read())\n", tier=tier,
                inputs=hi_input)
        t.ok(r["status"] == "ok" and "env /work/.airlock/ca-certificates.crt "
             "/work/.airlock/ca-certificates.crt" in r["stdout"] and
             "got b'hello from the test internet\\n'" in r["stdout"] and
             "input b'hello from the test internet\\n'" in r["stdout"],
             "%s: egress.ca_file: the job's TLS (python's default context, through the proxy) "
             "and the worker's fetch of an https input trust the tier's CA" % b,
             (r["status"], r.get("error"), r["stdout"]))
    r = run(c, TLS, tier="net")
    t.ok(r["status"] == "ok" and "env None None" in r["stdout"] and
         "CERTIFICATE_VERIFY_FAILED" in r["stdout"],
         "process: without ca_file the same server's certificate is refused", r["stdout"])
    with open(os.path.join(WWW, "big.bin"), "rb") as f:  # bytes the cache has not seen
        big_input = [{"url": "https://%s:8443/big.bin" % SRV, "path": "big.bin",
                      "sha256": hashlib.sha256(f.read()).hexdigest()}]
    r = run(c, TLS, tier="net", network="none", inputs=big_input)
    t.ok(r["status"] == "sandbox_error" and "SSL" in r["error"],
         "process: without ca_file the worker's fetch of the https input fails (%s)" %
         r.get("error"), r.get("error"))

    r = run(c, FETCH, argv=["http://%s:8000/hi.txt" % SRV],
            egress_allow=["%s.0/25:8000" % NET])
    t.ok(r["status"] == "ok" and "got 29" in r["stdout"] and
         r["egress"][0]["why"] == "%s.0/25:8000" % NET,
         "a job narrows the list (egress_allow within the tier's range): allowed by its rule", r)
    for tier, b in (("trusted", "process"), ("ctr-none", "container"), ("vm-none", "microvm")):
        r = run(c, FETCH, tier=tier, argv=["http://%s:8000/hi.txt" % SRV])
        t.ok(r["status"] == "rejected" and "does not allow egress" in r["error"],
             "%s: a tier without egress rules refuses network egress at admission" % b,
             r.get("error"))
    r = run(c, FETCH, network="none", argv=["http://%s:8000/hi.txt" % SRV])
    t.ok(r["status"] == "ok" and "failed" in r["stdout"] and not r.get("egress"),
         "without network egress the same tier's job has no proxy at all", r["stdout"])
    p = c.cli("run", "--tier", "net", "--network", "egress", "-c",
              "import urllib.request as u\n"
              "for x in ['http://%s:8000/hi.txt', 'http://nope.invalid:8000/']:\n"
              "    try: u.urlopen(x, timeout=10).read()\n"
              "    except Exception: pass\n" % SRV)
    t.ok(p.returncode == 0 and b"egress: 1 allowed, 1 denied" in p.stderr,
         "airlock run prints a one-line egress summary on stderr", p.stderr)
finally:
    if c:
        c.close()
    INET.stop()
sys.exit(t.done())
