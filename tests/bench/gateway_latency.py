#!/usr/bin/python3
"""Gateway benchmark: submit-and-wait of a no-op job (the benchmark-only
noop backend) through airlock-gateway against the same through direct Redis
(the C client library in both: bench_queue), interleaved in rounds on one
redis-server, scheduler and worker; and the submission rate, one at a time
over one kept-alive connection, through each. Targets (issue "front door"):
p50 at most +0.5 ms through the gateway; gateway submissions at least half
the direct rate. Prints a table."""
import json
import os
import secrets
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD  # noqa: E402
from cluster import Cluster  # noqa: E402
from gwclient import free_port, key_file, start_gateway  # noqa: E402
import summary  # noqa: E402

BQ = os.path.join(BUILD, "tests", "bench_queue")
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
N_LAT = int(os.environ.get("BENCH_LAT", "200"))
N_SUB = int(os.environ.get("BENCH_SUB", "2000"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "16"))  # concurrent submitters: throughput
POLICY = """\
result_ttl_s: 600
lease_ms: 30000
tiers:
  bench: {backend: noop}
tenants:
  default: {}
"""


def run_json(args, env=None):
    p = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (args, p.stderr[-500:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def rate_together(url, n, env=None):
    """CLIENTS bench_queue submitters at once, each its own connection (kept
    alive through the gateway): their submissions per second, summed."""
    procs = [subprocess.Popen([BQ, url, "submit", str(n), "bench"], stdout=subprocess.PIPE,
                              text=True, env=env) for _ in range(CLIENTS)]
    total = 0
    for p in procs:
        out, _ = p.communicate(timeout=900)
        if p.returncode != 0:
            raise RuntimeError("bench_queue submit failed")
        total += json.loads(out.strip().splitlines()[-1])["submits_per_s"]
    return total


def med(v):
    v = sorted(v)
    return v[len(v) // 2]


def main():
    key = "bench-" + secrets.token_hex(16)
    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        c.worker("bench-gw", slots=4, tiers="bench", extra=["--allow-noop"])
        port = free_port()
        start_gateway(c, port, key_file(os.path.join(c.dir, "keys"), {"bench": key}))
        gw = "http://127.0.0.1:%d" % port
        env = dict(os.environ, AIRLOCK_TOKEN=key)
        run_json([BQ, c.url, "latency", "50", "bench"])  # warm both paths
        run_json([BQ, gw, "latency", "50", "bench"], env)
        d50, g50, d99, g99, dsub, gsub, dpar, gpar = [], [], [], [], [], [], [], []
        for _ in range(ROUNDS):
            d = run_json([BQ, c.url, "latency", str(N_LAT), "bench"])
            g = run_json([BQ, gw, "latency", str(N_LAT), "bench"], env)
            d50.append(d["p50_ms"])
            g50.append(g["p50_ms"])
            d99.append(d["p99_ms"])
            g99.append(g["p99_ms"])
            dsub.append(run_json([BQ, c.url, "submit", str(N_SUB), "bench"])["submits_per_s"])
            gsub.append(run_json([BQ, gw, "submit", str(N_SUB), "bench"], env)["submits_per_s"])
            dpar.append(rate_together(c.url, N_SUB // CLIENTS))
            gpar.append(rate_together(gw, N_SUB // CLIENTS, env))
    finally:
        c.close()
    print("gateway: no-op submit-and-wait, %d rounds of %d sequential jobs; submissions one at a "
          "time, %d per round" % (ROUNDS, N_LAT, N_SUB))
    print("%-10s | %8s %8s | %10s" % ("path", "p50 ms", "p99 ms", "submits/s"))
    print("%-10s | %8.3f %8.3f | %10.0f" % ("direct", med(d50), med(d99), med(dsub)))
    print("%-10s | %8.3f %8.3f | %10.0f" % ("gateway", med(g50), med(g99), med(gsub)))
    print("gateway - direct at p50: %+.3f ms (target <= +0.5 ms); per round: %s" % (
        med(g50) - med(d50), " ".join("%+.2f" % (g - d) for g, d in zip(g50, d50))))
    summary.record("gateway submissions, one client", "%.0f/s" % med(gsub),
                   "direct %.0f/s" % med(dsub), med(gsub) / med(dsub), (">=", 0.8, "ratio"))
    summary.record("gateway submissions, %d clients" % CLIENTS, "%.0f/s" % med(gpar),
                   "direct %.0f/s" % med(dpar), med(gpar) / med(dpar), (">=", 0.8, "ratio"))
    summary.record("gateway submit-to-result p50", "%.3f ms" % med(g50),
                   "direct %.3f ms" % med(d50), med(g50) / med(d50))
    print("gateway / direct submissions, one client: %.2fx (target >= 0.8x); per round: %s" % (
        med(gsub) / med(dsub), " ".join("%.2f" % (g / d) for g, d in zip(gsub, dsub))))
    print("submissions with %d clients at once: direct %.0f/s, gateway %.0f/s: %.2fx; per "
          "round: %s" % (CLIENTS, med(dpar), med(gpar), med(gpar) / med(dpar),
                         " ".join("%.2f" % (g / d) for g, d in zip(gpar, dpar))))


if __name__ == "__main__":
    main()
