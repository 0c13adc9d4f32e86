#!/usr/bin/python3
"""The examples, run as a user would against a real stack (redis-server,
scheduler, a worker serving the process, container and microVM tiers):
examples/agent_tiers.py, the README's "one tool, interchangeable backends"
example, exits 0 only when every hostile program was contained on every
tier, and prints one table row per tier with its backend and its print(1)
latency; examples/agent_loop.py, an agent's conversation in one session
per tier on the datascience image (the untrusted one with
deploy/policy.example.yaml as shipped), exits 0 only when every answer gave
the model what it needed, and prints each call's latency."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402

t = Tap()
need_root("the sandboxes")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
D = "defaults: {memory_bytes: 268435456, pids: 64, disk_bytes: 67108864}"
DS = "defaults: {memory_bytes: 536870912, pids: 64, disk_bytes: 67108864, wall_ms: 120000}"
S = "sessions: {max_per_tenant: 2, idle_s: 300, max_life_s: 900}"
POLICY = """\
result_ttl_s: 600
lease_ms: 30000
tiers:
  trusted: {backend: process, %s}
  internal: {backend: container, %s}
  untrusted: {backend: microvm, image: python, %s}
  ds-trusted: {backend: process, images: [datascience], image: datascience, %s, %s}
  ds-internal: {backend: container, images: [datascience], image: datascience, %s, %s}
""" % ((D, D, D) + (DS, S) * 2)

c = Cluster(policy=POLICY)
try:
    c.scheduler()
    c.worker("ex-w", uid_base=63800, slots=2,
             tiers="trusted,internal,untrusted,ds-trusted,ds-internal",
             extra=["--images", IMAGES])
    p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "agent_tiers.py"),
                        "--redis", c.url, "--latency-runs", "2", "--timeout", "8"], capture_output=True, text=True,
                       timeout=900)
    rows = {m.group(1): m.group(0) for m in
            re.finditer(r"^\| (trusted|internal|untrusted) \| (\w+) \|.*$", p.stdout, re.M)}
    t.ok(p.returncode == 0 and set(rows) == {"trusted", "internal", "untrusted"} and
         "NOT CONTAINED" not in p.stdout,
         "every hostile program (cpu, memory, processes, disk, secrets, network) contained on "
         "the process, container and microVM tiers", p.stdout + p.stderr[-1500:])
    t.ok(all(re.search(r"\| %s \|" % b, rows.get(tier, "")) and re.search(r"\| \d+ ms \|$",
                                                                          rows.get(tier, ""))
             for tier, b in (("trusted", "process"), ("internal", "container"),
                             ("untrusted", "microvm"))),
         "each row names its backend and its print(1) latency", rows)
    # examples/agent_loop.py: a conversation's snippets in one session per tier
    p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "agent_loop.py"),
                        "--redis", c.url, "--tiers", "ds-trusted,ds-internal"],
                       capture_output=True, text=True, timeout=900)
    rows = re.findall(r"^\| (ds-\w+) \| (.*?) \| (\w+) \| (\d+) ms \|", p.stdout, re.M)
    t.ok(p.returncode == 0 and len(rows) == 18 and "NOT AS EXPECTED" not in p.stdout and
         "every tier gave the model what it needed" in p.stdout,
         "examples/agent_loop.py on the process and container tiers (datascience image, one "
         "session each): a CSV into pandas, a chart back as a PNG, scipy.optimize, "
         "scikit-learn and sympy in the same interpreter, an error with its traceback, a "
         "flood cut for the model, state kept; each call's latency printed",
         p.stdout + p.stderr[-1500:])
finally:
    c.close()

# The same conversation on the untrusted tier of deploy/policy.example.yaml as
# shipped (a microVM; its sessions' 512 MiB): issue 58's data-science calls
# in one untrusted session (at 128 MiB the 7th, import sympy, ended it)
c = Cluster(policy=open(os.path.join(ROOT, "deploy", "policy.example.yaml")).read())
try:
    c.scheduler()
    c.worker("ex-u", uid_base=63900, slots=1, tiers="untrusted", extra=["--images", IMAGES])
    p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "agent_loop.py"),
                        "--redis", c.url, "--tiers", "untrusted"],
                       capture_output=True, text=True, timeout=900)
    rows = re.findall(r"^\| (untrusted) \| (.*?) \| (\w+) \| (\d+) ms \|", p.stdout, re.M)
    t.ok(p.returncode == 0 and len(rows) == 9 and "NOT AS EXPECTED" not in p.stdout,
         "examples/agent_loop.py on the example policy's untrusted tier (a microVM session on "
         "the datascience image): pandas, a chart, scipy.optimize, scikit-learn and sympy in "
         "one interpreter, all as expected (%s)" % ", ".join("%s %s ms" % (r[1].split()[0], r[3])
                                                            for r in rows),
         p.stdout + p.stderr[-1500:])
finally:
    c.close()
sys.exit(t.done())
