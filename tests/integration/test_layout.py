#!/usr/bin/python3
"""The layout check (tests/integration/layout.py) against copies of the
tree: the copy as it is passes; a copy with a 1,001-line file, with two
files of one folder that call each other, or with a function exported
without its folder's prefix fails, naming the file (and the way out)."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD, ROOT, Tap  # noqa: E402

CHECK = os.path.join(ROOT, "tests", "integration", "layout.py")
t = Tap()
tmp = tempfile.mkdtemp(prefix="al-layout-")
copy = os.path.join(tmp, "tree")
files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True,
                       text=True).stdout.split()
for f in files:
    if os.path.isfile(os.path.join(ROOT, f)):
        os.makedirs(os.path.join(copy, os.path.dirname(f)), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), os.path.join(copy, f))
# the build's objects (and the check's own), linked: nothing is rebuilt
os.makedirs(os.path.join(copy, "build"))
for d in ("obj", "layout-obj"):
    if os.path.isdir(os.path.join(BUILD, d)):
        subprocess.run(["cp", "-al", os.path.join(BUILD, d), os.path.join(copy, "build", d)],
                       check=True)


def check():
    p = subprocess.run([sys.executable, CHECK, "--root", copy,
                        "--build", os.path.join(copy, "build")],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def put(path, text):
    with open(os.path.join(copy, path), "w") as f:
        f.write(text)


def drop(*paths):
    for p in paths:
        os.unlink(os.path.join(copy, p))
        o = os.path.join(copy, "build", "layout-obj", p[:-2] + ".o")
        if p.endswith(".c") and os.path.exists(o):
            os.unlink(o)


try:
    rc, out = check()
    t.ok(rc == 0 and "not ok" not in out, "the copy of the tree as it is passes", out)

    put("proto/long.h", "/* long.h - too long */\n" + "/* a line */\n" * 1000)
    rc, out = check()
    t.ok(rc != 0 and "proto/long.h: 1001 lines (at most 1000)" in out and "way out: split" in out,
         "a 1,001-line header fails, named with its count and the way out", out)
    drop("proto/long.h")

    put("gateway/ping.c", '/* ping.c */\nint gw_pong(int n);\nint gw_ping(int n);\n'
        'int gw_ping(int n) { return n ? gw_pong(n - 1) : 0; }\n')
    put("gateway/pong.c", '/* pong.c */\nint gw_ping(int n);\nint gw_pong(int n);\n'
        'int gw_pong(int n) { return n ? gw_ping(n - 1) : 1; }\n')
    rc, out = check()
    t.ok(rc != 0 and "circle in gateway/: gateway/ping.c, gateway/pong.c" in out
         and "gateway/ping.c calls gateway/pong.c: gw_pong" in out
         and "way out: take what both sides use" in out,
         "two files of one folder calling each other fail, named with the names that tie "
         "them", out)
    drop("gateway/ping.c", "gateway/pong.c")

    put("scheduler/stray.c", "/* stray.c */\nint helper(void);\nint helper(void) { return 1; }\n")
    rc, out = check()
    t.ok(rc != 0 and "scheduler/stray.c exports helper (its folder's prefixes: sc_)" in out
         and "way out: make it static" in out,
         "a function exported without its folder's prefix fails, named with the prefix", out)
    drop("scheduler/stray.c")

    rc, out = check()
    t.ok(rc == 0, "the copy passes again once each is taken out", out)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(t.done())
