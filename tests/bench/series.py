"""Shared by the backend latency benchmarks: run bench_backend, summarise
its series (microseconds per round) as p50 and p90 in ms, and print a table
with two ratios against the baseline series: of the medians, and the median
of the per-round ratios (each round runs every series once, close together,
so this one is the least disturbed by the machine's drift)."""
import json
import statistics
import subprocess


def run(args, cleanup):
    """Run bench_backend with args, then cleanup(); return {series: [µs per
    round]}, or None after printing bench_backend's error."""
    p = subprocess.run(args, capture_output=True, text=True)
    cleanup()
    if p.returncode != 0:
        print(p.stderr)
        return None
    return json.loads(p.stdout)


def p50(v):
    return statistics.median(v) / 1000


def p90(v):
    return sorted(v)[int(len(v) * 0.9) - 1] / 1000


def paired(data, k, base):
    """Median over rounds of data[k][i] / data[base][i]."""
    return statistics.median(a / b for a, b in zip(data[k], data[base]))


def table(title, data, order, base):
    print(title)
    print("%-14s %9s %9s %10s %10s" % ("series", "p50 ms", "p90 ms", "p50 ratio", "per round"))
    for k in order:
        if k in data:
            print("%-14s %9.2f %9.2f %9.2fx %9.2fx" % (k, p50(data[k]), p90(data[k]),
                                                     p50(data[k]) / p50(data[base]),
                                                     paired(data, k, base)))
