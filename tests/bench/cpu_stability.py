#!/usr/bin/python3
"""How stable a job's CPU time is, measured by its cgroup (the result's
cpu_ms), against its wall-clock time (wall_ms), with the machine idle and
under load: the same CPU-bound test (a fixed Python loop) run N times on the
process backend; the load is one busy process per core, started here and
stopped by PID. A grader's CPU-time verdict (cpu_limit) rests on cpu_ms, so
its spread under load is what a time limit must allow for. Prints min,
median, max and the spread (max - min) / median of each. Usage:
cpu_stability.py [N]"""
import multiprocessing
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from alclient import Client  # noqa: E402
from cluster import Cluster  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
POLICY = """\
result_ttl_s: 600
lease_ms: 30000
tiers:
  grade:
    backend: process
    defaults: {wall_ms: 60000, cpu_ms: 60000, memory_bytes: 268435456, pids: 64}
"""
WORK = b"n = 0\nfor i in range(6_000_000):\n    n += i * i % 7\nprint(n)\n"


def spin():
    while True:
        pass


def runs(cl, n):
    cpu, wall = [], []
    for _ in range(n):
        code, jid = cl.submit({"tier": "grade", "runtime": "python", "code": WORK})
        r = cl.wait(jid, 120)
        if not r or r["status"] != "ok":
            raise RuntimeError("job: %r" % r)
        cpu.append(r["cpu_ms"])
        wall.append(r["wall_ms"])
    return cpu, wall


def summary(v):
    v = sorted(v)
    med = v[len(v) // 2]
    return "%6d %6d %6d  %5.1f %%" % (v[0], med, v[-1], 100.0 * (v[-1] - v[0]) / med)


def main():
    c = Cluster(policy=POLICY)
    hogs = []
    try:
        c.scheduler()
        c.worker("cpu-w", uid_base=64300, slots=1, tiers="grade")
        cl = Client(unix=c.sock)
        runs(cl, 2)  # warm
        idle = runs(cl, N)
        for _ in range(os.cpu_count() or 1):
            p = multiprocessing.Process(target=spin, daemon=True)
            p.start()
            hogs.append(p)
        loaded = runs(cl, N)
    finally:
        for p in hogs:
            p.kill()
            p.join()
        c.close()
    print("CPU time (cgroup) against wall time of one CPU-bound test, %d runs each, process "
          "backend; load: %d busy processes (one per core)" % (N, os.cpu_count() or 1))
    print("%-18s | %6s %6s %6s  %7s" % ("", "min", "median", "max", "spread"))
    print("%-18s | %s" % ("cpu_ms, idle", summary(idle[0])))
    print("%-18s | %s" % ("cpu_ms, loaded", summary(loaded[0])))
    print("%-18s | %s" % ("wall_ms, idle", summary(idle[1])))
    print("%-18s | %s" % ("wall_ms, loaded", summary(loaded[1])))


if __name__ == "__main__":
    main()
