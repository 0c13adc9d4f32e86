#!/usr/bin/python3
"""Live output's cost on short jobs: print(1) submitted and waited for
through the queue (a client written from PROTOCOL.md, tests/lib/alclient.py,
over Redis), on two process-backend tiers of one redis-server and scheduler,
each served by its own worker: one with --live-output on (the default), one
with --live-output off (today's behaviour before live output, the baseline).
Jobs alternate between the two tiers, one at a time, so both see the same
machine. Target (issue "agent clients and live output"): the p50 with live
output within 5 % of the p50 without. Usage: live_output.py [ROUNDS] [N]"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from alclient import Client  # noqa: E402
from cluster import Cluster  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
N = int(sys.argv[2]) if len(sys.argv) > 2 else 60
POLICY = """\
result_ttl_s: 600
lease_ms: 30000
tiers:
  live:
    backend: process
    defaults: {wall_ms: 20000, memory_bytes: 268435456, pids: 64}
  plain:
    backend: process
    defaults: {wall_ms: 20000, memory_bytes: 268435456, pids: 64}
"""


def one(cl, tier):
    t0 = time.perf_counter()
    code, jid = cl.submit({"tier": tier, "runtime": "python", "code": b"print(1)"})
    res = cl.wait(jid, 60)
    ms = (time.perf_counter() - t0) * 1000
    if not res or res["status"] != "ok" or res["stdout"] != b"1\n":
        raise RuntimeError("job on %s: %r" % (tier, res))
    return ms


def med(v):
    v = sorted(v)
    return v[len(v) // 2]


def main():
    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        c.worker("live-w", uid_base=64100, slots=1, tiers="live")
        c.worker("plain-w", uid_base=64200, slots=1, tiers="plain",
                 extra=["--live-output", "off"])
        cl = Client(unix=c.sock)
        for tier in ("live", "plain"):  # warm both
            for _ in range(5):
                one(cl, tier)
        rows = []
        for _ in range(ROUNDS):
            live, plain = [], []
            for i in range(N):
                for tier in (("live", "plain") if i % 2 else ("plain", "live")):
                    (live if tier == "live" else plain).append(one(cl, tier))
            rows.append((med(live), med(plain)))
    finally:
        c.close()
    print("live output: print(1) through the queue, process backend, %d rounds of %d jobs per "
          "tier, alternating" % (ROUNDS, N))
    print("%-8s | %14s | %14s | %6s" % ("round", "p50 live ms", "p50 plain ms", "ratio"))
    for i, (a, b) in enumerate(rows):
        print("%-8d | %14.2f | %14.2f | %6.3f" % (i + 1, a, b, a / b))
    a, b = med([r[0] for r in rows]), med([r[1] for r in rows])
    print("median   | %14.2f | %14.2f | %6.3f  (target <= 1.05)" % (a, b, a / b))


if __name__ == "__main__":
    main()
