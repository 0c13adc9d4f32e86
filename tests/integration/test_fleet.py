#!/usr/bin/python3
"""A fleet on hosts of its own (tests/lib/hosts.py: network namespaces on a
bridge, one address each): the Redis master, its replica and three Sentinels
each on a host, workers on three hosts, the scheduler, the gateway and the
clients on another; everything reaches Redis only through the sentinels
(redis+sentinel://). A whole worker host dies (every process in it,
SIGKILL) while its jobs run: only its jobs run again, on the other hosts,
and the others' jobs are not disturbed. A worker host cut off from Redis (its
link down) for longer than the lease: its jobs are run again elsewhere, its
late results are refused (fencing), and it rejoins when the link returns.
The master's host dies: the replica is promoted and jobs go on."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import CLI, Tap, need_root  # noqa: E402
from cluster import SCHED, WORKER, Cluster  # noqa: E402
from policies import trusted  # noqa: E402
from gwclient import GATEWAY, key_file  # noqa: E402
from hosts import Hosts  # noqa: E402
from redisha import RedisHA  # noqa: E402

t = Tap()
need_root("network namespaces and the process backend")
POLICY = trusted(lease_ms=2000, max_attempts=3, backoff_ms=100, wall_ms=60000)
SLEEP = "import time\ntime.sleep(%s)\nprint('done')\n"

hosts = ha = c = None
try:
    hosts = Hosts(["r1", "r2", "s1", "s2", "s3", "w1", "w2", "w3", "ctl"])
    ha = RedisHA(hosts={role: (hosts.prefix(h), hosts.ip[h]) for role, h in
                        (("master", "r1"), ("replica", "r2"), ("s0", "s1"), ("s1", "s2"),
                         ("s2", "s3"))})
    c = Cluster(policy=POLICY, start_redis=False)
    c.url = ha.url
    c._start("sched1", hosts.prefix("ctl") + [SCHED, "--redis", c.url, "--policy", c.policy,
                                              "--listen", "off", "--id", "sched1"])
    for i, h in enumerate(("w1", "w2", "w3")):
        c._start(h, hosts.prefix(h) + [
            WORKER, "--redis", c.url, "--policy", c.policy, "--worker-id", "fleet-" + h,
            "--uid-base", str(66500 + 10 * i), "--slots", "2", "--tiers", "trusted",
            "--state-dir", os.path.join(c.dir, "state-" + h), "--heartbeat-ms", "300"])

    key = "fk-0123456789abcdef01"
    c._start("gw", hosts.prefix("ctl") + [
        GATEWAY, "--redis", c.url, "--keys", key_file(os.path.join(c.dir, "keys"), {"acme": key}),
        "--listen", "%s:8088" % hosts.ip["ctl"]])

    def gw_run(code, timeout=120):
        """POST /v1/run from host ctl (a client beside the gateway): (status, result)."""
        script = ("import http.client, json, sys\n"
                  "h = http.client.HTTPConnection(%r, 8088, timeout=%d)\n"
                  "h.request('POST', '/v1/run', body=json.dumps({'tier': 'trusted', "
                  "'runtime': 'python', 'code': %r}), headers={'Authorization': 'Bearer %s'})\n"
                  "r = h.getresponse(); print(r.status); print(r.read().decode())\n"
                  % (hosts.ip["ctl"], timeout, code, key))
        p = subprocess.run(hosts.prefix("ctl") + ["/usr/bin/python3", "-c", script],
                           capture_output=True, timeout=timeout + 30)
        out = p.stdout.decode().split("\n", 1)
        try:
            return int(out[0]), json.loads(out[1]).get("result", {})
        except (ValueError, IndexError):
            return None, p.stderr.decode()[-300:]

    def cli(*args, timeout=120):
        return subprocess.run(hosts.prefix("ctl") + [CLI, "--redis", c.url, *args],
                              capture_output=True, timeout=timeout)

    def submit(code):
        p = cli("submit", "--tier", "trusted", "-c", code)
        return p.stdout.decode().strip() if p.returncode == 0 else None

    def result(jid, timeout=120):
        p = cli("wait", jid, "--json", "--timeout-wait", str(timeout * 1000),
                timeout=timeout + 30)
        return json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else None

    def running(ids):
        return all(cli("status", jid).stdout.decode().split()[1:2] == ["running"]
                   for jid in ids)

    # every worker host has said it is there
    c.wait_for(lambda: all(w in ha.cli("master", "HKEYS", "al:workers").split()
                           for w in ("fleet-w1", "fleet-w2", "fleet-w3")), timeout=30, step=0.2)

    p = cli("run", "-c", "print(6*7)")
    t.ok(p.returncode == 0 and p.stdout == b"42\n",
         "a job from host ctl through the sentinels on s1..s3 to the master on r1, run on a "
         "worker host", (p.returncode, p.stderr, c.log("w1")[-500:]))
    c.wait_for(lambda: gw_run("print(1)", timeout=10)[0] == 200, timeout=30, step=0.5)
    st, r = gw_run("print('via the gateway')")
    t.ok(st == 200 and r.get("stdout") == "via the gateway\n",
         "...and through the gateway on host ctl", (st, r))

    # --- a whole worker host dies ---
    ids = [submit(SLEEP % 6) for _ in range(6)]
    on = c.wait_for(lambda: running(ids), timeout=30, step=0.3)
    hosts.kill_host("w1")
    res = [result(jid) for jid in ids]
    again = [r for r in res if r and r["attempt"] > 1]
    t.ok(on and all(r and r["status"] == "ok" for r in res) and
         all(r["worker"] != "fleet-w1" for r in again) and len(again) == 2 and
         all(r["attempt"] == 1 for r in res if r not in again),
         "host w1 killed whole with 2 of 6 jobs: its jobs ran again on w2/w3 (%d), the "
         "others' finished undisturbed on their first attempt" % len(again),
         [(r or {}).get("worker") for r in res] + [(r or {}).get("attempt") for r in res])

    # --- a worker host cut off for longer than the lease ---
    ids = [submit(SLEEP % 5) for _ in range(4)]
    on = c.wait_for(lambda: running(ids), timeout=30, step=0.3)
    hosts.link("w2", False)
    time.sleep(7)  # lease 2 s: the scheduler hands w2's jobs on; w2's runs end meanwhile
    hosts.link("w2", True)
    res = [result(jid) for jid in ids]
    moved = [r for r in res if r and r["attempt"] > 1]
    log = c.log("w2")
    t.ok(on and all(r and r["status"] == "ok" for r in res) and len(moved) == 2 and
         all(r["worker"] == "fleet-w3" for r in moved) and
         log.count("lease was taken over; result refused") == 2,
         "host w2 cut off for 7 s (lease 2 s): its %d jobs ran again on w3; its own late "
         "results were refused (fencing)" % len(moved),
         ([(r or {}).get("worker") for r in res], [(r or {}).get("attempt") for r in res],
          log[-1500:]))
    later = [submit(SLEEP % 1) for _ in range(4)]
    res = [result(jid) for jid in later]
    t.ok(all(r and r["status"] == "ok" for r in res) and
         any(r["worker"] == "fleet-w2" for r in res),
         "its link back, w2 rejoins and runs jobs again",
         [(r or {}).get("worker") for r in res])

    # --- the master's host dies ---
    t0 = time.time()
    hosts.kill_host("r1")
    p = cli("run", "-c", "print('after')", timeout=120)
    took = time.time() - t0
    st, r = gw_run("print('gateway after')")
    t.ok(p.returncode == 0 and p.stdout == b"after\n" and
         ha.sentinel_master() == (hosts.ip["r2"], ha.ports["replica"]) and st == 200 and
         r.get("stdout") == "gateway after\n",
         "host r1 (the master) killed: the replica on r2 is promoted and a job runs %.1f s "
         "later, from ctl, on the worker hosts; the gateway follows too" % took,
         (p.returncode, p.stderr, st, r))
finally:
    if c:
        c.close()
    if ha:
        ha.close()
    if hosts:
        hosts.close()
sys.exit(t.done())
