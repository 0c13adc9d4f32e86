#!/usr/bin/python3
"""The hostile suite: programs that attack the sandbox, run against every
backend available on this machine, each with the verdict it must get and a
check that it stayed contained; then the ones that are about containment
(secrets, host files and sockets, signals, persistence, what the sandbox
shows) again as calls of one session on each backend. Prints a table and
TAP lines; fails on any escape or wrong verdict. Needs root (the process
backend does)."""
import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import leftovers  # noqa: E402
from cluster import Cluster  # noqa: E402

UID_BASE = int(os.environ.get("AIRLOCK_TEST_UID_BASE", "61000"))
# the container backend's user namespaces start here (the worker's default
# is 200000): its jobs' host uids are this suite's alone, so that no other
# suite's container job, running beside it (tests/run.sh), reads as one of
# its leftovers
USERNS_BASE = 300000
SLOT_UID = UID_BASE  # --run-one uses slot 0


class Ctx:
    """Everything the harness plants for the hostile programs to find."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="airlock-hostile-", dir="/var/tmp")
        os.chmod(self.tmp, 0o755)
        self.state = os.path.join(self.tmp, "state")
        self.home = os.path.join(self.tmp, "home")
        os.makedirs(self.home, mode=0o700)
        self.secret = "canary-" + secrets.token_hex(8)
        self.canary_file = os.path.join(self.home, ".ssh_id_canary")
        with open(self.canary_file, "w") as f:
            f.write(self.secret + "-file\n")
        os.chmod(self.canary_file, 0o600)
        # A loopback listener the job must not reach.
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.setblocking(False)
        self.port = self.tcp.getsockname()[1]
        # A world-writable unix socket standing in for Redis's.
        self.sock_path = os.path.join(self.tmp, "redis.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.sock_path)
        os.chmod(self.sock_path, 0o777)
        self.unix.listen(8)
        self.unix.setblocking(False)
        self.leak = "airlock-leak-" + secrets.token_hex(4)
        # A policy where the README puts it, world-readable as operators leave it.
        self.etc_policy = None
        if not os.path.exists("/etc/airlock"):
            os.makedirs("/etc/airlock", mode=0o755)
            self.etc_policy = "/etc/airlock/policy.yaml"
            with open(self.etc_policy, "w") as f:
                f.write("# planted by the hostile suite\nsecret: %s-etc\n" % self.secret)
            os.chmod(self.etc_policy, 0o644)
        self.abstract = "airlock-hostile-" + secrets.token_hex(4)
        self.abs = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abs.bind("\0" + self.abstract)
        self.abs.listen(8)
        self.abs.setblocking(False)
        # "Another job": a process of another slot's uid that must survive.
        self.bystander = subprocess.Popen(
            ["/bin/sleep", "600"], user=UID_BASE + 1, group=UID_BASE + 1,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # A C probe built by the test.
        self.probe = os.path.join(self.tmp, "probe")
        subprocess.run(["gcc", "-O1", "-o", self.probe,
                        os.path.join(os.path.dirname(__file__), "probe.c")], check=True)

    def accepted(self):
        """True if any listener got a connection from a job."""
        got = []
        for s in (self.tcp, self.unix, self.abs):
            r, _, _ = select.select([s], [], [], 0)
            if r:
                c, _ = s.accept()
                c.close()
                got.append(s.getsockname())
        if got:
            print("#   connections from the job: %r" % got)
        return bool(got)

    def close(self):
        if self.etc_policy:
            os.unlink(self.etc_policy)
            os.rmdir("/etc/airlock")
        for d in WORLD_WRITABLE:
            if os.path.exists(os.path.join(d, self.leak)):
                os.unlink(os.path.join(d, self.leak))
        self.bystander.kill()
        self.bystander.wait()
        for s in (self.tcp, self.unix, self.abs):
            s.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def decode_result(r):
    """Bytes to text for the checks (results carry stdout/stderr as bin)."""
    if r is None:
        return {"status": "harness_error", "error": "no result"}
    for k in ("stdout", "stderr"):
        r[k] = r.get(k, b"").decode(errors="replace")
    for f in r.get("files", []):
        f["data"] = f["data"].decode(errors="replace")
    return r


class QueueRunner:
    """Jobs go through the real path: intake -> scheduler -> worker. The
    worker holds the canary secret in its environment, its Redis connection
    (the socket the job must not reach) and the harness's open descriptors."""

    def __init__(self, ctx, tier, backend):
        self.ctx = ctx
        # a world-writable Redis socket: only hiding it keeps jobs out
        image = (MICROVM_IMAGE_KEYS % MICROVM_IMAGE if backend == "microvm"
                 else RUNSC_KEYS if backend == "runsc" else "")
        self.c = Cluster(policy=POLICY.format(tier=tier, secret=ctx.secret, image=image,
                                           backend="container" if backend == "runsc"
                                           else backend),
                         sockperm="777")
        os.chmod(self.c.policy, 0o644)  # as an operator leaves it
        ctx.policy_path = self.c.policy
        ctx.config_path = os.path.join(self.c.dir, "worker.yaml")
        with open(ctx.config_path, "w") as f:
            f.write("webhook-secret: %s-config\n" % ctx.secret)
        os.chmod(ctx.config_path, 0o644)
        # the stand-in Redis socket the job hunts for is the real one here
        ctx.sock_path = self.c.sock
        self.worker_id = "hostile-" + backend
        env = {"PATH": "/usr/bin:/bin", "HOME": ctx.home, "AIRLOCK_SECRET": ctx.secret,
               "AWS_SECRET_ACCESS_KEY": ctx.secret}
        self.c.scheduler()
        self.c.worker(self.worker_id, uid_base=UID_BASE, slots=1, tiers=tier + ",imaged",
                      env=env,
                      extra=["--config", ctx.config_path, "--userns-base", str(USERNS_BASE)])
        self.tier = tier
        self.state = os.path.join(self.c.dir, "state")

    def run(self, job):
        job["tier"] = job.get("tier", self.tier)  # a case's own: "imaged"
        return decode_result(self.c.run_job(job))

    def close(self):
        self.c.close()


POLICY = """\
result_ttl_s: 600
lease_ms: 30000
tiers:
  {tier}:
    backend: {backend}
    max_attempts: 1
    max: {{wall_ms: 60000, memory_bytes: 1073741824, pids: 256, disk_bytes: 1073741824}}
    sessions: {{max_per_tenant: 2, idle_s: 600, max_life_s: 1800}}
    egress: {{allow: ["allowed.invalid:443"]}}
{image}  imaged:
    backend: {backend}
    max_attempts: 1
    images: [python]
{image}  other:
    backend: {backend}
    env: {{OTHER_TIER_TOKEN: "{secret}-policy"}}
{image}"""
# The microVM tiers boot the guest with the catalogue's python image.
MICROVM_IMAGE_KEYS = "    guest: %s\n    image: python\n"
# The runsc tiers: the container backend with gVisor as its runtime.
RUNSC_KEYS = "    oci_runtime: runsc\n"

# What runsc's Sentry serves itself, touching nothing of the host's kernel:
# a user or network namespace of its own, a socket of its own network stack
# (loopback only: --network=none), a chroot inside its own VFS.
SENTRY_SERVED = {"unshare_user", "unshare_net", "socket_inet", "socket_inet6", "socket_netlink",
                 "socket_packet", "chroot"}


# Where the Sentry ends a case otherwise than Linux, contained all the same:
# its kill(-1) kills its caller too (Linux's spares it).
RUNSC_WANT = {"kill(-1) and signal others": "nonzero_exit"}


def probe_refused(r, c):
    """The C probe's kernel surface: every call refused (runc, process,
    microVM's guest); on runsc those the Sentry serves on its own may work."""
    lines = [l.split() for l in r["stdout"].splitlines() if l.strip()]
    served = {l[0] for l in lines if len(l) > 1 and l[1] == "ok"}
    allowed = SENTRY_SERVED if c.backend == "runsc" else set()
    return (len(lines) >= 15 and served <= allowed and
            sum(1 for l in lines if len(l) > 1 and l[1] == "refused") >= 15 - len(served),
            "%d refused%s" % (sum(1 for l in lines if len(l) > 1 and l[1] == "refused"),
                              ", served by the Sentry: " + " ".join(sorted(served))
                              if served else ""))


# Host directories any uid may write to: a job must reach none of them.
WORLD_WRITABLE = [d for d in ("/var/tmp", "/var/lock", "/run/lock", "/var/crash", "/dev/mqueue")
                  if os.path.isdir(d) and os.stat(d).st_mode & 0o002]

# backend -> (tier that the suite's policy routes to it, host uid its jobs run as)
BACKENDS = {"process": ("trusted", UID_BASE), "container": ("internal", USERNS_BASE + 1000)}
# The microVM backend when its image is built (`make microvm-image`): the
# job runs as uid 1000 of the guest; on the host only the VMM runs, as
# uid_base + 256 + n.
MICROVM_IMAGE = os.environ.get("AIRLOCK_MICROVM_IMAGE", "/var/lib/airlock/images/microvm")
IMAGES_DIR = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
if os.path.exists(os.path.join(MICROVM_IMAGE, "initramfs.lz4")) and os.path.exists(
        "/var/lib/airlock/images/python.ext4") and shutil.which(
        "qemu-system-x86_64", path="/usr/bin:/bin"):
    BACKENDS["microvm"] = ("untrusted", UID_BASE + 256)
else:
    print("# microvm not in the suite: no guest at %s (make microvm-image) or no python image "
          "(make images)" % MICROVM_IMAGE)
# gVisor (runsc) where it is installed: the container backend's jobs on the
# Sentry's kernel, uid 1000 of the same user-namespace range
if os.access("/usr/bin/runsc", os.X_OK):
    BACKENDS["runsc"] = ("sandboxed", USERNS_BASE + 1000)
else:
    print("# runsc not in the suite: not installed (deploy/install-deps.sh installs it)")
if os.environ.get("AIRLOCK_HOSTILE_BACKENDS"):  # e.g. "container" while working on one
    BACKENDS = {b: BACKENDS[b] for b in os.environ["AIRLOCK_HOSTILE_BACKENDS"].split(",")}


# Host directories with the host's own contents: a job sees none (a VM's
# guest has its own /var, never the host's listing).
HOST_DIRS = ["/var/tmp", "/var/lib", "/var/log", "/run", "/srv", "/opt", "/home", "/root"]


def host_dirs_unseen(stdout, c):
    try:
        seen = json.loads(stdout)
    except ValueError:
        return False, "no listing: %r" % stdout[:80]
    leaked = []
    for d, got in seen.items():
        try:
            host = sorted(os.listdir(d))
        except OSError:
            host = None
        if isinstance(got, list) and got and got == host:
            leaked.append(d)
    return not leaked, "seen: %s" % (" ".join(leaked) or "nothing of the host")


def py(code, **limits):
    return {"runtime": "python", "code": code, "limits": limits}


def out(r):
    return (r.get("stdout") or "") + (r.get("stderr") or "")


# Each case: name, job fields, expected status, check(result, ctx) -> (ok, note).
CASES = [
    ("cpu burn", lambda c: py("while True: pass", cpu_ms=1000, wall_ms=20000),
     "cpu_limit", lambda r, c: (r["wall_ms"] < 15000, "killed at %d ms" % r["wall_ms"])),
    ("memory bomb", lambda c: py("a = []\nwhile True: a.append(bytearray(1 << 20))",
                                 memory_bytes=64 << 20),
     "memory_limit", lambda r, c: (r["peak_memory_bytes"] <= (64 << 20) + (1 << 20),
                                   "peak %d bytes" % r["peak_memory_bytes"])),
    ("fork bomb (pids 16)", lambda c: py(
        "import os, time\n"
        "t = time.time(); ok = fail = 0\n"
        "main = os.getpid()\n"
        "while time.time() - t < 2:\n"
        "    try:\n"
        "        if os.fork() == 0: continue\n"
        "        ok += 1\n"
        "    except OSError:\n"
        "        fail += 1; time.sleep(0.005)\n"
        "if os.getpid() == main: print('forks', ok, 'refused', fail, flush=True)\n"
        "os._exit(0)\n", pids=16, wall_ms=10000),
     "ok", lambda r, c: ("refused" in r["stdout"] and int(r["stdout"].split()[3]) > 0,
                         r["stdout"].strip())),
    ("disk fill (8 MiB)", lambda c: py(
        "i = 0\nwhile True:\n    open('f%d' % i, 'wb').write(b'x' * (256 << 10)); i += 1\n",
        disk_bytes=8 << 20),
     "output_limit", lambda r, c: ("No space left" in r["stderr"], (r["error"] or "")[:60])),
    ("stdout flood", lambda c: py("import sys\nwhile True: sys.stdout.write('x' * 65536)",
                                  stdout_bytes=65536),
     "output_limit", lambda r, c: (len(r["stdout"]) == 65536 and r["stdout_truncated"],
                                   "kept %d bytes" % len(r["stdout"]))),
    ("stderr flood", lambda c: py("import sys\nwhile True: sys.stderr.write('y' * 65536)",
                                  stderr_bytes=65536),
     "output_limit", lambda r, c: (len(r["stderr"]) == 65536 and r["stderr_truncated"],
                                   "kept %d bytes" % len(r["stderr"]))),
    ("read worker environment", lambda c: py(
        "import os\nprint(dict(os.environ))\n"
        "for p in ['/proc/self/environ', '/proc/1/environ']:\n"
        "    try: print(p, open(p, 'rb').read())\n"
        "    except OSError as e: print(p, 'refused', e)\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit():\n"
        "        try: print(pid, open('/proc/%s/environ' % pid, 'rb').read())\n"
        "        except OSError: pass\n"),
     # the job's own environment, read (runsc's Sentry orders it otherwise)
     "ok", lambda r, c: (c.secret not in out(r) and "'PATH'" in r["stdout"] and
                         any(l.startswith("/proc/self/environ b'") and "PATH=" in l
                             for l in r["stdout"].splitlines()), "no canary in output")),
    ("read host files", lambda c: {
        "runtime": "python", "argv": [c.canary_file, c.state], "code":
        "import os, sys\n"
        "for p in [sys.argv[1], '/etc/shadow', '/root/.ssh/id_rsa', '/root/.bash_history']:\n"
        "    try: print(p, open(p).read())\n"
        "    except OSError as e: print(p, 'refused', e.strerror)\n"
        "for d in [sys.argv[2], '/root', '/home', '/run']:\n"
        "    try: print(d, os.listdir(d))\n"
        "    except OSError as e: print(d, 'refused', e.strerror)\n"},
     "ok", lambda r, c: (c.secret not in out(r) and "/etc/shadow refused" in r["stdout"],
                         "canary and shadow unread")),
    ("inherited descriptors", lambda c: py(
        "import os\n"
        "for fd in sorted(int(x) for x in os.listdir('/proc/self/fd')):\n"
        "    try: print(fd, os.readlink('/proc/self/fd/%d' % fd))\n"
        "    except OSError: pass\n"),
     "ok", lambda r, c: (
         # runsc passes stdio alone in (the Sentry names them host:[N])
         [l.split()[0] for l in r["stdout"].splitlines()] in (["0", "1", "2", "3"],
                                                             ["0", "1", "2", "3", "4"],
                                                             ["0", "1", "2"]) and
         "socket" not in r["stdout"].replace("/proc/self/fd", ""),
         " ".join(l.split()[0] for l in r["stdout"].splitlines()))),
    ("connect to host loopback", lambda c: {
        "runtime": "python", "argv": [str(c.port)], "code":
        "import socket, sys\n"
        "for fam, addr in [(socket.AF_INET, ('127.0.0.1', int(sys.argv[1]))),"
        " (socket.AF_INET6, ('::1', int(sys.argv[1])))]:\n"
        "    try:\n"
        "        s = socket.socket(fam); s.settimeout(2); s.connect(addr); print('CONNECTED', addr)\n"
        "    except OSError as e: print(addr, 'BLOCKED', e)\n"},
     "ok", lambda r, c: ("CONNECTED" not in r["stdout"] and r["stdout"].count("BLOCKED") == 2 and
                         not c.accepted(), "no connection")),
    ("connect to the Redis socket", lambda c: {
        "runtime": "python", "argv": [c.sock_path, c.abstract], "code":
        "import socket, sys\n"
        "for addr in [sys.argv[1], '\\0' + sys.argv[2]]:\n"
        "    try:\n"
        "        s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(addr); print('CONNECTED', repr(addr))\n"
        "    except OSError as e: print(repr(addr), 'BLOCKED', e)\n"},
     "ok", lambda r, c: ("CONNECTED" not in r["stdout"] and r["stdout"].count("BLOCKED") == 2 and
                         not c.accepted(), "no connection")),
    ("double-forked daemon", lambda c: py(
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(120); os._exit(0)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3); print('parent done')\n"),
     "ok", lambda r, c: ("parent done" in r["stdout"], "gone: checked by the leftover scan")),
    ("kill(-1) and signal others", lambda c: {
        "runtime": "python", "argv": [str(c.bystander.pid), str(os.getpid())], "code":
        "import os, signal, sys\n"
        "for pid in [-1, 1, int(sys.argv[1]), int(sys.argv[2])]:\n"
        "    try: os.kill(pid, signal.SIGKILL); print(pid, 'sent')\n"
        "    except OSError as e: print(pid, 'refused', e.strerror)\n"
        "print('still alive')\n"},
     "ok", lambda r, c: (c.bystander.poll() is None and
                         ("still alive" in r["stdout"] or
                          # the Sentry's kill(-1) kills its caller too
                          (c.backend == "runsc" and r["signal"] == 9)),
                         "bystander and worker alive")),
    ("write persistence", lambda c: py(
        "import os\n"
        "for p in ['/etc/cron.d/airlock-evil', '/etc/profile.d/airlock-evil.sh',"
        " '/var/spool/cron/crontabs/nobody', '/etc/ld.so.preload', '/usr/local/bin/evil',"
        " os.path.expanduser('~/.bashrc'), '/tmp/leak', '/dev/shm/leak']:\n"
        "    try: open(p, 'w').write('evil'); print(p, 'written')\n"
        "    except OSError as e: print(p, 'refused', e.strerror)\n"),
     "ok", lambda r, c: (all("refused" in l for l in r["stdout"].splitlines()
                             if l.startswith(("/etc", "/var", "/usr"))) and
                         r["stdout"].count("refused") >= 5 and
                         not any(os.path.exists(p) for p in [
         "/etc/cron.d/airlock-evil", "/etc/profile.d/airlock-evil.sh", "/usr/local/bin/evil"]),
         "nothing on the host")),
    ("files left for the next job", lambda c: py(
        "import os\n"
        "for p in ['/tmp/leak', '/dev/shm/leak', os.path.expanduser('~/.bashrc')]:\n"
        "    print(p, 'FOUND' if os.path.exists(p) else 'absent')\n"),
     "ok", lambda r, c: ("FOUND" not in r["stdout"], "previous job's files gone")),
    ("ptrace, mount, unshare, raw sockets (C)", lambda c: {
        "argv": ["./probe"], "files": [{"path": "probe", "data": open(c.probe, "rb").read(),
                                        "mode": 0o755}]},
     "ok", lambda r, c: probe_refused(r, c)),
    ("write world-writable host dirs", lambda c: {
        "runtime": "python", "argv": [c.leak] + WORLD_WRITABLE, "code":
        "import os, sys\n"
        "for d in sys.argv[2:]:\n"
        "    try: open(os.path.join(d, sys.argv[1]), 'w').write('left'); print(d, 'written')\n"
        "    except OSError as e: print(d, 'refused', e.strerror)\n"},
     "ok", lambda r, c: (not any(os.path.exists(os.path.join(d, c.leak)) for d in WORLD_WRITABLE)
                         and "written" not in r["stdout"], "nothing left on the host")),
    ("read the worker's config and policy", lambda c: {
        "runtime": "python", "argv": [c.config_path, c.policy_path, "/etc/airlock/policy.yaml",
                                      os.path.dirname(c.policy_path)], "code":
        "import os, sys\n"
        "for p in sys.argv[1:4]:\n"
        "    try: print(p, open(p).read())\n"
        "    except OSError as e: print(p, 'refused', e.strerror)\n"
        "try: print(os.listdir(sys.argv[4]))\n"
        "except OSError as e: print('dir refused', e.strerror)\n"
        "print(dict(os.environ))\n"},
     "ok", lambda r, c: (c.secret not in out(r), "config, policy and /etc/airlock unread")),
    ("host paths not given", lambda c: {
        "runtime": "python", "argv": HOST_DIRS + [c.tmp], "code":
        "import json, os, sys\n"
        "seen = {}\n"
        "for d in sys.argv[1:]:\n"
        "    try: seen[d] = sorted(os.listdir(d))\n"
        "    except OSError as e: seen[d] = e.strerror\n"
        "print(json.dumps(seen))\n"},
     "ok", lambda r, c: host_dirs_unseen(r["stdout"], c)),
    ("host cgroup tree", lambda c: py(
        "import os\n"
        "names = []\n"
        "for top, dirs, files in os.walk('/sys/fs/cgroup'):\n"
        "    names += [os.path.join(top, d) for d in dirs]\n"
        "    if len(names) > 5000: break\n"
        "print(len(names), 'cgroup dirs')\n"
        "print('\\n'.join(names))\n"
        "print(open('/proc/self/cgroup').read())\n"),
     "ok", lambda r, c: ("hostile-" not in r["stdout"] and "/airlock/" not in r["stdout"],
                         r["stdout"].splitlines()[0] if r["stdout"] else "")),
    ("what the sandbox's init tells", lambda c: py(
        "import os\n"
        "for p in ['/proc/1/cmdline', '/proc/self/mountinfo', '/proc/1/mountinfo']:\n"
        "    try: print(p, open(p, 'rb').read().replace(b'\\0', b' ').decode())\n"
        "    except OSError as e: print(p, 'refused', e.strerror)\n"),
     "ok", lambda r, c: (not any(s in r["stdout"] for s in (c.tmp, "/state", "redis.sock",
                                                            "hide=", "airlock-it-")),
                         "no host paths")),
    ("mount sources name no host path", lambda c: {
        "runtime": "python", "tier": "imaged", "code":
        "for p in ['/proc/self/mountinfo', '/proc/mounts']:\n"
        "    try: print(p, open(p).read())\n"
        "    except OSError as e: print(p, 'refused', e.strerror)\n"},
     "ok", lambda r, c: (not any(s in r["stdout"] for s in (
         IMAGES_DIR, c.tmp, "/state", "airlock-it-", "hostile-", "/var/lib/airlock")) and
         "/proc/self/mountinfo" in r["stdout"],
         "no image, state or worker path in mountinfo")),
    ("cpu_ms across forked children", lambda c: py(
        "import os\n"
        "for i in range(4):\n"
        "    if os.fork() == 0:\n"
        "        while True: pass\n"
        "while True: pass\n", cpu_ms=1000, wall_ms=20000, pids=16),
     "cpu_limit", lambda r, c: (r["cpu_ms"] < 2500 and r["wall_ms"] < 15000,
                                "stopped at %d ms of CPU" % r["cpu_ms"])),
    ("32 MiB file, 64 MiB disk", lambda c: py(
        "f = open('big', 'wb')\n"
        "for i in range(32): f.write(b'z' * (1 << 20))\n"
        "f.close(); print('wrote', __import__('os').path.getsize('big'))\n",
        disk_bytes=64 << 20, memory_bytes=256 << 20),
     "ok", lambda r, c: ("wrote %d" % (32 << 20) in r["stdout"], r["stdout"].strip())),
    ("one file past the disk limit", lambda c: py(
        "f = open('big', 'wb')\n"
        "for i in range(40): f.write(b'z' * (1 << 20)); f.flush()\n", disk_bytes=16 << 20),
     "output_limit", lambda r, c: ("No space left" in r["stderr"] or "too large" in r["stderr"],
                                   (r["error"] or "")[:60])),
    ("/tmp, /dev/shm and the work dir share the disk limit", lambda c: py(
        "import os, tempfile\n"
        "total = 0\n"
        "for d in sorted({os.getcwd(), '/tmp', '/dev/shm', tempfile.gettempdir(),"
        " os.path.expanduser('~')}):\n"
        "    try:\n"
        "        f = open(os.path.join(d, 'fill'), 'ab')\n"
        "        for i in range(16):\n"
        "            f.write(b'q' * (1 << 20)); f.flush(); total += 1 << 20\n"
        "    except OSError as e: print(d, e.strerror)\n"
        "print('stored', total)\n", disk_bytes=16 << 20),
     "output_limit", lambda r, c: ("stored" in r["stdout"] and
                                   int(r["stdout"].split()[-1]) <= 17 << 20,
                                   r["stdout"].strip().splitlines()[-1:])),
    ("missing program", lambda c: {"argv": ["/nonexistent/airlock-prog"]},
     "nonzero_exit", lambda r, c: (r.get("exit_code") == 127, "exit %s" % r.get("exit_code"))),
    ("program not executable", lambda c: {
        "argv": ["./notexec"], "files": [{"path": "notexec", "data": b"#!/bin/sh\necho hi\n",
                                          "mode": 0o644}]},
     "nonzero_exit", lambda r, c: (r.get("exit_code") == 126, "exit %s" % r.get("exit_code"))),
    ("exit 126 with nothing on stderr", lambda c: py("import os\nos._exit(126)"),
     "nonzero_exit", lambda r, c: (r.get("exit_code") == 126 and r.get("attempt") == 1,
                                   "exit %s, attempt %s" % (r.get("exit_code"), r.get("attempt")))),
    ("input files a and a/b", lambda c: {
        "argv": ["/bin/true"], "files": [{"path": "a", "data": b"x"}, {"path": "a/b", "data": b"y"}]},
     "rejected", lambda r, c: ("a/b" in (r.get("error") or ""), (r.get("error") or "")[:80])),
    ("sleep past the timeout", lambda c: py("import time\ntime.sleep(60)", wall_ms=1000),
     # a microVM's boot is not the job's time: its wall clock starts when the job goes in
     "timeout", lambda r, c: (r["wall_ms"] <= 1500 + int(r.get("info", {}).get("boot_ms", 0)),
                              "result after %d ms" % r["wall_ms"])),
]


# Network egress (the tier allows one name no job here asks for, so no
# connection leaves the host): what a program finds and can reach.
EGRESS_SCAN = (
    "import os, socket\n"
    "proxy = os.environ['HTTP_PROXY'].split('//')[1].split(':')[0]\n"
    "found = sorted({'%s:%d' % (h, p) for h in {'127.0.0.1', proxy}\n"
    "                for p in list(range(1, 1025)) + [2375, 3128, 6379, 8080, 26379]\n"
    "                if socket.socket().connect_ex((h, p)) == 0})\n"
    "print(' '.join(found))\n")
EGRESS_DIRECT = (
    "import socket\n"
    "for host, port in [('10.0.2.2', 80), ('10.0.2.3', 53), ('169.254.169.254', 80),\n"
    "                   ('127.0.0.1', 6379), ('::1', 6379)]:\n"
    "    try:\n"
    "        socket.create_connection((host, port), 1).close(); print(host, port, 'REACHED')\n"
    "    except OSError as e: print(host, port, 'blocked')\n"
    "for dns in ['10.0.2.3', '127.0.0.53', '127.0.0.1']:\n"
    "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)\n"
    "    try:\n"
    "        s.sendto(b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01', (dns, 53))\n"
    "        s.recv(512); print(dns, 53, 'ANSWERED')\n"
    "    except OSError: print(dns, 53, 'no answer')\n")
EGRESS_TRICKS = (
    "import os, socket\n"
    "proxy = os.environ['HTTP_PROXY'].split('//')[1].split(':')[0]\n"
    "def ask(line):\n"
    "    s = socket.create_connection((proxy, 3128), 5)\n"
    "    s.sendall(line.encode() + b'\\r\\n\\r\\n')\n"
    "    return s.recv(200).split(b'\\r\\n')[0].decode()\n"
    "for t in ['127.0.0.1:6379', '0x7f000001:6379', '2130706433:6379', '127.1:6379',\n"
    "          '[::ffff:127.0.0.1]:6379', '[::1]:6379', 'localhost.:6379', '169.254.169.254:80',\n"
    "          'allowed.invalid:80', 'allowed.invalid.:443@127.0.0.1:6379']:\n"
    "    print('CONNECT', t, ask('CONNECT %s HTTP/1.1' % t))\n"
    "print('GET', ask('GET http://127.0.0.1:6379/ HTTP/1.1\\r\\nHost: allowed.invalid:443'))\n")


def egress_lines_refused(r, word):
    lines = r["stdout"].splitlines()
    bad = [l for l in lines if word in l]
    return bool(lines) and not bad, "%d tried, %s" % (len(lines), "; ".join(bad) or "none got through")


EGRESS_CASES = [
    # (wall 20 s: a refused SYN on a microVM's restricted network is dropped,
    # each try waits its timeout)
    ("egress: a port scan finds only the proxy", lambda c: dict(py(EGRESS_SCAN, wall_ms=20000),
                                                                 network="egress"),
     "ok", lambda r, c: (r["stdout"].split() and
                         all(x.endswith(":3128") for x in r["stdout"].split()) and
                         len(r["stdout"].split()) == 1, "open: " + r["stdout"].strip())),
    ("egress: direct connections and DNS ignoring the proxy", lambda c: dict(
        py(EGRESS_DIRECT, wall_ms=20000), network="egress"),
     "ok", lambda r, c: egress_lines_refused(r, "REACHED") if "ANSWERED" not in r["stdout"]
     else (False, r["stdout"])),
    ("egress: CONNECT to loopback, metadata and DNS tricks", lambda c: dict(
        py(EGRESS_TRICKS, wall_ms=20000), network="egress"),
     "ok", lambda r, c: (len(r["stdout"].splitlines()) == 11 and
                         all(l.endswith(("403 Forbidden", "400 Bad Request"))
                             for l in r["stdout"].splitlines()) and
                         all(not e.get("allowed") for e in r.get("egress") or []),
                         "%d refused" % r["stdout"].count("403"))),
]


# The cases whose program runs the same as a session's call (python code,
# its argv set in sys.argv), and whose check is about containment, not a
# job's own limits: run as calls of one session (PROTOCOL.md, "Sessions").
# kill(-1) goes last: it kills the session's own server too (its
# supervisor, on the process and container tiers), which ends the session
# (exited) as os._exit would; containment is what it checks.
SESSION_CASES = ["read worker environment", "read host files", "connect to host loopback",
                 "connect to the Redis socket", "double-forked daemon", "write persistence",
                 "write world-writable host dirs", "read the worker's config and policy",
                 "host paths not given", "host cgroup tree", "what the sandbox's init tells",
                 "kill(-1) and signal others"]
ENDS_SESSION = {"kill(-1) and signal others"}


def session_phase(runner, ctx, job_uid, n):
    """Each of SESSION_CASES as a call in one session of the tier: contained
    as its job was, the session open through them, and nothing left after
    it closed. TAP lines; (count, failed)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
    import airlock
    cases = {name: (make, check) for name, make, want, check in CASES}
    failed = 0
    s = airlock.Client(redis=runner.c.url, tier=runner.tier).session(
        limits={"wall_ms": 5000, "memory_bytes": 128 << 20, "pids": 32, "stdout_bytes": 65536,
                "stderr_bytes": 65536, "disk_bytes": 16 << 20})
    try:
        for name in SESSION_CASES:
            make, check = cases[name]
            job = make(ctx)
            code = job["code"].decode() if isinstance(job["code"], bytes) else job["code"]
            if job.get("argv"):
                code = "import sys\nsys.argv = ['call'] + %r\n%s" % (job["argv"], code)
            try:
                res = s.run_python(code)
            except airlock.SessionEnded as e:
                if name not in ENDS_SESSION:
                    raise
                # its answer went with its server: containment is the
                # bystander's life (and the worker's, which answered this)
                res = airlock.Result(id="", status="session_ended", error=str(e))
            r = {"status": res.status, "stdout": res.stdout.decode(errors="replace"),
                 "stderr": res.stderr.decode(errors="replace"), "error": res.error,
                 "wall_ms": res.wall_ms}
            if res.status == "session_ended":
                contained = ctx.bystander.poll() is None
                note = "it killed its own session's server (%s); the bystander is %s" % (
                    res.error, "alive" if contained else "DEAD")
            else:
                contained, note = check(r, ctx)
            good = contained and (res.status in ("ok", "nonzero_exit") or
                                  (name in ENDS_SESSION and res.status == "session_ended"))
            failed += not good
            n += 1
            print("%sok %d - %s, as a call in a session on %s: %s, %s (%s)" % (
                "" if good else "not ", n, name, runner.tier,
                "contained" if contained else "ESCAPED", res.status, note))
            if not good:
                print("#   stdout: " + repr(r["stdout"][:900]))
    finally:
        s.close()
    time.sleep(0.5)
    left = leftovers(job_uid, runner.worker_id, runner.state)
    n += 1
    failed += bool(left)
    print("%sok %d - the session closed: nothing of it left on %s %s" % (
        "not " if left else "", n, runner.tier, left or ""))
    return n, failed


def main():
    if os.geteuid() != 0:
        print("1..0 # SKIP the hostile suite needs root")
        return 0
    ctx = Ctx()
    n = failed = 0
    rows = []
    try:
        for backend, (tier, job_uid) in BACKENDS.items():
            runner = QueueRunner(ctx, tier, backend)
            ctx.backend = backend
            run = runner.run
            for name, make, want, check in CASES + EGRESS_CASES:
                want = RUNSC_WANT.get(name, want) if backend == "runsc" else want
                job = {"v": 1, "id": "hostile-%d-%d" % (os.getpid(), n)}
                job.update(make(ctx))
                job.setdefault("limits", {})
                for k, v in {"wall_ms": 5000, "memory_bytes": 128 << 20, "pids": 32,
                             "stdout_bytes": 65536, "stderr_bytes": 65536,
                             "disk_bytes": 16 << 20}.items():
                    job["limits"].setdefault(k, v)
                r = run(job)
                n += 1
                if r.get("status") == "harness_error":
                    contained, note = False, r["error"].strip()[:200]
                else:
                    contained, note = check(r, ctx)
                left = leftovers(job_uid, runner.worker_id, runner.state)
                if left:
                    contained, note = False, "left behind: %s" % left
                good = contained and r.get("status") == want
                failed += not good
                rows.append((name, backend, "contained" if contained else "ESCAPED",
                             "%s%s" % (r.get("status"), "" if r.get("status") == want
                                       else " (want %s)" % want), note))
                print("%sok %d - %s on %s: %s, %s" % ("" if good else "not ", n, name, backend,
                                                      rows[-1][2], rows[-1][3]))
                if not good:
                    print("#   " + json.dumps({k: r.get(k) for k in (
                        "status", "exit_code", "signal", "error", "wall_ms")})[:400])
                    print("#   stdout: " + repr((r.get("stdout") or "")[:900]))
                    print("#   stderr: " + repr((r.get("stderr") or "")[:300]))
            n, f = session_phase(runner, ctx, job_uid, n)
            failed += f
            # Afterwards the worker is still healthy: hello world passes.
            r = run({"v": 1, "id": "hello-after", "runtime": "python",
                     "code": "print('hello, world')"})
            n += 1
            good = r.get("status") == "ok" and r.get("stdout") == "hello, world\n" and \
                not leftovers(job_uid, runner.worker_id, runner.state) and \
                runner.c.procs[runner.worker_id].poll() is None
            if os.environ.get("AIRLOCK_HOSTILE_KEEP_LOG"):
                print("\n".join("# " + l for l in runner.c.log(runner.worker_id).splitlines()
                                 if "level=error" in l or "level=warn" in l))
            runner.close()
            failed += not good
            print("%sok %d - hello world after the suite on %s" % ("" if good else "not ", n,
                                                                    backend))
    finally:
        ctx.close()
    w = max(len(r[0]) for r in rows)
    print("# %-*s  %-8s %-10s %s" % (w, "case", "backend", "boundary", "verdict"))
    for r in rows:
        print("# %-*s  %-8s %-10s %-28s %s" % (w, r[0], r[1], r[2], r[3], r[4]))
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
