#!/usr/bin/python3
"""The process backend's behaviour, job by job, through `airlock-worker
--run-one`: verdicts, exit codes and signals, stdin, input and output files,
environment, and failing closed when its boundary cannot be set up."""
import os
import shutil
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import WORKER, Tap, leftovers, need_root, run_one  # noqa: E402

UID_BASE = int(os.environ.get("AIRLOCK_TEST_UID_BASE", "61000"))
t = Tap()
need_root()
state = tempfile.mkdtemp(prefix="airlock-proc-", dir="/var/tmp")
WID = "proc-test-%d" % os.getpid()


def job(**kw):
    j = {"v": 1, "id": "p-%d" % t.n, "tier": "trusted"}
    j.update(kw)
    return j


def run(j, **kw):
    r, p = run_one(j, state, WID, UID_BASE, **kw)
    if r is None:
        t.ok(False, "worker ran the job", p.stderr.decode(errors="replace"))
        return {}
    return r


try:
    r = run(job(runtime="python", code="import sys; sys.exit(3)"))
    t.ok(r.get("status") == "nonzero_exit" and r.get("exit_code") == 3 and r.get("signal") == 0,
         "exit 3 -> nonzero_exit with code 3", r)
    r = run(job(runtime="python", code="import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))
    t.ok(r.get("status") == "nonzero_exit" and r.get("exit_code") is None and r.get("signal") == 15,
         "death by SIGTERM -> nonzero_exit with signal 15", r)
    r = run(job(runtime="python", code="import os; os.abort()"))
    t.ok(r.get("signal") == 6 and r.get("status") == "nonzero_exit", "abort -> signal 6", r)
    r = run(job(runtime="python", code="import sys; print(sys.stdin.read()[::-1])",
                stdin=b"olleh"))
    t.ok(r.get("stdout") == "hello\n", "stdin reaches the job", r)
    r = run(job(runtime="sh", code='echo "$0:$1:$2"; pwd', argv=["a b", "c"]))
    t.ok(r.get("status") == "ok" and r.get("stdout", "").splitlines()[0].endswith(":a b:c")
         and r["stdout"].splitlines()[1] == "/work", "sh runtime with arguments, cwd /work", r)
    r = run(job(runtime="python", code="print(sorted(globals()), __name__)\n"
                "raise KeyboardInterrupt"))
    t.ok(r.get("stdout") == "['__annotations__', '__builtins__', '__doc__', '__loader__', "
         "'__name__', '__package__', '__spec__'] __main__\n" and r.get("signal") == 2 and
         r.get("stderr", "").startswith('Traceback (most recent call last):\n  File '
                                        '"<run_python>", line 2, in <module>\n'),
         "python code runs in __main__ with nothing of its launcher in its globals; an "
         "uncaught KeyboardInterrupt ends it by SIGINT, as python3 does", r)
    # the launcher imports nothing a bare python3 does not (linecache alone,
    # through tokenize and re, cost a print(1) job 12 ms); the code's lines
    # still reach linecache for the tracebacks the code prints itself
    r = run(job(runtime="python", code=(
        "import sys\nprint(sorted(m for m in ('linecache', 'tokenize', 're', 'traceback')"
        " if m in sys.modules))\n"
        "import traceback\ntry:\n    [][1]\nexcept IndexError:\n    traceback.print_exc()\n")))
    t.ok(r.get("status") == "ok" and r.get("stdout") == "[]\n" and
         '"<run_python>", line 5, in <module>\n    [][1]\n' in r.get("stderr", ""),
         "python code starts with none of linecache, tokenize, re, traceback imported, and a "
         "traceback it prints itself shows its own lines", r)
    r = run(job(runtime="python", code=(
        "import os\nprint(os.cpu_count(), open('/sys/devices/system/cpu/online').read().strip(),"
        " os.listdir('/sys'))\n"
        "try:\n    open('/sys/devices/system/cpu/online', 'w')\nexcept OSError as e:\n"
        "    print(e.errno)\n")))
    t.ok(r.get("stdout") == "1 0 ['devices']\n30\n",
         "the job is shown its CPU limit (1000 millis: os.cpu_count() 1) in a read-only /sys "
         "holding only devices/system/cpu/online", r)
    r = run(job(argv=["echo", "plain", "argv"]))
    t.ok(r.get("stdout") == "plain argv\n", "plain argv resolved on PATH", r)
    r = run(job(argv=["no-such-program-xyz"]))
    t.ok(r.get("status") == "nonzero_exit" and r.get("exit_code") == 127 and
         "cannot execute no-such-program-xyz" in r.get("stderr", ""),
         "missing program -> exit 127 with a message on stderr", r)
    r = run(job(runtime="python", code=(
        "import os, stat\n"
        "st = os.stat('bin/tool'); d = os.stat('.')\n"
        "print(oct(stat.S_IMODE(st.st_mode)), st.st_uid == os.getuid(), oct(stat.S_IMODE(d.st_mode)),"
        " d.st_uid == os.getuid(), open('bin/tool','rb').read())\n"
        "print(os.getuid(), os.getgid(), os.getgroups())\n"
        "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
        "print(open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0])\n"
        "print(open('/proc/self/status').read().split('Seccomp:')[1].split()[0])\n"
        "st = open('/proc/self/status').read()\n"
        "print(*(st.split(k + ':')[1].split()[0] for k in ('CapPrm', 'CapInh', 'CapBnd', 'CapAmb')))\n"
        "print(open('/proc/1/status').read().split('SigCgt:')[1].split()[0])\n"),
        files=[{"path": "bin/tool", "data": b"\x00\x01", "mode": 0o750}]))
    lines = r.get("stdout", "").splitlines()
    t.ok(len(lines) == 7 and lines[0] == "0o750 True 0o700 True b'\\x00\\x01'",
         "input file with its mode, owned by the slot uid; work dir 0700", r)
    t.ok(len(lines) == 7 and lines[1] == "%d %d []" % (UID_BASE, UID_BASE),
         "runs as the slot uid with no supplementary groups", lines)
    t.ok(len(lines) == 7 and lines[2] == "0000000000000000" and lines[3] == "1" and lines[4] == "2",
         "no capabilities, no_new_privs, seccomp filter on", lines)
    t.ok(len(lines) == 7 and lines[5] == " ".join(["0000000000000000"] * 4),
         "permitted, inheritable, bounding and ambient capability sets all empty", lines)
    t.ok(len(lines) == 7 and lines[6] == "0000000000000000",
         "the sandbox's init catches no signal (a job cannot make it run a handler)", lines)
    r = run(job(runtime="python", env={"GREETING": "hi"},
                code="import os; print(os.environ['GREETING'], os.environ['HOME'], sorted(os.environ))"),
            env={"PATH": "/usr/bin:/bin", "HOME": "/root", "AIRLOCK_TOKEN": "worker-only"})
    t.ok(r.get("stdout", "").startswith("hi /work ") and "AIRLOCK" not in r.get("stdout", ""),
         "job env set; HOME is the work dir; no worker variables", r)
    r = run(job(runtime="python", collect=["out.txt", "big.bin", "link", "missing", "fifo", "d/n.txt"],
                code=(
        "import os\n"
        "open('out.txt', 'w').write('result')\n"
        "open('big.bin', 'wb').write(b'z' * ((1 << 20) + 1))\n"
        "os.symlink('/etc/passwd', 'link')\n"
        "os.mkfifo('fifo')\n"
        "os.mkdir('d'); open('d/n.txt', 'w').write('nested')\n")))
    files = {f["path"]: f for f in r.get("files", [])}
    t.ok(files.get("out.txt", {}).get("data") == "result" and
         files.get("d/n.txt", {}).get("data") == "nested", "output files collected",
         {k: v.get("data", "")[:20] for k, v in files.items()})
    t.ok("link" not in files and "missing" not in files and "fifo" not in files,
         "symlinks, FIFOs and missing files are not collected", sorted(files))
    t.ok(files.get("big.bin", {}).get("truncated") is True and
         len(files.get("big.bin", {}).get("data", "")) == 1 << 20,
         "a collected file over the cap is truncated at 1 MiB",
         {k: len(v.get("data", "")) for k, v in files.items()})
    r = run(job(runtime="python", collect=["exact.txt", "*.png", "out/*.csv"], code=(
        "import os\n"
        "for n in ('b.png', 'a.png', '.hidden.png', 'exact.txt', 'a.jpg'):\n"
        "    open(n, 'w').write(n)\n"
        "os.makedirs('out/sub'); open('out/x.csv', 'w').write('x'); "
        "open('out/sub/y.csv', 'w').write('y')\n"
        "os.symlink('/etc/passwd', 'link.png'); os.mkdir('dir.png')\n")))
    t.ok([(f["path"], f["data"]) for f in r.get("files", [])] ==
         [("exact.txt", "exact.txt"), ("a.png", "a.png"), ("b.png", "b.png"),
          ("out/x.csv", "x")],
         "collect globs: the path asked for first, then each glob's regular files by name "
         "(not a dot file, a symlink, a directory, nor a deeper one)",
         [f["path"] for f in r.get("files", [])])
    r = run(job(runtime="python", collect=["*.png", "p1.png"], code=(
        "for i in range(100): open('p%d.png' % i, 'w').write(str(i))\n")))
    got = [f["path"] for f in r.get("files", [])]
    names = sorted("p%d.png" % i for i in range(100) if i != 1)
    t.ok(r.get("status") == "ok" and got == ["p1.png"] + names[:63],
         "collect globs: 100 matches are cut at 64 files, each once: the path asked for, then "
         "the first by name", got[:5])
    r = run(job(runtime="python", code="import time; time.sleep(5)", limits={"wall_ms": 700}))
    t.ok(r.get("status") == "timeout" and r.get("wall_ms", 0) < 1200 and "700 ms" in r.get("error", ""),
         "timeout -> status timeout within the limit + 0.5 s", r)
    r = run(job(runtime="python", code="import os\nwhile True: os.urandom(1)", limits={"cpu_ms": 500}))
    t.ok(r.get("status") == "cpu_limit" and r.get("cpu_ms", 0) >= 450, "cpu limit -> cpu_limit", r)
    r = run(job(runtime="python", code="print('x' * 5000)", limits={"stdout_bytes": 100}))
    t.ok(r.get("status") == "output_limit" and len(r.get("stdout", "")) == 100 and
         r.get("stdout_truncated") is True and r.get("exit_code", 0) is None,
         "stdout over its cap -> output_limit, cut at the cap, exit_code null (it was 0: the "
         "job exited by itself after its output was cut)", r)

    r = run(job(runtime="python", files=[{"path": "a", "data": b"x" * (2 << 20)}],
                code="pass", limits={"disk_bytes": 1 << 20}))
    t.ok(r.get("status") == "rejected" and "disk limit" in (r.get("error") or ""),
         "input files larger than the disk limit -> rejected", r)
    # A tier's binds: read-only at the same place (nosuid, nodev), nothing else of the host.
    bind_dir = tempfile.mkdtemp(prefix="airlock-bind-", dir="/var/tmp")
    os.chmod(bind_dir, 0o755)
    with open(os.path.join(bind_dir, "data.txt"), "w") as f:
        f.write("shared read-only")
    os.chmod(os.path.join(bind_dir, "data.txt"), 0o644)
    pol = os.path.join(bind_dir + ".yaml")
    with open(pol, "w") as f:
        f.write("tiers:\n  trusted:\n    backend: process\n    binds: [%s, /etc/hostname]\n"
                % bind_dir)
    code = ("import os, sys\n"
            "p = sys.argv[1]\n"
            "print(open(p + '/data.txt').read() if os.path.exists(p) else 'absent')\n"
            "try: open(p + '/new', 'w'); print('written')\n"
            "except OSError as e: print(e.strerror)\n"
            "print(open('/etc/hostname').read().strip())\n"
            "print(sorted(os.listdir(os.path.dirname(p))))\n")
    r1 = run(job(runtime="python", code=code, argv=[bind_dir]), extra=["--policy", pol])
    r2 = run(job(runtime="python", code=code, argv=[bind_dir]))
    with open("/etc/hostname") as f:
        host_name = f.read().strip()
    t.ok(r1.get("stdout", "").splitlines() == [
        "shared read-only", "Read-only file system", host_name,
        "[%r]" % os.path.basename(bind_dir)] and
         r2.get("stdout", "").splitlines()[:1] == ["absent"] and
         not os.path.exists(os.path.join(bind_dir, "new")),
         "binds: a directory and a file of the host read-only at the same place, the parent "
         "showing nothing else; absent without the policy", (r1, r2.get("stdout")))
    shutil.rmtree(bind_dir)
    os.unlink(pol)
    t.ok(not leftovers(UID_BASE, WID, state), "nothing left behind",
         leftovers(UID_BASE, WID, state))

    # Failing closed: a boundary that cannot be set up runs nothing.
    _, p = run_one(job(runtime="python", code="print(1)"), state, WID, 0)
    t.ok(p.returncode != 0 and b"must not include root" in p.stderr,
         "slot uids that include root: the backend refuses to run", p.stderr)
    _, p = run_one(job(runtime="python", code="print(1)"), state, WID, UID_BASE,
                   extra=["--helper-dir", "/nonexistent"])
    t.ok(p.returncode != 0 and b"/nonexistent/airlock-sandbox-init" in p.stderr and
         b"No such file" in p.stderr,
         "a missing sandbox init: the backend refuses to run, naming it", p.stderr)
    loose = os.path.join(state, "loose")
    os.makedirs(loose)
    shutil.copy(os.path.join(os.path.dirname(WORKER), "airlock-sandbox-init"), loose)
    os.chmod(os.path.join(loose, "airlock-sandbox-init"), 0o777)
    _, p = run_one(job(runtime="python", code="print(1)"), state, WID, UID_BASE,
                   extra=["--helper-dir", loose])
    t.ok(p.returncode != 0 and b"writable by no one else" in p.stderr,
         "a sandbox init others can write: the backend refuses to run", p.stderr)
    shutil.rmtree(loose)
    p = subprocess.run([os.path.join(os.path.dirname(WORKER), "airlock-sandbox-init")],
                       capture_output=True, timeout=10)
    t.ok(p.returncode == 2 and b"process backend only" in p.stderr,
         "the sandbox init refuses to run on its own", p.stderr)
    p = subprocess.run([WORKER, "--helper-dri", "/x"], capture_output=True, timeout=10)
    t.ok(p.returncode == 2 and b"--helper-dri: unknown option" in p.stderr and p.stdout == b"",
         "a misspelt worker flag: exit 2 with a message, nothing run", (p.returncode, p.stderr))
finally:
    shutil.rmtree(state, ignore_errors=True)
sys.exit(t.done())
