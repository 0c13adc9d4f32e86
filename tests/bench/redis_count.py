#!/usr/bin/python3
"""Redis's work per job, counted rather than timed: the redis-server runs
under valgrind's callgrind (tests/lib/cluster.py's REDIS_TUNING), the
scheduler and a worker of COUNT_SLOTS slots (default 4) of each build run
as usual, 200 no-op jobs warm it up, then its counters are zeroed
(`callgrind_control -z`), COUNT_JOBS no-op jobs (default 2000) go through
in batches of 100, and the counters are dumped. Instruction counts repeat
within about 1 % run to run (batches vary a little), where timings on a shared
machine move 10-30 %: the tool for comparing two builds' scripts. Usage:
redis_count.py [BUILD ...] (default: $BUILD); with two builds or more,
each one's ratio to the first. Per build: Redis's instructions per job;
the share inside the scripts (EVALSHA), inside the commands the scripts
call (with their arguments made from Lua strings), and in turning those
commands' replies into Lua values. Skips (says so, exit 0) without
valgrind."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD  # noqa: E402
import cluster  # noqa: E402
import summary  # noqa: E402

JOBS = int(os.environ.get("COUNT_JOBS", "2000"))
SLOTS = int(os.environ.get("COUNT_SLOTS", "4"))
POLICY = "result_ttl_s: 600\nlease_ms: 30000\ntiers:\n  bench: {backend: noop}\n"
# inclusive counts of these functions, by callgrind_annotate's names
PARTS = [("scripts (EVALSHA)", "evalGenericCommand"),
         ("commands the scripts call", "scriptCall"),
         ("their replies made Lua values", "parseReply")]


def run(build, out_dir):
    """Instructions a job, and {function: inclusive instructions a job}"""
    wrapper = os.path.join(out_dir, "redis-server")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s/cg.%%p "
                "%s \"$@\"\n" % (out_dir, cluster.REDIS_SERVER))
    os.chmod(wrapper, 0o755)
    saved = cluster.REDIS_SERVER, cluster.SCHED, cluster.WORKER
    cluster.REDIS_SERVER = wrapper
    cluster.SCHED = os.path.join(build, "airlock-scheduler")
    cluster.WORKER = os.path.join(build, "airlock-worker")
    bq = os.path.join(build, "tests", "bench_queue")
    c = cluster.Cluster(policy=POLICY, redis_args=cluster.REDIS_TUNING, start_redis=False)
    try:
        c.start_redis(wait=False)
        c.wait_for(lambda: c.rcli("PING").strip() == "PONG", 60)
        c.scheduler()
        c.worker("count", slots=SLOTS, tiers="bench", extra=["--allow-noop"])
        c.wait_for(lambda: "event=redis_up" in c.log("count"), 60)
        subprocess.run([bq, c.url, "throughput", "200", "bench"], capture_output=True,
                       timeout=600, check=True)
        pid = str(c.redis.pid)
        subprocess.run(["callgrind_control", "-z", pid], capture_output=True, check=True)
        subprocess.run([bq, c.url, "throughput", str(JOBS), "bench"], capture_output=True,
                       timeout=1800, check=True)
        subprocess.run(["callgrind_control", "-d", pid], capture_output=True, check=True)
        time.sleep(0.5)
    finally:
        c.close()
        cluster.REDIS_SERVER, cluster.SCHED, cluster.WORKER = saved
    dump = os.path.join(out_dir, "cg.%s.1" % pid)  # callgrind_control -d: part 1
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", dump],
                          capture_output=True, text=True, check=True).stdout
    total, parts = None, {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) .*PROGRAM TOTALS", line)
        if m:
            total = int(m.group(1).replace(",", ""))
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+\S*?:([\w']+) \[", line)
        if m and m.group(2) not in parts:  # the first (largest) line of a name
            parts[m.group(2)] = int(m.group(1).replace(",", ""))
    return total / JOBS, {k: v / JOBS for k, v in parts.items()}


def main():
    builds = sys.argv[1:] or [BUILD]
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        print("redis_count: SKIPPED: valgrind is not installed (apt-get install valgrind)")
        return
    out_dir = tempfile.mkdtemp(prefix="airlock-count-", dir="/var/tmp")
    got = []
    try:
        for b in builds:
            got.append(run(b, out_dir))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    print("Redis instructions per no-op job (callgrind), %d jobs, %d slots, Redis with %s"
          % (JOBS, SLOTS, " ".join(cluster.REDIS_TUNING)))
    print("%-32s %12s %8s | %s" % ("build", "per job", "ratio", " | ".join(n for n, _ in PARTS)))
    for b, (per_job, parts) in zip(builds, got):
        shares = ["%5.1f %%" % (100.0 * parts.get(fn, 0) / per_job) for _, fn in PARTS]
        print("%-32s %12.0f %7.3fx | %s" % (b[-32:], per_job, per_job / got[0][0],
                                            " | ".join(shares)))
    summary.record("Redis instructions per no-op job (callgrind, %d slots)" % SLOTS,
                   "%.0f" % got[-1][0], "%s %.0f" % (builds[0], got[0][0]) if len(got) > 1 else "",
                   got[-1][0] / got[0][0] if len(got) > 1 else None)


main()
