#!/usr/bin/python3
"""Benchmark: the egress proxy against a direct connection, in one run, to a
server inside a network namespace this benchmark makes (as test_egress.py):

  ttfb      connect + GET of a 16-byte file to its first response byte,
            direct vs through the proxy (CONNECT-free plain HTTP), ROUNDS
            interleaved rounds; target: proxy p50 <= direct p50 + 1 ms
  transfer  a 100 MB file, direct vs through the proxy, 7 rounds each,
            interleaved; target: proxy rate >= 80 % of direct

The proxy is the worker's own (worker/proxy.c) run alone by
build/tests/egress_tool, allowed the server's range.
Usage: egress_latency.py [ROUNDS]   (root)"""
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from testinet import TestInternet  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
BUILD = os.environ.get("BUILD", "build")
BIG = 100 << 20
TRANSFERS = 7


def request(addr, target):
    s = socket.create_connection(addr, 10)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: server\r\nConnection: close\r\n\r\n"
              % target.encode())
    return s


def ttfb(addr, target):
    t0 = time.perf_counter()
    s = request(addr, target)
    s.recv(1)
    ms = (time.perf_counter() - t0) * 1000
    while s.recv(65536):
        pass
    s.close()
    return ms


def transfer(addr, target):
    t0 = time.perf_counter()
    s = request(addr, target)
    n = 0
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        n += len(b)
    s.close()
    if n < BIG:
        raise RuntimeError("short transfer: %d bytes" % n)
    return n / (time.perf_counter() - t0) / 1e6


def main():
    if os.geteuid() != 0:
        print("needs root")
        return 1
    www = tempfile.mkdtemp(prefix="airlock-bench-inet-", dir="/var/tmp")
    with open(os.path.join(www, "small"), "wb") as f:
        f.write(b"0123456789abcdef")
    with open(os.path.join(www, "big"), "wb") as f:
        f.truncate(BIG)
    inet = TestInternet("bench", 232, www)
    srv = inet.srv
    tool = None
    try:
        inet.start()
        portf = os.path.join(www, "port")
        tool = subprocess.Popen([os.path.join(BUILD, "tests", "egress_tool"), portf, "0", "0",
                                 "10.232.0.0/16:8000"], stdout=subprocess.DEVNULL)
        for _ in range(100):
            if os.path.exists(portf):
                break
            time.sleep(0.1)
        with open(portf) as f:
            proxy = ("127.0.0.1", int(f.read()))
        direct = (srv, 8000)
        url = "http://%s:8000" % srv
        lat = {"direct": [], "proxy": []}
        for i in range(ROUNDS + 5):  # 5 warm-up rounds dropped
            order = (("direct", direct, "/small"), ("proxy", proxy, url + "/small"))
            for name, addr, target in (order if i % 2 else order[::-1]):
                ms = ttfb(addr, target)
                if i >= 5:
                    lat[name].append(ms)
        rate = {"direct": [], "proxy": []}
        for i in range(TRANSFERS):
            order = (("direct", direct, "/big"), ("proxy", proxy, url + "/big"))
            for name, addr, target in (order if i % 2 else order[::-1]):
                rate[name].append(transfer(addr, target))
    finally:
        if tool:
            tool.send_signal(signal.SIGTERM)
            tool.wait(10)
        inet.stop()
    d50, p50 = statistics.median(lat["direct"]), statistics.median(lat["proxy"])
    print("egress proxy vs direct, to a server in a network namespace, %d interleaved rounds"
          % ROUNDS)
    print("time to first byte (connect + GET 16 B): direct p50 %.3f ms, proxy p50 %.3f ms: "
          "+%.3f ms (target <= +1 ms)" % (d50, p50, p50 - d50))
    rd, rp = statistics.median(rate["direct"]), statistics.median(rate["proxy"])
    print("100 MB transfer: direct %.0f MB/s, proxy %.0f MB/s: %.0f %% (target >= 80 %%)"
          % (rd, rp, 100 * rp / rd))
    return 0


if __name__ == "__main__":
    sys.exit(main())
