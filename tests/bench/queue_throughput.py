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
ratios. Beside Redis's CPU time, every process's: the scheduler's and the
workers' (an idle one waits in a blocking read), and the submitting
client's (bench_queue; BullMQ's node process, which is its worker too),
less what a run of one job costs them (start-up and shutdown: about half
a second of CPU for node): on a machine of C cores no run can pass C /
(all of them per job)."""
import json
import os
import resource
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


def start_worker(c, name, slots, prefetch=""):
    c.worker(name, slots=slots, tiers="bench",
             extra=["--allow-noop"] + (["--prefetch", prefetch] if prefetch else []))
    c.wait_for(lambda: "event=redis_up" in c.log(name), 10)


def children_us():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ru.ru_utime + ru.ru_stime) * 1e6


def measured(c, args, n=N_TP):
    """run_json(args) of n jobs, with CPU time meanwhile: the redis-server's
    per job (redis_us) and that of every process of the run in all
    (cpu_total_us): Redis, the cluster's daemons and the client that args
    starts."""
    pids = [c.redis.pid] + [p.pid for p in c.procs.values() if p.poll() is None]
    u0 = {pid: cpu_us(pid) for pid in pids}
    k0 = children_us()
    r = run_json(args)
    r["redis_us"] = (cpu_us(c.redis.pid) - u0[c.redis.pid]) / n
    r["cpu_total_us"] = sum(cpu_us(pid) - u0[pid] for pid in pids) + children_us() - k0
    return r


def main():
    if not os.path.isdir(os.path.join(HERE, "bullmq", "node_modules", "bullmq")):
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
                       cwd=os.path.join(HERE, "bullmq"), check=True)
    bq_js = os.path.join(HERE, "bullmq", "bench.mjs")
    rows = []
    for slots in (1, 4, 16):
        row = {"slots": slots}
        # the default worker on a stock redis-server first, for the record
        c = Cluster(policy=POLICY)
        try:
            c.scheduler()
            start_worker(c, "bench-stock", slots)
            row["stock"] = measured(c, [BQ, c.url, "throughput", str(N_TP), "bench"])
        finally:
            c.close()
        # then every series on a redis-server with the recommended settings
        c = Cluster(policy=POLICY, redis_args=REDIS_TUNING)
        al_tp = [BQ, c.url, "throughput", str(N_TP), "bench"]
        al_lat = [BQ, c.url, "latency", str(N_LAT), "bench"]
        try:
            c.scheduler()
            # --prefetch N: one run, for the record
            start_worker(c, "bench-p" + PREFETCH, slots, PREFETCH)
            row["pf"], row["pf_lat"] = measured(c, al_tp), run_json(al_lat)
            c.signal("bench-p" + PREFETCH, signal.SIGTERM)
            c.wait_exit("bench-p" + PREFETCH)
            # the default worker against BullMQ: ROUNDS rounds, the order
            # alternating, on the same redis-server (the idle side waits
            # in a blocking read)
            start_worker(c, "bench-pdefault", slots)
            series = {"al": lambda n: [BQ, c.url, "throughput", str(n), "bench"],
                      "bq": lambda n: ["node", bq_js, c.sock, "throughput", str(n), str(slots)]}
            runs = []
            for rnd in range(ROUNDS):
                order = ("al", "bq") if rnd % 2 == 0 else ("bq", "al")
                runs.append({who: measured(c, series[who](N_TP)) for who in order})
            # a run's fixed CPU (its client's start and end): one job's run
            fixed = {who: measured(c, series[who](1), 1)["cpu_total_us"] for who in series}
            for r in runs:
                for who in series:
                    r[who]["all_us"] = (r[who]["cpu_total_us"] - fixed[who]) / (N_TP - 1)
            for who in ("al", "bq"):
                row[who] = {k: median(r[who][k] for r in runs)
                            for k in ("jobs_per_s", "redis_us", "all_us")}
            row["ratio"] = median(r["al"]["jobs_per_s"] / r["bq"]["jobs_per_s"] for r in runs)
            row["cpu_ratio"] = median(r["al"]["redis_us"] / r["bq"]["redis_us"] for r in runs)
            row["all_ratio"] = median(r["al"]["all_us"] / r["bq"]["all_us"] for r in runs)
            row["al_lat"] = run_json(al_lat)
            row["bq_lat"] = run_json(["node", bq_js, c.sock, "latency", str(N_LAT), str(slots)])
        finally:
            c.close()
        rows.append(row)
    print("no-op jobs, %d for throughput, %d sequential for latency, one redis-server with %s"
          " (stock: another, stock settings)" % (N_TP, N_LAT, " ".join(REDIS_TUNING)))
    print("%5s | %9s %9s %9s %9s | %6s %6s %6s | %7s %7s %7s | %7s %7s %7s" % (
        "slots", "stock j/s", "al j/s", "al+pf j/s", "bq j/s", "stock", "ratio", "+pf", "al p50",
        "+pf p50", "bq p50", "al p99", "+pf p99", "bq p99"))
    for r in rows:
        bq = r["bq"]["jobs_per_s"]
        print("%5d | %9d %9d %9d %9d | %5.2fx %5.2fx %5.2fx | %5.2fms %5.2fms %5.2fms |"
              " %5.2fms %5.2fms %5.2fms" % (
                  r["slots"], r["stock"]["jobs_per_s"], r["al"]["jobs_per_s"],
                  r["pf"]["jobs_per_s"], bq, r["stock"]["jobs_per_s"] / bq, r["ratio"],
                  r["pf"]["jobs_per_s"] / bq, r["al_lat"]["p50_ms"], r["pf_lat"]["p50_ms"],
                  r["bq_lat"]["p50_ms"], r["al_lat"]["p99_ms"], r["pf_lat"]["p99_ms"],
                  r["bq_lat"]["p99_ms"]))
    print("(al: the worker's default settings, bq: BullMQ, each the median of %d rounds that"
          " alternate them, ratio: the median of the rounds' own; al+pf: one run of a worker"
          " started with --prefetch %s; stock: one run of the default worker on a stock"
          " redis-server)" % (ROUNDS, PREFETCH))
    print("Redis CPU per job (us): " + "; ".join(
        "%d slots: stock %.1f, al %.1f, al+pf %.1f, bq %.1f" % (
            r["slots"], r["stock"]["redis_us"], r["al"]["redis_us"], r["pf"]["redis_us"],
            r["bq"]["redis_us"])
        for r in rows))
    print("CPU per job of every process, Redis, daemons and client, less a one-job run's"
          " (us): " + "; ".join(
        "%d slots: al %.1f, bq %.1f (%.2fx)" % (r["slots"], r["al"]["all_us"], r["bq"]["all_us"],
                                                r["all_ratio"])
        for r in rows))
    for r in rows:
        plural = "s" if r["slots"] > 1 else ""
        summary.record("queue no-op throughput, %d slot%s, default settings" % (
            r["slots"], plural), "%d jobs/s" % r["al"]["jobs_per_s"],
            "BullMQ %d jobs/s" % r["bq"]["jobs_per_s"], r["ratio"], (">=", 3.0, "ratio"))
        summary.record("Redis CPU per job, %d slot%s, default settings" % (
            r["slots"], plural), "%.1f us" % r["al"]["redis_us"],
            "BullMQ %.1f us" % r["bq"]["redis_us"], r["cpu_ratio"],
            ("<=", 40, r["al"]["redis_us"]))
        summary.record("CPU per job of every process (Redis, daemons, client), %d slot%s" % (
            r["slots"], plural), "%.1f us" % r["al"]["all_us"],
            "BullMQ %.1f us" % r["bq"]["all_us"], r["all_ratio"])
        summary.record("queue submit-to-result p50, %d slot%s" % (r["slots"], plural),
                       "%.2f ms" % r["al_lat"]["p50_ms"], "BullMQ %.2f ms" % r["bq_lat"]["p50_ms"],
                       r["al_lat"]["p50_ms"] / r["bq_lat"]["p50_ms"])
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
