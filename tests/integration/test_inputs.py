#!/usr/bin/python3
"""Inputs by reference: a job names files and archives by URL + SHA-256;
the worker (never the job) fetches them through the tier's egress rules,
verifies them, keeps them in the host's cache by hash and unpacks them into
the job's work directory before it starts, on process, container and
microVM, through the real queue. A test "internet" lives in a network
namespace this test makes (10.234.N.0/24): Python's http.server with the
archives made here, and beside it a small server of redirects, a 404 and a
slow answer. Every bad input ends the job with the reason and no tree:
a wrong hash, a 404, a redirect to a host the rules do not name, an input
over the tier's max_input_bytes, a zip bomb, a tar with "../" paths, an
absolute path, symlinks pointing out, an entry under a symlink, a device,
a clash with a job file; a tier without egress, or a host not in its rules,
is refused at admission. The second run of an input comes from the cache
(said in the result), and a wrong hash never enters the cache.

Git inputs ({git: {url, ref}, path}): git's own smart-HTTP server (git
http-backend, tests/lib/gitserver.py) in the same namespace serves
repositories made here; a branch, an annotated tag, a pull request's ref
and a commit id each check out their commit with a .git the job's own git
reads (a pull request's ref on the container, gVisor and microVM tiers
too); the second run comes from the cache; a missing ref, a missing
repository, a redirect, a repository over max_input_bytes, a git bomb
(one blob in 64 paths), a symlink out of the tree and a server that never
answers are each refused with the reason; nothing of git's runs outlives
its fetch."""
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import threading
import time
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, live_pids_of, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402
from testinet import TestInternet  # noqa: E402

t = Tap()
need_root()

WWW = "/var/tmp/airlock-inputs-%d" % os.getpid()
INET = TestInternet("inp", 234, WWW, tls=True)
NET, SRV = INET.net, INET.srv
MAX = 8 << 20  # the tiers' max_input_bytes

SEQ = iter(range(1, 1 << 30))


def sha(b):
    return hashlib.sha256(b).hexdigest()


def tar_of(entries, mode="w:gz"):
    """entries: (name, kind, data_or_target, perm); kind file, dir, sym, hard, dev."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, kind, data, perm in entries:
            ti = tarfile.TarInfo(name)
            ti.mode = perm
            ti.mtime = 1700000000
            if kind == "file":
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
                continue
            ti.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                       "dev": tarfile.CHRTYPE}[kind]
            if kind in ("sym", "hard"):
                ti.linkname = data
            tf.addfile(ti)
    return buf.getvalue()


def zip_of(files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


PROJECT = tar_of([("proj/", "dir", None, 0o755), ("proj/README", "file", b"a project\n", 0o644),
                  ("proj/run.sh", "file", b"#!/bin/sh\necho ran\n", 0o755),
                  ("proj/src/", "dir", None, 0o755),
                  ("proj/src/lib.py", "file", b"X = 7\n", 0o644),
                  ("proj/src/link.py", "sym", "lib.py", 0o777),
                  ("proj/copy.py", "hard", "proj/src/lib.py", 0o644)])
ZIP = zip_of({"z/one.txt": b"one\n", "z/deep/two.txt": b"two\n"})
DATA = os.urandom(100000)
BOMB = zip_of({"zeros.bin": b"\0" * (64 << 20)})  # 64 MiB in ~64 KiB
ARCHIVES = {
    "project.tgz": PROJECT, "z.zip": ZIP, "data.bin": DATA, "bomb.zip": BOMB,
    "big.bin": os.urandom(MAX + 4096),
    "redirected.tgz": tar_of([("r/file.txt", "file", b"came by a redirect\n", 0o644)]),
    "dotdot.tar": tar_of([("ok.txt", "file", b"ok\n", 0o644),
                          ("../escape.txt", "file", b"out\n", 0o644)], "w"),
    "abs.tar": tar_of([("/etc/airlock-abs", "file", b"out\n", 0o644)], "w"),
    "symabs.tar": tar_of([("etc", "sym", "/etc", 0o777)], "w"),
    "symup.tar": tar_of([("a/", "dir", None, 0o755), ("a/up", "sym", "../../..", 0o777)], "w"),
    # lexically inside (d -> sub), then an entry through it: the unpacker
    # follows no symlink, so it ends there
    "undersym.tar": tar_of([("sub/", "dir", None, 0o755), ("d", "sym", "sub", 0o777),
                            ("d/x.txt", "file", b"x\n", 0o644)], "w"),
    "dev.tar": tar_of([("null", "dev", None, 0o666)], "w"),
    "clash.tar": tar_of([("given.txt", "file", b"from the archive\n", 0o644)], "w"),
    "notatar.tar": b"this is no archive at all\n" * 100,
}

# beside http.server: redirects (to an allowed path, to a host the rules do
# not name, in a loop), and an answer that never comes
REDIRECTS = r"""
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        where = {'/to-project': 'http://%s:8000/redirected.tgz' % sys.argv[1],
                 '/to-other': 'http://other.example.invalid:8000/project.tgz',
                 '/to-meta': 'http://169.254.169.254/latest/meta-data/',
                 '/loop': '/loop'}.get(self.path)
        if self.path == '/slow':
            time.sleep(600)
        if where:
            self.send_response(302); self.send_header('Location', where)
            self.send_header('Content-Length', '0'); self.end_headers(); return
        self.send_response(500); self.send_header('Content-Length', '0'); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer((sys.argv[1], 8001), H).serve_forever()
"""


def url(name, port=8000):
    return "http://%s:%d/%s" % (SRV, port, name)


KEYS = {"egress": {"allow": ["%s.0/24:%d" % (NET, port) for port in (8000, 8001, 8002, 8003)]},
        "max_input_bytes": MAX,
        "defaults": dict(DEFAULTS, wall_ms=60000, memory_bytes=268435456,
                         disk_bytes=64 << 20)}
POLICY = policy(tier_def("in", "process", **KEYS), tier_def("in-ctr", "container", **KEYS),
                tier_def("in-gv", "container", oci_runtime="runsc", **KEYS),
                tier_def("in-vm", "microvm", image="python", **KEYS),
                tier_def("in-ca", "process",
                         **dict(KEYS, egress=dict(KEYS["egress"], ca_file=INET.ca))),
                tier_def("in-k", "process", **KEYS), tier_def("in-f", "process", **KEYS),
                tier_def("none", "process"))
TIERS = {"in": "process", "in-ctr": "container", "in-gv": "gVisor", "in-vm": "microvm"}

LIST = ("import os, stat\n"
        "for top, dirs, files in sorted(os.walk('.')):\n"
        "    dirs.sort()\n"
        "    for n in sorted(dirs + files):\n"
        "        p = os.path.join(top, n)[2:]\n"
        "        st = os.lstat(p)\n"
        "        kind = 'l' if stat.S_ISLNK(st.st_mode) else 'd' if stat.S_ISDIR(st.st_mode) else 'f'\n"
        "        extra = os.readlink(p) if kind == 'l' else (open(p, 'rb').read()[:40] if kind == 'f' else '')\n"
        "        print(kind, oct(st.st_mode & 0o777), st.st_uid == os.getuid(), p, repr(extra))\n"
        "open('proj/README', 'a').write('more\\n'); os.remove('proj/run.sh'); print('writable')\n"
        "print(os.popen('sh proj/run.sh 2>&1 || ./z/one.txt 2>&1; echo rc').read().strip()[-2:])\n")


def run(c, tier, inputs, code="print('ran')", **kw):
    j = {"v": 1, "id": "in-%d-%d" % (os.getpid(), next(SEQ)), "tier": tier,
         "runtime": "python", "code": code, "inputs": inputs}
    j.update(kw)
    r = c.run_job(j, timeout=300)
    for k in ("stdout", "stderr"):
        r[k] = r.get(k, b"").decode(errors="replace")
    return r


def inp(name, path, unpack="none", digest=None, port=8000):
    return {"url": url(name, port), "sha256": digest or sha(ARCHIVES[name]), "path": path,
            "unpack": unpack}


GOOD = [inp("project.tgz", ".", "tar"), inp("z.zip", "zips", "zip"),
        inp("data.bin", "data/blob.bin")]


def good_suite(c, tier):
    b = TIERS[tier]
    r = run(c, tier, GOOD, code=LIST, files=[{"path": "given.txt", "data": b"given\n"}])
    out = r["stdout"]
    want = ["d 0o755 True proj ''", "f 0o755 True proj/run.sh b'#!/bin/sh\\necho ran\\n'",
            "l 0o777 True proj/src/link.py 'lib.py'", "f 0o644 True proj/copy.py b'X = 7\\n'",
            "f 0o600 True zips/z/deep/two.txt b'two\\n'", "f 0o644 True given.txt b'given\\n'",
            "f 0o644 True data/blob.bin " + repr(DATA[:40])]
    t.ok(r["status"] == "ok" and all(w in out for w in want) and "writable" in out and
         "../" not in out and (r.get("info") or {}).get("inputs", "").startswith("3 ("),
         "%s: a tar.gz (modes, a relative symlink, a hard link as a copy), a zip and a "
         "whole file, fetched by the worker, are the job's tree beside its own file, "
         "owned by it and writable" % b, (r["status"], r.get("error"), out, r.get("info")))
    return r


def bad(c, tier, inputs, want, why, status="rejected", **kw):
    r = run(c, tier, inputs, **kw)
    err = r.get("error") or ""
    t.ok(r["status"] == status and want in err and "ran" not in r["stdout"],
         "%s: %s: %s, the job never ran (%s)" % (TIERS.get(tier, tier), why, status, want),
         (r["status"], err, r["stdout"][:200]))
    return r


GITROOT = os.path.join(WWW, "git")


def git(*args, cwd=None):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid",
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    return subprocess.run(["git"] + list(args), cwd=cwd, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def make_repo(name, files, more=None):
    """A bare repository GITROOT/name.git of one commit of files ({path:
    bytes, ("exec", bytes) or ("sym", target)}); more(work) may add commits
    and refs (all of them are the server's: a mirror).
    Returns the work tree's path."""
    work = os.path.join(WWW, "src-" + name)
    os.makedirs(work)
    git("init", "-q", "-b", "main", work)
    for path, data in files.items():
        full = os.path.join(work, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if isinstance(data, tuple) and data[0] == "sym":
            os.symlink(data[1], full)
        elif isinstance(data, tuple):  # ("exec", bytes)
            with open(full, "wb") as f:
                f.write(data[1])
            os.chmod(full, 0o755)
        else:
            with open(full, "wb") as f:
                f.write(data)
    git("add", "-A", cwd=work)
    git("commit", "-qm", "first", cwd=work)
    if more:
        more(work)
    git("clone", "-q", "--mirror", work, os.path.join(GITROOT, name + ".git"))
    return work


def repo_history(work):
    """main: first (tag v1), then second; refs/pull/7/head: a third."""
    git("tag", "-a", "v1", "-m", "release 1", cwd=work)
    with open(os.path.join(work, "a.txt"), "ab") as f:
        f.write(b"second\n")
    git("commit", "-qam", "second", cwd=work)
    git("checkout", "-q", "-b", "pr", cwd=work)
    with open(os.path.join(work, "pr.txt"), "wb") as f:
        f.write(b"from the pull request\n")
    git("add", "pr.txt", cwd=work)
    git("commit", "-qm", "pr", cwd=work)
    git("update-ref", "refs/pull/7/head", "pr", cwd=work)
    git("checkout", "-q", "main", cwd=work)


def git_url(name):
    return "http://%s:8002/%s.git" % (SRV, name)


def ginp(name, ref, path="src"):
    return {"git": {"url": git_url(name), "ref": ref}, "path": path}


# what a job sees of a checkout: files, HEAD, and its own git's view
GIT_LIST = ("import os, subprocess\n"
            "print('A', repr(open('src/a.txt').read()))\n"
            "print('PR', os.path.exists('src/pr.txt'))\n"
            "print('RUN', os.access('src/bin/run.sh', os.X_OK), os.readlink('src/link'))\n"
            "print('HEAD', open('src/.git/HEAD').read().strip())\n"
            "print('MINE', os.stat('src/.git/index').st_uid == os.getuid())\n"
            "try:\n"
            "    g = lambda *a: subprocess.run(['git', '-C', 'src'] + list(a), capture_output=True,"
            " text=True).stdout.strip()\n"
            "    print('GIT', g('rev-parse', 'HEAD'), repr(g('status', '--porcelain')),"
            " g('log', '--format=%s'))\n"
            "except FileNotFoundError:\n"
            "    print('GIT none')\n")


def git_suite(c, commits):
    """The git inputs on the process tier: refs, the cache, every refusal."""
    main_c, first_c, pr_c = commits
    r = run(c, "in", [ginp("repo", "main")], code=GIT_LIST)
    out = r["stdout"]
    t.ok(r["status"] == "ok" and "A 'one\\nsecond\\n'" in out and "PR False" in out and
         "RUN True a.txt" in out and "HEAD " + main_c in out and "MINE True" in out and
         (r.get("info") or {}).get("inputs", "").startswith("1 (0 from"),
         "process: a git input's branch is checked out into the job's tree (files, modes, "
         "a relative symlink, HEAD at the branch's commit), owned by the job",
         (r["status"], r.get("error"), out, r.get("info")))
    t.ok("GIT %s '' second" % main_c in out,
         "process: the job's own git reads the checkout: rev-parse HEAD is the commit, "
         "status is clean, log is the one commit (depth 1)", out)
    again = run(c, "in", [ginp("repo", "main")], code=GIT_LIST)
    t.ok(again["status"] == "ok" and "HEAD " + main_c in again["stdout"] and
         again["info"]["inputs"].startswith("1 (1 from the host's cache)"),
         "process: the second run of the same branch comes from the host's cache",
         (again["status"], again.get("error"), again.get("info")))
    for ref, want, extra, why in [("v1", first_c, "A 'one\\n'", "an annotated tag (its commit)"),
                                  ("refs/pull/7/head", pr_c, "PR True", "a pull request's ref"),
                                  (first_c, first_c, "A 'one\\n'", "a 40-hex commit id")]:
        r = run(c, "in", [ginp("repo", ref)], code=GIT_LIST)
        t.ok(r["status"] == "ok" and "HEAD " + want in r["stdout"] and extra in r["stdout"],
             "process: git ref %s: %s is checked out" % (ref, why),
             (r["status"], r.get("error"), r["stdout"]))

    https = {"git": {"url": "https://%s:8003/repo.git" % SRV, "ref": "main"}, "path": "src"}
    r = run(c, "in-ca", [https], code=GIT_LIST)
    t.ok(r["status"] == "ok" and "HEAD " + main_c in r["stdout"],
         "process: a git input over https, the server's certificate trusted through the "
         "tier's egress.ca_file", (r["status"], r.get("error"), r["stdout"][-300:]))
    bad(c, "in", [https], "certificate", "git: https to a server whose certificate no CA of "
        "the tier vouches for", status="sandbox_error")
    p = c.cli("run", "--tier", "in", "--runtime", "sh", "--git",
              "%s,v1,checkout" % git_url("repo"), "-c", "cat checkout/a.txt checkout/.git/HEAD",
              timeout=120)
    t.ok(p.returncode == 0 and p.stdout.decode() == "one\n%s\n" % first_c,
         "CLI: airlock run --git URL,REF,PATH checks the tag out at PATH",
         (p.returncode, p.stdout[-300:], p.stderr[-300:]))
    p = c.cli("run", "--tier", "in", "--git", git_url("repo") + ",main", "-c", "1")
    t.ok(p.returncode == 2 and b"--git: expected URL,REF,PATH" in p.stderr,
         "CLI: --git without a PATH is a usage error", (p.returncode, p.stderr[-300:]))
    bad(c, "in", [ginp("repo", "no-such-branch")], 'git.ref: "no-such-branch" is no branch, '
        "tag or ref of", "git: a ref the repository does not have")
    bad(c, "in", [ginp("repo", "0" * 40)], "not our ref", "git: a commit id the server has not")
    bad(c, "in", [ginp("missing", "main")], "not found", "git: a repository that is not there")
    bad(c, "in", [ginp("moved", "main")], "a redirect: git inputs follow none",
        "git: a redirect (not followed)")
    bad(c, "in", [ginp("big", "main")], "/big.git is larger than the tier's max_input_bytes",
        "git: a repository over max_input_bytes (%d)" % MAX)
    bad(c, "in", [ginp("bomb", "main")], "the checkout is larger than the tier's "
        "max_input_bytes", "git: a git bomb (one 1 MiB blob in 64 paths)")
    bad(c, "in", [ginp("evil", "main")], 'symlink to "/etc"',
        "git: a repository with a symlink out of the tree")
    seen = []

    def watch():  # git's processes while the slow server keeps them waiting
        time.sleep(2)
        seen.append(subprocess.run(["ps", "-eo", "uid=,args="], capture_output=True,
                                   text=True).stdout)
    w = threading.Thread(target=watch)
    w.start()
    bad(c, "in", [ginp("slow", "main")], "no answer within 5000 ms",
        "git: a server that never answers (the worker's --input-timeout-ms)",
        status="sandbox_error")
    w.join()
    uids = {int(line.split()[0]) for line in seen[0].splitlines()
            if "slow.git" in line and "airlock-inputs" not in line}
    t.ok(uids and uids <= {64500, 64501},
         "git runs as the slot's own uid, never root (seen: %s)" % sorted(uids), seen[0][-2000:])
    for inp_, want in [(ginp("repo", "../main"), 'git.ref: "../main"'),
                       (ginp("repo", "--upload-pack=sh"), 'git.ref: "--upload-pack=sh"'),
                       ({"git": {"url": "http://other.example.invalid:8002/r.git",
                                 "ref": "main"}, "path": "src"},
                        "other.example.invalid:8002 is not in tier in's egress rules"),
                       (dict(ginp("repo", "main"), sha256="0" * 64),
                        "a git input takes git {url, ref} and path only")]:
        r = run(c, "in", [inp_])
        t.ok(r["status"] == "rejected" and want in (r.get("error") or ""),
             "admission: a bad git input is refused naming the field (%s)" % want,
             r.get("error"))
    # by real uid: a warm sandbox's interpreter has the slot's as its
    # effective uid only (docs/backends/process.md)
    left = live_pids_of({64500, 64501})
    t.ok(not left, "no process of the git fetches (the slots' uids) outlives them", left)
    killed_fetch(c)
    full_cache(c)
    full_cache_worker(c)


def full_cache_worker(c):
    """A worker whose input cache (its own 4 MiB tmpfs) is full: a job with
    an input waits, its attempt unspent, the worker's entry says why (the
    cache); a job without inputs runs meanwhile; once there is room the
    waiting job runs, still on its first attempt."""
    state = os.path.join(c.dir, "state-f")
    cache = os.path.join(state, "inputs-cache")
    os.makedirs(cache)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0711", "tmpfs", cache],
                   check=True)
    try:
        subprocess.run(["dd", "if=/dev/zero", "of=" + os.path.join(cache, "filler"), "bs=64k"],
                       capture_output=True)
        c.worker("wf", uid_base=64960, slots=1, tiers="in-f", extra=("--state-dir", state))
        jid = "in-%d-full" % os.getpid()
        subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                       input=__import__("msgpack").packb(
                           {"v": 1, "id": jid, "tier": "in-f", "runtime": "sh",
                            "code": "cat src/a.txt",
                            "inputs": [ginp("repo", "main")]}, use_bin_type=True),
                       capture_output=True, timeout=30)
        entry = ""
        for _ in range(150):
            entry = c.rcli("HGET", "al:workers", "wf")
            if '"inputs":"the input cache' in entry:
                break
            time.sleep(0.1)
        plain = c.run_job({"v": 1, "id": "in-%d-plain" % os.getpid(), "tier": "in-f",
                           "runtime": "sh", "code": "echo no inputs"}, timeout=60)
        time.sleep(6)  # a round of waiting: the job comes back, and waits again
        rec = c.rcli("HMGET", "al:job:" + jid, "state", "attempt").split()
        t.ok('"inputs":"the input cache %s is full' % cache in entry and
             rec and rec[0] in ("retrying", "queued") and rec[1] == "1" and
             c.rcli("EXISTS", "al:res:" + jid).strip() == "0",
             "a full input cache: the job with an input waits, attempt 1 unspent, and the "
             "worker's entry says the cache is full", (entry[-400:], rec))
        plain = plain or {}
        t.ok(plain.get("status") == "ok" and plain.get("stdout") == b"no inputs\n",
             "a full input cache: a job without inputs runs meanwhile", plain)
        os.unlink(os.path.join(cache, "filler"))
        raw = c.wait_done(jid, 60)
        import msgpack
        res = msgpack.unpackb(raw, raw=False) if raw else {}
        t.ok(res.get("status") == "ok" and res.get("stdout", b"").startswith(b"one\n") and
             res.get("attempt") == 1 and "inputs_resumed" in c.log("wf"),
             "once the cache has room the job runs, on its first attempt",
             (res, c.log("wf")[-800:]))
    finally:
        if "wf" in c.procs:
            c.signal("wf", 15)
            c.wait_exit("wf")
        subprocess.run(["umount", "-l", cache])


def full_cache(c):
    """The fetcher (airlock-inputs, as the worker starts it) with its cache
    on a 4 MiB tmpfs, filled by a repository larger than that: the error
    names the cache and its size, a sandbox_error (the host's fault), not
    git's "invalid index-pack output"."""
    small = os.path.join(c.dir, "small-cache")
    os.makedirs(small)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0711", "tmpfs", small], check=True)
    try:
        p = subprocess.run([os.path.join(os.environ.get("BUILD", "build"), "airlock-inputs"),
                            "--cache", os.path.join(small, "c"), "--cache-bytes", str(1 << 30),
                            "--max-bytes", str(MAX), "--timeout-ms", "60000",
                            "--out", os.path.join(c.dir, "full.pack"), "--uid", "64950",
                            "--allow", "%s.0/24:8002" % NET, "--",
                            git_url("big"), "main", "src", "git"],
                           capture_output=True, text=True, timeout=120)
    finally:
        subprocess.run(["umount", "-l", small])
    import json
    got = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {}
    t.ok(got.get("status") == "sandbox_error" and
         "the input cache %s/c is full" % small in got.get("error", "") and
         "4194304 bytes" in got.get("error", ""),
         "a full input cache: the fetch's error is a sandbox_error naming the cache and its "
         "size", (got, p.stderr[-500:]))


def killed_fetch(c):
    """A worker SIGKILLed while git fetches an input for it: its fetcher
    and git (the slot's uid) die with it, and the next worker to start on
    the host removes the temporary directory they left in the cache."""
    cache = os.path.join(c.dir, "state", "inputs-cache")
    c.worker("wk", uid_base=64700, slots=1, tiers="in-k", extra=("--input-timeout-ms", "60000"))
    jid = "in-%d-kill" % os.getpid()
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=__import__("msgpack").packb(
                       {"v": 1, "id": jid, "tier": "in-k", "runtime": "sh", "code": "true",
                        "inputs": [ginp("slow", "main")]}, use_bin_type=True),
                   capture_output=True, timeout=30)
    fetching = []
    for _ in range(100):  # the new worker's git
        fetching = live_pids_of({64700})
        if fetching:
            break
        time.sleep(0.1)
    tmp_before = [n for n in os.listdir(cache) if n.startswith(".git.")]
    c.signal("wk", 9)
    c.wait_exit("wk")
    time.sleep(2)
    left = live_pids_of({64700})
    helpers = subprocess.run(["pgrep", "-f", "airlock-inputs.*slow.git"], capture_output=True,
                             text=True).stdout.split()
    t.ok(fetching and not left and not helpers,
         "a worker SIGKILLed while git fetches its input: 2 s later no process of the slot's "
         "uid nor its fetcher is left (%d were fetching)" % len(fetching),
         (left, helpers, c.log("wk")[-1500:]))
    c.worker("wk2", uid_base=64800, slots=1, tiers="none")
    for _ in range(50):
        if "worker_start" in c.log("wk2") or "redis_up" in c.log("wk2"):
            break
        time.sleep(0.1)
    tmp_after = [n for n in os.listdir(cache) if n.startswith((".git.", ".part."))]
    t.ok(tmp_before and not tmp_after,
         "the next worker start removes the temporary directory the killed fetch left in the "
         "cache (%s)" % tmp_before, (tmp_before, tmp_after))
    c.cli("cancel", jid)
    c.signal("wk2", 15)
    c.wait_exit("wk2")


def main():
    os.makedirs(WWW)
    os.makedirs(GITROOT)
    work = make_repo("repo", {"a.txt": b"one\n", "bin/run.sh": ("exec", b"#!/bin/sh\necho ran\n"),
                              "link": ("sym", "a.txt")}, repo_history)
    commits = (git("rev-parse", "main", cwd=work), git("rev-parse", "v1^{commit}", cwd=work),
               git("rev-parse", "pr", cwd=work))
    make_repo("big", {"big.bin": os.urandom(MAX + (2 << 20))})
    make_repo("bomb", {"d%02d/zeros.bin" % k: b"\0" * (1 << 20) for k in range(64)})
    make_repo("evil", {"etc": ("sym", "/etc")})
    for name, data in ARCHIVES.items():
        with open(os.path.join(WWW, name), "wb") as f:
            f.write(data)
    INET.start()
    gitsrv = [subprocess.Popen(["ip", "netns", "exec", INET.ns, "/usr/bin/python3",
                                os.path.join(os.path.dirname(__file__), "..", "lib",
                                             "gitserver.py"), GITROOT, SRV] + args,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for args in (["8002"], ["8003", INET.key])]
    redir = subprocess.Popen(["ip", "netns", "exec", INET.ns, "/usr/bin/python3", "-c", REDIRECTS,
                              SRV], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = Cluster(policy=POLICY)
    try:
        c.scheduler()
        c.worker("w1", uid_base=64500, slots=2, tiers="in,in-ca,none",
                 extra=("--input-timeout-ms", "5000"))
        c.worker("w2", uid_base=65300, slots=1, tiers="in-ctr,in-gv,in-vm")
        cache = os.path.join(c.dir, "state", "inputs-cache")
        time.sleep(0.5)

        first = good_suite(c, "in")
        again = run(c, "in", GOOD, code="print(open('proj/README').read())")
        t.ok(again["status"] == "ok" and again["stdout"] == "a project\n\n" and
             again["info"]["inputs"].startswith("3 (3 from the host's cache)") and
             first["info"]["inputs"].startswith("3 (0 from"),
             "process: the second run of the same inputs comes from the host's cache "
             "(result info.inputs says so); the first fetched them all",
             (first["info"], again["info"]))
        t.ok(sorted(os.listdir(cache)) == sorted(sha(ARCHIVES[n]) for n in
                                                 ("project.tgz", "z.zip", "data.bin")),
             "the cache holds each input once, by its hash, nothing else",
             os.listdir(cache))

        # fetching: each refused with its reason, on the worker's side
        wrong = sha(b"something else")
        bad(c, "in", [inp("project.tgz", "p", "tar", digest=wrong)],
            "has SHA-256 %s, not the %s" % (sha(PROJECT), wrong), "a wrong hash")
        t.ok(wrong not in os.listdir(cache) and not any(n.startswith(".part") for n in
                                                        os.listdir(cache)),
             "a wrong hash never enters the cache (nor a partial download)",
             os.listdir(cache))
        # (each below names bytes the cache does not hold: a hash it holds
        # is those bytes, and their URL is not fetched again)
        fresh = sha(b"bytes no server here has")
        bad(c, "in", [inp("project.tgz", "p", "tar"),
                      dict(inp("data.bin", "x"), url=url("missing.bin"), sha256=fresh)],
            "answered HTTP 404", "a 404 among good inputs")
        bad(c, "in", [dict(inp("project.tgz", "p", "tar"), url=url("to-other", 8001), sha256=fresh)],
            "other.example.invalid:8000 is not in the tier's egress rules",
            "a redirect to a host the rules do not name")
        bad(c, "in", [dict(inp("project.tgz", "p", "tar"), url=url("to-meta", 8001), sha256=fresh)],
            "169.254.169.254", "a redirect to the metadata address")
        r = run(c, "in", [dict(inp("redirected.tgz", "p", "tar"), url=url("to-project", 8001))],
                code="print(open('p/r/file.txt').read())")
        t.ok(r["status"] == "ok" and "came by a redirect" in r["stdout"],
             "process: a redirect to an allowed URL is followed", (r["status"], r.get("error")))
        bad(c, "in", [dict(inp("project.tgz", "p", "tar"), url=url("loop", 8001), sha256=fresh)],
            "more than 5 redirects", "a redirect loop")
        bad(c, "in", [inp("big.bin", "big.bin")], "larger than the tier's max_input_bytes",
            "an input over max_input_bytes (%d)" % MAX)
        bad(c, "in", [inp("bomb.zip", "b", "zip")],
            "unpacks to more than the tier's max_input_bytes", "a zip bomb (64 MiB in 64 KiB)")
        bad(c, "in", [dict(inp("project.tgz", "p", "tar"), url=url("slow", 8001), sha256=fresh)],
            "Timeout was reached", "an answer that never comes (the worker's "
            "--input-timeout-ms)", status="sandbox_error")
        bad(c, "in", [dict(inp("project.tgz", "p", "tar"),
                           url="http://%s.99:8000/project.tgz" % NET, sha256=fresh)],
            "http://%s.99:8000/project.tgz: " % NET, "an address that does not answer",
            status="sandbox_error")
        bad(c, "in", [inp("notatar.tar", "t", "tar")], "tar archive", "bytes that are no tar")

        # archives that try to leave the tree
        bad(c, "in", [inp("dotdot.tar", ".", "tar")], 'entry "../escape.txt"',
            "a tar with a ../ path")
        bad(c, "in", [inp("abs.tar", ".", "tar")], 'entry "/etc/airlock-abs"',
            "a tar with an absolute path")
        bad(c, "in", [inp("symabs.tar", ".", "tar")], 'symlink to "/etc"',
            "a tar with a symlink to /etc")
        bad(c, "in", [inp("symup.tar", ".", "tar")], 'symlink to "../../.."',
            "a tar with a symlink above its top")
        bad(c, "in", [inp("dev.tar", ".", "tar")], "a device", "a tar with a device node")
        bad(c, "in", [inp("clash.tar", ".", "tar")], '"given.txt"',
            "a tar entry clashing with a job file", files=[{"path": "given.txt",
                                                           "data": b"mine\n"}])
        t.ok(not os.path.exists("/etc/airlock-abs") and not os.path.exists(
            os.path.join(c.dir, "state", "escape.txt")),
             "nothing of those archives landed outside a job's tree")

        # admission
        r = run(c, "none", [inp("data.bin", "d")])
        t.ok(r["status"] == "rejected" and "has no egress rules" in r["error"],
             "admission: a tier without egress refuses inputs by URL", r.get("error"))
        r = run(c, "in", [dict(inp("data.bin", "d"), url="http://other.example.invalid:8000/d")])
        t.ok(r["status"] == "rejected" and "other.example.invalid:8000 is not in tier in's "
             "egress rules" in r["error"], "admission: a host not in the tier's rules",
             r.get("error"))
        r = run(c, "in", [dict(inp("data.bin", "d"))], egress_allow=["%s.0/24:8001" % NET])
        t.ok(r["status"] == "rejected" and "narrows" in r["error"],
             "admission: a job's egress_allow narrows its inputs' hosts too", r.get("error"))
        for field, val, want in [("sha256", "ABC", "64 lowercase hex"),
                                 ("url", "ftp://%s/x" % SRV, "only http:// and https://"),
                                 ("url", "http://u:p@%s:8000/x" % SRV, "user information"),
                                 ("path", "../x", '".." in path'),
                                 ("unpack", "rar", "one of tar, zip, none")]:
            r = run(c, "in", [dict(inp("data.bin", "d"), **{field: val})])
            t.ok(r["status"] == "rejected" and want in r["error"],
                 "bad input: %s %r is refused naming the field" % (field, val), r.get("error"))
        r = run(c, "in", [inp("data.bin", "given.txt")],
                files=[{"path": "given.txt", "data": b"x"}])
        t.ok(r["status"] == "rejected" and "meets files[0]" in r["error"],
             "bad input: an input's path that is a job file's", r.get("error"))

        # the other boundaries: the same tree; the guest's unpacker refuses
        # an entry under a symlink too
        bad(c, "in", [inp("undersym.tar", ".", "tar")], "lies under a symlink",
            "an entry under a symlink (the process backend's unpacker)")
        good_suite(c, "in-ctr")
        good_suite(c, "in-vm")
        bad(c, "in-vm", [inp("undersym.tar", ".", "tar")], "lies under a symlink",
            "an entry under a symlink (the microVM agent's unpacker)")
        git_suite(c, commits)
        for tier in ("in-ctr", "in-gv", "in-vm"):
            r = run(c, tier, [ginp("repo", "refs/pull/7/head")], code=GIT_LIST)
            t.ok(r["status"] == "ok" and "HEAD " + commits[2] in r["stdout"] and
                 "PR True" in r["stdout"] and "RUN True a.txt" in r["stdout"] and
                 "MINE True" in r["stdout"],
                 "%s: a git input's pull-request ref is the job's tree, with its .git, "
                 "owned by the job" % TIERS[tier], (r["status"], r.get("error"), r["stdout"]))
        t.ok(not [n for n in os.listdir(cache) if not (len(n) == 64 and n.isalnum())],
             "no git work directory or partial download is left in the cache",
             os.listdir(cache))
        packs = os.path.join(c.dir, "state", "inputs")
        t.ok(os.listdir(packs) == [], "no inputs pack outlives its job", os.listdir(packs))
    finally:
        for g in gitsrv:
            g.kill()
            g.wait()
        redir.kill()
        redir.wait()
        c.close()
        INET.stop()
        subprocess.run(["rm", "-rf", WWW])
    return t.done()


sys.exit(main())
