#!/usr/bin/python3
"""A policy with more tiers than a worker used to serve (16): a worker
started without --tiers serves every tier of its policy, the 17th and the
last (AL_TIERS_MAX, 64) included, and one given all of them in --tiers
starts. Before, the 17th tier's streams were silently dropped (the worker
logged tiers=16) and its jobs waited until they expired; --tiers took 16 at
most. A policy past 64 tiers is refused at load (tests/unit/test_policy.c)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from alclient import Client  # noqa: E402
from altest import Tap, need_root  # noqa: E402
from cluster import WORKER, Cluster  # noqa: E402

t = Tap()
need_root("the process backend")

NAMES = ["t%02d" % i for i in range(1, 65)]
POLICY = "result_ttl_s: 600\ntiers:\n" + "".join(
    "  %s: {backend: process, defaults: {wall_ms: 20000, memory_bytes: 268435456, pids: 64}}\n"
    % n for n in NAMES)

c = Cluster(policy=POLICY)
try:
    cl = Client(unix=c.sock)
    c.scheduler()
    c._start("all-w", [WORKER, "--redis", c.url, "--policy", c.policy, "--worker-id", "all-w",
                       "--uid-base", "63600", "--slots", "2",
                       "--state-dir", os.path.join(c.dir, "state"), "--heartbeat-ms", "300"])
    c.workers.append("all-w")
    ids = {n: cl.submit({"tier": n, "runtime": "sh", "code": "echo %s" % n})[1]
           for n in ("t01", "t16", "t17", "t64")}
    got = {n: cl.wait(jid, 60) for n, jid in ids.items()}
    t.ok(all(r and r["status"] == "ok" and r["stdout"] == (n + "\n").encode()
             for n, r in got.items()),
         "a worker without --tiers runs jobs of its policy's 1st, 16th, 17th and 64th tier",
         {n: r and (r["status"], r.get("error")) for n, r in got.items()})
    c.worker("list-w", uid_base=63700, tiers=",".join(NAMES))
    ok = c.wait_for(lambda: "list-w" in c.rcli("HKEYS", "al:workers").split(), timeout=15)
    t.ok(ok and c.procs["list-w"].poll() is None,
         "a worker given all 64 tiers in --tiers starts and registers",
         c.log("list-w")[-600:])
finally:
    c.close()
sys.exit(t.done())
