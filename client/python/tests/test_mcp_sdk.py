#!/usr/bin/python3
"""airlock-mcp against the official MCP TypeScript SDK's client
(@modelcontextprotocol/sdk from npm, which deploy/install-deps.sh installs
in $AIRLOCK_NODE_DEPS, default /var/lib/airlock/node-test): the SDK starts
the server over stdio and negotiates, lists the tools (with their files and
collect arguments and output schema, which the SDK validates every answer
against), calls them: a value, a saved chart as image content, a file back
as a resource, a bad argument as a tool error, live output as progress
notifications, a ping answered during a long call, and an AbortSignal that
cancels the call (the SDK sends notifications/cancelled) and its Airlock
job, through a real gateway, scheduler and worker."""
import json
import os
import re
import secrets
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from altest import Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from gwclient import free_port, key_file, start_gateway  # noqa: E402

sys.path.insert(0, os.path.join(HERE, ".."))
import airlock  # noqa: E402

t = Tap()
need_root("the process backend")
DEPS = os.environ.get("AIRLOCK_NODE_DEPS", "/var/lib/airlock/node-test")
SDK = os.path.join(DEPS, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
if not os.path.exists(SDK):
    t.ok(False, "the MCP TypeScript SDK is installed in %s (deploy/install-deps.sh)" % DEPS)
    sys.exit(t.done())

POLICY = """\
result_ttl_s: 600
lease_ms: 3000
tiers:
  trusted:
    backend: process
    max_attempts: 1
    defaults: {wall_ms: 20000, memory_bytes: 268435456, pids: 64}
"""

c = Cluster(policy=POLICY)
try:
    c.scheduler()
    c.worker("sdk-w", uid_base=63200, slots=2, tiers="trusted")
    key = "k-" + secrets.token_hex(16)
    port = free_port()
    start_gateway(c, port, key_file(os.path.join(c.dir, "keys"), {"agent": key}))
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."), AIRLOCK_TOKEN=key,
               AIRLOCK_NODE_DEPS=DEPS)
    p = subprocess.run(["node", os.path.join(ROOT, "tests", "interop", "mcp_sdk_client.cjs"),
                        sys.executable, "-m", "airlock.mcp", "--gateway",
                        "http://127.0.0.1:%d" % port, "--tier", "trusted"],
                       capture_output=True, text=True, env=env, timeout=300)
    seen = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else {}
    version = json.load(open(SDK))["version"]
    tools = {x["name"]: x for x in seen.get("tools", [])}
    t.ok(seen.get("server", {}).get("name") == "airlock-mcp" and
         tools.get("run_python", {}).get("props") == ["code", "collect", "files"] and
         tools.get("run_shell", {}).get("props") == ["collect", "command", "files"] and
         all(x["output"] for x in tools.values()),
         "the SDK (%s) connects over stdio, and lists run_python and run_shell with files, "
         "collect and an output schema" % version, p.stdout + p.stderr[-2000:])
    t.ok(seen.get("value") == {"isError": False, "stdout": "42\n"},
         "a call's value, its structuredContent valid against the tool's output schema",
         seen.get("value"))
    t.ok(seen.get("image") == [{"mime": "image/png", "bytes": 40}] and
         seen.get("resource") == [{"uri": "file:///work/out.txt", "text": "5"}],
         "a saved chart comes back as image content, a collected file as a resource",
         (seen.get("image"), seen.get("resource")))
    t.ok(seen.get("bad", {}).get("isError") is True and
         "code must be a string" in seen.get("bad", {}).get("text", ""),
         "a bad argument: a tool error the model can read", seen.get("bad"))
    pr = seen.get("progress", {})
    t.ok(pr.get("count", 0) >= 2 and pr.get("last", {}).get("progress") == 21 and
         "step 2" in pr.get("stdout", ""),
         "onprogress gets the call's live output as progress notifications (%d)" %
         pr.get("count", 0), pr)
    log = p.stderr
    jid = (re.findall(r"cancelling job (\S+)", log) or [""])[0]
    jc = airlock.Client(redis=c.url)
    done = jid and c.wait_for(lambda: jc.status(jid)[0] == "done", timeout=10)
    t.ok(seen.get("ping_ms", 9999) < 1000 and "error" in seen.get("cancel", {}) and
         seen["cancel"]["ms"] < 5000 and done and jc.status(jid)[1].status == "cancelled",
         "a ping answered during a 30 s call (%s ms); the SDK's AbortSignal cancels the call "
         "and its Airlock job" % seen.get("ping_ms"), (seen.get("cancel"), jid, log[-600:]))
finally:
    c.close()
sys.exit(t.done())
