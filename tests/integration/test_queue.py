#!/usr/bin/python3
"""Worker and queue on a real redis-server: round trips, 1000 jobs over 4
workers exactly once, a SIGKILLed worker's jobs finishing elsewhere, a stale
attempt refused, a Redis restart losing nothing, cancel, deadlines, garbage
dead-lettered, a worker started before Redis, and SIGTERM drain."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import msgpack

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, live_pids_of, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import policy, tier_def  # noqa: E402

t = Tap()
need_root("the process backend")


def result(c, job_id):
    raw = c.rcli("GET", "al:res:" + job_id, raw=True)
    return msgpack.unpackb(raw, raw=False) if raw else None


def submit(c, *args):
    p = c.cli("submit", *args)
    return p.stdout.decode().strip() if p.returncode == 0 else None


def section(name, fn):
    c = Cluster()
    try:
        fn(c)
    except Exception as e:  # a crash in a section is a failure, not an abort
        t.ok(False, "%s: raised %r" % (name, e))
    finally:
        c.close()


def round_trip(c):
    c.scheduler()
    c.worker()
    p = c.cli("run", "-c", "import sys; print('hi', sys.argv[1:]); sys.exit(7)")
    t.ok(p.returncode == 7 and p.stdout == b"hi []\n", "CLI run: output and exit code 7", p)
    p = c.cli("run", "--json", "-c", "print(6*7)")
    ok = p.returncode == 0 and b'"status": "ok"' in p.stdout and b'"stdout": "42\\n"' in p.stdout
    t.ok(ok, "CLI run --json prints the whole result", p.stdout[:300])
    # A client written from PROTOCOL.md alone: XADD to the intake, then wait.
    job = {"v": 1, "id": "raw-client-1", "tier": "trusted", "argv": ["echo", "raw"]}
    c.rcli("XADD", "al:intake", "*", "job", "placeholder")  # garbage first: must not block
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=msgpack.packb(job, use_bin_type=True), capture_output=True)
    c.wait_done("raw-client-1", 20)
    r = result(c, "raw-client-1")
    t.ok(r and r["status"] == "ok" and r["stdout"] == b"raw\n" and r["attempt"] == 1,
         "raw protocol client: XADD intake, wait on the output's end entry, GET result", r)
    # A submission made by an earlier release (its marker a hash, not a
    # string) just before an upgrade is admitted and runs; its record shows
    # the marker's tenant.
    job = {"v": 1, "id": "old-marker-1", "tier": "trusted", "tenant": "acme",
           "argv": ["echo", "old"]}
    entry = "%d-0" % (int(c.rcli("TIME").split()[0]) * 1000 + 1000)  # the marker first
    c.rcli("HSET", "al:sub:old-marker-1", "entry", entry, "tenant", "acme", "tier", "trusted",
           "submitted_ms", "1")
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", entry, "id", job["id"],
                    "job"], input=msgpack.packb(job, use_bin_type=True), capture_output=True)
    c.wait_done("old-marker-1", 20)
    r = result(c, "old-marker-1")
    t.ok(r and r["status"] == "ok" and r["stdout"] == b"old\n" and
         c.rcli("HGET", "al:job:old-marker-1", "entry").strip() == entry and
         c.rcli("EXISTS", "al:sub:old-marker-1").strip() == "0",
         "an earlier release's hash marker: the submission is admitted and runs, the marker "
         "goes", (r, entry))
    p = c.cli("run", "--tier", "nope", "-c", "print(1)")
    t.ok(p.returncode == 65 and b'unknown tier "nope"' in p.stderr,
         "unknown tier: exit 65 with the reason", p.stderr)
    p = c.cli("run", "-f", "/nonexistent/file:in.txt", "-c", "print(1)")
    t.ok(p.returncode == 66 and b"cannot read /nonexistent/file" in p.stderr,
         "missing local file: exit 66, one clear line", p.stderr)
    # on a terminal, a job's escape sequences cannot hide or move the CLI's verdict
    import pty
    from altest import CLI
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(CLI, [CLI, "--redis", c.url, "run", "--timeout", "1000", "-c",
                       "import sys, time; sys.stdout.write('x\\x1b[2J\\x1b[8m\\rhidden');"
                       "sys.stdout.flush(); time.sleep(5)"])
    seen = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.waitpid(pid, 0)
    t.ok(b"\x1b" not in seen and b"\\x1b[2J" in seen and b"\\x0dhidden" in seen and
         b"\nairlock: job " in seen and b": timeout: " in seen,
         "CLI on a terminal: the job's control characters shown escaped, the verdict on a line "
         "of its own", seen[-200:])
    p = c.cli("status", "no-such-job")
    t.ok(p.returncode == 1 and b"no job" in p.stderr, "status of an unknown id says so", p.stderr)
    j = submit(c, "-c", "print(1)")
    c.wait_done(j, 10)
    p = c.cli("status", j)
    t.ok(p.returncode == 0 and p.stdout.decode().split() == [j, "done", "ok"],
         "status of a finished job: its state and its result's status", p.stdout)
    c.rcli("HSET", "al:job:odd-state", "state", "limbo")
    p = c.cli("status", "odd-state")
    t.ok(p.returncode == 69 and b"unknown state" in p.stderr,
         "a record with a state the protocol does not have: an error, not a made-up state",
         p.stderr)
    p = subprocess.run([os.path.join(os.environ.get("BUILD", "build"), "airlock-worker"),
                        "--redis", c.url, "--tiers", "no-such-tier", "--worker-id", "notier",
                        "--state-dir", c.dir], capture_output=True, timeout=30)
    t.ok(p.returncode == 2 and
         b"airlock-worker: none of the tiers asked for is in the policy" in p.stderr,
         "a worker for tiers the policy lacks: exit 2, one line saying why", p.stderr)
    p = subprocess.run([os.path.join(os.environ.get("BUILD", "build"), "airlock"), "--redis",
                        "unix:///nonexistent/redis.sock", "run", "-c", "print(1)"],
                       capture_output=True, timeout=30)
    t.ok(p.returncode == 69 and b"cannot reach Redis at /nonexistent/redis.sock" in p.stderr,
         "unreachable Redis: exit 69, one clear line", p.stderr)
    p = c.cli("run", "-f", __file__ + ":data/in.py", "--collect", "out.txt", "--json", "-c",
              "print(len(open('data/in.py').read()) > 0); open('out.txt','w').write('o')")
    t.ok(p.returncode == 0 and b'"path": "out.txt"' in p.stdout and b"True" in p.stdout,
         "input file in, collected file out", p.stdout[:400])
    p = c.cli("submit", "--idempotency-key", "k1", "-c", "print(1)")
    q = c.cli("submit", "--idempotency-key", "k1", "-c", "print(2)")
    t.ok(p.stdout == q.stdout and b"earlier job" in q.stderr,
         "same idempotency key returns the first job's id", (p.stdout, q.stdout))


def thousand(c):
    c.scheduler()
    for i in range(4):  # two of them claim ahead of their slots (--prefetch)
        c.worker("w%d" % i, uid_base=64000 + 10 * i, slots=2,
                 extra=["--prefetch", "3"] if i >= 2 else [])
    ids = []
    for i in range(1000):
        job = {"v": 1, "id": "bulk-%04d" % i, "tier": "trusted", "argv": ["true"]}
        ids.append(job["id"])
        c.rcli("XADD", "al:intake", "*", "job", "x")  # keep garbage flowing too
    # submit in one pipeline through redis-cli
    lines = []
    for jid in ids:
        job = msgpack.packb({"v": 1, "id": jid, "tier": "trusted", "argv": ["true"]},
                            use_bin_type=True)
        lines.append(job)
    for job in lines:
        subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                       input=job, capture_output=True)
    done = c.wait_for(lambda: int(c.rcli("HGET", "al:stats", "status:ok").strip() or 0) >= 1000,
                      timeout=240, step=0.5)
    time.sleep(1)
    stats = c.rcli("HGET", "al:stats", "status:ok").strip()
    missing = [j for j in ids if not c.rcli("EXISTS", "al:res:" + j).strip() == "1"]
    t.ok(done and stats == "1000" and not missing,
         "1000 jobs over 4 workers: 1000 results, each committed once", (stats, missing[:5]))
    per = [c.log("w%d" % i).count("event=job_done") for i in range(4)]
    t.ok(sum(per) == 1000 and all(n > 0 for n in per), "every worker took a share: %s" % per, per)
    t.ok(int(c.rcli("XLEN", "al:dlq").strip()) == 1000,
         "1000 garbage intake entries dead-lettered alongside, none lost")


def killed_worker(c):
    c.scheduler()
    c.worker("wa", uid_base=64100, slots=2)
    ids = [submit(c, "--timeout", "20000", "-c", "import time; time.sleep(3); print('done')")
           for _ in range(2)]
    ok = c.wait_for(lambda: c.log("wa").count("event=job_start") >= 2, timeout=15)
    c.signal("wa", signal.SIGKILL)
    c.wait_exit("wa")
    # Its sandboxes die with it, long before their 3 s jobs would end.
    gone = c.wait_for(lambda: not live_pids_of({64100, 64101}), timeout=1.0)
    c.worker("wb", uid_base=64200, slots=2)
    for jid in ids:
        c.wait_done(jid, 30)
    rs = [result(c, jid) for jid in ids]
    t.ok(ok and all(r and r["status"] == "ok" and r["attempt"] == 2 and r["worker"] == "wb"
                    for r in rs),
         "SIGKILLed worker: its jobs complete on another worker as attempt 2", rs)
    t.ok(c.rcli("HGET", "al:stats", "status:ok").strip() == "2",
         "exactly one result each")
    t.ok(gone, "the dead worker's running sandboxes died with it at once")


def stale_attempt(c):
    c.scheduler()
    c.worker("ws", uid_base=64300, slots=1)
    jid = submit(c, "--timeout", "20000", "-c", "import time; time.sleep(1); print('first')")
    c.wait_for(lambda: "event=job_start" in c.log("ws"), timeout=15)
    c.signal("ws", signal.SIGSTOP)  # a worker that loses its lease without dying
    c.worker("wt", uid_base=64400, slots=1)
    c.wait_done(jid, 30)
    r1 = result(c, jid)
    c.signal("ws", signal.SIGCONT)
    ok = c.wait_for(lambda: "event=stale_attempt" in c.log("ws"), timeout=15)
    time.sleep(0.5)
    r2 = result(c, jid)
    t.ok(r1 and r1["attempt"] == 2 and r1["worker"] == "wt", "paused worker's job re-run as attempt 2",
         r1)
    t.ok(ok and r2 == r1, "the late attempt-1 commit is refused; the result stays attempt 2",
         c.log("ws")[-600:])
    # And directly at the script level: an old attempt cannot commit.
    res = c.rcli("EVAL", "return redis.call('HGET', KEYS[1], 'attempt')", "1", "al:job:" + jid)
    t.ok(res.strip() == "2", "the job record carries the fencing attempt number", res)


def redis_restart(c):
    c.stop_redis()
    c.aof = True
    c.start_redis()
    c.scheduler()
    c.worker("wr", uid_base=64500, slots=2)
    acked = []
    for i in range(120):
        if i == 60:
            c.stop_redis()
            c.start_redis()
        p = c.cli("submit", "--id", "aof-%03d" % i, "--", "true")
        if p.returncode == 0:
            acked.append(p.stdout.decode().strip())
    ok = c.wait_for(lambda: all(c.rcli("EXISTS", "al:res:" + j).strip() == "1" for j in acked),
                    timeout=120, step=1)
    missing = [j for j in acked if c.rcli("EXISTS", "al:res:" + j).strip() != "1"]
    t.ok(ok and len(acked) >= 100 and not missing,
         "Redis restarted (AOF) mid-flow: all %d acknowledged submissions finished" % len(acked),
         missing[:10])
    t.ok("event=redis_up" in c.log("wr") and c.log("wr").count("event=redis_down") >= 1,
         "the worker reconnected by itself")


def cancel_and_deadline(c):
    c.scheduler()
    # no worker for tier internal: its jobs stay queued
    jid = submit(c, "--tier", "internal", "-c", "print(1)")
    c.wait_for(lambda: c.rcli("HGET", "al:job:" + jid, "state").strip() == "queued", timeout=10)
    p = c.cli("cancel", jid)
    r = result(c, jid)
    t.ok(b"cancelled" in p.stdout and r and r["status"] == "cancelled",
         "cancel a queued job: result cancelled at once", (p.stdout, r))
    c.worker("wc", uid_base=64600, slots=1, tiers="trusted,internal")
    run = submit(c, "--timeout", "30000", "-c", "import time; time.sleep(30)")
    c.wait_for(lambda: "job=%s" % run in c.log("wc") and "event=job_start" in c.log("wc"), 15)
    time.sleep(0.3)
    t0 = time.time()
    c.cli("cancel", run)
    c.wait_done(run, 10)
    took = time.time() - t0
    r = result(c, run)
    t.ok(r and r["status"] == "cancelled" and took < 1.5,
         "cancel a running job: killed, result cancelled in %.2f s" % took, r)
    past = str(int(time.time() * 1000) - 1000)
    p = c.cli("run", "--deadline-ms", past, "-c", "print(1)")
    t.ok(p.returncode == 65 and b"deadline_ms" in p.stderr, "deadline already past: rejected",
         p.stderr)
    # A job whose deadline passes while it waits behind a busy slot.
    blocker = submit(c, "--timeout", "5000", "-c", "import time; time.sleep(3)")
    soon = str(int(time.time() * 1000) + 800)
    late = submit(c, "--deadline-ms", soon, "-c", "print('too late')")
    c.wait_done(late, 10)
    r = result(c, late)
    t.ok(r and r["status"] == "expired" and r["stdout"] == b"", "queued past its deadline: expired",
         r)
    c.cli("cancel", blocker)


def state_of(c, jid):
    return c.rcli("HMGET", "al:job:" + jid, "state", "worker").split()


def prefetch(c):
    """--prefetch: jobs claimed ahead of a free slot are held, and still
    obey cancel, deadlines, drain, and go back when no slot frees."""
    for bad in ("257", "-1", "x", "Auto"):
        p = subprocess.run([os.path.join(os.environ.get("BUILD", "build"), "airlock-worker"),
                            "--prefetch", bad], capture_output=True, timeout=10)
        t.ok(p.returncode == 2 and b"--prefetch: expected auto or a whole number in 0..256" in p.stderr,
             "--prefetch %s: exit 2 with the allowed range" % bad, p.stderr)
    c.scheduler()
    c.worker("wp", uid_base=65400, slots=1, extra=["--prefetch", "2"])
    a = submit(c, "--timeout", "20000", "-c", "import time; time.sleep(0.8); print('a')")
    c.wait_for(lambda: "event=job_start job=%s" % a in c.log("wp"), timeout=15)
    b = submit(c, "-c", "print('b')")
    d = submit(c, "--deadline-ms", str(int(time.time() * 1000) + 300), "-c", "print('d')")
    held = c.wait_for(lambda: state_of(c, b) == ["running", "wp"], timeout=5, step=0.05)
    t0 = time.time()
    c.cli("cancel", b)
    c.wait_done(b, 10)
    took = time.time() - t0
    r = result(c, b)
    t.ok(held and r and r["status"] == "cancelled" and "before it started" in r["error"]
         and took < 1.0 and "job_start job=%s" % b not in c.log("wp"),
         "a held job is cancelled without running, in %.2f s" % took, (held, r))
    c.wait_done(d, 10)
    r = result(c, d)
    log = c.log("wp")
    t.ok(r and r["status"] == "expired" and "job_start job=%s" % d not in log
         and "give_back job=%s" % d not in log,
         "a held job whose deadline passes before a slot frees: expired, never run", r)
    c.wait_done(a, 10)
    r = result(c, a)
    t.ok(r and r["status"] == "ok" and r["stdout"] == b"a\n", "the slot's own job unaffected", r)
    # No slot frees in time: the held job goes back and another worker runs it.
    long = submit(c, "--timeout", "20000", "-c", "import time; time.sleep(5)")
    c.wait_for(lambda: "event=job_start job=%s" % long in c.log("wp"), timeout=15)
    e = submit(c, "-c", "print('e')")
    held = c.wait_for(lambda: state_of(c, e) == ["running", "wp"], timeout=5, step=0.05)
    c.worker("wq", uid_base=65410, slots=1)
    c.wait_done(e, 10)
    r = result(c, e)
    t.ok(held and r and r["status"] == "ok" and r["worker"] == "wq" and r["attempt"] == 1
         and "event=give_back job=%s" % e in c.log("wp") and not result(c, long),
         "held over 1 s behind a long job: given back, run by an idle worker (same attempt)",
         (held, r))
    c.wait_done(long, 10)
    c.signal("wq", signal.SIGTERM)
    c.wait_exit("wq")
    # Drain: held jobs go back at once; the running one finishes.
    long = submit(c, "--timeout", "20000", "-c", "import time; time.sleep(2); print('long')")
    c.wait_for(lambda: "event=job_start job=%s" % long in c.log("wp"), timeout=15)
    f = submit(c, "-c", "print('f')")
    held = c.wait_for(lambda: state_of(c, f) == ["running", "wp"], timeout=5, step=0.05)
    c.signal("wp", signal.SIGTERM)
    c.worker("wr", uid_base=65420, slots=1)
    c.wait_done(f, 10)
    rf = result(c, f)
    rl = result(c, long)
    rc = c.wait_exit("wp", 30)
    rl = result(c, long)
    t.ok(held and rf and rf["status"] == "ok" and rf["worker"] == "wr" and rc == 0
         and rl and rl["status"] == "ok" and rl["worker"] == "wp",
         "SIGTERM: held job given back at once and run elsewhere; the running one finishes",
         (held, rf, rl, rc))
    t.ok(c.rcli("HGET", "al:stats", "status:ok").strip() == "5", "one result each, nothing twice")


def fetch_bands(c):
    """FETCH reads the streams in the order given (high band first), each for
    what is left of its count: never more entries in all than it asked for,
    and a lower band's only once the higher ones are empty."""
    tool = os.path.join(os.environ.get("BUILD", "build"), "tests", "proto_tool")
    script = subprocess.run([tool, "script", "fetch"], capture_output=True, text=True).stdout
    for band in ("hi", "lo"):
        c.rcli("XGROUP", "CREATE", "al:q:t:" + band, "workers", "$", "MKSTREAM")
        for i in range(3):
            jid = "fb-%s-%d" % (band, i)
            c.rcli("HSET", "al:job:" + jid, "state", "queued", "attempt", "1", "job", "J")
            c.rcli("XADD", "al:q:t:" + band, "*", "id", jid, "attempt", "1")

    def fetch(n):
        out = c.rcli("EVAL", script, "2", "al:q:t:hi", "al:q:t:lo", "wf", "1", str(n))
        return [w for w in out.split() if w.startswith("fb-")]
    first, second = fetch(2), fetch(2)
    t.ok(first == ["fb-hi-0", "fb-hi-1"] and second == ["fb-hi-2", "fb-lo-0"],
         "FETCH count 2 over two bands: 2 entries in all, the high band's first, then what "
         "it has left and the low band's", (first, second))
    pend = c.rcli("XPENDING", "al:q:t:lo", "workers").split()
    t.ok(pend and pend[0] == "1", "...and only the low entry it returned is delivered", pend)


def garbage(c):
    c.scheduler()
    c.worker("wg", uid_base=64700, slots=1)
    c.rcli("XADD", "al:intake", "*", "job", "\xc1\xc1")
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=msgpack.packb({"v": 1, "id": "bad-limits", "tier": "trusted",
                                        "runtime": "python", "code": "1",
                                        "limits": {"wall_ms": 0}}, use_bin_type=True),
                   capture_output=True)
    c.rcli("XADD", "al:intake", "*", "nojob", "1")
    c.rcli("XADD", "al:q:trusted:mid", "*", "id", "ghost", "attempt", "1")
    c.rcli("XADD", "al:q:trusted:mid", "*", "junk", "1")
    ok = c.wait_for(lambda: int(c.rcli("XLEN", "al:dlq").strip() or 0) >= 4, timeout=15)
    dl = c.cli("dlq", "list").stdout.decode()
    t.ok(ok and "trailing bytes" in dl and "has no job field" in dl and "no such job" in dl
         and "malformed queue entry" in dl, "garbage dead-lettered, each with its reason", dl)
    r = result(c, "bad-limits")
    t.ok(r and r["status"] == "rejected" and "limits.wall_ms" in r["error"] and r["attempt"] == 0
         and "bad-limits" not in dl,
         "the recoverable id got a rejected result saying why (and no dead letter: its client knows)",
         (r, dl))
    p = c.cli("run", "-c", "print('still serving')")
    t.ok(p.returncode == 0 and p.stdout == b"still serving\n", "worker keeps serving", p)
    entry = dl.split()[0]
    p = c.cli("dlq", "show", entry)
    t.ok(p.returncode == 0 and entry.encode() in p.stdout, "dlq show", p.stdout)
    p = c.cli("dlq", "purge")
    t.ok(c.rcli("XLEN", "al:dlq").strip() == "0", "dlq purge", p)


def sandbox_retry(c):
    """Fault injection: a worker whose sandbox init is a copy of /bin/false
    (root's, so the worker takes it) fails every sandbox set-up (a real
    failure, produced on demand)."""
    helpers = tempfile.mkdtemp(prefix="airlock-helpers-")
    shutil.copy("/bin/false", os.path.join(helpers, "airlock-sandbox-init"))
    c.scheduler()
    c.worker("wbroken", uid_base=65250, slots=1, tiers="internal",
             extra=["--helper-dir", helpers])
    jid = submit(c, "--tier", "internal", "-c", "print(1)")
    c.wait_done(jid, 30)
    r = result(c, jid)
    log = [l for l in c.log("wbroken").splitlines() if "event=job_done" in l]
    ts = [int(l.split("ts=")[1].split()[0]) for l in log]
    t.ok(r and r["status"] == "sandbox_error" and r["attempt"] == 2 and "process: " in r["error"],
         "sandbox_error is retried, then reported after max_attempts (2)", r)
    t.ok(len(ts) == 2 and ts[1] - ts[0] >= 50 and c.rcli("HGET", "al:stats", "retries").strip() == "1",
         "the retry waited its backoff (%s ms)" % (ts[1] - ts[0] if len(ts) == 2 else "?"), log)
    shutil.rmtree(helpers)


def worker_before_redis(_unused):
    c = Cluster(start_redis=False)
    try:
        c.worker("wz", uid_base=64800, slots=1)
        c.scheduler()
        time.sleep(1.0)
        alive = c.procs["wz"].poll() is None
        c.start_redis()
        p = c.cli("run", "-c", "print('late redis')", timeout=60)
        t.ok(alive and p.returncode == 0 and p.stdout == b"late redis\n",
             "worker started before Redis waits, then serves", p)
    finally:
        c.close()


def drain(c):
    c.scheduler()
    c.worker("wd", uid_base=64900, slots=1, extra=["--drain-grace-ms", "5000"])
    jid = submit(c, "-c", "import time; time.sleep(1); print('finished in grace')")
    c.wait_for(lambda: "event=job_start" in c.log("wd"), timeout=15)
    c.signal("wd", signal.SIGTERM)
    rc = c.wait_exit("wd", 30)
    r = result(c, jid)
    t.ok(rc == 0 and r and r["status"] == "ok" and r["stdout"] == b"finished in grace\n",
         "SIGTERM: the running job finishes within the grace period, exit 0", (rc, r))
    c.worker("wd2", uid_base=65000, slots=1, extra=["--drain-grace-ms", "300"])
    jid = submit(c, "--timeout", "20000", "-c", "import time; time.sleep(2); print('second try')")
    c.wait_for(lambda: "event=job_start" in c.log("wd2"), timeout=15)
    c.signal("wd2", signal.SIGTERM)
    rc = c.wait_exit("wd2", 30)
    c.worker("wd3", uid_base=65100, slots=1)
    c.wait_done(jid, 30)
    r = result(c, jid)
    t.ok(rc == 0 and r and r["status"] == "ok" and r["worker"] == "wd3",
         "grace too short: the job is given back and finishes on another worker", (rc, r))
    p = c.cli("stats")
    t.ok(b"worker wd3" in p.stdout and b"worker wd " not in p.stdout,
         "stats lists live workers only", p.stdout)


def webhook(_unused):
    import hashlib
    import hmac
    import http.server
    import threading

    got = []

    class H(http.server.BaseHTTPRequestHandler):
        calls = 0

        def do_POST(self):
            H.calls += 1
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if H.calls == 1:  # first delivery fails: the worker must retry
                self.send_response(503)
                self.end_headers()
                return
            got.append((self.headers.get("X-Airlock-Signature"), self.headers.get("X-Airlock-Job"),
                        body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    hooks = policy(
        tier_def("trusted", "process", max_attempts=None, callback_hosts=["127.0.0.1:%d" % port]),
        tier_def("byname", "process", max_attempts=None, callback_hosts=["localhost:%d" % port]),
        lease_ms=5000)
    c = Cluster(policy=hooks)
    try:
        c.scheduler()
        c.worker("wh", uid_base=65200, slots=1, tiers="trusted,byname",
                 extra=["--webhook-secret", "s3cret"])
        jid = submit(c, "--callback", "http://127.0.0.1:%d/hook" % port, "-c", "print('hooked')")
        ok = c.wait_for(lambda: got, timeout=20)
        sig, hid, body = got[0] if got else (None, None, b"")
        want = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
        r = msgpack.unpackb(body, raw=False) if body else {}
        t.ok(ok and hid == jid and sig == want and r.get("stdout") == b"hooked\n",
             "webhook: the committed result POSTed, HMAC-signed, after a retry", (sig, want, r))
        p = c.cli("run", "--callback", "http://evil.example.invalid/x", "-c", "print(1)")
        t.ok(p.returncode == 65 and b"not allowed" in p.stderr,
             "callback host outside the policy: rejected", p.stderr)
        # the host is allowed, another of its ports is not
        p = c.cli("run", "--callback", "http://127.0.0.1:%d/x" % (port ^ 1), "-c", "print(1)")
        t.ok(p.returncode == 65 and b"port %d is not allowed" % (port ^ 1) in p.stderr,
             "callback to an allowed host on another port: rejected", p.stderr)
        p = c.cli("run", "--callback", "http://127.0.0.1/x", "-c", "print(1)")
        t.ok(p.returncode == 65 and b"port 80 is not allowed" in p.stderr,
             "callback to an allowed host on the default port it does not name: rejected",
             p.stderr)
        # a name the policy allows that resolves to loopback: refused at connect time
        n = len(got)
        jid = submit(c, "--tier", "byname", "--callback", "http://localhost:%d/hook" % port,
                     "-c", "print('by name')")
        refused = c.wait_for(lambda: "webhook_refused" in c.log("wh"), timeout=20)
        time.sleep(0.5)
        t.ok(refused and len(got) == n and ("address=127.0.0.1" in c.log("wh") or
                                            "address=::1" in c.log("wh")),
             "callback to a name that resolves to 127.0.0.1: refused, nothing sent",
             [l for l in c.log("wh").splitlines() if "webhook" in l][-3:])
        c.close()
        # Per-tenant secrets: each tenant's callback verifies with its own
        # key only; a tenant without a key gets no callback at all.
        keys = tempfile.mkdtemp(prefix="airlock-hooks-", dir="/var/tmp")
        for tenant, key in (("alpha", "alpha-key-1"), ("beta", "beta-key-2")):
            with open(os.path.join(keys, tenant), "w") as f:
                f.write(key + "\n")
            os.chmod(os.path.join(keys, tenant), 0o600)
        c = Cluster(policy=hooks)
        c.scheduler()
        c.worker("wh2", uid_base=65200, slots=1, tiers="trusted", extra=["--webhook-secrets", keys])
        del got[:]
        ids = {tn: submit(c, "--tenant", tn, "--callback", "http://127.0.0.1:%d/hook" % port,
                          "-c", "print('%s')" % tn) for tn in ("alpha", "beta", "gamma")}
        c.wait_for(lambda: len(got) >= 2 and "no secret for tenant gamma" in c.log("wh2"),
                   timeout=30)
        by = {hid: (sig, body) for sig, hid, body in got}

        def mac(key, body):
            return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
        a, b = by.get(ids["alpha"], (None, b"")), by.get(ids["beta"], (None, b""))
        t.ok(a[0] == mac(b"alpha-key-1", a[1]) and a[0] != mac(b"beta-key-2", a[1]) and
             b[0] == mac(b"beta-key-2", b[1]) and b[0] != mac(b"alpha-key-1", b[1]),
             "webhook: each tenant's callback is signed with its own key: beta's signature "
             "does not verify with alpha's key, nor alpha's with beta's", (a[0], b[0]))
        t.ok(ids["gamma"] not in by and "no secret for tenant gamma" in c.log("wh2"),
             "webhook: a tenant without a key gets no callback (never one signed with "
             "another's key, never an unsigned one)", [h for h in by])
        subprocess.run(["rm", "-rf", keys])
    finally:
        c.close()
        srv.shutdown()


for name, fn in [("round trip", round_trip), ("1000 jobs", thousand),
                 ("killed worker", killed_worker), ("stale attempt", stale_attempt),
                 ("redis restart", redis_restart), ("cancel and deadline", cancel_and_deadline),
                 ("prefetch", prefetch), ("fetch bands", fetch_bands), ("garbage", garbage), ("drain", drain), ("sandbox retry", sandbox_retry)]:
    section(name, fn)
worker_before_redis(None)
webhook(None)
sys.exit(t.done())
