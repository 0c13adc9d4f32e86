#!/usr/bin/python3
"""The layers go one way (docs: HACKING.md, "Layers"): proto/ (codecs, the
Redis contract; no I/O) <- common/ (connection layer, clocks, log, policy,
options) <- client/ (the client library) and backends/ <- the programs
(worker/, scheduler/, gateway/, cli/). No file includes one of a higher
floor or of a neighbour on its own floor, no two files include each other
through a circle, and no daemon links a piece of client/."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD, ROOT, Tap  # noqa: E402

t = Tap()
FLOOR = {"proto": 0, "common": 1, "client": 2, "backends": 2, "worker": 3, "scheduler": 3,
         "gateway": 3, "cli": 3}
files = subprocess.run(["git", "ls-files", "*.c", "*.h"], cwd=ROOT, capture_output=True,
                       text=True).stdout.split()
graph = {}
up = []
for f in files:
    top = f.split("/")[0]
    if top not in FLOOR:
        continue
    with open(os.path.join(ROOT, f), errors="replace") as fh:
        incs = re.findall(r'^#include "([^"]+)"', fh.read(), re.M)
    graph[f] = []
    for inc in incs:
        target = os.path.normpath(os.path.join(os.path.dirname(f), inc))
        graph[f].append(target)
        ttop = target.split("/")[0]
        if ttop not in FLOOR or ttop == top:
            continue
        if FLOOR[ttop] >= FLOOR[top]:
            up.append("%s -> %s" % (f, target))
t.ok(not up, "no file includes one of a higher floor or a neighbour's (%d files)" % len(graph),
     up)

# circles among the files (an include of a header that, through others,
# includes the first); a .c file's own header is the usual, not a circle
state, cycles = {}, []


def visit(n, path):
    state[n] = 1
    for m in graph.get(n, []):
        if state.get(m) == 1:
            cycles.append(" -> ".join(path[path.index(m):] + [m]) if m in path else m)
        elif not state.get(m):
            visit(m, path + [m])
    state[n] = 2


for n in graph:
    if not state.get(n):
        visit(n, [n])
t.ok(not cycles, "no circle of includes", cycles[:5])

client_syms = set()
for c in (f for f in files if f.startswith("client/") and f.endswith(".c")):
    o = os.path.join(BUILD, "obj", c[:-2] + ".o")
    out = subprocess.run(["nm", "--defined-only", o], capture_output=True, text=True).stdout
    client_syms |= {l.split()[-1] for l in out.splitlines() if " T " in l}
linked = {}
for d in ("airlock-worker", "airlock-scheduler", "airlock-gateway"):
    out = subprocess.run(["nm", "--defined-only", os.path.join(BUILD, d)], capture_output=True,
                         text=True).stdout
    linked[d] = sorted({l.split()[-1] for l in out.splitlines()} & client_syms)
t.ok(client_syms and not any(linked.values()),
     "no daemon links a piece of client/ (%d functions there)" % len(client_syms), linked)

# the worker's parts, a job's path bottom first (worker/worker.h): a part
# calls only those before it; the other way goes through the loop pass
PATH = ["commit", "slots", "health", "session_calls", "sessions", "jobs", "fetch", "control", "service"]


def syms(part, flag):
    out = subprocess.run(["nm", flag, os.path.join(BUILD, "obj", "worker", part + ".o")],
                         capture_output=True, text=True).stdout
    if flag == "-u":
        return {l.split()[-1] for l in out.splitlines() if l.strip()}
    return {l.split()[-1] for l in out.splitlines() if " T " in l}


defined = {p: syms(p, "--defined-only") for p in PATH}
upward = []
for i, p in enumerate(PATH):
    for q in PATH[i + 1:]:
        calls = sorted(syms(p, "-u") & defined[q])
        if calls:
            upward.append("%s.c -> %s.c: %s" % (p, q, " ".join(calls)))
t.ok(all(defined.values()) and not upward,
     "the worker's parts call down a job's path only (%s)" % " <- ".join(PATH), upward)

# one error convention (HACKING.md, "Errors"): a fallible function returns
# int and fills a struct al_err; no why buffer or why string out-parameter
whys = []
for f in files:
    if f.split("/")[0] in ("worker", "scheduler", "gateway", "backends", "common", "cli"):
        with open(os.path.join(ROOT, f), errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                if re.search(r"\bchar \*why, size_t|const char \*\*why\b|char \*errbuf", line):
                    whys.append("%s:%d: %s" % (f, n, line.strip()))
t.ok(not whys, "no function reports failure through a why buffer (struct al_err instead)", whys)
sys.exit(t.done())
