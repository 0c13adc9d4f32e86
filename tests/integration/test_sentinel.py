#!/usr/bin/python3
"""Redis Sentinel: a real redis-server master and replica and three
Sentinels (redis-server --sentinel), and a scheduler, a worker and the CLI
that know only the sentinels (redis+sentinel://.../mymaster). Jobs run
through them; under a steady load of submissions the master is killed
(SIGKILL); the sentinels promote the replica; the scheduler and the worker
follow and jobs submitted after the promotion are run; the CLI follows too.
With ?min_replicas=1 a submission is acknowledged only once the replica has
it, and once no replica is left the CLI and the gateway say so after the
timeout; under a steady load with it on, the master killed again (the old one
back as its replica first): every acknowledged submission has its result. A
worker with min_replicas=1 keeps each result and sends it again until WAIT
says a replica has it, and logs it while one does not. Reported, not asserted: how many acknowledged submissions the failover
lost (replication is asynchronous: what the master acknowledged but had not
sent on is gone) and how long from the kill to the first result committed on
the new master. Bad input: a master no sentinel knows, sentinels that are
all down: each a clear error."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import trusted  # noqa: E402
from gwclient import Api, key_file, start_gateway  # noqa: E402
from redisha import RedisHA, free_port  # noqa: E402

t = Tap()
need_root("the process backend")
POLICY = trusted(lease_ms=3000, max_attempts=3, backoff_ms=100,
                 more="  durable:\n    backend: process\n    max_attempts: 3\n")

ha = c = None
try:
    ha = RedisHA()
    c = Cluster(policy=POLICY, start_redis=False)
    c.url = ha.url
    c.scheduler()
    c.worker("ha-w", uid_base=66600, slots=2, tiers="trusted")
    c.url = ha.url + "?min_replicas=1&replica_timeout_ms=500"  # this worker's commits: WAITed
    c.worker("dur-w", uid_base=66650, slots=1, tiers="durable")
    c.url = ha.url
    p = c.cli("run", "-c", "print(6*7)", timeout=60)
    t.ok(p.returncode == 0 and p.stdout == b"42\n",
         "a job through a redis+sentinel:// URL: the CLI, the scheduler and the worker find "
         "the master", (p.returncode, p.stdout, p.stderr))

    p = c.cli("run", "--tier", "durable", "-c", "print('replicated')", timeout=60)
    t.ok(p.returncode == 0 and p.stdout == b"replicated\n" and
         "commit_not_replicated" not in c.log("dur-w"),
         "a worker with min_replicas=1: its commit is WAITed for, and the replica has it",
         (p.returncode, p.stderr, c.log("dur-w")[-400:]))
    durable = ha.url + "?min_replicas=1&replica_timeout_ms=2000"
    p = c.cli("--redis", durable, "run", "-c", "print('kept')", timeout=60)
    t.ok(p.returncode == 0 and p.stdout == b"kept\n",
         "min_replicas=1: a submission is acknowledged once the replica has it (WAIT)",
         (p.returncode, p.stderr))

    acked, errors, stop = [], [], threading.Event()

    def load():
        i = 0
        while not stop.is_set():
            p = c.cli("submit", "--tier", "trusted", "-c", "print(%d)" % i, timeout=90)
            if p.returncode == 0:
                acked.append((i, p.stdout.decode().strip(), time.time()))
            else:
                errors.append((i, p.returncode, p.stderr.decode()[-200:]))
            i += 1

    th = threading.Thread(target=load)
    th.start()
    time.sleep(3)
    before = len(acked)
    t_kill = time.time()
    first = []

    def first_run():  # the first job run and committed once the old master is gone
        while not first:
            p = c.cli("run", "-c", "print('first')", timeout=90)
            if p.returncode == 0 and p.stdout == b"first\n":
                first.append(time.time())

    ft = threading.Thread(target=first_run)
    ha.kill("master")
    ft.start()
    promoted = c.wait_for(lambda: ha.sentinel_master() == ("127.0.0.1", ha.ports["replica"]),
                          timeout=30, step=0.1)
    t_promoted = time.time()
    time.sleep(6)
    stop.set()
    th.join(120)
    after = [a for a in acked if a[2] > t_promoted]
    t.ok(promoted and before > 5 and len(after) > 5,
         "SIGKILL of the master: the sentinels promote the replica in %.1f s; submissions go "
         "on (%d acknowledged before the kill, %d after the promotion)"
         % (t_promoted - t_kill, before, len(after)), (promoted, before, len(after), errors))

    results, lost, wrong = {}, [], []
    for i, jid, at in acked:
        p = c.cli("wait", jid, "--json", "--timeout-wait", "30000", timeout=60)
        if p.returncode == 0 and b'"status": "ok"' in p.stdout:
            results[jid] = p.stdout
            if ('"stdout": "%d\\n"' % i).encode() not in p.stdout:
                wrong.append((i, jid))
        else:
            lost.append((i, jid, at - t_kill, p.returncode, p.stderr.decode()[-120:]))
    lost_after = [x for x in lost if x[2] > t_promoted - t_kill]
    t.ok(not lost_after and not wrong,
         "every submission acknowledged after the promotion has its result, each its own "
         "job's output (%d results in all)" % len(results), (lost_after, wrong))
    ft.join(120)
    failover_s = first[0] - t_kill if first else -1
    t.ok(first and failover_s < 30,
         "master killed to the first job committed on the new master: %.1f s (down-after "
         "1 s, then the election); lost with asynchronous replication: %d of %d "
         "acknowledged submissions (those the master had not passed on)"
         % (failover_s, len(lost), len(acked)), lost)
    ready = [n for n in ("sched1", "ha-w") if c.log(n).count("event=redis_ready") >= 1]
    p = c.cli("run", "-c", "print('after')", timeout=60)
    t.ok(p.returncode == 0 and p.stdout == b"after\n" and len(ready) == 2,
         "after the failover the scheduler and the worker are connected to the new master "
         "and a new job runs", (p.returncode, p.stderr, ready))

    # the new master has no replica: a durable submission says so
    lonely = ha.url + "?min_replicas=1&replica_timeout_ms=300"
    p = c.cli("--redis", lonely, "submit", "-c", "print(1)", timeout=60)
    t.ok(p.returncode == 69 and b"reached 0 of the 1 replicas" in p.stderr and
         b"same idempotency key" in p.stderr,
         "min_replicas=1 with no replica left: the CLI's submission fails after its timeout, "
         "saying how many replicas had it and what to do", (p.returncode, p.stderr))
    p = c.cli("run", "--tier", "durable", "-c", "print('alone')", timeout=60)
    c.wait_for(lambda: "try=2" in c.log("dur-w"), timeout=30)
    t.ok(p.returncode == 0 and p.stdout == b"alone\n" and
         "event=commit_not_replicated" in c.log("dur-w") and "try=2" in c.log("dur-w"),
         "...with no replica left its result is committed, kept and sent again while WAIT "
         "falls short, and the log says so", (p.returncode, c.log("dur-w")[-600:]))
    port = free_port()
    start_gateway(c, port, key_file(os.path.join(c.dir, "keys"), {"acme": "sk-0123456789abcdef"}),
                  url=lonely)
    st, doc = Api(port).call("POST", "/v1/jobs", key="sk-0123456789abcdef",
                             body={"tier": "trusted", "runtime": "python", "code": "print(1)"})
    t.ok(st == 503 and "0 of the 1 replicas" in doc.get("error", ""),
         "min_replicas=1 with no replica left: the gateway's submission is a 503 saying so",
         (st, doc))

    # a second failover, now with min_replicas=1: the old master back as a replica first
    old = "master"
    ha._start_redis(old, ["--replicaof", ha.addr("replica"), str(ha.ports["replica"])])
    c.wait_for(lambda: "state=online" in ha.cli("replica", "INFO", "replication"), timeout=60)
    c.wait_for(lambda: str(ha.ports[old]) in ha.cli("s0", "SENTINEL", "replicas", "mymaster"),
               timeout=30)
    time.sleep(2)
    durable = ha.url + "?min_replicas=1&replica_timeout_ms=2000"
    acked2, errors2, stop2 = [], [], threading.Event()

    def load2():
        i = 100000
        while not stop2.is_set():
            p = c.cli("--redis", durable, "submit", "--tier", "trusted", "-c", "print(%d)" % i,
                      timeout=90)
            if p.returncode == 0:
                acked2.append((i, p.stdout.decode().strip()))
            else:
                errors2.append((i, p.stderr.decode()[-160:]))
            i += 1

    th = threading.Thread(target=load2)
    th.start()
    time.sleep(3)
    ha.kill("replica")  # the master now
    promoted2 = c.wait_for(lambda: ha.sentinel_master() == ("127.0.0.1", ha.ports[old]),
                           timeout=30, step=0.1)
    time.sleep(4)
    stop2.set()
    th.join(120)
    missing, wrong2 = [], []
    for i, jid in acked2:
        p = c.cli("wait", jid, "--json", "--timeout-wait", "30000", timeout=60)
        if p.returncode != 0 or b'"status": "ok"' not in p.stdout:
            missing.append((i, jid, p.returncode))
        elif ('"stdout": "%d\\n"' % i).encode() not in p.stdout:
            wrong2.append((i, jid))
    refused = [e for e in errors2 if "replicas asked for" in e[1]]
    t.ok(promoted2 and len(acked2) > 5 and not missing and not wrong2,
         "min_replicas=1 under load, the master killed again: every one of the %d "
         "acknowledged submissions has its result, each its own job's output; %d were "
         "refused once no replica was left (the client was told)" % (len(acked2), len(refused)),
         (promoted2, missing[:5], wrong2[:5], errors2[-3:]))

    # bad input
    p = c.cli("--redis", ha.url.replace("/mymaster", "/nosuchmaster"), "stats", timeout=30)
    t.ok(p.returncode == 69 and b"no master \"nosuchmaster\"" in p.stderr,
         "a master no sentinel knows: a clear error", (p.returncode, p.stderr))
    dead = "redis+sentinel://127.0.0.1:%d,127.0.0.1:%d/mymaster" % (free_port(), free_port())
    p = c.cli("--redis", dead, "stats", timeout=30)
    t.ok(p.returncode == 69 and b"from 2 sentinels" in p.stderr and b"refused" in p.stderr,
         "sentinels that are all down: a clear error naming them", (p.returncode, p.stderr))
finally:
    if c:
        c.close()
    if ha:
        ha.close()
sys.exit(t.done())
