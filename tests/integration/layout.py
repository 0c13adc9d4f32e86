#!/usr/bin/python3
"""The house's shape (HACKING.md, "Layout"), beside the layers: no source
file (C, header, Python) over 1,000 lines; no circle of calls between the
files of one folder (file A calls a function of B, B one of A, perhaps
through others), read from the objects' symbol tables; no exported symbol
of a folder without that folder's prefix. Each finding is printed with the
way out.

    layout.py [--root DIR] [--build DIR]

DIR defaults to this checkout and its build ($BUILD). The objects are the
build's (build/obj/...); a file the build makes no object of (a helper
program, the guest agent) is compiled here, into BUILD/layout-obj."""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD, ROOT, Tap  # noqa: E402

MAX_LINES = 1000
FOLDERS = ("proto", "common", "client", "backends", "worker", "scheduler", "gateway", "cli")
# Each folder's prefixes for what its objects export (a subfolder has its
# parent's unless named); every program may define main.
PREFIXES = {
    "proto": ("al_",),
    "common": ("al_",),
    "client": ("al_",),
    "backends": ("al_",),
    "backends/container": ("ctr_", "al_backend_container"),
    "backends/microvm": ("mvm_", "agent_", "al_"),
    "worker": ("wk_", "px_"),
    "worker/inputs": ("fx_", "fx"),
    "scheduler": ("sc_",),
    "gateway": ("gw_",),
    "cli": ("cli_",),
}
PKGS = ("hiredis libevent msgpack libseccomp libcurl libcrypto jansson yaml-0.1 libvirt "
        "libxml-2.0").split()
WAY_OUT = {
    "size": "split it along its concepts (its banner comments), one file each whose first "
            "comment says what it holds",
    "circle": "take what both sides use into a file they both call downward, or hand it to "
              "the lower one as a parameter or a function pointer",
    "prefix": "make it static, or name it with its folder's prefix",
}


def tracked(root):
    out = subprocess.run(["git", "ls-files", "*.c", "*.h", "*.py"], cwd=root,
                         capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.split()
    files = []  # a copy of the tree without .git
    for d, _, names in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel.split(os.sep)[0] in (".git", "build") or rel.startswith("build"):
            continue
        files += [os.path.normpath(os.path.join(rel, n)) for n in names
                  if n.endswith((".c", ".h", ".py"))]
    return sorted(files)


def too_long(root, files):
    found = []
    for f in files:
        with open(os.path.join(root, f), "rb") as fh:
            n = fh.read().count(b"\n")
        if n > MAX_LINES:
            found.append("%s: %d lines (at most %d)" % (f, n, MAX_LINES))
    return found


def object_of(root, build, f, cflags, made):
    """f's object: the build's, else compiled here (kept while f is older)."""
    o = os.path.join(build, "obj", f[:-2] + ".o")
    if os.path.exists(o):
        return o
    o = os.path.join(build, "layout-obj", f[:-2] + ".o")
    src = os.path.join(root, f)
    if not os.path.exists(o) or os.path.getmtime(o) < os.path.getmtime(src):
        os.makedirs(os.path.dirname(o), exist_ok=True)
        r = subprocess.run(["cc", "-std=gnu11", "-D_GNU_SOURCE", "-c", src, "-o", o] + cflags,
                           capture_output=True, text=True)
        if r.returncode:
            made.append("%s: does not compile alone: %s" % (f, r.stderr.strip()[:300]))
            return None
    return o


def symbols(objects):
    """Each object's defined and wanted symbols, from one nm."""
    out = subprocess.run(["nm", "-A"] + list(objects), capture_output=True, text=True).stdout
    table = {o: (set(), set()) for o in objects}
    for line in out.splitlines():
        o, _, rest = line.rpartition(": ") if ": " in line else line.partition(":")
        o = o.split(":")[0] if o not in table else o
        parts = rest.split()
        if o not in table:
            continue
        if len(parts) == 2 and parts[0] == "U":
            table[o][1].add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCGSV":
            table[o][0].add(parts[2])
    return table


def circles(edges):
    """The strongly connected sets of more than one file (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def report(t, cond, name, lines, way):
    """One TAP line; each finding under it, then the way out."""
    t.ok(cond, name)
    for line in lines:
        print("#   " + line)
    if lines and way:
        print("#   way out: " + way)


def prefixes_of(folder):
    while folder not in PREFIXES and "/" in folder:
        folder = folder.rsplit("/", 1)[0]
    return PREFIXES.get(folder, ())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=ROOT)
    ap.add_argument("--build", default=None)
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    build = os.path.abspath(a.build or (BUILD if root == ROOT else os.path.join(root, "build")))
    t = Tap()
    files = tracked(root)
    long_files = too_long(root, files)
    report(t, not long_files, "no source file (C, header, Python) over %d lines (%d files)"
           % (MAX_LINES, len(files)), long_files, WAY_OUT["size"])

    cflags = subprocess.run(["pkg-config", "--cflags"] + PKGS, capture_output=True,
                            text=True).stdout.split() + ["-I/usr/include/hiredis"]
    made, objs = [], {}
    for f in files:
        if f.endswith(".c") and f.split("/")[0] in FOLDERS:
            o = object_of(root, build, f, cflags, made)
            if o:
                objs[f] = o
    table = symbols(objs.values())
    syms = {f: table[o] for f, o in objs.items()}
    report(t, bool(syms) and not made, "every C file of the layered folders has an object to "
           "read (%d)" % len(syms), made, None)

    found = []
    by_folder = {}
    for f in syms:
        by_folder.setdefault(os.path.dirname(f), []).append(f)
    for folder, fs in sorted(by_folder.items()):
        edges, ties = {}, {}
        for a_ in fs:
            for b in fs:
                if a_ != b:
                    names = sorted(syms[a_][1] & syms[b][0])
                    if names:
                        edges.setdefault(a_, set()).add(b)
                        ties[(a_, b)] = names
        for comp in circles(edges):
            found.append("circle in %s/: %s" % (folder, ", ".join(comp)))
            for x in comp:
                for y in comp:
                    if (x, y) in ties:
                        found.append("  %s calls %s: %s" % (x, y, " ".join(ties[(x, y)][:6])))
    report(t, not found, "no circle of calls between the files of one folder (%d folders)"
           % len(by_folder), found, WAY_OUT["circle"])

    bad = []
    for f, (defined, _) in sorted(syms.items()):
        allowed = prefixes_of(os.path.dirname(f))
        for s in sorted(defined):
            if s == "main" or s.startswith("_") or re.match(r"^\.", s):
                continue
            if not any(s == p or s.startswith(p) for p in allowed):
                bad.append("%s exports %s (its folder's prefixes: %s)"
                           % (f, s, " ".join(allowed) or "none"))
    report(t, not bad, "every exported symbol carries its folder's prefix", bad,
           WAY_OUT["prefix"])
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
