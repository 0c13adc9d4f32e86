#!/usr/bin/python3
"""Redis settings benchmark: what docs/scale.md's "Redis settings" are worth.
No-op jobs (the benchmark-only noop backend, one worker of 4 slots, the
default worker settings; 20 000 jobs submitted in batches of 100) on a
stock redis-server, on one with only `stream-node-max-bytes 512`, and on
one with all the settings docs/scale.md recommends (tests/lib/cluster.py's
REDIS_TUNING), interleaved in rounds on one machine and build, for a
small job (argv ["true"]) and for one carrying a 2 KiB argument (a script
sent inline). Per setting: Redis CPU per job (INFO cpu around the run),
Redis memory per finished job (used_memory after the run against before)
and jobs/s: medians of the rounds, and the medians of each round's ratios
to the stock redis-server and to the setting before it in the table, run
beside it. Usage: redis_settings.py [rounds [jobs]]; prints a table."""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD  # noqa: E402
import cluster  # noqa: E402
import summary  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
JOBS = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
POLICY = "result_ttl_s: 600\nlease_ms: 30000\ntiers:\n  bench: {backend: noop}\n"
SETTINGS = [("stock", []),
            ("stream-node-max-bytes 512", ["--stream-node-max-bytes", "512"]),
            ("recommended", cluster.REDIS_TUNING)]
SIZES = [("small job", 0), ("2 KiB job", 2048)]
BQ = os.path.join(BUILD, "tests", "bench_queue")


def one(redis_args, arg_bytes):
    """(jobs/s, Redis CPU us a job, Redis bytes a finished job)"""
    c = cluster.Cluster(policy=POLICY, redis_args=redis_args)
    try:
        c.scheduler()
        c.worker("rs", slots=4, tiers="bench", extra=["--allow-noop"])
        c.wait_for(lambda: "event=redis_up" in c.log("rs"), 10)
        cpu0, mem0 = c.redis_cpu_s(), int(c.info("memory")["used_memory"])
        p = subprocess.run([BQ, c.url, "throughput", str(JOBS), "bench"], capture_output=True,
                           text=True, timeout=600,
                           env=dict(os.environ, BENCH_ARG_BYTES=str(arg_bytes)))
        if p.returncode != 0:
            raise RuntimeError("bench_queue failed: %s" % p.stderr[-500:])
        tp = json.loads(p.stdout)["jobs_per_s"]
        return (tp, (c.redis_cpu_s() - cpu0) * 1e6 / JOBS,
                (int(c.info("memory")["used_memory"]) - mem0) / JOBS)
    finally:
        c.close()


def ratios(rows, base):
    """The medians of the rounds' own ratios (each round's runs were back
    to back: steadier than the ratio of medians on a machine that drifts)"""
    return [statistics.median(r[i] / b[i] for r, b in zip(rows, base)) for i in range(3)]


def main():
    got = {(s, z): [] for s, _ in SETTINGS for z, _ in SIZES}
    for _ in range(ROUNDS):
        for size, arg_bytes in SIZES:
            for name, args in SETTINGS:
                got[(name, size)].append(one(args, arg_bytes))
    print("Redis settings: %d no-op jobs, 4 slots, %d rounds interleaved; recommended = %s"
          % (JOBS, ROUNDS, " ".join(cluster.REDIS_TUNING)))
    print("%-10s %-26s | %8s %13s %13s | %-22s | %s" % (
        "job", "redis-server", "jobs/s", "Redis us/job", "bytes/job", "to stock: CPU, memory",
        "to the row above: CPU, memory, jobs/s"))
    for size, _ in SIZES:
        before = None
        for name, _ in SETTINGS:
            rows = got[(name, size)]
            med = [statistics.median(r[i] for r in rows) for i in range(3)]
            to_stock = ratios(rows, got[("stock", size)])
            to_above = ratios(rows, before) if before else [1.0] * 3
            print("%-10s %-26s | %8.0f %13.1f %13.0f | %.2fx, %.2fx %10s | %.2fx, %.2fx, %.2fx"
                  % (size, name, med[0], med[1], med[2], to_stock[1], to_stock[2], "",
                     to_above[1], to_above[2], to_above[0]))
            if name == "recommended":
                smed = [statistics.median(r[i] for r in got[("stock", size)]) for i in range(3)]
                summary.record("Redis CPU per job, docs/scale.md's settings, %s" % size,
                               "%.1f us" % med[1], "stock Redis %.1f us" % smed[1], to_stock[1])
                summary.record("Redis memory per finished job, docs/scale.md's settings, %s"
                               % size, "%.0f bytes" % med[2], "stock Redis %.0f bytes" % smed[2],
                               to_stock[2])
            before = rows


main()
