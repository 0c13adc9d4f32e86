#!/usr/bin/python3
"""Wall-clock steps (the hardening issue, finding 14), each on one process
through a fault injector (build/tests/clockshim.so, LD_PRELOAD: that
process's wall clock runs ahead or behind by what a file says, changed
while it runs), with a real redis-server, scheduler and workers:
  - Redis's clock stepped +60 s while 4 jobs run (lease 3 s): every stream
    idle time jumps by a minute; no job runs twice (a worker is dead when
    its heartbeat counter stops, timed on the scheduler's monotonic clock);
  - Redis's clock stepped back 60 s, then a worker killed mid-job: its job
    runs again after about a lease, not a lease plus a minute;
  - the scheduler's own clock stepped +1 h: a job whose deadline is a
    minute away is not expired (deadlines follow Redis's clock);
  - sessions (issue 58): the scheduler's clock +60 s, then a worker's -60 s,
    then Redis's +60 s (lease 3 s): sessions opened before each step
    answer calls after it; then their worker SIGKILLed: they end
    worker_lost within two leases."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
from alclient import Client  # noqa: E402
from altest import BUILD, Tap, need_root  # noqa: E402
from cluster import SCHED, Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def, trusted  # noqa: E402

import airlock  # noqa: E402

t = Tap()
need_root("the process backend")
SHIM = os.path.abspath(os.path.join(BUILD, "tests", "clockshim.so"))

POLICY = trusted(lease_ms=3000, max_attempts=3, wall_ms=30000)


def step(path, ms):
    with open(path + ".new", "w") as f:
        f.write("%d\n" % ms)
    os.replace(path + ".new", path)
    time.sleep(0.3)  # the shim re-reads it every 50 ms


def job(code):
    return {"tier": "trusted", "runtime": "python", "code": code}


c = Cluster(policy=POLICY, start_redis=False)
try:
    redis_off = os.path.join(c.dir, "redis-clock")
    sched_off = os.path.join(c.dir, "sched-clock")
    step(redis_off, 0)
    step(sched_off, 0)
    saved = dict(os.environ)
    os.environ.update(LD_PRELOAD=SHIM, AIRLOCK_CLOCK_SHIM=redis_off)
    c.start_redis()
    os.environ.clear()
    os.environ.update(saved)
    cl = Client(unix=c.sock)
    t0 = int(c.rcli("TIME").split()[0])
    step(redis_off, 3600 * 1000)
    t1 = int(c.rcli("TIME").split()[0])
    step(redis_off, 0)
    t.ok(3590 < t1 - t0 < 3610, "the shim steps redis-server's clock (TIME +%d s)" % (t1 - t0))

    env = dict(os.environ, LD_PRELOAD=SHIM, AIRLOCK_CLOCK_SHIM=sched_off)
    c._start("sched1", [SCHED, "--redis", c.url, "--policy", c.policy, "--listen", "off",
                        "--id", "sched1"], env=env)
    c.worker("ck-w", uid_base=63600, slots=4)

    # ---- Redis +60 s ----
    ids = [cl.submit(job("import time; time.sleep(8); print('once')"))[1] for _ in range(4)]
    c.wait_for(lambda: all(cl.status(i) == "running" for i in ids), timeout=30)
    time.sleep(1)
    # the worker paused across the step (1.5 s, half a lease): its leases are
    # not renewed meanwhile, and Redis says they have been idle a minute
    c.signal("ck-w", signal.SIGSTOP)
    step(redis_off, 60 * 1000)
    time.sleep(1.5)
    c.signal("ck-w", signal.SIGCONT)
    rs = [cl.wait(i, 60) for i in ids]
    t.ok(all(r and r["status"] == "ok" and r["attempt"] == 1 for r in rs) and
         int(c.rcli("HGET", "al:stats", "reclaimed").strip() or 0) == 0,
         "14: Redis's clock +60 s under 4 running jobs: each ends ok at its first attempt, "
         "none reclaimed", [(r or {}).get("attempt") for r in rs])

    # ---- Redis -60 s, then a worker dies ----
    jid = cl.submit(job("import time; time.sleep(3); print('rerun')"))[1]
    c.wait_for(lambda: cl.status(jid) == "running", timeout=30)
    time.sleep(0.5)
    c.signal("ck-w", signal.SIGSTOP)  # its last lease renewal was before the step
    step(redis_off, -60 * 1000)
    c.procs["ck-w"].kill()
    c.procs["ck-w"].wait()
    killed = time.time()
    c.worker("ck-w2", uid_base=63700, slots=1)
    r = cl.wait(jid, 120)
    took = time.time() - killed
    t.ok(r and r["status"] == "ok" and r["attempt"] == 2 and took < 20,
         "14: Redis's clock -60 s, a worker killed mid-job: the job runs again after %.1f s "
         "(lease 3 s), not a minute later" % took, r and (r["status"], r["attempt"]))

    # ---- the scheduler +1 h ----
    step(redis_off, 0)
    step(sched_off, 3600 * 1000)
    time.sleep(1.5)  # it reads Redis's TIME each second
    d = cl.submit(dict(job("print('in time')"), deadline_ms=int(time.time() * 1000) + 60000))[1]
    r = cl.wait(d, 60)
    t.ok(r and r["status"] == "ok" and r["stdout"] == b"in time\n",
         "14: the scheduler's clock +1 h: a job due in a minute runs, it is not expired",
         r and (r["status"], r.get("error")))
    t.ok("clock_skew" in c.log("sched1"), "14: the scheduler logs the skew it saw",
         c.log("sched1")[-300:])
finally:
    c.close()

# ---- sessions: no host's clock ends one (issue 58) ----
SPOLICY = policy(tier_def("trusted", "process", defaults=dict(DEFAULTS, wall_ms=5000),
                          sessions={"max_per_tenant": 8, "idle_s": 600, "max_life_s": 600}),
                 lease_ms=3000)
c = Cluster(policy=SPOLICY, start_redis=False)
try:
    offs = {n: os.path.join(c.dir, n + "-clock") for n in ("redis", "sched", "worker")}
    for path in offs.values():
        step(path, 0)
    saved = dict(os.environ)
    os.environ.update(LD_PRELOAD=SHIM, AIRLOCK_CLOCK_SHIM=offs["redis"])
    c.start_redis()
    os.environ.clear()
    os.environ.update(saved)
    c._start("sched1", [SCHED, "--redis", c.url, "--policy", c.policy, "--listen", "off",
                        "--id", "sched1"],
             env=dict(os.environ, LD_PRELOAD=SHIM, AIRLOCK_CLOCK_SHIM=offs["sched"]))
    c.worker("ck-s", uid_base=63800, slots=4,
             env=dict(os.environ, LD_PRELOAD=SHIM, AIRLOCK_CLOCK_SHIM=offs["worker"]))
    sc = airlock.Client(redis=c.url, tier="trusted")
    sessions = [sc.session() for _ in range(3)]
    for i, s in enumerate(sessions):
        s.run_python("n = %d" % i)

    def answers():
        out = []
        for i, s in enumerate(sessions):
            try:
                out.append(s.run_python("print(n)").stdout == b"%d\n" % i)
            except airlock.AirlockError as e:
                out.append(repr(e))
        return out

    seen = {}
    for who, ms in (("sched", 60000), ("worker", -60000), ("redis", 60000)):
        step(offs[who], ms)
        time.sleep(7)  # two leases and some: a lease judged on a stepped clock has run out
        seen[who] = answers()
    t.ok(all(v == [True] * 3 for v in seen.values()),
         "58: sessions' leases follow Redis's clock: after the scheduler's clock +60 s, a "
         "worker's -60 s and Redis's +60 s (lease 3 s), the 3 sessions opened before "
         "answer calls, their state kept", seen)
    c.procs["ck-s"].kill()
    c.procs["ck-s"].wait()
    t0 = time.monotonic()
    e = None
    try:
        sessions[0].run_python("print(n)", timeout=30)
    except airlock.SessionEnded as x:
        e = x
    took = time.monotonic() - t0
    t.ok(e is not None and e.reason == "worker_lost" and took < 8,
         "58: then their worker SIGKILLed: a call ends worker_lost in %.1f s (two leases: "
         "6 s, and the scheduler's tick)" % took, (e, took))
finally:
    c.close()
sys.exit(t.done())
