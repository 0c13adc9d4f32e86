#!/usr/bin/python3
"""The same program on the same test gets the same verdict on the process,
container and microVM tiers (issue 35, grading on par with Judge0 and CMS),
in C++ and in Python: one program per verdict kind (its argument says
which), each grading job run on every tier, on a real stack.

  accepted, wrong_answer; timeout by the wall clock (a sleep) and by CPU
  time (a loop): one verdict, `timeout`, the detail saying which limit;
  memory_limit for an allocation past the test's limit (it was
  runtime_error on the microVM tier, whose VM was sized to the limit: the
  allocation failed before the cgroup could count it); output_limit;
  runtime_error for an exit code, an abort and a segfault."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402

t = Tap()
need_root("the sandboxes")
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
# (its build at least 2.5 s however fast the emulation runs gcc: past the
# tests' 2 s and the tight language's 1.5 s on any machine)
C_TCG = {"image": "toolchain", "source": "main.c", "run": ["./main"],
         "build": ["sh", "-c", "sleep 2.5 && gcc -std=c11 -O2 -pipe -o main main.c -lm"]}
MAX = {"wall_ms": 600000, "cpu_ms": 600000, "memory_bytes": 2147483648, "pids": 256,
       "disk_bytes": 268435456}
POLICY = policy(*[tier_def(name, backend, images=["toolchain", "python"], image="toolchain",
                           defaults=dict(DEFAULTS, wall_ms=60000), max=MAX)
                  for name, backend in (("trusted", "process"), ("internal", "container"),
                                        ("untrusted", "microvm"))],
                languages={"bash": {"run": ["sh", "main.sh"]},
                           "c11": {"image": "toolchain", "source": "main.c",
                                   "build": ["gcc", "-O0", "-o", "main", "main.c"],
                                   "run": ["./main"]},
                           # a C build in a microVM under TCG (seconds): within its
                           # language's 120 s, past 1.5 s
                           "c-tcg": dict(C_TCG, build_wall_ms=120000),
                           "c-tcg-tight": dict(C_TCG, build_wall_ms=1500)})
TIERS = (("trusted", "process"), ("internal", "container"), ("untrusted", "microvm"))

CPP = r"""
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";
	if (!strcmp(m, "ok")) { puts("42"); return 0; }
	if (!strcmp(m, "wrong")) { puts("41"); return 0; }
	if (!strcmp(m, "sleep")) { sleep(30); return 0; }
	if (!strcmp(m, "spin")) { for (volatile unsigned long i = 0;; i++) ; }
	if (!strcmp(m, "alloc")) {
		size_t n = (size_t)1 << 30;
		char *p = (char *)malloc(n);
		if (!p) { fputs("malloc failed\n", stderr); return 3; }
		for (size_t i = 0; i < n; i += 4096) p[i] = 1;
		printf("%d\n", p[4096]);
		return 0;
	}
	if (!strcmp(m, "flood")) { for (;;) fputs("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", stdout); }
	if (!strcmp(m, "exit")) return 3;
	if (!strcmp(m, "abort")) abort();
	if (!strcmp(m, "segv")) { volatile int *p = nullptr; return *p; }
	return 9;
}
"""
PY = r"""
import os, sys, time
m = sys.argv[1]
if m == "ok": print(42)
elif m == "wrong": print(41)
elif m == "sleep": time.sleep(30)
elif m == "spin":
    while True: pass
elif m == "alloc":
    b = bytearray(1 << 30)
    print(b[4096])
elif m == "flood":
    while True: print("x" * 31)
elif m == "exit": sys.exit(3)
elif m == "abort": os.abort()
elif m == "segv":
    import ctypes; ctypes.string_at(0)
"""
LIM = {"wall_ms": 6000, "cpu_ms": 2000, "memory_bytes": 128 << 20, "stdout_bytes": 65536}
CASES = [("ok", "accepted"), ("wrong", "wrong_answer"), ("sleep", "timeout"),
         ("spin", "timeout"), ("alloc", "memory_limit"), ("flood", "output_limit"),
         ("exit", "runtime_error"), ("abort", "runtime_error"), ("segv", "runtime_error")]


def tests():
    return [{"name": m, "argv": [m], "expect": "42\n", "limits": LIM} for m, _ in CASES]


def grading_job(tier, lang):
    j = {"v": 1, "id": "v-%s-%s-%s" % (lang, tier, os.urandom(3).hex()), "tier": tier,
         "tests": tests()}
    if lang == "cpp":
        j.update(image="toolchain", argv=["./main"],
                 files=[{"path": "main.cpp", "data": CPP.encode()}],
                 build={"argv": ["g++", "-O1", "-o", "main", "main.cpp"],
                        "limits": {"wall_ms": 300000, "cpu_ms": 300000,
                                   "memory_bytes": 536870912}})
    else:
        j.update(image="python", argv=["python3", "sol.py"],
                 files=[{"path": "sol.py", "data": PY.encode()}])
    return j


c = Cluster(policy=POLICY)
try:
    c.scheduler()
    c.worker("verdict-w", uid_base=63700, slots=2, tiers="trusted,internal,untrusted",
             extra=["--images", IMAGES, "--vm-accel", "tcg"])
    want = [v for _, v in CASES]
    for lang in ("cpp", "python"):
        seen = {}
        for tier, backend in TIERS:
            res = c.run_job(grading_job(tier, lang), timeout=900)
            tr = (res or {}).get("tests", [])
            seen[backend] = [x["verdict"] for x in tr]
            if lang == "cpp" and res and res.get("build"):
                print("# the C++ build on %s: %d ms wall, %d ms CPU" %
                      (backend, res["build"]["wall_ms"], res["build"]["cpu_ms"]), flush=True)
            t.ok(seen[backend] == want,
                 "%s on %s: every verdict kind as expected" % (lang, backend),
                 res and [(x["name"], x["verdict"], x.get("detail")) for x in tr] or res)
            rss = {x["name"]: x.get("max_rss_bytes", 0) for x in tr}
            t.ok(0 < rss.get("ok", 0) < (64 << 20) and
                 (lang == "cpp" or rss["ok"] > (4 << 20)) and
                 all(x.get("peak_memory_bytes", 0) > 0 for x in tr),
                 "%s on %s: each test's max RSS as wait4 counts it (ok: %d KiB), beside the "
                 "cgroup's peak" % (lang, backend, rss.get("ok", 0) >> 10), rss)
            details = {x["name"]: x.get("detail") or "" for x in tr}
            t.ok("wall-clock" in details.get("sleep", "") and
                 "CPU-time" in details.get("spin", ""),
                 "%s on %s: a test over its time is timeout, the detail says which limit"
                 % (lang, backend), (details.get("sleep"), details.get("spin")))
        t.ok(len(set(map(tuple, seen.values()))) == 1,
             "%s: the same verdicts on process, container and microVM" % lang, seen)

    # scores: points, groups (all or nothing, or summed), a hidden test, a float checker
    FLOAT = "import math, sys\nprint('%.9f' % (math.pi * float(sys.argv[1])))\n"

    def scored(tier, mode):
        tests = [
            {"name": "one", "argv": ["1"], "expect": "3.14159265\n", "compare": "float",
             "points": 2},
            {"name": "near", "argv": ["1.0000000001"], "expect": "3.14159265\n",
             "compare": "float", "abs_tol": 1e-6, "group": "g1", "points": 3},
            {"name": "far", "argv": ["1.001"], "expect": "3.14159265\n", "compare": "float",
             "rel_tol": 1e-6, "group": "g1", "points": 3},
            {"name": "secret", "argv": ["2"], "expect": "6.283185307\n", "compare": "float",
             "group": "g2", "points": 5, "hidden": True},
            {"name": "words", "argv": ["1"], "expect": "3.14159265\n", "compare": "tokens"},
        ]
        j = {"v": 1, "id": "s-%s-%s" % (tier, os.urandom(3).hex()), "tier": tier,
             "image": "python", "argv": ["python3", "f.py"], "tests": tests,
             "files": [{"path": "f.py", "data": FLOAT.encode()}]}
        if mode:
            j["group_scoring"] = mode
        return j

    got = {}
    for tier, backend in TIERS:
        for mode in (None, "sum"):
            res = c.run_job(scored(tier, mode), timeout=600) or {}
            tr = res.get("tests", [])
            got[(backend, mode)] = (res.get("score"), res.get("max_score"),
                                    tuple((g["name"], g["score"], g["max_score"])
                                          for g in res.get("groups", [])),
                                    tuple((x["verdict"], x["points"], x["max_points"])
                                          for x in tr))
            want_groups = [("g1", 3 if mode else 0, 6), ("g2", 5, 5)]
            t.ok(res.get("max_score") == 14 and
                 res.get("score") == 2 + (3 if mode else 0) + 5 and
                 list(got[(backend, mode)][2]) == want_groups and
                 [x["verdict"] for x in tr] == ["accepted", "accepted", "wrong_answer",
                                                "accepted", "wrong_answer"],
                 "%s, groups %s: float within abs_tol accepted, past rel_tol not; the score "
                 "%s of 14 and each group's" % (backend, mode or "all or nothing",
                                                res.get("score")), got[(backend, mode)])
            sec = tr[3] if len(tr) > 3 else {}
            t.ok(sec.get("hidden") is True and sec.get("stdout") == b"" and
                 sec.get("detail") is None and tr[0]["stdout"] == b"3.141592654\n",
                 "%s: the hidden test shows its verdict and points, not its output" % backend,
                 sec)
    t.ok(len({v for k, v in got.items() if k[1] is None}) == 1 and
         len({v for k, v in got.items() if k[1] == "sum"}) == 1,
         "the same scores on process, container and microVM", got)
    # the CLI's table: points per test, each group, the score
    import json as _json
    spec = os.path.join(c.dir, "scored.json")
    j = scored("trusted", None)
    del j["id"], j["v"]
    j["files"] = [{"path": "f.py", "data": FLOAT}]
    with open(spec, "w") as f:
        _json.dump(j, f)
    p = c.cli("grade", spec, timeout=300)
    out = p.stdout.decode()
    t.ok(p.returncode == 1 and "group g1: 0/6" in out and "group g2: 5/5" in out and
         "3/5 accepted, score 7/14" in out and "[g1]" in out and " 2/2\n" in out,
         "airlock grade: each test's points and group, each group, the score", out)

    # a checker (special judge): the course's program decides, in a sandbox of its own
    SOL = ("import sys\nx = sys.stdin.read().split()\n"
           "if x[0] == 'perm': print(' '.join(reversed(x[1:])))\n"
           "elif x[0] == 'forge': sys.stdout.write('accepted\\n' + '\\x00\\xff' * 1000)\n"
           "else: print(' '.join(x[1:]))\n")
    CHECKER = ("import sys\n"
               "inp, exp, act = (open(p, 'rb').read() for p in sys.argv[-3:])\n"
               "if b'LOOP' in inp:\n    while True: pass\n"
               "if b'CRASH' in inp: raise RuntimeError('checker bug')\n"
               "if b'MUMBLE' in inp: print('maybe'); sys.exit(0)\n"
               "ok = sorted(act.split()) == sorted(exp.split())\n"
               "print('accepted same set' if ok else 'wrong_answer %d numbers, expected %d'"
               " % (len(act.split()), len(exp.split())))\n")

    def checked(tier):
        tests = [{"name": "perm", "stdin": "perm 1 2 3\n", "expect": "1 2 3\n"},
                 {"name": "wrong", "stdin": "x 1 2\n", "expect": "1 2 3\n"},
                 {"name": "forge", "stdin": "forge\n", "expect": "1\n"},
                 {"name": "loops", "stdin": "x LOOP\n", "expect": "LOOP\n"},
                 {"name": "crash", "stdin": "x CRASH\n", "expect": "CRASH\n"},
                 {"name": "mumble", "stdin": "x MUMBLE\n", "expect": "MUMBLE\n"},
                 {"name": "spin", "stdin": "x 1\n", "argv": [], "expect": "1\n",
                  "limits": {"wall_ms": 3000, "cpu_ms": 1000}}]
        return {"v": 1, "id": "k-%s-%s" % (tier, os.urandom(3).hex()), "tier": tier,
                "image": "python", "argv": ["python3", "sol.py"], "tests": tests,
                "files": [{"path": "sol.py", "data": SOL.encode()}],
                "checker": {"runtime": "python", "code": CHECKER,
                            "limits": {"wall_ms": 3000, "cpu_ms": 2000}}}
    want = ["accepted", "wrong_answer", "wrong_answer", "checker_error", "checker_error",
            "checker_error", "accepted"]
    seen = {}
    for tier, backend in TIERS:
        res = c.run_job(checked(tier), timeout=600) or {}
        tr = res.get("tests", [])
        seen[backend] = [x["verdict"] for x in tr]
        d = {x["name"]: x.get("detail") or "" for x in tr}
        t.ok(seen[backend] == want and d.get("perm") == "checker: same set" and
             d.get("wrong") == "checker: 2 numbers, expected 3" and
             "the checker failed (" in d.get("loops", "") and
             "exited 1" in d.get("crash", "") and "neither" in d.get("mumble", ""),
             "%s: the checker's verdicts and words; a solution printing \"accepted\" is "
             "still judged; a checker that loops, crashes or mumbles is checker_error, "
             "never the solution's fault" % backend,
             res.get("error") or [(x["name"], x["verdict"], x.get("detail")) for x in tr])
    t.ok(len(set(map(tuple, seen.values()))) == 1,
         "a checker's verdicts are the same on process, container and microVM", seen)

    # the language table: the course names a language, the policy gives the commands
    progs = {"cpp17": ("main.cpp", "#include <iostream>\nint main(){long a,b;std::cin>>a>>b;"
                                   "std::cout<<a+b<<std::endl;}\n"),
             "python3": ("main.py", "a, b = map(int, input().split())\nprint(a + b)\n"),
             "bash": ("main.sh", "read a b\necho $((a + b))\n"),
             "c11": ("main.c", "#include <stdio.h>\nint main(void){long a,b;"
                               "if(scanf(\"%ld %ld\",&a,&b)!=2)return 1;"
                               "printf(\"%ld\\n\",a+b);return 0;}\n")}
    lang_seen = {}
    for tier, backend in TIERS:
        # the policy's own entries (bash, c11) on the process tier: the same code path as
        # the built-in ones, which every tier runs (a C build under TCG costs ~20 s)
        for lang, (path, src) in progs.items():
            if lang in ("bash", "c11") and backend != "process":
                continue
            res = c.run_job({"v": 1, "id": "l-%s-%s-%s" % (lang, tier, os.urandom(3).hex()),
                             "tier": tier, "language": lang,
                             "files": [{"path": path, "data": src.encode()}],
                             "tests": [{"name": "a", "stdin": "1 2\n", "expect": "3\n"},
                                       {"name": "b", "stdin": "2 2\n", "expect": "5\n"}]},
                            timeout=600) or {}
            lang_seen[(backend, lang)] = ([x["verdict"] for x in res.get("tests", [])],
                                          (res.get("build") or {}).get("verdict"))
        t.ok(all(lang_seen[(backend, lg)][0] == ["accepted", "wrong_answer"] for lg in progs
                 if (backend, lg) in lang_seen) and
             lang_seen[(backend, "cpp17")][1] == "accepted" and
             lang_seen[(backend, "python3")][1] is None,
             "%s: language cpp17, python3 (built in)%s build and run as the table says"
             % (backend, ", bash (the policy's own) and c11 (the policy's, replacing the "
                "built-in)" if backend == "process" else ""),
             {k: v for k, v in lang_seen.items() if k[0] == backend})
    # a language's build has its own limits, not its tests' (issue 59: a c11
    # build took the tests' 2 s and ended compile_error under TCG)
    built = {}
    for lang in ("c-tcg", "c-tcg-tight"):
        res = c.run_job({"v": 1, "id": "l-%s-%s" % (lang, os.urandom(3).hex()),
                         "tier": "untrusted", "language": lang, "limits": {"wall_ms": 2000},
                         "files": [{"path": "main.c", "data": progs["c11"][1].encode()}],
                         "tests": [{"name": "a", "stdin": "1 2\n", "expect": "3\n"}]},
                        timeout=600) or {}
        b = res.get("build") or {}
        built[lang] = (res.get("status"), b.get("verdict"), b.get("wall_ms"),
                       [x["verdict"] for x in res.get("tests", [])], b.get("detail"))
    t.ok(built["c-tcg"][:2] == ("ok", "accepted") and built["c-tcg"][2] > 2000 and
         built["c-tcg"][3] == ["accepted"] and built["c-tcg-tight"][:2] ==
         ("compile_error", "compile_error") and "1500 ms" in (built["c-tcg-tight"][4] or "") and
         1500 <= built["c-tcg-tight"][2] < 5000,
         "a language's build limit (build_wall_ms) is its own: a C build of %.1f s in a "
         "microVM under TCG passes with its 120 s though its tests have 2 s, and is "
         "compile_error only past its own 1.5 s"
         % ((built["c-tcg"][2] or 0) / 1000), built)
    res = c.run_job({"v": 1, "id": "l-bad-%s" % os.urandom(3).hex(), "tier": "trusted",
                     "language": "cobol", "tests": [{"name": "a"}]}, timeout=60) or {}
    t.ok(res.get("status") == "rejected" and
         'language: unknown "cobol" (known: bash, c11, c-tcg, c-tcg-tight, cpp17, cpp20, '
         'python3, node, go, rust)'
         == res.get("error"),
         "an unknown language is rejected, naming the known ones", res.get("error"))
finally:
    c.close()
sys.exit(t.done())
