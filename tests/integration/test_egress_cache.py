#!/usr/bin/python3
"""The egress cache (egress.cache_bytes): each tenant's own cache, per tier
and host, of what its jobs fetched over plain HTTP through the worker's
proxy, so that the second run of a suite does not download again. Through
the real queue on process, container and microVM, against a counting
server in a network namespace this test makes (10.236.N.0/24). Checked: a
release file (.tar.gz) and a max-age answer are stored on the first run and
served on the second without reaching the server, said in the transcript
and in info.egress_cache; an index page with no caching headers, a
no-store answer, one with a cookie, one cut short of its Content-Length, a
Range request and a request with a body are never stored; another tenant,
another tier and a tier without the cache each fetch for themselves; a
max-age runs out; an answer over the cap is not kept and the least
recently used entries go first; a job can neither see nor write the cache
on the host."""
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402
from testinet import TestInternet  # noqa: E402

t = Tap()
need_root()

WWW = "/var/tmp/airlock-ecache-%d" % os.getpid()
INET = TestInternet("ecache", 236, WWW)
NET, SRV = INET.net, INET.srv
CAP = 2000000  # the tiers' cache_bytes

# The counting server: each path's answer, and /count?path= for the test.
SERVER = r'''
import http.server, json, random, sys, threading, urllib.parse
counts = {}
lock = threading.Lock()
def blob(n, seed):
    return random.Random(seed).randbytes(n)
BODIES = {"/pkg/demo-1.0.tar.gz": blob(300000, 1), "/pkg/big-1.0.tar.gz": blob(1200000, 2),
          "/pkg/big-2.0.tar.gz": blob(1200000, 3), "/pkg/huge-1.0.tar.gz": blob(2500000, 4)}
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, body, headers=(), length=None):
        self.send_response(200)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        if u.path == "/count":
            with lock:
                self.send(json.dumps(counts).encode())
            return
        with lock:
            counts[u.path] = counts.get(u.path, 0) + 1
            n = counts[u.path]
        if u.path in BODIES:
            self.send(BODIES[u.path])
        elif u.path == "/simple/demo/":
            self.send(b"<a href='../../pkg/demo-1.0.tar.gz'>demo</a> %d\n" % n)
        elif u.path == "/meta.json":
            self.send(b'{"n": %d}' % n, [("Cache-Control", "public, max-age=600")])
        elif u.path == "/soon.json":
            self.send(b'{"n": %d}' % n, [("Cache-Control", "max-age=1")])
        elif u.path == "/pkg/nostore-1.0.tar.gz":
            self.send(b"n%d" % n, [("Cache-Control", "no-store")])
        elif u.path == "/pkg/cookie-1.0.tar.gz":
            self.send(b"c%d" % n, [("Set-Cookie", "session=%d" % n)])
        elif u.path == "/pkg/short-1.0.tar.gz":
            self.send(b"s" * 500, length=1000)
            self.close_connection = True
        elif u.path == "/pkg/range-1.0.tar.gz":
            self.send(b"r%d" % n)
        else:
            self.send_error(404)
http.server.ThreadingHTTPServer((sys.argv[1], 8001), H).serve_forever()
'''

KEYS = {"egress": {"allow": ["%s.0/24:8001" % NET], "cache_bytes": CAP},
        "defaults": dict(DEFAULTS, wall_ms=120000, memory_bytes=536870912)}
NOCACHE = {"egress": {"allow": ["%s.0/24:8001" % NET]}}
POLICY = policy(tier_def("cache", "process", **KEYS), tier_def("cache-ctr", "container", **KEYS),
                tier_def("cache-vm", "microvm", image="python", **KEYS),
                tier_def("nocache", "process", **NOCACHE))

SEQ = iter(range(1, 1 << 30))

FETCH = ("import hashlib, sys, urllib.request\n"
         "for u in sys.argv[1:]:\n"
         "    try:\n"
         "        d = urllib.request.urlopen(u, timeout=30).read()\n"
         "        print(u.split('8001', 1)[1], 'got', len(d), hashlib.sha256(d).hexdigest()[:16])\n"
         "    except Exception as e:\n"
         "        print(u.split('8001', 1)[1], 'failed', type(e).__name__)\n")


def url(path):
    return "http://%s:8001%s" % (SRV, path)


def run(c, tier, paths, tenant="acme", code=FETCH, **kw):
    j = {"v": 1, "id": "ec-%d-%d" % (os.getpid(), next(SEQ)), "tier": tier, "tenant": tenant,
         "runtime": "python", "code": code, "network": "egress", "argv": [url(p) for p in paths]}
    j.update(kw)
    r = c.run_job(j, timeout=300)
    for k in ("stdout", "stderr"):
        r[k] = r.get(k, b"").decode(errors="replace")
    return r


def counts():
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            url("/count"), timeout=10) as f:
        return json.loads(f.read())


def info_cache(r):
    return r.get("info", {}).get("egress_cache", "")


def cache_dir(c, tier, tenant):
    return os.path.join(c.dir, "state", "egress-cache", tier, "t-" + tenant)


def entries(d):
    try:
        return sorted(n for n in os.listdir(d) if not n.startswith("."))
    except FileNotFoundError:
        return []


FIRST = ["/pkg/demo-1.0.tar.gz", "/simple/demo/", "/meta.json", "/pkg/nostore-1.0.tar.gz",
         "/pkg/cookie-1.0.tar.gz", "/pkg/short-1.0.tar.gz"]


def want_lines(out):
    """The answers a job prints for FIRST, by path."""
    return {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("/")}


def tier_suite(c, tier, tenant):
    """Stored on the first run, served on the second, on one boundary."""
    before = counts()
    r1 = run(c, tier, FIRST, tenant=tenant)
    r2 = run(c, tier, FIRST, tenant=tenant)
    after = counts()
    got = {p: after.get(p, 0) - before.get(p, 0) for p in FIRST}
    l1, l2 = want_lines(r1["stdout"]), want_lines(r2["stdout"])
    hits = [e for e in r2.get("egress", []) if e["why"].endswith("; served from the cache")]
    t.ok(r1["status"] == "ok" and r2["status"] == "ok" and
         info_cache(r1) == "0 hits (0 bytes), 2 stored" and
         info_cache(r2).startswith("2 hits (") and info_cache(r2).endswith(", 0 stored") and
         l1["/pkg/demo-1.0.tar.gz"] == l2["/pkg/demo-1.0.tar.gz"] and
         "got 300000" in l2["/pkg/demo-1.0.tar.gz"] and l1["/meta.json"] == l2["/meta.json"] and
         got == {"/pkg/demo-1.0.tar.gz": 1, "/meta.json": 1, "/simple/demo/": 2,
                 "/pkg/nostore-1.0.tar.gz": 2, "/pkg/cookie-1.0.tar.gz": 2,
                 "/pkg/short-1.0.tar.gz": 2} and
         "failed" in l2["/pkg/short-1.0.tar.gz"] and
         len(hits) == 2 and all(e["allowed"] and e["addr"] == SRV and e["down"] > 0
                                for e in hits),
         "%s: a release file and a max-age answer are stored on the first run and served "
         "on the second without reaching the server (the transcript and info.egress_cache "
         "say so); an index page, no-store, a cookie and a short answer are fetched each "
         "time" % tier, (info_cache(r1), info_cache(r2), got, r2["stdout"], hits))
    return r2


def main():
    os.makedirs(WWW, exist_ok=True)
    INET.start()
    srv = subprocess.Popen(["ip", "netns", "exec", INET.ns, "/usr/bin/python3", "-c", SERVER,
                            SRV], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = Cluster(policy=POLICY)
    try:
        for _ in range(100):
            try:
                counts()
                break
            except OSError:
                time.sleep(0.1)
        c.scheduler()
        c.worker("w1", slots=2, tiers="cache,cache-ctr,cache-vm,nocache")
        tier_suite(c, "cache", "acme")
        d = cache_dir(c, "cache", "acme")
        st = [os.stat(os.path.join(d, n)) for n in entries(d)]
        t.ok(len(st) == 2 and all(s.st_uid == 0 and s.st_mode & 0o777 == 0o600 for s in st) and
             os.stat(d).st_mode & 0o777 == 0o700,
             "the tenant's entries are root's, mode 0600, in a 0700 directory of the worker's "
             "state", [(oct(s.st_mode), s.st_uid) for s in st])

        # a job cannot reach the cache: it is not in its tree, and writing there fails
        probe = ("import os, sys\n"
                 "for p in sys.argv[1:]:\n"
                 "    try:\n"
                 "        os.listdir(p); print(p, 'LISTED')\n"
                 "    except OSError as e: print(p, 'list', e.errno)\n"
                 "    try:\n"
                 "        open(os.path.join(p, sys.argv[1].rsplit('/', 1)[-1]), 'w').write('x');"
                 " print(p, 'WROTE')\n"
                 "    except OSError as e: print(p, 'write', e.errno)\n")
        j = {"v": 1, "id": "ec-%d-probe" % os.getpid(), "tier": "cache", "tenant": "acme",
             "runtime": "python", "code": probe, "argv": [d, os.path.dirname(d)]}
        r = c.run_job(j, timeout=120)
        out = r.get("stdout", b"").decode()
        t.ok(r["status"] == "ok" and "LISTED" not in out and "WROTE" not in out and
             out.count(" list ") == 2 and out.count(" write ") == 2 and len(entries(d)) == 2,
             "a job on the tier can neither list nor write its tenant's cache on the host", out)

        # another tenant, another tier, a tier without the cache: each its own fetch
        before = counts()
        rb = run(c, "cache", ["/pkg/demo-1.0.tar.gz"], tenant="other")
        rn = run(c, "nocache", ["/pkg/demo-1.0.tar.gz"], tenant="acme")
        after = counts()
        t.ok(rb["status"] == "ok" and info_cache(rb) == "0 hits (0 bytes), 1 stored" and
             rn["status"] == "ok" and info_cache(rn) == "" and
             after["/pkg/demo-1.0.tar.gz"] - before["/pkg/demo-1.0.tar.gz"] == 2 and
             len(entries(cache_dir(c, "cache", "other"))) == 1 and
             not os.path.exists(os.path.join(c.dir, "state", "egress-cache", "nocache")),
             "another tenant does not read acme's entries (it fetches and keeps its own); a "
             "tier without cache_bytes keeps nothing", (info_cache(rb), info_cache(rn)))

        # a Range request and a request with a body are relayed, never stored
        code = ("import urllib.request, sys\n"
                "u = sys.argv[1]\n"
                "q = urllib.request.Request(u, headers={'Range': 'bytes=0-1'})\n"
                "print('range', urllib.request.urlopen(q, timeout=20).read())\n"
                "q = urllib.request.Request(u, data=b'x=1', method='GET')\n"
                "print('body', urllib.request.urlopen(q, timeout=20).read())\n"
                "print('plain', urllib.request.urlopen(u, timeout=20).read())\n")
        r = run(c, "cache", ["/pkg/range-1.0.tar.gz"], code=code)
        t.ok(r["status"] == "ok" and "range b'r1'" in r["stdout"] and
             "body b'r2'" in r["stdout"] and "plain b'r3'" in r["stdout"] and
             info_cache(r) == "0 hits (0 bytes), 1 stored",
             "a Range request and a GET with a body reach the server and are not kept; the "
             "plain GET after them is", r["stdout"])

        # a max-age runs out
        r1 = run(c, "cache", ["/soon.json"])
        time.sleep(2.2)
        r2 = run(c, "cache", ["/soon.json"])
        t.ok(r1["status"] == "ok" and r2["status"] == "ok" and
             info_cache(r1) == "0 hits (0 bytes), 1 stored" and
             info_cache(r2) == "0 hits (0 bytes), 1 stored" and
             r1["stdout"] != r2["stdout"],
             "an answer with max-age=1 is fetched again two seconds later",
             (r1["stdout"], r2["stdout"]))

        # the cap: an answer over it is not kept; the least recently used go first
        d = cache_dir(c, "cache", "acme")
        rh = run(c, "cache", ["/pkg/huge-1.0.tar.gz"])
        r1 = run(c, "cache", ["/pkg/big-1.0.tar.gz"])
        r2 = run(c, "cache", ["/pkg/big-2.0.tar.gz"])
        sizes = [os.path.getsize(os.path.join(d, n)) for n in entries(d)]
        again = run(c, "cache", ["/pkg/big-2.0.tar.gz", "/pkg/big-1.0.tar.gz"])
        t.ok(rh["status"] == "ok" and "got 2500000" in rh["stdout"] and
             info_cache(rh) == "" and
             info_cache(r1).endswith("1 stored") and info_cache(r2).endswith("1 stored") and
             sum(sizes) <= CAP and
             info_cache(again).startswith("1 hits (12") and
             "got 1200000" in again["stdout"],
             "an answer over cache_bytes is served but not kept; storing past the cap "
             "evicts the least recently used (the newest stays, the cache stays under %d "
             "bytes)" % CAP, (info_cache(rh), sizes, info_cache(again)))

        # the other boundaries: stored, then served
        tier_suite(c, "cache-ctr", "acme")
        tier_suite(c, "cache-vm", "acme")
    finally:
        c.close()
        srv.kill()
        srv.wait()
        INET.stop()
        subprocess.run(["rm", "-rf", WWW])
    t.done()


if __name__ == "__main__":
    main()
