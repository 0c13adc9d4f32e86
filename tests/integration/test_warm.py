#!/usr/bin/python3
"""The warm interpreter of warm-pool microVMs (backends/microvm/warm.c),
through the real queue (redis-server, scheduler, worker) under QEMU: a pool
VM of the datascience image starts python3 with numpy, pandas and
matplotlib imported before its job comes; a python job then runs in it.

What a job sees there is what it sees in a cold VM (one probe program run
both ways: work directory, files, environment, argv, stdin, descriptors,
ids, capabilities, rlimits, mounts, globals, sys.path, its traceback and
exit code, a chart and a file left open collected); its limits are its own
(the start-up's CPU not counted: a CPU-bound loop is stopped at its own
limit, memory over the limit is memory_limit); and a job the interpreter
does not fit runs cold, saying why (a start-up variable set, memory limits
below what the interpreter holds, a shell job)."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, skip_unless  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402

t = Tap()
GUEST = os.environ.get("AIRLOCK_MICROVM_IMAGE", "/var/lib/airlock/images/microvm")
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
skip_unless(os.geteuid() == 0 and os.access("/usr/bin/qemu-system-x86_64", os.X_OK),
            "needs root and qemu-system-x86")
for need in (os.path.join(GUEST, "initramfs.lz4"), os.path.join(IMAGES, "datascience.ext4")):
    if not os.path.exists(need):
        t.ok(False, "the microvm guest and the datascience image are built (tests/run.sh)", need)
        sys.exit(t.done())

# CPU time is the guest's own count, which under TCG on a loaded host takes
# in what the host spent elsewhere (the probe's cold start, matplotlib's
# font cache included: 22 s here alone, past 60 s once beside the late
# suites): limits wide enough for that, the same both ways
D = dict(DEFAULTS, memory_bytes=512 << 20, pids=64, wall_ms=240000, cpu_ms=180000,
         disk_bytes=96 << 20)
POLICY = policy(
    tier_def("warm", "microvm", guest=GUEST, image="datascience", pool=2,
             pool_max_idle_ms=3600000, defaults=D),
    tier_def("cold", "microvm", guest=GUEST, image="datascience", defaults=D))
SEQ = iter(range(1, 1 << 30))

# What a program can see of its sandbox, as JSON; then a chart saved, a file
# left open (python3 flushes it at exit), an atexit handler and an uncaught
# exception.
PROBE = r'''
import json, os, resource, sys, threading
threads, stop = [], threading.Event()
try:
    while len(threads) < 1000:
        threads.append(threading.Thread(target=stop.wait))
        threads[-1].start()
except RuntimeError:
    threads.pop()
stop.set()
for th in threads:
    th.join()
threads = len(threads)
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
v = os.statvfs("/work")
out = {
    "cwd": os.getcwd(), "work": sorted(os.listdir(".")), "tmp": sorted(os.listdir("/tmp")),
    "shm": sorted(os.listdir("/dev/shm")), "env": dict(os.environ), "argv": sys.argv,
    "ids": [os.getuid(), os.getgid(), os.getgroups()],
    "fds": sorted(os.listdir("/proc/self/fd")),
    "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in
                ("RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_MEMLOCK")},
    "status": {k: st[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
                                          "NoNewPrivs", "Seccomp")},
    "globals": sorted(globals()), "path": sys.path, "name": __name__,
    "cgroup": open("/proc/self/cgroup").read(),
    "mounts": sorted(l.split()[4] for l in open("/proc/self/mountinfo")),
    "work_bytes": v.f_blocks * v.f_frsize, "stdin": sys.stdin.read(),
    "input": open("in.txt").read(), "cpus": os.cpu_count(),
    "procs": len([p for p in os.listdir("/proc") if p.isdigit()]), "threads": threads,
}
print(json.dumps(out, sort_keys=True))
print("CPU", resource.getrlimit(resource.RLIMIT_CPU)[0])
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.savefig("chart.png")
left_open = open("open.txt", "w")
left_open.write("flushed at exit")
import atexit
atexit.register(lambda: print("atexit ran"))
raise ValueError("the probe's end")
'''

RAISE_LINE = PROBE.split("\n").index('raise ValueError("the probe\'s end")') + 1


def job(code, tier, **kw):
    j = {"v": 1, "id": "wm-%d-%d" % (os.getpid(), next(SEQ)), "tier": tier, "runtime": "python",
         "code": code}
    j.update(kw)
    return j


def warm_vms(c):
    return c.log(WID).count("event=vm_warm")


def run_warm(c, code, need=1, **kw):
    """A job on the warm tier once `need` more pool VMs said their
    interpreter is warm than had been used."""
    global used
    used += 1
    c.wait_for(lambda: warm_vms(c) >= used + need - 1, timeout=180, step=0.5)
    t0 = time.monotonic()
    r = c.run_job(job(code, "warm", **kw), timeout=300)
    r["ms"] = (time.monotonic() - t0) * 1000
    return r


def text(r, k):
    return r.get(k, b"").decode(errors="replace")


WID = "wm-worker"
used = 0
c = Cluster(policy=POLICY)
try:
    c.scheduler()
    c.worker(WID, uid_base=69000, slots=1, tiers="warm,cold", extra=("--images", IMAGES))

    probe = dict(files=[{"path": "in.txt", "data": b"input file\n"}], stdin=b"from stdin\n",
                 argv=["a1", "a 2"], env={"FOO": "bar"}, collect=["*.png", "open.txt"])
    cold = c.run_job(job(PROBE, "cold", **probe), timeout=300)
    warm = run_warm(c, PROBE, **probe)
    cw = [text(r, "stdout").splitlines() for r in (cold, warm)]
    seen = [json.loads(x[0]) if x and x[0].startswith("{") else {} for x in cw]
    t.ok(warm.get("info", {}).get("interpreter") == "warm" and
         "interpreter" not in cold.get("info", {}) and warm["info"].get("boot") == "warm",
         "a python job on the pooled datascience tier runs in the warm interpreter "
         "(info interpreter: warm); a cold VM's job says nothing of one",
         (cold.get("info"), warm.get("info")))
    t.ok(seen[0] and seen[0] == seen[1],
         "the probe sees the same sandbox in the warm interpreter as in a cold VM: cwd, "
         "files, environment, argv, stdin, descriptors, ids, capabilities, rlimits, mounts, "
         "globals, sys.path, /work's size, CPUs, processes, threads it may start",
         {k: (seen[0].get(k), seen[1].get(k)) for k in set(seen[0]) | set(seen[1])
          if seen[0].get(k) != seen[1].get(k)})
    s = seen[1]
    t.ok(s.get("work") == ["in.txt"] and s.get("tmp") == [] and s.get("shm") == [] and
         s.get("fds") == ["0", "1", "2", "3", "4"] and s.get("stdin") == "from stdin\n" and
         s.get("argv") == ["<run_python>", "a1", "a 2"] and s["env"].get("FOO") == "bar" and
         s.get("ids") == [1000, 1000, []] and s["status"]["CapEff"] == "0000000000000000" and
         s["status"]["NoNewPrivs"] == "1" and s["status"]["Seccomp"] == "2" and
         not [g for g in s.get("globals", ["?"]) if "airlock" in g] and
         s.get("work_bytes") == D["disk_bytes"] and s.get("procs") == 1 and
         s.get("threads") == D["pids"] - 1,
         "in the warm interpreter: only the job's files in /work and an empty /tmp and "
         "/dev/shm (what the imports wrote is gone), only its descriptors, its stdin, argv "
         "and variables, uid 1000 without capabilities, seccomp, nothing of the start-up in "
         "__main__, /work "
         "the size of its disk limit, no other process, its pids limit (63 threads more)", s)
    cpu = [int(x[1].split()[1]) if len(x) > 1 and x[1].startswith("CPU ") else -1 for x in cw]
    t.ok(cpu[0] == D["cpu_ms"] // 1000 and cpu[1] >= cpu[0],
         "RLIMIT_CPU: the job's limit in a cold VM; in the warm one the same beyond what the "
         "start-up used (the limit counts a process's whole CPU time)", cpu)
    strip = [[l for l in text(r, "stderr").splitlines()
              if not l.startswith("Matplotlib is building the font cache")] for r in (cold, warm)]
    t.ok(cold["status"] == warm["status"] == "nonzero_exit" and
         cold.get("exit_code") == warm.get("exit_code") == 1 and strip[0] == strip[1] and
         strip[1][-1:] == ["ValueError: the probe's end"] and
         '  File "<run_python>", line %d, in <module>' % RAISE_LINE in strip[1] and
         cw[0][-1:] == cw[1][-1:] == ["atexit ran"],
         "the same traceback (naming <run_python>), exit code 1 and atexit handler as cold "
         "(the cold VM also says it built matplotlib's font cache)", (strip, cw))
    files = [{f["path"]: f["data"] for f in r.get("files", [])} for r in (cold, warm)]
    t.ok(all(f.get("open.txt") == b"flushed at exit" and
             f.get("chart.png", b"").startswith(b"\x89PNG\r\n\x1a\n") for f in files),
         "a chart saved and a file left open come back from both, the file flushed at exit",
         [sorted(f) for f in files])
    print("# the probe's CPU: cold %s ms, warm %s ms" % (cold.get("cpu_ms"), warm.get("cpu_ms")))

    # limits: the job's own, its CPU counted from its start
    spin = "while True:\n    pass\n"
    lim = {"cpu_ms": 1500, "wall_ms": 60000}
    rc, rw = c.run_job(job(spin, "cold", limits=lim)), run_warm(c, spin, limits=lim)
    t.ok(rc["status"] == rw["status"] == "cpu_limit" and
         rw["info"].get("interpreter") == "warm" and 1400 <= rw.get("cpu_ms", 0) < 3500,
         "a CPU-bound loop ends cpu_limit at its own 1500 ms in the warm interpreter as in a "
         "cold VM (the start-up's seconds of CPU are not the job's)",
         (rc["status"], rw["status"], rw.get("cpu_ms"), rw.get("info")))
    hog = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n"
    rc, rw = c.run_job(job(hog, "cold")), run_warm(c, hog)
    t.ok(rc["status"] == rw["status"] == "memory_limit" and
         rw["info"].get("interpreter") == "warm",
         "memory grown past its 512 MiB limit: memory_limit in the warm interpreter as in a "
         "cold VM",
         (rc["status"], rw["status"], rw.get("info"), text(rw, "stderr")[-200:]))

    # what runs cold, and says why; the job itself is served all the same
    r = run_warm(c, "import sys, helper\nprint(helper.X, sys.path[1])\n",
                 env={"PYTHONPATH": "/work/lib"},
                 files=[{"path": "lib/helper.py", "data": b"X = 42\n"}])
    t.ok(r["status"] == "ok" and text(r, "stdout") == "42 /work/lib\n" and
         r["info"].get("interpreter") ==
         "cold (the job's environment differs in PYTHONPATH, read at start-up)",
         "a job setting PYTHONPATH (read as python3 starts) runs cold, with its PYTHONPATH, "
         "and the result says why", (r["status"], text(r, "stdout"), r.get("info")))
    r = run_warm(c, "print('small')", limits={"memory_bytes": 96 << 20})
    t.ok(r["status"] == "ok" and text(r, "stdout") == "small\n" and
         r["info"].get("interpreter", "").startswith("cold (the interpreter holds ") and
         "over half the job's limits (96 MiB, 64)" in r["info"]["interpreter"],
         "a job whose memory limit (96 MiB) is below twice what the warm interpreter holds "
         "runs cold, saying so", (r["status"], r.get("info")))
    r = run_warm(c, "echo shell $0", need=0, runtime="sh")
    t.ok(r["status"] == "ok" and text(r, "stdout").startswith("shell ") and
         r["info"].get("interpreter") == "cold (not a python job (or another launcher))",
         "a shell job in a warm pool VM runs cold, as in any VM", (r["status"], r.get("info")))
    print("# round trips: a warm job %.0f ms, a shell job in a pool VM %.0f ms"
          % (rw["ms"], r["ms"]))
finally:
    c.close()
sys.exit(t.done())
