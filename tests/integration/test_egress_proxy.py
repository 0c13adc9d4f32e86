#!/usr/bin/python3
"""The worker's egress proxy on its own (build/tests/egress_tool: worker/proxy.c
with its transcript), against servers in a network namespace this test makes
(the hardening issue, findings 6 and 7):
  - 6: a CONNECT whose host is bytes that are not UTF-8 is refused, and the
    transcript shows them escaped (\\xNN), so the result stays decodable;
  - 7: an absolute-URI request reaches the allowed server with the Host the
    proxy checked, whatever Host the job sent, and without the forwarding and
    hop-by-hop headers the job sent;
  - 2: through the real queue, on a worker with a low descriptor limit: a job
    of a tier with the default caps gets at most 64 tunnels at once (403
    after), a job of a tier that allows 400 gets only the worker's descriptor
    budget for tunnels (503 after), and another job started meanwhile runs."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD, Tap, exchange, need_root  # noqa: E402
from cluster import WORKER, Cluster  # noqa: E402
from policies import policy, tier_def  # noqa: E402
from testinet import TestInternet  # noqa: E402

t = Tap()
need_root("network namespaces")

ECHO = ("import http.server, sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        body = ''.join('%s: %s\\n' % kv for kv in self.headers.items()).encode()\n"
        "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
        "        self.end_headers(); self.wfile.write(body)\n"
        "    def log_message(self, *a): pass\n"
        "http.server.ThreadingHTTPServer((sys.argv[1], 8001), H).serve_forever()\n")

www = tempfile.mkdtemp(prefix="airlock-egp-", dir="/var/tmp")
inet = TestInternet("egp", 233, www)
echo = tool = c = None


ask = exchange


try:
    inet.start()
    echo = subprocess.Popen(["ip", "netns", "exec", inet.ns, "/usr/bin/python3", "-c", ECHO,
                             inet.srv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection((inet.srv, 8001), 1).close()
            break
        except OSError:
            time.sleep(0.1)
    portf = os.path.join(www, "port")
    tool = subprocess.Popen([os.path.join(BUILD, "tests", "egress_tool"), portf, "0", "0",
                             "%s.0/24:8001" % inet.net], stdout=subprocess.PIPE)
    for _ in range(100):
        if os.path.exists(portf) and open(portf).read().strip():
            break
        time.sleep(0.05)
    proxy = ("127.0.0.1", int(open(portf).read()))

    # ---- 7 ----
    got = ask(proxy, ("GET http://%s:8001/ HTTP/1.1\r\nHost: admin.internal.example\r\n"
                      "X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Host: admin.internal.example\r\n"
                      "Forwarded: for=10.0.0.1\r\nVia: 1.1 evil\r\nX-Real-IP: 10.0.0.1\r\n"
                      "X-Job: kept\r\n\r\n" % inet.srv).encode())
    head, _, body = got.partition(b"\r\n\r\n")
    seen = {ln.split(b": ", 1)[0].lower(): ln.split(b": ", 1)[1] for ln in body.splitlines()
            if b": " in ln}
    t.ok(head.startswith(b"HTTP/1.0 200") and seen.get(b"host") == ("%s:8001" % inet.srv).encode(),
         "7: the server is told the Host the proxy checked, not the job's", got[:600])
    t.ok(not any(k in seen for k in (b"x-forwarded-for", b"x-forwarded-host", b"forwarded",
                                     b"via", b"x-real-ip")) and seen.get(b"x-job") == b"kept",
         "7: forwarding and hop-by-hop headers the job sent are dropped; its own pass", seen)

    # ---- 6 ----
    got = ask(proxy, b"CONNECT \xff\xfe.example:8001 HTTP/1.1\r\n\r\n")
    t.ok(got.startswith(b"HTTP/1.1 403") or got.startswith(b"HTTP/1.0 403") or
         got.startswith(b"HTTP/1.1 400"), "6: a CONNECT to a host of non-UTF-8 bytes is refused",
         got[:200])
    got = ask(proxy, b"GET http://\xc3\x28bad/ HTTP/1.1\r\n\r\n")
    t.ok(b" 200 " not in got[:20], "6: so is an absolute URI with one", got[:200])
    tool.send_signal(signal.SIGTERM)
    out, _ = tool.communicate(timeout=20)
    tool = None
    eg = json.loads(out)
    hosts = [e["host"] for e in eg]
    t.ok("\\xff\\xfe.example" in hosts and "\\xc3(bad" in hosts and
         all(h.isascii() for h in hosts),
         "6: the transcript shows the bytes escaped (\\xNN): the result stays UTF-8", hosts)

    # ---- 2 ----
    allow = ["%s.0/24:8001" % inet.net]
    c = Cluster(policy=policy(tier_def("trusted", "process"),
                              tier_def("capped", "process", egress={"allow": allow}),
                              tier_def("wide", "process",
                                       egress={"allow": allow, "max_open": 400,
                                               "max_connections": 2000})))
    c.scheduler()
    c._start("egp-w", ["prlimit", "--nofile=1400:1400", WORKER, "--redis", c.url, "--policy",
                       c.policy, "--worker-id", "egp-w", "--uid-base", "63100", "--slots", "3",
                       "--tiers", "trusted,capped,wide", "--state-dir",
                       os.path.join(c.dir, "state"), "--heartbeat-ms", "300"])
    flood = ("import os, socket, sys, time\n"
             "host, port = os.environ['HTTP_PROXY'].split('//')[1].rsplit(':', 1)\n"
             "socks, codes = [], {}\n"
             "for i in range(int(sys.argv[1])):\n"
             "    try:\n"
             "        s = socket.create_connection((host, int(port)), 5)\n"
             "        s.sendall(b'CONNECT %s:8001 HTTP/1.1\\r\\n\\r\\n')\n"
             "        code = s.recv(200).split(b' ')[1].decode()\n"
             "        socks.append(s)\n"
             "    except (OSError, IndexError) as e:\n"
             "        code = 'error'\n"
             "    codes[code] = codes.get(code, 0) + 1\n"
             "print(sorted(codes.items()), flush=True)\n"
             "time.sleep(float(sys.argv[2]))\n" % inet.srv)

    def flood_job(tier, n, hold):
        return {"v": 1, "id": "egp-%s-%s" % (tier, os.urandom(4).hex()), "tier": tier,
                "runtime": "python", "code": flood, "argv": [str(n), str(hold)],
                "network": "egress", "limits": {"wall_ms": 60000, "pids": 64}}

    r = c.run_job(flood_job("capped", 100, 0))
    out = (r or {}).get("stdout", b"").decode()
    eg = (r or {}).get("egress", [])
    t.ok(r and r["status"] == "ok" and "('200', 64)" in out and "('403', 36)" in out and
         any("max_open of 64" in e["why"] for e in eg),
         "2: a tier with the default caps: 64 tunnels at once, the next 36 refused (403, "
         "saying why)", (out, r and r.get("error")))
    big = flood_job("wide", 230, 12)
    subprocess.run(["redis-cli", "-s", c.sock, "-x", "XADD", "al:intake", "*", "job"],
                   input=__import__("msgpack").packb(big, use_bin_type=True),
                   capture_output=True)
    time.sleep(6)  # the flood holds its tunnels now
    victim = c.run_job({"v": 1, "id": "egp-victim-" + os.urandom(4).hex(), "tier": "trusted",
                        "runtime": "python", "code": "print('victim ran')"}, timeout=60)
    t.ok(victim and victim["status"] == "ok" and victim["stdout"] == b"victim ran\n",
         "2: another job started while one holds every tunnel it can get runs ok",
         victim and (victim["status"], victim.get("error")))
    c.wait_done(big["id"], 60)
    import msgpack
    r = msgpack.unpackb(c.rcli("GET", "al:res:" + big["id"], raw=True), raw=False)
    out = r.get("stdout", b"").decode()
    log = c.log("egp-w")
    m = [ln for ln in log.splitlines() if "egress_fd_budget" in ln]
    cap = int(m[0].split("tunnels_max=")[1].split()[0]) if m else -1
    t.ok(r["status"] == "ok" and "('200', %d)" % cap in out and "('503', %d)" % (230 - cap) in out
         and any("descriptors for tunnels" in e["why"] for e in r.get("egress", [])),
         "2: a tier that allows 400 at once gets the worker's budget (%d tunnels under "
         "nofile 1400), then 503 saying why" % cap, (out, m))
    t.ok("Too many open files" not in log, "2: the worker never ran out of descriptors",
         [ln for ln in log.splitlines() if "Too many" in ln][:3])
finally:
    if c:
        c.close()
    for p in (tool, echo):
        if p:
            p.kill()
            p.wait()
    inet.stop()
    subprocess.run(["rm", "-rf", www])
sys.exit(t.done())
