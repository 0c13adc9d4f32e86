#!/usr/bin/python3
"""The microVM backend through the real queue (scheduler + worker + Redis),
under QEMU (TCG here, KVM where it works): a job in its own kernel with no
network device and no host file, input and output files, the image hash in
the result, a rejected network request, a missing image, guest faults
(panic, hang before and after the job went in, a flood and garbage on the
result channel, a VMM crash, a grading verdict for a test the job does not
have) each ending as sandbox_error within the job's
timeout, cancel, the warm pool (warm boot, refill, recycling of idle VMs)
and nothing of any VM left afterwards.

Faults a real guest cannot produce on demand come from FAKE guest images
built here: the real kernel with a tiny initramfs whose /init is a busybox
script that misbehaves in one way (they are named fake-*)."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import msgpack

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import WORKER, Tap, job_cgroups, live_pids_of, run_one, skip_unless  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402

t = Tap()
IMAGE = os.environ.get("AIRLOCK_MICROVM_IMAGE", "/var/lib/airlock/images/microvm")
QEMU = "/usr/bin/qemu-system-x86_64"
skip_unless(os.geteuid() == 0 and os.access(QEMU, os.X_OK), "needs root and qemu-system-x86")
if not os.path.exists(os.path.join(IMAGE, "initramfs.lz4")):
    t.ok(False, "the microvm image exists (make microvm-image; tests/run.sh builds it)", IMAGE)
    sys.exit(t.done())
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
for name in ("python", "toolchain", "node"):  # the catalogue images the tiers below offer
    if not os.path.exists(os.path.join(IMAGES, name + ".ext4")):
        b = subprocess.run([os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "images",
                                         "build.sh"), "--out", IMAGES, name],
                           capture_output=True, text=True)
        if b.returncode != 0:
            sys.stderr.write(b.stderr)
HASH = {}
for name in ("python", "toolchain", "node"):
    with open(os.path.join(IMAGES, name, ".airlock-image")) as f:
        HASH[name] = f.read().strip()
with open(os.path.join(IMAGE, "kernel-package")) as f:
    KREL = f.read().strip().replace("linux-image-", "")

UID_BASE, POOL_UID_BASE = 66000, 67000
VM_UIDS = set(range(UID_BASE + 256, UID_BASE + 256 + 512))
POOL_VM_UIDS = set(range(POOL_UID_BASE + 256, POOL_UID_BASE + 256 + 512))
# the worker's boot and silence limit: what a hung fake guest costs, and
# what two cold boots side by side (the heartbeat flood's check) must fit
# in beside the late lane's suites (6 s was missed twice there)
HANG_MS = 10000

# --- the fake guest images (fault injection) ---
FAKE_INIT = r"""#!/bin/sh
B=/bin/busybox
$B mount -t devtmpfs dev /dev
$B mount -t sysfs sys /sys
for m in virtio_ring virtio virtio_mmio virtio_console; do $B insmod /lib/modules/$m.ko; done
while ! $B ls /dev/vport0p* >/dev/null 2>&1; do $B sleep 0.05; done
P=$($B ls /dev/vport0p* | $B head -1)
ready() { $B printf '\000\000\000\010Ragent 1' >$P; $B sleep 0.3; }
case "$($B cat /mode)" in
panic) exit 1 ;;                       # init exits: kernel panic
hang) $B sleep 100000 ;;               # never says ready
silent) ready; $B sleep 100000 ;;      # takes the job, then nothing
flood) ready; { $B printf '\177\377\377\377S'; $B cat /dev/zero; } >$P ;;
garbage) ready; $B printf '\000\000\000\020Sxxxxxxxxxxxxxxx' >$P; $B sleep 100000 ;;
heartbeats) ready; while :; do $B cat /hb; done >$P ;;        # heartbeats without pause
bigframe) ready; { $B printf '\017\000\000\000S'; $B cat /dev/zero; } >$P ;;  # 240 MiB result
dupfiles) ready; $B cat /result.bin >$P; $B sleep 100000 ;;  # a file returned twice
outflood) ready; while :; do $B cat /out.bin; done >$P ;;   # live output past the job's cap
badout) ready; $B printf '\000\000\000\003O\007x' >$P; $B sleep 100000 ;;  # stream 7
forged) ready; $B cat /forged.bin >$P; $B sleep 100000 ;;  # a verdict for a test not asked
warmtwice) ready; $B printf '\000\000\000\001W\000\000\000\001W' >$P; $B sleep 100000 ;;  # "warm" again
esac
"""
FAKES = ("panic", "hang", "silent", "flood", "garbage", "heartbeats", "bigframe", "dupfiles",
         "outflood", "badout", "forged", "warmtwice")
DUP_ID = "mv-dup-%d" % os.getpid()  # the job the fake dupfiles guest answers for
FORGE_ID = "mv-forge-%d" % os.getpid()  # ...and the fake forged guest


def build_fakes(root):
    tree = os.path.join(root, "tree")
    os.makedirs(tree)
    # busybox and the virtio modules, from the real initramfs
    subprocess.run("lz4 -dc %s/initramfs.lz4 | (cd %s && cpio -idm --quiet usr/bin/busybox "
                   "'usr/lib/modules/*')" % (IMAGE, tree), shell=True, check=True)
    for d in ("dev", "sys", "proc"):
        os.makedirs(os.path.join(tree, d))
    for link, to in (("bin", "usr/bin"), ("lib", "usr/lib")):
        os.symlink(to, os.path.join(tree, link))
    os.symlink("busybox", os.path.join(tree, "usr/bin/sh"))
    with open(os.path.join(tree, "init"), "w") as f:
        f.write(FAKE_INIT)
    with open(os.path.join(tree, "out.bin"), "wb") as f:  # one live-output frame: 16 KiB of stdout
        f.write((2 + 16384).to_bytes(4, "big") + b"O\1" + b"y" * 16384)
    with open(os.path.join(tree, "hb"), "wb") as f:  # 1 MiB of heartbeat frames
        f.write(b"\0\0\0\1H" * (1 << 18))
    res = {"v": 1, "id": DUP_ID, "attempt": 1, "status": "ok", "exit_code": 0, "stdout": b"",
           "stderr": b"", "files": [{"path": "out.txt", "data": b"a"},
                                    {"path": "out.txt", "data": b"b"}],
           "wall_ms": 1, "cpu_ms": 1, "peak_memory_bytes": 1, "backend": "microvm", "worker": "w"}
    body = b"S" + msgpack.packb(res, use_bin_type=True)
    with open(os.path.join(tree, "result.bin"), "wb") as f:
        f.write(len(body).to_bytes(4, "big") + body)
    # a grading job's result with an "accepted" for a test the job does not have
    res = dict(res, id=FORGE_ID, files=[],
               tests=[{"name": "invented", "verdict": "accepted", "exit_code": 0}])
    body = b"S" + msgpack.packb(res, use_bin_type=True)
    with open(os.path.join(tree, "forged.bin"), "wb") as f:
        f.write(len(body).to_bytes(4, "big") + body)
    os.chmod(os.path.join(tree, "init"), 0o755)
    for mode in FAKES:
        d = os.path.join(root, "fake-" + mode)
        os.makedirs(d)
        os.chmod(d, 0o755)
        with open(os.path.join(tree, "mode"), "w") as f:
            f.write(mode)
        subprocess.run("cd %s && find . | cpio -o -H newc -R 0:0 --quiet > %s/initramfs.lz4"
                       % (tree, d), shell=True, check=True)
        os.symlink(os.path.join(IMAGE, "vmlinux"), os.path.join(d, "vmlinux"))


FAKE_DIR = tempfile.mkdtemp(prefix="airlock-fakevm-", dir="/var/tmp")
os.chmod(FAKE_DIR, 0o755)
build_fakes(FAKE_DIR)

SMALL = dict(DEFAULTS, memory_bytes=134217728)
POLICY = policy(
    tier_def("untrusted", "microvm", guest=IMAGE, images=["python", "toolchain", "node"],
             defaults=SMALL),
    tier_def("pooled", "microvm", guest=IMAGE, image="python", pool=1, pool_max_idle_ms=4000,
             defaults=SMALL),
    tier_def("imagepool", "microvm", guest=IMAGE, images=["python", "node"], pool={"node": 1},
             pool_max_idle_ms=3600000, defaults=dict(SMALL, wall_ms=30000)),
    tier_def("noguest", "microvm", guest="/nonexistent/microvm", image="python"),
    tier_def("notbuilt", "microvm", guest=IMAGE, image="notbuilt"),
    tier_def("ctr-python", "container", image="python", defaults=SMALL),
    tier_def("proc-python", "process", image="python", defaults=SMALL),
    *(tier_def("fake-" + m, "microvm", max_attempts=2 if m == "panic" else 1,
               guest=os.path.join(FAKE_DIR, "fake-" + m), defaults={"wall_ms": 20000})
      for m in FAKES))

SEQ = iter(range(1, 1 << 30))


def job(code, tier="untrusted", **kw):
    j = {"v": 1, "id": "mv-%d-%d" % (os.getpid(), next(SEQ)), "tier": tier, "runtime": "python",
         "code": code}
    j.update(kw)
    return {k: v for k, v in j.items() if v is not None}


def run(c, code, tier="untrusted", **kw):
    r = c.run_job(job(code, tier, **kw))
    for k in ("stdout", "stderr"):
        r[k] = r.get(k, b"").decode(errors="replace")
    return r


def vm_hwm(pid):
    """The worker's peak resident memory so far, bytes."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) << 10
    return 0


def vmm_pids(uids):
    return sorted(int(p) for p in live_pids_of(uids))


def vm_cgroups(wid):
    return [d for subs in job_cgroups(wid).values() for d in subs
            if os.path.basename(d).startswith("vm-")]


def state_files(c, wid):
    found = []
    for dirpath, _, files in os.walk(os.path.join(c.dir, "state", wid)):
        found += [os.path.join(dirpath, f) for f in files]
    return found


# Bad worker settings: a clear refusal, nothing started.
p = subprocess.run([WORKER, "--vm-accel", "fast", "--run-one", "-"], capture_output=True,
                   input=b"", timeout=30)
t.ok(p.returncode == 2 and b"--vm-accel: expected one of kvm|tcg" in p.stderr,
     "--vm-accel other than kvm or tcg is refused", p.stderr)
_state = tempfile.mkdtemp(prefix="airlock-mvm-state-", dir="/var/tmp")
r, p = run_one({"v": 1, "id": "mv-vmm", "tier": "untrusted", "runtime": "python", "code": "print(1)"},
               _state, "mvm-badvmm", 65000, extra=("--backend", "microvm", "--vmm", "firecracker"))
subprocess.run(["rm", "-rf", _state])
t.ok(r is None and b"unknown VMM" in p.stderr and b"firecracker" in p.stderr,
     "an unknown VMM driver: the backend is unavailable and says which drivers exist", p.stderr)

WID, PWID = "mvm-test", "mvm-pool"
c = Cluster(policy=POLICY)
try:
    c.scheduler()
    tiers = ",".join(["untrusted", "noguest", "notbuilt"] + ["fake-" + m for m in FAKES])
    c.worker(WID, uid_base=UID_BASE, slots=2, tiers=tiers,
             extra=("--vm-hang-ms", str(HANG_MS), "--images", IMAGES))

    r = run(c, "print(6*7)")
    info = r.get("info", {})
    t.ok(r["status"] == "ok" and r["stdout"] == "42\n" and info.get("image") == HASH["python"] and
         info.get("vmm") == "qemu" and info.get("boot") == "cold" and
         info.get("accel") in ("tcg", "kvm"),
         "print(6*7) in a cold-booted microVM on the tier's default image (python); the result "
         "names the image's hash and the VMM", r)

    accel = [l for l in c.log(WID).splitlines() if "event=microvm_accel" in l]
    tcg = info.get("accel") == "tcg"
    t.ok(len(accel) == 1 and ("accel=tcg why=" in accel[0]) == tcg and
         ("accel=kvm" in accel[0]) == (not tcg),
         "the worker says once at start which accelerator it uses, and why not KVM", accel)
    st = c.cli("stats")
    t.ok(('"accel":{"microvm":"%s"}' % info.get("accel")) in st.stdout.decode(),
         "airlock stats shows the worker's accelerator", st.stdout[-600:].decode())
    r = run(c, "import time\ntime.sleep(60)", limits={"wall_ms": 3000})
    t.ok(r["status"] == "timeout" and "wall-clock limit of 3000 ms" in (r.get("error") or "") and
         ("(accel tcg: no KVM on this worker" in r["error"]) == tcg,
         "a job past its wall-clock limit: timeout, and under emulation the error says the code "
         "ran under TCG", r.get("error"))

    canary = os.path.join(c.dir, "host-canary")
    with open(canary, "w") as f:
        f.write("secret")
    os.chmod(canary, 0o644)
    r = run(c, "import os, sys\n"
               "print(os.getuid(), os.uname().release)\n"
               "print(sorted(os.listdir('/sys/class/net')), sorted(os.listdir('/sys/block')),\n"
               "      open('/sys/block/vda/ro').read().strip())\n"
               "for p in [sys.argv[1], '/etc/airlock', '/var/lib/airlock']:\n"
               "    print(p, os.path.exists(p))\n", argv=[canary])
    lines = r["stdout"].splitlines()
    t.ok(r["status"] == "ok" and lines[:2] == ["1000 " + KREL, "['lo'] ['vda'] 1"] and
         KREL != os.uname().release and all(l.endswith("False") for l in lines[2:]) and
         len(lines) == 5,
         "the job runs as uid 1000 on the guest's own kernel, with no network device, one "
         "read-only disk (its image) and no host file (a world-readable canary is absent)", r)

    r = run(c, "import sys\ndata = open('in.txt').read()\n"
               "open('out.txt', 'w').write(data.upper() + sys.stdin.read())\nprint('done')\n"
               "for n in ('b.png', 'a.png', '.h.png'): open(n, 'w').write(n)\n",
            files=[{"path": "in.txt", "data": b"hello"}], stdin=b" and stdin",
            collect=["out.txt", "missing.txt", "*.png"])
    files = [(f["path"], f["data"]) for f in r.get("files", [])]
    t.ok(r["status"] == "ok" and files == [("out.txt", b"HELLO and stdin"), ("a.png", b"a.png"),
                                           ("b.png", b"b.png")],
         "input files and stdin go in; collected output files come back (a glob's by name)", r)

    r = run(c, "print(1)", network="egress")
    t.ok(r["status"] == "rejected" and "does not allow egress" in (r.get("error") or ""),
         "a job asking for network is rejected (a microvm tier cannot grant egress: the backend "
         "has no network device)", r)

    r = run(c, "print(1)", tier="noguest")
    t.ok(r["status"] == "sandbox_error" and "make microvm-image" in (r.get("error") or ""),
         "a tier whose guest is not built: sandbox_error telling how to build it", r)
    r = run(c, "print(1)", tier="notbuilt")
    t.ok(r["status"] == "sandbox_error" and "image notbuilt is not built" in (r.get("error") or "")
         and "deploy/images/build.sh" in r["error"],
         "an image the catalogue lacks: sandbox_error naming the command that builds it", r)
    r = run(c, "print(1)", image="cobol")
    t.ok(r["status"] == "rejected" and
         "allowed: python, toolchain, node" in (r.get("error") or ""),
         "an image the tier does not offer: rejected, naming the ones it does", r)

    # --- real workloads in the catalogue images ---
    r = run(c, "import ctypes, numpy, pandas\n"
               "print(ctypes.sizeof(ctypes.c_long), numpy.arange(10).sum(),\n"
               "      pandas.DataFrame({'a': [1, 2, 3]})['a'].sum())",
            limits={"wall_ms": 60000, "memory_bytes": 256 << 20})
    t.ok(r["status"] == "ok" and r["stdout"] == "8 45 6\n",
         "the python image: ctypes, numpy and pandas work in the microVM", r)
    cpp = ("#include <iostream>\n#include <vector>\n#include <numeric>\n"
           "int main(){std::vector<int> v(100); std::iota(v.begin(), v.end(), 1);"
           " std::cout << std::accumulate(v.begin(), v.end(), 0) << std::endl;}\n")
    r = c.run_job(job("g++ -O1 -o sum sum.cpp && ./sum", image="toolchain", runtime="sh",
                      files=[{"path": "sum.cpp", "data": cpp.encode()}],
                      limits={"wall_ms": 120000, "memory_bytes": 512 << 20}), timeout=180)
    t.ok(r["status"] == "ok" and r["stdout"] == b"5050\n" and
         r["info"].get("image") == HASH["toolchain"],
         "the toolchain image: a C++ program compiles with g++ and runs in the microVM", r)
    r = c.run_job(job(None, image="node", runtime=None,
                      argv=["node", "-e", "console.log([1, 2, 3].map(x => x * 2).join(' '))"],
                      limits={"wall_ms": 60000, "memory_bytes": 256 << 20}))
    t.ok(r["status"] == "ok" and r["stdout"] == b"2 4 6\n" and r["info"].get("image") == HASH["node"],
         "the node image: node runs a script in the microVM", r)
    # The same program, the same image, three boundaries: the same output.
    # (user namespaces of its own: this suite runs in a lane beside test_ci's containers)
    c.worker("mvm-ctr", uid_base=UID_BASE + 1000, slots=1, tiers="ctr-python,proc-python",
             extra=("--images", IMAGES, "--userns-base", "1000000"))
    same = ("import sys, numpy, platform\n"
            "print(sys.version.split()[0], numpy.__version__, numpy.arange(12).reshape(3, 4).sum(0),"
            " platform.libc_ver(), open('/etc/debian_version').read().strip())")
    rv, rc_ = run(c, same, limits={"wall_ms": 60000}), run(c, same, tier="ctr-python")
    rp = run(c, same, tier="proc-python")
    t.ok(rv["status"] == rc_["status"] == rp["status"] == "ok" and
         rv["stdout"] == rc_["stdout"] == rp["stdout"] and
         rv["info"].get("image") == rc_["info"].get("image") == rp["info"].get("image") ==
         HASH["python"],
         "the same program on the python image: the same stdout on the microVM, container and "
         "process tiers", (rv, rc_, rp))
    # The same environment on each: cwd and HOME /work, the code named
    # <run_python> in its tracebacks (with its lines), exit 1 for an
    # uncaught exception, a SyntaxError as python3 prints it
    env = ("import os, sys\n"
           "print(os.getcwd(), os.environ['HOME'], sys.argv, os.listdir('.'), os.cpu_count())\n"
           "def f():\n"
           "    return {}['missing']\n"
           "f()\n")
    envs = [run(c, env, argv=["a1"], limits={"wall_ms": 60000}),
            run(c, env, tier="ctr-python", argv=["a1"]), run(c, env, tier="proc-python", argv=["a1"])]
    want_err = ('Traceback (most recent call last):\n'
                '  File "<run_python>", line 5, in <module>\n'
                '    f()\n'
                '  File "<run_python>", line 4, in f\n'
                "    return {}['missing']\n"
                "           ~~^^^^^^^^^^^\n"
                "KeyError: 'missing'\n")
    syn = [run(c, "x = (\n", limits={"wall_ms": 60000}), run(c, "x = (\n", tier="ctr-python"),
           run(c, "x = (\n", tier="proc-python")]
    t.ok(all(r["status"] == "nonzero_exit" and r["exit_code"] == 1 and
             r["stdout"] == "/work /work ['<run_python>', 'a1'] [] 1\n" and
             r["stderr"] == want_err for r in envs) and
         all(r["exit_code"] == 1 and r["stderr"].startswith('  File "<run_python>", line 1\n')
             and "SyntaxError: '(' was never closed" in r["stderr"] for r in syn),
         "the same environment on the microVM, container and process tiers: cwd and HOME "
         "/work, os.cpu_count() 1 (the tiers' CPU limit, 1000 millis), argv[0] <run_python>, a traceback naming <run_python> with its lines and "
         "nothing of the launcher, exit 1; a SyntaxError as python3 prints it",
         [(r["exit_code"], r["stdout"], r["stderr"]) for r in envs + syn])
    before = os.stat(os.path.join(IMAGES, "python.ext4"))
    r = run(c, "import os\n"
               "for p in ['/usr/lib/x', '/etc/passwd', '/x']:\n"
               "    try: open(p, 'a').write('x'); print(p, 'WRITTEN')\n"
               "    except OSError as e: print(p, e.errno)\n"
               "try:\n"
               "    with open('/work/fill', 'wb') as f:\n"
               "        while True: f.write(b'x' * (1 << 20)); f.flush()\n"
               "except OSError as e: print('fill', e.errno)\n",
            limits={"disk_bytes": 8 << 20, "wall_ms": 30000})
    after = os.stat(os.path.join(IMAGES, "python.ext4"))
    t.ok(r["stdout"].splitlines()[:3] == ["/usr/lib/x 30", "/etc/passwd 30", "/x 30"] and
         r["status"] == "output_limit" and
         (before.st_size, before.st_mtime) == (after.st_size, after.st_mtime) and
         not state_files(c, WID),
         "the image is read-only to the job (EROFS); filling /work hits the job's disk limit "
         "(output_limit) and nothing reaches the host (the image file and the state dir "
         "unchanged)", r)

    # --- guest faults (fake images) ---
    for mode, want, limit in (
            ("panic", "stopped before it sent a result", 20),
            ("hang", "did not boot within %d ms" % HANG_MS, HANG_MS / 1000 + 6),
            ("silent", "stopped answering", HANG_MS / 1000 + 6),
            ("flood", "over the cap", 10),
            ("garbage", "invalid result", 10),
            ("bigframe", "over the cap", 10),
            ("dupfiles", "returned a file twice", 10),
            ("outflood", "more stdout than the job's cap", 10),
            ("badout", "malformed output frame", 10),
            ("forged", "is not for the job's test \"real\"", 10),
            ("warmtwice", "unexpected frame", 10)):
        t0 = time.time()
        hwm0 = vm_hwm(c.procs[WID].pid)
        if mode == "dupfiles":
            r = c.run_job(job("print(1)", "fake-" + mode, collect=["out.txt", "other.txt"]) |
                          {"id": DUP_ID})
        elif mode == "forged":
            r = c.run_job(job("print(1)", "fake-" + mode, tests=[{"name": "real"}]) |
                          {"id": FORGE_ID})
        else:
            # bigframe: a job whose caps (4 files, 64 MiB disk) an old bound let a 240 MiB frame in
            r = run(c, "print(1)", tier="fake-" + mode, collect=["a", "b", "c", "d"],
                    limits={"disk_bytes": 64 << 20})
        grew = vm_hwm(c.procs[WID].pid) - hwm0
        took = time.time() - t0
        retried = mode != "panic" or r.get("attempt") == 2
        t.ok(r["status"] == "sandbox_error" and want in (r.get("error") or "") and
             took < limit and retried and (mode != "bigframe" or grew < (16 << 20)),
             "fake guest that %s: sandbox_error in %.1f s (job timeout 20 s)%s" % (
                 {"panic": "panics", "hang": "never boots", "silent": "hangs with the job",
                  "flood": "floods the result channel", "garbage": "sends garbage",
                  "bigframe": "sends a 240 MiB result frame (worker peak RSS +%d KiB)" % (grew >> 10),
                  "dupfiles": "returns a collected file twice",
                  "outflood": "sends live output past the job's stdout cap",
                  "badout": "sends a live-output frame for stream 7",
                  "forged": "answers a grading job with a verdict for a test it does not "
                            "have",
                  "warmtwice": "says twice that its interpreter is warm"}[mode], took,
                 ", retried by the queue" if mode == "panic" else ""), r)
    # 12 rogue guests in a row, each a sandbox_error: what a job does once its sandbox runs
    # never pauses the backend for others (only failures to make or start a sandbox do)
    t.ok("backend_paused" not in c.log(WID),
         "the rogue guests' sandbox_errors did not pause the microvm backend on this worker",
         [ln for ln in c.log(WID).splitlines() if "paused" in ln][:3])
    # A guest that floods heartbeats: refused within its wall limit, while a job beside it on
    # the same worker finishes on time and the worker keeps its lease.
    flood = job("print(1)", "fake-heartbeats", limits={"wall_ms": 15000})
    other = job("import time; time.sleep(2); print('beside')")
    t0 = time.time()
    for j in (flood, other):
        subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                       input=msgpack.packb(j, use_bin_type=True), capture_output=True)
    got = {}
    while len(got) < 2 and time.time() - t0 < 60:
        for j in (flood, other):
            if j["id"] not in got and c.rcli("EXISTS", "al:res:" + j["id"]).strip() == "1":
                got[j["id"]] = (time.time() - t0, msgpack.unpackb(
                    c.rcli("GET", "al:res:" + j["id"], raw=True), raw=False))
        time.sleep(0.1)
    (tf, rf), (to, ro) = got.get(flood["id"], (99, {})), got.get(other["id"], (99, {}))
    t.ok(rf.get("status") == "sandbox_error" and "floods its channel" in (rf.get("error") or "") and
         tf < 15 and ro.get("status") == "ok" and ro.get("stdout") == b"beside\n" and to < 20 and
         ro.get("attempt") == 1 and "worker_lost" not in c.log(WID),
         "a guest flooding heartbeats: sandbox_error in %.1f s (wall limit 15 s); the job beside it "
         "on the same worker ends ok in %.1f s, first attempt" % (tf, to), (rf, ro))

    # Eight large collected files (24 MiB each, cut to the 1 MiB collect cap in the guest):
    # all arrive (the agent powers off only after the host acknowledged the result).
    r = run(c, "for i in range(8):\n    open('f%d' % i, 'wb').write(b'x' * (24 << 20))\n",
            collect=["f%d" % i for i in range(8)],
            limits={"disk_bytes": 256 << 20, "memory_bytes": 512 << 20, "wall_ms": 60000})
    files = {f["path"]: f for f in r.get("files", [])}
    t.ok(r["status"] == "ok" and len(files) == 8 and
         all(len(f["data"]) == 1 << 20 and f.get("truncated") for f in files.values()),
         "eight 24 MiB collected files all arrive, each cut to the 1 MiB collect cap",
         {k: v for k, v in r.items() if k != "files"})
    r = run(c, "print('still serving')")
    t.ok(r["status"] == "ok" and r["stdout"] == "still serving\n" and
         c.procs[WID].poll() is None, "the worker survived every fault and serves the next job", r)

    # A VMM crash in the middle of a job.
    j = job("import time\ntime.sleep(60)")
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=msgpack.packb(j, use_bin_type=True), capture_output=True)
    c.wait_for(lambda: vmm_pids(VM_UIDS), timeout=20)
    time.sleep(3)  # booted, the job in
    pids = vmm_pids(VM_UIDS)
    # The VMM's jail: its own mount, PID and network namespaces, a root with nothing of the
    # host's files but /usr and the loader cache, no Redis socket, no canary.
    jail = {}
    for p in pids:
        root = "/proc/%d/root" % p
        jail = {"ns": [k for k in ("mnt", "pid", "net", "ipc", "uts", "cgroup")
                       if os.readlink("/proc/%d/ns/%s" % (p, k)) == os.readlink("/proc/self/ns/" + k)],
                "root": sorted(os.listdir(root)), "etc": sorted(os.listdir(root + "/etc")),
                "vm": sorted(os.listdir(root + "/vm")),
                "seen": [x for x in (canary, c.sock, c.policy, c.dir) if os.path.exists(root + x)]}
    t.ok(len(pids) == 1 and jail.get("ns") == [] and
         set(jail["root"]) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc",
                                "sbin", "usr", "vm"} and
         jail["etc"] == ["ld.so.cache"] and jail["vm"] == ["disk", "initrd", "vmlinux", "vmm"] and
         jail["seen"] == [],
         "the VMM runs jailed: own mount, PID, network, IPC, UTS and cgroup namespaces; its root "
         "holds /usr, the loader cache and its four files (the image read-only), no host file or "
         "socket", jail)
    # The jailed VMM is PID 1 of its namespace: from outside only SIGKILL reaches it (a real
    # crash, a fault, is forced on it and ends it too); the worker did not send this one.
    for p in pids:
        os.kill(p, signal.SIGKILL)
    c.wait_done(j["id"], 30)
    r = msgpack.unpackb(c.rcli("GET", "al:res:" + j["id"], raw=True), raw=False)
    t.ok(len(pids) == 1 and r["status"] == "sandbox_error" and
         "VMM killed by signal 9" in (r.get("error") or ""),
         "a VMM that dies mid-job: sandbox_error naming the signal", r)

    # Cancel a running job: its VM goes, nothing left.
    j = job("import time\ntime.sleep(60)")
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=msgpack.packb(j, use_bin_type=True), capture_output=True)
    c.wait_for(lambda: vmm_pids(VM_UIDS), timeout=20)
    time.sleep(2)
    p = c.cli("cancel", j["id"])
    c.wait_done(j["id"], 30)
    r = msgpack.unpackb(c.rcli("GET", "al:res:" + j["id"], raw=True), raw=False)
    left = (vmm_pids(VM_UIDS), vm_cgroups(WID), state_files(c, WID))
    t.ok(p.returncode == 0 and r["status"] == "cancelled" and left == ([], [], []),
         "cancel: the job ends cancelled; no VMM process, cgroup or file of its VM is left", (r, left))
    left = (vmm_pids(VM_UIDS), vm_cgroups(WID), state_files(c, WID))
    t.ok(left == ([], [], []), "after every job above: no VMM process, VM cgroup or file left", left)
    c.signal(WID, signal.SIGTERM)
    c.wait_exit(WID)

    # --- the warm pool ---
    c.worker(PWID, uid_base=POOL_UID_BASE, slots=1, tiers="pooled")
    t.ok(c.wait_for(lambda: len(vmm_pids(POOL_VM_UIDS)) == 1, timeout=20),
         "the pool boots one VM ahead of any job", vmm_pids(POOL_VM_UIDS))
    time.sleep(2.5)  # let it finish booting
    first = vmm_pids(POOL_VM_UIDS)
    r = run(c, "print(6*7)", tier="pooled")
    t.ok(r["status"] == "ok" and r["stdout"] == "42\n" and r["info"].get("boot") == "warm",
         "a job of the pooled tier takes the pre-booted VM (boot: warm)", r)
    t.ok(c.wait_for(lambda: len(vmm_pids(POOL_VM_UIDS)) == 1 and
                    vmm_pids(POOL_VM_UIDS) != first, timeout=10),
         "the used VM is gone and the pool refilled with a fresh one", (first, vmm_pids(POOL_VM_UIDS)))
    r = run(c, "print(len(open('/proc/self/cgroup').read()) > 0)", tier="pooled",
            limits={"memory_bytes": 256 << 20})
    t.ok(r["status"] == "ok" and r["info"].get("boot") == "cold",
         "a job that needs more memory than the pool's VMs boots its own", r)
    c.wait_for(lambda: len(vmm_pids(POOL_VM_UIDS)) == 1, timeout=10)
    before = vmm_pids(POOL_VM_UIDS)
    t.ok(c.wait_for(lambda: vmm_pids(POOL_VM_UIDS) and not set(vmm_pids(POOL_VM_UIDS)) & set(before),
                    timeout=15),
         "a pool VM idle longer than pool_max_idle_ms (4 s) is recycled", (before, vmm_pids(POOL_VM_UIDS)))
    c.signal(PWID, signal.SIGTERM)
    c.wait_exit(PWID)
    left = (vmm_pids(POOL_VM_UIDS), vm_cgroups(PWID), state_files(c, PWID))
    t.ok(left == ([], [], []), "a worker that stops takes its pool's VMs with it", left)

    # A pool of one image of several: only a job of that image gets its VM.
    IPW = "mvm-ipool"
    c.worker(IPW, uid_base=POOL_UID_BASE, slots=1, tiers="imagepool", extra=("--images", IMAGES))
    booted = c.wait_for(lambda: len(vmm_pids(POOL_VM_UIDS)) == 1, timeout=20)
    time.sleep(3)
    rp = run(c, "print('py')", tier="imagepool")
    rn = c.run_job(job(None, "imagepool", image="node", runtime=None,
                       argv=["node", "-e", "console.log('js')"]))
    t.ok(booted and rp["status"] == "ok" and rp["info"].get("boot") == "cold" and
         rn["status"] == "ok" and rn["stdout"] == b"js\n" and rn["info"].get("boot") == "warm" and
         rn["info"].get("image") == HASH["node"],
         "pool: {node: 1}: the pool VM boots the node image; a node job takes it (warm), a python "
         "job of the same tier boots its own (cold)", (rp.get("info"), rn.get("info")))
    c.signal(IPW, signal.SIGTERM)
    c.wait_exit(IPW)

    # A worker killed with SIGKILL mid-job: its VMM dies with it (parent-death
    # signal); the restart sweeps the VM's cgroup.
    CW = "mvm-crash"
    c.worker(CW, uid_base=UID_BASE, slots=1, tiers="untrusted")
    j = job("import time\ntime.sleep(60)")
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=msgpack.packb(j, use_bin_type=True), capture_output=True)
    c.wait_for(lambda: vmm_pids(VM_UIDS), timeout=20)
    had = (vmm_pids(VM_UIDS), vm_cgroups(CW))
    c.signal(CW, signal.SIGKILL)
    c.wait_exit(CW)
    gone = c.wait_for(lambda: not vmm_pids(VM_UIDS), timeout=10)
    c.procs.pop(CW)
    c.workers.remove(CW)
    c.worker(CW, uid_base=UID_BASE, slots=1, tiers="untrusted")
    c.wait_for(lambda: c.log(CW).count("event=worker_start") == 2, timeout=20)
    t.ok(len(had[0]) == 1 and had[1] and gone and
         c.wait_for(lambda: not vm_cgroups(CW), timeout=10),
         "a SIGKILLed worker's VMM dies with it; the restart sweeps its cgroups", (had, vm_cgroups(CW)))
except BaseException:
    for w in (WID, PWID):
        try:
            sys.stderr.write(c.log(w)[-3000:])
        except OSError:
            pass
    raise
finally:
    c.close()
    subprocess.run(["rm", "-rf", FAKE_DIR])
sys.exit(t.done())
