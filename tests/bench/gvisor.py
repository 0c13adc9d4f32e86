#!/usr/bin/python3
"""Benchmark: what gVisor's boundary costs, through a real redis-server,
scheduler and worker, with the Python client over Redis, on one worker
serving a runc tier, a runsc tier and a microVM tier (TCG here: no KVM),
all on the python image, interleaved round by round:
  - a one-shot print(1) (a python job: on runc and runsc their warm
    interpreter's) and an argv `python3 -c 'print(1)'` (cold everywhere):
    each tier's median against runc's;
  - a call of an open session (`x += 1`), each tier's median against
    runc's;
  - a CPU-bound loop (3 million additions) and system-call-heavy work
    (2,000 files made, stat'ed, read and removed in /tmp, and 300 walks of
    a directory of the image; a small project's pytest suite: 8 modules of
    25 tests, each writing and reading a file in its tmp_path; a C build
    with the toolchain image: 24 files compiled and linked by make), each
    timed inside the job: runsc's medians against runc's;
  - the host memory one sandbox holds while its job sleeps, and an open
    session's after a call: its cgroup (memory.usage_in_bytes /
    memory.current: for runsc its Sentry and gofer, for a microVM its VMM,
    guest memory included; the sleeping job an argv one, in a container of
    its own, not a warm one's).
Reports medians and ratios against runc in the same run (the machine is
shared and noisy). Needs root, runsc and the python and toolchain images
(make images).
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
SESS = {"max_per_tenant": 2, "idle_s": 600, "max_life_s": 1800}
TIERS = {"runc": dict(backend="container", images=["python", "toolchain"]),
         "runsc": dict(backend="container", oci_runtime="runsc", images=["python", "toolchain"]),
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
# a small project: 8 test modules of 25 tests, each through a file
TESTS = {"proj/test_m%d.py" % m: (
    "import pytest\n\n\n@pytest.mark.parametrize('i', range(25))\n"
    "def test_file(tmp_path, i):\n    p = tmp_path / ('f%%d.txt' %% i)\n"
    "    p.write_text(str(i * %d))\n    assert int(p.read_text()) == i * %d\n" % (m, m)).encode()
    for m in range(8)}
PYTEST = ("import subprocess, sys, time\nt = time.perf_counter()\n"
          "p = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', "
          "'proj'], capture_output=True, text=True)\n"
          "assert p.returncode == 0 and '200 passed' in p.stdout, p.stdout[-500:]\n"
          "print((time.perf_counter() - t) * 1000)\n")
# a C build: 24 files, make -j1
CFILES = {"src/f%d.c" % i: (
    "#include <stdio.h>\n#include <string.h>\nint f%d(const char *s) { char b[64]; "
    "snprintf(b, sizeof b, \"%%s-%d\", s); return (int)strlen(b); }\n" % (i, i)).encode()
    for i in range(24)}
CFILES.update({
    "src/main.c": ("#include <stdio.h>\n%s\nint main(void) { int n = 0;\n%s\n"
                                    "printf(\"%%d\\n\", n); return 0; }\n" % (
                                        "".join("int f%d(const char *);\n" % i for i in range(24)),
                                        "".join("n += f%d(\"x\");\n" % i for i in range(24))
                                    )).encode(),
    "src/Makefile": (
        "OBJ := $(patsubst %.c,%.o,$(wildcard *.c))\nprog: $(OBJ)\n\t$(CC) -o $@ $(OBJ)\n"
        "%.o: %.c\n\t$(CC) -O1 -c -o $@ $<\n").encode()})
BUILD = ("start=$(date +%s%N); make -s -C src >/dev/null && ./src/prog >/dev/null || exit 1; "
         "echo $(( ($(date +%s%N) - start) / 1000000 ))")


def cgroup_memory(worker):
    """Bytes the worker's job cgroups hold now (v1 or v2), the largest one."""
    best = 0
    for root in ("/sys/fs/cgroup/memory/airlock/" + worker, "/sys/fs/cgroup/airlock/" + worker):
        for d, _, files in os.walk(root):
            for f in ("memory.usage_in_bytes", "memory.current"):
                # (not a warm container waiting for a job of its own)
                if f in files and os.path.basename(d).startswith(("al-", "vm-")) and \
                        "-warm+" not in d:
                    with open(os.path.join(d, f)) as fh:
                        best = max(best, int(fh.read()))
    return best


def main():
    pol = policy(*(tier_def(t, kw.pop("backend"), image="python", defaults=LIM, sessions=SESS,
                            **kw)
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
        pyt = {t: [] for t in ("runc", "runsc")}
        build = {t: [] for t in ("runc", "runsc")}
        call = {t: [] for t in TIERS}
        smem = {}
        for t in TIERS:  # a session each: 3 N calls, then its memory idle
            with cl.session(tier=t, timeout=300) as s:
                s.run_python("x = 0")
                for _ in range(3 * N):
                    t0 = time.perf_counter()
                    r = s.run_python("x += 1")
                    assert r.status == "ok", (t, r.status, r.error)
                    call[t].append((time.perf_counter() - t0) * 1000)
                time.sleep(2)
                smem[t] = cgroup_memory("bench-gv")
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
                r = cl.run(code=PYTEST, tier=t, runtime="python", files=TESTS)
                assert r.status == "ok", (t, r.status, r.error, r.stderr[-500:])
                pyt[t].append(float(r.stdout))
                r = cl.run(argv=["sh", "-c", BUILD], tier=t, image="toolchain", files=CFILES)
                assert r.status == "ok", (t, r.status, r.error, r.stderr[-500:])
                build[t].append(float(r.stdout))
        mem = {}
        for t in TIERS:
            got = []
            th = threading.Thread(target=lambda: got.append(
                cl.run(argv=["python3", "-c", SLEEP], tier=t)))
            th.start()
            time.sleep(5)
            mem[t] = cgroup_memory("bench-gv")
            th.join()
        for what, d in (("print(1) (runtime python: a warm interpreter's on runc and runsc)",
                         wall),
                        ("argv python3 -c 'print(1)' (cold on every tier)", cold),
                        ("a session's call x += 1", call)):
            base = statistics.median(d["runc"])
            print("%s, a round trip (median of %d):" % (what, len(d["runc"])))
            for t in TIERS:
                m = statistics.median(d[t])
                print("  %-8s %7.1f ms  %6.2fx runc" % (t, m, m / base))
        for name, d in (("CPU loop (3e6 additions)", cpu),
                        ("file and directory calls (2,000 files, 300 walks)", sysc),
                        ("pytest, 8 modules of 25 tests through files", pyt),
                        ("a C build of 25 files with make", build)):
            b = statistics.median(d["runc"])
            g = statistics.median(d["runsc"])
            print("%s, timed in the job (median of %d): runc %.0f ms, runsc %.0f ms: %.2fx"
                  % (name, N, b, g, g / b))
        for what, d in (("one sandbox whose job sleeps", mem),
                        ("one open session after a call", smem)):
            print("host memory of %s (its cgroup):" % what)
            for t in TIERS:
                print("  %-8s %7.1f MiB  %5.2fx runc" % (t, d[t] / 2**20,
                                                        d[t] / d["runc"] if d["runc"] else 0))
    finally:
        c.close()


if __name__ == "__main__":
    main()
