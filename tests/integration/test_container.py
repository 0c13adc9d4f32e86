#!/usr/bin/python3
"""The container backend (an OCI runtime) on its own: a read-only root,
invisible host processes, read-only /proc/sys and /sys, the pids limit, no
view of another running job's files, a grading run with gcc, and a runtime
failure reported as sandbox_error. Jobs go through the real queue."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, leftovers, live_pids_of, skip_unless  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402

t = Tap()
skip_unless(os.geteuid() == 0 and any(os.access(os.path.join(d, "runc"), os.X_OK)
                                       for d in ("/usr/sbin", "/usr/bin")), "needs root and runc")

# The images built from Debian packages by deploy/images/build.sh (built
# here when missing; kept for the next run).
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
HASH = {}
for name in ("python", "toolchain", "node", "go"):
    if not os.path.exists(os.path.join(IMAGES, name, ".airlock-image")):
        b = subprocess.run([os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "images",
                                         "build.sh"), "--out", IMAGES, name],
                           capture_output=True, text=True)
        if b.returncode != 0:
            sys.stderr.write(b.stderr)
    with open(os.path.join(IMAGES, name, ".airlock-image")) as f:
        HASH[name] = f.read().strip()

POLICY = policy(
    tier_def("internal", "container", defaults=DEFAULTS),
    tier_def("broken", "container", image="notbuilt"),
    tier_def("pyimage", "container", images=["python", "node"]),
    tier_def("nopython", "container", image="go"),
    tier_def("grading", "container", image="toolchain",
             defaults=dict(DEFAULTS, wall_ms=60000, memory_bytes=536870912)),
    tier_def("bound", "container", binds=["BIND_DIR"]))
BIND_DIR = tempfile.mkdtemp(prefix="airlock-bind-", dir="/var/tmp")
os.chmod(BIND_DIR, 0o755)
with open(os.path.join(BIND_DIR, "data.txt"), "w") as f:
    f.write("shared read-only")
os.chmod(os.path.join(BIND_DIR, "data.txt"), 0o644)
POLICY = POLICY.replace("BIND_DIR", BIND_DIR)
WID = "ctr-test"
UID = 200000 + 1000  # slot 0's container user on the host


SEQ = iter(range(1, 1 << 30))


def py(c, code, **kw):
    job = {"v": 1, "id": "c-%d-%d" % (os.getpid(), next(SEQ)), "tier": kw.pop("tier", "internal"),
           "runtime": "python", "code": code}
    job.update(kw)
    r = c.run_job(job)
    for k in ("stdout", "stderr"):
        r[k] = r.get(k, b"").decode(errors="replace")
    return r


c = Cluster(policy=POLICY)
try:
    c.scheduler()
    c.worker(WID, slots=2, tiers="internal,broken,grading,pyimage,bound,nopython",
             extra=["--images", IMAGES])
    r = py(c, "import os\n"
              "for p in ['/usr/evil', '/etc/evil', '/evil', '/bin/evil']:\n"
              "    try: open(p, 'w').write('x'); print(p, 'WRITTEN')\n"
              "    except OSError as e: print(p, e.strerror)\n")
    t.ok(r["status"] == "ok" and "WRITTEN" not in r["stdout"] and
         r["stdout"].count("Read-only file system") == 4, "the root filesystem is read-only", r)
    r = py(c, "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    t.ok(r["status"] == "ok" and r["stdout"].strip() == "[1]", "host processes are invisible", r)
    r = py(c, "for p in ['/proc/sys/kernel/hostname', '/sys/kernel/mm/transparent_hugepage/enabled']:\n"
              "    try: open(p, 'w').write('x'); print(p, 'WRITTEN')\n"
              "    except OSError as e: print(p, e.strerror)\n")
    t.ok(r["status"] == "ok" and "WRITTEN" not in r["stdout"] and
         r["stdout"].count("Read-only file system") == 2, "/proc/sys and /sys are read-only", r)
    r = py(c, "import os, time\nn = 0\n"
              "try:\n"
              "    while True:\n"
              "        if os.fork() == 0:\n"
              "            time.sleep(2); os._exit(0)\n"
              "        n += 1\n"
              "except OSError as e: print(n, e.strerror)\n", limits={"pids": 64, "wall_ms": 20000})
    n = int(r["stdout"].split()[0]) if r["stdout"] else -1
    t.ok(r["status"] == "ok" and 55 <= n < 64 and "Resource temporarily unavailable" in r["stdout"],
         "the 64-pid limit holds (%d forks)" % n, r)
    # Two jobs at once: the second cannot find the first's files.
    got = {}

    def writer():
        got["a"] = py(c, "import time\nopen('secret-of-a', 'w').write('a')\ntime.sleep(3)\nprint('a done')")

    th = threading.Thread(target=writer)
    th.start()
    c.wait_for(lambda: c.log(WID).count("event=job_start") >= 5, timeout=20)
    got["b"] = py(c, "import os\nhits = []\n"
                     "for root, dirs, files in os.walk('/', onerror=lambda e: None):\n"
                     "    if root.startswith(('/proc', '/sys', '/usr')): dirs[:] = []; continue\n"
                     "    if 'secret-of-a' in files: hits.append(root)\n"
                     "print('hits', hits)\n")
    th.join()
    t.ok(got["a"]["stdout"] == "a done\n" and got["b"]["stdout"] == "hits []\n",
         "a job cannot see another running job's files", got)
    # A running job's bundle: config.json (its argv and environment) root's only, in a
    # directory no other host uid can enter.
    seen = {}

    def sleeper():
        got["s"] = py(c, "import time\ntime.sleep(3)", env={"JOB_SECRET": "s3"})

    th = threading.Thread(target=sleeper)
    th.start()
    jobs_dir = os.path.join(c.dir, "state", WID, "container")

    def bundle():
        for d in os.listdir(jobs_dir) if os.path.isdir(jobs_dir) else []:
            cfg = os.path.join(jobs_dir, d, "config.json")
            if os.path.exists(cfg):
                sd, sc = os.stat(os.path.join(jobs_dir, d)), os.stat(cfg)
                seen.update(dir=oct(sd.st_mode & 0o777), dir_uid=sd.st_uid,
                            cfg=oct(sc.st_mode & 0o777), cfg_uid=sc.st_uid)
                try:
                    with open(cfg) as f:
                        seen["args0"] = json.load(f)["process"]["args"][0]
                except ValueError:  # caught while the worker writes it
                    return False
                return True
        return False

    c.wait_for(bundle, timeout=20, step=0.02)
    th.join()
    args0 = seen.pop("args0", None)
    t.ok(seen == {"dir": "0o700", "dir_uid": 200000, "cfg": "0o600", "cfg_uid": 0},
         "a running job's bundle: config.json 0600 root's, in a 0700 directory of the slot's "
         "container root", seen)
    t.ok(args0 == "/usr/bin/python3",
         "a python job in the host image: the runtime executes python3 itself (no airlock-exec "
         "before it: the root has it, an ELF program)", args0)
    # What the job's python holds open: its stdio and its script, nothing of
    # the runtime's or the backend's (airlock-exec's descriptor is not passed
    # in when the runtime executes python3 itself)
    fds = ("import os\nopen_ = []\nfor fd in range(256):\n"
           "    try: os.fstat(fd); open_.append(fd)\n    except OSError: pass\n"
           "print(open_, os.readlink('/proc/self/fd/3').split(' ')[0])\n")
    r, ri = py(c, fds), py(c, fds, tier="pyimage", image="python")
    t.ok(r["stdout"] == ri["stdout"] == "[0, 1, 2, 3] /memfd:job-code\n",
         "a python job's open descriptors: 0-2 and its script on 3, nothing else (host image "
         "and catalogue image)", (r, ri))
    # A tier's binds: read-only at the same path; other tiers do not see them.
    code = ("import os, sys\n"
            "p = sys.argv[1]\n"
            "print(open(p + '/data.txt').read() if os.path.exists(p) else 'absent')\n"
            "try: open(p + '/new', 'w'); print('written')\n"
            "except OSError as e: print(e.strerror)\n")
    r1 = py(c, code, tier="bound", argv=[BIND_DIR])
    r2 = py(c, code, argv=[BIND_DIR])
    t.ok(r1["stdout"].splitlines() == ["shared read-only", "Read-only file system"] and
         r2["stdout"].splitlines()[0] == "absent" and
         not os.path.exists(os.path.join(BIND_DIR, "new")),
         "binds: the tier's host path read-only at the same place; absent in another tier",
         (r1, r2["stdout"]))
    for tier, name in (("pyimage", "python"), ("grading", "toolchain")):
        r = py(c, "import os, shutil\nprint(open('/etc/os-release').read().splitlines()[0],"
                  " shutil.which('gcc'), os.path.exists('/.airlock-image'))", tier=tier)
        want = "Debian" in r["stdout"] and ("/usr/bin/gcc" in r["stdout"]) == (name == "toolchain")
        t.ok(r["status"] == "ok" and want and r["stdout"].strip().endswith("True") and
             r.get("info", {}).get("image") == HASH[name],
             "the built %s image: the job runs in it, the result names its content hash" % name, r)
    # Grading: compile a student's C program in the toolchain image and run
    # it on test inputs with limits, checking each output.
    student = ("#include <stdio.h>\nint main(void){long a,b; if(scanf(\"%ld %ld\",&a,&b)!=2) return 2;"
               " printf(\"%ld\\n\", a+b); return 0;}\n")
    grader = ("import subprocess\n"
              "c = subprocess.run(['gcc', '-O1', '-o', 'sum', 'sum.c'], capture_output=True, text=True)\n"
              "print('compiled', c.returncode)\n"
              "for inp, want in [('1 2', '3'), ('40 2', '42'), ('-5 5', '0')]:\n"
              "    r = subprocess.run(['./sum'], input=inp, capture_output=True, text=True, timeout=5)\n"
              "    print('pass' if r.stdout.strip() == want else 'FAIL', inp)\n")
    r = py(c, grader, files=[{"path": "sum.c", "data": student.encode()}], tier="grading",
           limits={"wall_ms": 60000, "memory_bytes": 512 << 20, "pids": 64})
    t.ok(r["status"] == "ok" and r["stdout"].startswith("compiled 0") and
         r["stdout"].count("pass") == 3, "grading: gcc in the toolchain image, three test inputs pass", r)
    bad = student.replace("a+b", "a+b+(a>10)")  # wrong for one input
    r = py(c, grader, files=[{"path": "sum.c", "data": bad.encode()}], tier="grading",
           limits={"wall_ms": 60000, "memory_bytes": 512 << 20, "pids": 64})
    t.ok(r["status"] == "ok" and r["stdout"].count("pass") == 2 and "FAIL 40 2" in r["stdout"],
         "grading: a program wrong for one input fails exactly that one", r)
    r = py(c, "print(1)", tier="broken")
    t.ok(r["status"] == "sandbox_error" and "image notbuilt is not built" in (r.get("error") or "")
         and "deploy/images/build.sh" in r["error"] and r["stdout"] == "",
         "an image the catalogue lacks: sandbox_error naming the command that builds it", r)
    r = py(c, "print(1)", tier="pyimage", image="toolchain")
    t.ok(r["status"] == "rejected" and "allowed: python, node" in (r.get("error") or ""),
         "an image the tier does not offer: rejected, naming the ones it does", r)
    r = c.run_job({"v": 1, "id": "c-node-%d" % os.getpid(), "tier": "pyimage", "image": "node",
                   "argv": ["node", "-e", "console.log([1,2,3].map(x => x * 2).join(' '))"]})
    t.ok(r["status"] == "ok" and r["stdout"] == b"2 4 6\n" and
         r.get("info", {}).get("image") == HASH["node"],
         "the node image: a job names it and node runs its script", r)
    # An image without python3 (go): the job's python is run by airlock-exec,
    # so its absence is the job's exit 127, not a fault of the runtime
    r = py(c, "print(1)", tier="nopython")
    t.ok(r["status"] == "nonzero_exit" and r.get("exit_code") == 127 and
         "cannot execute /usr/bin/python3" in r["stderr"],
         "a python job on an image without python3: exit 127 naming it, the job's failure", r)
    r = c.run_job({"v": 1, "id": "c-missing-%d" % os.getpid(), "tier": "internal",
                   "argv": ["/no/such/program"]})
    t.ok(r["status"] == "nonzero_exit" and r.get("exit_code") == 127 and
         b"cannot execute /no/such/program" in r.get("stderr", b""),
         "a job's own program that does not exist: exit 127 (airlock-exec runs it)", r)
    r = c.run_job({"v": 1, "id": "c-sh-%d" % os.getpid(), "tier": "internal", "runtime": "sh",
                   "code": b"echo \"sh $#: $1\"; exit 3", "argv": ["one"]})
    t.ok(r["status"] == "nonzero_exit" and r.get("exit_code") == 3 and
         r.get("stdout") == b"sh 1: one\n", "an sh job: its script, its arguments, its exit code",
         r)
    # the slot's warm container (backends/container/warm.c) is its next
    # job's, not a job's leftover (altest.warm_containers says which is)
    left = leftovers(UID, WID, os.path.join(c.dir, "state"))
    t.ok(not left, "nothing left behind (processes, cgroups, bundles)", left)

    # A worker killed with SIGKILL: its container's keeper (the shim) has
    # it as its parent-death signal and removes the container, whose
    # processes die with it; the next start with the same id sweeps the
    # bundle left in the state directory.
    CW, CUID = "ctr-crash", 400000 + 1000
    runtime_root = os.path.join(c.dir, "state", CW, "runtime")

    def containers():
        p = subprocess.run(["runc", "--root", runtime_root, "list", "-q"], capture_output=True,
                           text=True)
        return p.stdout.split()

    c.signal(WID, signal.SIGTERM)  # the crash worker must be the one that takes the job
    c.wait_exit(WID)
    c.worker(CW, slots=1, tiers="internal", extra=("--userns-base", "400000"))
    import msgpack
    job = {"v": 1, "id": "c-crash-%d" % os.getpid(), "tier": "internal", "runtime": "python",
           "code": "import time\nopen('alive', 'w').write('x')\ntime.sleep(60)"}
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=msgpack.packb(job, use_bin_type=True), capture_output=True)
    c.wait_for(lambda: "event=job_start job=" + job["id"] in c.log(CW), timeout=20)
    c.wait_for(lambda: live_pids_of({CUID}), timeout=10)
    running = (containers(), live_pids_of({CUID}))
    c.signal(CW, signal.SIGKILL)
    c.wait_exit(CW)
    time.sleep(2)
    before = (containers(), live_pids_of({CUID}))
    t.ok(len(running[0]) == 1 and running[1] and before == ([], []),
         "a SIGKILLed worker's running container ends with it: 2 s later no process of "
         "the job and no container in the runtime", (running, before))
    c.procs.pop(CW)
    c.workers.remove(CW)
    c.worker(CW, slots=1, tiers="internal", extra=("--userns-base", "400000"))
    c.wait_for(lambda: c.log(CW).count("event=worker_start") == 2, timeout=20)
    c.wait_for(lambda: not live_pids_of({CUID}), timeout=10)
    after = (containers(), live_pids_of({CUID}),
             os.listdir(os.path.join(c.dir, "state", CW, "container")))
    t.ok(after == ([], [], []) or (after[0] == [] and not after[1] and
                                   all("c-crash" not in e for e in after[2])),
         "the restarted worker swept the container, its processes and its bundle", after)
except BaseException:
    sys.stderr.write(c.log(WID)[-4000:])
    raise
finally:
    c.close()
    shutil.rmtree(BIND_DIR, ignore_errors=True)
sys.exit(t.done())
