#!/usr/bin/python3
"""Benchmark: an interpreter that lives for hours (issue 58). One session
per tier (process, container, microVM; the python image) through a real
redis-server, scheduler and worker, with the Python client over Redis,
runs N mixed calls (default 200): small prints, one 0.5 s computation in
ten, one 8 MiB allocation let go in twenty (a chart's rendering). Reports per tier the p50 and
p99 of each kind of call, and the worker's RSS and the sandbox's memory
(its cgroup's) at call 1 and call N, as a growth ratio (goal: under
1.10). Then the cost of the session's bookkeeping calls against a
print(1) call measured in the same run: info, a cancel of a finished
call, and fetching a call's answer by its id (goal: 1.0x or less).
Needs root and the python image (make images); the microVM row runs
under TCG here (no KVM), and fewer calls (N / 4).
Usage: session_long.py [N]"""
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402

import airlock  # noqa: E402
from session_latency import session_memory as sandbox_bytes  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
SESS = {"max_per_tenant": 8, "idle_s": 600, "max_life_s": 3600}
TIERS = {"trusted": "process", "internal": "container", "untrusted": "microvm"}
COMPUTE = "t0 = __import__('time').process_time()\nwhile __import__('time').process_time() - t0 < 0.5:\n    pass"
ALLOC = "len(bytearray(8 << 20))"  # 8 MiB made and let go: what a chart's rendering does


def ms(f):
    t0 = time.perf_counter()
    f()
    return (time.perf_counter() - t0) * 1000


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else 0.0


def main():
    pol = policy(*(tier_def(t, b, image="python", defaults=dict(DEFAULTS, wall_ms=30000),
                            sessions=SESS) for t, b in TIERS.items()), lease_ms=30000)
    c = Cluster(policy=pol)
    try:
        c.scheduler()
        proc = c.worker("bench-l", uid_base=61900, slots=4, tiers=",".join(TIERS),
                        extra=["--images", IMAGES,
                               "--vm-accel", os.environ.get("VM_ACCEL", "tcg")])
        cl = airlock.Client(redis=c.url)
        print("%-10s %6s %9s %9s %9s %9s %9s %9s %9s %9s" % (
            "tier", "calls", "print p50", "print p99", "0.5s p50", "alloc p50",
            "worker x", "sandbox x", "info x", "fetch x"))
        for tier in TIERS:
            n = N // 4 if tier == "untrusted" else N
            with cl.session(tier=tier, timeout=30) as s:
                times = {"print": [], "compute": [], "alloc": []}
                bookkeeping = {"print": [], "info": [], "cancel": [], "fetch": []}
                w0 = s0 = 0
                for i in range(1, n + 1):
                    kind = "compute" if i % 10 == 0 else "alloc" if i % 20 == 5 else "print"
                    code = COMPUTE if kind == "compute" else ALLOC if kind == "alloc" else \
                        "print(%d)" % i
                    times[kind].append(ms(lambda: s.run_python(code, call_id="c%d" % i)))
                    if i == 1:
                        w0, s0 = rss_kib(proc.pid), sandbox_bytes("bench-l")
                w1, s1 = rss_kib(proc.pid), sandbox_bytes("bench-l")
                for r in range(20):  # interleaved, against print(1) in the same run
                    bookkeeping["print"].append(ms(lambda: s.run_python("print(1)")))
                    bookkeeping["info"].append(ms(s.info))
                    bookkeeping["cancel"].append(ms(lambda: s.cancel("c1")))
                    bookkeeping["fetch"].append(ms(lambda: s.result("c%d" % (r + 1))))
            base = statistics.median(bookkeeping["print"])
            print("%-10s %6d %9.1f %9.1f %9.1f %9.1f %9.2f %9.2f %9.2f %9.2f" % (
                tier, n, statistics.median(times["print"]), pct(times["print"], 0.99),
                statistics.median(times["compute"]), statistics.median(times["alloc"]),
                w1 / max(1, w0), s1 / max(1, s0),
                statistics.median(bookkeeping["info"]) / base,
                statistics.median(bookkeeping["fetch"]) / base))
            print("%-10s cancel of a finished call: %.2fx a print(1) call (%.1f ms); worker RSS "
                  "%d -> %d KiB, sandbox memory %.1f -> %.1f MiB" % (
                      "", statistics.median(bookkeeping["cancel"]) / base, base, w0, w1,
                      s0 / 1048576, s1 / 1048576))
    finally:
        c.close()


if __name__ == "__main__":
    main()
