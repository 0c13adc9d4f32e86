#!/usr/bin/python3
"""Fault injection against a real redis-server, real schedulers and real
workers (the process backend): the queue's promises under every fault.

After each scenario: every accepted job has exactly one result, whose output
is its own; no accepted job is lost; the tenant counters (al:tenant:*) equal
what is actually queued and running (nothing, at the end); nothing is left
pending or delayed. Scenarios: SIGKILL of workers under load with a capped
tenant; SIGSTOP of a worker past its lease; a scheduler that read intake
entries and died before ADMIT, replaced by one with a new id; Redis kill -9
(AOF always) with a dataset that takes seconds to load, under load; reclaim
after an outage; a worker's leftovers swept by a worker with another id;
dead letters bounded; single-slot workers SIGKILLed while they hold
results back for a COMMIT in flight. FAULTS_SCALE=N multiplies the job counts (the soak in
tests/bench/faults.sh)."""
import os
import re
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD, Tap, job_cgroups, live_pids_of, need_root  # noqa: E402
from alclient import Client  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import policy, tier_def  # noqa: E402

t = Tap()
need_root("the process backend")
SCALE = int(os.environ.get("FAULTS_SCALE", "1"))

POLICY = policy(
    tier_def("trusted", "process", max_attempts=10, backoff_ms=100,
             defaults={"wall_ms": 20000, "memory_bytes": 134217728}),
    result_ttl_s=3600, lease_ms=1500, dlq_max_len=50,
    tenants={"default": {}, "capped": {"max_running": 2}})


def job(tag, tenant="default", sleep=0.0):
    code = "import time; time.sleep(%s); print(%r)" % (sleep, tag)
    return {"tier": "trusted", "tenant": tenant, "runtime": "python", "code": code.encode()}


def counters_drift(c):
    """[] when al:tenant:* equals what the job records say is queued and
    running (counted jobs only), else what differs."""
    want = {}
    for key in c.rcli("--scan", "--pattern", "al:job:*").split():
        st, tenant, counted = c.rcli("HMGET", key, "state", "tenant", "counted").split("\n")[:3]
        if counted != "1":
            continue
        w = want.setdefault(tenant, {"queued": 0, "running": 0})
        if st in ("queued", "retrying"):
            w["queued"] += 1
        elif st == "running":
            w["running"] += 1
    drift = []
    for key in c.rcli("--scan", "--pattern", "al:tenant:*").split():
        tenant = key[len("al:tenant:"):]
        got = dict(zip(*[iter(c.rcli("HGETALL", key).split())] * 2))
        w = want.pop(tenant, {"queued": 0, "running": 0})
        for f in ("queued", "running"):
            if int(got.get(f, 0)) != w[f]:
                drift.append("%s %s=%s, records say %d" % (key, f, got.get(f), w[f]))
    drift += ["al:tenant:%s missing, records say %s" % (k, v) for k, v in want.items()
              if v["queued"] or v["running"]]
    return drift


def pending_left(c):
    """Entries still pending in any group, and delayed retries."""
    left = []
    for key in ["al:intake"] + c.rcli("--scan", "--pattern", "al:q:*").split():
        p = c.rcli("XPENDING", key, "scheduler" if key == "al:intake" else "workers").split("\n")
        if p and p[0].strip().isdigit() and int(p[0]) > 0:
            left.append("%s pending %s" % (key, p[0]))
    n = c.rcli("ZCARD", "al:delayed").strip()
    if n not in ("", "0"):
        left.append("al:delayed %s" % n)
    return left


def stat(c, field):
    """A counter of al:stats (0 when absent)."""
    return int(c.rcli("HGET", "al:stats", field).strip() or 0)


def check_all(c, cl, name, accepted, timeout=120, uids=()):
    """Exactly one own result for every accepted job, no drift, nothing left."""
    end = time.time() + timeout
    missing = dict(accepted)
    results = {}
    while missing and time.time() < end:
        for jid in list(missing):
            r = cl.result(jid)
            if r:
                results[jid] = r
                del missing[jid]
        time.sleep(0.2)
    wrong = [(j, r["status"], r["stdout"]) for j, r in results.items()
             if r["status"] != "ok" or r["stdout"] != (accepted[j] + "\n").encode()]
    t.ok(not missing, "%s: all %d accepted jobs have a result" % (name, len(accepted)),
         "missing %d: %s" % (len(missing), [(j, c.rcli("HGETALL", "al:job:" + j).split())
                                            for j in list(missing)[:3]]))
    t.ok(not wrong, "%s: each result is ok and carries the job's own output" % name, wrong[:5])
    oks = stat(c, "status:ok")
    t.ok(oks == len(accepted), "%s: exactly one committed result per job (%d ok for %d jobs)"
         % (name, oks, len(accepted)))
    time.sleep(0.5)
    drift = counters_drift(c)
    t.ok(not drift, "%s: tenant counters equal what is queued and running" % name, drift)
    c.wait_for(lambda: not pending_left(c), timeout=10)
    t.ok(not pending_left(c), "%s: nothing pending or delayed" % name, pending_left(c))
    if uids:
        t.ok(c.wait_for(lambda: not live_pids_of(set(uids)), timeout=10),
             "%s: no process of the jobs' uids left" % name)


def submit_many(cl, jobs):
    out = {}
    for tag, tenant, sleep in jobs:
        code, jid = cl.submit(job(tag, tenant, sleep))
        assert code == 1
        out[jid] = tag
    return out


def section(name, fn, policy_text=POLICY, **kw):
    c = Cluster(policy=policy_text, **kw)
    try:
        fn(c)
    except Exception as e:  # a crash in a section is a failure, not an abort
        import traceback
        t.ok(False, "%s: raised %r" % (name, e), traceback.format_exc())
    finally:
        c.close()


def worker_kills(c):
    """A capped tenant (max_running 2) among the jobs; workers SIGKILLed at
    random while they run; one SIGSTOPped past its lease and resumed."""
    cl = Client(unix=c.sock)
    c.scheduler()
    bases = {}
    for i in range(3):
        bases["k%d" % i] = 62000 + 10 * i
        c.worker("k%d" % i, uid_base=bases["k%d" % i], slots=2)
    jobs = [("capped-%d" % i, "capped", 0.2) for i in range(40 * SCALE)]
    jobs += [("free-%d" % i, "default", 0.1) for i in range(40 * SCALE)]
    random.shuffle(jobs)
    accepted = submit_many(cl, jobs)
    rnd = random.Random(7)
    n = 3
    for round_ in range(3 * SCALE):
        time.sleep(rnd.uniform(0.8, 1.6))
        victim = rnd.choice([w for w in c.procs if w.startswith("k") and c.procs[w].poll() is None])
        if round_ == 1:
            c.signal(victim, signal.SIGSTOP)  # past its lease: its jobs go elsewhere
            time.sleep(2.5)
            c.signal(victim, signal.SIGCONT)
            continue
        c.signal(victim, signal.SIGKILL)
        c.wait_exit(victim)
        name = "k%d" % n
        bases[name] = 62000 + 10 * n
        c.worker(name, uid_base=bases[name], slots=2)
        n += 1
    check_all(c, cl, "worker SIGKILL/SIGSTOP, capped tenant", accepted, timeout=180,
              uids=[b + i for b in bases.values() for i in range(2)])
    t.ok(stat(c, "reclaimed") > 0,
         "worker SIGKILL/SIGSTOP: the dead workers' jobs were reclaimed (the faults happened)")


def dead_scheduler(c):
    """A scheduler that read intake entries and died before ADMIT (its read
    is made by redis-cli as consumer 'dead-sched', the state such a crash
    leaves); a scheduler with another id takes them over."""
    cl = Client(unix=c.sock)
    c.rcli("XGROUP", "CREATE", "al:intake", "scheduler", "0", "MKSTREAM")
    accepted = submit_many(cl, [("stranded-%d" % i, "capped" if i % 2 else "default", 0)
                                for i in range(20)])
    c.rcli("XREADGROUP", "GROUP", "scheduler", "dead-sched", "COUNT", "100", "STREAMS",
           "al:intake", ">")
    pend = c.rcli("XPENDING", "al:intake", "scheduler").split("\n")[0]
    t.ok(pend.strip() == "20", "dead scheduler: its 20 entries are pending, read and never admitted")
    c.scheduler("sched-new")
    c.worker("ds1", uid_base=62500, slots=2)
    check_all(c, cl, "scheduler died between read and ADMIT", accepted, timeout=60)
    t.ok("intake_takeover" in c.log("sched-new"), "dead scheduler: the new one says it took them over")
    # A second scheduler that is SIGKILLed at random while jobs pour in.
    c.rcli("HSET", "al:stats", "status:ok", "0")
    more = {}
    for i in range(4):
        more.update(submit_many(cl, [("burst-%d-%d" % (i, k), "default", 0) for k in range(25)]))
        name = "sk%d" % i
        c.scheduler(name)
        time.sleep(random.uniform(0.0, 0.3))
        c.signal(name, signal.SIGKILL)
        c.wait_exit(name)
    check_all(c, cl, "schedulers SIGKILLed under load", more, timeout=60)


def slow_redis_restart(c):
    """Redis kill -9 under load, AOF with appendfsync always, and a dataset
    that takes seconds to load (ballast + key-load-delay: LOADING for that
    long); scripts are gone after the restart."""
    cl = Client(unix=c.sock)
    c.rcli("DEBUG", "POPULATE", str(40000 * SCALE), "ballast", "64")
    c.rcli("BGREWRITEAOF")
    c.wait_for(lambda: "aof_rewrite_in_progress:0" in c.rcli("INFO", "persistence"), timeout=30)
    c.scheduler("sr1")
    c.scheduler("sr2")
    c.worker("r1", uid_base=62600, slots=2)
    c.worker("r2", uid_base=62610, slots=2)
    accepted, errors, unsure = {}, [], {}
    stop = threading.Event()

    def producer():
        i = 0
        while not stop.is_set():
            i += 1
            tag = "aof-%d" % i
            j = job(tag, "capped" if i % 3 == 0 else "default", 0.05)
            j["id"] = "aof-%d-%d" % (os.getpid(), i)
            try:
                code, jid = Client(unix=c.sock).submit(j)
                if code == 1:
                    accepted[jid] = tag  # acknowledged by Redis: must not be lost
            except Exception as e:  # Redis down or loading: not acknowledged
                errors.append(type(e).__name__)
                unsure[j["id"]] = tag  # the kill may have taken the reply, not the job
                time.sleep(0.05)
            time.sleep(0.01)

    th = threading.Thread(target=producer)
    th.start()
    time.sleep(2.0)
    c.kill_redis()
    t0 = time.time()
    c.start_redis(extra=["--key-load-delay", "50"], wait=False)
    loaded = c.wait_for(lambda: c.rcli("PING").strip() == "PONG", timeout=120, step=0.1)
    load_s = time.time() - t0
    time.sleep(2.0)
    stop.set()
    th.join()
    t.ok(loaded and load_s > 1.5, "slow restart: Redis was LOADING for %.1f s" % load_s)
    t.ok(c.rcli("SCRIPT", "EXISTS", "0" * 40).strip() == "0" and len(accepted) > 50,
         "slow restart: %d jobs accepted around the restart (%d refused while down)"
         % (len(accepted), len(errors)))
    # A submission Redis made durable whose reply the kill took: the client
    # was not told, yet the job exists and must get its one result too.
    kept = {j: tag for j, tag in unsure.items() if c.rcli("EXISTS", "al:job:" + j).strip() == "1"}
    accepted.update(kept)
    check_all(c, cl, "Redis kill -9 with a slow load (%d durable submissions whose reply was "
              "lost)" % len(kept), accepted, timeout=120)


def reclaim_after_outage(c):
    """Jobs that run through a Redis outage longer than the lease: after
    Redis is back, the scheduler waits a lease before reclaiming, so that the
    healthy workers renew their leases: no job runs twice."""
    cl = Client(unix=c.sock)
    c.scheduler()
    c.worker("o1", uid_base=62700, slots=2)
    accepted = submit_many(cl, [("outage-%d" % i, "default", 5) for i in range(2)])
    c.wait_for(lambda: c.log("o1").count("event=job_start") >= 2, timeout=20)
    c.kill_redis()
    time.sleep(3.0)  # two leases
    c.start_redis()
    check_all(c, cl, "reclaim after an outage", accepted, timeout=60)
    rs = [cl.result(j) for j in accepted]
    t.ok(all(r and r["attempt"] == 1 for r in rs) and
         stat(c, "reclaimed") == 0,
         "reclaim after an outage: nothing re-run (attempt 1, reclaimed 0)", rs)


def cgroup_dirs(worker_id):
    return [d for d in (os.path.join("/sys/fs/cgroup", ctrl, "airlock", worker_id)
                        for ctrl in ("memory", "pids", "cpu", "cpuacct", "unified", ""))
            if os.path.isdir(d)]


def leftovers_swept(c):
    """A worker SIGKILLed with jobs running leaves cgroups; a worker with
    another id sweeps them at start-up (the dead one's lock is free). A
    second worker with the id of a live one is refused."""
    cl = Client(unix=c.sock)
    c.scheduler()
    c.worker("gone-w", uid_base=62800, slots=2)
    accepted = submit_many(cl, [("swept-%d" % i, "default", 3) for i in range(2)])
    c.wait_for(lambda: c.log("gone-w").count("event=job_start") >= 2, timeout=20)
    c.signal("gone-w", signal.SIGKILL)
    c.wait_exit("gone-w")
    left = cgroup_dirs("gone-w")
    t.ok(left and any(job_cgroups("gone-w").values()),
         "a SIGKILLed worker leaves its cgroups behind", left)
    c.worker("sweeper-w", uid_base=62810, slots=2)
    gone = c.wait_for(lambda: not cgroup_dirs("gone-w"), timeout=20)
    done = re.search(r"event=sweep_done worker=gone-w by=sweeper-w cgroups=(\d+) cgroups_left=0 "
                     r"dirs=(\d+) dirs_left=0", c.log("sweeper-w"))
    t.ok(gone and "event=sweep worker=gone-w by=sweeper-w" in c.log("sweeper-w") and
         "holds its lock" in c.log("sweeper-w") and done and int(done.group(1)) >= 1,
         "a worker with another id removes them at start-up, logging whose they were, by "
         "whom, why (no live worker holds its lock) and what it removed",
         (cgroup_dirs("gone-w"), [x for x in c.log("sweeper-w").splitlines() if "sweep" in x]))
    first = c.procs["sweeper-w"]
    c.worker("sweeper-w", uid_base=62820, slots=1)
    rc = c.wait_exit("sweeper-w", 10)
    t.ok(rc == 2 and "another worker with id" in c.log("sweeper-w"),
         "a second worker with a live worker's id is refused (exit 2, saying why)", rc)
    c.procs["sweeper-w"] = first
    check_all(c, cl, "leftovers swept", accepted, timeout=60)
    # the state directory's shared entries are no worker's: an id naming
    # one is refused, and the lock of an old worker of such an id (none
    # held) does not have another sweep them
    state = os.path.join(c.dir, "state")
    kept = os.path.join(state, "snapshots", "other-w", "s1.snap")
    os.makedirs(os.path.dirname(kept), exist_ok=True)
    open(kept, "w").close()
    os.makedirs("/run/airlock/workers", exist_ok=True)
    stale = "/run/airlock/workers/snapshots.lock"
    open(stale, "a").close()
    c.worker("late-w", uid_base=62830, slots=1)
    c.wait_for(lambda: "event=worker_start" in c.log("late-w"), timeout=20)
    c.worker("snapshots", uid_base=62840, slots=1)
    rc = c.wait_exit("snapshots", 10)
    t.ok(os.path.exists(kept) and rc == 2 and
         "names an entry of the state directory" in c.log("snapshots"),
         "a worker id naming the state directory's shared entries (snapshots) is refused "
         "(exit 2, saying why), and a stale lock of that id does not have another worker "
         "sweep them", (os.path.exists(kept), rc, c.log("snapshots")[-300:],
                        [x for x in c.log("late-w").splitlines() if "sweep" in x]))
    for p in (stale,):
        if os.path.exists(p):
            os.unlink(p)


def bounded_dlq(c):
    """Garbage floods the intake: al:dlq keeps dlq_max_len entries, each with
    its reason, size and first 4 KiB."""
    c.scheduler()
    big = "x" * 100000
    for _ in range(120):
        c.rcli("XADD", "al:intake", "*", "job", big)
    c.wait_for(lambda: c.rcli("XPENDING", "al:intake", "scheduler").split("\n")[0] == "0"
               and int(c.rcli("XLEN", "al:dlq").strip() or 0) > 0, timeout=30)
    n = int(c.rcli("XLEN", "al:dlq").strip())
    last = c.rcli("XREVRANGE", "al:dlq", "+", "-", "COUNT", "1", raw=True)
    t.ok(n == 50, "dead letters bounded: %d kept of 120 (dlq_max_len 50)" % n)
    t.ok(b"100000" in last and len(last) < 6000 and b"msgpack" in last,
         "a dead letter keeps its reason, the size and only the first bytes (%d bytes)" % len(last))
    p = c.cli("dlq", "retry", last.split(b"\n")[0].decode())
    t.ok(p.returncode != 0 and b"cannot be re-submitted" in p.stderr,
         "dlq retry of a cut dead letter is refused with the reason", p.stderr)


def held_results(c):
    """Workers of one slot, whose no-op jobs end one a loop pass, hold up to
    three results back while a COMMIT is unanswered; SIGKILLed at random
    meanwhile, each of their jobs still ends with exactly one result."""
    n_jobs = 20000 * SCALE
    c.scheduler()
    names = ["h0", "h1"]
    for name in names:
        c.worker(name, slots=1, tiers="bench", extra=["--allow-noop"])
    c.wait_for(lambda: all("event=redis_up" in c.log(n) for n in names), 10)
    fill = subprocess.Popen([os.path.join(BUILD, "tests", "bench_queue"), c.url, "fill",
                             str(n_jobs), "bench"], stdout=subprocess.DEVNULL)
    ids = ["tp-%d-%d" % (fill.pid, i) for i in range(n_jobs)]
    rnd = random.Random(11)
    killed = 0
    for _ in range(4):
        time.sleep(rnd.uniform(0.2, 0.5))
        if stat(c, "status:ok") >= n_jobs:
            break
        victim = rnd.choice([n for n in names if c.procs[n].poll() is None])
        c.signal(victim, signal.SIGKILL)
        c.wait_exit(victim)
        killed += 1
        names.append("h%d" % len(names))
        c.worker(names[-1], slots=1, tiers="bench", extra=["--allow-noop"])
    fill.wait(timeout=120)
    c.wait_for(lambda: stat(c, "status:ok") >= n_jobs, 120)
    r = Client(unix=c.sock).r
    pipe = r.pipeline(transaction=False)
    for jid in ids:
        pipe.exists("al:res:" + jid)
    missing = [jid for jid, e in zip(ids, pipe.execute()) if not e]
    oks = stat(c, "status:ok")
    t.ok(killed >= 2 and not missing,
         "single slots SIGKILLed %d times holding results: all %d jobs have a result"
         % (killed, n_jobs), missing[:5])
    t.ok(oks == n_jobs, "...exactly one committed result per job (%d ok for %d jobs)"
         % (oks, n_jobs))
    t.ok(stat(c, "reclaimed") > 0,
         "...the killed workers' jobs were reclaimed (the faults happened)")
    c.wait_for(lambda: not pending_left(c), timeout=10)
    t.ok(not pending_left(c), "...nothing pending or delayed", pending_left(c))


section("worker kills", worker_kills)
section("dead scheduler", dead_scheduler)
section("slow Redis restart", slow_redis_restart, aof=True,
        redis_args=["--appendfsync", "always", "--enable-debug-command", "local"])
section("reclaim after outage", reclaim_after_outage, aof=True,
        redis_args=["--appendfsync", "always"])
section("bounded dlq", bounded_dlq)
section("leftovers swept", leftovers_swept)
section("single slots holding results", held_results,
        policy_text=policy(tier_def("bench", "noop", max_attempts=10), lease_ms=1500))
sys.exit(t.done())
