#!/usr/bin/python3
"""Two builds on the queue path, interleaved on one machine: no-op jobs
(the benchmark-only noop backend, one worker of 4 slots) through the
scheduler and the worker of each build, submitted by that build's client
library (bench_queue). Per round and build: throughput, sequential
submit-to-result p50, and Redis CPU per job (INFO cpu around the
throughput run). Usage: ab_queue.py BUILD_A BUILD_B [jobs [latency jobs
[rounds]]]; prints medians and the ratios B/A."""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import cluster  # noqa: E402

# Redis as docs/scale.md recommends; AB_STOCK_REDIS=1 for a stock one
REDIS_ARGS = [] if os.environ.get("AB_STOCK_REDIS") else cluster.REDIS_TUNING
POLICY = "result_ttl_s: 600\nlease_ms: 30000\ntiers:\n  bench: {backend: noop}\n"


def one(build, n_tp, n_lat):
    cluster.SCHED = os.path.join(build, "airlock-scheduler")
    cluster.WORKER = os.path.join(build, "airlock-worker")
    bq = os.path.join(build, "tests", "bench_queue")
    c = cluster.Cluster(policy=POLICY, redis_args=REDIS_ARGS)
    try:
        c.scheduler()
        c.worker("ab", slots=4, tiers="bench", extra=["--allow-noop"])
        c.wait_for(lambda: "event=redis_up" in c.log("ab"), 10)
        cpu0 = c.redis_cpu_s()
        tp = json.loads(subprocess.run([bq, c.url, "throughput", str(n_tp), "bench"],
                                       capture_output=True, text=True, timeout=600).stdout)
        cpu = (c.redis_cpu_s() - cpu0) * 1e6 / n_tp
        lat = json.loads(subprocess.run([bq, c.url, "latency", str(n_lat), "bench"],
                                        capture_output=True, text=True, timeout=600).stdout)
        return tp["jobs_per_s"], lat["p50_ms"], cpu
    finally:
        c.close()


def main():
    a, b = sys.argv[1], sys.argv[2]
    n_tp, n_lat, rounds = (int(x) for x in (sys.argv[3:6] + ["10000", "300", "5"][len(sys.argv[3:6]):]))
    got = {a: [], b: []}
    for _ in range(rounds):
        for build in (a, b):
            got[build].append(one(build, n_tp, n_lat))
    med = {k: [statistics.median(r[i] for r in v) for i in range(3)] for k, v in got.items()}
    print("queue, no-op jobs: %d for throughput, %d sequential, %d rounds interleaved"
          % (n_tp, n_lat, rounds))
    print("%-40s %10s %10s %14s" % ("build", "jobs/s", "p50 ms", "Redis us/job"))
    for k in (a, b):
        print("%-40s %10.0f %10.3f %14.1f" % (k[-40:], *med[k]))
    print("B/A: throughput %.3fx, p50 %.3fx, Redis CPU per job %.3fx"
          % (med[b][0] / med[a][0], med[b][1] / med[a][1], med[b][2] / med[a][2]))
    # each round's A and B ran back to back: the median of the rounds' own
    # ratios is the steadier figure on a machine whose speed drifts
    per = [statistics.median(y[i] / x[i] for x, y in zip(got[a], got[b])) for i in range(3)]
    print("B/A, median of the rounds' ratios: throughput %.3fx, p50 %.3fx, Redis CPU per job"
          " %.3fx" % tuple(per))


main()
