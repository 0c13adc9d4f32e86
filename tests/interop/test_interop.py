#!/usr/bin/python3
"""Interop test: a job encoded by Python following proto/PROTOCOL.md is decoded
by the C code, and a result encoded by C is decoded by Python. Uses Debian's
python3-msgpack only. Prints TAP lines."""
import json
import os
import subprocess
import sys

import msgpack

TOOL = os.path.join(os.environ.get("BUILD", "build"), "tests", "proto_tool")
n = 0
failed = 0


def ok(cond, name, detail=""):
    global n, failed
    n += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n, name))
    if not cond:
        failed += 1
        print("#   " + str(detail).replace("\n", "\n#   "))


def tool(cmd, data):
    p = subprocess.run([TOOL, cmd], input=data, capture_output=True, timeout=30)
    return p.returncode, p.stdout


# A job with every field, written from PROTOCOL.md alone.
job = {
    "v": 1,
    "id": "py-job-1",
    "tenant": "acme",
    "tier": "untrusted",
    "runtime": "python",
    "code": b"import sys\nprint(sys.argv[1:])\n",
    "argv": ["a", "b c"],
    "stdin": b"\x00\x01binary stdin",
    "files": [
        {"path": "data/in.txt", "data": "hello\n", "mode": 0o600},
        {"path": "blob.bin", "data": b"\xff\x00\xfe"},
    ],
    "env": {"LANG": "C.UTF-8"},
    "collect": ["out.txt"],
    "limits": {"wall_ms": 2000, "cpu_ms": 1000, "memory_bytes": 64 << 20, "pids": 32,
               "stdout_bytes": 65536, "stderr_bytes": 65536, "disk_bytes": 1 << 20},
    "network": "none",
    "priority": 8,
    "deadline_ms": 1900000000000,
    "max_attempts": 2,
    "idempotency_key": "idem-1",
    "callback_url": "http://127.0.0.1:9/hook",
    "labels": {"course": "cs101"},
    "submitted_ms": 1800000000000,
}
rc, out = tool("decode-job", msgpack.packb(job, use_bin_type=True))
ok(rc == 0, "C decodes a full job encoded by Python", out)
d = json.loads(out) if rc == 0 else {}
ok(d.get("id") == "py-job-1" and d.get("tenant") == "acme" and d.get("tier") == "untrusted",
   "id, tenant, tier", d)
ok(d.get("runtime") == "python" and d.get("code") == job["code"].decode(), "runtime and code", d)
ok(d.get("argv") == ["a", "b c"], "argv", d)
ok(d.get("stdin_base64") == "AAFiaW5hcnkgc3RkaW4=", "binary stdin (NUL byte) kept exactly", d)
files = d.get("files", [])
ok(len(files) == 2 and files[0]["path"] == "data/in.txt" and files[0]["mode"] == 0o600
   and files[0]["data"] == "hello\n" and files[1]["mode"] == 0o644
   and files[1].get("data_base64") == "/wD+",
   "files: str or bin data, explicit and default mode", files)
ok(d.get("limits") == job["limits"], "every limit", d.get("limits"))
ok(d.get("env") == {"LANG": "C.UTF-8"} and d.get("labels") == {"course": "cs101"}
   and d.get("collect") == ["out.txt"], "env, labels, collect", d)
ok(d.get("priority") == 8 and d.get("max_attempts") == 2 and d.get("deadline_ms") == 1900000000000
   and d.get("idempotency_key") == "idem-1" and d.get("callback_url") == job["callback_url"]
   and d.get("network") == "none" and d.get("submitted_ms") == 1800000000000,
   "scheduling fields", d)

# The smallest job PROTOCOL.md allows, with defaults filled.
rc, out = tool("decode-job", msgpack.packb({"v": 1, "id": "m", "tier": "trusted",
                                            "argv": ["/bin/true"]}, use_bin_type=True))
d = json.loads(out) if rc == 0 else {}
ok(rc == 0 and d.get("tenant") == "default" and d.get("priority") == 5
   and d.get("network") == "none" and d.get("runtime") == "argv",
   "minimal argv job decodes with documented defaults", out)

# Errors name the field, as PROTOCOL.md says.
for name, bad, needle in [
    ("unknown field", dict(job, colour="red"), 'unknown field "colour"'),
    ("zero limit", dict(job, limits={"wall_ms": 0}), "limits.wall_ms"),
    ("absolute path", dict(job, files=[{"path": "/etc/x", "data": b""}]), "absolute path"),
    ("protocol version 2", dict(job, v=2), "unknown protocol version 2"),
]:
    rc, out = tool("decode-job", msgpack.packb(bad, use_bin_type=True))
    ok(rc == 1 and needle in out.decode(), "C rejects %s with a named error" % name, out)

# A result encoded by C, decoded by Python.
res = {
    "v": 1, "id": "py-job-1", "attempt": 1, "status": "nonzero_exit", "exit_code": 3,
    "signal": 0, "stdout": "out\n", "stdout_truncated": False,
    "stderr_base64": "/wA=", "stderr_truncated": True,
    "files": [{"path": "out.txt", "data": "42", "truncated": False}],
    "wall_ms": 12, "cpu_ms": 10, "peak_memory_bytes": 4096, "backend": "process",
    "worker": "w1", "queued_ms": 1, "started_ms": 2, "finished_ms": 3, "error": None,
    "info": {"image": "sha256:abc"},
}
rc, out = tool("encode-result", json.dumps(res).encode())
ok(rc == 0, "C encodes a result", out)
r = msgpack.unpackb(out, raw=False) if rc == 0 else {}
ok(r.get("status") == "nonzero_exit" and r.get("exit_code") == 3 and r.get("attempt") == 1,
   "Python reads status, exit code, attempt", r)
ok(r.get("stdout") == b"out\n" and r.get("stderr") == b"\xff\x00" and r.get("stderr_truncated") is True,
   "stdout/stderr arrive as bin with flags", r)
ok(r.get("files") == [{"path": "out.txt", "data": b"42", "truncated": False}], "collected files", r)
ok(r.get("error") is None and r.get("backend") == "process" and r.get("info") == {"image": "sha256:abc"}
   and r.get("wall_ms") == 12 and r.get("finished_ms") == 3, "error nil, backend, info, timings", r)
ok(set(r) == {"v", "id", "attempt", "status", "exit_code", "signal", "stdout", "stdout_truncated",
              "stderr", "stderr_truncated", "files", "wall_ms", "cpu_ms", "peak_memory_bytes",
              "max_rss_bytes",
              "backend", "worker", "queued_ms", "started_ms", "finished_ms", "error", "info"},
   "the result has exactly the fields PROTOCOL.md lists", sorted(r))

print("1..%d" % n)
sys.exit(1 if failed else 0)
