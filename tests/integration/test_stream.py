#!/usr/bin/python3
"""Live output (PROTOCOL.md, "Live output") with a real redis-server,
scheduler, worker and gateway. A job that prints a line every 100 ms is seen
line by line before it ends: by `airlock run` (process, container and
microVM backends, the container's with runsc too, and through the
gateway), by a Server-Sent Events client
(Python's http.client, as a browser's EventSource would read it) and by a
plain XREAD. A reader resuming after an entry id gets exactly the rest
(XREAD and Last-Event-ID). The stream is bounded: a flood stops at the job's
cap with its output_limit verdict, no chunk past it. It expires with the
result. A job given back by a draining worker gets a restart entry, and
`airlock run` says its output starts over. Bad input: a malformed
Last-Event-ID is 400, another tenant's job 404. `--no-stream` waits for the
end. A worker with --live-output off writes only the end entry. A gateway killed
and restarted while `airlock run` or the Python client follows a job through
it: they resume after the last event, every line once."""
import http.client
import json
import os
import secrets
import signal
import subprocess
import sys
import time

import redis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import CLI, Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402
from gwclient import free_port, key_file, start_gateway  # noqa: E402

t = Tap()
need_root("the sandboxes")
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")

def stream_policy(result_ttl_s):
    return policy(tier_def("trusted", "process", defaults=dict(DEFAULTS, wall_ms=30000)),
                  tier_def("internal", "container"),
                  tier_def("sandboxed", "container", oci_runtime="runsc"),
                  tier_def("untrusted", "microvm", image="python"),
                  tier_def("quiet", "process"), tier_def("handover", "process", max_attempts=3),
                  result_ttl_s=result_ttl_s)


TICK = "import time\nfor i in range(%d):\n    print('tick', i, flush=True)\n    time.sleep(0.1)\n"


def lines_as_they_come(argv, env=None, timeout=300):
    """(arrival time of each stdout line, the exit time, rc, stderr)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    got = []
    for line in p.stdout:
        got.append((time.monotonic() - t0, line))
    rc = p.wait(timeout)
    return got, time.monotonic() - t0, rc, p.stderr.read().decode(errors="replace")


def seen_live(got, n, end):
    """n lines in order, spread out (each its own arrival, mostly), the first
    long before the end."""
    texts = [line for _, line in got]
    times = sorted({round(a, 2) for a, _ in got})
    return (texts == [b"tick %d\n" % i for i in range(n)] and len(times) >= n // 2 and
            got[0][0] < end - 0.6)


def entries(c, jid):
    """The stream's entries as (id, {field: value}), values as bytes."""
    r = redis.Redis(unix_socket_path=c.sock)
    return [(e.decode(), {k.decode(): v for k, v in f.items()})
            for e, f in r.xrange("al:out:" + jid)]


def sse(port, key, jid, last=None, timeout=60):
    """Events of GET /v1/jobs/{id}/output as they come: (arrival, id, event, data)."""
    h = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    hd = {"Authorization": "Bearer " + key}
    if last:
        hd["Last-Event-ID"] = last
    h.request("GET", "/v1/jobs/%s/output" % jid, headers=hd)
    r = h.getresponse()
    if r.status != 200:
        body = r.read()
        h.close()
        return r.status, json.loads(body or b"{}")
    t0, evs, cur = time.monotonic(), [], {}
    while True:
        line = r.readline()
        if not line:
            break
        line = line.decode().rstrip("\r\n")
        if not line:
            if cur.get("event"):
                evs.append((time.monotonic() - t0, cur.get("id"), cur["event"],
                            json.loads(cur.get("data", "{}"))))
                if cur["event"] == "end":
                    break
            cur = {}
        elif not line.startswith(":"):
            k, _, v = line.partition(": ")
            cur[k] = v
    h.close()
    return 200, evs


c = None
try:
    c = Cluster(policy=stream_policy(600))
    c.scheduler()
    c.worker("stream-w", uid_base=63300, slots=2, tiers="trusted,internal,sandboxed,untrusted",
             extra=["--images", IMAGES])
    c.worker("quiet-w", uid_base=63400, slots=1, tiers="quiet", extra=["--live-output", "off"])
    keys = {"acme": "ak-" + secrets.token_hex(16), "other": "ok-" + secrets.token_hex(16)}
    port = free_port()
    start_gateway(c, port, key_file(os.path.join(c.dir, "keys"), keys))

    # airlock run, line by line, on each backend that streams
    for tier, backend in (("trusted", "process"), ("internal", "container"),
                          ("sandboxed", "runsc"), ("untrusted", "microvm")):
        got, end, rc, err = lines_as_they_come([CLI, "--redis", c.url, "run", "--tier", tier,
                                                "-c", TICK % 10])
        t.ok(rc == 0 and seen_live(got, 10, end),
             "%s: airlock run prints each line as it comes (first after %.2f s, exit at "
             "%.2f s)" % (backend, got[0][0] if got else -1, end),
             ([(round(a, 2), x) for a, x in got], err))
    env = dict(os.environ, AIRLOCK_TOKEN=keys["acme"])
    got, end, rc, err = lines_as_they_come([CLI, "--gateway", "http://127.0.0.1:%d" % port, "run",
                                            "-c", TICK % 10], env=env)
    t.ok(rc == 0 and seen_live(got, 10, end),
         "through the gateway: airlock run prints each line as it comes",
         ([(round(a, 2), x) for a, x in got], err))
    got, end, rc, err = lines_as_they_come([CLI, "--redis", c.url, "run", "--no-stream", "-c",
                                            TICK % 6])
    t.ok(rc == 0 and len(got) == 6 and got[0][0] > 0.5,
         "--no-stream: the output comes at the end, all at once (first line at %.2f s)"
         % (got[0][0] if got else -1), got)
    got, end, rc, err = lines_as_they_come(
        [CLI, "--redis", c.url, "run", "-c",
         "import sys\nprint('out', flush=True)\nsys.stderr.write('err\\n')\nsys.exit(4)"])
    t.ok(rc == 4 and [x for _, x in got] == [b"out\n"] and err == "err\n",
         "stdout and stderr to their own streams, once each, and the exit code", (got, err))

    # a Redis user that may not XREAD (an ACL from before live output): run still works
    c.rcli("ACL", "SETUSER", "noread", "on", ">pw-noread", "~*", "&*", "+@all", "-xread")
    p = subprocess.run([CLI, "--redis", "unix://%s?user=noread&password=pw-noread" % c.sock,
                        "run", "-c", "print('still here')"], capture_output=True, timeout=60)
    t.ok(p.returncode == 0 and p.stdout == b"still here\n" and b"no live output" in p.stderr,
         "a Redis user without XREAD: airlock run says there is no live output and prints "
         "the result", (p.stdout, p.stderr))

    # the gateway killed and started again while airlock run follows a job through it:
    # the client resumes after the last event it saw, nothing missed, nothing twice
    for via in ("cli", "python"):
        if via == "cli":
            p = subprocess.Popen([CLI, "--gateway", "http://127.0.0.1:%d" % port, "run", "-c",
                                  TICK % 30], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=env, bufsize=0)
        else:
            sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client",
                                            "python"))
            import airlock
            code = TICK % 30
            p = subprocess.Popen([sys.executable, "-c",
                                  "import sys, airlock\n"
                                  "c = airlock.Client(gateway=sys.argv[1], token=sys.argv[2], "
                                  "tier='trusted')\n"
                                  "for ch in c.stream(c.submit(sys.argv[3]), timeout=120):\n"
                                  "    sys.stdout.buffer.write(ch.data); sys.stdout.flush()\n",
                                  "http://127.0.0.1:%d" % port, keys["acme"], code],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                                 env=dict(env, PYTHONPATH=os.path.dirname(airlock.__path__[0])))
        # unbuffered: a buffered readline could take the next line too, and
        # communicate() reads the pipe itself, past that buffer
        first = p.stdout.readline()
        time.sleep(0.5)
        c.signal("gw", signal.SIGKILL)
        c.wait_exit("gw", 10)
        time.sleep(0.7)
        start_gateway(c, port, os.path.join(c.dir, "keys"))
        out, err = p.communicate(timeout=120)
        lines = [first] + out.splitlines(keepends=True)
        t.ok(p.returncode == 0 and lines == [b"tick %d\n" % i for i in range(30)],
             "%s through the gateway: the gateway killed and restarted mid-stream, the output "
             "resumes after the last event seen: every line once, in order" % via,
             (lines, err[-500:]))

    # the SSE endpoint: events while the job runs, then end; resume with Last-Event-ID
    jid = subprocess.run([CLI, "--gateway", "http://127.0.0.1:%d" % port, "submit", "-c",
                          TICK % 10], capture_output=True, text=True, env=env).stdout.strip()
    st, evs = sse(port, keys["acme"], jid)
    outs = [e for e in evs if e[2] == "stdout"]
    t.ok(st == 200 and "".join(e[3]["data"] for e in outs) ==
         "".join("tick %d\n" % i for i in range(10)) and evs[-1][2] == "end" and
         evs[-1][3]["status"] == "ok" and outs[0][0] < evs[-1][0] - 0.6 and len(outs) >= 5,
         "SSE: stdout events as the job prints (%d; the first %.2f s before end), then end "
         "with the status" % (len(outs), evs[-1][0] - outs[0][0] if outs else 0), evs)
    endres = evs[-1][3].get("result", {}) if evs else {}
    t.ok(endres.get("status") == "ok" and endres.get("id") == jid and
         endres.get("stdout") == "".join("tick %d\n" % i for i in range(10)),
         "SSE: the end event carries the whole result (no second request for it)", evs[-1:])
    st, rest = sse(port, keys["acme"], jid, last=evs[3][1])
    t.ok(st == 200 and [e[1] for e in rest] == [e[1] for e in evs[4:]],
         "SSE: Last-Event-ID of the fourth event gives exactly the rest",
         ([e[1] for e in rest], [e[1] for e in evs]))
    st, body = sse(port, keys["acme"], jid, last="../etc")
    t.ok(st == 400 and "Last-Event-ID" in body.get("error", ""),
         "SSE: a malformed Last-Event-ID is 400, naming it", body)
    st, body = sse(port, keys["other"], jid)
    t.ok(st == 404, "SSE: another tenant's job is 404", body)
    h = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    h.request("GET", "/v1/jobs/%s/output" % jid)
    t.ok(h.getresponse().status == 401, "SSE: no key is 401")
    h.close()

    # XREAD: the same entries, resumable
    ent = entries(c, jid)
    kinds = [f.get("t") for _, f in ent]
    kinds = [k.decode() if k else k for k in kinds]
    t.ok(kinds.count("out") == len(outs) and kinds[-1] == "end" and
         [e for e, _ in ent] == [e[1] for e in evs],
         "the stream holds the events' entries, ids alike, end last", ent)
    got = redis.Redis(unix_socket_path=c.sock).xread({"al:out:" + jid: ent[2][0]})
    t.ok(got and [e.decode() for e, _ in got[0][1]] == [e for e, _ in ent[3:]],
         "XREAD after the third entry gives exactly the rest", got)

    # a microVM job writing 3 MiB: the stream carries it all, in order, the same as its result
    big = "import sys, time\nfor i in range(48):\n    sys.stdout.write(('%05d' % i) * 13107 + '\\n')\n" \
          "    sys.stdout.flush()\n    time.sleep(0.02)\n"
    r = c.run_job({"v": 1, "id": "big-%d" % os.getpid(), "tier": "untrusted", "runtime": "python",
                   "limits": {"stdout_bytes": 4 << 20}, "code": big.encode()}, timeout=300)
    chunks = [f for _, f in entries(c, "big-%d" % os.getpid()) if f.get("t") == b"out"]
    streamed = b"".join(f["d"] for f in chunks)
    t.ok(r and r["status"] == "ok" and len(r["stdout"]) == 48 * 65536 and
         streamed == r["stdout"] and len(chunks) > 48,
         "microvm: 3 MiB of output streamed whole and in order (%d chunks), equal to the result"
         % len(chunks), (r and (r["status"], len(r["stdout"])), len(streamed)))

    # bounded: a flood stops at the cap with output_limit; no chunk past the cap
    cap = 200000
    r = c.run_job({"v": 1, "id": "flood-%d" % os.getpid(), "tier": "trusted",
                   "runtime": "python", "limits": {"stdout_bytes": cap},
                   "code": b"import sys\nwhile True: sys.stdout.write('y' * 4096)"}, timeout=120)
    fl = entries(c, "flood-%d" % os.getpid())
    sizes = sum(len(f.get("d", b"")) for _, f in fl if f.get("t") == b"out")
    t.ok(r and r["status"] == "output_limit" and 0 < sizes <= cap and
         fl[-1][1].get("s") == b"output_limit" and
         all(len(f.get("d", b"")) <= 16384 for _, f in fl),
         "a flood: output_limit, %d bytes streamed for a cap of %d, chunks of 16 KiB at most, "
         "its end says output_limit" % (sizes, cap), (r and r["status"], len(fl)))

    # --live-output off: only the end entry
    r = c.run_job({"v": 1, "id": "quiet-%d" % os.getpid(), "tier": "quiet", "runtime": "python",
                   "code": b"print('not streamed')"}, timeout=60)
    q = entries(c, "quiet-%d" % os.getpid())
    t.ok(r and r["stdout"] == b"not streamed\n" and [f.get("t") for _, f in q] == [b"end"],
         "a worker with --live-output off: the result has the output, the stream only end", q)

    # a draining worker gives the job back: restart, then the next worker's run
    c.worker("hand-w0", uid_base=63500, slots=1, tiers="handover",
             extra=["--drain-grace-ms", "200"])
    p = subprocess.Popen([CLI, "--redis", c.url, "run", "--tier", "handover", "-c",
                          TICK % 40], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         bufsize=0)
    first = p.stdout.readline()
    c.worker("hand-w1", uid_base=63600, slots=1, tiers="handover")
    c.signal("hand-w0", signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    lines = [first] + out.splitlines(keepends=True)
    t.ok(p.returncode == 0 and b"runs again; its output starts over" in err and
         lines[-1] == b"tick 39\n" and lines.count(b"tick 0\n") == 2,
         "a job given back by a draining worker: a restart entry, airlock run says the output "
         "starts over, and the next run's output follows in full", (lines[:5], lines[-2:], err))
    c.wait_exit("hand-w0", 30)

    # it expires with the result
    c2 = Cluster(policy=stream_policy(3))
    try:
        c2.scheduler()
        c2.worker("ttl-w", uid_base=63700, slots=1, tiers="trusted")
        r = c2.run_job({"v": 1, "id": "ttl-%d" % os.getpid(), "tier": "trusted",
                        "runtime": "python", "code": b"print('short-lived')"}, timeout=60)
        k = "ttl-%d" % os.getpid()
        pt_out = int(c2.rcli("PTTL", "al:out:" + k))
        pt_res = int(c2.rcli("PTTL", "al:res:" + k))
        time.sleep(3.5)
        gone = c2.rcli("EXISTS", "al:out:" + k, "al:res:" + k).strip()
        t.ok(r and 0 < pt_out <= 3000 and abs(pt_out - pt_res) < 500 and gone == "0",
             "the stream takes the result's TTL (%d ms and %d ms) and expires with it"
             % (pt_out, pt_res), gone)
    finally:
        c2.close()
finally:
    if c:
        c.close()
sys.exit(t.done())
