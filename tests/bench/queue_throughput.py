#!/usr/bin/python3
"""Queue benchmark: no-op job throughput and submit-to-result latency through
Airlock (scheduler + worker on the benchmark-only noop backend) with 1, 4 and
16 worker slots, each with the worker's default settings (no flag) and with
--prefetch BENCH_PREFETCH (default 16), and the same workload through BullMQ
workers on the same redis-server in the same run; the redis-server's CPU
time per job (from /proc) for each. Also print(1) through the queue on the
process backend. Prints a table with ratios."""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD  # noqa: E402
from cluster import REDIS_TUNING, Cluster  # noqa: E402
import summary  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BQ = os.path.join(BUILD, "tests", "bench_queue")
N_TP = int(os.environ.get("BENCH_JOBS", "20000"))
N_LAT = int(os.environ.get("BENCH_LAT", "500"))
PREFETCH = os.environ.get("BENCH_PREFETCH", "16")
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
        try:
            c.scheduler()
            al = [stock]
            for pf in ("", PREFETCH):  # the same redis-server, one worker at a time
                name = "bench-p" + (pf or "default")
                c.worker(name, slots=slots, tiers="bench",
                         extra=["--allow-noop"] + (["--prefetch", pf] if pf else []))
                c.wait_for(lambda: "event=redis_up" in c.log(name), 10)
                u0 = cpu_us(c.redis.pid)
                tp = run_json([BQ, c.url, "throughput", str(N_TP), "bench"])
                tp["redis_us"] = (cpu_us(c.redis.pid) - u0) / N_TP
                al.append((tp, run_json([BQ, c.url, "latency", str(N_LAT), "bench"])))
                c.signal(name, signal.SIGTERM)
                c.wait_exit(name)
            u0 = cpu_us(c.redis.pid)
            btp = run_json(["node", os.path.join(HERE, "bullmq", "bench.mjs"), c.sock,
                            "throughput", str(N_TP), str(slots)])
            btp["redis_us"] = (cpu_us(c.redis.pid) - u0) / N_TP
            blat = run_json(["node", os.path.join(HERE, "bullmq", "bench.mjs"), c.sock,
                             "latency", str(N_LAT), str(slots)])
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
                  tp0["jobs_per_s"] / btp["jobs_per_s"], tp1["jobs_per_s"] / btp["jobs_per_s"],
                  lat0["p50_ms"], lat1["p50_ms"], blat["p50_ms"], lat0["p99_ms"], lat1["p99_ms"],
                  blat["p99_ms"]))
    print("(al: the worker's default settings; al+pf: started with --prefetch %s; stock: the"
          " default worker on a stock redis-server)" % PREFETCH)
    print("Redis CPU per job (us): " + "; ".join(
        "%d slots: stock %.1f, al %.1f, al+pf %.1f, bq %.1f" % (
            slots, al[0]["redis_us"], al[1][0]["redis_us"], al[2][0]["redis_us"], btp["redis_us"])
        for slots, al, btp, blat in rows))
    for slots, al, btp, blat in rows:
        al = al[1:]
        tp0 = al[0][0]
        summary.record("queue no-op throughput, %d slot%s, default settings" % (
            slots, "s" if slots > 1 else ""), "%d jobs/s" % tp0["jobs_per_s"],
            "BullMQ %d jobs/s" % btp["jobs_per_s"], tp0["jobs_per_s"] / btp["jobs_per_s"],
            (">=", 3.0, "ratio"))
        summary.record("Redis CPU per job, %d slot%s, default settings" % (
            slots, "s" if slots > 1 else ""), "%.1f us" % tp0["redis_us"],
            "BullMQ %.1f us" % btp["redis_us"], tp0["redis_us"] / btp["redis_us"],
            ("<=", 40, tp0["redis_us"]))
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
