#!/usr/bin/python3
"""A policy edit and SIGHUP, on a real redis-server, scheduler and worker
(process tier), as an operator makes it (issue 35, trap 1):
  - the scheduler alone reloaded: it admits a job the worker's old policy
    refuses, and `airlock stats` and /metrics show the worker's policy
    differs (its hash in the registry against the scheduler's);
  - the worker reloaded too: the same job runs, with the new tier's
    injected environment; the mismatch is gone;
  - a job running across the reload finishes under the policy it started
    with;
  - what a running worker cannot take is refused in its log, the old
    policy kept and served: a broken file (file:line), a new tier, a tier
    given another backend, a served tier removed."""
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import msgpack

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from gwclient import free_port  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402

t = Tap()
need_root("the process backend")


def text(max_wall, stage, more=""):
    return policy(tier_def("trusted", "process", defaults=DEFAULTS,
                           max={"wall_ms": max_wall}, env={"STAGE": stage}), more)


OLD = text(30000, "one")
NEW = text(60000, "two")


def write(c, body):
    with open(c.policy, "w") as f:
        f.write(body)


def hash_of(log):
    m = re.findall(r"policy_reload (?:worker=\S+ )?result=ok policy=([0-9a-f]{16})", log)
    return m[-1] if m else None


def job(jid, code, wall_ms=None):
    j = {"v": 1, "id": jid, "tier": "trusted", "runtime": "python", "code": code}
    if wall_ms:
        j["limits"] = {"wall_ms": wall_ms}
    return j


def stats(c):
    return c.cli("stats").stdout.decode()


def metric(port, name):
    m = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
    found = re.search(r"^%s (\d+)$" % name, m, re.M)
    return int(found.group(1)) if found else None


c = Cluster(policy=OLD)
try:
    port = free_port()
    c.scheduler(listen="127.0.0.1:%d" % port)
    c.worker("pr1", uid_base=62300, slots=2)
    r = c.run_job(job("pr-first", "import os; print(os.environ['STAGE'])"), 60)
    t.ok(r and r["stdout"] == b"one\n", "a first job runs with the old policy's env", r)
    time.sleep(1.5)  # a heartbeat and a scheduler tick
    s = stats(c)
    t.ok(re.search(r"^scheduler sched1 policy=[0-9a-f]{16}$", s, re.M) and
         '"policy":"' in s and "policy_mismatch" not in s,
         "stats: the scheduler's policy hash, the worker's in its entry, no mismatch", s)
    t.ok(metric(port, "airlock_workers_policy_mismatch") == 0, "metrics: 0 workers differ")

    # a job that runs across the reloads
    long_id = "pr-long"
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=msgpack.packb(job(long_id, "import os, time; time.sleep(4); "
                                               "print(os.environ['STAGE'])"),
                                       use_bin_type=True),
                   capture_output=True, check=True)
    c.wait_for(lambda: "job_start job=pr-long" in c.log("pr1"), 20)

    # ---- the scheduler alone reloaded ----
    write(c, NEW)
    c.signal("sched1", signal.SIGHUP)
    t.ok(c.wait_for(lambda: hash_of(c.log("sched1")), 10),
         "the scheduler reloads (policy_reload result=ok policy=HASH)")
    r = c.run_job(job("pr-mid", "print('x')", wall_ms=45000), 60)
    t.ok(r and r["status"] == "rejected" and "wall_ms" in r.get("error", ""),
         "the scheduler admits a 45 s job, the worker on its old policy (30 s max) refuses it",
         r)
    c.wait_for(lambda: "policy_mismatch" in stats(c), 10)
    s = stats(c)
    new_hash = hash_of(c.log("sched1"))
    t.ok(re.search(r"^policy_mismatch worker=pr1 policy=[0-9a-f]{16} schedulers=%s " % new_hash,
                   s, re.M),
         "stats names the worker whose policy differs from the scheduler's", s)
    t.ok(c.wait_for(lambda: metric(port, "airlock_workers_policy_mismatch") == 1, 10),
         "metrics: airlock_workers_policy_mismatch 1")

    # ---- the worker reloaded too ----
    c.signal("pr1", signal.SIGHUP)
    t.ok(c.wait_for(lambda: hash_of(c.log("pr1")) == new_hash, 10),
         "the worker reloads to the same hash as the scheduler", c.log("pr1")[-600:])
    r = c.run_job(job("pr-after", "import os; print(os.environ['STAGE'])", wall_ms=45000), 60)
    t.ok(r and r["status"] == "ok" and r["stdout"] == b"two\n",
         "the 45 s job now runs, with the new policy's env", r)
    t.ok(c.wait_for(lambda: "policy_mismatch" not in stats(c) and
                    metric(port, "airlock_workers_policy_mismatch") == 0, 10),
         "the mismatch is gone from stats and metrics", stats(c))
    c.wait_done(long_id, 30)
    raw = c.rcli("GET", "al:res:" + long_id, raw=True)
    r = msgpack.unpackb(raw, raw=False) if raw else None
    t.ok(r and r["status"] == "ok" and r["stdout"] == b"one\n",
         "a job running across both reloads finishes, under the policy it started with", r)

    # ---- what a running worker cannot take ----
    def refused(w, body, case, want):
        write(c, body)
        before = c.log(w).count("result=refused")
        c.signal(w, signal.SIGHUP)
        c.wait_for(lambda: c.log(w).count("result=refused") > before, 10)
        line = [x for x in c.log(w).splitlines() if "result=refused" in x]
        line = line[-1] if line else ""
        r = c.run_job(job("pr-" + case, "import os; print(os.environ['STAGE'])"), 60)
        t.ok(want in line and "stays in force" in line and c.procs[w].poll() is None and
             r and r["stdout"] == b"two\n",
             "refused (%s): the log says why, the worker keeps serving the old policy" % case,
             (line, r))

    refused("pr1", "tiers:\n  trusted: {backend: process\n", "broken", "policy.yaml:")
    refused("pr1", NEW.replace("backend: process", "backend: container"), "backend",
            "changed its backend from process to container")
    write(c, NEW + tier_def("extra", "process"))
    c.signal("pr1", signal.SIGHUP)
    t.ok(c.wait_for(lambda: c.log("pr1").count("result=ok") == 2, 10),
         "a new tier this worker does not serve (--tiers trusted): reloaded", c.log("pr1")[-400:])
    # a worker serving two tiers (--tiers trusted,extra): one of them new, one taken away
    write(c, NEW)
    c.procs.pop("pr1").send_signal(signal.SIGTERM)
    c.worker("pr2", uid_base=62400, slots=1, tiers="trusted,extra")
    r = c.run_job(job("pr-two", "print(2)"), 60)
    t.ok(r and r["status"] == "ok", "a worker for trusted and extra runs a job", r)
    refused("pr2", NEW + tier_def("extra", "process"), "newtier", "tier extra is new")
    write(c, NEW + tier_def("extra", "process"))
    c.procs.pop("pr2").send_signal(signal.SIGTERM)
    c.worker("pr3", uid_base=62500, slots=1, tiers="trusted,extra")
    r = c.run_job(job("pr-three", "print(3)"), 60)  # it is up (its SIGHUP handler set)
    refused("pr3", NEW, "removed", "tier extra, served by this worker, is gone")
finally:
    c.close()
t.done()
