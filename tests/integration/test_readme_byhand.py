#!/usr/bin/python3
"""The README's by-hand block, extracted from README.md and run as written
(bash, as root), after what the block above it leaves: the example policy
at /etc/airlock/policy.yaml, the ACL file from deploy/redis-acl.sh at
/etc/redis/airlock.acl, a key in /etc/airlock/gateway.keys and the four
passwords in the environment. It runs in a mount namespace of its own with
/etc/airlock, /etc/redis, /var/lib/airlock/redis and /var/lib/airlock/state
on a temporary directory, so nothing of this host's is read or left there;
its Redis socket and pid file (/run/airlock) are removed after. Then a job
through the gateway it started, on the process and container tiers, and
the scheduler's /healthz (the issue: a `\\ # comment` ended the
continuation, the state dir, worker id and ports were left out, there was
no Redis line)."""
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import BUILD, Tap, need_root  # noqa: E402
from gwclient import hashed  # noqa: E402

t = Tap()
need_root("the sandboxes")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
readme = open(os.path.join(ROOT, "README.md")).read()
m = re.search(r"^By hand, the same daemons.*?^```sh\n(.*?)^```", readme, re.M | re.S)
block = m.group(1) if m else ""
t.ok(block and "\\ #" not in block and "--state-dir" in block and "--worker-id" in block and
     "--listen" in block and "redis-server" in block and "appendonly yes" in block and
     "aclfile" in block and "--stream-node-max-bytes 512" in block and
     "--hash-max-listpack-value 4096" in block,
     "the block: no comment after a continuation, a state dir, a worker id, both ports, "
     "a redis-server line with AOF, a socket, the ACL file, small stream nodes and "
     "listpack records (docs/scale.md)", block)
busy = []
for port in (9464, 8088):
    import socket
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        busy.append(port)
    s.close()
if busy or os.path.exists("/run/airlock/redis.sock"):
    t.ok(False, "ports 9464 and 8088 and /run/airlock/redis.sock are free for the block",
         (busy, os.path.exists("/run/airlock/redis.sock")))
    sys.exit(t.done())

tmp = tempfile.mkdtemp(prefix="airlock-byhand-", dir="/var/tmp")
made = [d for d in ("/etc/airlock", "/etc/redis", "/var/lib/airlock/redis",
                    "/var/lib/airlock/state") if not os.path.isdir(d)]
for d in made:
    os.makedirs(d)
pw = {v: secrets.token_hex(12) for v in ("AIRLOCK_GATEWAY_PASSWORD",
                                         "AIRLOCK_SCHEDULER_PASSWORD",
                                         "AIRLOCK_WORKER_PASSWORD",
                                         "AIRLOCK_OPERATOR_PASSWORD")}
key = "byhand-" + secrets.token_hex(12)
for sub in ("etc-airlock", "etc-redis", "redis", "state"):
    os.makedirs(os.path.join(tmp, sub))
shutil.copy(os.path.join(ROOT, "deploy", "policy.example.yaml"),
            os.path.join(tmp, "etc-airlock", "policy.yaml"))
with open(os.path.join(tmp, "etc-airlock", "gateway.keys"), "w") as f:
    f.write("acme %s\n" % hashed(key))
acl = subprocess.run(["bash", os.path.join(ROOT, "deploy", "redis-acl.sh")],
                     env=dict(os.environ, **pw), capture_output=True, text=True)
with open(os.path.join(tmp, "etc-redis", "airlock.acl"), "w") as f:
    f.write(acl.stdout)
with open(os.path.join(tmp, "block.sh"), "w") as f:
    f.write(block)
# the namespace's script: the mounts, the block, a job per tier, then the
# daemons stopped by PID (the block's background jobs and Redis's pid file)
script = r"""
set -u
mount --make-rprivate /
mount --bind {tmp}/etc-airlock /etc/airlock
mount --bind {tmp}/etc-redis /etc/redis
mount --bind {tmp}/redis /var/lib/airlock/redis
mount --bind {tmp}/state /var/lib/airlock/state
export PATH={build}:$PATH
source {tmp}/block.sh
# both daemons waited for: the scheduler, started first, can still bind
# after the gateway on a loaded host (CI saw its one curl refused, rc=7)
for i in $(seq 100); do curl -sf http://127.0.0.1:8088/healthz >/dev/null && break; sleep 0.1; done
for i in $(seq 100); do
    curl -sf http://127.0.0.1:9464/healthz > {tmp}/sched-health; rc=$?
    [ $rc = 0 ] && break; sleep 0.1
done
echo "rc=$rc" >> {tmp}/sched-health
for c in stats "dlq list" "vm list" "run -c print(6*7)"; do
    airlock $c > {tmp}/op-"${{c%% *}}" 2>&1; echo "rc=$?" >> {tmp}/op-"${{c%% *}}"
done
for tier in trusted internal; do
    AIRLOCK_TOKEN={key} airlock --gateway http://127.0.0.1:8088 run --tier $tier \
        -c 'import os; print(6*7, os.getuid() != 0)' > {tmp}/out-$tier 2>&1
    echo "rc=$?" >> {tmp}/out-$tier
done
ls -R /var/lib/airlock/redis > {tmp}/redis-dir 2>&1
for p in $(jobs -p); do kill -TERM $p; done
wait
kill -TERM $(cat /run/airlock/redis.pid)
for i in $(seq 50); do [ -e /run/airlock/redis.pid ] || break; sleep 0.1; done
""".format(tmp=tmp, build=BUILD, key=key)
try:
    p = subprocess.run(["unshare", "--mount", "bash", "-c", script], env=dict(os.environ, **pw),
                       capture_output=True, text=True, timeout=600)

    def read(name):
        try:
            return open(os.path.join(tmp, name)).read()
        except OSError:
            return ""

    for tier in ("trusted", "internal"):
        out = read("out-" + tier)
        t.ok(out == "42 True\nrc=0\n",
             "the block's stack runs a job on %s through its gateway (uid not root)" % tier,
             (out, p.stdout[-800:], p.stderr[-1500:]))
    ops = {c: read("op-" + c) for c in ("stats", "dlq", "vm", "run")}
    t.ok(all(o.endswith("rc=0\n") for o in ops.values()) and ops["run"] == "42\nrc=0\n" and
         "NOAUTH" not in "".join(ops.values()) and "NOPERM" not in "".join(ops.values()),
         "the operator's commands (stats, dlq list, vm list) and a job over Redis, as the "
         "block's airlock-operator ACL user", (ops, p.stderr[-800:]))
    t.ok(read("sched-health").endswith("rc=0\n"),
         "the scheduler's /healthz on the block's --listen",
         (read("sched-health"), p.stderr[-1500:]))
    t.ok(re.search(r"appendonly\.aof\.\d+\.incr\.aof", read("redis-dir")),
         "its Redis keeps an AOF in /var/lib/airlock/redis", read("redis-dir"))
finally:
    for f in ("/run/airlock/redis.sock", "/run/airlock/redis.pid"):
        if os.path.exists(f):
            os.unlink(f)
    for d in reversed(made):
        try:
            os.rmdir(d)
        except OSError:
            pass
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(t.done())
