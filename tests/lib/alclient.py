"""A client for Airlock written from proto/PROTOCOL.md alone (python3-redis,
python3-msgpack): the three client scripts are read out of the document
itself, so that a doc that drifts from the daemons fails the tests that use
this client. Not the C library."""
import os
import re
import time
import uuid

import msgpack
import redis

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = os.path.join(ROOT, "proto", "PROTOCOL.md")


def doc_scripts(path=DOC):
    """{name: lua text} of the blocks under <!-- script: NAME --> in the doc."""
    with open(path) as f:
        text = f.read()
    return {m.group(1): m.group(2) for m in
            re.finditer(r"<!-- script: (\w+) -->\n```lua\n(.*?)\n```", text, re.S)}


class Client:
    def __init__(self, url=None, unix=None, username=None, password=None, db=0):
        if unix:
            self.r = redis.Redis(unix_socket_path=unix, username=username, password=password, db=db)
        else:
            self.r = redis.Redis.from_url(url)
        s = doc_scripts()
        self.submit_script = self.r.register_script(s["submit"])
        self.rearm_script = self.r.register_script(s["rearm"])
        self.cancel_script = self.r.register_script(s["cancel"])

    def submit(self, job, idem_key=None):
        """Returns (code, id): 1 accepted, 0 same idempotency key, -1 id taken."""
        job = dict(job)
        job.setdefault("v", 1)
        job.setdefault("id", uuid.uuid4().hex)
        job.setdefault("submitted_ms", int(time.time() * 1000))
        tenant = job.get("tenant", "default")
        if idem_key:
            job["idempotency_key"] = idem_key
        keys = ["al:job:" + job["id"], "al:intake", "al:idem:%s/%s" % (tenant, idem_key or "-")]
        args = [job["id"], msgpack.packb(job, use_bin_type=True), job["submitted_ms"], 86400,
                1 if idem_key else 0, job["tier"], tenant]
        (code, jid), = self.submit_script(keys=keys, args=args)
        return code, jid.decode()

    def result(self, jid):
        raw = self.r.get("al:res:" + jid)
        return msgpack.unpackb(raw, raw=False) if raw else None

    def wait(self, jid, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            res = self.result(jid)
            if res:
                return res
            if self.r.blpop(["al:done:" + jid], timeout=1):
                self.rearm_script(keys=["al:done:" + jid, "al:res:" + jid])
        return None

    def status(self, jid):
        st = self.r.hget("al:job:" + jid, "state")
        return st.decode() if st else None

    def cancel(self, jid, ttl_ms=3600000):
        res = {"v": 1, "id": jid, "attempt": 0, "status": "cancelled", "exit_code": None,
               "signal": 0, "stdout": b"", "stderr": b"", "stdout_truncated": False,
               "stderr_truncated": False, "files": [], "wall_ms": 0, "cpu_ms": 0,
               "peak_memory_bytes": 0, "backend": None, "worker": None, "queued_ms": 0,
               "started_ms": 0, "finished_ms": int(time.time() * 1000),
               "error": "cancelled by a client before it started", "info": {}}
        return self.cancel_script(keys=["al:job:" + jid, "al:res:" + jid, "al:done:" + jid,
                                        "al:out:" + jid],
                                  args=[jid, msgpack.packb(res, use_bin_type=True), ttl_ms])
