#!/usr/bin/python3
"""CI suites in the catalogue images, through the real queue (redis-server,
scheduler, worker) on the process, container and microVM tiers: a pytest
project (python image: pytest, hypothesis, JUnit XML), a C project built with
cmake and ninja and tested with ctest (toolchain image), a Node project
installed with npm ci and tested with npm test (node image). Each gives on
every tier the counts of a direct run of the same commands in the same
image (chroot on the host), its report collected as a result file; the
README's `airlock run` of the pytest suite prints the report's counts."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import CLI, Tap, skip_unless  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402

t = Tap()
skip_unless(os.geteuid() == 0, "needs root")
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
GUEST = os.environ.get("AIRLOCK_MICROVM_IMAGE", "/var/lib/airlock/images/microvm")
for name in ("python", "toolchain", "node"):
    if not os.path.exists(os.path.join(IMAGES, name + ".ext4")):
        t.ok(False, "the catalogue images are built (tests/run.sh)", name)
        sys.exit(t.done())

PYTEST = {
    "test_math.py": b"""import pytest
from hypothesis import given, strategies as st

@pytest.mark.parametrize("n", range(10))
def test_square(n):
    assert n * n >= 0

def test_fails():
    assert 1 + 1 == 3

def test_fails_too():
    raise RuntimeError("boom")

@pytest.mark.skip(reason="not today")
def test_skipped():
    pass

@given(st.integers())
def test_abs(x):
    assert abs(x) >= 0
""",
}
CMAKE = {
    "CMakeLists.txt": b"""cmake_minimum_required(VERSION 3.13)
project(calc C)
enable_testing()
add_executable(calc calc.c)
add_test(NAME add COMMAND calc add)
add_test(NAME sub COMMAND calc sub)
add_test(NAME mul COMMAND calc mul)
add_test(NAME broken COMMAND calc broken)
""",
    "calc.c": b"""#include <string.h>
int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "add"))
		return 2 + 2 != 4;
	if (!strcmp(argv[1], "sub"))
		return 5 - 3 != 2;
	if (!strcmp(argv[1], "mul"))
		return 3 * 3 != 9;
	return 1; /* broken */
}
""",
}
NODE = {
    "package.json": b"""{"name": "calc", "version": "1.0.0", "private": true,
 "scripts": {"test": "node --test"}}
""",
    "package-lock.json": b"""{"name": "calc", "version": "1.0.0", "lockfileVersion": 3,
 "requires": true, "packages": {"": {"name": "calc", "version": "1.0.0"}}}
""",
    "test/calc.test.js": b"""const test = require('node:test');
const assert = require('node:assert');
test('adds', () => assert.strictEqual(2 + 2, 4));
test('subtracts', () => assert.strictEqual(5 - 3, 2));
test('multiplies', () => assert.strictEqual(3 * 3, 9));
test('breaks', () => assert.strictEqual(1, 2));
""",
}
# image, files, command (in /work), report to collect, how to count
SUITES = {
    "pytest": ("python", PYTEST, "python3 -m pytest -p no:cacheprovider -q --junitxml=report.xml",
               "report.xml"),
    "cmake": ("toolchain", CMAKE,
              "cmake -S . -B /tmp/b -G Ninja >/dev/null && cmake --build /tmp/b >/dev/null && "
              "ctest --test-dir /tmp/b --output-junit /work/report.xml", "report.xml"),
    "npm": ("node", NODE, "npm ci --no-audit --no-fund --offline && npm test > report.tap 2>&1; "
            "s=$?; cat report.tap; exit $s", "report.tap"),
}


def junit_counts(data):
    root = ET.fromstring(data)
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    n = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for s in suites:
        for k in n:
            n[k] += int(s.get(k, 0) or 0)
    return {"passed": n["tests"] - n["failures"] - n["errors"] - n["skipped"],
            "failed": n["failures"] + n["errors"], "skipped": n["skipped"]}


def tap_counts(data):
    text = data.decode(errors="replace")
    got = {k: int(v) for k, v in re.findall(r"^# (pass|fail|skipped) (\d+)$", text, re.M)}
    return {"passed": got.get("pass", -1), "failed": got.get("fail", -1),
            "skipped": got.get("skipped", 0)}


def counts(suite, data):
    try:
        return tap_counts(data) if suite == "npm" else junit_counts(data)
    except (ET.ParseError, ValueError) as e:
        return {"unreadable": str(e)}


def direct(image, files, command, report):
    """The same commands in the same image, straight on the host: a private
    mount namespace, the project on the image's /work, chroot."""
    proj = tempfile.mkdtemp(prefix="airlock-ci-", dir="/var/tmp")
    try:
        for path, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(proj, path)), exist_ok=True)
            with open(os.path.join(proj, path), "wb") as f:
                f.write(data)
        root = os.path.join(IMAGES, image)
        script = ("mount --make-rprivate / && mount --bind %s %s/work && "
                  "mount -t proc proc %s/proc && mount -t tmpfs tmp %s/tmp && "
                  "exec chroot %s /usr/bin/env -i HOME=/work PATH=/usr/bin:/bin LANG=C.UTF-8 "
                  "sh -c 'cd /work && %s'" % (proj, root, root, root, root,
                                              command.replace("'", "'\\''")))
        p = subprocess.run(["unshare", "--mount", "--fork", "sh", "-c", script],
                           capture_output=True, timeout=600)
        path = os.path.join(proj, report)
        data = open(path, "rb").read() if os.path.exists(path) else b""
        return p.returncode, data, p.stderr
    finally:
        shutil.rmtree(proj, ignore_errors=True)


D = dict(DEFAULTS, wall_ms=600000, cpu_ms=600000, memory_bytes=1 << 30, pids=256,
         disk_bytes=512 << 20)
TIERS = {"process": "ci-proc", "container": "ci-ctr", "microvm": "ci-mvm"}
POLICY = policy(*(tier_def(name, backend, images=["python", "toolchain", "node"], image="python",
                           defaults=D, **({"guest": GUEST} if backend == "microvm" else {}))
                  for backend, name in TIERS.items()))
c = Cluster(policy=POLICY)
try:
    c.scheduler()
    c.worker("ci-worker", uid_base=70000, slots=2, tiers=",".join(TIERS.values()),
             extra=("--images", IMAGES))
    seq = 0
    for suite, (image, files, command, report) in SUITES.items():
        rc0, data0, err0 = direct(image, files, command, report)
        want = counts(suite, data0)
        t.ok(rc0 != 0 and want.get("passed", 0) > 0 and want.get("failed", 0) > 0,
             "%s: the direct run in the %s image fails with passes and failures: %s" % (
                 suite, image, want), err0[-600:])
        for backend, tier in TIERS.items():
            seq += 1
            r = c.run_job({"v": 1, "id": "ci-%d-%d" % (os.getpid(), seq), "tier": tier,
                           "image": image, "runtime": "sh", "code": command.encode(),
                           "files": [{"path": p, "data": d} for p, d in files.items()],
                           "collect": [report]}, timeout=900)
            print("# %s on %s: %s ms in the sandbox" % (suite, backend, r.get("wall_ms")))
            got = {f["path"]: f["data"] for f in r.get("files", [])}
            seen = counts(suite, got.get(report, b""))
            t.ok(r.get("status") == "nonzero_exit" and seen == want,
                 "%s on %s (%s image): the direct run's counts %s, the report collected" % (
                     suite, backend, image, want),
                 (r.get("status"), r.get("error"), seen, r.get("stderr", b"")[-600:],
                  r.get("stdout", b"")[-600:]))

    # the README's command, as a user runs it: the report's counts on a line
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    m = re.search(r"\$ (airlock run --tier untrusted .*?\n.*?)\n", readme)
    argv = shlex.split(m.group(1).replace("\\\n", " ")) if m else ["missing"]
    work = tempfile.mkdtemp(prefix="airlock-ci-cli-", dir="/var/tmp")
    try:
        with open(os.path.join(work, "tests.py"), "wb") as f:
            f.write(PYTEST["test_math.py"])
        argv = [CLI, "--redis", c.url] + argv[1:]
        argv[argv.index("untrusted")] = TIERS["process"]
        p = subprocess.run(argv, cwd=work, capture_output=True, timeout=300)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    t.ok(m and p.returncode == 1 and
         b"\ntests: 11 passed, 2 failed, 1 skipped (report.xml)\n" in b"\n" + p.stderr,
         "the README's airlock run of a pytest suite exits with pytest's 1 and prints the "
         "collected JUnit report's counts on one line", (argv, p.returncode, p.stderr[-800:]))
finally:
    c.close()
sys.exit(t.done())
