#!/usr/bin/python3
"""A client that is not the C library (tests/lib/alclient.py: Python,
python3-redis, written from proto/PROTOCOL.md, its scripts read out of the
document) against real daemons on a redis-server with ACL users: the
client user has exactly the ACL the document recommends, the daemons a user
with a password and db 3 in their URL. Submit, wait (the done token keeps
its TTL), cancel, idempotency, taken ids, hand-made entries, the C CLI under
the same ACL, and what the ACL refuses."""
import os
import subprocess
import sys
import threading
import time
import uuid

import msgpack
import redis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD, CLI, Tap  # noqa: E402
from alclient import Client, doc_scripts  # noqa: E402
from cluster import DEFAULT_POLICY, Cluster  # noqa: E402

t = Tap()
TOOL = os.path.join(BUILD, "tests", "proto_tool")
DB = 3
CLIENT_PW, DAEMON_PW = "client-secret", "daemon-secret"

# The ACL of PROTOCOL.md ("Client ACL"), word for word, plus +select for a
# client on another db than 0.
with open(os.path.join(os.path.dirname(__file__), "..", "..", "proto", "PROTOCOL.md")) as f:
    doc = f.read()
acl_block = doc.split("ACL SETUSER airlock-client", 1)[1].split("```", 1)[0]
ACL = ["ACL", "SETUSER", "airlock-client"] + acl_block.replace(">PASSWORD", ">" + CLIENT_PW).split()

scripts = doc_scripts()
for name in ("submit", "lookup", "await", "session_call"):
    daemon = subprocess.run([TOOL, "script", name], capture_output=True, text=True).stdout
    t.ok(scripts.get(name) == daemon.rstrip("\n"),
         "PROTOCOL.md's %s script is the daemons' text" % name.upper())

if os.geteuid() != 0:
    print("1..%d # SKIP the rest needs root (the process backend)" % t.n)
    sys.exit(t.done())

c = Cluster(policy=DEFAULT_POLICY.replace(
    "    defaults: {wall_ms: 10000, memory_bytes: 134217728}\n",
    "    defaults: {wall_ms: 10000, memory_bytes: 134217728}\n    sessions: {}\n", 1))
try:
    t.ok(c.rcli(*ACL).strip() == "OK", "the document's client ACL is accepted by redis-server",
         acl_block)
    c.rcli("ACL", "SETUSER", "airlock-client", "+select")
    c.rcli("ACL", "SETUSER", "airlock-daemon", "on", ">" + DAEMON_PW, "~*", "&*", "+@all")
    c.url = "unix://%s?user=airlock-daemon&password=%s&db=%d" % (c.sock, DAEMON_PW, DB)
    c.scheduler()
    c.worker("wpy", uid_base=63400, slots=2)
    cl = Client(unix=c.sock, username="airlock-client", password=CLIENT_PW, db=DB)

    code, jid = cl.submit({"tier": "trusted", "runtime": "python", "code": b"print('from python')"})
    res = cl.wait(jid, 60)
    t.ok(code == 1 and res and res["status"] == "ok" and res["stdout"] == b"from python\n"
         and res["attempt"] == 1 and res["info"].get("image") == "host",
         "SUBMIT + wait as the ACL user: the job's own output (info.image \"host\")", res)
    t.ok(c.rcli("EXISTS", "al:intake", db=DB).strip() == "1" and
         c.rcli("EXISTS", "al:intake").strip() == "0",
         "daemons with user, password and /db in the URL work in that db (none in db 0)")

    # Two waiters at once, on a job that writes before it ends: both wake
    # at each chunk, wait again after it, and get the result.
    code, jid = cl.submit({"tier": "trusted", "runtime": "python",
                           "code": b"import time\nfor i in range(3):\n"
                                   b"    print(i, flush=True); time.sleep(0.3)\nprint('w')"})
    got = []
    ws = [threading.Thread(target=lambda: got.append(
        Client(unix=c.sock, username="airlock-client", password=CLIENT_PW, db=DB).wait(jid, 60)))
        for _ in range(2)]
    for w in ws:
        w.start()
    for w in ws:
        w.join(70)
    pttl = int(c.rcli("PTTL", "al:out:" + jid, db=DB).strip())
    res_ttl = int(c.rcli("PTTL", "al:res:" + jid, db=DB).strip())
    t.ok(len(got) == 2 and all(g and g["stdout"] == b"0\n1\n2\nw\n" for g in got),
         "two waiters both wake, through the job's output chunks, at its end entry", got)
    t.ok(0 < pttl <= res_ttl + 1000 and
         c.rcli("EXISTS", "al:done:" + jid, db=DB).strip() == "0",
         "the output stream the waiters woke on keeps the result's TTL (PTTL %d, result "
         "%d); no done list is made" % (pttl, res_ttl))
    t.ok(cl.await_("no-such-job") == (None, b"0-0"),
         "AWAIT of an unknown id: no result, wait after 0-0")

    # Cancel a job nobody serves yet (tier internal has no worker here).
    code, jid = cl.submit({"tier": "internal", "runtime": "python", "code": b"print(1)"})
    c.wait_for(lambda: cl.status(jid) == "queued", timeout=10)
    t0 = time.time()
    ans = cl.cancel(jid)
    res = cl.wait(jid, 5)
    took = time.time() - t0
    t.ok(ans == 1 and res and res["status"] == "cancelled" and res["attempt"] == 0 and took < 1.0,
         "CANCEL of a queued job: its cancelled result at once (%.2f s), attempt 0" % took, res)
    t.ok(c.rcli("HGET", "al:job:" + jid, "state", db=DB).strip() == "done" and
         cl.cancel(jid) == 0, "cancelling it again answers 0 (finished)")
    t.ok(cl.cancel("no-such-job") == -1, "cancelling an unknown id answers -1")

    # Idempotency and taken ids.
    k = uuid.uuid4().hex
    c1, id1 = cl.submit({"tier": "trusted", "runtime": "python", "code": b"print(1)"}, idem_key=k)
    c2, id2 = cl.submit({"tier": "trusted", "runtime": "python", "code": b"print(2)"}, idem_key=k)
    t.ok(c1 == 1 and c2 == 0 and id2 == id1, "the same idempotency key answers 0 with the first id")
    c3, _ = cl.submit({"id": id1, "tier": "trusted", "runtime": "python", "code": b"print(3)"})
    t.ok(c3 == -1, "SUBMIT of a taken id answers -1")
    first = cl.wait(id1, 60)

    # By hand: XADD of a taken id, of garbage with an id field, of nothing.
    entry = cl.r.xadd("al:intake", {"id": id1, "job": msgpack.packb(
        {"v": 1, "id": id1, "tier": "trusted", "runtime": "python", "code": b"print('forged')"},
        use_bin_type=True)}).decode()
    ok = c.wait_for(lambda: "duplicate job id" in c.rcli("XREVRANGE", "al:dlq", "+", "-", db=DB),
                    timeout=15)
    time.sleep(0.5)
    t.ok(ok and cl.result(id1) == first and first["stdout"] == b"1\n" and
         cl.r.hget("al:job:" + id1, "entry").decode() != entry,
         "XADD of a taken id: dead-lettered (duplicate job id), never run; the result stays the "
         "first job's, and the record's entry tells the XADDer it is not theirs")
    gid = uuid.uuid4().hex
    cl.r.xadd("al:intake", {"id": gid, "job": b"\xc1garbage"})
    res = cl.wait(gid, 15)
    t.ok(res and res["status"] == "rejected" and "msgpack" in res["error"],
         "undecodable job with an id field: rejected under that id, saying why", res)
    n0 = int(c.rcli("XLEN", "al:dlq", db=DB).strip())
    cl.r.xadd("al:intake", {"nothing": b"here"})
    t.ok(c.wait_for(lambda: int(c.rcli("XLEN", "al:dlq", db=DB).strip()) == n0 + 1, timeout=15),
         "an entry with neither job nor id: dead-lettered for the operator")

    # What the ACL refuses: the queues, the registry, other keys, and any
    # write of a record, a result or a counter (raw, or by a script).
    refused = []
    forge = "return redis.call('SET', 'al:res:%s', 'forged')" % id1
    for what, fn in (("XADD al:q:trusted:mid", lambda: cl.r.xadd("al:q:trusted:mid", {"id": "x", "attempt": 1})),
                     ("HGETALL al:workers", lambda: cl.r.hgetall("al:workers")),
                     ("FLUSHDB", lambda: cl.r.flushdb()),
                     ("SET outside al:", lambda: cl.r.set("other", "1")),
                     ("HSET al:job", lambda: cl.r.hset("al:job:" + id1, "tenant", "evil")),
                     ("SET al:res", lambda: cl.r.set("al:res:" + id1, "forged")),
                     ("HINCRBY al:tenant", lambda: cl.r.hincrby("al:tenant:default", "queued", -1)),
                     ("HINCRBY al:stats", lambda: cl.r.hincrby("al:stats", "status:ok", 1)),
                     ("PUBLISH al:cancel", lambda: cl.r.publish("al:cancel", id1)),
                     ("XRANGE al:intake", lambda: cl.r.xrange("al:intake")),
                     ("a script that SETs al:res", lambda: cl.r.evalsha(cl.r.script_load(forge), 0))):
        try:
            fn()
        except redis.exceptions.NoPermissionError:
            refused.append(what)
        except redis.exceptions.ResponseError as e:
            if "NOPERM" in str(e) or "can't access" in str(e):
                refused.append(what)
    t.ok(len(refused) == 11 and cl.result(id1) == first,
         "the client ACL refuses (NOPERM) the queues, the registry, FLUSHDB, keys outside "
         "al:, reading the intake, and every write of a record, a result, a counter or a "
         "kill, raw or by a script; the result is intact", refused)

    # A session, from the document alone, under the client ACL: opened by a
    # job with session true, calls queued with SESSION_CALL, results waited
    # for as the document says; another tenant's call is 0; after close, 2.
    code, sid = cl.submit({"tier": "trusted", "session": True})
    opened = cl.wait(sid, 60)
    q1, c1 = cl.session_call(sid, {"op": "python", "code": b"x = 6 * 7"})
    r1 = cl.session_wait(sid, c1)
    q2, c2 = cl.session_call(sid, {"op": "python", "code": b"print(x)"})
    r2 = cl.session_wait(sid, c2)
    q3, _ = cl.session_call(sid, {"op": "python", "code": b"print(x)"}, tenant="rival")
    q4, c4 = cl.session_call(sid, {"op": "close"})
    r4 = cl.session_wait(sid, c4)
    q5, _ = cl.session_call(sid, {"op": "python", "code": b"print(x)"})
    t.ok(opened and opened["status"] == "ok" and opened["info"].get("session") == "open" and
         q1 == [1] and r1["status"] == "ok" and q2 == [1] and r2["stdout"] == b"42\n" and
         q3 == [0] and q4 == [1] and r4["status"] == "ok" and q5 == [2, b"closed"],
         "a session from the document alone, under the client ACL: opened, a variable kept "
         "between calls, another tenant's call answered 0, closed, then 2 with the reason",
         (opened, q1, r1, q2, r2, q3, q4, r4, q5))

    # The C CLI under the same ACL.
    url = "unix://%s?user=airlock-client&password=%s&db=%d" % (c.sock, CLIENT_PW, DB)
    p = subprocess.run([CLI, "--redis", url, "run", "-c", "print(6*7)"], capture_output=True,
                       timeout=60)
    t.ok(p.returncode == 0 and p.stdout == b"42\n", "airlock run works with the client ACL", p)
    p = subprocess.run([CLI, "--redis", url, "submit", "--tier", "internal", "-c", "print(1)"],
                       capture_output=True, timeout=60)
    jid = p.stdout.decode().strip()
    q = subprocess.run([CLI, "--redis", url, "cancel", jid], capture_output=True, timeout=60)
    t.ok(p.returncode == 0 and q.returncode == 0 and cl.wait(jid, 5)["status"] == "cancelled",
         "airlock submit and cancel work with the client ACL", (p, q))
finally:
    c.close()
sys.exit(t.done())
