#!/usr/bin/python3
"""The egress cache over https (egress: {cache_https: true}): the worker's
proxy ends a job's TLS itself with a leaf of the worker's own CA (in the
job's trust bundle), checks the real server's certificate against the
host's store and the tier's ca_file, and keeps what is cacheable per
tenant and tier as it does for plain HTTP, so that the second `pip install`
and `npm install` of the same packages do not download them again.
Through the real queue on process, container and microVM, against a
counting package index over TLS in a network namespace this test makes
(10.237.N.0/24, a certificate made here that the tier's ca_file names).
Checked: pip's wheel and npm's tarball are stored on the first run and
served on the second without reaching the server (transcript and
info.egress_cache), on every boundary; the job sees the worker CA's leaf
where the tier ends https and the server's own certificate where it does
not; another tenant fetches for itself; a server whose certificate the
tier does not trust is refused with the reason (502 inside the tunnel); a
client that does not trust the bundle fails with a transcript that says
so; a POST is relayed, never kept; CONNECT with a protocol other than TLS
stays a byte tunnel; the CA's key is root's and no job can read it."""
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from pkgs import npm_package, wheel, wheel_name  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402
from testinet import TestInternet  # noqa: E402

t = Tap()
need_root()

WWW = "/var/tmp/airlock-hcache-%d" % os.getpid()
INET = TestInternet("hcache", 237, WWW)
NET, SRV = INET.net, INET.srv
CA = os.path.join(WWW, "ca.pem")  # the index's own certificate (self-signed): the tiers' ca_file
ROGUE = os.path.join(WWW, "rogue.pem")  # another, which no tier trusts

# The counting index: /simple/ and the wheel for pip, /npm/ for npm, a POST
# sink, /count; over TLS on 8443 (CA) and 8444 (ROGUE), plain on 8001.
SERVER = r'''
import http.server, json, os, ssl, sys, threading, urllib.parse
srv, www = sys.argv[1], sys.argv[2]
counts = {}
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, body, ctype="application/octet-stream"):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def count(self, p):
        with lock:
            counts[p] = counts.get(p, 0) + 1
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        if u.path == "/count":
            with lock:
                return self.send(json.dumps(counts).encode())
        self.count(u.path)
        f = os.path.join(www, "files", u.path.strip("/").replace("/", "_"))
        if os.path.isfile(f):
            with open(f, "rb") as fh:
                body = fh.read()
            return self.send(body, "application/json" if u.path.startswith("/npm/") and
                             not u.path.endswith(".tgz") else "text/html"
                             if u.path.startswith("/simple/") else "application/octet-stream")
        self.send_error(404)
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n)
        self.count(self.path)
        self.send(b"posted %d %d" % (len(data), counts[self.path]))
def serve(port, cert):
    s = http.server.ThreadingHTTPServer((srv, port), H)
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    threading.Thread(target=s.serve_forever, daemon=True).start()
serve(8443, sys.argv[3])
serve(8444, sys.argv[4])
serve(8001, None)
threading.Event().wait()
'''

ALLOW = ["%s.0/24:8443" % NET, "%s.0/24:8444" % NET, "%s.0/24:8001" % NET]
KEYS = {"egress": {"allow": ALLOW, "cache_bytes": 20000000, "cache_https": True,
                   "ca_file": CA},
        "defaults": dict(DEFAULTS, wall_ms=240000, memory_bytes=1073741824)}
PLAIN = {"egress": {"allow": ALLOW, "cache_bytes": 20000000, "ca_file": CA},
         "defaults": dict(DEFAULTS, wall_ms=120000, memory_bytes=536870912)}
POLICY = policy(tier_def("hc", "process", images=["python", "node"], image="python", **KEYS),
                tier_def("hc-ctr", "container", image="python", **KEYS),
                tier_def("hc-vm", "microvm", image="python", **KEYS),
                tier_def("hc-plain", "process", image="python", **PLAIN))

SEQ = iter(range(1, 1 << 30))
WHL = "/pkg/" + wheel_name("hcache-demo", "1.0")
TGZ = "/npm/hcache-npm/-/hcache-npm-1.0.0.tgz"

PIP = ("pip install --disable-pip-version-check --index-url https://%s:8443/simple/ "
       "hcache-demo >pip.log 2>&1; echo pip $?; tail -3 pip.log\n"
       "python3 -c 'import hcache_demo; print(\"value\", hcache_demo.VALUE)'\n" % SRV)
NPM = ("npm install --no-audit --no-fund --registry https://%s:8443/npm/ hcache-npm "
       ">npm.log 2>&1; echo npm $?; tail -5 npm.log\n"
       "node -e 'console.log(\"value\", require(\"hcache-npm\").value)'\n" % SRV)

# What certificate the job is shown for SRV:8443 (CONNECT by hand, the
# bundle's trust), then the rogue server through urllib, a client that
# trusts only the index's CA (not the bundle), a POST, and plain HTTP inside
# a CONNECT.
PROBE = r'''
import os, socket, ssl, sys, urllib.request
srv = sys.argv[1]
proxy = os.environ["HTTPS_PROXY"].split("//")[1].rstrip("/")
host, port = proxy.rsplit(":", 1)
def tunnel(target):
    s = socket.create_connection((host, int(port)), 10)
    s.sendall(b"CONNECT %s HTTP/1.1\r\n\r\n" % target.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    return s
ctx = ssl.create_default_context()
c = ctx.wrap_socket(tunnel(srv + ":8443"), server_hostname=srv)
issuer = dict(x[0] for x in c.getpeercert()["issuer"])
print("issuer", issuer.get("commonName"))
c.close()
try:
    urllib.request.urlopen("https://%s:8444/simple/" % srv, timeout=20).read()
    print("rogue fetched")
except urllib.error.HTTPError as e:
    print("rogue", e.code, e.read().decode().strip()[:300])
except Exception as e:
    print("rogue error", type(e).__name__)
only = ssl.create_default_context(cafile=sys.argv[2])
try:
    only.wrap_socket(tunnel(srv + ":8443"), server_hostname=srv).close()
    print("distrust connected")
except ssl.SSLError as e:
    print("distrust refused", e.reason)
for _ in range(2):
    r = urllib.request.urlopen(urllib.request.Request(
        "https://%s:8443/post" % srv, data=b"x" * 1000, method="POST"), timeout=20)
    print("post", r.read().decode())
s = tunnel(srv + ":8001")
s.sendall(b"GET /count HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
print("plain", s.recv(100).split(b"\r\n")[0].decode())
'''


def run(c, tier, code, tenant="acme", runtime="sh", timeout=400, **kw):
    j = {"v": 1, "id": "hc-%d-%d" % (os.getpid(), next(SEQ)), "tier": tier, "tenant": tenant,
         "runtime": runtime, "code": code, "network": "egress"}
    j.update(kw)
    r = c.run_job(j, timeout=timeout)
    if r is None:  # the worker's end, for the reader
        print("# no result for %s; the worker's log ends:\n# %s" %
              (j["id"], c.log("w1")[-3000:].replace("\n", "\n# ")))
        r = {"status": "none"}
    for k in ("stdout", "stderr"):
        r[k] = r.get(k, b"").decode(errors="replace")
    return r


def counts():
    ctx = ssl.create_default_context(cafile=CA)
    with urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                     urllib.request.HTTPSHandler(context=ctx)).open(
            "https://%s:8443/count" % SRV, timeout=10) as f:
        return json.loads(f.read())


def info_cache(r):
    return r.get("info", {}).get("egress_cache", "")


def hits(r):
    return [e for e in r.get("egress", []) if e["why"].endswith("; served from the cache")]


def make_index():
    os.makedirs(os.path.join(WWW, "files"))
    for path, cn in ((CA, SRV), (ROGUE, SRV)):
        key = path + ".key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=" + cn, "-addext", "subjectAltName=IP:" + SRV,
                        "-keyout", key, "-out", path], check=True, capture_output=True)
        with open(key, "a") as k, open(path) as c:
            k.write(c.read())
        os.chmod(path, 0o644)

    def put(path, data):
        with open(os.path.join(WWW, "files", path.strip("/").replace("/", "_")), "wb") as f:
            f.write(data)
    put(WHL, wheel("hcache-demo", "1.0", {"hcache_demo/__init__.py": b"VALUE = 7\n",
                                           "hcache_demo/pad.bin": os.urandom(200000)}))
    put("/simple/hcache-demo/", ('<html><body><a href="../../pkg/%s">%s</a></body></html>\n'
                                 % (wheel_name("hcache-demo", "1.0"),
                                    wheel_name("hcache-demo", "1.0"))).encode())
    tgz, meta = npm_package("hcache-npm", "1.0.0", b"module.exports = {value: 8};\n",
                            "https://%s:8443%s" % (SRV, TGZ))
    put(TGZ, tgz)
    put("/npm/hcache-npm", json.dumps(meta).encode())


def twice(c, tier, code, path, what, tenant="acme", **kw):
    """Stored on the first run, served on the second without the server."""
    before = counts().get(path, 0)
    r1 = run(c, tier, code, tenant=tenant, **kw)
    r2 = run(c, tier, code, tenant=tenant, **kw)
    got = counts().get(path, 0) - before
    ok1 = "%s 0" % what in r1["stdout"] and "value" in r1["stdout"]
    ok2 = "%s 0" % what in r2["stdout"] and "value" in r2["stdout"]
    ended = [e for e in r1.get("egress", []) if "https ended by the proxy for its cache" in
             e["why"]]
    t.ok(r1["status"] == "ok" and r2["status"] == "ok" and ok1 and ok2 and got == 1 and
         info_cache(r1).endswith(" stored") and not info_cache(r1).endswith(" 0 stored") and
         info_cache(r2).startswith("1 hits (") and
         any(e["why"].endswith("; stored in the cache") for e in ended) and
         len(hits(r2)) == 1 and hits(r2)[0]["addr"] == SRV and hits(r2)[0]["port"] == 8443,
         "%s: %s install over https: its package stored on the first run (the proxy ended "
         "the TLS), served from the cache on the second without reaching the server "
         "(fetched %d times)" % (tier, what, got),
         (info_cache(r1), info_cache(r2), r1["stdout"][-600:], r2["stdout"][-600:],
          [e["why"] for e in r1.get("egress", [])]))
    return r2


def main():
    make_index()
    INET.start()
    srv = subprocess.Popen(["ip", "netns", "exec", INET.ns, "/usr/bin/python3", "-c", SERVER,
                            SRV, WWW, CA + ".key", ROGUE + ".key"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = Cluster(policy=POLICY)
    try:
        for _ in range(100):
            try:
                counts()
                break
            except OSError:
                time.sleep(0.1)
        c.scheduler()
        c.worker("w1", slots=2, tiers="hc,hc-ctr,hc-vm,hc-plain")
        state = os.path.join(c.dir, "state")
        cadir = os.path.join(state, "egress-ca")
        key = os.path.join(cadir, "ca.key")
        c.wait_for(lambda: os.path.exists(os.path.join(cadir, "ca.pem")), timeout=20)
        if not t.ok(c.procs["w1"].poll() is None, "the worker starts", c.log("w1")[-1000:]):
            return
        t.ok(os.path.isfile(key) and os.stat(key).st_mode & 0o777 == 0o600 and
             os.stat(cadir).st_mode & 0o777 == 0o700 and os.stat(key).st_uid == 0,
             "the worker made its CA at start (a tier has cache_https): the key root's, 0600, "
             "in a 0700 directory of its state", c.log("w1")[-2000:])

        if not os.environ.get("HC_QUICK"):
            twice(c, "hc", PIP, WHL, "pip")
            twice(c, "hc", NPM, TGZ, "npm", image="node")

        # the certificate the job sees, a server the tier does not trust, a
        # client that does not trust the bundle, a POST, plain HTTP in a CONNECT
        before = counts()
        r = run(c, "hc", PROBE, runtime="python", argv=[SRV, "/work/ca.pem"],
                files=[{"path": "ca.pem", "data": open(CA, "rb").read()}])
        out = r["stdout"]
        why = [e["why"] for e in r.get("egress", [])]
        t.ok(r["status"] == "ok", "the probe runs", r)
        t.ok("issuer Airlock egress cache CA" in out,
             "where the tier ends https, the job is shown a leaf of the worker's CA (which "
             "its bundle trusts)", (out, r["stderr"][-500:]))
        t.ok("rogue 502" in out and "airlock egress: " in out and
             any("TLS with the server for %s failed" % SRV in w and "self-signed" in w
                 for w in why),
             "a server whose certificate the tier does not trust: 502 inside the tunnel, "
             "the transcript says why (the proxy never vouches for it)", (out, why))
        t.ok("distrust refused" in out and
             any("the job's TLS with the proxy failed" in w and "bundle" in w for w in why),
             "a client trusting only its own CA refuses the proxy's leaf; the transcript says "
             "to trust the bundle", (out, why))
        after = counts()
        t.ok(out.count("post posted 1000 ") == 2 and
             after.get("/post", 0) - before.get("/post", 0) == 2 and
             info_cache(r) in ("", "0 hits (0 bytes), 0 stored"),
             "a POST inside https reaches the server each time and is never kept",
             (out, info_cache(r)))
        t.ok("plain HTTP/1.1 200" in out,
             "CONNECT carrying plain HTTP (not TLS) stays a byte tunnel", out)

        # the CA's key is not the job's
        r = run(c, "hc", "ls -la %s %s/ca.key /var/lib/airlock/egress-ca 2>&1; "
                "cat %s/ca.key 2>&1 | head -c 60; echo; "
                "grep -c 'BEGIN CERTIFICATE' $SSL_CERT_FILE" % (cadir, cadir, cadir))
        t.ok(r["status"] == "ok" and "PRIVATE KEY" not in r["stdout"] and
             "No such file" in r["stdout"],
             "the job sees neither the worker's CA directory nor its key", r["stdout"])
        with open(os.path.join(cadir, "ca.pem")) as f:
            capem = f.read().strip()
        r = run(c, "hc", "cat $SSL_CERT_FILE; echo; echo NODE=$NODE_EXTRA_CA_CERTS "
                "PIP=$PIP_CERT")
        t.ok(r["status"] == "ok" and capem in r["stdout"] and
             open(CA).read().strip() in r["stdout"] and
             "NODE=/work/.airlock/ca-certificates.crt PIP=/work/.airlock/ca-certificates.crt"
             in r["stdout"],
             "the job's bundle holds the worker's CA certificate and the tier's ca_file; "
             "SSL_CERT_FILE, NODE_EXTRA_CA_CERTS and PIP_CERT point at it", r["stdout"][-300:])

        # another tenant: its own fetch, its own entry
        before = counts().get(WHL, 0)
        r = run(c, "hc", PIP, tenant="other")
        t.ok(r["status"] == "ok" and "pip 0" in r["stdout"] and
             counts().get(WHL, 0) - before == 1 and not hits(r) and
             info_cache(r).endswith("1 stored"),
             "another tenant does not read acme's https entries: it fetches and keeps its own",
             (info_cache(r), r["stdout"][-300:]))

        # a tier without cache_https: the job's TLS is its own, nothing kept
        before = counts().get(WHL, 0)
        r = run(c, "hc-plain", PIP)
        r2 = run(c, "hc-plain", PROBE.split("try:")[0], runtime="python", argv=[SRV])
        t.ok(r["status"] == "ok" and "pip 0" in r["stdout"] and
             counts().get(WHL, 0) - before == 1 and info_cache(r) == "" and
             ("issuer %s" % SRV) in r2["stdout"],
             "a tier with the cache but not cache_https: CONNECT is the job's own TLS (it sees "
             "the server's certificate), nothing of it kept",
             (info_cache(r), r2["stdout"], r2["stderr"][-300:]))

        # the other boundaries
        twice(c, "hc-ctr", PIP, WHL, "pip")
        twice(c, "hc-vm", PIP, WHL, "pip")
    finally:
        c.close()
        srv.kill()
        srv.wait()
        INET.stop()
        subprocess.run(["rm", "-rf", WWW])
    t.done()


if __name__ == "__main__":
    main()
