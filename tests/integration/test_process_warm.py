#!/usr/bin/python3
"""The process tier's warm interpreter (backends/process/init.c): after a
python job, a slot's next sandboxes start python3 before their job, and a
python job that may run there does. Through a real worker and Redis, each
warm job is checked against the same job run cold (`airlock-worker
--run-one`, a fresh worker: its first sandbox has no interpreter): the same
globals, modules, argv, environment, work directory, files, identity,
capabilities and system-call filter; the job's own limits (CPU, memory, file
size, wall time) hold in it; nothing of an earlier job is in it; a job
the interpreter was not started for runs cold (a start-up variable of its
own, a small memory limit, a shell job); on a tier with catalogue images
the interpreter runs in the slot's last job's image, and a job of another
image (or none) runs cold in its own."""
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, live_pids_of, need_root, run_one, warm_interpreter  # noqa: E402
from cluster import Cluster  # noqa: E402
from warmtest import WARM_MARK, WHERE, Jobs, interp  # noqa: E402

UID_BASE = int(os.environ.get("AIRLOCK_TEST_UID_BASE", "61100"))  # the worker's slot
COLD_UID = UID_BASE + 10  # run-one's slots
t = Tap()
need_root()
state = tempfile.mkdtemp(prefix="airlock-pwarm-", dir="/var/tmp")
POLICY = """\
result_ttl_s: 600
tiers:
  trusted:
    backend: process
    defaults: {wall_ms: 20000, memory_bytes: 268435456}
  imaged:
    backend: process
    images: [python, datascience]
    defaults: {wall_ms: 20000, memory_bytes: 268435456}
tenants:
  default: {}
"""
JOBS = Jobs("pw", "trusted")
job = JOBS.job


def cold(**kw):
    r, p = run_one(job(**kw), state, "pwarm-cold-%d" % os.getpid(), COLD_UID)
    return r or {"stderr": p.stderr.decode(errors="replace")}


def run(j):
    return JOBS.run(c, j)


PROBE = r"""
import os, sys
st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
print(sorted(globals()), __name__)
print(sorted(sys.modules))
print(sys.argv, sys.path, os.getcwd(), sorted(os.environ.items()))
print(st['Uid'].split()[0], st['CapEff'].strip(), st['CapBnd'].strip(), st['NoNewPrivs'].strip(),
      st['Seccomp'].strip(), os.getpgrp() == os.getpid(), os.getsid(0) == os.getpid())
print(sorted(os.listdir('/work')), open('/work/in.txt').read(), sorted(os.listdir('/tmp')))
print(os.cpu_count(), sys.flags, sys.stdin.read())
print(st['Uid'], st['Gid'], sorted(os.listdir('/proc/self/fd')),
      open('/proc/self/environ', 'rb').read() > b'')
"""


def uids(pid):
    """Real, effective and saved uid of pid."""
    try:
        with open("/proc/%s/status" % pid) as f:
            return [int(x) for x in next(l for l in f if l.startswith("Uid:")).split()[1:4]]
    except (OSError, StopIteration):
        return None


def strip_uid(out, uid):
    return out.replace(str(uid), "UID")


c = Cluster(policy=POLICY)
try:
    c.scheduler()
    c.worker("pwarm-w", uid_base=UID_BASE, slots=1, tiers="trusted,imaged")
    t.ok(c.wait_for(lambda: "event=redis_up" in c.log("pwarm-w"), 10), "worker up")
    first = run(job(code="print(1)"))
    second = run(job(code="print(2)"))
    t.ok(interp(first) == "cold" and interp(second) == "warm" and second.get("stdout") == "2\n",
         "a slot's first python job runs cold; the next one in the interpreter its sandbox "
         "started after it (info interpreter: warm)", (first, second))

    kw = dict(code=PROBE, argv=["a b", "c"], env={"GREETING": "hi"}, stdin=b"in put",
              files=[{"path": "in.txt", "data": b"file data"}])
    w = run(job(**kw))
    k = cold(**kw)
    t.ok(interp(w) == "warm" and w.get("status") == "ok" and interp(k) == "cold" and
         strip_uid(w.get("stdout", ""), UID_BASE) == strip_uid(k.get("stdout", ""), COLD_UID) and
         "'GREETING', 'hi'" in w.get("stdout", "") and "/work" in w.get("stdout", ""),
         "in the interpreter a job sees what it sees cold: __main__'s globals, sys.modules, "
         "sys.argv, sys.path, cwd /work, its environment, its own uid with no capabilities, "
         "no_new_privs and the seccomp filter, its own session, its files, an empty /tmp, "
         "its CPUs, sys.flags, its stdin, the slot's uid as real, effective and saved uid, "
         "its own /proc/self (dumpable, as after an exec)",
         [(a, b) for a, b in zip(strip_uid(w.get("stdout", ""), UID_BASE).splitlines(),
                                 strip_uid(k.get("stdout", ""), COLD_UID).splitlines()) if a != b] or (w, k))

    time.sleep(0.5)
    warm_pids = [p for p in os.listdir("/proc") if p.isdigit() and warm_interpreter(p) and
                 uids(p) == [UID_BASE + 1, UID_BASE, UID_BASE]]
    t.ok(len(warm_pids) == 2 and not live_pids_of({UID_BASE}),
         "between jobs the slot's two sandboxes each hold an interpreter, and no process "
         "has the slot's uid as its real uid (an interpreter's is the warm uid, --uid-base "
         "+ --slots, until its job comes)", (warm_pids, live_pids_of({UID_BASE})))

    code = ("import socket, errno\n"
            "try:\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
            "except OSError as e:\n    print(errno.errorcode[e.errno])\n")
    w = run(job(code=code))
    t.ok(interp(w) == "warm" and w.get("stdout") == "EPERM\n",
         "the interpreter's system-call filter is the job's: an AF_INET socket is EPERM", w)

    code = "import os\nos.environ['X'] = '1'\nprint(os.popen('echo $GREETING$X; id -u').read())"
    w = run(job(code=code, env={"GREETING": "hey"}))
    t.ok(interp(w) == "warm" and w.get("stdout") == "hey1\n%d\n\n" % UID_BASE,
         "the job's environment reaches the programs it starts", w)

    for code, status, extra in [
            ("import sys; sys.exit(3)", "nonzero_exit", {"exit_code": 3}),
            ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", "nonzero_exit",
             {"signal": 15, "exit_code": None}),
            ("raise ValueError('boom')", "nonzero_exit", {"exit_code": 1}),
            ("print('x', end='')\nraise KeyboardInterrupt", "nonzero_exit", {"signal": 2}),
            ("import sys; sys.exit('bye')", "nonzero_exit", {"exit_code": 1})]:
        w = run(job(code=code))
        k = cold(code=code)
        same = all(w.get(f) == k.get(f) for f in ("status", "exit_code", "signal", "stdout",
                                                  "stderr"))
        t.ok(interp(w) == "warm" and w.get("status") == status and same and
             all(w.get(f) == v for f, v in extra.items()),
             "%r: %s as cold (exit code, signal, stdout, stderr with <run_python>'s traceback)"
             % (code, status), (w, k))

    w = run(job(code="import builtins, sys\nbuiltins.LEAK = 1\nsys.modules['sys'].x = 2\n"
                           "open('/tmp/left', 'w').write('x')\nopen('/work/left', 'w').write('x')"))
    w2 = run(job(code="import builtins, os, sys\n"
                            "print(hasattr(builtins, 'LEAK'), hasattr(sys, 'x'),"
                            " os.listdir('/tmp'), os.listdir('/work'))"))
    t.ok(interp(w) == interp(w2) == "warm" and w2.get("stdout") == "False False [] []\n",
         "nothing of an earlier job is in the next one's interpreter or files", w2)

    w = run(job(code=WHERE + "import os\nwhile True: os.urandom(1)", limits={"cpu_ms": 1000}))
    t.ok(w.get("stdout") == WARM_MARK and w.get("status") == "cpu_limit" and
         800 <= w.get("cpu_ms", 0) <= 3500,
         "CPU limit: a busy loop ends cpu_limit near its own 1000 ms in the interpreter "
         "(the interpreter's start-up is not counted)", w)
    w = run(job(code=WHERE + "b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1",
                limits={"memory_bytes": 96 << 20}))
    t.ok(w.get("stdout") == WARM_MARK and w.get("status") == "memory_limit",
         "memory limit: 200 MiB touched under a 96 MiB limit is memory_limit", w)
    w = run(job(code="open('/work/big', 'wb').write(b'x' * (8 << 20))",
                      limits={"disk_bytes": 4 << 20}))
    k = cold(code="open('/work/big', 'wb').write(b'x' * (8 << 20))",
             limits={"disk_bytes": 4 << 20})
    t.ok(interp(w) == "warm" and w.get("status") == k.get("status") and
         w.get("status") != "ok",
         "file-size limit: an 8 MiB file under a 4 MiB disk limit fails as cold (%s)"
         % k.get("status"), (w, k))
    w = run(job(code=WHERE + "import time; time.sleep(30)", limits={"wall_ms": 700}))
    t.ok(w.get("stdout") == WARM_MARK and w.get("status") == "timeout" and
         w.get("wall_ms", 0) < 1500,
         "wall limit: a sleeping job times out in the interpreter", w)

    w = run(job(code="import os; print(os.environ['LANG'])", env={"LANG": "C"}))
    t.ok(interp(w) == "cold" and w.get("stdout") == "C\n",
         "a job whose start-up variable differs (LANG) runs cold, with its own value", w)
    w = run(job(code="import sys; print(sys.path[1])", env={"PYTHONPATH": "/opt/x"}))
    t.ok(interp(w) == "cold" and w.get("stdout") == "/opt/x\n",
         "a job with PYTHONPATH runs cold: python3 reads it at start-up", w)
    w = run(job(code="print(1)", limits={"memory_bytes": 32 << 20}))
    t.ok(interp(w) == "cold" and w.get("stdout") == "1\n",
         "a job whose memory limit is under 64 MiB runs cold", w)
    w = run(job(runtime="sh", code="echo sh"))
    t.ok(w.get("stdout") == "sh\n" and "interpreter" not in w.get("info", {}),
         "a shell job after python jobs runs as always (the interpreter killed first)", w)
    w = run(job(code="print(3)"))
    w2 = run(job(code="print(4)"))
    t.ok(w.get("stdout") == "3\n" and interp(w2) == "warm" and w2.get("stdout") == "4\n",
         "after a shell job the slot's sandboxes start interpreters again", (w, w2))

    # Catalogue images (make images): the interpreter starts in the image
    # the slot's last job had; a job of another image, or of none, gets a
    # sandbox made for it (cold), and the next ones of its kind are warm.
    IMG = ("import os, sys\nprint(sys.version.split()[0], os.path.exists('/.airlock-warm'),"
           " open('/etc/os-release').read().split()[0], sorted(sys.modules)[:5])\n")
    t.ok(os.path.isdir("/var/lib/airlock/images/python") and
         os.path.isdir("/var/lib/airlock/images/datascience"),
         "the python and datascience catalogue images are built (make images)")
    seen = [run(job(tier="imaged", image=img, code=IMG))
            for img in ("python", "python", "datascience", "datascience")]
    t.ok([interp(r) for r in seen] == ["cold", "warm", "cold", "warm"] and
         all(r.get("status") == "ok" for r in seen) and
         seen[1].get("stdout") == seen[0].get("stdout") and
         seen[3].get("stdout") == seen[2].get("stdout") and
         seen[1]["info"].get("image") == seen[0]["info"].get("image") !=
         seen[3]["info"].get("image") == seen[2]["info"].get("image") and
         " True " in seen[1].get("stdout", ""),
         "a tier with images: the interpreter runs in the slot's last job's image, the "
         "same python, files and modules as a cold job of it; a job of another image "
         "runs cold in its own, the next one of it warm", seen)
    w = run(job(code=IMG))
    w2 = run(job(code=IMG))
    t.ok(interp(w) == "cold" and interp(w2) == "warm" and w["info"].get("image") == "host" ==
         w2["info"].get("image") and " False " in w2.get("stdout", ""),
         "after image jobs a job without one runs on the host's root (cold, in a sandbox "
         "made for it), and the next one warm there", (w, w2))
finally:
    c.close()
    shutil.rmtree(state, ignore_errors=True)
t.ok(not live_pids_of(set(range(UID_BASE, UID_BASE + 1)) | {COLD_UID, COLD_UID + 1}),
     "nothing left running as the slot uids")
t.done()
