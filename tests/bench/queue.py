#!/usr/bin/python3
"""Queue benchmark: no-op job throughput and submit-to-result latency through
Airlock (scheduler + worker on the benchmark-only noop backend) with 1, 4 and
16 worker slots, and the same workload through BullMQ workers on the same
redis-server in the same run. Also print(1) through the queue on the process
backend. Prints a table with ratios."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD  # noqa: E402
from cluster import Cluster  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BQ = os.path.join(BUILD, "tests", "bench_queue")
N_TP = int(os.environ.get("BENCH_JOBS", "20000"))
N_LAT = int(os.environ.get("BENCH_LAT", "500"))
POLICY = """\
result_ttl_s: 600
lease_ms: 30000
tiers:
  bench: {backend: noop}
  trusted: {backend: process}
tenants:
  default: {}
"""


def run_json(args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, timeout=900, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (args[0], p.stderr[-500:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    if not os.path.isdir(os.path.join(HERE, "bullmq", "node_modules", "bullmq")):
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
                       cwd=os.path.join(HERE, "bullmq"), check=True)
    rows = []
    for slots in (1, 4, 16):
        c = Cluster(policy=POLICY)
        try:
            c.scheduler()
            c.worker("bench", slots=slots, tiers="bench", extra=["--allow-noop"])
            c.wait_for(lambda: "event=redis_up" in c.log("bench"), 10)
            tp = run_json([BQ, c.url, "throughput", str(N_TP), "bench"])
            lat = run_json([BQ, c.url, "latency", str(N_LAT), "bench"])
            btp = run_json(["node", os.path.join(HERE, "bullmq", "bench.mjs"), c.sock,
                            "throughput", str(N_TP), str(slots)])
            blat = run_json(["node", os.path.join(HERE, "bullmq", "bench.mjs"), c.sock,
                             "latency", str(N_LAT), str(slots)])
        finally:
            c.close()
        rows.append((slots, tp, lat, btp, blat))
    print("no-op jobs, %d for throughput, %d sequential for latency, one redis-server" % (N_TP, N_LAT))
    print("%5s | %12s %12s %7s | %9s %9s %9s %9s" % (
        "slots", "airlock j/s", "bullmq j/s", "ratio", "al p50", "bq p50", "al p99", "bq p99"))
    for slots, tp, lat, btp, blat in rows:
        print("%5d | %12d %12d %6.2fx | %7.2fms %7.2fms %7.2fms %7.2fms" % (
            slots, tp["jobs_per_s"], btp["jobs_per_s"], tp["jobs_per_s"] / btp["jobs_per_s"],
            lat["p50_ms"], blat["p50_ms"], lat["p99_ms"], blat["p99_ms"]))
    # print(1) through the whole queue on the process backend
    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        c.worker("proc", uid_base=65300, slots=2, tiers="trusted")
        c.wait_for(lambda: "event=redis_up" in c.log("proc"), 10)
        ms = []
        import time
        for i in range(int(os.environ.get("BENCH_PROC", "100"))):
            t0 = time.perf_counter()
            p = c.cli("run", "-c", "print(1)")
            ms.append((time.perf_counter() - t0) * 1000)
            assert p.returncode == 0, p
        ms.sort()
        print("print(1) through the queue on the process backend (CLI run, includes the CLI's"
              " own start): p50 %.2f ms, p99 %.2f ms" % (ms[len(ms) // 2], ms[int(len(ms) * 0.99) - 1]))
    finally:
        c.close()


if __name__ == "__main__":
    main()
