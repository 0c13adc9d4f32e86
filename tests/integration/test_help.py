#!/usr/bin/python3
"""One way to ask for help, everywhere (issue 59): `airlock help`, `airlock
help CMD [SUB]`, `airlock CMD --help` and `airlock CMD SUB --help` print that
command's usage and exit 0 for every command and subcommand `airlock help`
lists; so do the daemons, airlock-mcp and the scripts under deploy/. None
of them opens a connection: Redis and the gateway given to them are one
listening socket that counts what connects to it (it must be nothing), and
deploy/install.sh --help installs nothing. A wrong use prints the
command's usage on stderr, exit 2."""
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD, CLI, Tap  # noqa: E402

t = Tap()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# Redis and the gateway, "down": a listener that only counts
lst = socket.socket()
lst.bind(("127.0.0.1", 0))
lst.listen(64)
port = lst.getsockname()[1]
connected = []


def count():
    while True:
        try:
            c, _ = lst.accept()
        except OSError:
            return
        connected.append(1)
        c.close()


threading.Thread(target=count, daemon=True).start()
ENV = dict(os.environ, AIRLOCK_REDIS="redis://127.0.0.1:%d" % port,
           AIRLOCK_GATEWAY="", AIRLOCK_TOKEN="x",
           PYTHONPATH=os.path.join(ROOT, "client", "python"))


def run(*argv, env=ENV):
    p = subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=30)
    return p.returncode, p.stdout, p.stderr


rc, top, _ = run(CLI, "help")
cmds = re.findall(r"^  ([a-z][a-z-]*)\b", top.split("airlock help COMMAND")[0], re.M)
t.ok(rc == 0 and top.startswith("usage: airlock") and
     {"run", "submit", "grade", "session", "dlq", "vm", "stats", "images"} <= set(cmds),
     "airlock help lists every command (%d)" % len(cmds), top[:400])
same = [run(CLI, a)[1] for a in ("--help", "-h")]
t.ok(same == [top, top], "airlock --help and -h print the same", same)

bad, subs_seen = {}, 0
for cmd in cmds:
    rc, out, err = run(CLI, cmd, "--help")
    rc2, out2, _ = run(CLI, "help", cmd)
    if rc or rc2 or out != out2 or not out.startswith("usage: airlock %s" % cmd):
        bad[cmd] = (rc, rc2, out[:200], err[:200])
    has_subs = out.startswith("usage: airlock %s SUB" % cmd)
    for sub in re.findall(r"^  %s ([a-z]+)\b" % re.escape(cmd), out, re.M) if has_subs else []:
        subs_seen += 1
        rc, sout, err = run(CLI, cmd, sub, "--help")
        rc2, sout2, _ = run(CLI, "help", cmd, sub)
        if rc or rc2 or sout != sout2 or not sout.startswith("usage: airlock %s %s" % (cmd, sub)):
            bad[cmd + " " + sub] = (rc, rc2, sout[:200], err[:200])
t.ok(not bad and subs_seen >= 15,
     "every command and each of its %d subcommands: CMD [SUB] --help and help CMD [SUB] "
     "print its own usage, exit 0" % subs_seen, bad)

rc, out, _ = run(CLI, "session", "py", "--help")
t.ok(rc == 0 and "--output-max BYTES" in out and "--cpu MS" in out and
     "--cpu-budget" not in out and "--mode" not in out,
     "a subcommand's help lists its own options only (session py: --cpu, --output-max; not "
     "open's --cpu-budget nor put's --mode)", out)
rc, out, err = run(CLI, "session", "py", "S1", "--cpu-budget", "5", "-c", "1")
t.ok(rc == 2 and "--cpu-budget is not one of its options" in err,
     "...and its parser takes no other: session py --cpu-budget is a usage error", (rc, err))
rc, out, err = run(CLI, "dlq")
t.ok(rc == 2 and "usage: airlock dlq SUB" in err and "dlq retry ENTRY" in err,
     "a command with wrong arguments prints its usage on stderr, exit 2", (rc, err))
rc, out, err = run(CLI, "help", "frobnicate")
t.ok(rc == 2 and "no command" in err, "help for a command that does not exist: exit 2",
     (rc, err))

daemons = {}
for d in ("airlock-worker", "airlock-scheduler", "airlock-gateway"):
    rc, out, err = run(os.path.join(BUILD, d), "--help")
    opts = re.findall(r"^  --([a-z-]+)", out, re.M)
    daemons[d] = (rc, out.startswith("usage: " + d), "help" in opts, len(opts))
t.ok(all(v[:3] == (0, True, True) and v[3] >= 5 for v in daemons.values()),
     "every daemon's --help: its usage, from its options' table, exit 0", daemons)
rc, out, err = run("/usr/bin/python3", "-m", "airlock.mcp", "--help")
t.ok(rc == 0 and "usage: airlock-mcp" in out and "--image" in out, "airlock-mcp --help",
     (rc, out[:300], err[-300:]))

scripts = ["deploy/demo.sh", "deploy/install-deps.sh", "deploy/install.sh",
           "deploy/redis-acl.sh", "deploy/images/build.sh"]
found = sorted(os.path.relpath(os.path.join(d, f), ROOT)
               for d, _, fs in os.walk(os.path.join(ROOT, "deploy")) for f in fs
               if f.endswith(".sh"))
with tempfile.TemporaryDirectory() as prefix:
    out = {s: run("bash", os.path.join(ROOT, s), "--help",
                  env=dict(ENV, PREFIX=prefix, DESTDIR=prefix))
           for s in scripts}
    installed = os.listdir(prefix)
    wrong = run("bash", os.path.join(ROOT, "deploy/install.sh"), "--frob",
                env=dict(ENV, PREFIX=prefix, DESTDIR=prefix))
    installed += os.listdir(prefix)
t.ok(found == sorted(scripts) and
     all(rc == 0 and os.path.basename(s) in o for s, (rc, o, _) in out.items()) and
     not installed and wrong[0] == 2 and "no arguments" in wrong[2],
     "every script under deploy/ has --help (its header, exit 0), install.sh --help "
     "installs nothing and refuses an argument it does not take",
     (found, {s: (v[0], v[1][:80]) for s, v in out.items()}, installed, wrong))

t.ok(not connected, "none of the above opened a connection to Redis or the gateway",
     len(connected))
lst.close()
sys.exit(t.done())
