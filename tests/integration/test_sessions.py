#!/usr/bin/python3
"""Sessions (PROTOCOL.md, "Sessions") through a real redis-server,
scheduler and worker, on the process, container (runc, the python image)
and microVM (QEMU, TCG here) boundaries, with the Python client over
Redis: state (a
variable, an import, a file) from call 1 is there in call 5; exec, python
and files; a call past its time is interrupted and the session goes on; a
call that will not stop ends it (call_stuck); 10 MB printed is cut at the
cap; a figure-like object comes back as a PNG that decodes; each way a
session ends (close, idle, max_life, the interpreter
exiting, a fork bomb, the worker's drain, the worker killed) ends it with
its reason and leaves nothing on the host (a call past the session's
memory costs the call: memory_limit, the interpreter restarted); max_per_tenant; a tier without
sessions and a backend without them are refused; one tenant cannot run a
call in, read files of, or close another's session by its id, over Redis
or through the gateway (whose endpoints, and the Python client through
them, are tested here too); a malformed call is answered and harms
nothing."""
import os
import http.client
import json
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
from altest import (CLI, Tap, job_cgroups, leftovers, live_pids_of, need_root,  # noqa: E402
                    raises)
from cluster import Cluster  # noqa: E402
from gwclient import Api, free_port, key_file, start_gateway  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402

import airlock  # noqa: E402

t = Tap()
need_root("the process backend")

UID = 64300
# its container tiers' host uids are its own (it runs in a lane beside the
# other container suites: tests/run.sh)
USERNS = ["--userns-base", "700000"]
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
SESS = {"max_per_tenant": 3, "idle_s": 4, "max_life_s": 600}
POLICY = policy(
    tier_def("trusted", "process", defaults=dict(DEFAULTS, wall_ms=3000), sessions=SESS),
    tier_def("brief", "process", defaults=dict(DEFAULTS, wall_ms=3000),
             sessions={"max_per_tenant": 3, "idle_s": 600, "max_life_s": 3}),
    tier_def("small", "process", defaults=dict(DEFAULTS, memory_bytes=96 << 20, pids=32),
             sessions=SESS),
    tier_def("plain", "process", defaults=DEFAULTS),
    tier_def("budget", "process", defaults=DEFAULTS,
             sessions=dict(SESS, cpu_budget_s=2, life_s=3, max_idle_s=60)),
    tier_def("vmtier", "microvm", image="python", defaults=dict(DEFAULTS, wall_ms=5000),
             sessions=SESS),
    tier_def("svc", "vm", image="python", ports=[8080], sessions=SESS),
    tier_def("ctr", "container", image="python", defaults=dict(DEFAULTS, wall_ms=3000),
             sessions=SESS),
    tier_def("ctrsmall", "container", image="python",
             defaults=dict(DEFAULTS, memory_bytes=96 << 20), sessions=SESS),
    tier_def("ctrds", "container", image="datascience",
             defaults=dict(DEFAULTS, wall_ms=30000, memory_bytes=512 << 20), sessions=SESS),
    lease_ms=3000)


BURN = ("import time\nt0 = time.process_time()\nwhile time.process_time() - t0 < %s:\n"
        "    pass\nn = globals().get('n', 0) + 1\nprint(n)")


def limits_per_call(cl, tier, calls):
    """An interpreter that lives for hours (issue 58): with timeout=5 (the
    per-call time, and so the per-call CPU), calls of 0.9 s CPU each go on
    past 5 s of CPU in all; a call past its own cpu_ms is cpu_limit and the
    next runs with the state kept; a 1 MiB print with output_max=4096
    keeps its head and tail, says the cut and is not ok."""
    with cl.session(tier=tier, timeout=5) as s:
        rs = [s.run_python(BURN % 0.9) for _ in range(calls)]
        hot = s.run_python(BURN % 3, cpu=1, timeout=20)
        after = s.run_python("print(n)")
        big = s.run_python("import sys\n_ = sys.stdout.write('<' + 'x' * ((1 << 20) - 2) + '>')",
                           output_max=4096)
    ok = [r.status for r in rs] == ["ok"] * calls and \
        rs[-1].stdout == b"%d\n" % calls
    cpu = hot.status == "cpu_limit" and hot.exit_code is None and \
        "CPU time (1000 ms)" in (hot.error or "") and after.stdout == b"%d\n" % calls
    cut = big.status == "output_limit" and big.exit_code is None and \
        len(big.stdout) <= 4096 and big.stdout.startswith(b"<xx") and \
        big.stdout.endswith(b"xx>") and "output_max of 4096" in (big.error or "") and \
        "of 1048576 bytes" in (big.error or "")
    return ok and cpu and cut, ([(r.status, r.error) for r in rs], hot.status, hot.error,
                                after.stdout, big.status, big.error, len(big.stdout))


def png_ok(data):
    """A PNG whose chunks' CRCs hold and whose IHDR says width x height."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    pos, size = 8, None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0] != zlib.crc32(kind + body):
            return None
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        pos += 12 + n
    return size


def sse_call(port, key, sid, code):
    """POST run_python asking for Server-Sent Events: (status, content type,
    [(event, data)])."""
    h = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    h.request("POST", "/v1/sessions/%s/run_python" % sid, body=json.dumps({"code": code}),
              headers={"Authorization": "Bearer " + key, "Content-Type": "application/json",
                       "Accept": "text/event-stream"})
    got = h.getresponse()
    events = []
    for block in got.read().decode().split("\n\n"):
        ev = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in ev:
            events.append((ev["event"], json.loads(ev["data"])))
    return got.status, got.getheader("Content-Type"), events


def ended_reason(c, sid):
    return c.rcli("HGET", "al:sess:" + sid, "reason").strip()


c = Cluster(policy=POLICY)
try:
    c.scheduler()
    SECRET = "canary-" + os.urandom(6).hex()
    WENV = dict(os.environ, AIRLOCK_TEST_SECRET=SECRET)
    c.worker("sw", uid_base=UID, slots=6, tiers="trusted,brief,small,plain,budget,ctr,ctrsmall,ctrds",
             extra=["--images", IMAGES] + USERNS, env=WENV)
    cl = airlock.Client(redis=c.url, tier="trusted")

    # ---- state persists, call after call ----
    s = cl.session()
    r1 = s.run_python("import json\nx = 42\nopen('kept.txt', 'w').write('from call 1')")
    s.run_python("y = x + 1")
    s.exec("echo shell >> kept.txt")
    s.run_python("z = json.dumps({'y': y})")
    r5 = s.run_python("print(x, z)\nprint(open('kept.txt').read())\nx * 2")
    t.ok(r1.status == "ok" and r5.status == "ok" and
         r5.stdout == b'42 {"y": 43}\nfrom call 1shell\n\n84\n',
         "1: a variable, an import and a file of call 1 are there in call 5 (a last "
         "expression's value printed)", (r1, r5.stdout))
    r = s.exec(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"])
    t.ok(r.status == "nonzero_exit" and r.exit_code == 3 and r.stdout == b"out\n" and
         r.stderr == b"err\n", "2: exec with argv: stdout, stderr and its exit code", r)
    r = s.run_python("undefined_name")
    s.run_python("def boom():\n    return {}['key']\n")
    rb = s.run_python("x\nboom()")
    rs = s.run_python("y = (")
    t.ok(r.status == "nonzero_exit" and r.error == "NameError: name 'undefined_name' is not "
         "defined" and r.stderr.startswith(b"Traceback") and b"session_server" not in r.stderr
         and re.match(rb'Traceback \(most recent call last\):\n  File "<run_python #\d+>", '
                      rb'line 1, in <module>\n    undefined_name\n', r.stderr) and
         re.match(rb'Traceback \(most recent call last\):\n'
                  rb'  File "<run_python #(\d+)>", line 2, in <module>\n    boom\(\)\n'
                  rb'  File "<run_python #(\d+)>", line 2, in boom\n    return \{\}\[.key.\]',
                  rb.stderr) and
         re.match(rb'  File "<run_python #\d+>", line 1\n    y = \(\n', rs.stderr) and
         b"SyntaxError: '(' was never closed" in rs.stderr,
         "3: an exception: nonzero_exit, its summary in error, the caller's traceback only, "
         "naming each call's code <run_python #N> with its lines (a function of an earlier "
         "call: its own call's); a SyntaxError as python3 prints one",
         (r.error, r.stderr, rb.stderr, rs.stderr))
    r = s.run_python("raise SystemExit(5)")
    r2 = s.run_python("print(x)")
    t.ok(r.status == "nonzero_exit" and r.exit_code == 5 and r2.stdout == b"42\n",
         "4: SystemExit in a call is the call's exit code; the session goes on", (r, r2))

    # ---- a call past its time ----
    t0 = time.monotonic()
    r = s.run_python("import time\ntime.sleep(30)", timeout=1)
    took = time.monotonic() - t0
    r2 = s.run_python("print('after', x)")
    t.ok(r.status == "timeout" and "interrupted" in (r.error or "") and took < 5 and
         r2.stdout == b"after 42\n",
         "5: a call past its time is interrupted (timeout, %.1f s) and the session goes on "
         "with its state" % took, (r, r2))
    r = s.exec("sleep 30", timeout=1)
    r2 = s.exec("echo alive")
    t.ok(r.status == "timeout" and r2.stdout == b"alive\n",
         "6: an exec call past its time: its process group killed, the session goes on", r)

    # ---- output caps ----
    r = s.run_python("print('x' * 10_000_000)")
    r2 = s.run_python("print(len(str(x)))")
    t.ok(r.status == "output_limit" and len(r.stdout) == 1 << 20 and r.stdout_truncated and
         r2.stdout == b"2\n",
         "7: 10 MB printed: cut at the 1 MiB cap, output_limit, the session goes on",
         (r.status, len(r.stdout), r.error))

    # ---- live output, as a job's ----
    seen = []
    t0 = time.monotonic()
    r = s.run_python("import sys, time\nfor i in range(5):\n    print('tick', i, flush=True)\n"
                     "    print('warn', i, file=sys.stderr, flush=True)\n    time.sleep(0.4)\n",
                     on_output=lambda kind, data: seen.append((time.monotonic() - t0, kind,
                                                                data)))
    took = time.monotonic() - t0
    out = b"".join(d for _, k, d in seen if k == "stdout")
    err = b"".join(d for _, k, d in seen if k == "stderr")
    cid = s.id + "/" + r.id  # a call's answer is named <session>/<call>
    tail = c.rcli("XREVRANGE", "al:out:" + cid, "+", "-", "COUNT", "1").split()
    ttl = int(c.rcli("PTTL", "al:out:" + cid).strip())
    t.ok(r.status == "ok" and seen and seen[0][0] < took - 1.0 and out == r.stdout and
         err == r.stderr and b"tick 4" in out and tail[-6:] == ["t", "end", "s", "ok", "a", "1"]
         and ttl > 0,
         "37: a call's output comes live (the first of it %.2f s into a %.2f s call), in "
         "order, the same bytes as its result; its stream al:out:<session>/<call> ends with t end s ok "
         "and expires" % (seen[0][0] if seen else -1, took), (seen[:3], tail, ttl))
    flood = []
    r = s.run_python("print('y' * 5_000_000)",
                     on_output=lambda kind, data: flood.append(len(data)))
    t.ok(r.status == "output_limit" and 0 < sum(flood) <= 1 << 20 and max(flood) <= 16384,
         "38: a flood's live output stops at the call's cap (%d bytes streamed, in chunks of "
         "at most 16 KiB)" % sum(flood), (r.status, sum(flood), max(flood or [0])))

    # the session's own code forges the server's frames: bounded, or the session ends
    via = cl._via
    forged = ("import sys\nm = sys.modules['__main__']\n"
              "for _ in range(200):\n"
              "    m.send({'chunk': %r, 't': 'out', 'data_base64': m.b64(b'z' * 16384)})\n")
    fid = "forge-" + os.urandom(6).hex()
    r = via.session_wait(s.id, via.session_call(s.id, {"op": "python", "code": forged % fid,
                                                         "id": fid}), 30)
    streamed = c.rcli("XLEN", "al:out:%s/%s" % (s.id, fid)).strip()
    r2 = s.run_python("print('still', x)")
    t.ok(r.status == "ok" and int(streamed) <= (1 << 20) // 16384 + 1 and
         r2.stdout == b"still 42\n",
         "39: 3 MB of output chunks forged by the call itself: the stream holds at most the "
         "call's cap (%s entries of 16 KiB); the session goes on" % streamed, (r, streamed))
    s2 = cl.session()
    e1 = raises(lambda: s2.run_python(forged % "another-call"), airlock.SessionEnded)
    s3 = cl.session()
    big = "big-" + os.urandom(6).hex()
    e2 = via.session_wait(s3.id, via.session_call(s3.id, {
        "op": "python", "id": big, "code": "import sys\nm = sys.modules['__main__']\n"
        "m.send({'chunk': %r, 't': 'out', 'data_base64': m.b64(b'z' * 20000)})\n"
        "import time\ntime.sleep(5)\n" % big}), 30)
    t.ok(isinstance(e1, airlock.SessionEnded) and e1.reason == "broken" and
         e2.status == "session_ended" and "broken" in (e2.error or ""),
         "40: output forged for another call, or a chunk over 16 KiB: the session ends "
         "(broken), as for any frame that breaks the protocol", (e1, e2))

    # ---- files ----
    s.put("data/in.bin", bytes(range(256)) * 4, mode=0o600)
    r = s.run_python("import os\nd = open('data/in.bin', 'rb').read()\n"
                     "print(len(d), oct(os.stat('data/in.bin').st_mode & 0o777))")
    got = s.get("data/in.bin")
    names = [n for _, n in s.ls()]
    t.ok(r.stdout == b"1024 0o600\n" and got == bytes(range(256)) * 4 and
         "data/in.bin" in names and "kept.txt" in names,
         "8: put (binary, mode 0600), read by a call, get back whole, ls lists it",
         (r.stdout, len(got), names))
    r = s.run_python("import shutil\nshutil.copy('data/in.bin', 'data/copy.bin')\n"
                     "open('data/n.txt', 'w').write(open('data/extra.txt').read())",
                     files={"data/extra.txt": b"extra"},
                     collect=["data/*.bin", "data/extra.txt", "nothing/*"])
    t.ok(r.status == "ok" and r.files == {"data/copy.bin": bytes(range(256)) * 4,
                                          "data/in.bin": bytes(range(256)) * 4,
                                          "data/extra.txt": b"extra"},
         "8b: run_python with files put first and collect (a glob, a path) after: "
         "Result.files as {path: bytes}", sorted(r.files))
    bad = {}
    for what, fn in (("../escape", lambda: s.put("../escape", b"x")),
                     ("/etc/passwd", lambda: s.get("/etc/passwd")),
                     ("a/../../b", lambda: s.get("a/../../b"))):
        e = raises(fn, airlock.AirlockError)
        bad[what] = str(e)
    r = s.run_python("import os\nprint(os.path.exists('../escape'))")
    t.ok(all("path" in v for v in bad.values()) and r.stdout == b"False\n",
         "9: paths outside the work directory are refused with the reason, nothing written",
         bad)
    e = raises(lambda: s.get("missing.txt"), airlock.NotFound)
    t.ok(isinstance(e, airlock.NotFound) and "No such file" in str(e),
         "10: get of a missing file: NotFound saying so", e)

    # ---- rich output ----
    code = ("import struct, zlib\n"
            "def chunk(k, b): return struct.pack('>I', len(b)) + k + b + "
            "struct.pack('>I', zlib.crc32(k + b))\n"
            "class Img:\n"
            "    def _repr_png_(self):\n"
            "        raw = b''.join(b'\\x00' + b'\\xff\\x00\\x00' * 4 for _ in range(3))\n"
            "        return (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', "
            "4, 3, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))\n"
            "display(Img())\nprint('shown')\n")
    r = s.run_python(code)
    t.ok(r.status == "ok" and len(r.outputs) == 1 and r.outputs[0].mime == "image/png" and
         png_ok(r.outputs[0].data) == (4, 3) and r.stdout == b"shown\n",
         "11: display() of an image: outputs [{image/png}] whose bytes decode as a 4x3 PNG",
         [(o.mime, o.data[:16]) for o in r.outputs])

    # ---- tenants ----
    other = airlock.Client(redis=c.url, tier="trusted", tenant="other")
    theirs = airlock.Session(other, s.id, "trusted")
    e1 = raises(lambda: theirs.run_python("print(x)"), airlock.NotFound)
    e2 = raises(lambda: theirs.get("kept.txt"), airlock.NotFound)
    theirs.close()  # a NotFound inside: nothing happens
    r = s.run_python("print(x)")
    t.ok(isinstance(e1, airlock.NotFound) and isinstance(e2, airlock.NotFound) and
         r.stdout == b"42\n",
         "12: another tenant cannot run a call in, read a file of, or close the session by "
         "its id (no such session, the same words as for none)", (e1, e2, r))

    # ---- a malformed call on the worker's queue ----
    c.rcli("RPUSH", "al:wq:sw", "not msgpack at all")
    r = s.run_python("print('unharmed', x)")
    t.ok(r.stdout == b"unharmed 42\n" and "call_malformed" in c.log("sw"),
         "13: a malformed call on the worker's queue is logged and dropped; the session goes on",
         r)

    # ---- close ----
    s.close()
    e = raises(lambda: s.run_python("print(x)"), airlock.SessionEnded)
    t.ok(isinstance(e, airlock.SessionEnded) and e.reason == "closed" and
         ended_reason(c, s.id) == "closed",
         "14: after close: SessionEnded (closed), the record says so", e)

    # ---- each other way a session ends ----
    s = cl.session()
    s.run_python("x = 1")
    time.sleep(5)
    e = raises(lambda: s.run_python("print(x)"), airlock.SessionEnded)
    t.ok(isinstance(e, airlock.SessionEnded) and e.reason == "idle",
         "15: idle past idle_s (4 s): ended, idle", e)

    s = cl.session(tier="brief")
    time.sleep(3.5)
    e = raises(lambda: s.run_python("print(1)"), airlock.SessionEnded)
    t.ok(isinstance(e, airlock.SessionEnded) and e.reason == "max_life",
         "16: open past max_life_s (3 s) though busy: ended, max_life", e)

    s = cl.session(tier="small")
    s.run_python("x = 1\nopen('kept.txt', 'w').write('stays')")
    r = s.run_python("b = bytearray(400 << 20)\nb[::4096] = b'x' * (len(b) // 4096)")
    r2 = s.run_python("print('x' in globals(), open('kept.txt').read())")
    s.close()
    t.ok(r.status == "memory_limit" and r.exit_code is None and "restarted" in (r.error or "")
         and r2.stdout == b"False stays\n",
         "17: a call past the session's memory (96 MiB): memory_limit, its interpreter "
         "restarted (its variables gone), the session and its files go on", (r, r2))

    s = cl.session(tier="small")
    r = s.run_python("import os, time\n"
                     "for _ in range(200):\n"
                     "    try:\n"
                     "        if os.fork() == 0:\n"
                     "            time.sleep(60); os._exit(0)\n"
                     "    except OSError as e:\n"
                     "        print('refused:', e.strerror); break\n", timeout=2)
    s.close()
    time.sleep(0.5)
    t.ok(r.status == "ok" and b"refused: Resource temporarily unavailable" in r.stdout and
         not live_pids_of({UID + i for i in range(6)}),
         "18: a fork bomb meets the session's pids limit; closed, none of its processes is left",
         (r.status, r.stdout[-200:], live_pids_of({UID + i for i in range(6)})))

    s = cl.session()
    e = raises(lambda: s.run_python("import signal, time\n"
                                    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                    "time.sleep(60)", timeout=1), airlock.SessionEnded)
    t.ok(isinstance(e, airlock.SessionEnded) and e.reason == "call_stuck",
         "19: a call that ignores the interrupt past its time: the session ends, call_stuck", e)

    s = cl.session()
    e = raises(lambda: s.run_python("import os\nos._exit(0)"), airlock.SessionEnded)
    t.ok(isinstance(e, airlock.SessionEnded) and e.reason == "exited",
         "20: code that ends the interpreter: the session ends, exited", e)

    # ---- quotas and refusals ----
    open_now = [cl.session() for _ in range(3)]
    e = raises(lambda: cl.session(), airlock.QuotaExceeded)
    for x in open_now[:1]:
        x.close()
    again = cl.session()
    t.ok(isinstance(e, airlock.QuotaExceeded) and "max_per_tenant 3" in str(e) and
         again.run_python("print(1)").stdout == b"1\n",
         "21: max_per_tenant 3: the fourth is QuotaExceeded, one closed makes room", e)
    for x in open_now[1:] + [again]:
        x.close()
    e1 = raises(lambda: cl.session(tier="plain"), airlock.Rejected)
    e2 = raises(lambda: cl.session(tier="svc"), airlock.Rejected)
    t.ok("does not open sessions" in str(e1) and "does not keep sessions" in str(e2),
         "22: a tier without sessions, and one whose backend keeps none (service VMs): "
         "refused saying why", (e1, e2))
    t.ok(c.rcli("HGET", "al:tenant:default", "sessions").strip() == "0" and
         c.rcli("ZCARD", "al:sessions").strip() == "0",
         "23: every session ended: the tenant's count is 0, none left in al:sessions",
         (c.rcli("HGETALL", "al:tenant:default"), c.rcli("ZCARD", "al:sessions")))

    # ---- through the gateway ----
    keys = {"acme": "ak-" + os.urandom(8).hex(), "rival": "rk-" + os.urandom(8).hex()}
    port = free_port()
    start_gateway(c, port, key_file(os.path.join(c.dir, "keys"), keys))
    api = Api(port)
    gcl = airlock.Client(gateway="http://127.0.0.1:%d" % port, token=keys["acme"],
                         tier="trusted")
    # the CLI's session verbs through the gateway, as on Redis
    genv = dict(os.environ, AIRLOCK_TOKEN=keys["acme"])
    gw_cli = [CLI, "--gateway", "http://127.0.0.1:%d" % port, "session"]

    def gsess(*a):
        return subprocess.run(gw_cli + list(a), capture_output=True, env=genv, timeout=120)
    o = gsess("open", "--tier", "trusted")
    gsid = o.stdout.decode().strip()
    p1 = gsess("py", gsid, "-c", "x = 6 * 7")
    p2 = gsess("py", gsid, "-c", "print(x)")
    p3 = gsess("exec", gsid, "-c", "echo shell")
    p4 = gsess("close", gsid)
    t.ok(o.returncode == 0 and gsid and p1.returncode == 0 and p2.stdout == b"42\n" and
         p3.stdout == b"shell\n" and p4.returncode == 0,
         "airlock --gateway session open, py (state kept), exec, close",
         [(x.returncode, x.stdout[-200:], x.stderr[-300:]) for x in (o, p1, p2, p3, p4)])
    with gcl.session() as gs:
        gs.run_python("import math\nv = [1, 2, 3]")
        gs.put("in/data.csv", "a,b\n1,2\n")
        r = gs.run_python("print(sum(v), math.sqrt(16), open('in/data.csv').read().split()[1])")
        st1, doc1 = api.call("POST", "/v1/sessions/%s/exec" % gs.id, {"code": "cat in/data.csv"},
                             key=keys["acme"])
        st2, doc2 = api.call("POST", "/v1/sessions/%s/run_python" % gs.id, {"code": "v[-1]"},
                             key=keys["acme"])
        st3, raw3 = api.call("PUT", "/v1/sessions/%s/files/out/x.bin" % gs.id,
                             raw=b"\x00\x01binary", ctype="application/octet-stream",
                             key=keys["acme"])
        h = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        h.request("GET", "/v1/sessions/%s/files/out/x.bin" % gs.id,
                  headers={"Authorization": "Bearer " + keys["acme"]})
        got = h.getresponse()
        st4, body4 = got.status, got.read()
        st5, doc5 = api.call("GET", "/v1/sessions/%s/files" % gs.id, key=keys["acme"])
        # the rival tenant: every endpoint of acme's session is 404 to it
        rival = [api.call(m, "/v1/sessions/%s%s" % (gs.id, sfx), b, key=keys["rival"])[0]
                 for m, sfx, b in (("POST", "/exec", {"code": "id"}),
                                   ("POST", "/run_python", {"code": "print(v)"}),
                                   ("GET", "/files/in/data.csv", None),
                                   ("GET", "/files", None), ("DELETE", "", None))]
        still = gs.run_python("print(len(v))")
        # live output through the gateway: Server-Sent Events, then the result
        st_sse, sse_type, events = sse_call(port, keys["acme"], gs.id,
                                            "import time\nfor i in range(3):\n"
                                            "    print(i, flush=True)\n    time.sleep(0.3)\nv")
        gseen = []
        gr = gs.run_python("print('via', v)", on_output=lambda k, d: gseen.append((k, d)))
    st6, doc6 = api.call("POST", "/v1/sessions/%s/run_python" % gs.id, {"code": "print(v)"},
                         key=keys["acme"])
    t.ok(r.stdout == b"6 4.0 1,2\n" and st1 == 200 and
         doc1["result"]["stdout"] == "a,b\n1,2\n" and st2 == 200 and
         doc2["result"]["stdout"] == "3\n" and st3 == 200 and st4 == 200 and
         body4 == b"\x00\x01binary" and st5 == 200 and "out/x.bin" in doc5["result"]["stdout"],
         "27: through the gateway: the Python client's session keeps its state; /exec, "
         "/run_python, PUT and GET /files/{path}, GET /files",
         (r, st1, doc1, st2, doc2, st3, raw3, st4, body4, st5, doc5))
    kinds = [k for k, _ in events]
    t.ok(st_sse == 200 and "event-stream" in (sse_type or "") and
         kinds[-1:] == ["result"] and kinds.count("stdout") >= 3 and
         "".join(d.get("data", "") for k, d in events if k == "stdout") ==
         "0\n1\n2\n[1, 2, 3]\n" and
         events[-1][1]["result"]["stdout"] == "0\n1\n2\n[1, 2, 3]\n" and
         gr.stdout == b"via [1, 2, 3]\n" and gseen == [("stdout", b"via [1, 2, 3]\n")],
         "41: through the gateway, Accept: text/event-stream: the call's stdout as events, "
         "then its result; the Python client's on_output through it",
         (st_sse, sse_type, events, gr, gseen))
    t.ok(rival == [404] * 5 and still.stdout == b"3\n",
         "28: another tenant's key: 404 on every endpoint of the session (its exec, "
         "run_python, files, close), which goes on", rival)
    t.ok(st6 == 410 and doc6.get("reason") == "closed",
         "29: after the with block closed it: 410, reason closed", (st6, doc6))
    # a streamed call whose session ends under it: the last event is the 410
    with gcl.session() as gs2:
        st_end, _, evs = sse_call(port, keys["acme"], gs2.id, "print(1, flush=True)\n"
                                  "import os, time\ntime.sleep(0.3)\nos._exit(0)")
    t.ok(st_end == 200 and [k for k, _ in evs][-1:] == ["error"] and
         evs[-1][1].get("code") == 410 and evs[-1][1].get("reason") == "exited" and
         ("stdout", {"attempt": 1, "data": "1\n"}) in evs,
         "43: a streamed call whose session ends under it (the interpreter exits): its "
         "output, then a last event error with code 410 and the reason", (st_end, evs))
    st7, doc7 = api.call("POST", "/v1/sessions", {"tier": "plain"}, key=keys["acme"])
    st8, doc8 = api.call("POST", "/v1/sessions/%s/calls" % gs.id, {"op": "bogus"},
                         key=keys["acme"])
    t.ok(st7 == 400 and "does not open sessions" in doc7["result"]["error"] and st8 == 400 and
         "op: unknown" in doc8.get("error", ""),
         "30: a tier without sessions is 400 saying so; an unknown op 400", (st7, doc7, st8, doc8))

    # ---- containment inside a session, as for jobs ----
    canary = os.path.join(c.dir, "canary")
    with open(canary, "w") as f:
        f.write(SECRET + "\n")
    os.chmod(canary, 0o600)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    probe = ("import os, socket\n"
             "found = []\n"
             "found += [k for k, v in os.environ.items() if %(s)r in v]\n"
             "for pid in os.listdir('/proc'):\n"
             "    try:\n"
             "        if pid.isdigit() and %(s)r.encode() in open('/proc/%%s/environ' %% pid, "
             "'rb').read(): found.append('environ of ' + pid)\n"
             "    except OSError: pass\n"
             "for path in (%(canary)r, %(redis)r):\n"
             "    try: open(path, 'rb').read(); found.append('read ' + path)\n"
             "    except OSError: pass\n"
             "try:\n"
             "    u = socket.socket(socket.AF_UNIX); u.connect(%(redis)r); found.append('redis')\n"
             "except OSError: pass\n"
             "try:\n"
             "    t = socket.create_connection(('127.0.0.1', %(port)d), 2); found.append('tcp')\n"
             "except OSError: pass\n"
             "print(found)\n" % {"s": SECRET, "canary": canary, "redis": c.sock,
                                  "port": listener.getsockname()[1]})
    contained = {}
    mine = cl.session(tier="trusted")
    mine.run_python("secret_of_mine = 'mine'\nopen('mine.txt', 'w').write('mine')")
    for tier in ("trusted", "ctr"):
        other_tenant = airlock.Client(redis=c.url, tier=tier, tenant="other")
        with other_tenant.session() as ps:
            contained[tier] = (ps.run_python(probe).stdout,
                               ps.exec("ls; cat mine.txt; ps -e -o pid= | wc -l").stdout,
                               ps.run_python("print('secret_of_mine' in globals())").stdout)
    mine.close()
    listener.close()
    t.ok(all(v[0] == b"[]\n" and b"mine.txt" not in v[1] and v[2] == b"False\n"
             for v in contained.values()),
         "36: inside a session, as for jobs: the worker's secret (environment, /proc), a root "
         "file, the Redis socket and a host port are out of reach; another tenant's session "
         "sees none of this session's files or interpreter (process, container)", contained)

    ok, why = limits_per_call(cl, "trusted", 20)
    t.ok(ok, "58a: process: 20 calls of 0.9 s CPU in a session of timeout=5 all ok (no "
         "budget for the session's CPU); a call past its cpu_ms is cpu_limit, the next runs "
         "with the state; output_max keeps 4096 bytes, head and tail, not ok", why)

    # extend (issue 58): life_s 3 of max_life_s 600, idle_s 4 of max_idle_s 60
    es = cl.session(tier="budget")
    before = es.info()
    after = es.extend(life=30, idle=3600)
    time.sleep(4)  # past its life and its idle time as it opened: alive
    alive = es.run_python("print('alive')").stdout
    es.close()
    t.ok(before["life_left_ms"] <= 3000 and after["limits"]["idle_ms"] == 60000 and
         25000 < after["life_left_ms"] <= 30000 and after["limits"]["max_life_ms"] == 600000
         and alive == b"alive\n",
         "58i: extend: a session opened for 3 s (life_s) of 600 lives on 30 s from the call, "
         "its idle time raised to the tier's max_idle_s (60 s, not the 3600 asked)",
         (before, after, alive))

    with cl.session(tier="budget", timeout=5) as bs:
        spent = [bs.run_python(BURN % 0.9).status for _ in range(2)]
        e = raises(lambda: bs.run_python(BURN % 0.9), airlock.SessionEnded)
    t.ok(spent == ["ok", "ok"] and isinstance(e, airlock.SessionEnded) and
         e.reason == "limit" and ended_reason(c, bs.id) == "limit",
         "58d: a tier whose sessions: says cpu_budget_s: 2: the call that passes 2 s of CPU "
         "in all ends the session (limit)", (spent, e))
    with cl.session(tier="trusted", timeout=5, cpu_budget=2) as ob:
        own = [ob.run_python(BURN % 0.9).status for _ in range(2)]
        own_lim = ob.info()["limits"]["cpu_budget_ms"]
        e = raises(lambda: ob.run_python(BURN % 0.9), airlock.SessionEnded)
    with cl.session(tier="budget", cpu_budget=600) as capped:
        cap_lim = capped.info()["limits"]["cpu_budget_ms"]
    t.ok(own == ["ok", "ok"] and own_lim == 2000 and isinstance(e, airlock.SessionEnded) and
         e.reason == "limit" and cap_lim == 2000,
         "58d: a caller's own budget (cpu_budget=2 on a tier with none): the call that passes "
         "it ends the session; one above the tier's (600 s of 2) is the tier's",
         (own, own_lim, e, cap_lim))

    # cancel (issue 58): a running call interrupted within a second, a queued one dropped
    with cl.session(tier="trusted", timeout=60) as cs1:
        cs1.run_python("k = 7")
        box = {}

        def long_call(cid, code):
            try:
                box[cid] = cs1.run_python(code, call_id=cid, timeout=60)
            except airlock.AirlockError as e:
                box[cid] = e
        runner = threading.Thread(target=long_call, args=("slow1", "import time\ntime.sleep(30)"))
        runner.start()
        time.sleep(1)
        waiter = threading.Thread(target=long_call, args=("after1", "print('never')"))
        waiter.start()
        time.sleep(0.3)
        inf = cs1.info()  # answered at once, while slow1 runs
        dropped = cs1.cancel("after1")
        t0 = time.monotonic()
        said = cs1.cancel("slow1")
        runner.join(10)
        waiter.join(10)
        took = time.monotonic() - t0
        nxt = cs1.run_python("print(k)")
        again = cs1.cancel("slow1")
    t.ok(said == "interrupted" and dropped == "dropped before it ran" and
         getattr(box.get("slow1"), "status", None) == "cancelled" and
         getattr(box.get("after1"), "status", None) == "cancelled" and took < 1.5 and
         nxt.stdout == b"7\n" and again.startswith("not running"),
         "58g: cancel: a running call is interrupted (cancelled, %.2f s), a queued one never "
         "runs, the session and its state go on; cancelling a finished one does nothing"
         % took, (said, dropped, box, took, nxt, again))
    u, lim = inf.get("usage", {}), inf.get("limits", {})
    t.ok(u.get("running") == "slow1" and u.get("queued") == 1 and u.get("calls") == 2 and
         lim.get("call_timeout_ms") == 60000 and lim.get("memory_bytes") == 268435456 and
         lim.get("cpu_budget_ms") == 0 and 0 < inf.get("life_left_ms", 0) <= 600000 and
         isinstance(u.get("cpu_ms"), int),
         "58h: info, answered while a call runs: the session's limits (no CPU budget), its "
         "usage (calls, CPU, the running call, one queued) and its life left", inf)

    # ---- the container boundary ----
    ok, why = limits_per_call(cl, "ctr", 20)
    t.ok(ok, "58b: container: the same per-call limits", why)
    with cl.session(tier="ctr") as cs:
        cs.run_python("import sys\nv = sys.version_info[:2]\nopen('w.txt', 'w').write('c1')")
        cs.exec("echo more >> w.txt")
        cs.put("in.txt", b"put")
        r = cs.run_python("print(v >= (3, 11), open('w.txt').read().split(), "
                          "open('in.txt').read(), open('/etc/debian_version').read()[:2])")
        r2 = cs.run_python("import time\ntime.sleep(20)", timeout=1)
        r3 = cs.run_python("print(len(open('w.txt').read()))")
    e = raises(lambda: cs.run_python("1"), airlock.SessionEnded)
    t.ok(r.stdout == b"True ['c1more'] put 12\n" and r2.status == "timeout" and
         r3.stdout == b"7\n" and isinstance(e, airlock.SessionEnded) and e.reason == "closed",
         "32: a container session (python image): a variable, a file of exec and put, a "
         "timeout it survives, closed", (r, r2, r3, e))
    # ---- a matplotlib figure (the datascience image) ----
    with cl.session(tier="ctrds") as ds:
        r = ds.run_python("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\n"
                          "plt.title('from a session')\nprint(plt.get_backend())")
        r2 = ds.run_python("fig, ax = plt.subplots(figsize=(2, 1), dpi=100)\n"
                           "ax.bar(['a', 'b'], [1, 2])\ndisplay(fig)\nplt.close(fig)")
        r3 = ds.run_python("print(len(plt.get_fignums()))")
    sizes = [png_ok(o.data) for o in r.outputs + r2.outputs]
    t.ok(r.status == "ok" and r.stdout.lower() == b"agg\n" and
         [o.mime for o in r.outputs + r2.outputs] == ["image/png"] * 2 and
         sizes == [(640, 480), (200, 100)] and r3.stdout == b"0\n" and not r3.outputs,
         "42: matplotlib (datascience image): a figure left open comes back as a 640x480 PNG "
         "that decodes, a display()ed one as its own 200x100; both closed after the call",
         (r, r2.status, r2.stderr[-300:], sizes, r3.stdout))
    cs = cl.session(tier="ctrsmall")
    cs.put("kept.txt", b"stays")
    r = cs.run_python("b = bytearray(400 << 20)\nb[::4096] = b'x' * (len(b) // 4096)")
    r2 = cs.run_python("print(open('kept.txt').read())")
    cs.close()
    t.ok(r.status == "memory_limit" and r2.stdout == b"stays\n",
         "33: a container session's call past its memory (96 MiB): memory_limit, the "
         "session and its files go on", (r, r2))

    # ---- the microVM boundary (TCG here: the session's boot is paid once) ----
    vm_worker = ["--images", IMAGES, "--vm-accel", "tcg"]
    c.worker("svm", uid_base=UID + 20, slots=1, tiers="vmtier", extra=vm_worker)
    with cl.session(tier="vmtier") as vs:
        vs.run_python("import platform\nk = platform.release()")
        vs.put("in.txt", b"put into the VM")
        t0 = time.monotonic()
        r = vs.run_python("print(open('in.txt').read(), k == platform.release())")
        call_ms = (time.monotonic() - t0) * 1000
        r2 = vs.run_python("import time\ntime.sleep(20)", timeout=1)
        r3 = vs.exec("cat in.txt")
        guest_kernel = vs.run_python("print(k)").stdout.strip()
        rm = vs.run_python("b = bytearray(400 << 20)\nb[::4096] = b'x' * (len(b) // 4096)",
                           timeout=60)
        rm2 = vs.run_python("print('k' in globals(), open('in.txt').read())")
    e = raises(lambda: vs.run_python("1"), airlock.SessionEnded)
    host_kernel = os.uname().release.encode()
    t.ok(r.stdout == b"put into the VM True\n" and r2.status == "timeout" and
         r3.stdout == b"put into the VM" and guest_kernel and guest_kernel != host_kernel and
         isinstance(e, airlock.SessionEnded) and e.reason == "closed",
         "34: a microVM session (its own kernel %s): state and a put file kept, a call of "
         "%.0f ms (no boot), a timeout it survives, closed" % (guest_kernel.decode(), call_ms),
         (r, r2, r3, guest_kernel, e))
    t.ok(rm.status == "memory_limit" and rm.exit_code is None and
         "restarted" in (rm.error or "") and rm2.stdout == b"False put into the VM\n",
         "58c: a microVM session's call past its memory (256 MiB): memory_limit, its "
         "interpreter restarted in the guest (its variables gone), the session and its files "
         "go on", (rm, rm2))
    ok, why = limits_per_call(cl, "vmtier", 20)
    t.ok(ok, "58c: microVM: the same per-call limits (the guest's server measures the CPU)",
         why)
    c.signal("svm", signal.SIGTERM)
    c.wait_exit("svm")
    left = {k: v for k, v in job_cgroups("svm").items() if v}
    t.ok(not left, "35: the session's VM is gone once it closed: no cgroup of its worker's "
         "VMs is left", left)

    # ---- the CLI ----
    def cli(*a, stdin=None):
        p = c.cli("session", *a, input=stdin)
        return p.returncode, p.stdout.decode(), p.stderr.decode()
    rcb, bsid, _ = cli("open", "--tier", "trusted", "--cpu-budget", "1500")
    rci, binfo, _ = cli("info", bsid.strip())
    cli("close", bsid.strip())
    rcx, _, bad_err = cli("open", "--tier", "trusted", "--cpu-budget", "soon")
    t.ok(rcb == 0 and rci == 0 and json.loads(binfo)["limits"]["cpu_budget_ms"] == 1500 and
         rcx == 2 and "--cpu-budget: expected a whole number" in bad_err,
         "58d: the CLI: session open --cpu-budget 1500 (info says it); a bad one is a usage "
         "error", (rcb, rci, binfo, rcx, bad_err))
    rc0, sid, _ = cli("open", "--tier", "trusted")
    sid = sid.strip()
    steps = [cli("py", sid, "-c", "x = 40"), cli("py", sid, "-", stdin=b"print(x + 2)"),
             cli("exec", sid, "-c", "echo sh; exit 4"), cli("exec", sid, "--", "/bin/echo", "a b"),
             cli("put", sid, __file__, "me.py"), cli("ls", sid),
             cli("py", sid, "-c", "import time; time.sleep(9)", "--timeout", "500"),
             cli("close", sid), cli("py", sid, "-c", "print(x)"),
             cli("py", "nosuch", "-c", "1"), cli("frob", sid)]
    got = [(rc, out) for rc, out, _ in steps]
    t.ok(rc0 == 0 and got[:4] == [(0, ""), (0, "42\n"), (4, "sh\n"), (0, "a b\n")] and
         got[4][0] == 0 and "me.py" in got[5][1] and got[6][0] == 124 and got[7][0] == 0 and
         got[8][0] == 75 and "session_ended: closed" in steps[8][2] and got[9][0] == 65 and
         got[10][0] == 2,
         "31: the CLI: open, py (-c, stdin), exec (a line, argv), put, ls, a timeout (124), "
         "close; then 75 session_ended, 65 no such session, 2 an unknown verb", got)

    # ---- the worker stops ----
    s = cl.session()
    s.run_python("x = 1")
    c.signal("sw", signal.SIGTERM)
    c.wait_exit("sw")
    e = raises(lambda: s.run_python("print(x)"), airlock.SessionEnded)
    t.ok(isinstance(e, airlock.SessionEnded) and e.reason == "worker_stop",
         "24: the worker drains: its sessions end at once, worker_stop", e)
    c.worker("sw2", uid_base=UID, slots=6, tiers="trusted,brief,small,plain,budget,ctr,ctrsmall,ctrds",
             extra=["--images", IMAGES] + USERNS)
    s = cl.session()
    s.run_python("x = 1")
    c.signal("sw2", signal.SIGKILL)
    c.wait_exit("sw2")
    t0 = time.monotonic()
    e = raises(lambda: s.run_python("print(x)"), airlock.SessionEnded)
    took = time.monotonic() - t0
    swept = c.wait_for(lambda: ended_reason(c, s.id) == "worker_lost", timeout=10)
    t.ok(isinstance(e, airlock.SessionEnded) and e.reason == "worker_lost" and took < 6.5 and
         swept and c.rcli("HGET", "al:tenant:default", "sessions").strip() == "0",
         "25: the worker killed: the scheduler ends the record (worker_lost, judged on Redis's "
         "clock) and a caller learns it within two leases (%.1f s); the tenant's count goes "
         "back" % took, (e, took))
    c.worker("sw3", uid_base=UID, slots=6, tiers="trusted,brief,small,plain,budget,ctr,ctrsmall,ctrds",
             extra=["--images", IMAGES] + USERNS)
    s = cl.session()
    r = s.run_python("print('a new worker serves')")
    s.close()
    c.signal("sw3", signal.SIGTERM)
    c.wait_exit("sw3")
    left = leftovers(UID, "sw", os.path.join(c.dir, "state"), warm=0)
    for wid in ("sw2", "sw3"):
        left += ["cgroups %s" % v for v in job_cgroups(wid).values() if v]
    t.ok(r.stdout == b"a new worker serves\n" and not live_pids_of({UID + i for i in range(6)})
         and not left, "26: after all: no process, cgroup or file of a session is left", left)
finally:
    c.close()

# ---- answers survive faults, and nothing runs twice (issue 58) ----
COUNT = ("import time\nruns = globals().setdefault('runs', {})\n"
         "runs['%s'] = runs.get('%s', 0) + 1\ntime.sleep(0.4)\nprint(runs['%s'])")


def in_flight(session_of, ids, fault):
    """ids' calls sent at once (a thread each, its own client), fault()
    during them; each call, on Unavailable, sent again with its id until
    it answers. Returns {id: (stdout, error, sends)}."""
    out = {}

    def one(cid):
        end, sends = time.monotonic() + 60, 0
        while time.monotonic() < end:
            sends += 1
            try:
                r = session_of().run_python(COUNT % (cid, cid, cid), call_id=cid, timeout=30)
                out[cid] = (r.stdout, r.error, sends)
                return
            except airlock.Unavailable as e:
                out[cid] = (None, str(e), sends)
                time.sleep(0.3)

    ths = [threading.Thread(target=one, args=(cid,)) for cid in ids]
    for th in ths:
        th.start()
    time.sleep(0.5)
    fault()
    for th in ths:
        th.join(90)
    return out


c = Cluster(policy=POLICY, aof=True)
try:
    c.scheduler()
    c.worker("swf", uid_base=UID + 40, slots=2, tiers="trusted")
    sid = airlock.Client(redis=c.url, tier="trusted").session(timeout=30).id

    def restart_redis():
        c.stop_redis()
        time.sleep(1)
        c.start_redis()

    ids = ["r%d" % i for i in range(6)]
    got = in_flight(lambda: airlock.Session(airlock.Client(redis=c.url, tier="trusted"), sid,
                                            "trusted"), ids, restart_redis)
    s = airlock.Session(airlock.Client(redis=c.url, tier="trusted"), sid, "trusted")
    fetched = {cid: s.result(cid, timeout=10).stdout for cid in ids}
    runs = s.run_python("print(sorted(runs.items()))").stdout
    t.ok(all(got.get(cid, (None,))[0] == b"1\n" for cid in ids) and
         all(v == b"1\n" for v in fetched.values()) and
         runs == ("%r\n" % sorted((cid, 1) for cid in ids)).encode(),
         "58e: Redis restarted (AOF) during 6 in-flight calls over direct Redis: each "
         "answered, fetched again by its call id, and each ran once (the interpreter's "
         "counter)", (got, fetched, runs))

    keys = {"acme": "ak-" + os.urandom(8).hex()}
    port = free_port()
    kf = key_file(os.path.join(c.dir, "keys"), keys)
    start_gateway(c, port, kf, name="gwf")
    gurl = "http://127.0.0.1:%d" % port
    gs = airlock.Client(gateway=gurl, token=keys["acme"], tier="trusted").session(timeout=30)

    def restart_gateway():
        c.signal("gwf", signal.SIGKILL)
        c.wait_exit("gwf")
        time.sleep(0.5)
        start_gateway(c, port, kf, name="gwf2")

    gids = ["g%d" % i for i in range(6)]
    got = in_flight(lambda: airlock.Session(airlock.Client(gateway=gurl, token=keys["acme"],
                                                           tier="trusted"), gs.id, "trusted"),
                    gids, restart_gateway)
    fetched = {cid: gs.result(cid, timeout=10).stdout for cid in gids}
    runs = gs.run_python("print(sorted(runs.items()))").stdout
    st, doc = Api(port).call("GET", "/v1/sessions/%s/calls/nosuch" % gs.id, key=keys["acme"])
    sti, info = Api(port).call("GET", "/v1/sessions/%s" % gs.id, key=keys["acme"])
    t.ok(all(got.get(cid, (None,))[0] == b"1\n" for cid in gids) and
         all(v == b"1\n" for v in fetched.values()) and
         runs == ("%r\n" % sorted((cid, 1) for cid in gids)).encode() and
         st == 202 and doc.get("state") == "pending" and sti == 200 and
         info.get("usage", {}).get("calls", 0) >= 7 and "limits" in info,
         "58f: the gateway killed and restarted during 6 calls: each sent again with its id "
         "answers once, GET .../calls/{call} fetches each answer, a call it has not "
         "answered is 202 pending; GET /v1/sessions/{id} is its info", (got, fetched, runs,
                                                                        st, doc, sti, info))

    rids = ["h%d" % i for i in range(6)]
    got = in_flight(lambda: airlock.Session(airlock.Client(gateway=gurl, token=keys["acme"],
                                                           tier="trusted"), gs.id, "trusted"),
                    rids, restart_redis)
    runs = gs.run_python("print(sorted((k, v) for k, v in runs.items() if k[0] == 'h'))").stdout
    t.ok(all(got.get(cid, (None,))[0] == b"1\n" and got[cid][2] == 1 for cid in rids) and
         runs == ("%r\n" % sorted((cid, 1) for cid in rids)).encode(),
         "58j: Redis restarted (AOF) during 6 plain calls through the gateway: each request "
         "waits it out and answers (none sent twice by its client), each ran once",
         (got, runs))
finally:
    c.close()
sys.exit(t.done())
