#!/usr/bin/python3
"""gVisor (runsc) as a container tier's runtime, beside runc on one worker,
through the real queue (redis-server, scheduler, worker) and the real
runsc (Debian's, platform ptrace here: no KVM): a job's kernel is the
Sentry's (its uname and /proc are not the host's), the result says which
boundary ran it; a python job runs in a warm interpreter's sandbox started
before it as it runs cold; a session keeps its variables for 20 calls (a call out of
memory ends it: the host sees the Sentry); a session pauses (runsc checkpoint
with its files), resumes, forks, and resumes on a second worker sharing the
tier's snapshot_dir, and a snapshot changed, of another image, or past the
tenant's paused places is refused (docs/snapshots.md); memory, CPU, wall, output, disk
and pids limits and a fork bomb end as on runc; a catalogue image, files in
and collect; an input by URL (the tier's egress rules serve its inputs) and
a job's own fetch through the proxy; a grading job (a C++ build, five tests) with
runc's verdicts; a platform the installed runsc does not offer and a runsc
that refuses (a fake, named so, standing in for a broken install): each
said with runsc's name, the step and its words, at start and in the job's
result; a platform picked at start that fails its probe (a wrapper, named
so): the next one runs the tier. The example policy's sandboxed tier runs the command its page
shows."""
import hashlib
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, flip_byte, raises, skip_unless  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402
from testinet import TestInternet  # noqa: E402
from warmtest import interp  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
import airlock  # noqa: E402

t = Tap()
RUNSC = "/usr/bin/runsc"
skip_unless(os.geteuid() == 0 and os.access(RUNSC, os.X_OK),
            "needs root and runsc (deploy/install-deps.sh installs it)")
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
LIMITS = dict(DEFAULTS, wall_ms=60000, memory_bytes=536870912)
# a test "internet" (a network namespace of this test's) for inputs by URL
WWW = "/var/tmp/airlock-gvinet-%d" % os.getpid()
SHARED = "/var/tmp/airlock-gv-shared-%d" % os.getpid()
SMALL = "/var/tmp/airlock-gv-small-%d" % os.getpid()  # a 2 MiB tmpfs: no room for a snapshot
INET = TestInternet("gvi", 238, WWW)
POLICY = policy(
    tier_def("gv", "container", oci_runtime="runsc", images=["python", "toolchain"],
             defaults=LIMITS, sessions={"max_per_tenant": 3, "idle_s": 600, "max_life_s": 1800,
                                       "max_paused_per_tenant": 3},
             egress={"allow": ["%s.0/24:8000" % INET.net]}),
    tier_def("rc", "container", images=["python", "toolchain"], defaults=LIMITS),
    tier_def("gvtrap", "container", oci_runtime="runsc", runsc_platform="systrap"),
    # paused sessions on storage every worker of the tier mounts
    tier_def("gvs", "container", oci_runtime="runsc", images=["python"], defaults=LIMITS,
             snapshot_dir=SHARED, sessions={"max_per_tenant": 2, "idle_s": 600,
                                            "max_life_s": 1800, "on_idle": "pause"}),
    tier_def("gvfull", "container", oci_runtime="runsc", images=["python"], defaults=LIMITS,
             snapshot_dir=SMALL, sessions={"max_per_tenant": 1, "idle_s": 600,
                                           "max_life_s": 1800}))

CASES = {
    "memory": ("b = bytearray(300 << 20); print(len(b))", {"memory_bytes": 128 << 20}),
    "cpu": ("while True: pass", {"cpu_ms": 1000}),
    "wall": ("import time; time.sleep(30)", {"wall_ms": 1500}),
    "output": ("import sys\nfor i in range(100000): sys.stdout.write('x' * 99 + '\\n')",
               {"stdout_bytes": 65536}),
    "disk": ("open('/work/big', 'wb').write(b'x' * (8 << 20))", {"disk_bytes": 4 << 20}),
    "fork bomb": ("import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
                  "            time.sleep(20)\n            os._exit(0)\n        n += 1\n"
                  "except OSError as e:\n    print('stopped', e.errno)\n", {"pids": 32}),
    "exit 3": ("import sys; sys.exit(3)", {}),
}
CPP = r"""
#include <cstdio>
#include <cstring>
int main() {
	char op[16] = {0};
	long a = 0, b = 0;
	if (scanf("%15s %ld %ld", op, &a, &b) < 1) return 2;
	if (!strcmp(op, "add")) { printf("%ld\n", a + b); return 0; }
	if (!strcmp(op, "loop")) for (volatile unsigned long i = 0;; i++) ;
	if (!strcmp(op, "crash")) { volatile int *p = nullptr; return *p; }
	return 1;
}
"""
TESTS = [{"name": "a", "stdin": "add 1 2\n", "expect": "3\n"},
         {"name": "b", "stdin": "add 2 2\n", "expect": "5\n"},
         {"name": "c", "stdin": "loop\n", "limits": {"cpu_ms": 500, "wall_ms": 10000}},
         {"name": "d", "stdin": "crash\n"},
         {"name": "e", "stdin": "add 20 22\n", "expect": "42\n"}]


def runsc_script(d, text):
    """d/runsc, a shell script of text (a fake, named so in its text)."""
    path = os.path.join(d, "runsc")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + text)
    os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return path


def fake_runsc(d, run_says):
    """A fake runsc (a fault a real one gives on a broken host, on demand):
    `flags` and `list` answer as runsc's, `do` works, `run` fails with
    run_says on stderr, exit 1."""
    return runsc_script(d, "# a FAKE runsc for test_gvisor.py: refuses to run containers\n"
                        "for a in \"$@\"; do case $a in\n"
                        "flags) printf '  -platform string\\n    \\tspecifies which platform "
                        "to use: ptrace (default), kvm.\\n'; exit 0;;\n"
                        "list|do|delete) exit 0;;\n"
                        "run) echo '%s' >&2; exit 1;;\n"
                        "esac; done\nexit 0\n" % run_says)


def systrap_failing_runsc(d):
    """A FAKE wrapper of the real runsc: it offers systrap and fails on it."""
    return runsc_script(d, "# a FAKE wrapper of runsc for test_gvisor.py: offers systrap, fails "
                        "on it\ncase \" $* \" in\n"
                        "*' flags '*) %s flags 2>&1 | sed 's/ptrace (default), kvm/ptrace "
                        "(default), kvm, systrap/';;\n"
                        "*--platform=systrap*) echo 'systrap: no seccomp user notification "
                        "here' >&2; exit 1;;\n"
                        "*) exec %s \"$@\";;\nesac\n" % (RUNSC, RUNSC))


c = None
try:
    os.makedirs(WWW)
    with open(os.path.join(WWW, "data.txt"), "w") as f:
        f.write("fetched by the worker\n")
    INET.start()
    c = Cluster(policy=POLICY)
    c.scheduler()
    os.makedirs(SMALL)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", SMALL],
                   check=True)
    c.worker("gv-w", uid_base=66900, slots=2, tiers="gv,rc,gvtrap,gvs,gvfull",
             extra=["--images", IMAGES])
    seq = iter(range(1, 1 << 30))

    def run(tier, **kw):
        job = {"v": 1, "id": "gv-%d-%d" % (os.getpid(), next(seq)), "tier": tier}
        job.update(kw)
        return c.run_job(job, timeout=180) or {}

    r = run("gv", runtime="python",
            code="import os, platform\nprint(6*7, os.uname().release, os.getuid())\n"
                 "print(open('/proc/version').read().strip())\n")
    host_release = os.uname().release
    out = (r.get("stdout") or b"").decode().splitlines()
    t.ok(r.get("status") == "ok" and out[:1] and out[0].split()[0] == "42" and
         out[0].split()[1] != host_release and out[0].split()[2] == "1000" and
         host_release not in out[1] and
         r.get("info", {}).get("runtime") == RUNSC and
         r.get("info", {}).get("platform") == "ptrace",
         "print(6*7) on the runsc tier: uid 1000 on the Sentry's kernel (uname %s, the "
         "host's %s; /proc/version not the host's); the result names runsc and its platform"
         % (out[0].split()[1] if out else "?", host_release), r)
    # the warm interpreter: after a python job, the slot's next runsc
    # sandbox starts python3 before its job comes (its fd 3 a connection to
    # a socket file of the worker's: runsc passes no descriptor in); a job
    # of that shape runs there and sees what it sees cold
    probe = ("import os, sys\nprint(sys.argv, os.getcwd(), os.getuid(), sorted(os.listdir('.')), "
             "os.uname().release, sys.stdin.read(), os.environ.get('GREETING'))\n"
             "print(len(os.listdir('/proc/self/fd')), os.readlink('/proc/self/fd/2'))\n")
    # (a memory limit no job before had: a shape of its own, first cold)
    kw = dict(runtime="python", code=probe, argv=["a b"], stdin=b"in", env={"GREETING": "hi"},
              files=[{"path": "in.txt", "data": b"x"}], limits={"memory_bytes": 300 << 20})
    first = run("gv", **kw)
    time.sleep(1.5)  # the slot's next sandbox started (0.3 s here), its python3 waiting
    warm = run("gv", **kw)
    lines = [(r.get("stdout") or b"").splitlines() + [b"", b""] for r in (first, warm)]
    t.ok(interp(first) == "cold" and interp(warm) == "warm" and
         warm.get("status") == "ok" and lines[0][0] == lines[1][0] and
         b"'in.txt'" in lines[1][0] and b"4.4.0 in hi" in lines[1][0] and
         int(lines[1][1].split()[0]) == int(lines[0][1].split()[0]) + 1 and
         warm.get("cpu_ms", 999) < 100 and warm.get("info", {}).get("runtime") == RUNSC,
         "a warm interpreter on runsc: the next python job of the shape runs in the sandbox "
         "started before it came (%s ms of CPU), seeing what a cold one sees (argv, cwd, uid, "
         "files, the Sentry's kernel, stdin, environment; one descriptor more: its script on "
         "fd 3, as on runc)" % warm.get("cpu_ms"), (first, warm))
    # a worker serving a runc and a runsc tier keeps a warm one of each
    # (per slot) as their jobs alternate; a runsc job that comes while the
    # next sandbox still starts (0.3 s here) takes it, as on runc
    pairs = [tuple(interp(run(tier, runtime="python", code="print(1)")) for tier in ("rc", "gv"))
             for _ in range(4)]
    t.ok(pairs[1:] == [("warm", "warm")] * 3,
         "python jobs alternating between a runc and a runsc tier of one worker run warm on "
         "both (a warm container per slot and kind of runtime), a runsc job taking the "
         "sandbox started just before it", pairs)
    # a session: one sandbox kept for its calls, its variables between them
    s = airlock.Client(redis=c.url, tier="gv").session()
    first = s.run_python("import os\nx = 0\nprint(os.uname().release)")
    calls = [s.run_python("x += 1\nprint(x)") for _ in range(20)]
    t.ok(first.status == "ok" and first.stdout.strip() != host_release.encode() and
         [r.stdout for r in calls] == [b"%d\n" % i for i in range(1, 21)] and
         all(r.status == "ok" for r in calls),
         "a session on the runsc tier: 20 calls sharing a variable, on the Sentry's kernel "
         "(%s)" % first.stdout.strip().decode(),
         (first, [(r.status, r.stdout, r.error) for r in calls][:3]))
    # pause: runsc's checkpoint of the Sentry, the session's files with it;
    # the next call restores it (a new sandbox), then resume() does
    s.run_python("import json\nos.chdir('sub') if os.path.isdir('sub') else None\n"
                 "os.makedirs('sub/deep', exist_ok=True); os.symlink('/usr/lib', 'lib')\n"
                 "open('sub/deep/a.txt', 'w').write('kept')\n"
                 "open('/tmp/t.txt', 'w').write('tmp kept')\nos.chdir('sub')\n"
                 "held = open('deep/a.txt')\n"
                 # a child of the session's code (it keeps no copy of the server's
                 # connection: the checkpoint could not save one)
                 "kid = os.fork()\nif kid == 0:\n    import time\n    time.sleep(3600)\n"
                 "    os._exit(0)\n")
    paused = s.pause()
    state = s.info().get("state")
    gone = [x for x in subprocess.run([RUNSC, "--root", os.path.join(c.dir, "state", "gv-w",
                                                                     "runtime-runsc"), "list"],
                                      capture_output=True).stdout.decode().splitlines()
            if s.id in x]
    # one of the tenant's three paused places is taken, and a fork of 2
    # on runsc needs three (its parent is paused too): runsc's checkpoint
    # would stop the sandbox, so the count is looked at first and the
    # session goes on
    b = airlock.Client(redis=c.url, tier="gv").session()
    b.run_python("z = 3")
    try:
        b.fork(2)
        bpaused = "paused"
    except airlock.AirlockError as ex:
        bpaused = "%s: %s" % (type(ex).__name__, ex)
    bafter = b.run_python("print(z)")
    b.close()
    back = s.run_python("print(x, json.dumps([1]), os.getcwd(), open('deep/a.txt').read(),\n"
                        "      open('/tmp/t.txt').read(), os.readlink('../lib'), held.read(),\n"
                        "      os.waitpid(kid, os.WNOHANG)[0] == 0)\n"
                        "x += 1")
    info = s.info()
    again = s.pause()
    resumed = s.resume()
    last = s.run_python("print(x, sorted(os.listdir('..')))")
    t.ok(paused.get("state") == "paused" and paused.get("snapshot_bytes", 0) > 0 and
         state == "paused" and not gone and back.status == "ok" and
         back.stdout == b"20 [1] /work/sub kept tmp kept /usr/lib kept True\n" and
         info.get("state") == "open" and info.get("resume_ms", 0) > 0 and
         again.get("state") == "paused" and resumed.get("state") == "open" and
         last.stdout == b"21 ['lib', 'sub']\n",
         "a runsc session pauses (runsc checkpoint: %s bytes in %s ms) and its next call "
         "resumes it (%s ms; no sandbox of it meanwhile) with its variables, imports, "
         "working directory, files in its work directory and /tmp, a symlink, an open file "
         "and a forked child; paused again, resume() brings it back"
         % (paused.get("snapshot_bytes"), paused.get("pause_ms"), info.get("resume_ms")),
         (paused, state, gone, back, info, again, resumed, last))
    t.ok(bpaused.startswith("QuotaExceeded") and "max_paused_per_tenant 3" in bpaused and
         "needs 3 places" in bpaused and bafter.stdout == b"3\n",
         "a runsc session's fork past the tenant's max_paused_per_tenant (its copies and its "
         "parent) is refused before its checkpoint (which stops the sandbox): the session "
         "goes on", (bpaused, bafter))
    # fork(2): copies with the parent's variables and files, each its own
    # from there and drawing its own random numbers; the parent (whose
    # sandbox runsc's checkpoint stopped) is back at once, as it was
    # (OpenSSL's generator drawn from first: its state is the process's, in
    # every copy, and it reseeds itself only after a fork, a new pid)
    s.run_python("import random, ssl\nrandom.seed(5)\nseq = 'parent'\nssl.RAND_bytes(8)")
    kids = s.fork(2)
    draw = ("import os\nprint(x, open('deep/a.txt').read(), seq, os.urandom(8).hex(), "
            "random.random(), ssl.RAND_bytes(8).hex())")
    # (two slots: the parent, back at once, and one copy at a time)
    draws = [kids[0].run_python(draw).stdout.split()]
    kids[0].run_python("seq = 'kid0'\nopen('deep/a.txt', 'w').write('kid0')")
    kids[0].close()
    draws.append(kids[1].run_python(draw).stdout.split())
    other = kids[1].run_python("print(seq, open('deep/a.txt').read())")
    kids[1].close()
    after = s.run_python("print(x, seq, open('deep/a.txt').read())")
    s.close()
    t.ok(len(kids) == 2 and all(d[:3] == [b"21", b"kept", b"parent"] for d in draws) and
         draws[0][3] != draws[1][3] and draws[0][4] != draws[1][4] and
         draws[0][5] != draws[1][5] and after.stdout == b"21 parent kept\n" and other.stdout == b"parent kept\n",
         "fork(2) of a runsc session: each copy has the parent's variables and files, its own "
         "os.urandom, random and OpenSSL's RAND_bytes after the restore, and its own state from there; the parent, "
         "paused by runsc's checkpoint, is resumed at once and goes on as it was",
         (draws, after, other))
    # a paused session's resume goes before jobs queued behind it: with the
    # worker's two slots running jobs and two more jobs queued, the first
    # slot to free is the session's (without that, the queued jobs took
    # both and the session waited for their end)
    ps = airlock.Client(redis=c.url, tier="gv").session()
    ps.run_python("q = 9")
    ps.pause()
    jc = airlock.Client(redis=c.url, tier="rc")
    jobs = [jc.submit("import time; time.sleep(6)", tier="rc") for _ in range(4)]
    time.sleep(1.5)  # two run, two wait
    pr = ps.run_python("print(q)")
    answered_ms = time.time() * 1000
    ps.close()
    starts = sorted(jc.wait(j, timeout=120).raw.get("started_ms", 0) for j in jobs)
    t.ok(pr.stdout == b"9\n" and starts[0] > 0 and answered_ms < starts[3],
         "a paused session's resume takes the first slot that frees, before the jobs "
         "queued behind it (its call answered %.1f s before the last queued job started)"
         % ((starts[3] - answered_ms) / 1000), (pr, answered_ms, starts))
    # a session with network egress pauses with a connection open (a
    # tunnel through the proxy, held by a variable): its relay lets go of
    # its host sockets first; resumed, it fetches again, and the connection
    # open at the pause is closed
    e = airlock.Client(redis=c.url, tier="gv").session(network="egress")
    url = "http://%s:8000/data.txt" % INET.srv
    e.run_python(
        "import os, socket, urllib.request\ny = 5\n"
        "before = urllib.request.urlopen(%r, timeout=20).read()\n"
        "held = socket.create_connection(('127.0.0.1', %d), timeout=20)\n"
        "held.sendall(b'CONNECT %s:8000 HTTP/1.1\\r\\n\\r\\n')\n"
        "opened = held.recv(64)" % (url, 3128, INET.srv))
    try:
        epaused = e.pause().get("state")
    except airlock.AirlockError as ex:
        epaused = str(ex)
    eafter = e.run_python(
        "def gone():\n"
        "    try:\n"
        "        return held.recv(64) == b''\n"
        "    except OSError:\n"
        "        return True\n"
        "print(y, before == urllib.request.urlopen(%r, timeout=20).read(), "
        "opened.split()[1:2], gone())" % url)
    # a fork's copy and its parent (both restored) fetch through proxies of
    # their own
    fetch = "print(y, urllib.request.urlopen(%r, timeout=20).read() == before)" % url
    ekid = e.fork(1)[0]
    ekids = ekid.run_python(fetch)
    ekid.close()
    eparent = e.run_python(fetch)
    e.close()
    # a snapshot with one byte changed: refused, never restored
    v = airlock.Client(redis=c.url, tier="gv").session()
    v.run_python("y = 1")
    v.pause()
    path = c.rcli("HGET", "al:sess:" + v.id, "snapshot").strip()
    flip_byte(path)
    r = v.run_python("print(y)")
    ended = raises(lambda: v.run_python("print(y)"), airlock.SessionEnded)
    t.ok(r.status == "sandbox_error" and path in (r.error or "") and
         isinstance(ended, airlock.SessionEnded) and ended.reason == "snapshot_refused" and
         not os.path.exists(path),
         "a runsc session's snapshot with one byte changed is refused (sandbox_error naming "
         "it), never restored; the session ends snapshot_refused", (r, ended))
    # no room for the snapshot: runsc's checkpoint, which stops the
    # sandbox, is not tried (a failed one would lose the session)
    with airlock.Client(redis=c.url, tier="gvfull").session() as fs:
        fs.run_python("kept = 'still here'")
        ef = raises(lambda: fs.pause(), airlock.AirlockError)
        rf = fs.run_python("print(kept)")
        left = os.listdir(SMALL)
    t.ok(ef is not None and "no room for the snapshot" in str(ef) and
         "the session goes on" in str(ef) and rf.stdout == b"still here\n" and left == [],
         "a runsc pause into a snapshot_dir without room for it is refused before the "
         "checkpoint, saying what it needs; the session goes on", (ef, rf, left))
    # a snapshot of another image (a rogue edit, named so, standing in for
    # an image rebuilt since the pause: its digest in the record made to
    # match): refused, never restored over files its processes map
    v = airlock.Client(redis=c.url, tier="gv").session()
    v.run_python("y = 2")
    v.pause()
    path = c.rcli("HGET", "al:sess:" + v.id, "snapshot").strip()
    with open(path, "rb") as f:
        data = f.read()
    head = data.split(b"\n", 2)
    m = re.search(rb'"image":"([^"]+)"', head[1])
    data = data.replace(m.group(1), b"0" * len(m.group(1)), 1) if m else data
    with open(path, "wb") as f:
        f.write(data)
    c.rcli("HSET", "al:sess:" + v.id, "snapshot_sha256", hashlib.sha256(data).hexdigest())
    r = v.run_python("print(y)")
    ended = raises(lambda: v.run_python("print(y)"), airlock.SessionEnded)
    t.ok(m and r.status in ("sandbox_error", "session_ended") and
         "rebuilt since the pause" in (r.error or "") and
         isinstance(ended, airlock.SessionEnded) and ended.reason == "snapshot_refused",
         "a runsc snapshot made with another image (its digest matching) is refused, saying "
         "the image was rebuilt since the pause; the session ends snapshot_refused",
         (head[1][:200], r, ended))
    t.ok(epaused == "paused" and eafter.stdout == b"5 True [b'200'] True\n" and
         ekids.stdout == eparent.stdout == b"5 True\n",
         "a runsc session with network egress and a connection open pauses (its relay "
         "lets go of its host sockets); resumed, it fetches again through the proxy, and "
         "the connection open at the pause is closed; its fork's copy and the parent fetch "
         "too", (epaused, eafter, ekids, eparent))
    # memory: on runsc the host's OOM killer sees the Sentry, which holds
    # every process's memory: the call's allocation ends the session
    s = airlock.Client(redis=c.url, tier="gv").session(memory=256 << 20)
    s.run_python("x = 7")
    try:
        s.run_python("b = bytearray(400 << 20)")
        ended = None
    except airlock.SessionEnded as e:
        ended = e
    t.ok(ended is not None and ended.reason == "limit" and "memory_limit" in str(ended),
         "a session's call past its memory on runsc ends the session memory_limit (on runc "
         "it costs the call only: docs/backends/gvisor.md)", repr(ended))
    log = c.log("gv-w")
    t.ok("event=runsc path=%s platform=ptrace" % RUNSC in log,
         "the worker logs runsc's platform, picked at start (ptrace: no KVM here)",
         [x for x in log.splitlines() if "runsc" in x][:3])

    # the limits: the same statuses on runsc as on runc
    seen = {}
    for name, (code, lim) in CASES.items():
        for tier in ("rc", "gv"):
            r = run(tier, runtime="python", code=code, limits=lim)
            seen[(name, tier)] = (r.get("status"), r.get("exit_code"), r.get("signal"),
                                  (r.get("stdout") or b"")[:40])
    same = [n for n in CASES if seen[(n, "rc")][:2] == seen[(n, "gv")][:2]]
    t.ok(len(same) == len(CASES) and seen[("memory", "gv")][0] == "memory_limit" and
         seen[("cpu", "gv")][0] == "cpu_limit" and seen[("wall", "gv")][0] == "timeout" and
         seen[("output", "gv")][0] == "output_limit" and
         seen[("disk", "gv")][0] == "output_limit" and
         seen[("fork bomb", "gv")][3] == b"stopped 11\n" and
         seen[("exit 3", "gv")][:2] == ("nonzero_exit", 3),
         "memory, CPU, wall, output and disk limits, a fork bomb (pids 32: EAGAIN) and an "
         "exit code end on runsc with runc's statuses and exit codes", seen)

    # a catalogue image; files in, collect
    r = run("gv", runtime="python", image="python",
            code="import sys\nprint(sys.version.split()[0], open('in.txt').read())\n"
                 "open('out.txt', 'w').write('made in gVisor')\n",
            files=[{"path": "in.txt", "data": b"given"}], collect=["out.txt"])
    files = {f["path"]: f["data"] for f in r.get("files", [])}
    t.ok(r.get("status") == "ok" and b"given" in (r.get("stdout") or b"") and
         files.get("out.txt") == b"made in gVisor" and
         r.get("info", {}).get("image", "").startswith("sha256:"),
         "the python image on runsc: a file in, a file collected", r)

    # inputs by URL: the worker fetches them through the tier's egress rules;
    # a job's own network egress goes through the proxy too (airlock-exec's
    # relay on the Sentry's loopback: test_egress runs the whole suite)
    data = b"fetched by the worker\n"
    r = run("gv", runtime="python", code="print(open('data.txt').read(), end='')",
            inputs=[{"url": "http://%s:8000/data.txt" % INET.srv, "path": "data.txt",
                     "sha256": hashlib.sha256(data).hexdigest()}])
    r2 = run("gv", runtime="python", network="egress",
             code="import urllib.request\nprint(urllib.request.urlopen("
                  "'http://%s:8000/data.txt', timeout=20).read().decode(), end='')" % INET.srv)
    eg = r2.get("egress") or []
    t.ok(r.get("status") == "ok" and r.get("stdout") == data and
         r2.get("status") == "ok" and r2.get("stdout") == data and len(eg) == 1 and
         eg[0].get("allowed") and eg[0].get("addr") == INET.srv,
         "an input by URL on the runsc tier (fetched by the worker through the tier's rules); "
         "a job's own fetch with network egress, through the proxy, in its transcript",
         (r.get("status"), r.get("error"), r.get("stdout"), r2.get("status"),
          r2.get("error"), r2.get("stdout"), r2.get("stderr"), eg))

    # grading: a C++ build and five tests, the verdicts runc gives
    verdicts = {}
    for tier in ("rc", "gv"):
        r = run(tier, image="toolchain", argv=["./main"], tests=TESTS,
                build={"argv": ["g++", "-O1", "-o", "main", "main.cpp"],
                       "limits": {"wall_ms": 120000, "cpu_ms": 120000,
                                  "memory_bytes": 536870912}},
                files=[{"path": "main.cpp", "data": CPP.encode()}])
        verdicts[tier] = ((r.get("build") or {}).get("verdict"),
                          [x["verdict"] for x in r.get("tests", [])], r.get("error"))
    t.ok(verdicts["gv"] == verdicts["rc"] and verdicts["gv"][0] == "accepted" and
         verdicts["gv"][1] == ["accepted", "wrong_answer", "timeout", "runtime_error",
                               "accepted"],
         "a grading job (a C++ build, five tests) on runsc: runc's verdicts", verdicts)

    # a platform this runsc does not offer: said at start, and in the result
    r = run("gvtrap", runtime="python", code="print(1)")
    t.ok(r.get("status") == "sandbox_error" and
         "runsc (%s) does not offer the systrap platform (it offers ptrace,kvm)" % RUNSC
         in (r.get("error") or "") and
         "event=tier_unavailable tier=gvtrap runtime=runsc" in c.log("gv-w"),
         "a runsc platform the installed runsc does not offer: the tier is unavailable, "
         "logged at start; its job is sandbox_error saying why", r.get("error"))

    # a runsc session paused on one worker, and one its drain pauses (on_idle:
    # pause), resumed by another worker sharing the tier's snapshot_dir (its
    # own slots' uids, its own runsc state)
    sh = airlock.Client(redis=c.url, tier="gvs").session()
    sh.run_python("v = 'from gv-w'\nopen('f.txt', 'w').write('file from gv-w')")
    sh.pause()
    sh2 = airlock.Client(redis=c.url, tier="gvs").session()
    sh2.run_python("v = 'open at the drain'")
    c.signal("gv-w", signal.SIGTERM)
    c.wait_exit("gv-w")
    drained = c.rcli("HGET", "al:sess:" + sh2.id, "state").strip()
    c.worker("gv-w2", uid_base=66950, slots=2, tiers="gvs", extra=["--images", IMAGES])
    rs = sh.run_python("import os\nprint(v, open('f.txt').read(), "
                       "os.stat('f.txt').st_uid == os.getuid())")
    rs2 = sh2.run_python("print(v)")
    where = c.rcli("HGET", "al:sess:" + sh.id, "worker").strip()
    left = [f for f in os.listdir(SHARED) if ".snap" in f]
    sh.close()
    sh2.close()
    t.ok(rs.stdout == b"from gv-w file from gv-w True\n" and where == "gv-w2" and
         drained == "paused" and rs2.stdout == b"open at the drain\n" and not left,
         "a runsc session paused on one worker, and one its drain paused (on_idle: pause), "
         "are resumed by another worker sharing the tier's snapshot_dir (its files still "
         "the job's own there); their snapshots go", (rs, rs2, drained, where, left))
    c.signal("gv-w2", signal.SIGTERM)
    c.wait_exit("gv-w2")

    # a runsc that refuses to run a container (a fake), as the worker's default
    d = tempfile.mkdtemp(dir=c.dir)
    fake = fake_runsc(d, "fake runsc: cannot create sandbox: permission denied")
    c.worker("gv-f", uid_base=66950, slots=1, tiers="rc", extra=["--oci-runtime", fake])
    r = run("rc", runtime="python", code="print(1)")
    t.ok(r.get("status") == "sandbox_error" and
         "container: runsc (%s) exited 1 at its run step (create and start): fake runsc: "
         "cannot create sandbox: permission denied" % fake in (r.get("error") or ""),
         "runsc refusing at its run step: the runtime's name, the step, its words (never a "
         "bare status)", r.get("error"))
    c.signal("gv-f", signal.SIGTERM)
    c.wait_exit("gv-f")

    # a platform picked at start that fails its probe (a wrapper, named so,
    # offering systrap and failing on it): the next one is tried
    wrap = systrap_failing_runsc(tempfile.mkdtemp(dir=c.dir))
    c.worker("gv-s", uid_base=66950, slots=1, tiers="gv", extra=["--oci-runtime", wrap])
    r = run("gv", runtime="python", code="print(6*7)")
    log = c.log("gv-s")
    t.ok(r.get("status") == "ok" and r.get("info", {}).get("platform") == "ptrace" and
         "event=runsc_fallback platform=ptrace instead_of=systrap" in log and
         "systrap: no seccomp user notification here" in log,
         "the platform picked at start (systrap, offered) failing its probe: logged with "
         "its words, and the next one (ptrace) runs the tier's jobs",
         (r.get("status"), r.get("error"), r.get("info"),
          [x for x in log.splitlines() if "runsc" in x][:4]))
    c.signal("gv-s", signal.SIGTERM)
    c.wait_exit("gv-s")
    c.close()
    c = None

    # deploy/policy.example.yaml's sandboxed tier as shipped, and the
    # command of docs/backends/gvisor.md as written
    c = Cluster(policy=open(os.path.join(ROOT, "deploy", "policy.example.yaml")).read())
    c.scheduler()
    c.worker("gv-x", uid_base=66960, slots=1, tiers="sandboxed", extra=["--images", IMAGES])
    doc = open(os.path.join(ROOT, "docs", "backends", "gvisor.md")).read()
    m = re.search(r"^\$ airlock (run --tier sandboxed .*)\n(.*)\n", doc, re.M)
    p = c.cli(*shlex.split(m.group(1)), timeout=120) if m else None
    t.ok(m and p.returncode == 0 and p.stdout.decode().strip() == m.group(2) and
         m.group(2) != os.uname().release,
         "docs/backends/gvisor.md's `airlock run --tier sandboxed` on the example policy's "
         "sandboxed tier: the Sentry's kernel version, as the page shows",
         (m and m.group(0), p and (p.returncode, p.stdout, p.stderr[-400:])))
finally:
    if c:
        c.close()
    INET.stop()
    subprocess.run(["rm", "-rf", SHARED])
    if os.path.ismount(SMALL):
        subprocess.run(["umount", SMALL])
    if os.path.isdir(SMALL):
        os.rmdir(SMALL)
sys.exit(t.done())
