#!/usr/bin/python3
"""The fleet's figures (issue "a fleet that survives its hosts and its
Redis", docs/scale.md), one run:

1. Scale: no-op jobs (the benchmark-only noop backend) through one
   redis-server as workers are added (1, 2, 4, 8; 4 slots each and the
   worker's default settings), with the redis-server's own CPU time per job
   (from /proc).
2. Redis memory: per queued job (submitted, no worker) and per result.
3. Sentinel against a direct connection to the same master: throughput and
   p50/p99 latency (tests/bench/bench_queue.c, the C client), interleaved,
   BENCH_ROUNDS rounds (5).
4. Failover: master SIGKILLed to the first job committed on the new master,
   five times (the old master comes back as a replica each time); p50.
Usage: fleet.py [N] (jobs per throughput run, default 20000)"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD  # noqa: E402
from cluster import REDIS_TUNING, Cluster  # noqa: E402
from redisha import RedisHA  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summary  # noqa: E402

BQ = os.path.join(BUILD, "tests", "bench_queue")
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))  # Sentinel against direct, interleaved
POLICY = """\
result_ttl_s: 3600
lease_ms: 5000
tiers:
  bench: {backend: noop}
  trusted:
    backend: process
    max_attempts: 3
    backoff_ms: 100
"""


def bq(url, what, n):
    p = subprocess.run([BQ, url, what, str(n), "bench"], capture_output=True, text=True,
                       timeout=1800)
    if p.returncode != 0:
        raise RuntimeError("bench_queue %s: %s" % (what, p.stderr[-400:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def cpu_ms(pid):
    with open("/proc/%d/stat" % pid) as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def used_memory(ha):
    info = ha.cli("master", "INFO", "memory")
    return int(info.split("used_memory:")[1].split()[0])


def workers(c, n, url):
    names = []
    for i in range(n):
        name = "fw%d" % i
        c._start(name, [os.path.join(BUILD, "airlock-worker"), "--redis", url, "--policy",
                        c.policy, "--worker-id", name, "--uid-base", str(61000 + 10 * i),
                        "--slots", "4", "--tiers", "bench", "--allow-noop",
                        "--state-dir", os.path.join(c.dir, "state"), "--heartbeat-ms", "1000"])
        names.append(name)
    for name in names:
        c.wait_for(lambda: "event=redis_up" in c.log(name), 20)
    return names


def stop(c, names):
    for name in names:
        c.signal(name, signal.SIGTERM)
    for name in names:
        c.wait_exit(name)


def main():
    ha = RedisHA(redis_args=REDIS_TUNING)
    c = Cluster(policy=POLICY, start_redis=False)
    direct = "redis://127.0.0.1:%d" % ha.ports["master"]
    c.url = direct
    try:
        c.scheduler()
        mpid = ha.procs["master"].pid
        print("## Scale: no-op jobs through one redis-server (%d jobs a run)\n" % N)
        print("| workers (4 slots each, default settings) | jobs/s | Redis CPU per job |")
        print("| --- | --- | --- |")
        one = None
        for n in (1, 2, 4, 8):
            names = workers(c, n, direct)
            bq(direct, "throughput", 500)  # warm
            t0 = cpu_ms(mpid)
            r = bq(direct, "throughput", N)
            used = cpu_ms(mpid) - t0
            print("| %d | %d | %.1f us |" % (n, r["jobs_per_s"], used * 1000 / N), flush=True)
            one = one or r["jobs_per_s"]
            summary.record("fleet no-op throughput, %d worker%s of 4 slots (TCP, a replica)" % (
                n, "s" if n > 1 else ""), "%d jobs/s" % r["jobs_per_s"], "1 worker %d jobs/s" % one,
                r["jobs_per_s"] / one)
            summary.record("fleet Redis CPU per job, %d worker%s" % (n, "s" if n > 1 else ""),
                           "%.1f us" % (used * 1000 / N), "", None, ("<=", 40, used * 1000 / N))
            stop(c, names)

        print("\n## Redis memory\n")
        before = used_memory(ha)
        bq(direct, "submit", 10000)  # queued, no worker: each job and its queue entry
        queued = used_memory(ha)
        names = workers(c, 2, direct)
        c.wait_for(lambda: "0" == ha.cli("master", "XLEN", "al:intake") and
                   int(ha.cli("master", "XLEN", "al:q:bench:mid") or 0) >= 0, 60)
        time.sleep(5)
        done = used_memory(ha)
        stop(c, names)
        print("| | bytes |")
        print("| --- | --- |")
        print("| per queued job (record, intake entry, queue entry) | %d |"
              % ((queued - before) / 10000))
        print("| per finished job (record and result, until result_ttl_s) | %d |"
              % ((done - before) / 10000))

        print("\n## Sentinel against a direct connection to the same master\n")
        names = workers(c, 2, ha.url)
        rows = []
        for rnd in range(ROUNDS):
            for name, url in (("direct", direct), ("sentinel", ha.url)):
                tp = bq(url, "throughput", N // 2)
                lat = bq(url, "latency", 1000)
                rows.append((rnd, name, tp["jobs_per_s"], lat["p50_ms"], lat["p99_ms"]))
        stop(c, names)
        print("| round | via | jobs/s | p50 | p99 |")
        print("| --- | --- | --- | --- | --- |")
        for rnd, name, tp, p50, p99 in rows:
            print("| %d | %s | %d | %.2f ms | %.2f ms |" % (rnd + 1, name, tp, p50, p99))
        med = {}
        for name in ("direct", "sentinel"):
            v = sorted(r for r in rows if r[1] == name)
            tps = sorted(x[2] for x in v)
            p50s = sorted(x[3] for x in v)
            p99s = sorted(x[4] for x in v)
            med[name] = (tps[len(v) // 2], p50s[len(v) // 2], p99s[len(v) // 2])
        print("| median ratio sentinel/direct | | %.3f | %.3f | %.3f |" % (
            med["sentinel"][0] / med["direct"][0], med["sentinel"][1] / med["direct"][1],
            med["sentinel"][2] / med["direct"][2]))
    finally:
        c.close()
        ha.close()

    # failovers: the process backend, airlock run through the sentinels
    ha = RedisHA()
    c = Cluster(policy=POLICY, start_redis=False)
    c.url = ha.url
    try:
        c.scheduler()
        c.worker("fo-w", uid_base=61500, slots=2, tiers="trusted")
        assert c.cli("run", "-c", "print(1)", timeout=60).returncode == 0
        took = []
        for i in range(5):
            master = "master" if ha.sentinel_master()[1] == ha.ports["master"] else "replica"
            other = "replica" if master == "master" else "master"
            t0 = time.time()
            ha.kill(master)
            while c.cli("run", "-c", "print(1)", timeout=120).returncode != 0:
                pass
            took.append(time.time() - t0)
            # the old master comes back as the new one's replica
            ha._start_redis(master, ["--replicaof", ha.addr(other), str(ha.ports[other])])
            c.wait_for(lambda: "connected_slaves:1" in ha.cli(other, "INFO", "replication")
                       and "state=online" in ha.cli(other, "INFO", "replication"), 60)
            time.sleep(3)  # the sentinels see it as a replica again
        took.sort()
        print("\n## Failover: master SIGKILLed to the first job committed on the new master\n")
        print("| failover | %s | p50 |" % " | ".join(str(i + 1) for i in range(5)))
        print("| --- | %s | --- |" % " | ".join("---" for _ in range(5)))
        print("| seconds | %s | %.1f |" % (" | ".join("%.1f" % x for x in took), took[2]))
    finally:
        c.close()
        ha.close()


if __name__ == "__main__":
    main()
