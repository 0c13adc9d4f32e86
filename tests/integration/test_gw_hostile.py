#!/usr/bin/python3
"""Hostile HTTP clients against airlock-gateway (the hardening issue,
findings 1, 3, 4 and 12), with a real redis-server, scheduler and worker.
Each attack is one that, before the fix, stopped the gateway for everyone:
  - headers without end (no key needed): 431 at the cap, the gateway's
    memory does not grow, and it serves the next client;
  - a request line without end: 414;
  - slowloris (connections that send a byte now and then, or nothing):
    dropped after the header timeout, and while they are held, a
    connection cap keeps the gateway's descriptors below its limit and a
    new client is still served once they go;
  - one tenant holding many long polls gets 429 past its share, and the
    other tenant's /v1/run, /wait and live output still work; a stream
    that cannot be served is an error status, never an empty 200;
  - a key file naming the reserved tenant "default" is refused."""
import os
import secrets
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, exchange, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import trusted  # noqa: E402
from gwclient import GATEWAY, Api, free_port, key_file, start_gateway  # noqa: E402

t = Tap()
need_root("the process backend")

POLICY = trusted()
KEYS = {"alpha": "ak-" + secrets.token_hex(16), "beta": "bk-" + secrets.token_hex(16)}


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def raw(port, data, timeout=10):
    return exchange(("127.0.0.1", port), data, timeout)


def status_of(resp):
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def job(code, **kw):
    j = {"tier": "trusted", "runtime": "python", "code": code}
    j.update(kw)
    return j


c = Cluster(policy=POLICY)
procs = []
try:
    # ---- 12: a reserved tenant name in the key file ----
    bad = key_file(os.path.join(c.dir, "reserved.keys"), {"default": "dk-" + secrets.token_hex(16)})
    p = subprocess.run([GATEWAY, "--redis", c.url, "--keys", bad], capture_output=True)
    t.ok(p.returncode == 2 and b'"default"' in p.stderr and b"reserved" in p.stderr,
         "12: a key for the reserved tenant \"default\" is refused at start, naming it", p.stderr)

    # ---- 1, 3: the unit's bounds, and a cap that does not fit the descriptors ----
    unit = open(os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "systemd",
                             "airlock-gateway.service")).read()
    nofile = [int(x.split("=")[1]) for x in unit.splitlines() if x.startswith("LimitNOFILE=")]
    t.ok("\nMemoryMax=" in unit and nofile and nofile[0] >= 1024 + 512 + 64,
         "1, 3: the gateway's unit has MemoryMax= and room in LimitNOFILE for its default cap",
         nofile)
    good = key_file(os.path.join(c.dir, "good.keys"), {"alpha": KEYS["alpha"]})
    p = subprocess.run(["prlimit", "--nofile=600:600", GATEWAY, "--redis", c.url, "--keys", good,
                        "--max-connections", "1024"], capture_output=True)
    t.ok(p.returncode == 2 and b"LimitNOFILE" in p.stderr,
         "3: a connection cap above what the descriptor limit holds is refused at start",
         p.stderr)

    c.scheduler()
    c.worker("gwh-w", uid_base=62950, slots=2)  # its own: it runs in a lane (tests/run.sh)
    keyfile = key_file(os.path.join(c.dir, "keys"), KEYS)
    port = free_port()
    # a small connection cap and header timeout, to reach them quickly
    start_gateway(c, port, keyfile, extra=("--max-connections", "64", "--header-timeout-s", "3",
                                           "--polls-per-tenant", "8"))
    api = Api(port)
    gw_pid = c.procs["gw"].pid
    A, B = KEYS["alpha"], KEYS["beta"]

    # ---- 1: headers without end ----
    rss0 = rss_kb(gw_pid)

    def endless_headers():
        yield b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
        line = b"X-Pad: " + b"a" * 1000 + b"\r\n"
        for _ in range(50 * 1024):  # 50 MiB if nobody stops it
            yield line

    resp = raw(port, endless_headers())
    t.ok(status_of(resp) == 431, "1: 50 MiB of headers: 431 Request Header Fields Too Large",
         resp[:200])
    grown = rss_kb(gw_pid) - rss0
    t.ok(grown < 8 * 1024, "1: the gateway grew by less than 8 MiB (%d KiB)" % grown)
    resp = raw(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 200 + b"\r\n")
    t.ok(status_of(resp) == 200, "1: 200 headers (well under the cap) are still served", resp[:200])
    resp = raw(port, b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\n\r\n")
    t.ok(status_of(resp) == 414, "1: a 100 kB request line: 414 URI Too Long", resp[:200])
    st, body = api.call("GET", "/healthz")
    t.ok(st == 200, "1: the gateway serves the next client", (st, body))

    # ---- 3: slowloris ----
    fds0 = nfds(gw_pid)
    socks = []
    for i in range(120):  # more than the cap of 64
        try:
            s = socket.create_connection(("127.0.0.1", port), 2)
            s.sendall(b"GET /healthz HTTP/1.1\r\n")
            socks.append(s)
        except OSError:
            break
    time.sleep(0.5)
    t.ok(nfds(gw_pid) <= fds0 + 64 + 2,
         "3: 120 slow connections: the gateway holds at most its cap of 64 (%d descriptors, "
         "%d before)" % (nfds(gw_pid), fds0))
    # one keeps trickling a byte a second: the header timeout is total, not idle
    trickle = socks.pop(0)  # the first: accepted, so its header clock runs
    t0 = time.time()
    closed_after = None
    while time.time() - t0 < 10:
        try:
            trickle.sendall(b"X")
            trickle.settimeout(1)
            if trickle.recv(100) == b"":
                closed_after = time.time() - t0
                break
        except socket.timeout:
            continue
        except OSError:
            closed_after = time.time() - t0
            break
    t.ok(closed_after is not None and closed_after < 6,
         "3: a connection trickling a byte a second is dropped by the 3 s header timeout "
         "(after %s s)" % (closed_after and round(closed_after, 1)))
    # once the timeout has cleared them, a client queued behind the cap is served
    t0 = time.time()
    st, body = api.call("GET", "/healthz", timeout=20)
    waited = time.time() - t0
    t.ok(st == 200, "3: a new client behind 120 slow ones is served (after %.1f s)" % waited,
         (st, body))
    for s in socks:
        s.close()
    time.sleep(0.3)
    # nothing at all sent: dropped too
    s = socket.create_connection(("127.0.0.1", port), 2)
    s.settimeout(8)
    t0 = time.time()
    try:
        gone = s.recv(10) == b""
    except OSError:
        gone = True
    t.ok(gone and time.time() - t0 < 6, "3: a connection that sends nothing is closed by the "
         "header timeout (%.1f s)" % (time.time() - t0))
    s.close()

    # ---- 4: one tenant's long polls ----
    st, body = api.call("POST", "/v1/jobs", job("import time; time.sleep(30)"), key=A)
    slow = body.get("id")
    holders, codes = [], []

    def hold():
        st2, _ = Api(port).call("GET", "/v1/jobs/%s/wait?timeout_ms=20000" % slow, key=A,
                                timeout=40)
        codes.append(st2)

    for _ in range(12):  # its share is 8
        th = threading.Thread(target=hold)
        th.start()
        holders.append(th)
    time.sleep(1.5)
    st, body = api.call("GET", "/v1/jobs/%s/wait?timeout_ms=1000" % slow, key=A)
    t.ok(st == 429 and "long polls" in body.get("error", ""),
         "4: a tenant past its share of long polls gets 429 saying why", (st, body))
    st, body = api.call("POST", "/v1/run", job("print(6*7)"), key=B)
    t.ok(st == 200 and body.get("result", {}).get("stdout") == "42\n",
         "4: while alpha holds its share, beta's /v1/run works", (st, body))
    st, body = api.call("POST", "/v1/jobs", job("print('out'); import time; time.sleep(1)"), key=B)
    bid = body.get("id")
    resp = raw(port, ("GET /v1/jobs/%s/output HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s"
                      "\r\n\r\n" % (bid, B)).encode(), timeout=30)
    t.ok(status_of(resp) == 200 and b"event: end" in resp and b"out" in resp,
         "4: beta's live output streams to its end", resp[-300:])
    resp = raw(port, ("GET /v1/jobs/%s/output HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s"
                      "\r\n\r\n" % (slow, A)).encode(), timeout=30)
    t.ok(status_of(resp) == 429, "4: alpha's stream past its share is a 429, not an empty 200",
         resp[:300])
    for th in holders:
        th.join()
    t.ok(codes.count(429) == 4 and codes.count(202) + codes.count(200) == 8,
         "4: of alpha's 12 waits, 8 (its share) waited (for the result or their time out), "
         "the other 4 got 429", codes)
finally:
    c.close()
t.done()
