#!/usr/bin/python3
"""The Python client (client/python/airlock) against a real stack: a
redis-server, a scheduler, a worker (process tier) and airlock-gateway,
started here. Every call and every exception, over the gateway and over
Redis: run, a non-zero exit as a value, each failed outcome as its typed
exception (Rejected, QuotaExceeded, Timeout, MemoryLimit, OutputLimit,
Cancelled, SandboxError, Expired), WaitTimeout, NotFound, Unauthorized,
Unavailable; status, cancel; stream() seeing a job's lines while it runs and
resuming after a chunk with exactly the rest; run_python's dictionary;
grade(): a build and each test's verdict, a compile_error; grade_dir(). The
package installs with pip (a venv, no network) and its scripts are the
document's."""
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(HERE, ".."))
from altest import Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from gwclient import free_port, key_file, start_gateway  # noqa: E402

import airlock  # noqa: E402
from airlock import _scripts  # noqa: E402

t = Tap()

# grade.yaml without a YAML package (issue 59: grade_dir needed python3-yaml):
# airlock._yaml reads what a course writes, as `airlock grade` reads it
from airlock import _yaml  # noqa: E402
GY = """# hw1
tier: trusted            # a comment
build: {argv: [gcc, -o, main, main.c], limits: {wall_ms: 60000}}
argv: [./main]
compare: float
checker:
  runtime: python
  code: |
    import sys
    print("ok: it's fine")
tests:
  - name: 'it''s'
    stdin: "1 2\\n"
    abs_tol: 0.001
  - {name: b, rel_tol: 1e-6, points: 2, hidden: true}
per_test:
  1: {group: small}
"""
want = {"tier": "trusted", "build": {"argv": ["gcc", "-o", "main", "main.c"],
                                     "limits": {"wall_ms": 60000}},
        "argv": ["./main"], "compare": "float",
        "checker": {"runtime": "python", "code": "import sys\nprint(\"ok: it's fine\")\n"},
        "tests": [{"name": "it's", "stdin": "1 2\n", "abs_tol": 0.001},
                  {"name": "b", "rel_tol": 1e-6, "points": 2, "hidden": True}],
        "per_test": {1: {"group": "small"}}}
got = _yaml.load(GY)
t.ok(got == want, "grade.yaml read with the standard library alone: block and flow "
     "collections, quoted and block scalars, comments, fractional numbers (1e-6 a number, "
     "as airlock grade reads it)", got)
try:
    _yaml.load("tests:\n  - {name: a, stdin: x\n  - b\n")
    bad = None
except _yaml.YAMLError as e:
    bad = str(e)
t.ok(bad and bad.startswith("line 2:"), "a broken grade.yaml is refused naming its line", bad)
gd = tempfile.mkdtemp()
os.makedirs(os.path.join(gd, "tests"))
with open(os.path.join(gd, "grade.yaml"), "w") as f:
    f.write("argv: [./main]\nper_test:\n  t1: {points: 4, abs_tol: 0.5}\n")
with open(os.path.join(gd, "tests", "t1.in"), "w") as f:
    f.write("1\n")
p = subprocess.run(["/usr/bin/python3", "-S", "-c",
                    "import json, sys; sys.path.insert(0, %r); import airlock; "
                    "from airlock.grading import load_grading_dir as l; "
                    "j = l(%r); print(json.dumps([j['tests'][0]['points'], "
                    "j['tests'][0]['abs_tol'], 'yaml' in sys.modules]))"
                    % (os.path.join(HERE, ".."), gd)], capture_output=True, text=True)
t.ok(p.stdout.strip() == "[4, 0.5, false]",
     "grade_dir's loader in a Python without site-packages (a plain venv): no YAML "
     "package imported, per_test applied", (p.stdout, p.stderr[-500:]))
need_root("the process backend")

POLICY = """\
result_ttl_s: 600
lease_ms: 30000
tiers:
  trusted:
    backend: process
    max_attempts: 1
    defaults: {wall_ms: 20000, memory_bytes: 268435456, pids: 64}
  broken:
    backend: vm
    max_attempts: 1
  parked:
    backend: process
tenants:
  default: {}
  limited: {rate_per_s: 2}
"""

LINES = "import time\nfor i in range(8):\n    print('line', i, flush=True)\n    time.sleep(0.1)\n"


def raises(fn, exc):
    try:
        fn()
    except exc as e:
        return e
    except Exception as e:  # the wrong one
        return ("wrong", e)
    return None


def suite(name, cl, other=None):
    """Every call of one client (cl), the same checks either way in."""
    r = cl.run("print(6*7)")
    t.ok(isinstance(r, airlock.Result) and r.status == "ok" and r.stdout == b"42\n" and
         r.exit_code == 0 and r.backend == "process", "%s: run returns the result" % name, r)
    r = cl.run("import sys; print('so far'); sys.exit(3)")
    t.ok(r.status == "nonzero_exit" and r.exit_code == 3 and r.stdout == b"so far\n",
         "%s: a non-zero exit is a Result, not an exception" % name, r)
    blob = bytes(range(256)) * 4
    r = cl.run("import hashlib, sys\nprint(hashlib.sha256(open('in/bin.dat', 'rb').read())"
               ".hexdigest(), hashlib.sha256(sys.stdin.buffer.read()).hexdigest(), "
               "__import__('os').environ['MODE'])",
               files={"in/bin.dat": blob}, stdin=blob[::-1], env={"MODE": "fast"})
    import hashlib
    t.ok(r.stdout.decode().split() == [hashlib.sha256(blob).hexdigest(),
                                       hashlib.sha256(blob[::-1]).hexdigest(), "fast"],
         "%s: binary files and stdin (not UTF-8) and env reach the job byte for byte" % name, r)
    e = raises(lambda: cl.run("x = 1", tier="no-such-tier"), airlock.Rejected)
    t.ok(isinstance(e, airlock.Rejected) and "no-such-tier" in str(e) and
         e.result.status == "rejected", "%s: an unknown tier raises Rejected, naming it" % name,
         e)
    e = raises(lambda: cl.run("import time\nwhile True: time.sleep(0.05)", timeout=1), airlock.Timeout)
    t.ok(isinstance(e, airlock.Timeout) and e.result.status == "timeout",
         "%s: past its wall-clock limit raises Timeout" % name, e)
    e = raises(lambda: cl.run("import time\nwhile True: pass", limits={"cpu_ms": 300}),
               airlock.CpuLimit)
    t.ok(isinstance(e, airlock.CpuLimit), "%s: past its CPU time raises CpuLimit" % name, e)
    e = raises(lambda: cl.run("b = bytearray(200 << 20)", memory=64 << 20), airlock.MemoryLimit)
    t.ok(isinstance(e, airlock.MemoryLimit) and e.result.status == "memory_limit",
         "%s: past its memory raises MemoryLimit" % name, e)
    e = raises(lambda: cl.run("print('x' * 100000)", limits={"stdout_bytes": 1000}),
               airlock.OutputLimit)
    t.ok(isinstance(e, airlock.OutputLimit), "%s: past its output cap raises OutputLimit" % name,
         e)
    e = raises(lambda: cl.run("print(1)", tier="broken"), airlock.SandboxError)
    t.ok(isinstance(e, airlock.SandboxError) and "unavailable" in (e.result.error or ""),
         "%s: a tier whose backend this worker lacks raises SandboxError" % name, e)
    e = raises(lambda: cl.run("print(1)", tier="parked",
                              deadline_ms=int(time.time() * 1000) + 1500), airlock.Expired)
    t.ok(isinstance(e, airlock.Expired) and e.result.attempt == 0,
         "%s: not started by its deadline (a tier no worker serves) raises Expired" % name, e)

    jid = cl.submit("import time; time.sleep(30)")
    e = raises(lambda: cl.wait(jid, timeout=0.5), airlock.WaitTimeout)
    t.ok(isinstance(e, airlock.WaitTimeout), "%s: wait past its timeout raises WaitTimeout"
         % name, e)
    st, res = cl.status(jid)
    t.ok(st in ("queued", "running", "submitted") and res is None,
         "%s: status of a job under way: (%s, None)" % (name, st))
    t.ok(cl.cancel(jid) in ("kill_sent", "ended"), "%s: cancel a running job" % name)
    r = cl.wait(jid, timeout=30)
    e = raises(r.raise_for_status, airlock.Cancelled)
    st, res = cl.status(jid)
    t.ok(r.status == "cancelled" and isinstance(e, airlock.Cancelled) and st == "done" and
         res and res.status == "cancelled" and cl.cancel(jid) == "finished",
         "%s: its result is cancelled (Cancelled from raise_for_status), status done, a "
         "second cancel: finished" % name, (r, st))
    e = raises(lambda: cl.status("nosuchjob0123"), airlock.NotFound)
    t.ok(isinstance(e, airlock.NotFound), "%s: an unknown id raises NotFound" % name, e)

    # live output: each line while the job runs, then end; resume after a chunk
    jid = cl.submit(LINES)
    seen, t0 = [], time.monotonic()
    for ch in cl.stream(jid, timeout=60):
        seen.append((time.monotonic() - t0, ch))
    outs = [ch for _, ch in seen if ch.kind == "stdout"]
    text = b"".join(ch.data for ch in outs)
    end_at = seen[-1][0] if seen else 0
    t.ok(text == b"".join(b"line %d\n" % i for i in range(8)) and seen[-1][1].kind == "end" and
         seen[-1][1].status == "ok" and len(outs) >= 5 and outs and
         seen[0][0] < end_at - 0.4,
         "%s: stream() gives the lines as they come (%d chunks, the first %.2f s before "
         "the end), then end" % (name, len(outs), end_at - seen[0][0] if seen else 0),
         [(round(a, 2), c.kind, c.data) for a, c in seen])
    if len(seen) > 3:
        rest = list(cl.stream(jid, after=seen[2][1].id, timeout=30))
        t.ok([c.id for c in rest] == [c.id for _, c in seen[3:]],
             "%s: stream(after=the third chunk's id) gives exactly the rest" % name,
             ([c.id for c in rest], [c.id for _, c in seen]))
    else:
        t.ok(False, "%s: too few chunks to resume" % name, seen)
    e = raises(lambda: list(cl.stream("nosuchjob0123", timeout=5)), airlock.NotFound)
    t.ok(isinstance(e, airlock.NotFound), "%s: stream of an unknown job raises NotFound" % name,
         e)

    # a grading job: the build once, each test's verdict
    tests = [{"name": "one", "stdin": "1 2\n", "expect": "3\n"},
             {"name": "two", "stdin": "5 5\n", "expect": "x\n", "compare": "exact"},
             {"name": "bad", "stdin": b"\xff \xfe\n", "files": {"in.dat": b"\x00\xff"},
              "timeout": 5}]
    r = cl.grade(tests, argv=["/bin/sh", "run.sh"],
                 build=["/bin/sh", "-c", "printf 'read a b\\necho $((a + b))\\n' > run.sh"])
    t.ok(r.status == "ok" and r.exit_code == 1 and not r.all_accepted and
         r.build and r.build.verdict == "accepted" and
         [x.verdict for x in r.tests] == ["accepted", "wrong_answer", "runtime_error"] and
         r.tests[1].detail == 'line 1: expected "x", got "10"' and r.tests[0].stdout == b"3\n"
         and isinstance(r.tests[2], airlock.TestResult) and r.tests[2].exit_code,
         "%s: grade(): the build, then each test's verdict (TestResult), bytes stdin and "
         "files" % name, r)
    r = cl.grade(tests[:1], argv=["/bin/true"], build=["/bin/sh", "-c", "echo nope >&2; exit 4"])
    e = raises(r.raise_for_status, airlock.CompileError)
    t.ok(r.status == "compile_error" and r.tests == [] and r.stderr == b"nope\n" and
         r.exit_code == 4 and r.build.verdict == "compile_error" and
         isinstance(e, airlock.CompileError),
         "%s: grade(): a failing build is a compile_error Result (CompileError from "
         "raise_for_status), no test run" % name, r)
    r = cl.grade([{"name": "one", "stdin": "1 2\n", "expect": "3\n"}], language="python3",
                 files={"main.py": "a, b = map(int, input().split())\nprint(a + b)\n"})
    t.ok(r.status == "ok" and [x.verdict for x in r.tests] == ["accepted"],
         "%s: grade(language=\"python3\") with no argv: the language's command runs "
         "main.py" % name, r)
    e = raises(lambda: cl.grade(tests, argv=["/bin/true"], tier="broken"), airlock.Rejected)
    t.ok(isinstance(e, airlock.Rejected) and "does not run grading jobs" in str(e),
         "%s: grade() on a tier that cannot grade raises Rejected, saying why" % name, e)

    d = tempfile.mkdtemp()
    os.makedirs(os.path.join(d, "files", "lib"))
    os.makedirs(os.path.join(d, "tests"))
    with open(os.path.join(d, "grade.yaml"), "w") as f:
        f.write("argv: [/bin/sh, run.sh]\ncompare: tokens\nlimits: {wall_ms: 5000}\n"
                "per_test:\n  c2: {points: 4, hidden: true}\n")
    with open(os.path.join(d, "files", "run.sh"), "w") as f:
        f.write(". lib/add.sh\n")
    with open(os.path.join(d, "files", "lib", "add.sh"), "w") as f:
        f.write("read a b\necho $((a + b)) \"$@\"\n")
    for n, (i, o, a) in enumerate([("1 2", " 3 \n", None), ("2 2", "9", None),
                                   ("0 1", "1 x y", "x\ny\n")]):
        for ext, v in (("in", i), ("out", o), ("args", a)):
            if v is not None:
                with open(os.path.join(d, "tests", "c%d.%s" % (n, ext)), "w") as f:
                    f.write(v)
    r = cl.grade_dir(d)
    t.ok([x.name for x in r.tests] == ["c0", "c1", "c2"] and
         [x.verdict for x in r.tests] == ["accepted", "wrong_answer", "accepted"] and
         (r.score, r.max_score) == (5, 6) and r.tests[2].hidden,
         "%s: grade_dir(): grade.yaml (per_test: a test's points, hidden), files/ (a "
         "subdirectory too), tests/NAME.in/.out/.args, as airlock grade reads them" % name,
         (r.tests, r.score, r.max_score))
    e = raises(lambda: cl.grade_dir(os.path.join(d, "files")), ValueError)
    t.ok(isinstance(e, ValueError) and "no tests" in str(e),
         "%s: grade_dir() of a directory without tests: ValueError, saying so" % name, e)

    a = cl.run_python("print(6*7)")
    b = cl.run_python("import sys; sys.stderr.write('bad\\n'); sys.exit(2)")
    c_ = cl.run_python("import time\nwhile True: time.sleep(0.05)", timeout=1)
    t.ok(a == {"stdout": "42\n", "stderr": "", "exit_code": 0, "status": "ok", "files": {}} and
         b == {"stdout": "", "stderr": "bad\n", "exit_code": 2, "status": "nonzero_exit",
               "files": {}} and
         c_["status"] == "timeout" and c_["exit_code"] is None and
         "wall-clock limit" in c_["stderr"] and set(c_) == {"stdout", "stderr", "exit_code",
                                                            "status", "files"},
         "%s: run_python: the five fields, a non-zero exit and a timeout as values" % name,
         (a, b, c_))
    flood = "print('head' + 'x' * 100000 + 'tail')"
    cut = cl.run_python(flood, output_max=1000)
    whole = cl.run(flood)
    t.ok(cut["stdout"].startswith("headxxx") and cut["stdout"].endswith("xxtail\n") and
         "[airlock: 99009 of 100009 bytes cut here; the head and tail are shown]" in
         cut["stdout"] and len(cut["stdout"]) < 1100 and len(whole.stdout) == 100009,
         "%s: run_python(output_max=1000): a 100 KB print keeps its head and tail around a "
         "line saying how much was cut; the job's Result keeps it whole" % name,
         (cut["stdout"][:80], len(cut["stdout"])))
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    d = cl.run_python("import os\nrows = open('in/data.csv').read().split()\n"
                      "os.makedirs('out/deep')\n"
                      "open('out/sum.txt', 'w').write(str(sum(int(x) for x in rows[1].split(','))))\n"
                      "open('out/deep/no.txt', 'w').write('deeper')\n"
                      "open('chart.png', 'wb').write(open('in/chart.bin', 'rb').read())\n"
                      "open('.dot.png', 'wb').write(b'hidden')\nprint('done')",
                      files={"in/data.csv": b"a,b\n1,2\n", "in/chart.bin": png},
                      collect=["out/*.txt"])
    e = raises(lambda: cl.run_python("1", collect=["f%d" % i for i in range(16)]), ValueError)
    t.ok(d["status"] == "ok" and d["files"] == {"out/sum.txt": b"3", "chart.png": png} and
         isinstance(e, ValueError) and "at most 15" in str(e),
         "%s: run_python with files in and collect globs: the files come back as {path: "
         "bytes}, a *.png the code saved too, unnamed (not a dot file, nor a deeper match); "
         "16 globs besides *.png: ValueError" % name, (d, e))


def main():
    # the package's scripts are the document's, word for word
    doc = open(os.path.join(ROOT, "proto", "PROTOCOL.md")).read()
    blocks = {m.group(1): m.group(2) for m in
              re.finditer(r"<!-- script: (\w+) -->\n```lua\n(.*?)\n```", doc, re.S)}
    t.ok(blocks.get("submit") == _scripts.SUBMIT and blocks.get("await") == _scripts.AWAIT and
         blocks.get("lookup") == _scripts.LOOKUP and
         blocks.get("session_call") == _scripts.SESSION_CALL,
         "the package's SUBMIT, LOOKUP, AWAIT and SESSION_CALL are the document's")
    for status, exc in (("rejected", airlock.Rejected), ("timeout", airlock.Timeout),
                        ("cpu_limit", airlock.CpuLimit), ("memory_limit", airlock.MemoryLimit),
                        ("output_limit", airlock.OutputLimit), ("cancelled", airlock.Cancelled),
                        ("sandbox_error", airlock.SandboxError),
                        ("worker_lost", airlock.WorkerLost), ("expired", airlock.Expired)):
        e = raises(airlock.Result(id="x", status=status).raise_for_status, exc)
        t.ok(type(e) is exc, "Result(status=%s).raise_for_status raises %s" % (status,
                                                                               exc.__name__), e)
    t.ok(airlock.Result(id="x", status="nonzero_exit", exit_code=1).raise_for_status().exit_code
         == 1, "nonzero_exit raises nothing")

    # the README's commands: a plain venv (no system packages: no wheel), pip
    # install ./client/python with no index (it failed: "invalid command
    # 'bdist_wheel'")
    with tempfile.TemporaryDirectory() as d:
        venv = os.path.join(d, "venv")
        p = subprocess.run(["/usr/bin/python3", "-m", "venv", venv],
                           capture_output=True, text=True)
        q = p.returncode == 0 and subprocess.run(
            [os.path.join(venv, "bin", "pip"), "install", "-q", "--no-index",
             os.path.join(HERE, "..")], capture_output=True, text=True, cwd=d)
        r = q and q.returncode == 0 and subprocess.run(
            [os.path.join(venv, "bin", "python"), "-c",
             "import airlock, os; print(os.path.dirname(airlock.__file__), airlock.__version__)"],
            capture_output=True, text=True, cwd=d)
        m = r and r.returncode == 0 and subprocess.run(
            [os.path.join(venv, "bin", "airlock-mcp"), "--help"], capture_output=True, text=True,
            cwd=d)
        t.ok(m and m.returncode == 0 and venv in r.stdout and "--tier" in m.stdout,
             "pip install ./client/python in a plain venv (no index, no wheel): the package "
             "and airlock-mcp", (p.stderr[-300:], q and q.stderr[-800:], r and r.stdout,
                                 m and m.stderr))
        e = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "--no-index",
                            "-e", os.path.join(HERE, "..")], capture_output=True, text=True,
                           cwd=d)
        r = e.returncode == 0 and subprocess.run(
            [os.path.join(venv, "bin", "python"), "-c", "import airlock; print(airlock.__file__)"],
            capture_output=True, text=True, cwd=d)
        t.ok(r and r.returncode == 0 and
             r.stdout.strip() == os.path.join(os.path.abspath(os.path.join(HERE, "..")),
                                              "airlock", "__init__.py"),
             "pip install -e ./client/python: the source tree imported", (e.stderr[-500:],
                                                                        r and r.stdout))

    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        c.worker("py-w", uid_base=62900, slots=2, tiers="trusted,broken",
                 extra=["--libvirt", "qemu+unix:///system?socket=/nonexistent/libvirt-sock"])
        keys = {"acme": "ak-" + secrets.token_hex(16), "other": "ok-" + secrets.token_hex(16),
                "limited": "lk-" + secrets.token_hex(16)}
        port = free_port()
        start_gateway(c, port, key_file(os.path.join(c.dir, "keys"), keys))
        gw = "http://127.0.0.1:%d" % port
        suite("gateway", airlock.Client(gateway=gw, token=keys["acme"], tier="trusted"))
        suite("redis", airlock.Client(redis=c.url, tier="trusted"))

        acme = airlock.Client(gateway=gw, token=keys["acme"], tier="trusted")
        other = airlock.Client(gateway=gw, token=keys["other"], tier="trusted")
        jid = acme.submit("print('mine')")
        e = raises(lambda: other.status(jid), airlock.NotFound)
        e2 = raises(lambda: list(other.stream(jid, timeout=5)), airlock.NotFound)
        t.ok(isinstance(e, airlock.NotFound) and isinstance(e2, airlock.NotFound),
             "gateway: another tenant's job is NotFound to status and stream", (e, e2))
        e = raises(lambda: airlock.Client(gateway=gw, token="wrong-key-123456",
                                          tier="trusted").run("print(1)"), airlock.Unauthorized)
        t.ok(isinstance(e, airlock.Unauthorized), "gateway: a bad key raises Unauthorized", e)
        e = raises(lambda: airlock.Client(gateway="http://127.0.0.1:%d" % free_port(),
                                          token="k" * 20, tier="trusted").run("print(1)"),
                   airlock.Unavailable)
        t.ok(isinstance(e, airlock.Unavailable), "gateway: nobody listening raises Unavailable",
             e)
        e = raises(lambda: airlock.Client(redis="unix:///nonexistent/redis.sock",
                                          tier="trusted").run("print(1)"), airlock.Unavailable)
        t.ok(isinstance(e, airlock.Unavailable), "redis: no Redis raises Unavailable", e)
        lim = airlock.Client(gateway=gw, token=keys["limited"], tier="trusted")
        ids = [lim.submit("pass") for _ in range(8)]
        errs = [raises(lambda j=j: lim.wait(j, timeout=30).raise_for_status(),
                       airlock.QuotaExceeded) for j in ids]
        q = [x for x in errs if isinstance(x, airlock.QuotaExceeded)]
        t.ok(q and all(x.quota == "rate_per_s" for x in q),
             "gateway: past the tenant's rate, QuotaExceeded with .quota rate_per_s (%d of 8)"
             % len(q), errs)
        e = raises(lambda: airlock.Client(redis=c.url, tier="trusted").submit(
            "print(1)", id=jid), airlock.Rejected)
        t.ok(isinstance(e, airlock.Rejected) and "taken" in str(e),
             "redis: an id that is taken raises Rejected", e)
        # fault injection (entries written here, as a fenced-out worker would): a late
        # chunk of attempt 1 after attempt 2's output is not the job's
        import redis
        rr = redis.Redis(unix_socket_path=c.sock)
        rr.hset("al:job:stale-1", mapping={"state": "running", "tenant": "default"})
        for f in ({"t": "out", "a": "2", "d": "new run\n"}, {"t": "out", "a": "1", "d": "LATE\n"},
                  {"t": "end", "a": "2", "s": "ok"}):
            rr.xadd("al:out:stale-1", f)
        got = [(ch.kind, ch.data) for ch in airlock.Client(redis=c.url).stream("stale-1",
                                                                              timeout=10)]
        t.ok(got == [("stdout", b"new run\n"), ("end", b"")],
             "stream(): a late chunk of an older attempt (a fenced-out worker's) is dropped", got)
        # a Redis user that may not XREAD (an ACL from before live output): waits poll
        rr.acl_setuser("noread", enabled=True, passwords=["+pw-noread"], keys=["*"],
                       channels=["*"], categories=["+@all"], commands=["-xread"])
        nr = airlock.Client(redis="unix://%s?user=noread&password=pw-noread" % c.sock,
                            tier="trusted")
        t0 = time.monotonic()
        r = nr.run("import time; time.sleep(0.5); print('polled')")
        took = time.monotonic() - t0
        t.ok(r.stdout == b"polled\n" and took < 5,
             "redis: a user without XREAD still waits (polling AWAIT): the result in %.1f s"
             % took, r)
        os.environ.update(AIRLOCK_GATEWAY=gw, AIRLOCK_TOKEN=keys["acme"], AIRLOCK_TIER="trusted")
        t.ok(airlock.run_python("print('from the environment')")["stdout"] ==
             "from the environment\n",
             "airlock.run_python: the Airlock and tier from $AIRLOCK_GATEWAY, $AIRLOCK_TOKEN, "
             "$AIRLOCK_TIER")
    finally:
        c.close()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
