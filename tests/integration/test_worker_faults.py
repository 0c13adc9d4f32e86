#!/usr/bin/python3
"""Faults on a worker's host that must not cost healthy work (the hardening
issue, findings 9, 15, 16 and 17), with a real redis-server, scheduler and
workers on the process tier:
  - 9: SIGHUP does not kill a worker (it reloads its policy: the whole
    reload is test_policy_reload's);
  - 15: the cgroups of the warm sandboxes removed from under a worker: the
    next jobs are not sandbox_error (the warm sandbox is discarded, the job
    runs cold);
  - 16: a worker that cannot set up sandboxes at all (a read-only mount
    over its backend's cgroup: v1's memory hierarchy, or v2's tree) stops taking jobs after 3 failures: the jobs queued behind
    them keep their attempts, its registry entry and `airlock stats` say
    why, and once a probe works again (the mount gone) it takes them;
  - 17: a worker killed with a grading job running (its build tree mounted
    under the worker's --state-dir) is swept by a worker with another
    --state-dir: the mount and the directory go."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from alclient import Client  # noqa: E402
from altest import Tap, job_cgroups, need_root  # noqa: E402
from cluster import WORKER, Cluster  # noqa: E402
from policies import trusted  # noqa: E402
from gwclient import free_port  # noqa: E402

t = Tap()
need_root("the process backend")

POLICY = trusted(max_attempts=5, backoff_ms=100)


def job(code):
    return {"tier": "trusted", "runtime": "python", "code": code}


def evict(d):
    """Empty cgroup d (its processes to the hierarchy's root) and remove it."""
    root = d.split("/airlock/")[0]
    for sub in sorted((os.path.join(dp, n) for dp, dirs, _ in os.walk(d) for n in dirs),
                      key=len, reverse=True) + [d]:
        try:
            for pid in open(os.path.join(sub, "cgroup.procs")).read().split():
                with open(os.path.join(root, "cgroup.procs"), "w") as f:
                    f.write(pid)
            os.rmdir(sub)
        except OSError:
            pass


c = Cluster(policy=POLICY)
try:
    cl = Client(unix=c.sock)
    port = free_port()
    c.scheduler(listen="127.0.0.1:%d" % port)
    c.worker("wf-a", uid_base=66700, slots=1)
    first = cl.submit(job("print('warm')"))[1]
    r = cl.wait(first, 60)
    t.ok(r and r["status"] == "ok", "a first job runs", r)

    # ---- 9: SIGHUP ----
    c.signal("wf-a", signal.SIGHUP)
    time.sleep(0.5)
    jid = cl.submit(job("print('after hup')"))[1]
    r = cl.wait(jid, 60)
    t.ok(c.procs["wf-a"].poll() is None and r and r["stdout"] == b"after hup\n" and
         "policy_reload worker=wf-a result=ok" in c.log("wf-a"),
         "9: SIGHUP: the worker keeps running and serving, and reloads its policy",
         (r, c.log("wf-a")[-400:]))

    # ---- 15: the warm sandboxes' cgroups removed ----
    time.sleep(0.5)  # the warm sandboxes are made again after a job
    subs = [s for subs in job_cgroups("wf-a").values() for s in subs]
    for s in subs:
        evict(s)
    t.ok(subs and not any(os.path.isdir(s) for s in subs),
         "15: the warm sandboxes' cgroups are gone (%d removed)" % len(subs))
    ids = [cl.submit(job("print(%d)" % i))[1] for i in range(3)]
    rs = [cl.wait(i, 60) for i in ids]
    t.ok(all(r and r["status"] == "ok" and r["attempt"] == 1 for r in rs),
         "15: the next 3 jobs run ok at their first attempt (the warm sandbox discarded, "
         "the job run cold)", [(r or {}).get("status") for r in rs])
    t.ok("warm_discarded" in c.log("wf-a"), "15: the worker logs the discarded sandbox")

    # ---- 16: no sandbox can be made ----
    # a read-only mount over the backend's cgroup parent (memory hierarchy):
    # no cgroup can be made or changed under it until it goes
    # (cgroup v1's memory hierarchy, else the v2 tree)
    jobs_root = next(os.path.realpath(d) for d in
                     ("/sys/fs/cgroup/memory/airlock/wf-a/process",
                      "/sys/fs/cgroup/airlock/wf-a/process") if os.path.isdir(d))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "airlock-test-ro", jobs_root],
                   check=True)
    ids = [cl.submit(job("print('queued %d')" % i))[1] for i in range(6)]
    paused = c.wait_for(lambda: "backend_paused" in c.log("wf-a"), timeout=30)
    time.sleep(2)  # a heartbeat or two after the pause
    desc = json.loads(c.rcli("HGET", "al:workers", "wf-a").strip() or "{}")
    t.ok(paused and "process" in desc.get("paused", {}),
         "16: after 3 set-up failures the worker pauses the backend; its registry entry says "
         "why", desc)
    metrics = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read()
    t.ok(b"\nairlock_workers_paused 1\n" in metrics,
         "16: the scheduler's metrics count the paused worker", metrics[-500:])
    stats = c.cli("stats").stdout.decode()
    t.ok('"paused":{"process":' in stats, "16: airlock stats shows the pause and its reason",
         stats[-600:])
    spent = [int(cl.r.hget("al:job:" + i, "attempt") or 0) for i in ids]
    time.sleep(3)
    spent2 = [int(cl.r.hget("al:job:" + i, "attempt") or 0) for i in ids]
    t.ok(spent == spent2 and sum(spent2) <= 3 + len(ids) and
         all(cl.result(i) is None for i in ids[3:]),
         "16: while paused no more attempts are spent; the jobs wait in the queue",
         (spent, spent2))
    subprocess.run(["umount", jobs_root], check=True)
    resumed = c.wait_for(lambda: "backend_resumed" in c.log("wf-a"), timeout=30)
    rs = [cl.wait(i, 60) for i in ids]
    t.ok(resumed and all(r and r["status"] == "ok" for r in rs),
         "16: with the mount gone, a probe job runs, the worker resumes and every "
         "queued job ends ok", [(r or {}).get("status") for r in rs])
    desc = json.loads(c.rcli("HGET", "al:workers", "wf-a").strip() or "{}")
    t.ok(desc.get("paused") == {}, "16: the registry entry no longer says paused", desc)

    # ---- 17: a dead worker's mounts under another --state-dir ----
    other = os.path.join(c.dir, "state-b")
    c._start("wf-b", [WORKER, "--redis", c.url, "--policy", c.policy, "--worker-id", "wf-b",
                      "--uid-base", "66710", "--slots", "1", "--tiers", "trusted",
                      "--state-dir", other, "--heartbeat-ms", "300"])
    c.signal("wf-a", signal.SIGTERM)  # only wf-b takes the next job
    c.wait_exit("wf-a")
    # a grading job: its build tree is a mount under the worker's state dir
    slow = cl.submit({"tier": "trusted", "runtime": "python", "code": "import time; time.sleep(60)",
                      "tests": [{"name": "slow"}]})[1]
    c.wait_for(lambda: cl.status(slow) == "running", timeout=30)
    time.sleep(1)
    jobdir = os.path.join(other, "wf-b", "grade")
    mounts = [m for m in open("/proc/mounts").read().splitlines() if other in m]
    t.ok(os.path.isdir(jobdir) and mounts,
         "17: wf-b runs a job with its directory and mounts under its own state dir",
         (os.listdir(other) if os.path.isdir(other) else None, mounts))
    c.procs["wf-b"].kill()
    c.procs["wf-b"].wait()
    c.worker("wf-c", uid_base=66720, slots=1)  # its state dir is c.dir/state, not state-b
    c.wait_for(lambda: "worker=wf-b" in c.log("wf-c"), timeout=20)
    time.sleep(1)
    mounts = [m for m in open("/proc/mounts").read().splitlines() if other in m]
    t.ok(not mounts and not os.path.exists(jobdir),
         "17: wf-c (another state dir) sweeps wf-b's mounts and job directory", mounts)
    t.ok("state_dir=%s" % other in c.log("wf-c"),
         "17: the sweep names the dead worker's own state dir", c.log("wf-c")[-400:])
finally:
    c.close()
sys.exit(t.done())
