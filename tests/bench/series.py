"""Shared by the backend latency benchmarks: run bench_backend, summarise
its series (microseconds per round) as p50 and p90 in ms, print a table."""
import json
import statistics
import subprocess


def run(args, cleanup):
    """Run bench_backend with args, then cleanup(); return {series: (p50, p90)}
    in ms, or None after printing bench_backend's error."""
    p = subprocess.run(args, capture_output=True, text=True)
    cleanup()
    if p.returncode != 0:
        print(p.stderr)
        return None
    data = json.loads(p.stdout)
    return {k: (statistics.median(v) / 1000, sorted(v)[int(len(v) * 0.9) - 1] / 1000)
            for k, v in data.items()}


def table(title, stats, order, base):
    print(title)
    print("%-14s %9s %9s %8s" % ("series", "p50 ms", "p90 ms", "ratio"))
    for k in order:
        if k in stats:
            print("%-14s %9.2f %9.2f %7.2fx" % (k, stats[k][0], stats[k][1], stats[k][0] / stats[base][0]))
