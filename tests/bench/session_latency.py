#!/usr/bin/python3
"""Benchmark: a call in an open session against a one-shot job on the same
tier, through a real redis-server, scheduler and worker, with the Python
client over Redis: run_python("print(1)") in a session, and the job
print(1) (submit, wait), interleaved round by round, on the process and
container tiers. Also: the time to open a session per tier, and the host
memory an open, idle session holds (the worker's cgroups' memory.usage
of the session's sandbox). Reports medians and ratios against the job in
the same run. Needs root and the python image (make images).
Usage: session_latency.py [ROUNDS]

The microVM rows (QEMU, TCG here: no KVM) use fewer job rounds: each is a
cold boot of seconds."""
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

N = int(sys.argv[1]) if len(sys.argv) > 1 else 40
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
SESS = {"max_per_tenant": 8, "idle_s": 600, "max_life_s": 3600}
TIERS = {"trusted": "process", "internal": "container", "untrusted": "microvm"}
JOB_ROUNDS = {"untrusted": 5}


def ms(f):
    t0 = time.perf_counter()
    f()
    return (time.perf_counter() - t0) * 1000


def session_memory(worker):
    """Bytes of memory the worker's sandbox cgroups hold now (v1 or v2)."""
    total = 0
    for root in ("/sys/fs/cgroup/memory/airlock/" + worker, "/sys/fs/cgroup/airlock/" + worker):
        for d, _, files in os.walk(root):
            for f in ("memory.usage_in_bytes", "memory.current"):
                if f in files and d != root and os.path.basename(d) not in ("process",
                                                                           "container"):
                    with open(os.path.join(d, f)) as fh:
                        total += int(fh.read())
    return total


def main():
    pol = policy(*(tier_def(t, b, image="python", defaults=DEFAULTS, sessions=SESS)
                   for t, b in TIERS.items()), lease_ms=30000)
    c = Cluster(policy=pol)
    try:
        c.scheduler()
        c.worker("bench-s", uid_base=61700, slots=4, tiers=",".join(TIERS),
                 extra=["--images", IMAGES, "--vm-accel", os.environ.get("VM_ACCEL", "tcg")])
        cl = airlock.Client(redis=c.url)
        print("Sessions: print(1) in an open session vs a one-shot job on the same tier "
              "(%d rounds, interleaved)" % N)
        print("%-9s %-10s %13s %13s %9s %13s %16s" % ("tier", "backend", "job p50 ms",
                                                      "call p50 ms", "speedup", "open p50 ms",
                                                      "idle MiB/session"))
        call_p50 = {}
        for tier, backend in TIERS.items():
            opens, jobs, calls = [], [], []
            for _ in range(3):
                t0 = time.perf_counter()
                s = cl.session(tier=tier)
                opens.append((time.perf_counter() - t0) * 1000)
                s.close()
            base = session_memory("bench-s")
            s = cl.session(tier=tier)
            s.run_python("print(1)")
            time.sleep(0.5)
            idle = session_memory("bench-s") - base
            for i in range(N):
                if i < JOB_ROUNDS.get(tier, N):
                    jobs.append(ms(lambda: cl.run("print(1)", tier=tier)))
                calls.append(ms(lambda: s.run_python("print(1)")))
            s.close()
            j, k = statistics.median(jobs), statistics.median(calls)
            call_p50[backend] = k
            print("%-9s %-10s %13.1f %13.2f %8.1fx %13.1f %16.1f" % (
                tier, backend, j, k, j / k, statistics.median(opens), idle / (1 << 20)))
        if "microvm" in call_p50 and "process" in call_p50:
            print("a microVM session's call / a process session's: %.1fx" % (
                call_p50["microvm"] / call_p50["process"]))
    finally:
        c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
