#!/usr/bin/python3
"""Grading jobs (PROTOCOL.md, "Grading jobs") through a real redis-server,
scheduler and worker, on the process, container and untrusted (microVM,
toolchain image) tiers: a C++ solution built once and run against 20 tests
of which one expects other output (that one wrong_answer with the differing
line, the rest accepted); a test that loops (cpu_limit) and the next test
still runs; a test that allocates past its memory (memory_limit); a test
that writes into the build output (refused: read-only) and into its own
temporary space, and the next test sees neither; a solution that does not
compile (compile_error, no test run, the compiler's message); 256 tests in
one job; stop at the first failure; a Python solution on the python image.
`airlock grade` reads a directory (grade.yaml, files/, tests/NAME.in/.out)
and a YAML file, prints the verdict table and exits 0/1/3. Bad input: a
tier whose backend cannot grade, a test's limit above the tier's maximum, a
grading job with network, a directory without tests, a file of another
kind, invalid YAML: each refused with its own message. The same through the
gateway in JSON. A worker killed during a grading job: its restart removes the
build tree left mounted."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile

import msgpack

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import CLI, Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402
from gwclient import Api, free_port, key_file, start_gateway  # noqa: E402

t = Tap()
need_root("the sandboxes")
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")

GRADE_MAX = {"wall_ms": 120000, "cpu_ms": 120000, "memory_bytes": 1073741824, "pids": 256,
             "disk_bytes": 268435456}
POLICY = policy(
    tier_def("trusted", "process", images=["toolchain", "python"], image="toolchain",
             defaults=DEFAULTS, max=GRADE_MAX),
    tier_def("internal", "container", images=["toolchain", "python"], image="toolchain",
             defaults=DEFAULTS),
    tier_def("untrusted", "microvm", images=["toolchain", "python"], image="toolchain",
             defaults=dict(DEFAULTS, wall_ms=60000),
             max=dict(GRADE_MAX, wall_ms=600000, cpu_ms=600000)),
    tier_def("bench", "noop", max_attempts=None))

# One program for every kind of test: the first word of stdin says which.
SOLUTION = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

int main()
{
	char op[16] = {0};
	long a = 0, b = 0;

	if (scanf("%15s", op) != 1)
		return 2;
	if (!strcmp(op, "add") && scanf("%ld %ld", &a, &b) == 2) {
		printf("%ld\n", a + b);
		return 0;
	}
	if (!strcmp(op, "loop"))
		for (volatile unsigned long i = 0;; i++)
			;
	if (!strcmp(op, "alloc")) {
		size_t n = 512u << 20;
		volatile char *p = (volatile char *)malloc(n);

		if (!p)
			return 3;
		for (size_t i = 0; i < n; i += 4096)
			p[i] = 1;
		printf("%d\n", p[n - 4096]);
		return 0;
	}
	if (!strcmp(op, "write")) {
		FILE *f = fopen("leftover", "w"), *g = fopen("/tmp/leftover", "w");

		printf("%s %s\n", f ? "wrote-work" : "work-read-only", g ? "wrote-tmp" : "no-tmp");
		return 0;
	}
	if (!strcmp(op, "check")) {
		printf("%s %s\n", access("leftover", F_OK) ? "work-clean" : "work-dirty",
		       access("/tmp/leftover", F_OK) ? "tmp-clean" : "tmp-dirty");
		return 0;
	}
	return 1;
}
"""
BROKEN = "int main() { return missing_function(); }\n"
BUILD = {"argv": ["g++", "-O1", "-o", "main", "main.cpp"],
         "limits": {"wall_ms": 120000, "cpu_ms": 120000, "memory_bytes": 536870912}}


def main_tests():
    """20 sums (#8 expects another answer), then loop, a sum, alloc, write, check."""
    tests = [{"name": "sum-%02d" % i, "stdin": "add %d %d\n" % (i, i), "expect": "%d\n" % (2 * i)}
             for i in range(20)]
    tests[7]["expect"] = "999\n"
    tests += [
        {"name": "loop", "stdin": "loop\n", "limits": {"cpu_ms": 500, "wall_ms": 10000}},
        {"name": "after-loop", "stdin": "add 2 3\n", "expect": "5\n"},
        {"name": "alloc", "stdin": "alloc\n", "limits": {"memory_bytes": 64 << 20}},
        {"name": "write", "stdin": "write\n", "expect": "work-read-only wrote-tmp\n"},
        {"name": "check", "stdin": "check\n", "expect": "work-clean tmp-clean\n"},
    ]
    return tests


def job(c, tier, **kw):
    j = {"v": 1, "id": "g-%s-%s" % (tier, os.urandom(4).hex()), "tier": tier}
    j.update(kw)
    return j


def verdicts(res):
    return [x["verdict"] for x in (res or {}).get("tests", [])]


c = None
try:
    c = Cluster(policy=POLICY)
    c.scheduler()
    c.worker("grade-w", uid_base=63500, slots=2, tiers="trusted,internal,untrusted",
             extra=["--images", IMAGES, "--vm-accel", "tcg"])

    for tier, backend in (("trusted", "process"), ("internal", "container"),
                          ("untrusted", "microvm")):
        res = c.run_job(job(c, tier, argv=["./main"], build=BUILD, tests=main_tests(),
                            files=[{"path": "main.cpp", "data": SOLUTION.encode()}]),
                        timeout=900)
        v = verdicts(res)
        t.ok(res and res["status"] == "ok" and res["exit_code"] == 1 and
             res.get("build", {}).get("verdict") == "accepted" and len(v) == 25,
             "%s: the build once, then 25 tests; the job ok, exit code 1 (one test failed)"
             % backend, res and {k: res.get(k) for k in ("status", "error", "exit_code", "build")})
        if not res or len(v) != 25:
            continue
        tr = res["tests"]
        t.ok(v[:7] + v[8:20] == ["accepted"] * 19 and v[7] == "wrong_answer" and
             tr[7]["detail"] == 'line 1: expected "999", got "14"',
             "%s: 19 sums accepted; the wrong one says its first differing line" % backend,
             (v, tr[7]))
        t.ok(v[20] == "timeout" and "CPU-time" in tr[20]["detail"] and tr[20]["cpu_ms"] >= 450 and
             v[21] == "accepted",
             "%s: the loop ends at its CPU limit (%d ms by the cgroup), the next test runs"
             % (backend, tr[20]["cpu_ms"]), tr[20:22])
        t.ok(v[22] == "memory_limit", "%s: the allocation past 64 MiB is memory_limit" % backend,
             tr[22])
        t.ok(v[23] == "accepted" and v[24] == "accepted",
             "%s: a test cannot write the build output, and its /tmp is gone for the next"
             % backend, tr[23:25])
        t.ok(all(x["wall_ms"] < 15000 for x in tr) and
             res["cpu_ms"] >= sum(x["cpu_ms"] for x in tr),
             "%s: per-test wall and CPU time; the job's CPU time is their sum and the "
             "build's" % backend, [(x["name"], x["wall_ms"], x["cpu_ms"]) for x in tr])

        res = c.run_job(job(c, tier, argv=["./main"], build=BUILD,
                            tests=main_tests()[:3],
                            files=[{"path": "main.cpp", "data": BROKEN.encode()}]), timeout=900)
        t.ok(res and res["status"] == "compile_error" and res.get("tests") == [] and
             b"missing_function" in (res["stderr"] if isinstance(res["stderr"], bytes)
                                     else res["stderr"].encode()) and
             res["build"]["verdict"] == "compile_error" and res["exit_code"] == 1,
             "%s: a solution that does not compile: compile_error with the compiler's "
             "message, no test run" % backend,
             res and {k: res.get(k) for k in ("status", "error", "stderr", "tests")})

        # 256 tests: a shell solution, no build
        tests = [{"name": "n%03d" % i, "stdin": "%d %d\n" % (i, 1), "expect": "%d\n" % (i + 1)}
                 for i in range(256)]
        res = c.run_job(job(c, tier, runtime="sh", code="read a b\necho $((a + b))\n",
                            tests=tests), timeout=900)
        t.ok(res and res["status"] == "ok" and verdicts(res) == ["accepted"] * 256 and
             res["exit_code"] == 0,
             "%s: 256 tests in one job, all accepted, exit code 0" % backend,
             res and (res.get("error"), verdicts(res)[:5], len(verdicts(res))))

    # a Python solution on the python image, stopping at the first failure
    py = "a, b = map(int, input().split())\nprint(a + b)\n"
    tests = [{"name": "a", "stdin": "1 2\n", "expect": "3\n"},
             {"name": "b", "stdin": "1 1\n", "expect": "3\n"},
             {"name": "c", "stdin": "2 2\n", "expect": "4\n"},
             {"name": "d", "stdin": "x y\n", "expect": "0\n"}]
    for tier, backend in (("trusted", "process"), ("untrusted", "microvm")):
        res = c.run_job(job(c, tier, image="python", argv=["python3", "sol.py"], tests=tests,
                            files=[{"path": "sol.py", "data": py.encode()}]), timeout=600)
        t.ok(verdicts(res) == ["accepted", "wrong_answer", "accepted", "runtime_error"] and
             b"ValueError" in res["tests"][3]["stderr"] and res["tests"][3]["exit_code"] == 1,
             "%s: a Python solution on the python image: each test's verdict, a traceback "
             "is runtime_error with its stderr" % backend, res and res.get("tests"))
        res = c.run_job(job(c, tier, image="python", argv=["python3", "sol.py"], tests=tests,
                            stop_on_failure=True,
                            files=[{"path": "sol.py", "data": py.encode()}]), timeout=600)
        t.ok(verdicts(res) == ["accepted", "wrong_answer", "skipped", "skipped"] and
             res["tests"][2]["cpu_ms"] == 0,
             "%s: stop_on_failure: the tests after the first failure are skipped, not run"
             % backend, res and res.get("tests"))

    # System V IPC between tests (the hardening issue, finding 5): test 0
    # leaves its hidden stdin in a shared-memory segment and a message
    # queue; test 1 must find neither (each step its own IPC namespace)
    ipc = ("import ctypes, struct, sys\n"
           "libc = ctypes.CDLL(None, use_errno=True)\n"
           "libc.shmat.restype = ctypes.c_void_p\n"
           "KEY, CREATE = 0x41524c4b, 0o1000\n"
           "if sys.argv[1] == 'put':\n"
           "    data = sys.stdin.buffer.read()\n"
           "    shm = libc.shmget(KEY, 4096, CREATE | 0o666)\n"
           "    ctypes.memmove(libc.shmat(shm, None, 0), data, len(data))\n"
           "    mq = libc.msgget(KEY, CREATE | 0o666)\n"
           "    msg = struct.pack('l', 1) + data\n"
           "    sent = libc.msgsnd(mq, msg, len(data), 0)\n"
           "    print('put', libc.shmget(KEY, 0, 0o666) >= 0, sent == 0)\n"
           "else:\n"
           "    print('found', libc.shmget(KEY, 0, 0o666) >= 0, libc.msgget(KEY, 0o666) >= 0)\n")
    ipc_tests = [{"name": "put", "argv": ["put"], "stdin": "hidden input of test 0\n",
                  "expect": "put True True\n"},
                 {"name": "get", "argv": ["get"], "expect": "found False False\n"}]
    for tier, backend in (("trusted", "process"), ("internal", "container"),
                          ("untrusted", "microvm")):
        res = c.run_job(job(c, tier, image="python", argv=["python3", "ipc.py"], tests=ipc_tests,
                            files=[{"path": "ipc.py", "data": ipc.encode()}]), timeout=600)
        t.ok(verdicts(res) == ["accepted", "accepted"],
             "%s: a test's System V shared memory and message queue are gone for the next "
             "test (its own IPC namespace)" % backend,
             res and [(x["verdict"], x["stdout"], x.get("detail")) for x in res.get("tests", [])])

    # airlock grade: a directory
    d = tempfile.mkdtemp(dir=c.dir)
    os.makedirs(d + "/files")
    os.makedirs(d + "/tests")
    with open(d + "/files/main.cpp", "w") as f:
        f.write(SOLUTION)
    with open(d + "/grade.yaml", "w") as f:
        f.write("tier: trusted\nbuild:\n  argv: [g++, -O1, -o, main, main.cpp]\n"
                "  limits: {wall_ms: 120000, cpu_ms: 120000}\nargv: [./main]\n"
                "compare: tokens\nlimits: {wall_ms: 5000}\n")
    for i in range(4):
        with open(d + "/tests/case%d.in" % i, "w") as f:
            f.write("add %d 1\n" % i)
        with open(d + "/tests/case%d.out" % i, "w") as f:
            f.write("  %d  \n\n" % (i + 1 if i != 2 else 7))
    p = c.cli("grade", d, timeout=300)
    out = p.stdout.decode()
    rows = [line.split() for line in out.splitlines()[1:] if re.match(r"\s*(\d+|-)\s", line)]
    t.ok(p.returncode == 1 and [r[2] for r in rows] == ["accepted", "accepted", "accepted",
                                                        "wrong_answer", "accepted"] and
         'expected "7", got "3"' in out and "4/5 accepted" not in out and
         "3/4 accepted" in out,
         "airlock grade DIR: grade.yaml, files/, tests/NAME.in and .out (tokens): the build "
         "and each test's verdict in a table, exit code 1", (p.returncode, out,
                                                             p.stderr.decode()))
    p = c.cli("grade", "--json", d, timeout=300)
    doc = json.loads(p.stdout or b"{}")
    t.ok(p.returncode == 1 and [x["name"] for x in doc.get("tests", [])] ==
         ["case0", "case1", "case2", "case3"],
         "airlock grade --json: the result, tests named after their files, in name order",
         (p.returncode, p.stdout[:400]))
    y = os.path.join(c.dir, "py.yaml")
    with open(os.path.join(c.dir, "sol.py"), "w") as f:
        f.write(py)
    with open(y, "w") as f:
        f.write("tier: trusted\nimage: python\nargv: [python3, sol.py]\n"
                "files:\n  - {path: sol.py, data_from: sol.py}\n"
                "tests:\n  - {name: one, stdin: \"1 2\\n\", expect: \"3\\n\"}\n"
                "  - {name: two, stdin: \"5 5\\n\", expect: \"10\\n\", compare: exact}\n")
    p = c.cli("grade", y, timeout=300)
    t.ok(p.returncode == 0 and "2/2 accepted" in p.stdout.decode(),
         "airlock grade FILE.yaml: the job in YAML, a file read with data_from; exit code 0",
         (p.returncode, p.stdout.decode(), p.stderr.decode()))
    # the directory form says what the JSON form says (issue 59): fractional
    # tolerances, per-test points, groups and hidden tests (per_test:)
    fd = tempfile.mkdtemp(dir=c.dir)
    os.makedirs(fd + "/tests")
    with open(fd + "/grade.yaml", "w") as f:
        f.write("tier: trusted\nruntime: python\ncode: \"print(float(input()) / 3)\"\n"
                "group_scoring: sum\ncompare: float\nper_test:\n"
                "  a: {points: 10, group: small, abs_tol: 0.001}\n"
                "  b: {points: 20, group: big, hidden: true, rel_tol: 1e-6}\n"
                "  c: {points: 5, group: big}\n")
    for n, i, o in (("a", "1", "0.3333"), ("b", "3", "1.0"), ("c", "2", "0.5")):
        with open("%s/tests/%s.in" % (fd, n), "w") as f:
            f.write(i + "\n")
        with open("%s/tests/%s.out" % (fd, n), "w") as f:
            f.write(o + "\n")
    fj = os.path.join(c.dir, "frac.json")
    with open(fj, "w") as f:
        json.dump({"tier": "trusted", "runtime": "python", "code": "print(float(input()) / 3)",
                   "group_scoring": "sum", "tests": [
                       {"name": "a", "stdin": "1\n", "expect": "0.3333\n", "compare": "float",
                        "points": 10, "group": "small", "abs_tol": 0.001},
                       {"name": "b", "stdin": "3\n", "expect": "1.0\n", "compare": "float",
                        "points": 20, "group": "big", "hidden": True, "rel_tol": 1e-6},
                       {"name": "c", "stdin": "2\n", "expect": "0.5\n", "compare": "float",
                        "points": 5, "group": "big"}]}, f)

    def shown(*a):
        doc = json.loads(c.cli("grade", "--print-job", *a, timeout=60).stdout or b"{}")
        doc.pop("id", None)
        return doc
    pd, pj = shown(fd), shown(fj)
    gd = json.loads(c.cli("grade", "--json", fd, timeout=300).stdout or b"{}")
    gj = json.loads(c.cli("grade", "--json", fj, timeout=300).stdout or b"{}")

    def verdicts(g):
        return ([(x.get("name"), x.get("verdict"), x.get("points")) for x in g.get("tests", [])],
                g.get("score"), g.get("max_score"))
    t.ok(pd and pd == pj and pd["tests"][0]["abs_tol"] == 0.001 and
         verdicts(gd) == verdicts(gj) and verdicts(gd)[1:] == (30, 35) and
         [v for _, v, _ in verdicts(gd)[0]] == ["accepted", "accepted", "wrong_answer"],
         "grade.yaml's per_test (points, groups, hidden) and fractional tolerances (0.001, "
         "1e-6) make the same job as the JSON form, and the same verdicts and score",
         (verdicts(gd), verdicts(gj), pd == pj))
    text = open(fd + "/grade.yaml").read()
    with open(fd + "/grade.yaml", "w") as f:
        f.write(text.replace("group_scoring: sum", "group_scoring: min"))
    pm = shown(fd)
    gm = json.loads(c.cli("grade", "--json", fd, timeout=300).stdout or b"{}")
    t.ok(pm.get("group_scoring") == "min" and verdicts(gm)[1:] == (10, 35) and
         [(g.get("name"), g.get("score")) for g in gm.get("groups", [])] ==
         [("small", 10), ("big", 0)],
         "group_scoring: min (CMS's GroupMin) is accepted and kept: the group with a wrong "
         "answer earns 0 of its 25, as all-or-nothing (a test scores 1 or 0)",
         (pm.get("group_scoring"), verdicts(gm), gm.get("groups")))
    with open(fd + "/grade.yaml", "w") as f:
        f.write(text.replace("{points: 20,", "{points: many,"))
    p = c.cli("grade", "--print-job", fd, timeout=60)
    with open(fd + "/grade.yaml", "w") as f:
        f.write(text + "limits: {wall_ms: soon}\n")
    p2 = c.cli("grade", "--print-job", fd, timeout=60)
    t.ok(p.returncode != 0 and b"grade.yaml:8: tests[1].points:" in p.stderr and
         p2.returncode != 0 and b"grade.yaml:10: limits.wall_ms:" in p2.stderr,
         "a field grade.yaml gets wrong is named with its file and line (a per_test "
         "entry's, a top-level one's)", (p.stderr, p2.stderr))
    with open(fd + "/grade.yaml", "w") as f:
        f.write(text + "  nosuch: {points: 1}\n")
    p = c.cli("grade", "--print-job", fd, timeout=60)
    t.ok(p.returncode != 0 and b"per_test.nosuch: no test of that name (tests/nosuch.in)"
         in p.stderr, "per_test naming a test there is no file for: refused, named",
         p.stderr)
    with open(y, "a") as f:
        f.write("  - {name: three, stdin: \"x y\\n\", expect: \"0\\n\"}\n")
    p = c.cli("grade", y, timeout=300)
    out = p.stdout.decode()
    t.ok(p.returncode == 1 and "2/3 accepted" in out and
         re.search(r"^        \| Traceback \(most recent call last\):$", out, re.M) and
         re.search(r"^        \| ValueError: ", out, re.M),
         "airlock grade: a runtime_error's stderr under its row (the first 2 KiB)", out)
    with open(os.path.join(c.dir, "broken.yaml"), "w") as f:
        f.write("tier: trusted\nargv: [./main]\nbuild: {argv: [g++, -o, main, main.cpp]}\n"
                "files: [{path: main.cpp, data: \"int main( {\"}]\n"
                "tests: [{name: x, stdin: \"\"}]\n")
    p = c.cli("grade", os.path.join(c.dir, "broken.yaml"), timeout=300)
    t.ok(p.returncode == 3 and "compile_error" in p.stdout.decode() and
         "error:" in p.stdout.decode(),
         "airlock grade: a build that fails prints the compiler's output, exit code 3",
         (p.returncode, p.stdout.decode()))

    # through the gateway, in JSON: docs/api.md's example
    port = free_port()
    start_gateway(c, port, key_file(os.path.join(c.dir, "keys"), {"acme": "gk-grade-0123456789"}))
    st, doc = Api(port).call("POST", "/v1/run", key="gk-grade-0123456789", body={
        "tier": "trusted", "runtime": "sh", "code": "read a b; echo $((a+b))",
        "tests": [{"name": "one", "stdin": "1 2\n", "expect": "3\n"},
                  {"name": "two", "stdin": "2 2\n", "expect": "5\n"}]}, timeout=120)
    r = doc.get("result", {})
    t.ok(st == 200 and r.get("status") == "ok" and r.get("exit_code") == 1 and
         [x["verdict"] for x in r.get("tests", [])] == ["accepted", "wrong_answer"] and
         r["tests"][1]["detail"] == 'line 1: expected "5", got "4"' and
         r["tests"][0]["stdout"] == "3\n",
         "the gateway: a grading job in JSON, its verdicts in the JSON result", (st, doc))
    # the CLI's grade through the gateway: the same table and exit code as on Redis
    env = dict(os.environ, AIRLOCK_TOKEN="gk-grade-0123456789")
    gw = ["--gateway", "http://127.0.0.1:%d" % port]
    p = subprocess.run([CLI] + gw + ["grade", d], capture_output=True, env=env, timeout=300)
    out = p.stdout.decode()
    sub = subprocess.run([CLI] + gw + ["grade", "--submit", y], capture_output=True, env=env,
                         timeout=60)
    gid = sub.stdout.decode().strip()
    w = subprocess.run([CLI] + gw + ["wait", gid, "--json"], capture_output=True, env=env,
                       timeout=300)
    t.ok(p.returncode == 1 and "3/4 accepted" in out and 'expected "7", got "3"' in out and
         sub.returncode == 0 and gid.startswith("g") and w.returncode == 1 and
         [x["verdict"] for x in json.loads(w.stdout or b"{}").get("tests", [])] ==
         ["accepted", "accepted", "runtime_error"],
         "airlock --gateway URL grade DIR: the table and exit code 1 as on Redis; grade "
         "--submit FILE then wait --json: its verdicts (the gateway chose the id)",
         (p.returncode, out, p.stderr.decode(), sub.stderr.decode(), w.stdout[:300]))
    st, doc = Api(port).call("POST", "/v1/jobs", key="gk-grade-0123456789", body={
        "tier": "trusted", "argv": ["/bin/true"], "tests": [{"name": "x", "colour": "red"}]})
    t.ok(st == 400 and "tests[0]: unknown or repeated field" in doc.get("error", ""),
         "the gateway: a malformed test is 400, naming it", (st, doc))

    # bad input
    def refused(what, args, code, needle):
        p = c.cli("grade", *args, timeout=120)
        msg = p.stdout.decode() + p.stderr.decode()
        t.ok(p.returncode == code and needle in msg, "refused: %s (%s)" % (what, needle),
             (p.returncode, msg))

    refused("a tier whose backend cannot grade", ["--tier", "bench", y], 65,
            "does not run grading jobs")
    with open(os.path.join(c.dir, "big.yaml"), "w") as f:
        f.write("tier: trusted\nargv: [/bin/true]\n"
                "tests: [{name: x, limits: {wall_ms: 999999}}]\n")
    refused("a test's limit above the tier's maximum", [os.path.join(c.dir, "big.yaml")], 65,
            "tests[0].limits.wall_ms: 999999 is above tier trusted's maximum")
    with open(os.path.join(c.dir, "net.yaml"), "w") as f:
        f.write("tier: trusted\nargv: [/bin/true]\nnetwork: egress\ntests: [{name: x}]\n")
    refused("a grading job with network", [os.path.join(c.dir, "net.yaml")], 65,
            "a grading job runs without network")
    empty = tempfile.mkdtemp(dir=c.dir)
    refused("a directory without tests", [empty], 65, "no tests: expected tests/NAME.in")
    with open(os.path.join(c.dir, "job.txt"), "w") as f:
        f.write("x")
    refused("a file of another kind", [os.path.join(c.dir, "job.txt")], 65,
            "expected a directory, or a .json, .yaml or .yml file")
    with open(os.path.join(c.dir, "bad.yaml"), "w") as f:
        f.write("tier: [unclosed\n")
    refused("invalid YAML", [os.path.join(c.dir, "bad.yaml")], 65, "invalid YAML")
    with open(os.path.join(c.dir, "dup.yaml"), "w") as f:
        f.write("tier: trusted\nargv: [/bin/true]\ntests: [{name: x}, {name: x}]\n")
    refused("two tests of one name", [os.path.join(c.dir, "dup.yaml")], 65,
            "\"x\" is also tests[0]'s")
    refused("a missing file", [os.path.join(c.dir, "nope.yaml")], 66, "No such file")
    # a worker killed mid-job leaves a build tree (a mount); its restart sweeps it
    jid = "g-crash-%s" % os.urandom(4).hex()
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=msgpack.packb(job(c, "trusted", id=jid, runtime="sh", code="sleep 60",
                                           tests=[{"name": "slow"}]), use_bin_type=True),
                   capture_output=True)
    gdir = os.path.join(c.dir, "state", "grade-w", "grade")
    # its build tree made and mounted (the directory comes a moment before the mount)
    seen = c.wait_for(lambda: os.path.isdir(gdir) and os.listdir(gdir) and
                      any(gdir in line for line in open("/proc/self/mounts")), timeout=60)
    c.signal("grade-w", signal.SIGKILL)
    c.wait_exit("grade-w")
    mounted = any(gdir in line for line in open("/proc/self/mounts"))
    c.worker("grade-w", uid_base=63500, slots=2, tiers="trusted,internal,untrusted",
             extra=["--images", IMAGES, "--vm-accel", "tcg"])
    swept = c.wait_for(lambda: not os.path.isdir(gdir) or not os.listdir(gdir), timeout=30)
    t.ok(seen and mounted and swept and
         not any(gdir in line for line in open("/proc/self/mounts")),
         "a worker killed during a grading job leaves its build tree mounted; the restarted "
         "worker removes it", (seen, mounted, os.listdir(gdir) if os.path.isdir(gdir) else None))

    state = os.path.join(c.dir, "state", "grade-w")
    left = {d: os.listdir(os.path.join(state, d)) for d in ("grade", "process", "container")
            if os.path.isdir(os.path.join(state, d))}
    t.ok(not left.get("grade") and not left.get("process") and
         all(x in ("runtime", "hostimage") for x in left.get("container", [])),
         "no build tree or job directory is left behind", left)
finally:
    if c:
        c.close()

# The README's own grade.yaml (image: toolchain), with the shipped example
# policy, on each one-shot tier but the microVM's (its C++ build under TCG
# is the microVM suites' business): accepted wherever the policy offers it.
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
readme = open(os.path.join(ROOT, "README.md")).read()
m = re.search(r"^\$ cat hw3/grade.yaml\n(.*?)^\$ airlock grade", readme, re.M | re.S)
c = Cluster(policy=open(os.path.join(ROOT, "deploy", "policy.example.yaml")).read())
try:
    c.scheduler()
    c.worker("grade-ex", uid_base=63600, slots=1, tiers="trusted,internal",
             extra=["--images", IMAGES])
    d = tempfile.mkdtemp(dir=c.dir)
    os.makedirs(d + "/files")
    os.makedirs(d + "/tests")
    with open(d + "/grade.yaml", "w") as f:
        f.write(m.group(1) if m else "")
    with open(d + "/files/main.cpp", "w") as f:
        f.write("#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<'\\n';}\n")
    for i, (a, b, want) in enumerate([(1, 2, 3), (2, 2, 5)]):
        with open(d + "/tests/%d.in" % (i + 1), "w") as f:
            f.write("%d %d\n" % (a, b))
        with open(d + "/tests/%d.out" % (i + 1), "w") as f:
            f.write("%d\n" % want)
    for tier in ("trusted", "internal"):
        p = c.cli("grade", "--tier", tier, d, timeout=300)
        out = p.stdout.decode()
        t.ok(m and p.returncode == 1 and "1/2 accepted" in out and
             'expected "5", got "4"' in out,
             "the README's grade.yaml (image: toolchain) with the example policy on --tier %s: "
             "built, one test accepted, one wrong_answer" % tier,
             (p.returncode, out, p.stderr.decode()))
finally:
    c.close()
sys.exit(t.done())
