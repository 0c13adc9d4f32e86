#!/usr/bin/python3
"""The scheduler on a real redis-server: every rejection reason, defaults,
priorities, tenant quotas and rate limits under concurrent submitters,
attempts used up (worker_lost + dead letter), two schedulers at once, SIGHUP
reload, /metrics, and policy errors at start-up."""
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import msgpack

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, need_root  # noqa: E402
from cluster import SCHED, Cluster  # noqa: E402

t = Tap()
need_root("the process backend")

POLICY = """\
result_ttl_s: 600
lease_ms: 1200
tiers:
  trusted:
    backend: process
    max_attempts: 2
    backoff_ms: 100
    defaults: {wall_ms: 7000, memory_bytes: 100000000, pids: 40, disk_bytes: 500000}
    max: {wall_ms: 20000, memory_bytes: 200000000, disk_bytes: 1000000}
    callback_hosts: [127.0.0.1]
    env: {FROM_POLICY: "yes"}
  svc:
    backend: vm
tenants:
  default: {max_priority: 9}
  small: {max_queued: 10}
  slow: {rate_per_s: 5}
  one: {max_running: 1}
  low: {max_priority: 3}
"""


def result(c, jid):
    raw = c.rcli("GET", "al:res:" + jid, raw=True)
    return msgpack.unpackb(raw, raw=False) if raw else None


def run(c, *args):
    return c.cli("run", *args)


def rejections():
    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        cases = [
            ("unknown tier", ["--tier", "gpu"], 'unknown tier "gpu"'),
            ("limit above the tier's max", ["--timeout", "30000"], "limits.wall_ms: 30000 is above"),
            ("memory above the tier's max", ["--memory", "300000000"], "limits.memory_bytes"),
            ("files larger than the disk limit", ["-f", "/usr/bin/python3:big"], "do not fit the disk limit"),
            ("callback host not allowed", ["--callback", "http://10.0.0.1/x"],
             'host "10.0.0.1" port 80 is not allowed'),
            ("deadline already past", ["--deadline-ms", "1000"], "deadline_ms: 1000 is already past"),
            ("input files for a backend that takes none", ["--tier", "svc", "-f", "/etc/hostname:h"],
             "files: tier svc runs on the vm backend, which takes no input or collected files"),
            ("priority above the tenant's max", ["--tenant", "low", "--priority", "8"],
             "priority: 8 is above tenant low's maximum of 3"),
        ]
        for name, args, needle in cases:
            p = run(c, *args, "-c", "print(1)")
            t.ok(p.returncode == 65 and needle.encode() in p.stderr,
                 "rejected: %s" % name, p.stderr)
        job = {"v": 1, "id": "egress-1", "tier": "trusted", "argv": ["true"], "network": "egress"}
        subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                       input=msgpack.packb(job, use_bin_type=True), capture_output=True)
        c.wait_done("egress-1", 10)
        r = result(c, "egress-1")
        t.ok(r and r["status"] == "rejected" and "does not allow egress" in r["error"],
             "rejected: network egress on a tier without it", r)
        # input that tries to forge log lines: a field name and a tier with newlines
        for jid, job in [("forge-1", {"v": 1, "id": "forge-1", "tier": "trusted", "argv": ["true"],
                                      "x\nts=1 level=error event=forged": 1}),
                         ("forge-2", {"v": 1, "id": "forge-2", "argv": ["true"],
                                      "tier": "nope\nts=2 level=error event=forged\x1b[2J"})]:
            subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                           input=msgpack.packb(job, use_bin_type=True), capture_output=True)
            c.wait_done(jid, 10)
        log = c.log("sched1")
        t.ok(result(c, "forge-1") and result(c, "forge-2") and
             not any(l.startswith(("ts=1 ", "ts=2 ")) for l in log.splitlines()) and
             "\x1b" not in log and "\\nts=2 level=error" in log,
             "field names and tier text with newlines and escapes: escaped in the log, no "
             "forged line", [l for l in log.splitlines() if "forge" in l][:4])
        # quota: max_queued 10 for tenant small, four submitters at once, no worker
        codes = []

        def submitter():
            for _ in range(10):
                p = c.cli("submit", "--tenant", "small", "-c", "print(1)")
                codes.append(p.stdout.decode().strip())

        ths = [threading.Thread(target=submitter) for _ in range(4)]
        [th.start() for th in ths]
        [th.join() for th in ths]
        time.sleep(1.0)
        states = [c.rcli("HGET", "al:job:" + j, "state").strip() for j in codes]
        rej = [result(c, j) for j in codes if states[codes.index(j)] == "done"]
        t.ok(states.count("queued") == 10 and len(rej) == 30 and
             all(r["status"] == "rejected" and "max_queued" in r["error"] and
                 r.get("info", {}).get("quota") == "max_queued" for r in rej),
             "quota under 4 concurrent submitters: exactly 10 queued, 30 rejected "
             "(info.quota: max_queued)",
             (states.count("queued"), len(rej)))
        # rate: 5 per second for tenant slow
        ids = [c.cli("submit", "--tenant", "slow", "-c", "print(1)").stdout.decode().strip()
               for _ in range(20)]
        time.sleep(1.0)
        queued = sum(c.rcli("HGET", "al:job:" + j, "state").strip() == "queued" for j in ids)
        rated = [result(c, j) for j in ids]
        rated = [r for r in rated if r and "rate_per_s" in (r.get("error") or "")]
        t.ok(5 <= queued <= 10 and queued + len(rated) == 20,
             "rate limit 5/s: %d of 20 quick submissions admitted, the rest rejected" % queued)
    finally:
        c.close()


def defaults_and_priorities():
    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        jid = c.cli("submit", "-c", "import os; print(os.environ.get('FROM_POLICY'))").stdout.decode().strip()
        c.wait_for(lambda: c.rcli("HGET", "al:job:" + jid, "state").strip() == "queued", 10)
        job = msgpack.unpackb(c.rcli("HGET", "al:job:" + jid, "job", raw=True), raw=False)
        lim = job.get("limits", {})
        t.ok(lim.get("wall_ms") == 7000 and lim.get("memory_bytes") == 100000000 and
             lim.get("pids") == 40 and job.get("max_attempts") == 2,
             "defaults filled from the tier", job)
        low = [c.cli("submit", "--priority", "1", "-c", "print('low')").stdout.decode().strip()
               for _ in range(4)]
        high = [c.cli("submit", "--priority", "9", "-c", "print('high')").stdout.decode().strip()
                for _ in range(4)]
        time.sleep(0.5)
        c.worker("wp", uid_base=65400, slots=1)
        for j in low + high + [jid]:
            c.wait_done(j, 30)
        starts = {j: result(c, j)["started_ms"] for j in low + high}
        t.ok(max(starts[j] for j in high) < min(starts[j] for j in low),
             "priority 9 jobs all start before priority 1 jobs submitted earlier", starts)
        r = result(c, jid)
        t.ok(r and r["stdout"] == b"yes\n", "the policy's environment reaches the job", r)
        # max_running 1 for tenant one, on a worker with 2 slots
        c.worker("wq", uid_base=65500, slots=2)
        ids = [c.cli("submit", "--tenant", "one", "-c", "import time; time.sleep(0.6)").stdout.decode().strip()
               for _ in range(3)]
        for j in ids:
            c.wait_done(j, 30)
        spans = sorted((result(c, j)["started_ms"], result(c, j)["finished_ms"]) for j in ids)
        overlap = any(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1))
        t.ok(all(result(c, j)["status"] == "ok" for j in ids) and not overlap,
             "tenant max_running 1: its jobs never overlap, all finish", spans)
    finally:
        c.close()


def attempts_used_up():
    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        jid = c.cli("submit", "--timeout", "20000", "-c", "import time; time.sleep(20)").stdout.decode().strip()
        for n, name in enumerate(["k1", "k2"]):
            c.worker(name, uid_base=65600 + 10 * n, slots=1)
            c.wait_for(lambda: "event=job_start" in c.log(name), timeout=20)
            c.signal(name, signal.SIGKILL)
            c.wait_exit(name)
        c.wait_done(jid, 20)
        r = result(c, jid)
        t.ok(r and r["status"] == "worker_lost" and r["attempt"] == 2 and "attempts" in r["error"],
             "max attempts used up by dead workers: worker_lost", r)
        dl = c.cli("dlq", "list").stdout.decode()
        t.ok(jid in dl, "and a dead letter for it", dl)
    finally:
        c.close()


def two_schedulers():
    c = Cluster(policy=POLICY)
    try:
        c.scheduler("sA")
        c.scheduler("sB")
        c.worker("w2a", uid_base=65700, slots=2)
        ids = []
        for i in range(150):
            job = {"v": 1, "id": "two-%03d" % i, "tier": "trusted", "argv": ["true"]}
            ids.append(job["id"])
            subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                           input=msgpack.packb(job, use_bin_type=True), capture_output=True)
        ok = c.wait_for(lambda: c.rcli("HGET", "al:stats", "status:ok").strip() == "150", 120, 0.5)
        adm = [sum(int(x.split("jobs=")[1].split()[0]) for x in c.log(n).splitlines()
                   if "event=admitted" in x) for n in ("sA", "sB")]
        t.ok(ok and sum(adm) == 150 and c.rcli("XLEN", "al:dlq").strip() == "0",
             "two schedulers: 150 jobs admitted once in all (%s), no duplicates" % adm)
        # both reclaim: a killed worker's 2 jobs come back exactly once each
        ids = [c.cli("submit", "--timeout", "20000", "-c", "import time; time.sleep(1)").stdout.decode().strip()
               for _ in range(2)]
        # stalled only once it runs both (submit returns before admission)
        c.wait_for(lambda: all(c.rcli("HGET", "al:job:" + j, "worker").strip() == "w2a"
                               for j in ids), 10, 0.01)
        c.signal("w2a", signal.SIGSTOP)
        c.worker("w2b", uid_base=65800, slots=2)
        for j in ids:
            c.wait_done(j, 30)
        rs = [result(c, j) for j in ids]
        reclaimed = sum(c.log(n).count("event=reclaimed") for n in ("sA", "sB"))
        c.signal("w2a", signal.SIGKILL)
        t.ok(all(r and r["attempt"] == 2 and r["status"] == "ok" for r in rs) and reclaimed == 2,
             "two schedulers reclaim a stalled worker's 2 jobs exactly once each (%d)" % reclaimed, rs)
    finally:
        c.close()


def reload_and_metrics():
    c = Cluster(policy=POLICY)
    try:
        port = 19470 + os.getpid() % 500
        c.scheduler(listen="127.0.0.1:%d" % port)
        c.worker("wm", uid_base=65900, slots=2)
        p = run(c, "--tier", "extra", "-c", "print(1)")
        t.ok(p.returncode == 65, "tier extra unknown before the reload", p.stderr)
        text = POLICY.replace("tenants:", "  extra:\n    backend: process\ntenants:")
        with open(c.policy, "w") as f:
            f.write(text)
        c.signal("sched1", signal.SIGHUP)
        c.wait_for(lambda: "policy_reload result=ok" in c.log("sched1"), 10)
        c.procs.pop("wm").send_signal(signal.SIGTERM)
        c.worker("wm2", uid_base=65900, slots=2, tiers="trusted,extra")
        p = run(c, "--tier", "extra", "-c", "print('extra')")
        t.ok(p.returncode == 0 and p.stdout == b"extra\n", "SIGHUP with a good policy: tier extra works",
             p)
        with open(c.policy, "w") as f:
            f.write("tiers:\n  trusted: {backend: process\n")
        c.signal("sched1", signal.SIGHUP)
        c.wait_for(lambda: "policy_reload result=refused" in c.log("sched1"), 10)
        log = c.log("sched1")
        p = run(c, "--tier", "extra", "-c", "print('still')")
        t.ok("result=refused" in log and "policy.yaml:" in log and p.returncode == 0,
             "SIGHUP with a broken policy: refused with file:line, the old one stays", log[-400:])
        for code in ["print(1)", "print(2)", "print(3)", "raise SystemExit(4)"]:
            run(c, "-c", code)
        run(c, "--tier", "nope", "-c", "print(1)")
        time.sleep(2.5)  # worker heartbeat flushes histograms, scheduler snapshots

        def metrics():
            return urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()

        def parse(m):
            val = {}
            for line in m.splitlines():
                if line and not line.startswith("#"):
                    k, v = line.rsplit(" ", 1)
                    val[k] = float(v)
            return val

        # Metrics are a snapshot refreshed each second, histograms flushed by
        # the worker's heartbeat: wait until they have caught up.
        c.wait_for(lambda: parse(metrics()).get(
            'airlock_run_seconds_count{tier="trusted",backend="process"}') == 4, 15, 0.5)
        m = metrics()
        val = parse(m)
        t.ok(val.get('airlock_jobs_total{status="ok"}') == 5 and
             val.get('airlock_jobs_total{status="nonzero_exit"}') == 1 and
             val.get('airlock_jobs_total{status="rejected"}') == 2,
             "/metrics: jobs by final status match what ran", m[:1500])
        t.ok(val.get("airlock_workers_live") == 1 and val.get("airlock_slots_free") == 2 and
             val.get("airlock_jobs_held") == 0 and val.get('airlock_queue_depth{tier="trusted",band="mid"}') == 0,
             "/metrics: live workers, free slots, queue depth", m[:1500])
        t.ok(val.get('airlock_run_seconds_count{tier="trusted",backend="process"}') == 4 and
             'airlock_queue_wait_seconds_bucket{tier="trusted",backend="process",le="+Inf"}' in m,
             "/metrics: run-time and queue-wait histograms per tier and backend",
             (c.rcli("HGETALL", "al:hist:trusted:process").split(),
              [l.split("tier=")[1][:30] for l in c.log("wm2").splitlines() if "job_done" in l],
              [l.split("tier=")[1][:30] for l in c.log("wm").splitlines() if "job_done" in l]))
        # Steady state sends no KEYS or SCAN (Redis's docs forbid them in
        # application code): 5 s of MONITOR while the daemons run, a job
        # runs, /metrics is read and an operator asks `airlock stats`.
        mon = subprocess.Popen(["redis-cli", "-s", c.sock, "MONITOR"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
        time.sleep(0.3)
        run(c, "-c", "print(5)")
        stats = c.cli("stats")
        m2 = metrics()
        time.sleep(5)
        mon.terminate()
        seen = mon.communicate(timeout=10)[0]
        cmds = [re.match(r'[^\]]*\] "([^"]*)"', l) for l in seen.splitlines()]
        scans = [l for l, m_ in zip(seen.splitlines(), cmds)
                 if m_ and m_.group(1).lower() in ("keys", "scan")]
        t.ok(len(seen.splitlines()) > 20 and not scans and
             'airlock_run_seconds_count{tier="trusted",backend="process"}' in m2 and
             b"queue trusted:mid queued=0 running=0" in stats.stdout,
             "no KEYS or SCAN in %d commands of steady state (histograms from al:hists, "
             "`airlock stats` queues from al:tiers)" % len(seen.splitlines()),
             (scans[:5], stats.stdout[:400]))
        h = urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=5)
        t.ok(h.status == 200 and b'"redis":true' in h.read(), "/healthz: Redis reachable, policy loaded")
    finally:
        c.close()


def policy_errors():
    d = "/var/tmp/airlock-policy-%d" % os.getpid()
    os.makedirs(d, exist_ok=True)
    cases = [
        ("syntax", "tiers:\n  a: {backend: process\n", "YAML syntax error"),
        ("unknown key", "tiers:\n  a: {backend: process, colour: red}\n", ':2: tier a: unknown key "colour"'),
        ("unknown backend", "tiers:\n  a: {backend: docker}\n", 'unknown backend "docker"'),
        ("defaults above max", "tiers:\n  a:\n    backend: process\n    defaults: {wall_ms: 9}\n"
         "    max: {wall_ms: 5}\n", "defaults.wall_ms is above max.wall_ms"),
        ("no tiers", "result_ttl_s: 5\n", "no tiers"),
        ("negative limit", "tiers:\n  a:\n    backend: process\n    max: {pids: -1}\n", ":4:"),
        ("pool too big", "tiers:\n  a: {backend: microvm, pool: 65}\n", "pool: expected 0..64"),
        ("relative bind", "tiers:\n  a: {backend: process, binds: [srv/data]}\n",
         'binds: "srv/data" must be an absolute'),
        ("bind with ..", "tiers:\n  a: {backend: process, binds: [/srv/../etc]}\n",
         'binds: "/srv/../etc" must be'),
        ("bind of the sandbox's /proc", "tiers:\n  a: {backend: container, binds: [/proc/1]}\n",
         "not under /proc, /dev or /tmp"),
        ("egress on a backend that cannot give it",
         "tiers:\n  a: {backend: noop, egress: {allow: [pypi.example.org:443]}}\n",
         "egress granted, but the noop backend cannot give a job outbound network"),
        ("unfiltered egress on the process backend",
         "tiers:\n  a: {backend: process, egress: true}\n",
         "egress: true would let everything out, which no backend offers"),
        ("unfiltered egress on the vm backend",
         "tiers:\n  a: {backend: vm, egress: true}\n",
         "give the vm backend an allow list"),
        ("egress rule without a port",
         "tiers:\n  a: {backend: process, egress: {allow: [pypi.example.org]}}\n",
         'egress rule "pypi.example.org": expected one :port'),
        ("binds on a microvm tier", "tiers:\n  a: {backend: microvm, binds: [/srv]}\n",
         "binds are for the process and container backends"),
        ("pool idle too short", "tiers:\n  a: {backend: microvm, pool_max_idle_ms: 10}\n",
         "pool_max_idle_ms: expected at least 1000"),
        ("port out of range", "tiers:\n  a: {backend: vm, ports: [8080, 70000]}\n",
         "ports: expected 1..65535, got 70000"),
        ("ports not a list", "tiers:\n  a: {backend: vm, ports: 8080}\n",
         "ports: expected a list of port numbers"),
        ("max lease below lease", "tiers:\n  a: {backend: vm, vm_lease_ms: 9000, vm_max_lease_ms: 5000}\n",
         "vm_max_lease_ms is below vm_lease_ms"),
        ("image as a path", "tiers:\n  a: {backend: container, image: /var/lib/airlock/images/python}\n",
         '"/var/lib/airlock/images/python" is not an image name'),
        ("default image not offered", "tiers:\n  a: {backend: microvm, images: [python], image: node}\n",
         'image "node" is not in its images'),
        ("image listed twice", "tiers:\n  a: {backend: microvm, images: [python, python]}\n",
         'images: "python" listed twice'),
        ("pool of an image not offered",
         "tiers:\n  a: {backend: microvm, images: [python], pool: {node: 1}}\n",
         'pool: "node" is not in its images'),
        ("pool per image too big",
         "tiers:\n  a: {backend: microvm, images: [python], pool: {python: 99}}\n",
         "pool: expected 0..64"),
        ("image and binds on a process tier",
         "tiers:\n  a: {backend: process, image: python, binds: [/srv]}\n",
         "a process tier with images takes no binds"),
        ("two images on a vm tier", "tiers:\n  a: {backend: vm, images: [python, node]}\n",
         "a vm tier boots one image"),
        ("an OCI runtime on a process tier", "tiers:\n  a: {backend: process, oci_runtime: runsc}\n",
         "oci_runtime and runsc_platform are the container backend's"),
        ("an unknown OCI runtime", "tiers:\n  a: {backend: container, oci_runtime: kata}\n",
         'oci_runtime: unknown "kata"; use runc, crun or runsc'),
        ("a platform without runsc", "tiers:\n  a: {backend: container, runsc_platform: kvm}\n",
         "runsc_platform is for oci_runtime: runsc"),
        ("an unknown runsc platform",
         "tiers:\n  a: {backend: container, oci_runtime: runsc, runsc_platform: fast}\n",
         'runsc_platform: unknown "fast"; use ptrace, kvm or systrap'),
    ]
    for name, text, needle in cases:
        path = os.path.join(d, name.replace(" ", "_").replace("'", "").replace("/", "_") + ".yaml")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run([SCHED, "--check", "--policy", path], capture_output=True, timeout=10)
        t.ok(p.returncode == 2 and needle.encode() in p.stderr and path.encode() in p.stderr,
             "policy error (%s) reported with file:line, scheduler refuses to start" % name, p.stderr)
    p = subprocess.run([SCHED, "--check", "--policy",
                        os.path.join(os.path.dirname(__file__), "..", "..", "deploy",
                                     "policy.example.yaml")], capture_output=True, timeout=10)
    t.ok(p.returncode == 0 and b"tier untrusted -> microvm" in p.stdout,
         "the example policy in deploy/ loads", p.stdout + p.stderr)
    subprocess.run(["rm", "-rf", d])


for fn in (policy_errors, rejections, defaults_and_priorities, attempts_used_up, two_schedulers,
           reload_and_metrics):
    try:
        fn()
    except Exception as e:
        t.ok(False, "%s raised %r" % (fn.__name__, e))
sys.exit(t.done())
