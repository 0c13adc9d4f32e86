#!/usr/bin/python3
"""Benchmark: what an agent's one-shot run_python costs per tier on the
datascience image, through the real queue (redis-server, scheduler,
worker) with the Python client over Redis, interleaved round by round:

    print(1)                     the floor: a sandbox and an interpreter
    import pandas; print(1)      what a data snippet pays before its work

on the process and container tiers, a microVM booted for the job (cold:
no pool) and a microVM from the warm pool (warm: booted ahead, its
interpreter started with numpy, pandas and matplotlib imported:
backends/microvm/warm.c). Each round waits until the pool's VM says its
interpreter is warm again (the worker's vm_warm log line) before it
measures anything, so no tier is measured beside a VM that is still
importing. Reports medians and the issue's two ratios, each against a
baseline of the same run:

    warm print(1) / cold print(1)                      goal <= 0.1x
    warm import pandas / process-tier import pandas    goal <= 1.5x

(the goals of the agent-runtime issue).
Usage: agent_warm.py [ROUNDS]   (root; make images, make microvm-image)"""
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
from cluster import Cluster  # noqa: E402

import airlock  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
D = ("images: [datascience], image: datascience, max_attempts: 1, "
     "defaults: {wall_ms: 120000, memory_bytes: 536870912, pids: 64}")
POLICY = """\
result_ttl_s: 600
lease_ms: 60000
tiers:
  proc: {backend: process, %(d)s}
  ctr: {backend: container, %(d)s}
  mvm-cold: {backend: microvm, %(d)s}
  mvm-warm: {backend: microvm, pool: 1, pool_max_idle_ms: 3600000, %(d)s}
""" % {"d": D}
SNIPPETS = {"print(1)": "print(1)", "import pandas": "import pandas\nprint(1)"}
TIERS = ("proc", "ctr", "mvm-cold", "mvm-warm")


def timed(cl, tier, code):
    t0 = time.monotonic()
    r = cl.run(code, tier=tier, check=False)
    ms = (time.monotonic() - t0) * 1000
    if r.status != "ok" or r.stdout != b"1\n":
        raise RuntimeError("%s: %s %s %r" % (tier, r.status, r.error, r.stderr[-300:]))
    if tier == "mvm-warm" and (r.info.get("boot") != "warm" or
                               r.info.get("interpreter") != "warm"):
        raise RuntimeError("no warm VM and interpreter for %s: %r" % (tier, r.info))
    return ms


def main():
    if os.geteuid() != 0:
        print("needs root")
        return 1
    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        c.worker("bench-aw", uid_base=69600, slots=1, tiers=",".join(TIERS),
                 extra=["--images", IMAGES, "--vm-accel", os.environ.get("VM_ACCEL", "tcg")])
        cl = airlock.Client(redis=c.url)
        lat = {(t, s): [] for t in TIERS for s in SNIPPETS}
        used = 0
        for i in range(ROUNDS + 1):  # round 0 fills the page cache and is dropped
            for name, code in SNIPPETS.items():
                for tier in (TIERS if i % 2 else TIERS[::-1]):
                    # the pool's VM (used+1 of them so far) is warm, nothing else runs
                    if not c.wait_for(lambda: c.log("bench-aw").count("event=vm_warm") > used,
                                      timeout=300, step=0.5):
                        raise RuntimeError("the pool's VM never said it is warm")
                    ms = timed(cl, tier, code)
                    used += tier == "mvm-warm"
                    if i:
                        lat[(tier, name)].append(ms)
        med = {k: statistics.median(v) for k, v in lat.items()}
        print("One-shot run_python on the datascience image, p50 of %d rounds (ms)" % ROUNDS)
        print("%-9s %12s %15s" % ("tier", "print(1)", "import pandas"))
        for tier in TIERS:
            print("%-9s %12.0f %15.0f" % (tier, med[(tier, "print(1)")],
                                          med[(tier, "import pandas")]))
        print("warm print(1) / cold print(1): %.2fx (goal <= 0.1x)" % (
            med[("mvm-warm", "print(1)")] / med[("mvm-cold", "print(1)")]))
        print("warm import pandas / process import pandas: %.2fx (goal <= 1.5x)" % (
            med[("mvm-warm", "import pandas")] / med[("proc", "import pandas")]))
    finally:
        c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
