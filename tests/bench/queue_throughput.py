#!/usr/bin/python3
"""Queue benchmark: no-op job throughput and submit-to-result latency through
Airlock (scheduler + worker on the benchmark-only noop backend) with 1, 4 and
16 worker slots, each with the worker's default settings (no flag) and with
--prefetch BENCH_PREFETCH (default 16), and the same workload through BullMQ
workers on the same redis-server in the same run (the default worker and
BullMQ in BENCH_ROUNDS rounds, default 3, that alternate them); the
redis-server's CPU time per job (from /proc) for each. Redis runs with
cluster.REDIS_TUNING (docs/scale.md, "Redis settings"); one more run of
the default worker on a stock redis-server is printed beside. Also
print(1) through the queue on the process backend. Prints a table with
ratios."""
import json
import os
import signal
import subprocess
import sys
from statistics import median

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD  # noqa: E402
from cluster import REDIS_TUNING, Cluster  # noqa: E402
import summary  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BQ = os.path.join(BUILD, "tests", "bench_queue")
N_TP = int(os.environ.get("BENCH_JOBS", "20000"))
N_LAT = int(os.environ.get("BENCH_LAT", "500"))
PREFETCH = os.environ.get("BENCH_PREFETCH", "16")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
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


def cpu_us(pid):
    with open("/proc/%d/stat" % pid) as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) * 1e6 / os.sysconf("SC_CLK_TCK")


def main():
    if not os.path.isdir(os.path.join(HERE, "bullmq", "node_modules", "bullmq")):
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
                       cwd=os.path.join(HERE, "bullmq"), check=True)
    rows = []
    for slots in (1, 4, 16):
        # the default worker on a stock redis-server first, for the record
        c = Cluster(policy=POLICY)
        try:
            c.scheduler()
            c.worker("bench-stock", slots=slots, tiers="bench", extra=["--allow-noop"])
            c.wait_for(lambda: "event=redis_up" in c.log("bench-stock"), 10)
            u0 = cpu_us(c.redis.pid)
            stock = run_json([BQ, c.url, "throughput", str(N_TP), "bench"])
            stock["redis_us"] = (cpu_us(c.redis.pid) - u0) / N_TP
        finally:
            c.close()
        # then every series on a redis-server with the recommended settings
        c = Cluster(policy=POLICY, redis_args=REDIS_TUNING)
        bq_js = os.path.join(HERE, "bullmq", "bench.mjs")
        try:
            c.scheduler()

            def start(name, pf):
                c.worker(name, slots=slots, tiers="bench",
                         extra=["--allow-noop"] + (["--prefetch", pf] if pf else []))
                c.wait_for(lambda: "event=redis_up" in c.log(name), 10)

            def measured(args):
                u0 = cpu_us(c.redis.pid)
                r = run_json(args)
                r["redis_us"] = (cpu_us(c.redis.pid) - u0) / N_TP
                return r

            # --prefetch N: one run, for the record
            start("bench-p" + PREFETCH, PREFETCH)
            pf = (measured([BQ, c.url, "throughput", str(N_TP), "bench"]),
                  run_json([BQ, c.url, "latency", str(N_LAT), "bench"]))
            c.signal("bench-p" + PREFETCH, signal.SIGTERM)
            c.wait_exit("bench-p" + PREFETCH)
            # the default worker against BullMQ: ROUNDS rounds, the order
            # alternating, on the same redis-server (the idle side waits
            # in a blocking read)
            start("bench-pdefault", "")
            runs = []
            for rnd in range(ROUNDS):
                a = b = None
                for who in (("al", "bq") if rnd % 2 == 0 else ("bq", "al")):
                    if who == "al":
                        a = measured([BQ, c.url, "throughput", str(N_TP), "bench"])
                    else:
                        b = measured(["node", bq_js, c.sock, "throughput", str(N_TP), str(slots)])
                runs.append((a, b))
            tp0 = {k: median(r[0][k] for r in runs) for k in ("jobs_per_s", "redis_us")}
            tp0["ratio"] = median(r[0]["jobs_per_s"] / r[1]["jobs_per_s"] for r in runs)
            tp0["cpu_ratio"] = median(r[0]["redis_us"] / r[1]["redis_us"] for r in runs)
            btp = {k: median(r[1][k] for r in runs) for k in ("jobs_per_s", "redis_us")}
            al = [stock, (tp0, run_json([BQ, c.url, "latency", str(N_LAT), "bench"])), pf]
            blat = run_json(["node", bq_js, c.sock, "latency", str(N_LAT), str(slots)])
        finally:
            c.close()
        rows.append((slots, al, btp, blat))
    print("no-op jobs, %d for throughput, %d sequential for latency, one redis-server with %s"
          " (stock: another, stock settings)" % (N_TP, N_LAT, " ".join(REDIS_TUNING)))
    print("%5s | %9s %9s %9s %9s | %6s %6s %6s | %7s %7s %7s | %7s %7s %7s" % (
        "slots", "stock j/s", "al j/s", "al+pf j/s", "bq j/s", "stock", "ratio", "+pf", "al p50",
        "+pf p50", "bq p50", "al p99", "+pf p99", "bq p99"))
    for slots, al, btp, blat in rows:
        stock, (tp0, lat0), (tp1, lat1) = al
        print("%5d | %9d %9d %9d %9d | %5.2fx %5.2fx %5.2fx | %5.2fms %5.2fms %5.2fms |"
              " %5.2fms %5.2fms %5.2fms" % (
                  slots, stock["jobs_per_s"], tp0["jobs_per_s"], tp1["jobs_per_s"],
                  btp["jobs_per_s"], stock["jobs_per_s"] / btp["jobs_per_s"],
                  tp0["ratio"], tp1["jobs_per_s"] / btp["jobs_per_s"],
                  lat0["p50_ms"], lat1["p50_ms"], blat["p50_ms"], lat0["p99_ms"], lat1["p99_ms"],
                  blat["p99_ms"]))
    print("(al: the worker's default settings, bq: BullMQ, each the median of %d rounds that"
          " alternate them, ratio: the median of the rounds' own; al+pf: one run of a worker"
          " started with --prefetch %s; stock: one run of the default worker on a stock"
          " redis-server)" % (ROUNDS, PREFETCH))
    print("Redis CPU per job (us): " + "; ".join(
        "%d slots: stock %.1f, al %.1f, al+pf %.1f, bq %.1f" % (
            slots, al[0]["redis_us"], al[1][0]["redis_us"], al[2][0]["redis_us"], btp["redis_us"])
        for slots, al, btp, blat in rows))
    for slots, al, btp, blat in rows:
        al = al[1:]
        tp0 = al[0][0]
        summary.record("queue no-op throughput, %d slot%s, default settings" % (
            slots, "s" if slots > 1 else ""), "%d jobs/s" % tp0["jobs_per_s"],
            "BullMQ %d jobs/s" % btp["jobs_per_s"], tp0["ratio"], (">=", 3.0, "ratio"))
        summary.record("Redis CPU per job, %d slot%s, default settings" % (
            slots, "s" if slots > 1 else ""), "%.1f us" % tp0["redis_us"],
            "BullMQ %.1f us" % btp["redis_us"], tp0["cpu_ratio"], ("<=", 40, tp0["redis_us"]))
        summary.record("queue submit-to-result p50, %d slot%s" % (slots, "s" if slots > 1 else ""),
                       "%.2f ms" % al[0][1]["p50_ms"], "BullMQ %.2f ms" % blat["p50_ms"],
                       al[0][1]["p50_ms"] / blat["p50_ms"])
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
