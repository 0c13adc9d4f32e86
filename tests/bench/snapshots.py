#!/usr/bin/python3
"""Benchmark: snapshots on the microVM tier (docs/snapshots.md), through a
real redis-server, scheduler and worker with the Python client, under TCG
here (no KVM), in one run:
  - pause: its time and the snapshot's size, for a fresh session (the
    python image) and one that imported pandas (the datascience image);
    resume: the first call after a pause against a call of the open
    session before it, and the restore's own time (info's resume_ms);
  - fork of 4: the fork's time, then each copy's first call (all four at
    once);
  - a one-shot print(1) three ways: a booted VM (a tier without a pool),
    a pool VM that waited (warm), and one restored from the pool's
    template while the pool is busy; the restored and warm ones against
    the booted one;
  - a session's open the same three ways;
  - host memory an idle session holds: its VM's cgroup while open, none
    once paused (its snapshot on disk instead);
  - pause and resume on gVisor (a container tier on runsc, ptrace here):
    runsc's checkpoint with the session's files, the same two sessions;
  - the pool again on a worker with --vm-template-share (copies map the
    template's memory): a cold one-shot and a session's open from the
    template, and an idle session's host memory in a copy, against the
    booted figures above.
Medians of ROUNDS each, ratios against the baseline of the same run.
Needs root and the python and datascience images (make images).
Usage: snapshots.py [ROUNDS] [runsc]   (runsc: its rows only)"""
import os
import signal
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
sys.path.insert(0, HERE)
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402
from summary import record  # noqa: E402

import airlock  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 5
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
VM = dict(DEFAULTS, wall_ms=120000, memory_bytes=256 << 20)
DS = dict(DEFAULTS, wall_ms=300000, memory_bytes=512 << 20)
SESS = {"max_per_tenant": 16, "idle_s": 600, "max_life_s": 3600, "max_paused_per_tenant": 16}
POLICY = policy(
    tier_def("booted", "microvm", image="python", defaults=VM, sessions=SESS),
    tier_def("pooled", "microvm", image="python", defaults=VM, sessions=SESS, pool=1),
    tier_def("shared", "microvm", image="python", defaults=VM, sessions=SESS, pool=1),
    tier_def("ds", "microvm", image="datascience", images=["datascience"], defaults=DS,
             sessions=SESS),
    tier_def("gv", "container", oci_runtime="runsc", image="python", images=["python"],
             defaults=VM, sessions=SESS),
    tier_def("gvds", "container", oci_runtime="runsc", image="datascience",
             images=["datascience"], defaults=DS, sessions=SESS),
    lease_ms=30000)
WORKER = "snapbench"
SHARER = "snapshare"  # the same pool with --vm-template-share


def ms(f):
    t0 = time.monotonic()
    out = f()
    return (time.monotonic() - t0) * 1000, out


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def vm_memory(worker=WORKER):
    """The bytes each of the worker's VM cgroups holds now (v1 or v2)."""
    out = []
    for root in ("/sys/fs/cgroup/memory/airlock/" + worker, "/sys/fs/cgroup/airlock/" + worker):
        for d, _, files in os.walk(root):
            for f in ("memory.usage_in_bytes", "memory.current"):
                if f in files and os.path.basename(d).startswith("vm-"):
                    with open(os.path.join(d, f)) as fh:
                        out.append(int(fh.read()))
    return out


def pause_resume(cl, tier, setup, label, where="TCG"):
    """Pause and resume times, and snapshot sizes, of N sessions."""
    pause, size, first, before, restore = [], [], [], [], []
    for _ in range(N):
        s = cl.session(tier=tier)
        s.run_python(setup, timeout=300)
        b, _ = ms(lambda: s.run_python("x = 1"))
        p, got = ms(s.pause)
        f, _ = ms(lambda: s.run_python("x = 2"))
        pause.append(p)
        size.append(got["snapshot_bytes"])
        first.append(f)
        before.append(b)
        restore.append(s.info().get("resume_ms", 0))
        s.close()
    print("%-34s pause %6.0f ms  snapshot %5.1f MB  first call after %6.0f ms (restore %4.0f ms)"
          "  a call before %5.0f ms" % (label, med(pause), med(size) / 1e6, med(first),
                                        med(restore), med(before)))
    record("snapshots: pause, %s (%s)" % (label, where),
           "%.0f ms, %.1f MB" % (med(pause), med(size) / 1e6))
    record("snapshots: resume (first call after a pause), %s (%s)" % (label, where),
           "%.0f ms" % med(first), "a call before it: %.0f ms" % med(before),
           med(first) / med(before) if med(before) else None)
    return med(pause), med(size)


def main():
    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        c.worker(WORKER, uid_base=76000, slots=6, tiers="booted,pooled,ds,gv,gvds",
                 extra=["--images", IMAGES, "--vm-accel", "tcg"])
        cl = airlock.Client(redis=c.url, tier="booted")
        print("gVisor (runsc, ptrace) snapshots, %d rounds (medians)" % N)
        pause_resume(cl, "gv", "import json", "runsc: a fresh session (python, 256 MiB)",
                     "runsc ptrace")
        pause_resume(cl, "gvds", "import pandas as pd\ndf = pd.DataFrame({'x': range(1000)})",
                     "runsc: after importing pandas (512 MiB)", "runsc ptrace")
        if sys.argv[2:] == ["runsc"]:
            return
        c.wait_for(lambda: "event=microvm_template tier=pooled" in c.log(WORKER), timeout=300)
        print("microVM snapshots, TCG, %d rounds (medians)" % N)

        # ---- pause and resume ----
        pause_resume(cl, "booted", "import json", "a fresh session (python, 256 MiB)")
        pause_resume(cl, "ds", "import pandas as pd\ndf = pd.DataFrame({'x': range(1000)})",
                     "after importing pandas (512 MiB)")

        # ---- fork of 4 ----
        forks, firsts = [], []
        for _ in range(max(1, N // 2)):
            s = cl.session(tier="booted")
            s.run_python("import random\nv = 7")
            f, kids = ms(lambda: s.fork(4))
            times = []

            def first(k):
                times.append(ms(lambda: k.run_python("print(v)"))[0])
            th = [threading.Thread(target=first, args=(k,)) for k in kids]
            t0 = time.monotonic()
            [x.start() for x in th]
            [x.join() for x in th]
            firsts.append((time.monotonic() - t0) * 1000)
            forks.append(f)
            for k in kids + [s]:
                k.close()
        print("%-34s fork %6.0f ms  all four copies' first calls %6.0f ms" %
              ("fork(4) of a fresh session", med(forks), med(firsts)))
        record("snapshots: fork(4), then the four copies' first calls at once (TCG)",
               "%.0f ms + %.0f ms" % (med(forks), med(firsts)))

        # ---- a one-shot print(1), three ways ----
        def one(tier):
            return ms(lambda: cl.run("print(1)", tier=tier))

        booted, warm, restored = [], [], []
        for _ in range(N):
            booted.append(one("booted")[0])
            time.sleep(3)  # the pool's VM restored and warm again
            t, r = one("pooled")
            (warm if r.info.get("boot") == "warm" else restored).append(t)
            # the pool's VM taken, before the pool has another: the next
            # job starts from the template
            t, r = restored_one_shot(cl, "pooled")
            (restored if r.info.get("boot") == "restored" else warm).append(t)
        print("%-34s booted %6.0f ms  warm pool %6.0f ms  restored %6.0f ms" %
              ("one-shot print(1)", med(booted), med(warm), med(restored)))
        for name, xs in (("warm pool", warm), ("restored from the pool's template", restored)):
            record("snapshots: one-shot print(1), %s (TCG)" % name, "%.0f ms" % med(xs),
                   "a booted VM: %.0f ms" % med(booted), med(xs) / med(booted),
                   ("<=", 0.1, "ratio") if name == "warm pool" else ("<=", 400, med(xs)))

        # ---- a session's open, three ways ----
        ob, ow, orr = [], [], []
        for _ in range(N):
            t, s = ms(lambda: cl.session(tier="booted"))
            ob.append(t)
            s.close()
            time.sleep(3)
            t, s = ms(lambda: cl.session(tier="pooled"))
            ow.append(t)
            t, s2 = ms(lambda: cl.session(tier="pooled"))  # the pool's VM is s's
            orr.append(t)
            s.close()
            s2.close()
        print("%-34s booted %6.0f ms  warm pool %6.0f ms  restored %6.0f ms" %
              ("a session's open", med(ob), med(ow), med(orr)))
        record("snapshots: a session's open, restored from the pool's template (TCG)",
               "%.0f ms" % med(orr), "booted: %.0f ms; warm pool %.0f ms" % (med(ob), med(ow)),
               med(orr) / med(ob), ("<=", 500, med(orr)))

        # ---- host memory of idle sessions ----
        ss = [cl.session(tier="booted") for _ in range(3)]
        for s in ss:
            s.run_python("import json")
        time.sleep(2)
        open_mem = vm_memory()
        sizes = [s.pause()["snapshot_bytes"] for s in ss]
        time.sleep(1)
        # (the pooled tier's one VM stays)
        left = len(vm_memory()) - (len(open_mem) - len(ss))
        print("%-34s open %6.0f MiB each (VM cgroup)  paused: %d of their VMs left, a %.0f MB "
              "file each" % ("an idle session's host memory", med(open_mem) / 2**20, left,
                             med(sizes) / 1e6))
        record("snapshots: host memory an idle session holds (TCG)",
               "paused: 0 MiB (a %.0f MB snapshot on disk)" % (med(sizes) / 1e6),
               "open: %.0f MiB" % (med(open_mem) / 2**20), 0.0, ("<=", 150, 0.0))
        for s in ss:
            s.close()
        shared_template(c, cl, med(booted), med(ob), med(open_mem))
    finally:
        c.close()


def restored_one_shot(cl, tier):
    """print(1) while the pool's VM is taken: its VM restored from the
    template (ms, info)."""
    blocker = cl.submit("import time; time.sleep(30)", tier=tier)
    time.sleep(0.05)
    t, r = ms(lambda: cl.run("print(1)", tier=tier))
    cl.cancel(blocker)
    return t, r


def shared_template(c, cl, booted, opened, open_mem):
    """The same pool on a worker with --vm-template-share (the first one
    stopped): a cold one-shot and a session's open from the template, and
    what an idle session in a copy holds, against the booted figures."""
    c.signal(WORKER, signal.SIGTERM)
    c.wait_exit(WORKER, timeout=60)
    c.worker(SHARER, uid_base=77000, slots=6, tiers="shared",
             extra=["--images", IMAGES, "--vm-accel", "tcg", "--vm-template-share"])
    c.wait_for(lambda: "event=microvm_template tier=shared" in c.log(SHARER), timeout=300)
    time.sleep(3)
    one, opens = [], []
    for _ in range(N):
        t, r = restored_one_shot(cl, "shared")
        if r.info.get("boot") == "restored":
            one.append(t)
        time.sleep(3)
        t, s = ms(lambda: cl.session(tier="shared"))  # the pool's VM
        t, s2 = ms(lambda: cl.session(tier="shared"))  # restored
        opens.append(t)
        s.close()
        s2.close()
        time.sleep(3)
    ss = [cl.session(tier="shared") for _ in range(3)]
    for s in ss:
        s.run_python("import json")
    time.sleep(2)
    mem = sorted(vm_memory(SHARER))[-len(ss):]  # (the pool's idle copy, smaller, left out)
    for s in ss:
        s.close()
    print("--vm-template-share (TCG)")
    print("%-34s restored %6.0f ms  (booted %6.0f ms)" % ("one-shot print(1)", med(one), booted))
    print("%-34s restored %6.0f ms  (booted %6.0f ms)" % ("a session's open", med(opens), opened))
    print("%-34s %6.0f MiB each (VM cgroup; booted %4.0f MiB)" %
          ("an idle session's host memory", med(mem) / 2**20, open_mem / 2**20))
    record("snapshots: one-shot print(1), restored from a shared template "
           "(--vm-template-share, TCG)", "%.0f ms" % med(one), "a booted VM: %.0f ms" % booted,
           med(one) / booted, ("<=", 400, med(one)))
    record("snapshots: a session's open, restored from a shared template "
           "(--vm-template-share, TCG)", "%.0f ms" % med(opens), "booted: %.0f ms" % opened,
           med(opens) / opened, ("<=", 500, med(opens)))
    record("snapshots: host memory an idle session holds in a template's copy "
           "(--vm-template-share, TCG)", "%.0f MiB" % (med(mem) / 2**20),
           "a booted VM's: %.0f MiB" % (open_mem / 2**20), med(mem) / open_mem,
           ("<=", 150, med(mem) / 2**20))


if __name__ == "__main__":
    main()
