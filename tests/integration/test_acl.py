#!/usr/bin/python3
"""Least-privilege Redis ACL users for the daemons (deploy/redis-users.acl.in,
made by deploy/redis-acl.sh), against a real redis-server that has no other
user but the test's own: the gateway, scheduler and worker each run as their
user and a job goes its whole way (submit through the gateway, admission,
run, commit, a cancel) with no command refused (Redis's ACL LOG stays
empty); and each user is refused what is not its part: a worker's cannot
submit or read the intake, the gateway's cannot read a ready queue (claim
a job) or write heartbeats, the scheduler's cannot write idempotency keys."""
import os
import secrets
import signal
import time
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
from altest import CLI, Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import trusted  # noqa: E402
from gwclient import Api, free_port, key_file, start_gateway  # noqa: E402

t = Tap()
need_root("the process backend")
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PW = {u: secrets.token_hex(12) for u in ("gateway", "scheduler", "worker", "operator", "test")}

POLICY = trusted().replace("    max_attempts: 1\n", "    max_attempts: 1\n    sessions: "
                           "{max_per_tenant: 2, idle_s: 60, max_life_s: 600}\n", 1)

tmp = Cluster(policy=POLICY, start_redis=False)  # its folder holds the ACL file
acl = os.path.join(tmp.dir, "users.acl")
env = dict(os.environ, **{"AIRLOCK_%s_PASSWORD" % u.upper(): PW[u]
                          for u in ("gateway", "scheduler", "worker", "operator")})
p = subprocess.run([os.path.join(ROOT, "deploy", "redis-acl.sh")], env=env, capture_output=True,
                   text=True)
with open(acl, "w") as f:
    f.write(p.stdout + "user airlock-test on >%s ~* &* +@all\n" % PW["test"])
t.ok(p.returncode == 0 and "user default off" in p.stdout and PW["worker"] not in p.stdout,
     "deploy/redis-acl.sh makes the users, with only the passwords' hashes", p.stderr)
q = subprocess.run([os.path.join(ROOT, "deploy", "redis-acl.sh")], capture_output=True, text=True,
                   env={"PATH": os.environ["PATH"]})
t.ok(q.returncode == 2 and "set AIRLOCK_GATEWAY_PASSWORD" in q.stderr,
     "without the passwords it says which is missing", q.stderr)
tmp.cli_auth = ["--user", "airlock-test", "--pass", PW["test"]]
tmp.redis_args = ["--aclfile", acl]
c = tmp
c.start_redis()


def url(user):
    return "unix://%s?user=airlock-%s&password=%s" % (c.sock, user, PW[user])


def as_user(user, *args):
    return subprocess.run(["redis-cli", "-s", c.sock, "--user", "airlock-" + user, "--pass",
                           PW[user], "--no-auth-warning", *args],
                          capture_output=True, text=True, timeout=30).stdout


def forged_calls(cl, done_id):
    """A client credential (the gateway's) opens a session of its own and
    aims its calls at other tenants' jobs: a finished one, a running one and
    a queued one, through the client's own session_call, SESSION_CALL with a
    map that names another session or tenant, and raw RPUSHes onto the
    worker's call list (malformed, naming no session here, well-formed).
    Each job keeps its own result; a call is answered only on the
    attacker's own keys (al:res:<its session>/<call>)."""
    import airlock
    import msgpack
    mal = airlock.Client(redis=url("gateway"), tier="trusted", tenant="mallory")
    ms = mal.session()
    via = mal._via
    done_before = c.rcli("GET", "al:res:" + done_id)
    running = cl.submit("sleep 4; echo real-run", runtime="sh", tier="trusted")
    for _ in range(100):
        if c.rcli("HGET", "al:job:" + running, "state").strip() == "running":
            break
        time.sleep(0.1)
    queued = cl.submit("echo real-queued", runtime="sh", tier="trusted")
    time.sleep(0.5)
    state_q = c.rcli("HGET", "al:job:" + queued, "state").strip()
    victims = [done_id, running, queued]

    def queue(sid, tenant, m):
        return via._call(via.scripts["SESSION_CALL"], keys=[],
                         args=[sid, tenant, msgpack.packb(m, use_bin_type=True)])

    def call(victim, **kw):
        return dict({"v": 1, "id": victim, "session": ms.id, "tenant": "mallory",
                     "op": "exec", "code": b"echo forged", "submitted_ms": 1}, **kw)

    answers, refused = [], []
    for v in victims:
        answers.append((v, via.session_call(ms.id, {"op": "exec", "code": b"echo forged",
                                                    "id": v})))
        for m in (call(v, session="other-" + v), call(v, tenant="acme")):
            got = queue(ms.id, "mallory", m)
            refused.append(got[0] == 3)
        for m in (call(v, op="bogus"), call(v, session="nosuch"), call(v)):
            as_user("gateway", "RPUSH", "al:wq:acl-w", "x")  # noise the worker drops
            subprocess.run(["redis-cli", "-s", c.sock, "--user", "airlock-gateway", "--pass",
                            PW["gateway"], "--no-auth-warning", "-x", "RPUSH", "al:wq:acl-w"],
                           input=msgpack.packb(m, use_bin_type=True), capture_output=True,
                           timeout=30)
    own = [via.session_wait(ms.id, cid, 30) for _, cid in answers]
    ms.close()
    r_run, r_q = cl.wait(running, 60), cl.wait(queued, 60)
    t.ok(state_q in ("queued", "") and r_run.status == "ok" and r_run.stdout == b"real-run\n"
         and r_q.status == "ok" and r_q.stdout == b"real-queued\n" and
         c.rcli("GET", "al:res:" + done_id) == done_before,
         "a client credential's session calls aimed at a finished, a running and a queued "
         "job of another tenant (through session_call, SESSION_CALL and raw RPUSH, well "
         "formed, malformed, naming no session): each job keeps its own result",
         (state_q, r_run, r_q))
    t.ok(all(refused) and len(refused) == 6,
         "SESSION_CALL refuses a call map whose session or tenant is not its arguments' "
         "(%d of 6)" % sum(refused), refused)
    # the malformed or mismatched ones raced for the same keys: an answer
    # is whichever came first, but always the attacker's own key
    t.ok(all(r.status in ("ok", "rejected", "session_ended") for r in own) and
         all(c.rcli("EXISTS", "al:res:%s/%s" % (ms.id, cid)).strip() == "1"
             for _, cid in answers),
         "the attacker's calls are answered on its own keys (al:res:<session>/<call>)",
         [(r.status, r.stdout) for r in own])

try:
    base = c.url
    c.url = url("scheduler")
    c.scheduler()
    c.url = url("worker")
    c.worker("acl-w", uid_base=62700, slots=2)
    c.url = base
    key = "k-" + secrets.token_hex(16)
    port = free_port()
    start_gateway(c, port, key_file(os.path.join(c.dir, "keys"), {"acme": key}),
                  url=url("gateway"))
    api = Api(port)
    st, body = api.call("POST", "/v1/run", {"tier": "trusted", "runtime": "python",
                                            "code": "print('under ACLs')"}, key=key)
    st2, body2 = api.call("POST", "/v1/run", {"tier": "trusted", "runtime": "sh",
                                              "code": "exit 3"}, key=key)
    st3, slow = api.call("POST", "/v1/jobs", {"tier": "trusted", "runtime": "python",
                                              "code": "import time; time.sleep(30)"}, key=key)
    time.sleep(1.5)
    st4, cancel = api.call("DELETE", "/v1/jobs/%s" % slow.get("id"), key=key)
    st5, res5 = api.call("GET", "/v1/jobs/%s/wait?timeout_ms=15000" % slow.get("id"), key=key)
    # Cancelled before admission, with no scheduler to answer at first: the
    # request waits on the intake (202 "requested"), the job shows
    # "submitted" to its own tenant only (LOOKUP: the marker), and once a
    # scheduler reads the intake the job ends cancelled without running.
    other = "k-" + secrets.token_hex(16)
    api2_port = free_port()
    start_gateway(c, api2_port, key_file(os.path.join(c.dir, "keys2"), {"acme": key,
                                                                         "rival": other}),
                  url=url("gateway"), name="gw2")
    api2 = Api(api2_port)
    c.signal("sched1", signal.SIGTERM)
    c.wait_exit("sched1")
    try:
        st6, pend = api2.call("POST", "/v1/jobs", {"tier": "trusted", "runtime": "sh",
                                                   "code": "touch /tmp/ran"}, key=key)
        st7, seen = api2.call("GET", "/v1/jobs/%s" % pend.get("id"), key=key)
        st8, _ = api2.call("GET", "/v1/jobs/%s" % pend.get("id"), key=other)
        st9, _ = api2.call("DELETE", "/v1/jobs/%s" % pend.get("id"), key=other)
        t0 = time.time()
        st10, req = api2.call("DELETE", "/v1/jobs/%s" % pend.get("id"), key=key)
        waited = time.time() - t0
    finally:  # a new scheduler reads the submission and the request at once
        c.url = url("scheduler")
        c.scheduler(name="sched2")
        c.url = base
    st11, res11 = api2.call("GET", "/v1/jobs/%s/wait?timeout_ms=15000" % pend.get("id"), key=key)
    t.ok(st6 == 202 and st7 == 200 and seen.get("state") == "submitted" and st8 == 404 and
         st9 == 404, "a job not yet admitted is \"submitted\" to its tenant and unknown (404) "
         "to another, who cannot cancel it either", (st6, st7, seen, st8, st9))
    t.ok(st10 == 202 and req.get("cancel") == "requested" and 9 <= waited < 14 and
         st11 == 200 and res11["result"]["status"] == "cancelled" and
         res11["result"]["attempt"] == 0,
         "with no scheduler answering, a cancel is 202 \"requested\" after %.1f s; once one "
         "reads the intake the job ends cancelled, never run" % waited, (st10, req, res11))
    # a session its whole way: opened, two calls, a file, closed, all with
    # the gateway's rights as its client (SESSION_CALL: read the record,
    # append to al:wq:<worker>) and the worker's and scheduler's own
    import airlock
    cl = airlock.Client(redis=url("gateway"), tier="trusted", tenant="acme")
    s = cl.session()
    s.run_python("x = 6 * 7")
    s.put("f.txt", b"kept")
    rs = s.run_python("print(x, open('f.txt').read())")
    s.close()
    t.ok(rs.stdout == b"42 kept\n" and
         c.rcli("HGET", "al:sess:" + s.id, "reason").strip() == "closed",
         "a session goes its whole way under the ACL users: opened, called, closed", rs)
    forged_calls(cl, body.get("id"))
    # the operator: the airlock CLI over Redis as airlock-operator
    op_env = dict(os.environ, AIRLOCK_REDIS=url("operator"))
    ops = [subprocess.run([CLI, *a], env=op_env, capture_output=True, text=True, timeout=60)
           for a in (["stats"], ["dlq", "list"], ["vm", "list"], ["run", "-c", "print(7)"],
                     ["dlq", "purge"])]
    t.ok([o.returncode for o in ops] == [0] * 5 and "trusted" in ops[0].stdout and
         ops[3].stdout == "7\n" and c.rcli("XLEN", "al:dlq").strip() == "0",
         "the operator's user runs stats, dlq list and purge, vm list and a job (the CLI over "
         "Redis) with nothing refused", [(o.returncode, o.stdout[:200], o.stderr[:200])
                                         for o in ops])
    log = c.rcli("ACL", "LOG")
    t.ok(st == 200 and body["result"]["stdout"] == "under ACLs\n" and
         body2["result"]["exit_code"] == 3 and st4 == 200 and
         res5.get("result", {}).get("status") == "cancelled",
         "a job goes its whole way with each daemon as its own ACL user: submitted through "
         "the gateway, admitted, run, committed, and a running one cancelled",
         (body, body2, cancel, res5))
    t.ok(log.strip() == "", "no command of theirs was refused (ACL LOG is empty)", log[:2000])
    logs = {n: c.log(n) for n in ("sched1", "sched2", "acl-w", "gw")}
    leaked = [(n, u) for n, text in logs.items() for u in PW if PW[u] in text]
    t.ok(not leaked and "password=***" in logs["acl-w"],
         "no daemon's log holds a password (the worker's start line shows password=***)",
         leaked or logs["acl-w"][:300])

    out = as_user("worker", "XADD", "al:intake", "*", "job", "x")
    t.ok("NOPERM" in out, "the worker's user cannot submit (XADD al:intake)", out)
    out = as_user("worker", "XRANGE", "al:intake", "-", "+")
    t.ok("NOPERM" in out, "the worker's user cannot read the intake", out)
    out = as_user("gateway", "XREADGROUP", "GROUP", "workers", "x", "COUNT", "1", "STREAMS",
                  "al:q:trusted:hi", ">")
    t.ok("NOPERM" in out, "the gateway's user cannot read a ready queue (claim a job)", out)
    out = as_user("gateway", "HSET", "al:workers", "fake", "{}")
    t.ok("NOPERM" in out, "the gateway's user cannot pose as a worker (heartbeats)", out)
    out = as_user("scheduler", "SET", "al:idem:acme/k", "x")
    t.ok("NOPERM" in out, "the scheduler's user cannot write idempotency keys", out)
    out = as_user("worker", "FLUSHALL")
    t.ok("NOPERM" in out, "no daemon's user may FLUSHALL", out)
    # what each user cannot do, tried one by one: every one must be NOPERM
    # (what a stolen credential of that kind is refused; PROTOCOL.md's table)
    forbidden = {
        "gateway": [["XADD", "al:q:trusted:hi", "*", "id", "x", "attempt", "1"],
                    ["XACK", "al:q:trusted:hi", "workers", "0-1"],
                    ["XRANGE", "al:q:trusted:hi", "-", "+"],
                    ["HSET", "al:workers", "w", "{}"], ["SET", "al:worker:w", "1"],
                    ["ZADD", "al:delayed", "0", "x"], ["ZADD", "al:deadlines", "0", "x"],
                    ["XADD", "al:dlq", "*", "a", "b"], ["HSET", "al:vm:x", "a", "b"],
                    ["DEL", "al:job:x"], ["EVAL", "return 1", "0"], ["KEYS", "*"],
                    ["CONFIG", "GET", "*"], ["FLUSHALL"], ["SET", "other:key", "1"],
                    ["SUBSCRIBE", "other"],
                    # no raw write of a record, a result or a counter, no
                    # kill by hand, no read of others' submissions
                    ["HSET", "al:job:x", "tenant", "evil"], ["HSET", "al:job:x", "state", "done"],
                    ["PEXPIRE", "al:job:x", "1"], ["SET", "al:res:x", "forged"],
                    ["HINCRBY", "al:tenant:acme", "queued", "-5"],
                    ["HINCRBY", "al:stats", "status:ok", "1"], ["PUBLISH", "al:cancel", "x"],
                    ["XRANGE", "al:intake", "-", "+"]],
        "worker": [["XADD", "al:intake", "*", "job", "x"], ["XRANGE", "al:intake", "-", "+"],
                   ["SET", "al:idem:t/k", "x"], ["ZADD", "al:deadlines", "0", "x"],
                   ["HSET", "al:rate:t", "a", "1"], ["XAUTOCLAIM", "al:q:trusted:hi", "workers",
                                                      "w", "0", "0-0"],
                   ["EVAL", "return 1", "0"], ["KEYS", "*"], ["CONFIG", "GET", "*"],
                   ["FLUSHALL"], ["GET", "other:key"], ["PUBLISH", "other", "x"]],
        "operator": [["HSET", "al:job:x", "state", "done"], ["SET", "al:res:x", "forged"],
                     ["HINCRBY", "al:stats", "status:ok", "1"],
                     ["HINCRBY", "al:tenant:acme", "queued", "-5"], ["PUBLISH", "al:cancel", "x"],
                     ["XREADGROUP", "GROUP", "workers", "o", "STREAMS", "al:q:trusted:hi", ">"],
                     ["XADD", "al:q:trusted:hi", "*", "id", "x"], ["HSET", "al:workers", "w", "{}"],
                     ["XRANGE", "al:intake", "-", "+"], ["DEL", "al:vm:x"],
                     ["EVAL", "return 1", "0"], ["KEYS", "*"], ["CONFIG", "GET", "*"],
                     ["FLUSHALL"], ["SET", "other:key", "1"]],
        "scheduler": [["SET", "al:idem:t/k", "x"], ["DEL", "al:job:x"],
                      ["EVAL", "return 1", "0"], ["KEYS", "*"],
                      ["PUBLISH", "other", "x"], ["SUBSCRIBE", "al:cancel"],
                      ["CONFIG", "GET", "*"], ["FLUSHALL"], ["GET", "other:key"],
                      ["XREADGROUP", "GROUP", "workers", "s", "STREAMS", "al:q:trusted:hi",
                       ">"]],
    }
    refused = {u: [" ".join(cmd[:2]) for cmd in cmds if "NOPERM" not in as_user(u, *cmd)]
               for u, cmds in forbidden.items()}
    # a stolen gateway credential cannot forge through a script either:
    # Redis checks what a script runs against its caller's rights
    done_id = body.get("id")
    before = c.rcli("GET", "al:res:" + done_id)
    forge = ["redis.call('SET', KEYS[1], 'forged')", "redis.call('HSET', KEYS[1], 'tenant', 'x')",
             "redis.call('HINCRBY', KEYS[1], 'running', -1)"]
    tried = [as_user("gateway", "EVALSHA", as_user("gateway", "SCRIPT", "LOAD", f).strip(), "1", k)
             for f, k in zip(forge, ("al:res:" + done_id, "al:job:" + done_id, "al:tenant:acme"))]
    inline = as_user("gateway", "EVALSHA", as_user(
        "gateway", "SCRIPT", "LOAD", "return redis.call('SET', 'al:res:%s', 'forged')" % done_id
    ).strip(), "0")
    t.ok(all("NOPERM" in x or "can't access" in x
             for x in tried + [inline]) and c.rcli("GET", "al:res:" + done_id) == before,
         "the gateway's user cannot forge a result, a record or a counter through a script "
         "of its own either (its keys declared or named inside); the result is intact",
         tried + [inline])
    t.ok(not any(refused.values()),
         "each user is refused (NOPERM) every one of %d commands outside its part"
         % sum(len(v) for v in forbidden.values()), refused)
    out = subprocess.run(["redis-cli", "-s", c.sock, "PING"], capture_output=True,
                         text=True).stdout
    t.ok("NOAUTH" in out or "NOPERM" in out or "WRONGPASS" in out,
         "the default user is off", out)
finally:
    c.close()
sys.exit(t.done())
