#!/usr/bin/python3
"""airlock-gateway with a real redis-server, scheduler and worker (process
tier), spoken to over HTTP as a client in any language would (Python's
standard library). Two tenants, alpha and beta, each with an API key. The
attacks the issue reports are tried through the gateway and must fail:
alpha cannot read, wait on, cancel or learn the id of beta's job, cannot get
beta's idempotent id, cannot spend beta's rate limit, and a tenant field in
the body does not change the tenant. Bad input gets its status and message:
no or a bad key 401, an oversized body 413, malformed JSON 400, an unknown
field 400 naming it, an unknown job 404. 200 concurrent clients each get
their own result; a gateway killed mid-request loses no accepted job; HTTPS
with a certificate; the CLI as a tenant through --gateway."""
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402
from gwclient import GATEWAY, Api, free_port, key_file, start_gateway  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
import airlock  # noqa: E402

t = Tap()

# Bad settings are refused at start, before anything listens: an overflowing
# number was taken as the largest (strtoull without errno), an empty one as 0.
bad = {("--max-body", "99999999999999999999"): "--max-body: expected a whole number",
       ("--max-body", ""): "--max-body: expected a whole number",
       ("--polls-per-tenant", "-3"): "--polls-per-tenant: expected a whole number",
       ("--header-timeout-s", "10s"): "--header-timeout-s: expected a whole number",
       ("--result-ttl-s", "60"): "--result-ttl-s: no longer an option"}
got = {k: subprocess.run([GATEWAY, "--redis", "unix:///nonexistent", "--keys", "/dev/null", *k],
                         capture_output=True, text=True, timeout=10) for k in bad}
t.ok(all(p.returncode == 2 and bad[k] in p.stderr for k, p in got.items()),
     "the gateway refuses an overflowing, empty, negative or suffixed number and a "
     "setting that no longer does anything, each saying which",
     {k: (p.returncode, p.stderr[:120]) for k, p in got.items()})
need_root("the process backend")

POLICY = policy(tier_def("trusted", "process", defaults=DEFAULTS),
                tenants={"default": {"rate_per_s": 0}, "beta": {"rate_per_s": 5}})

KEYS = {"alpha": "ak-" + secrets.token_hex(16), "beta": "bk-" + secrets.token_hex(16),
        "gamma": "gk-" + secrets.token_hex(16)}


def job(code, **kw):
    j = {"tier": "trusted", "runtime": "python", "code": code}
    j.update(kw)
    return j


c = Cluster(policy=POLICY)
try:
    keyfile = key_file(os.path.join(c.dir, "keys"), KEYS)
    t.ok(KEYS["alpha"] not in open(keyfile).read(), "the key file holds hashes, not keys")
    p = subprocess.run([GATEWAY, "--redis", c.url, "--keys", "/nonexistent"], capture_output=True)
    t.ok(p.returncode == 2 and b"/nonexistent" in p.stderr,
         "a missing key file: exit 2, naming it", p.stderr)
    with open(os.path.join(c.dir, "badkeys"), "w") as f:
        f.write("alpha plaintext-key\n")
    p = subprocess.run([GATEWAY, "--redis", c.url, "--keys", os.path.join(c.dir, "badkeys")],
                       capture_output=True)
    t.ok(p.returncode == 2 and b':1: expected "TENANT sha256:HEX"' in p.stderr,
         "a key file line that is not a hash is refused with its line", p.stderr)

    c.scheduler()
    c.worker("gw-w", uid_base=62500, slots=2)
    port = free_port()
    start_gateway(c, port, keyfile)
    api = Api(port)
    A, B = KEYS["alpha"], KEYS["beta"]

    st, body = api.call("GET", "/healthz")
    t.ok(st == 200 and body.get("status") == "ok", "GET /healthz: 200 with Redis up", body)
    st, body = api.call("POST", "/v1/jobs", job("print(1)"))
    t.ok(st == 401 and "API key" in body.get("error", ""), "no key: 401", (st, body))
    st, body = api.call("POST", "/v1/jobs", job("print(1)"), key="wrong-" + A)
    t.ok(st == 401, "a wrong key: 401", (st, body))

    st, body = api.call("POST", "/v1/run", job("print('hello from alpha')"), key=A)
    res = body.get("result", {})
    t.ok(st == 200 and res.get("status") == "ok" and res.get("stdout") == "hello from alpha\n",
         "POST /v1/run submits and waits in one call", (st, body))

    st, body = api.call("POST", "/v1/jobs", job("print('beta secret', 42)",
                                                 env={"BETA_TOKEN": "s3cret"},
                                                 idempotency_key="same-key"), key=B)
    bid = body.get("id", "")
    t.ok(st == 202 and bid.startswith("g") and len(bid) == 33,
         "POST /v1/jobs: 202 with an id the gateway chose", (st, body))
    st, bres = api.call("GET", "/v1/jobs/%s/wait?timeout_ms=20000" % bid, key=B)
    t.ok(st == 200 and bres.get("result", {}).get("stdout") == "beta secret 42\n",
         "beta waits on its job and gets its result", (st, bres))

    # alpha against beta's job: every way is 404, as for a job that never was
    outs = [api.call("GET", "/v1/jobs/%s" % bid, key=A),
            api.call("GET", "/v1/jobs/%s/wait?timeout_ms=500" % bid, key=A),
            api.call("DELETE", "/v1/jobs/%s" % bid, key=A),
            api.call("GET", "/v1/jobs/gnosuchjob", key=A)]
    t.ok(all(s == 404 for s, _ in outs) and
         all("beta secret" not in json.dumps(b) and "s3cret" not in json.dumps(b)
             for _, b in outs) and outs[0][1] == {"error": "no job %s" % bid},
         "tenant alpha cannot read, wait on or cancel beta's job: 404, the same answer as "
         "for an unknown job", outs)
    st, body = api.call("POST", "/v1/jobs", job("print(2)", idempotency_key="same-key"), key=A)
    st2, body2 = api.call("POST", "/v1/jobs", job("print(2)", idempotency_key="same-key"), key=A)
    t.ok(st == 202 and body["id"] != bid and not body["same_key"] and st2 == 202 and
         body2["id"] == body["id"] and body2["same_key"],
         "beta's idempotency key gives alpha its own job, never beta's id; alpha's second "
         "use of it (the same body) gives alpha's first id", (bid, body, body2))
    st3, body3 = api.call("POST", "/v1/jobs", job("print(3)", idempotency_key="same-key"), key=A)
    t.ok(st3 == 409 and "different body" in body3.get("error", "") and
         body3.get("id") == body["id"] and body3.get("same_key") is True,
         "the key reused with another body: 409 saying so, with the earlier id", (st3, body3))
    # /v1/run: the earlier result with same_key, or a 409; the 202's state is the real one
    st, r1 = api.call("POST", "/v1/run", job("print('run-1')", idempotency_key="run-key"), key=A)
    st2, r2 = api.call("POST", "/v1/run", job("print('run-1')", idempotency_key="run-key"), key=A)
    st3, r3 = api.call("POST", "/v1/run", job("print('run-2')", idempotency_key="run-key"), key=A)
    st4, r4 = api.call("POST", "/v1/jobs", job("print('run-1')", idempotency_key="run-key"), key=A)
    t.ok(st == 200 and r1["same_key"] is False and r1["result"]["stdout"] == "run-1\n" and
         st2 == 200 and r2["same_key"] is True and r2["id"] == r1["id"] and
         r2["result"]["stdout"] == "run-1\n" and st3 == 409 and r3["id"] == r1["id"] and
         st4 == 202 and r4["state"] == "done" and r4["same_key"] is True,
         "/v1/run: same_key on its answers; another body under the key is a 409, never the "
         "old result; a 202 for a reused key says the earlier job's real state (done)",
         [(st, r1.get("same_key")), (st2, r2.get("same_key")), (st3, r3), (st4, r4)])
    m = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
    t.ok("airlock_gateway_idempotency_conflicts_total 2" in m,
         "the gateway's metrics count the two 409s", m[-300:])

    st, body = api.call("POST", "/v1/jobs", job("print(1)", tenant="beta"), key=A)
    t.ok(st == 400 and "tenant: set by your API key (tenant alpha)" in body.get("error", ""),
         "a tenant field in the body cannot change the tenant: 400", (st, body))
    st, body = api.call("POST", "/v1/run", job("import os; print(os.environ.get('X'))",
                                                tenant="alpha"), key=A)
    t.ok(st == 200 and body["result"]["status"] == "ok",
         "a tenant field naming the key's own tenant is accepted", (st, body))
    st, body = api.call("POST", "/v1/jobs", dict(job("print(1)"), id="mine"), key=A)
    t.ok(st == 400 and "id: chosen by the gateway" in body.get("error", ""),
         "a client-chosen id is refused: 400", (st, body))
    rec = c.rcli("HGET", "al:job:" + body2["id"], "tenant")
    t.ok(rec.strip() == "alpha", "the job's record names the key's tenant", rec)

    # bad input
    st, body = api.call("POST", "/v1/jobs", raw=b'{"tier": "trusted", "runtime": ', key=A)
    t.ok(st == 400 and "body: invalid JSON" in body.get("error", ""),
         "malformed JSON: 400 saying where", (st, body))
    st, body = api.call("POST", "/v1/jobs", job("print(1)", colour="red"), key=A)
    t.ok(st == 400 and 'unknown field "colour"' in body.get("error", ""),
         "an unknown field: 400 naming it", (st, body))
    st, body = api.call("POST", "/v1/jobs", job("print(1)", limits={"wall_ms": -5}), key=A)
    t.ok(st == 400 and "limits.wall_ms" in body.get("error", ""),
         "a bad limit: 400 naming the field", (st, body))
    st, body = api.call("POST", "/v1/jobs", job("x = 1\n" * 60000), key=A)
    t.ok(st == 413 and "more than this gateway takes (200000, --max-body)" in body.get("error", ""),
         "an oversized body (over --max-body): a JSON 413 saying the limit", (st, body))
    # as urllib sends it: the whole body at once, the answer read after (it
    # got BrokenPipeError when the 413 came before the body was read)
    big = json.dumps(job("x = 1\n" * 400000)).encode()
    try:
        urllib.request.urlopen(urllib.request.Request(
            "http://127.0.0.1:%d/v1/jobs" % port, data=big, method="POST",
            headers={"Authorization": "Bearer " + A, "Content-Type": "application/json"}),
            timeout=30)
        got = None
    except urllib.error.HTTPError as e:
        got = (e.code, json.loads(e.read()))
    except OSError as e:
        got = repr(e)
    t.ok(isinstance(got, tuple) and got[0] == 413 and "more than this gateway takes" in got[1]["error"],
         "urllib with a 2.8 MB body: a JSON 413, no broken pipe", got)
    h = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    h.request("POST", "/v1/jobs", body=big, headers={"Authorization": "Bearer " + A})
    r1 = h.getresponse()
    r1.read()
    h.request("GET", "/healthz")
    r2 = h.getresponse()
    t.ok(r1.status == 413 and r2.status == 200 and json.loads(r2.read()),
         "the connection goes on after the 413: its body read and dropped, the next request "
         "answered", (r1.status, r2.status))
    h.close()
    raw = socket.create_connection(("127.0.0.1", port), 10)
    raw.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + A.encode() +
                b"\r\nContent-Length: 5000000\r\nExpect: 100-continue\r\n\r\n")
    reply = b""
    while True:
        chunk = raw.recv(65536)
        if not chunk:
            break
        reply += chunk
    raw.close()
    t.ok(reply.startswith(b"HTTP/1.1 413") and b'"error"' in reply,
         "Expect: 100-continue with an oversized body: a JSON 413 and the connection closed "
         "(no body is waited for)", reply[:300])
    for m in ("PUT", "PATCH", "OPTIONS"):
        st, body = api.call(m, "/v1/jobs", job("print(1)"), key=A)
        t.ok(st == 405 and body.get("error") == "/v1/jobs takes POST",
             "%s on /v1/jobs: a JSON 405 saying what it takes" % m, (st, body))
    st, body = api.call("BREW", "/v1/jobs", job("print(1)"), key=A)
    t.ok(st == 501 and "the method BREW is not one this API takes" in body.get("error", ""),
         "an unknown method: a JSON 501", (st, body))
    st, body = api.call("GET", "/healthz")
    t.ok(st == 200, "the gateway still answers after them", (st, body))
    st, body = api.call("GET", "/v1/elsewhere", key=A)
    t.ok(st == 404 and "no such endpoint" in body.get("error", ""), "an unknown path: 404", body)
    import base64
    st, body = api.call("POST", "/v1/run", {"tier": "trusted", "runtime": "python",
                                            "code_base64": base64.b64encode(b"print('b64')").decode()},
                        key=A)
    t.ok(st == 200 and body["result"]["stdout"] == "b64\n",
         "bytes fields may come as NAME_base64", (st, body))
    r = body["result"]
    t.ok(0 < r["queued_ms"] <= r["started_ms"] <= r["finished_ms"] and
         r["started_ms"] - r["queued_ms"] < 60000,
         "a job through the gateway has its queued_ms (the gateway's clock at submission)",
         {k: r[k] for k in ("queued_ms", "started_ms", "finished_ms")})
    st, body = api.call("POST", "/v1/run", job("print('x' * 5000, flush=True); import time; time.sleep(3)",
                                                limits={"stdout_bytes": 100}), key=A)
    r = body.get("result", {})
    t.ok(r.get("status") == "output_limit" and r.get("exit_code", 0) is None and
         r.get("wall_ms", 9999) < 2500 and len(r.get("stdout", "")) == 100,
         "stdout over its cap with the job still running: stopped at once, exit_code null",
         (st, body))
    st, body = api.call("POST", "/v1/jobs", job("print(1)", submitted_ms=5), key=A)
    t.ok(st == 400 and "submitted_ms: the gateway's clock sets it" in body.get("error", ""),
         "submitted_ms in the body: 400", (st, body))

    # cancel a queued job of one's own
    st, body = api.call("POST", "/v1/jobs", job("import time; time.sleep(30)"), key=A)
    slow = body["id"]
    time.sleep(1)
    st, body = api.call("DELETE", "/v1/jobs/%s" % slow, key=A)
    st2, body2 = api.call("GET", "/v1/jobs/%s/wait?timeout_ms=15000" % slow, key=A)
    t.ok(st == 200 and body["cancel"] in ("ended", "kill_sent") and
         body2.get("result", {}).get("status") == "cancelled",
         "DELETE cancels the caller's own job; its result says cancelled", (body, body2))
    st, body = api.call("POST", "/v1/jobs?wait=100", job("import time; time.sleep(3)"), key=A)
    t.ok(st == 202 and body.get("state") in ("submitted", "queued", "running"),
         "?wait= that runs out: 202 with the state", (st, body))

    # beta's rate limit (5/s) is beta's: alpha's burst does not spend it
    burst = [api.call("POST", "/v1/jobs", job("pass"), key=A)[1]["id"] for _ in range(12)]
    time.sleep(1.2)
    st, body = api.call("POST", "/v1/run", job("print('beta still admitted')"), key=B)
    t.ok(st == 200 and body["result"]["stdout"] == "beta still admitted\n",
         "alpha's burst of 12 does not spend beta's rate limit", (st, body))
    codes = []
    lock = threading.Lock()

    def beta_run():
        s, b = api.call("POST", "/v1/run", job("pass"), key=B)
        with lock:
            r = b.get("result", {})
            codes.append((s, (r.get("error"), r.get("info", {}).get("quota"))))
    ths = [threading.Thread(target=beta_run) for _ in range(12)]
    [x.start() for x in ths]
    [x.join() for x in ths]
    limited = [e for s, e in codes if s == 429]
    t.ok(limited and all("rate_per_s" in e for e, _ in limited) and
         all(q == "rate_per_s" for _, q in limited) and any(s == 200 for s, _ in codes),
         "beta past its own rate: 429 with the reason, and the result's info.quota says "
         "which (%d of 12)" % len(limited), codes)
    # 429 comes from the scheduler's structured info.quota, not from the error's words:
    # a rejection whose message happens to name a quota is still a 400
    st, body = api.call("POST", "/v1/run", job("pass", tier="max_queued_rate_per_s"), key=A)
    t.ok(st == 400 and "max_queued_rate_per_s" in json.dumps(body),
         "a rejection that is no quota's, whose error names one, is 400", (st, body))
    t.ok(isinstance(body.get("error"), str) and body["error"] == body["result"]["error"] and
         body["result"]["status"] == "rejected",
         "a policy rejection has the one 4xx envelope (error at the top), its result beside it",
         body)
    st, body = api.call("POST", "/v1/run", job("import sys; sys.stdout.buffer.write(b'ok\\xff\\n')"),
                        key=A)
    r = body.get("result", {})
    import base64 as b64
    t.ok(st == 200 and r.get("stdout") == "ok\ufffd\n" and
         b64.b64decode(r.get("stdout_base64", "")) == b"ok\xff\n",
         "stdout not UTF-8: stdout as text with U+FFFD, stdout_base64 the exact bytes", r)

    # 200 concurrent clients, each its own result
    got = {}

    def one(i):
        s, b = api.call("POST", "/v1/run", job("print(%d * 7)" % i),
                        key=A if i % 2 else KEYS["gamma"], timeout=240)
        with lock:
            got[i] = (s, b.get("result", {}).get("stdout"))
    ths = [threading.Thread(target=one, args=(i,)) for i in range(200)]
    t0 = time.time()
    [x.start() for x in ths]
    [x.join() for x in ths]
    wrong = {i: v for i, v in got.items() if v != (200, "%d\n" % (i * 7))}
    t.ok(len(got) == 200 and not wrong,
         "200 concurrent clients of two tenants each get their own result (%.1f s)"
         % (time.time() - t0), wrong)

    # killed mid-request: every id it answered has a result
    ids = [api.call("POST", "/v1/jobs", job("print('after the crash')"), key=A)[1]["id"]
           for _ in range(10)]
    kept = airlock.Client(gateway="http://127.0.0.1:%d" % port, token=A, tier="trusted")
    before = kept.run("print('before')", runtime="python").stdout  # its connection kept alive
    c.signal("gw", signal.SIGKILL)
    c.wait_exit("gw")
    c.procs.pop("gw")
    start_gateway(c, port, keyfile, name="gw")
    outs = [api.call("GET", "/v1/jobs/%s/wait?timeout_ms=30000" % i, key=A) for i in ids]
    t.ok(all(s == 200 and b["result"]["stdout"] == "after the crash\n" for s, b in outs),
         "a gateway killed after answering loses no accepted job: each id has its result "
         "from a new gateway", outs[:2])
    try:  # the client's kept-alive connection died with the old gateway
        after = (kept.run("print('after')", runtime="python").stdout,
                 kept.wait(ids[0], 30).stdout,
                 kept.run("print('keyed')", runtime="python", idempotency_key="k-%d" % port).stdout)
    except airlock.AirlockError as e:
        after = e
    t.ok(before == b"before\n" and after == (b"after\n", b"after the crash\n", b"keyed\n"),
         "the Python client's calls after a gateway restart succeed on a new connection (a "
         "POST, a GET, a POST with an idempotency key)", (before, after))

    # docs/api.md's two examples: a streamed read, then a POST, each with
    # its language's own HTTP client (issue 59: the gateway closed a
    # kept-alive connection after a stream without saying so)
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "api.md")).read()
    blocks = re.findall(r"^```(python|js)\n(.*?)^```", doc.split("## Authentication")[0],
                        re.M | re.S)
    ex_env = dict(os.environ, AIRLOCK_GATEWAY="http://127.0.0.1:%d" % port, AIRLOCK_TOKEN=A)
    ran = {lang: subprocess.run(["/usr/bin/python3", "-c", code] if lang == "python" else
                                ["node", "-e", code], capture_output=True, text=True,
                                env=ex_env, timeout=60)
           for lang, code in blocks if lang == "python" or shutil.which("node")}
    h = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    h.request("GET", "/v1/jobs/%s/output" % bid, headers={"Authorization": "Bearer " + B})
    sse_close = h.getresponse()
    sse_close.read()
    t.ok(len(blocks) == 2 and set(ran) >= {"python"} and
         all(p.returncode == 0 and p.stdout.split()[-1] == "202" and
             int(p.stdout.split()[0]) >= 2 for p in ran.values()) and
         sse_close.getheader("Connection") == "close",
         "docs/api.md's Python and Node examples (%s): a streamed read then a POST each "
         "succeed; a stream's response says Connection: close" % ", ".join(sorted(ran)),
         {k: (p.returncode, p.stdout, p.stderr[-300:]) for k, p in ran.items()})
    h.close()

    # SIGHUP rereads the key file (issue 59): gamma's key revoked while its
    # stream runs, alpha's rotated, delta new; then a broken file
    G = KEYS["gamma"]
    st, body = api.call("POST", "/v1/jobs", job("import time\nprint('a', flush=True)\n"
                                                "time.sleep(3)\nprint('b')"), key=G)
    gid = body.get("id", "")
    h = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    h.request("GET", "/v1/jobs/%s/output" % gid, headers={"Authorization": "Bearer " + G})
    stream = h.getresponse()
    first = stream.readline()  # the stream is open: the key checked
    A2, D = "ak2-" + secrets.token_hex(16), "dk-" + secrets.token_hex(16)
    key_file(keyfile, {"alpha": A2, "beta": B, "delta": D})
    c.signal("gw", signal.SIGHUP)
    reloaded = c.wait_for(lambda: api.call("GET", "/v1/jobs/gnosuch", key=D)[0] == 404, 10)
    codes = [api.call("GET", "/v1/jobs/gnosuch", key=k)[0] for k in (A, A2, G, B)]
    rest = stream.read().decode()  # to the stream's end
    h.close()
    t.ok(stream.status == 200 and first and reloaded and codes == [401, 404, 401, 404] and
         "event: end" in rest and '"data":"b\\n"' in rest and '"status":"ok"' in rest and
         c.procs["gw"].poll() is None and "keys_reload" in c.log("gw") and
         "result=ok keys=3 was=3" in c.log("gw"),
         "SIGHUP rereads the key file: a new key works, a revoked one and a rotated one's old "
         "key are 401, the new one works; a stream let in before it runs to its end",
         (codes, reloaded, rest[-300:], c.log("gw")[-600:]))
    with open(keyfile, "w") as f:
        f.write("alpha plaintext-key\n")
    c.signal("gw", signal.SIGHUP)
    refused = c.wait_for(lambda: "result=refused" in c.log("gw"), 10)
    codes = [api.call("GET", "/v1/jobs/gnosuch", key=k)[0] for k in (A2, D, "plaintext-key")]
    t.ok(refused and ':1: expected "TENANT sha256:HEX"' in c.log("gw") and
         codes == [404, 404, 401] and c.procs["gw"].poll() is None,
         "SIGHUP with a broken key file: refused and logged with its line, the keys before it "
         "still work, the gateway runs on", (codes, c.log("gw")[-600:]))
    key_file(keyfile, KEYS)
    c.signal("gw", signal.SIGHUP)
    c.wait_for(lambda: api.call("GET", "/v1/jobs/gnosuch", key=A)[0] == 404, 10)

    # the CLI as a tenant: through the gateway, the key from the environment or a file
    CLI = os.path.join(os.path.dirname(GATEWAY), "airlock")
    gw_url = "http://127.0.0.1:%d" % port
    env = dict(os.environ, AIRLOCK_TOKEN=A)
    p = subprocess.run([CLI, "--gateway", gw_url, "run", "-c", "print('cli via gateway')"],
                       capture_output=True, env=env, timeout=60)
    t.ok(p.returncode == 0 and p.stdout == b"cli via gateway\n",
         "airlock --gateway run (key from $AIRLOCK_TOKEN)", (p.stdout, p.stderr))
    # A submission over 1 MiB goes in one request: no "Expect: 100-continue"
    # (libcurl's default for such a body), which costs a round trip more
    # (the gateway answers 100 first) and, from a proxy that does not,
    # a second's wait. A stand-in listener (a fake: it records the request
    # and refuses it) sees what the CLI sends.
    seen = {}
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)

    def fake_gateway():
        conn, _ = lst.accept()
        conn.settimeout(5)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            seen["head"] = head.decode(errors="replace")
            want = int(next((l.split(b":")[1] for l in head.split(b"\r\n")
                             if l.lower().startswith(b"content-length:")), b"0"))
            conn.settimeout(0.5)  # the body must follow at once, without a 100
            try:
                while len(body) < want:
                    more = conn.recv(65536)
                    if not more:
                        break
                    body += more
            except OSError:
                pass
            seen["body"] = len(body)
            seen["want"] = want
            msg = b'{"error": "fake gateway"}'
            conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(msg), msg))
        finally:
            conn.close()

    th = threading.Thread(target=fake_gateway, daemon=True)
    th.start()
    big = os.path.join(c.dir, "big.bin")
    with open(big, "wb") as f:
        f.write(os.urandom(3 << 19))
    p = subprocess.run([CLI, "--gateway", "http://127.0.0.1:%d" % lst.getsockname()[1], "submit",
                        "-f", big + ":big.bin", "-c", "print(1)"], capture_output=True, env=env,
                       timeout=60)
    th.join(10)
    lst.close()
    t.ok("expect:" not in seen.get("head", "").lower() and seen.get("want", 0) > 3 << 19 and
         seen.get("body") == seen.get("want") and b"fake gateway" in p.stderr,
         "a 1.5 MiB submission through the gateway goes in one request: no Expect: "
         "100-continue, the whole body at once", (seen, p.stderr))
    tok = os.path.join(c.dir, "token")
    with open(tok, "w") as f:
        f.write(B + "\n")
    os.chmod(tok, 0o600)
    p = subprocess.run([CLI, "--gateway", gw_url, "--token-file", tok, "submit", "-c",
                        "import time; time.sleep(20)"], capture_output=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != "AIRLOCK_TOKEN"})
    sid = p.stdout.decode().strip()
    st = subprocess.run([CLI, "--gateway", gw_url, "--token-file", tok, "status", sid],
                        capture_output=True, timeout=60)
    other = subprocess.run([CLI, "--gateway", gw_url, "status", sid], capture_output=True,
                           env=env, timeout=60)
    cn = subprocess.run([CLI, "--gateway", gw_url, "--token-file", tok, "cancel", sid],
                        capture_output=True, timeout=60)
    t.ok(p.returncode == 0 and sid.startswith("g") and st.returncode == 0 and
         sid.encode() in st.stdout and other.returncode != 0 and b"404" in other.stderr and
         cn.returncode == 0,
         "airlock --gateway --token-file submit, status, cancel; another tenant's key gets "
         "404 for it", (p.stderr, st.stdout, other.stderr, cn.stdout, cn.stderr))
    p = subprocess.run([CLI, "--gateway", gw_url, "--token", A, "run", "-c", "print(1)"],
                       capture_output=True, timeout=30)
    q = subprocess.run([CLI, "--gateway", gw_url, "stats"], capture_output=True, env=env,
                       timeout=30)
    r = subprocess.run([CLI, "--gateway", gw_url, "run", "-c", "print(1)"], capture_output=True,
                       env={k: v for k, v in os.environ.items() if k != "AIRLOCK_TOKEN"},
                       timeout=30)
    t.ok(p.returncode == 2 and b"--token is not an option" in p.stderr and
         q.returncode != 0 and b"operator's command" in q.stderr and r.returncode != 0 and
         b"AIRLOCK_TOKEN" in r.stderr,
         "no key flag (it would show in ps); operators' commands refuse the gateway; no key: "
         "says where one goes", (p.stderr, q.stderr, r.stderr))
    # HTTPS: with a certificate and key the gateway speaks TLS only
    import ssl
    cert, pkey = os.path.join(c.dir, "gw.pem"), os.path.join(c.dir, "gw.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", pkey, "-out", cert], check=True, capture_output=True)
    tport = free_port()
    c._start("gw-tls", [GATEWAY, "--redis", c.url, "--keys", keyfile, "--listen",
                        "127.0.0.1:%d" % tport, "--tls-cert", cert, "--tls-key", pkey])
    c.wait_for(lambda: "gateway_start" in c.log("gw-tls"), timeout=10)
    ctx = ssl.create_default_context(cafile=cert)
    h = http.client.HTTPSConnection("127.0.0.1", tport, timeout=60, context=ctx)
    h.request("POST", "/v1/run", body=json.dumps(job("print('over tls')")),
              headers={"Authorization": "Bearer " + A, "Content-Type": "application/json"})
    r = h.getresponse()
    tls_body = json.loads(r.read())
    h.close()
    try:
        plain_ok = Api(tport).call("GET", "/healthz", timeout=5)[0] == 200
    except Exception:
        plain_ok = False
    t.ok(r.status == 200 and tls_body["result"]["stdout"] == "over tls\n" and not plain_ok,
         "--tls-cert/--tls-key: HTTPS works (TLS 1.2+); plain HTTP to that port gets nothing",
         (r.status, tls_body))
    p = subprocess.run([GATEWAY, "--redis", c.url, "--keys", keyfile, "--tls-cert", cert,
                        "--tls-key", cert], capture_output=True, timeout=10)
    t.ok(p.returncode == 2 and b"TLS with" in p.stderr,
         "a certificate without its key: exit 2 saying so", p.stderr)
    st, body = api.call("GET", "/metrics")
    t.ok(st == 200 and "airlock_gateway_requests_total" in body.get("raw", ""),
         "GET /metrics counts requests", body)
    del burst
finally:
    c.close()
sys.exit(t.done())
