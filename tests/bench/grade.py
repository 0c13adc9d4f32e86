#!/usr/bin/python3
"""Grading jobs against single jobs (issue "graders"): N test cases of a
small C++ submission as ONE grading job (the build once, then each test)
against N single jobs that each compile and run it, end to end through the
queue (a client written from PROTOCOL.md, tests/lib/alclient.py), on the
process tier and on the untrusted tier (microVM, toolchain image). The
single jobs are submitted all at once and waited for together, so they use
the worker's slots in parallel, as a grader would; the grading job runs its
steps one after another. Targets: the grading job at least 10x faster on
the microVM tier, 3x on the process tier. Also the per-test overhead: what
a grading job spends per test beyond the test's own run (the job's wall
time less the build's and the tests' own, over N).
Usage: grade.py [N] [TIERS] (default 50 trusted,untrusted)"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from alclient import Client  # noqa: E402
from cluster import Cluster  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 50
TIERS = (sys.argv[2] if len(sys.argv) > 2 else "trusted,untrusted").split(",")
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
POLICY = """\
result_ttl_s: 3600
lease_ms: 60000
tiers:
  trusted:
    backend: process
    max_attempts: 1
    images: [toolchain]
    image: toolchain
    defaults: {wall_ms: 600000, cpu_ms: 600000, memory_bytes: 536870912, pids: 64}
  untrusted:
    backend: microvm
    max_attempts: 1
    images: [toolchain]
    image: toolchain
    defaults: {wall_ms: 600000, cpu_ms: 600000, memory_bytes: 536870912, pids: 64}
"""
SOURCE = b"""#include <cstdio>
int main()
{
	long a, b;
	if (scanf("%ld %ld", &a, &b) != 2)
		return 1;
	printf("%ld\\n", a * b + 1);
	return 0;
}
"""
COMPILE = ["g++", "-O1", "-o", "main", "main.cpp"]


def grading_job(tier):
    return {"tier": tier, "argv": ["./main"], "files": [{"path": "main.cpp", "data": SOURCE}],
            "build": {"argv": COMPILE},
            "tests": [{"name": "t%02d" % i, "stdin": b"%d 3\n" % i, "expect": b"%d\n" % (3 * i + 1)}
                      for i in range(N)]}


def single_job(tier, i):
    return {"tier": tier, "runtime": "sh",
            "code": b"g++ -O1 -o /tmp/main main.cpp && /tmp/main",
            "files": [{"path": "main.cpp", "data": SOURCE}], "stdin": b"%d 3\n" % i}


def main():
    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        c.worker("bench-grade", uid_base=64300, slots=2, tiers=",".join(TIERS),
                 extra=["--images", IMAGES])
        cl = Client(unix=c.sock)
        out = []
        for tier in TIERS:
            # warm: one small job (page cache, a first VM)
            _, jid = cl.submit(single_job(tier, 1))
            cl.wait(jid, 900)
            t0 = time.perf_counter()
            _, jid = cl.submit(grading_job(tier))
            res = cl.wait(jid, 3600)
            graded = time.perf_counter() - t0
            if not res or res["status"] != "ok" or \
                    any(t["verdict"] != "accepted" for t in res["tests"]):
                raise RuntimeError("grading job on %s: %r" % (tier, res and res.get("error")))
            build = res["build"]["wall_ms"]
            own = sum(t["wall_ms"] for t in res["tests"])
            per_test = (res["wall_ms"] - build - own) / N
            t0 = time.perf_counter()
            ids = [cl.submit(single_job(tier, i))[1] for i in range(N)]
            for i, jid in enumerate(ids):
                r = cl.wait(jid, 3600)
                if not r or r["status"] != "ok" or r["stdout"] != b"%d\n" % (3 * i + 1):
                    raise RuntimeError("single job %d on %s: %r" % (i, tier, r))
            singles = time.perf_counter() - t0
            out.append((tier, res["backend"], graded, singles, build, own / N, per_test))
        print("| tier | %d tests as one grading job | %d single jobs (2 slots) | speed-up | "
              "build | a test's own run | per-test overhead |" % (N, N))
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for tier, backend, graded, singles, build, own, per_test in out:
            print("| %s (%s) | %.1f s | %.1f s | %.1fx | %.1f s | %.1f ms | %.1f ms |"
                  % (tier, backend, graded, singles, singles / graded, build / 1000, own,
                     per_test))
    finally:
        c.close()


if __name__ == "__main__":
    main()
