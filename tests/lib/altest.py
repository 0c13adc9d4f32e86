"""Helpers shared by the Python test suites: TAP output, running jobs with
`airlock-worker --run-one`, and scanning for what a job left behind."""
import json
import os
import subprocess
import sys
import tempfile
import time

import msgpack

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
WORKER = os.path.join(BUILD, "airlock-worker")
CLI = os.path.join(BUILD, "airlock")


def skip_unless(cond, why):
    """A suite that cannot run here says so in TAP (tests/run.sh counts it as
    skipped, and the summary line says so) and ends."""
    if not cond:
        print("1..0 # SKIP " + why)
        sys.exit(0)


def need_root(what=None):
    """Skip unless root (the sandboxes need it); what: the part that does."""
    skip_unless(os.geteuid() == 0, "needs root" + (" (%s)" % what if what else ""))


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, detail=None):
        self.n += 1
        print("%sok %d - %s" % ("" if cond else "not ", self.n, name), flush=True)
        if not cond:
            self.failed += 1
            if detail is not None:
                for line in str(detail)[:3000].splitlines()[:20]:
                    print("#   " + line)
        return cond

    def done(self):
        print("1..%d" % self.n)
        return 1 if self.failed else 0


def raises(fn, exc):
    """What fn() raised when it is an exc (None when nothing was raised; the
    text of another exception, which a test then shows as its failure)."""
    try:
        fn()
    except exc as e:
        return e
    except Exception as e:  # noqa: BLE001 - the wrong one is the failure shown
        return "%s: %s" % (type(e).__name__, e)
    return None


def flip_byte(path):
    """One bit of the byte in the middle of the file at path changed (a
    snapshot that must then be refused)."""
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x01]))


def run_one(job, state, worker_id, uid_base, extra=(), env=None, pass_fds=(), timeout=120):
    """Run a job dict on one backend in a fresh `airlock-worker --run-one`.
    Returns (result dict or None, completed process)."""
    fd, path = tempfile.mkstemp(suffix=".job", dir=state if os.path.isdir(state) else None)
    with os.fdopen(fd, "wb") as f:
        f.write(msgpack.packb(job, use_bin_type=True))
    try:
        p = subprocess.run(
            [WORKER, "--run-one", path, "--state-dir", state, "--worker-id", worker_id,
             "--uid-base", str(uid_base), "--slots", "2", *extra],
            env=env if env is not None else {"PATH": "/usr/bin:/bin"},
            pass_fds=pass_fds, capture_output=True, timeout=timeout)
    finally:
        os.unlink(path)
    res = json.loads(p.stdout) if p.returncode == 0 and p.stdout else None
    return res, p


def live_pids_of(uids):
    """Pids of processes (not zombies) whose real uid is in uids."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/status" % pid) as f:
                st = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if int(st["Uid"].split()[0]) in uids and not st["State"].strip().startswith("Z"):
            out.append(pid)
    return out


def proc_uid(pid):
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def child_of_root(pid, program):
    """Whether pid's parent runs as root and its argv[0] is program."""
    try:
        with open("/proc/%s/status" % pid) as f:
            ppid = next(line.split()[1] for line in f if line.startswith("PPid:"))
        with open("/proc/%s/cmdline" % ppid, "rb") as f:
            parent = f.read()
    except (OSError, StopIteration):
        return False
    return proc_uid(ppid) == 0 and parent.startswith(program.encode() + b"\0")


def warm_interpreter(pid):
    """Whether pid is a pre-made sandbox's warm interpreter (the process
    tier's, backends/process/init.c), or the process about to become one: a
    child of a root airlock-sandbox-init. An init that runs a job is the
    slot's uid by then, and everything of a job dies with its PID
    namespace, so only a sandbox that waits for its job has such a child."""
    return child_of_root(pid, "airlock-sandbox-init")


def job_cgroups(worker_id):
    """{controller dir: [cgroup dirs]} of the jobs and sandboxes of a worker:
    airlock/<worker_id>/<backend>/<name> in each hierarchy."""
    out = {}
    for ctrl in ("memory", "pids", "cpu", "cpuacct", "unified", ""):
        d = os.path.join("/sys/fs/cgroup", ctrl, "airlock", worker_id)
        if not os.path.isdir(d) or os.path.realpath(d) in out:
            continue
        subs = []
        for backend in os.listdir(d):
            bd = os.path.join(d, backend)
            if os.path.isdir(bd):
                subs += [os.path.join(bd, e) for e in os.listdir(bd)
                         if os.path.isdir(os.path.join(bd, e))]
        out[os.path.realpath(d)] = subs
    return out


WARM_PROGRAM = b"/usr/bin/python3\0-c\0def _airlock_warm():"


def warm_containers(worker_id):
    """{name: pid} of the container tier's warm containers of a worker
    (backends/container/warm.c): a container cgroup named "...-warm+N" that
    holds exactly one process, the warm program (al_warm_python, its job
    not yet come: its stdin is still /dev/null), started by the worker's
    shim. Any other process in such a cgroup (a job's, say), or a job's
    stdin, makes it no warm container: a leftover. On runsc, whose
    processes the host does not see, such a cgroup holding runsc's alone
    (its Sentry and gofer) counts as one (its state files are then the
    warm container's)."""
    out = {}
    d = os.path.join("/sys/fs/cgroup/pids/airlock", worker_id, "container")
    if not os.path.isdir(d):
        d = os.path.join("/sys/fs/cgroup/airlock", worker_id, "container")  # cgroup v2
    try:
        names = [e for e in os.listdir(d) if "-warm+" in e]
    except OSError:
        return out
    for name in names:
        try:
            with open(os.path.join(d, name, "cgroup.procs")) as f:
                pids = f.read().split()
            with open("/proc/%s/cmdline" % pids[0], "rb") as f:
                cmd = f.read()
            stdin = os.readlink("/proc/%s/fd/0" % pids[0])
        except (OSError, IndexError):
            continue
        # a taken one's interpreter has its job's stdin: it is that job's
        if len(pids) == 1 and cmd.startswith(WARM_PROGRAM) and stdin == "/dev/null" and \
                child_of_root(pids[0], "airlock-oci-shim"):
            out[name] = pids[0]
        elif all(_exe(p) == "/usr/bin/runsc" for p in pids):
            out[name] = pids[0]
    return out


def _exe(pid):
    try:
        return os.readlink("/proc/%s/exe" % pid)
    except OSError:
        return None


def in_warm_cgroup(pid):
    """Whether pid is in a cgroup of a container named as a warm one."""
    try:
        with open("/proc/%s/cgroup" % pid) as f:
            return "-warm+" in f.read()
    except OSError:
        return False


def _scan(uid, worker_id, state, warm):
    """leftovers()'s scan, once: [(entry, whether it is of a container
    named as a warm one)]."""
    wc = warm_containers(worker_id)
    if len(wc) > warm:
        wc = {}  # more than the worker may keep: each is a leftover
    left = [("process %s" % p, in_warm_cgroup(p)) for p in live_pids_of({uid})
            if not warm_interpreter(p) and p not in wc.values()]
    for subs in job_cgroups(worker_id).values():
        subs = [s for s in subs if os.path.basename(s) not in wc]
        named = [s for s in subs if "-warm+" in os.path.basename(s)]
        subs = [s for s in subs if s not in named]
        busy = []
        for sub in subs:
            try:
                with open(os.path.join(sub, "cgroup.procs")) as f:
                    pids = f.read().split()
            except OSError:
                continue
            pids = [p for p in pids if not warm_interpreter(p)]
            if len(pids) > 1 or any(proc_uid(p) not in (0, None) for p in pids):
                busy.append(sub)
        if len(subs) > warm or busy:
            left.append(("cgroups %s (busy: %s)" % (subs, busy), False))
        if named:
            left.append(("cgroups %s (not a warm container)" % named, True))
    if os.path.isdir(state):
        for dirpath, dirs, files in os.walk(state):
            # the container backend's image skeleton is the worker's, not a job's
            dirs[:] = [d for d in dirs if d != "hostimage" and d not in wc]
            files = [f for f in files if not f.endswith(".job") and
                     not any(f.startswith(n + "_sandbox:") for n in wc)]  # runsc's
            # (runsc's state: files named after the container, in one directory)
            for named in (False, True):
                these = [f for f in files if ("-warm+" in dirpath or "-warm+" in f) == named]
                if these:
                    left.append(("files %s" % [os.path.join(dirpath, f) for f in these], named))
    return left


def leftovers(uid, worker_id, state, warm=2, settle_s=10):
    """Processes of uid, cgroups under airlock/<worker_id> (beyond the
    pre-made sandboxes: at most `warm`, each holding only a root init that
    waits for its job and maybe its warm interpreter, or a container
    tier's warm container and its one process), files under state (but a
    warm container's bundle). What is not of a container named as a warm
    one counts as it is now; a container so named may be one the worker
    starts after a result (backends/container/warm.c), so its processes,
    cgroups and files count only if they are still no warm container
    (warm_containers) settle_s later."""
    left = _scan(uid, worker_id, state, warm)
    now = [e for e, named in left if not named]
    end = time.monotonic() + settle_s
    pending = [e for e, named in left if named]
    while pending and time.monotonic() < end:
        time.sleep(0.1)
        pending = [e for e, named in _scan(uid, worker_id, state, warm) if named]
    return now + pending


def exchange(addr, data, timeout=10):
    """Connect to addr (host, port), send data (bytes, or an iterable of
    chunks), then read until the peer closes: all it sent. A peer that
    closes while we still send is read all the same."""
    import socket
    s = socket.create_connection(addr, 5)
    s.settimeout(timeout)
    got = b""
    try:
        for chunk in ([data] if isinstance(data, bytes) else data):
            s.sendall(chunk)
    except OSError:
        pass
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        pass
    s.close()
    return got
