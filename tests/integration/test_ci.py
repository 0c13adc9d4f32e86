#!/usr/bin/python3
"""CI suites in the catalogue images, through the real queue (redis-server,
scheduler, worker) on the process, container and microVM tiers: a pytest
project (python image: pytest, hypothesis, JUnit XML), a C project built with
cmake and ninja and tested with ctest (toolchain image), a Node project
installed with npm ci and tested with npm test (node image), the same with a
dependency that npm ci fetches through the egress proxy from a registry in a
test network namespace, a Go module (go test, go image) and a Rust crate
(cargo test, rust image); the offline npm suite and go test on process and
container only (under TCG they took 69 s and 44 s in the microVM; npm-egress
is the Node suite there, and `go version` shows the go image works in it).
Each gives on every tier it runs on the counts of a direct run
of the same commands in the same image (chroot on the host), its report
collected as a result file; the README's `airlock run` of the pytest suite
prints the report's counts; examples/ci.py runs a Debian package's own test
suite (its .deb fetched by the worker as an input by URL + SHA-256) on the
three tiers with the direct run's counts."""
import base64
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import CLI, Tap, skip_unless  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402
from testinet import TestInternet  # noqa: E402

t = Tap()
skip_unless(os.geteuid() == 0, "needs root")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
GUEST = os.environ.get("AIRLOCK_MICROVM_IMAGE", "/var/lib/airlock/images/microvm")
for name in ("python", "toolchain", "node", "go", "rust"):
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
GO = {
    "go.mod": b"module example.com/calc\n\ngo 1.19\n",
    "calc.go": b"package calc\n\nfunc Add(a, b int) int { return a + b }\n",
    "calc_test.go": b"""package calc

import "testing"

func TestAdd(t *testing.T)   { if Add(2, 2) != 4 { t.Fatal("2+2") } }
func TestZero(t *testing.T)  { if Add(0, 0) != 0 { t.Fatal("0+0") } }
func TestSkip(t *testing.T)  { t.Skip("not today") }
func TestBroken(t *testing.T) { if Add(1, 1) != 3 { t.Fatal("1+1 is not 3") } }
""",
}
CARGO = {
    "Cargo.toml": b"[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    "src/lib.rs": b"""pub fn add(a: i32, b: i32) -> i32 { a + b }

#[cfg(test)]
mod tests {
    use super::*;
    #[test] fn adds() { assert_eq!(add(2, 2), 4); }
    #[test] fn zero() { assert_eq!(add(0, 0), 0); }
    #[test] #[ignore] fn later() {}
    #[test] fn broken() { assert_eq!(add(1, 1), 3); }
}
""",
}


def npm_package():
    """A registry's tarball of a one-file package (as npm pack makes it) and
    its lockfile integrity."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in (("package/package.json",
                            b'{"name": "airlock-pad", "version": "1.0.0", "main": "index.js"}\n'),
                           ("package/index.js",
                            b"module.exports = (s, n) => String(s).padStart(n);\n")):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1700000000
            tf.addfile(ti, io.BytesIO(data))
    tgz = buf.getvalue()
    return tgz, "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()


NPM_TGZ, NPM_INTEGRITY = npm_package()


def npm_registry_project(srv):
    """A Node project whose one dependency comes from the registry in the
    test namespace: npm ci fetches it through the egress proxy."""
    resolved = "http://%s:8000/airlock-pad/-/airlock-pad-1.0.0.tgz" % srv
    lock = {"name": "calc", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "calc", "version": "1.0.0",
                              "dependencies": {"airlock-pad": "1.0.0"}},
                         "node_modules/airlock-pad": {"version": "1.0.0", "resolved": resolved,
                                                      "integrity": NPM_INTEGRITY}}}
    return {
        "package.json": json.dumps({"name": "calc", "version": "1.0.0", "private": True,
                                    "dependencies": {"airlock-pad": "1.0.0"},
                                    "scripts": {"test": "node --test"}}).encode(),
        "package-lock.json": json.dumps(lock).encode(),
        "test/pad.test.js": b"""const test = require('node:test');
const assert = require('node:assert');
const pad = require('airlock-pad');
test('pads', () => assert.strictEqual(pad('x', 3), '  x'));
test('keeps', () => assert.strictEqual(pad('xyz', 2), 'xyz'));
test('breaks', () => assert.strictEqual(pad('x', 2), 'x'));
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
    # go and cargo print their own counts (their text is the report)
    "go": ("go", GO, "GOCACHE=/tmp/gocache GOFLAGS=-mod=mod go test -v ./... > report.txt 2>&1; "
           "s=$?; cat report.txt; exit $s", "report.txt"),
    "cargo": ("rust", CARGO, "CARGO_TARGET_DIR=/tmp/target cargo test --offline > report.txt "
              "2>&1; s=$?; cat report.txt; exit $s", "report.txt"),
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


def go_counts(data):
    text = data.decode(errors="replace")
    return {k: len(re.findall(r"^--- %s: " % w, text, re.M))
            for k, w in (("passed", "PASS"), ("failed", "FAIL"), ("skipped", "SKIP"))}


def cargo_counts(data):
    m = re.search(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored",
                  data.decode(errors="replace"))
    if not m:
        raise ValueError("no cargo test result line")
    return {"passed": int(m.group(1)), "failed": int(m.group(2)), "skipped": int(m.group(3))}


def counts(suite, data):
    try:
        if suite in ("go", "cargo"):
            return go_counts(data) if suite == "go" else cargo_counts(data)
        return tap_counts(data) if suite.startswith("npm") else junit_counts(data)
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
# examples/ci.py's project comes by reference from a server in a test
# namespace (the tiers' egress rules name it; the jobs ask for no network)
WWW = tempfile.mkdtemp(prefix="airlock-ci-www-", dir="/var/tmp")
INET = TestInternet("ci", 235, WWW)
POLICY = policy(*(tier_def(name, backend, images=["python", "toolchain", "node", "go", "rust"], image="python",
                           defaults=D, egress={"allow": ["%s.0/24:8000" % INET.net],
                                                     "cache_bytes": 64 << 20},
                           **({"guest": GUEST} if backend == "microvm" else {}))
                  for backend, name in TIERS.items()))
EXAMPLE_PKG = "python3-toolz"  # a Debian package that ships its test suite


SUITES["npm-egress"] = ("node", npm_registry_project(INET.srv),
                        "npm ci --no-audit --no-fund --registry http://%s:8000/ && npm test "
                        "> report.tap 2>&1; s=$?; cat report.tap; exit $s" % INET.srv,
                        "report.tap")
NETWORK = {"npm-egress": "egress"}  # the suites whose job asks for the network
# Under TCG (no KVM here) npm's and go's toolchains run 15-20x slower in the
# microVM (69 s and 44 s of a run): npm-egress is the Node suite on all three
# tiers (npm ci from the registry, then npm test), and go's image is shown to
# work in the microVM by `go version` below; cmake and cargo stay the built
# suites there.
ON_TIERS = {"npm": ("process", "container"), "go": ("process", "container")}
os.makedirs(os.path.join(WWW, "airlock-pad", "-"))
with open(os.path.join(WWW, "airlock-pad", "-", "airlock-pad-1.0.0.tgz"), "wb") as f:
    f.write(NPM_TGZ)


def submit(job):
    """XADD a job to the intake (as Cluster.run_job), without waiting."""
    import msgpack
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=msgpack.packb(job, use_bin_type=True), capture_output=True)


def wait(jid, timeout=900):
    import msgpack
    c.wait_done(jid, timeout)
    raw = c.rcli("GET", "al:res:" + jid, raw=True)
    return msgpack.unpackb(raw, raw=False) if raw else {}


def ci_example():
    """examples/ci.py on the three tiers: a Debian package's own tests (its
    .deb from the archive, served by the test internet), the same counts as
    a direct run in the image."""
    got = subprocess.run(["apt-get", "download", "-q", EXAMPLE_PKG], cwd=WWW,
                         capture_output=True, text=True, timeout=300)
    debs = [f for f in os.listdir(WWW) if f.endswith(".deb")]
    if not debs:
        t.ok(False, "apt-get download %s (the Debian archive, as install-deps uses)" %
             EXAMPLE_PKG, got.stderr[-400:])
        return
    with open(os.path.join(WWW, debs[0]), "rb") as f:
        deb = f.read()
    run = ("set -e\ndpkg-deb -x pkg.deb src\ncd src/usr/lib/python3/dist-packages\n"
           "python3 -m pytest -q -p no:cacheprovider --junitxml=/work/junit.xml toolz/tests\n")
    rc0, data0, err0 = direct("python", {"pkg.deb": deb}, run, "junit.xml")
    want = counts("pytest", data0)
    t.ok(rc0 == 0 and want.get("passed", 0) > 100,
         "examples/ci.py's project: %s's tests pass directly in the python image: %s" % (
             debs[0], want), err0[-600:])
    url = "http://%s:8000/%s" % (INET.srv, debs[0])
    p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "ci.py"),
                        "--redis", c.url, "--tiers", ",".join(TIERS.values()),
                        "--input", "%s,%s,pkg.deb" % (url, hashlib.sha256(deb).hexdigest()),
                        "--tests", "toolz/tests", "--image", "python"],
                       capture_output=True, text=True, timeout=900)
    line = "%d passed, %d failed, %d skipped" % (want.get("passed", 0), want.get("failed", 0),
                                                 want.get("skipped", 0))
    rows = [l for l in p.stdout.splitlines() if l.split()[:1] and l.split()[0] in
            TIERS.values()]
    t.ok(p.returncode == 0 and len(rows) == 3 and all(line in r and " ok " in r for r in rows)
         and "every tier agrees: yes" in p.stdout,
         "examples/ci.py: the package fetched by reference (inputs), its suite run on "
         "process, container and microVM, JUnit collected: each tier %s, as directly" % line,
         (p.returncode, p.stdout[-1500:], p.stderr[-800:]))


c = Cluster(policy=POLICY)
try:
    INET.start()
    c.scheduler()
    c.worker("ci-worker", uid_base=70000, slots=2, tiers=",".join(TIERS.values()),
             extra=("--images", IMAGES))
    seq = 0
    results = {}
    for suite, (image, files, command, report) in SUITES.items():
        rc0, data0, err0 = direct(image, files, command, report)
        want = counts(suite, data0)
        t.ok(rc0 != 0 and want.get("passed", 0) > 0 and want.get("failed", 0) > 0,
             "%s: the direct run in the %s image fails with passes and failures: %s" % (
                 suite, image, want), err0[-600:])
        ids = {}
        tiers = {b: t for b, t in TIERS.items() if b in ON_TIERS.get(suite, TIERS)}
        for backend, tier in tiers.items():  # the tiers at once
            seq += 1
            ids[backend] = "ci-%d-%d" % (os.getpid(), seq)
            submit({"v": 1, "id": ids[backend], "tier": tier,
                    "network": NETWORK.get(suite, "none"),
                    "image": image, "runtime": "sh", "code": command.encode(),
                    "files": [{"path": p, "data": d} for p, d in files.items()],
                    "collect": [report]})
        for backend, tier in tiers.items():
            r = wait(ids[backend])
            results[(suite, backend)] = r
            print("# %s on %s: %s ms in the sandbox" % (suite, backend, r.get("wall_ms")))
            got = {f["path"]: f["data"] for f in r.get("files", [])}
            seen = counts(suite, got.get(report, b""))
            t.ok(r.get("status") == "nonzero_exit" and seen == want,
                 "%s on %s (%s image): the direct run's counts %s, the report collected" % (
                     suite, backend, image, want),
                 (r.get("status"), r.get("error"), seen, r.get("stderr", b"")[-600:],
                  r.get("stdout", b"")[-600:]))

    seq += 1
    gid = "ci-%d-%d" % (os.getpid(), seq)
    submit({"v": 1, "id": gid, "tier": TIERS["microvm"], "image": "go", "runtime": "sh",
            "code": b"go version"})
    r = wait(gid)
    t.ok(r.get("status") == "ok" and re.match(rb"go version go1\.\d+", r.get("stdout", b"")),
         "the go image in the microVM: %r" % r.get("stdout", b"")[:60],
         (r.get("status"), r.get("error"), r.get("stderr", b"")[-400:]))

    # the egress cache: npm ci's download was kept per tier (the tiers have
    # cache_bytes); the same suite again on process and container is served
    # from it, with the same counts
    image, files, command, report = SUITES["npm-egress"]
    again = {}
    for backend in ("process", "container"):
        seq += 1
        again[backend] = "ci-%d-%d" % (os.getpid(), seq)
        submit({"v": 1, "id": again[backend], "tier": TIERS[backend], "network": "egress",
                "image": image, "runtime": "sh", "code": command.encode(),
                "files": [{"path": p, "data": d} for p, d in files.items()],
                "collect": [report]})
    for backend in ("process", "container"):
        r0, r = results[("npm-egress", backend)], wait(again[backend])
        c0 = r0.get("info", {}).get("egress_cache", "")
        c1 = r.get("info", {}).get("egress_cache", "")
        got = {f["path"]: f["data"] for f in r.get("files", [])}
        t.ok(c0 == "0 hits (0 bytes), 1 stored" and c1.startswith("1 hits (") and
             c1.endswith(", 0 stored") and r.get("status") == "nonzero_exit" and
             counts("npm-egress", got.get(report, b"")) ==
             counts("npm-egress", {f["path"]: f["data"] for f in r0.get("files", [])}
                    .get(report, b"")),
             "npm-egress on %s again: npm ci's download comes from the tenant's egress cache "
             "(info.egress_cache %r, first run %r), the same counts" % (backend, c1, c0),
             (c0, c1, r.get("status"), r.get("egress")))

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

    # the README's --input command: the same project as a tarball by reference
    m = re.search(r"\$ (airlock run --tier untrusted [^\n]*\\\n[^\n]*--input [^\n]*\n[^\n]*)\n",
                  readme)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        ti = tarfile.TarInfo("calc-1.0/test_math.py")
        ti.size = len(PYTEST["test_math.py"])
        tf.addfile(ti, io.BytesIO(PYTEST["test_math.py"]))
    with open(os.path.join(WWW, "calc-1.0.tar.gz"), "wb") as f:
        f.write(buf.getvalue())
    argv = shlex.split(m.group(1).replace("\\\n", " ")) if m else ["missing"]
    argv = [CLI, "--redis", c.url] + [
        a.replace("URL,SHA256", "http://%s:8000/calc-1.0.tar.gz,%s" % (
            INET.srv, hashlib.sha256(buf.getvalue()).hexdigest())) for a in argv[1:]]
    if "untrusted" in argv:
        argv[argv.index("untrusted")] = TIERS["microvm"]
    p = subprocess.run(argv, capture_output=True, timeout=300)
    t.ok(m and p.returncode == 1 and
         b"\ntests: 11 passed, 2 failed, 1 skipped (report.xml)\n" in b"\n" + p.stderr,
         "the README's airlock run --input: the project as a tarball by URL + SHA-256, "
         "fetched by the worker, its suite's counts on the microVM tier",
         (argv, p.returncode, p.stderr[-800:]))
    ci_example()
finally:
    c.close()
    INET.stop()
    shutil.rmtree(WWW, ignore_errors=True)
sys.exit(t.done())
