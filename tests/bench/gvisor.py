#!/usr/bin/python3
"""Benchmark: what gVisor's boundary costs, through a real redis-server,
scheduler and worker, with the Python client over Redis, on one worker
serving a runc tier, a runsc tier and a microVM tier (TCG here: no KVM),
all on the python image, interleaved round by round:
  - a one-shot print(1) (a python job: runc's is its warm interpreter's)
    and an argv `python3 -c 'print(1)'` (cold everywhere): each tier's
    median against runc's;
  - a CPU-bound loop (3 million additions) and system-call-heavy work
    (2,000 files made, stat'ed, read and removed in /tmp, and 300 walks of
    a directory of the image), each timed inside the job: runsc's medians
    against runc's;
  - the host memory one sandbox holds while its job sleeps: its cgroup
    (memory.usage_in_bytes / memory.current: for runsc its Sentry and
    gofer, for a microVM its VMM, guest memory included).
Reports medians and ratios against runc in the same run (the machine is
shared and noisy). Needs root, runsc and the python image (make images).
Usage: gvisor.py [ROUNDS]"""
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402

import airlock  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
LIM = dict(DEFAULTS, wall_ms=120000, cpu_ms=120000, memory_bytes=268435456)
TIERS = {"runc": dict(backend="container"),
         "runsc": dict(backend="container", oci_runtime="runsc"),
         "microvm": dict(backend="microvm")}
# each prints the milliseconds of its own work (the sandbox's start and
# python3's excluded)
CPU = ("import time\nt = time.perf_counter()\ns = 0\nfor i in range(3000000):\n    s += i\n"
       "print((time.perf_counter() - t) * 1000)\n")
SYS = ("import os, time\nt = time.perf_counter()\nfor i in range(2000):\n    p = '/tmp/f%d' % i\n"
       "    open(p, 'w').write('x' * 100)\n    os.stat(p)\n    open(p).read()\n    os.unlink(p)\n"
       "for i in range(300):\n    sum(len(f) for _, _, f in os.walk('/usr/lib/python3.11/json'))\n"
       "print((time.perf_counter() - t) * 1000)\n")
SLEEP = "import time; time.sleep(8)"


def cgroup_memory(worker):
    """Bytes the worker's job cgroups hold now (v1 or v2), the largest one."""
    best = 0
    for root in ("/sys/fs/cgroup/memory/airlock/" + worker, "/sys/fs/cgroup/airlock/" + worker):
        for d, _, files in os.walk(root):
            for f in ("memory.usage_in_bytes", "memory.current"):
                if f in files and os.path.basename(d).startswith(("al-", "vm-")):
                    with open(os.path.join(d, f)) as fh:
                        best = max(best, int(fh.read()))
    return best


def main():
    pol = policy(*(tier_def(t, kw.pop("backend"), image="python", defaults=LIM, **kw)
                   for t, kw in ((t, dict(v)) for t, v in TIERS.items())), lease_ms=30000)
    c = Cluster(policy=pol)
    try:
        c.scheduler()
        c.worker("bench-gv", uid_base=61800, slots=2, tiers=",".join(TIERS),
                 extra=["--images", IMAGES, "--vm-accel", os.environ.get("VM_ACCEL", "tcg")])
        cl = airlock.Client(redis=c.url)
        for t in TIERS:  # first jobs: images opened, runsc probed
            cl.run(code="print(1)", tier=t, runtime="python")
        wall = {t: [] for t in TIERS}
        cold = {t: [] for t in TIERS}
        cpu = {t: [] for t in ("runc", "runsc")}
        sysc = {t: [] for t in ("runc", "runsc")}
        for _ in range(N):
            for t in TIERS:
                t0 = time.perf_counter()
                r = cl.run(code="print(1)", tier=t, runtime="python")
                assert r.status == "ok", (t, r.status, r.error)
                wall[t].append((time.perf_counter() - t0) * 1000)
                # an argv job: never a warm interpreter's
                t0 = time.perf_counter()
                r = cl.run(argv=["python3", "-c", "print(1)"], tier=t)
                assert r.status == "ok", (t, r.status, r.error)
                cold[t].append((time.perf_counter() - t0) * 1000)
            for t in ("runc", "runsc"):
                r = cl.run(code=CPU, tier=t, runtime="python")
                assert r.status == "ok", (t, r.status, r.error)
                cpu[t].append(float(r.stdout))
                r = cl.run(code=SYS, tier=t, runtime="python")
                assert r.status == "ok", (t, r.status, r.error, r.stderr[-300:])
                sysc[t].append(float(r.stdout))
        mem = {}
        for t in TIERS:
            got = []
            th = threading.Thread(target=lambda: got.append(
                cl.run(code=SLEEP, tier=t, runtime="python")))
            th.start()
            time.sleep(5)
            mem[t] = cgroup_memory("bench-gv")
            th.join()
        for what, d in (("print(1) (runtime python: runc's warm interpreter)", wall),
                        ("argv python3 -c 'print(1)' (cold on every tier)", cold)):
            base = statistics.median(d["runc"])
            print("%s, a job's round trip (median of %d):" % (what, N))
            for t in TIERS:
                m = statistics.median(d[t])
                print("  %-8s %7.1f ms  %6.2fx runc" % (t, m, m / base))
        for name, d in (("CPU loop (3e6 additions)", cpu),
                        ("file and directory calls (2,000 files, 300 walks)", sysc)):
            b = statistics.median(d["runc"])
            g = statistics.median(d["runsc"])
            print("%s, timed in the job (median of %d): runc %.0f ms, runsc %.0f ms: %.2fx"
                  % (name, N, b, g, g / b))
        print("host memory of one sandbox whose job sleeps (its cgroup):")
        for t in TIERS:
            print("  %-8s %7.1f MiB  %5.2fx runc" % (t, mem[t] / 2**20,
                                                    mem[t] / mem["runc"] if mem["runc"] else 0))
    finally:
        c.close()


if __name__ == "__main__":
    main()
