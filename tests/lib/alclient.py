"""A client for Airlock written from proto/PROTOCOL.md alone (python3-redis,
python3-msgpack): the client scripts are read out of the document itself, so that a doc that drifts from the daemons fails the tests that use
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
        self.lookup_sha = self.r.script_load(s["lookup"])
        self.await_sha = self.r.script_load(s["await"])
        self.session_call_script = self.r.register_script(s["session_call"])

    def submit(self, job, idem_key=None):
        """Returns (code, id): 1 accepted, 0 same idempotency key, -1 id taken."""
        job = dict(job)
        job.setdefault("v", 1)
        job.setdefault("id", uuid.uuid4().hex)
        job.setdefault("submitted_ms", int(time.time() * 1000))
        tenant = job.get("tenant", "default")
        if idem_key:
            job["idempotency_key"] = idem_key
        keys = ["al:sub:" + job["id"], "al:idem:%s/%s" % (tenant, idem_key or "-")]
        args = [job["id"], msgpack.packb(job, use_bin_type=True), job["submitted_ms"], 86400,
                1 if idem_key else 0, job["tier"], tenant]
        (code, jid), = self.submit_script(keys=keys, args=args)
        return code, jid.decode()

    def result(self, jid):
        raw = self.r.get("al:res:" + jid)
        return msgpack.unpackb(raw, raw=False) if raw else None

    def await_(self, jid):
        """AWAIT (read only): (result map, None), or (None, the id of the
        live output's newest entry: the result's end entry comes after it)."""
        found, v = self.r.evalsha_ro(self.await_sha, 2, "al:res:" + jid, "al:out:" + jid)
        return (msgpack.unpackb(v, raw=False), None) if found == 1 else (None, v)

    def wait(self, jid, timeout=60):
        """As the document says: AWAIT, then XREAD after the id it gave."""
        end = time.time() + timeout
        while time.time() < end:
            res, after = self.await_(jid)
            if res:
                return res
            self.r.xread({"al:out:" + jid: after}, count=1, block=1000)
        return None

    def status(self, jid):
        st, _ = self.r.evalsha_ro(self.lookup_sha, 2, "al:job:" + jid, "al:sub:" + jid)
        return st.decode() if st else None

    def session_call(self, sid, call, tenant="default"):
        """Queue a call (PROTOCOL.md, "Sessions"); ([code, reason?], call id)."""
        call = dict(call, v=1, session=sid, tenant=tenant)
        call.setdefault("id", uuid.uuid4().hex)
        got = self.session_call_script(keys=[], args=[sid, tenant,
                                                      msgpack.packb(call, use_bin_type=True)])
        return got, call["id"]

    def session_wait(self, sid, cid, timeout=60):
        """As the document says: AWAIT and XREAD a second at a time, the
        result, else the session's record: ended (or its lease past) with no
        result is the end. The result map, or ("ended", reason). The
        answer's keys are named <session>/<call>."""
        end = time.time() + timeout
        name = sid + "/" + cid
        while time.time() < end:
            res, after = self.await_(name)
            if res:
                return res
            tenant, state, reason, worker, lease = self.r.hmget(
                "al:sess:" + sid, "tenant", "state", "reason", "worker", "lease_ms")
            if state == b"ended" or (lease and int(lease) < time.time() * 1000):
                res = self.result(name)
                return res or ("ended", (reason or b"worker_lost").decode())
            self.r.xread({"al:out:" + name: after}, count=1, block=1000)
        return None

    def cancel(self, jid, wait_s=10):
        """1 ended, 2 kill sent, 0 finished, -1 unknown; None: no answer yet."""
        nonce = uuid.uuid4().hex
        self.r.xadd("al:intake", {"cancel": jid, "reply": nonce})
        for _ in range(wait_s):
            got = self.r.blpop(["al:reply:" + nonce], timeout=1)
            if got:
                return int(got[1])
        return None
