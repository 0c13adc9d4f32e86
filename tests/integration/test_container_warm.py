#!/usr/bin/python3
"""The container tier's warm interpreter (backends/container/warm.c): after
a python job, a slot's next container is started with python3 before its
job, of that job's shape, and a python job of the same shape runs there.
Through a real worker, runc and Redis, a warm job is checked against the
same job run cold (`airlock-worker --run-one`, a fresh worker: its first
container is made for its job): the same globals, modules, argv,
environment, work directory, files, identity, capabilities, system-call
filter and descriptors; the job's own limits (CPU, memory, disk, wall time)
hold in it; nothing of an earlier job is in it; a job it was not started
for runs cold (another shape, a start-up variable of its own, a small
memory limit, a shell job); a warm container that died is replaced and its
job runs cold; the worker's exit leaves nothing of them."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, leftovers, run_one, skip_unless  # noqa: E402
from cluster import Cluster  # noqa: E402
from warmtest import WARM_MARK, WHERE, Jobs, interp  # noqa: E402

t = Tap()
skip_unless(os.geteuid() == 0 and any(os.access(os.path.join(d, "runc"), os.X_OK)
                                       for d in ("/usr/sbin", "/usr/bin")), "needs root and runc")
state = tempfile.mkdtemp(prefix="airlock-cwarm-", dir="/var/tmp")
os.chmod(state, 0o711)
USERNS = 600000
WID = "cwarm-w"
POLICY = """\
result_ttl_s: 600
tiers:
  team:
    backend: container
    defaults: {wall_ms: 20000, memory_bytes: 268435456}
  imaged:
    backend: container
    images: [python, toolchain]
    defaults: {wall_ms: 20000, memory_bytes: 268435456}
  slow:
    backend: container
    cpu_millis: 50
    defaults: {wall_ms: 60000, memory_bytes: 268435456}
tenants:
  default: {}
"""
JOBS = Jobs("cw", "team")
job = JOBS.job


def cold(**kw):
    r, p = run_one(job(**kw), state, "cwarm-cold-%d" % os.getpid(), 61300,
                   extra=("--backend", "container", "--policy", c.policy, "--userns-base", str(USERNS + 4 * 65536)))
    return r or {"stderr": p.stderr.decode(errors="replace")}


def run(j):
    return JOBS.run(c, j)


def twice(**kw):
    """The first of a shape is cold (the slot's warm container was made for
    the last one's), the second warm: the second's result."""
    run(job(**kw))
    return run(job(**kw))


def warm_containers():
    root = os.path.join(c.dir, "state", WID, "runtime")
    p = subprocess.run(["runc", "--root", root, "list", "-q"], capture_output=True, text=True)
    return [x for x in p.stdout.split() if "-warm+" in x]


PROBE = r"""
import os, sys
st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
print(sorted(globals()), __name__)
print(sorted(sys.modules))
print(sys.argv, sys.path, os.getcwd(), sorted(os.environ.items()))
print(st['Uid'], st['Gid'], st['CapEff'].strip(), st['CapBnd'].strip(),
      st['NoNewPrivs'].strip(), st['Seccomp'].strip(), os.getpid(), os.getsid(0))
print(sorted(os.listdir('/work')), open('/work/in.txt').read(), sorted(os.listdir('/tmp')))
print(os.cpu_count(), sys.flags, sys.stdin.read(), sorted(os.listdir('/proc/self/fd')))
import resource as r
print(open('/proc/self/environ', 'rb').read() > b'',
      [r.getrlimit(x) for x in (r.RLIMIT_FSIZE, r.RLIMIT_NOFILE, r.RLIMIT_AS, r.RLIMIT_CORE)])
print(open('/proc/self/mountinfo').read().count('\n'))
"""

c = Cluster(policy=POLICY)
try:
    c.scheduler()
    c.worker(WID, slots=1, tiers="team,imaged,slow", extra=("--userns-base", str(USERNS)))
    t.ok(c.wait_for(lambda: "event=redis_up" in c.log(WID), 10), "worker up")
    first = run(job(code="print(1)"))
    t.ok(c.wait_for(lambda: len(warm_containers()) == 1, 10),
         "after a python job the slot's next container is started, before any job comes",
         warm_containers())
    second = run(job(code="print(2)"))
    t.ok(interp(first) == "cold" and interp(second) == "warm" and second.get("stdout") == "2\n"
         and second.get("status") == "ok",
         "a slot's first python job runs cold; the next one in the container started after it "
         "(info interpreter: warm)", (first, second))
    t.ok(second.get("cpu_ms", 99) < 40,
         "the warm container's start-up is not the job's CPU time (print(2): %s ms)"
         % second.get("cpu_ms"), second)

    # a job that comes while the slot's warm container is still starting
    # (5 % of a CPU: its start-up takes a second or more) takes it and is
    # charged none of that start-up (issue 59: it was, from the hand-over);
    # a cold print(2) costs about 45 ms of CPU, a warm one a few
    SLOW = Jobs("cws", "slow")
    SLOW.run(c, SLOW.job(code="print(1)"))
    early = SLOW.run(c, SLOW.job(code="print(2)"))
    time.sleep(3)
    later = SLOW.run(c, SLOW.job(code="print(3)"))
    t.ok(interp(early) == "warm" and early.get("stdout") == "2\n" and
         early.get("cpu_ms", 99) < 25 and interp(later) == "warm" and
         later.get("cpu_ms", 99) < 25,
         "a job that reaches a warm container still starting takes it, and none of the "
         "start-up is its CPU time (%s ms; one that came once it was ready: %s ms)"
         % (early.get("cpu_ms"), later.get("cpu_ms")), (early, later))
    run(job(code="print(0)"))  # the slot's warm container: the team tier's again

    kw = dict(code=PROBE, argv=["a b", "c"], env={"GREETING": "hi"}, stdin=b"in put",
              limits={"memory_bytes": 268435456}, files=[{"path": "in.txt", "data": b"file data"}])
    w = run(job(**kw))
    k = cold(**kw)
    t.ok(interp(w) == "warm" and w.get("status") == "ok" and interp(k) == "cold" and
         w.get("stdout") == k.get("stdout") and "'GREETING', 'hi'" in w.get("stdout", ""),
         "in the warm container a job sees what it sees cold: __main__'s globals, "
         "sys.modules, sys.argv, sys.path, cwd /work, its environment, uid 1000 with no "
         "capabilities, no_new_privs and the seccomp filter, pid 1 and its session, its "
         "files, an empty /tmp, its CPUs, sys.flags, its stdin, descriptors 0-3 only, "
         "its rlimits, the same mounts",
         [(a, b) for a, b in zip(w.get("stdout", "").splitlines(),
                                 k.get("stdout", "").splitlines()) if a != b] or (w, k))

    code = ("import socket, errno\n"
            "try:\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
            "except OSError as e:\n    print(errno.errorcode[e.errno])\n")
    w = run(job(code=code))
    t.ok(interp(w) == "warm" and w.get("stdout") == "EPERM\n",
         "the warm container's system-call filter is the job's: an AF_INET socket is EPERM", w)

    code = "import os\nos.environ['X'] = '1'\nprint(os.popen('echo $GREETING$X; id -u').read())"
    w = run(job(code=code, env={"GREETING": "hey"}))
    t.ok(interp(w) == "warm" and w.get("stdout") == "hey1\n1000\n\n",
         "the job's environment reaches the programs it starts", w)

    for code, status, extra in [
            ("import sys; sys.exit(3)", "nonzero_exit", {"exit_code": 3}),
            ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)\nimport time\n"
             "time.sleep(5)\nprint('pid 1 ignores it')", "ok", {}),
            ("raise ValueError('boom')", "nonzero_exit", {"exit_code": 1}),
            ("print('x', end='')\nraise KeyboardInterrupt", "nonzero_exit", {}),
            ("import sys; sys.exit('bye')", "nonzero_exit", {"exit_code": 1})]:
        w = run(job(code=code))
        k = cold(code=code)
        same = all(w.get(f) == k.get(f) for f in ("status", "exit_code", "signal", "stdout",
                                                  "stderr"))
        t.ok(interp(w) == "warm" and w.get("status") == status and same and
             all(w.get(f) == v for f, v in extra.items()),
             "%r: %s as cold (exit code, signal, stdout, stderr with <run_python>'s traceback)"
             % (code, status), [(w.get(f), k.get(f)) for f in ("status", "exit_code", "signal",
                                                               "stdout", "stderr")])

    w = run(job(code="import builtins, sys\nbuiltins.LEAK = 1\nsys.modules['sys'].x = 2\n"
                     "open('/tmp/left', 'w').write('x')\nopen('/work/left', 'w').write('x')\n"
                     "open('/dev/shm/left', 'w').write('x')"))
    w2 = run(job(code="import builtins, os, sys\n"
                      "print(hasattr(builtins, 'LEAK'), hasattr(sys, 'x'),"
                      " os.listdir('/tmp'), os.listdir('/work'), os.listdir('/dev/shm'))"))
    t.ok(interp(w) == interp(w2) == "warm" and w2.get("stdout") == "False False [] [] []\n",
         "nothing of an earlier job is in the next one's interpreter or files", w2)

    # a job of another shape runs cold, and the next one of it warm, with
    # its own limits holding there
    w = run(job(code=WHERE + "import os\nwhile True: os.urandom(1)", limits={"cpu_ms": 1000}))
    t.ok(w.get("stdout") == WARM_MARK and w.get("status") == "cpu_limit" and
         800 <= w.get("cpu_ms", 0) <= 3500,
         "CPU limit: a busy loop ends cpu_limit near its own 1000 ms in the warm container "
         "(the start-up is not counted; the CPU limit is set when the job comes, no part of "
         "the container's shape)", w)
    w = twice(code=WHERE + "b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1",
              limits={"memory_bytes": 96 << 20})
    t.ok(w.get("stdout") == WARM_MARK and w.get("status") == "memory_limit",
         "memory limit: 200 MiB touched under a 96 MiB limit is memory_limit", w)
    big = "open('/work/big', 'wb').write(b'x' * (8 << 20))"
    w = twice(code=big, limits={"disk_bytes": 4 << 20})
    k = cold(code=big, limits={"disk_bytes": 4 << 20})
    t.ok(interp(w) == "warm" and w.get("status") == k.get("status") and
         w.get("status") != "ok",
         "disk limit: an 8 MiB file under a 4 MiB disk limit fails as cold (%s)"
         % k.get("status"), (w, k))
    run(job(code="print(0)"))
    w = run(job(code=WHERE + "import time; time.sleep(30)", limits={"wall_ms": 700}))
    t.ok(w.get("stdout") == WARM_MARK and w.get("status") == "timeout" and
         w.get("wall_ms", 0) < 1500,
         "wall limit: a sleeping job times out in the warm container (the wall limit is "
         "not part of its shape)", w)
    w = run(job(code="import os\nos.fork() or os.fork()\nimport time; time.sleep(0.2)\n"
                     "print(len(os.listdir('/proc')) > 0)", limits={"pids": 2}))
    w2 = run(job(code="import os\ntry:\n    [os.fork() or os._exit(0) for _ in range(3)]\n"
                      "    print('forked')\nexcept OSError as e:\n    print(e.errno)",
                 limits={"pids": 2}))
    t.ok(interp(w2) == "warm" and w2.get("stdout") == "11\n",
         "pids limit: a warm job with pids 2 cannot fork past it (EAGAIN)", (w, w2))

    w = run(job(code="import os; print(os.environ['LANG'])", env={"LANG": "C"}))
    t.ok(interp(w) == "cold" and w.get("stdout") == "C\n",
         "a job whose start-up variable differs (LANG) runs cold, with its own value", w)
    w = run(job(code="import os; print(os.environ['LANG'])", env={"LANG": "C"}))
    t.ok(interp(w) == "warm" and w.get("stdout") == "C\n",
         "the next such job runs warm: the container was started with that job's LANG", w)
    w = run(job(code="import os; print(open('/proc/self/environ', 'rb').read().count(b'GREET'))",
                env={"LANG": "C"}))
    t.ok(interp(w) == "warm" and w.get("stdout") == "0\n",
         "a warm container's start-up environment holds no other variable of the job it "
         "was made after (GREETING of an earlier job is not in /proc/self/environ)", w)
    w = run(job(code="print(1)", limits={"memory_bytes": 32 << 20}))
    w2 = run(job(code="print(1)", limits={"memory_bytes": 32 << 20}))
    t.ok(interp(w) == interp(w2) == "cold" and w2.get("stdout") == "1\n",
         "jobs with a memory limit under 64 MiB run cold", (w, w2))
    w = run(job(code="print(5)"))
    w2 = run(job(runtime="sh", code="echo sh"))
    w3 = run(job(code="print(6)"))
    t.ok(w2.get("stdout") == "sh\n" and "interpreter" not in w2.get("info", {}) and
         interp(w3) == "warm" and w3.get("stdout") == "6\n",
         "a shell job runs as always, and the warm container waits on for the next python "
         "job", (w, w2, w3))

    # a warm container that dies before its job: replaced; its job runs cold
    t.ok(c.wait_for(lambda: len(warm_containers()) == 1, 10), "one warm container waits")
    root = os.path.join(c.dir, "state", WID, "runtime")
    victim = warm_containers()[0]
    p = subprocess.run(["runc", "--root", root, "kill", victim, "KILL"], capture_output=True,
                       text=True)
    c.wait_for(lambda: victim not in warm_containers(), 10)
    w = run(job(code="print(7)"))
    w2 = run(job(code="print(8)"))
    t.ok(p.returncode == 0 and w.get("status") == "ok" and w.get("stdout") == "7\n" and
         interp(w) == "cold" and interp(w2) == "warm" and w2.get("stdout") == "8\n",
         "a warm container killed before its job: the job runs cold and ok, the next warm",
         (p.stderr, w, w2))

    # catalogue images: the warm container is of the slot's last job's image
    IMG = ("import os, sys\nprint(sys.version.split()[0], open('/etc/os-release').read()"
           ".split()[0], os.path.exists('/usr/bin/gcc'))\n")
    seen = [run(job(tier="imaged", image=img, code=IMG))
            for img in ("python", "python", "toolchain", "toolchain")]
    t.ok([interp(r) for r in seen] == ["cold", "warm", "cold", "warm"] and
         all(r.get("status") == "ok" for r in seen) and
         seen[1].get("stdout") == seen[0].get("stdout") and
         seen[3].get("stdout") == seen[2].get("stdout") and
         seen[1]["info"].get("image") == seen[0]["info"].get("image") !=
         seen[3]["info"].get("image") == seen[2]["info"].get("image"),
         "a tier with images: the warm container is of the slot's last job's image; a job "
         "of another image runs cold in its own, the next one of it warm", seen)

    # the worker's exit removes its warm container: nothing of it is left
    t.ok(c.wait_for(lambda: len(warm_containers()) == 1, 10), "a warm container waits")
    c.signal(WID, signal.SIGTERM)
    t.ok(c.wait_exit(WID) == 0, "the worker exits on SIGTERM")
    left = leftovers(USERNS + 1000, WID, os.path.join(c.dir, "state"), warm=0)
    t.ok(not left and not warm_containers(),
         "the worker's exit leaves no warm container: no process, cgroup, runtime state or "
         "bundle", (left, warm_containers()))
finally:
    c.close()
    shutil.rmtree(state, ignore_errors=True)
t.done()
