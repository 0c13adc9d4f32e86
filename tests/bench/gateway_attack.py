#!/usr/bin/python3
"""Gateway under attack (the hardening issue's soak): a steady tenant reads
its job's result over one kept-alive connection (GET /v1/jobs/ID, then a
POST /v1/run of a no-op job every 10th request) while, at the same time, a
second client sends oversized headers in a loop, holds slowloris
connections well past the connection cap, and (as a second tenant) holds
more long polls than its share. The steady tenant's p50 and p99 are
reported against a run without the attack, measured in the same process,
rounds interleaved. Prints a table; no target is asserted (shared, noisy
machines): the ratio is the figure.

    gateway_attack.py [ROUNDS] [REQUESTS_PER_ROUND]"""
import http.client
import json
import os
import resource
import secrets
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cluster import Cluster  # noqa: E402
from gwclient import free_port, key_file, start_gateway  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
N = int(sys.argv[2]) if len(sys.argv) > 2 else 400
POLICY = """\
result_ttl_s: 600
lease_ms: 30000
tiers:
  bench: {backend: noop}
  idle: {backend: noop}     # no worker serves it: its jobs wait, for long polls
"""
KEYS = {"steady": "sk-" + secrets.token_hex(16), "hostile": "hk-" + secrets.token_hex(16)}


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


class Attack:
    """Oversized headers, slowloris and long polls, until stopped."""

    def __init__(self, port, slow_id):
        self.port, self.slow_id, self.stop = port, slow_id, threading.Event()
        self.threads = [threading.Thread(target=f, daemon=True)
                        for f in (self.headers, self.slowloris, self.polls)]
        self.sent = {"headers": 0, "slowloris": 0, "polls": 0}

    def start(self):
        for th in self.threads:
            th.start()

    def end(self):
        self.stop.set()
        for th in self.threads:
            th.join(30)

    def headers(self):
        pad = b"X-Pad: " + b"a" * 8000 + b"\r\n"
        while not self.stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", self.port), 5)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + pad * 64)  # 512 KiB
                s.settimeout(5)
                s.recv(100)
                s.close()
                self.sent["headers"] += 1
            except OSError:
                time.sleep(0.01)

    def slowloris(self):
        socks = []
        while not self.stop.is_set():
            while len(socks) < 1500 and not self.stop.is_set():
                try:
                    s = socket.create_connection(("127.0.0.1", self.port), 2)
                    s.setblocking(False)
                    s.send(b"GET /healthz HTTP/1.1\r\n")
                    socks.append(s)
                    self.sent["slowloris"] += 1
                except OSError:
                    break
            for s in list(socks):  # a byte now and then; dropped ones replaced
                try:
                    s.send(b"X")
                except OSError:
                    socks.remove(s)
                    s.close()
            time.sleep(0.5)
        for s in socks:
            s.close()

    def polls(self):
        def one():
            while not self.stop.is_set():
                try:
                    h = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                    h.request("GET", "/v1/jobs/%s/wait?timeout_ms=3000" % self.slow_id,
                              headers={"Authorization": "Bearer " + KEYS["hostile"]})
                    h.getresponse().read()
                    h.close()
                    self.sent["polls"] += 1
                except OSError:
                    time.sleep(0.05)
        ths = [threading.Thread(target=one, daemon=True) for _ in range(300)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()


def steady(port, done_id, n):
    """n requests over one kept-alive connection: latencies in ms."""
    h = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    auth = {"Authorization": "Bearer " + KEYS["steady"], "Content-Type": "application/json"}
    lat, bad = [], 0
    run = json.dumps({"tier": "bench", "runtime": "sh", "code": "true"})
    for i in range(n):
        t0 = time.perf_counter()
        try:
            if i % 10 == 9:
                h.request("POST", "/v1/run", body=run, headers=auth)
            else:
                h.request("GET", "/v1/jobs/%s" % done_id, headers=auth)
            r = h.getresponse()
            r.read()
            if r.status != 200:
                bad += 1
        except (OSError, http.client.HTTPException):
            bad += 1
            h.close()
            h = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        lat.append((time.perf_counter() - t0) * 1000)
    h.close()
    return lat, bad


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 1500 + 300 sockets
    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        c.worker("gwa-w", slots=4, tiers="bench", extra=["--allow-noop"])
        port = free_port()
        start_gateway(c, port, key_file(os.path.join(c.dir, "keys"), KEYS),
                      extra=("--max-connections", "1024", "--header-timeout-s", "5"))
        h = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        h.request("POST", "/v1/run", body=json.dumps({"tier": "bench", "runtime": "sh",
                                                      "code": "true"}),
                  headers={"Authorization": "Bearer " + KEYS["steady"]})
        done_id = json.loads(h.getresponse().read())["id"]
        h.request("POST", "/v1/jobs", body=json.dumps({"tier": "idle", "runtime": "sh",
                                                       "code": "true"}),
                  headers={"Authorization": "Bearer " + KEYS["hostile"]})
        slow_id = json.loads(h.getresponse().read())["id"]
        h.close()
        steady(port, done_id, 100)  # warm-up
        base, hit, bad_base, bad_hit, sent = [], [], 0, 0, None
        for _ in range(ROUNDS):
            lat, bad = steady(port, done_id, N)
            base += lat
            bad_base += bad
            a = Attack(port, slow_id)
            a.start()
            time.sleep(3)  # the attack at full strength
            lat, bad = steady(port, done_id, N)
            a.end()
            hit += lat
            bad_hit += bad
            sent = a.sent
            time.sleep(6)  # slowloris leftovers time out
        rss = int([ln for ln in open("/proc/%d/status" % c.procs["gw"].pid)
                   if ln.startswith("VmRSS:")][0].split()[1])
    finally:
        c.close()
    print("gateway under attack: a steady tenant's requests over one kept-alive connection, "
          "%d rounds of %d, interleaved without/with the attack" % (ROUNDS, N))
    print("attack per round (last): %d oversized-header requests (512 KiB each), %d slowloris "
          "connections opened (1500 held, past a cap of 1024), %d long polls by a second tenant "
          "(300 at once, share 256)" % (sent["headers"], sent["slowloris"], sent["polls"]))
    print("| run | p50 ms | p99 ms | failed |")
    print("| --- | --- | --- | --- |")
    print("| without attack | %.2f | %.2f | %d |" % (pct(base, .5), pct(base, .99), bad_base))
    print("| under attack | %.2f | %.2f | %d |" % (pct(hit, .5), pct(hit, .99), bad_hit))
    print("ratio under/without: p50 %.2fx, p99 %.2fx; gateway RSS after: %d KiB"
          % (pct(hit, .5) / pct(base, .5), pct(hit, .99) / pct(base, .99), rss))
    return 0


if __name__ == "__main__":
    sys.exit(main())
