"""The direct Redis way in (operators; proto/PROTOCOL.md): the
protocol's scripts, msgpack."""
from __future__ import annotations

import hashlib
import re
import time
import urllib.parse
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .errors import (AirlockError, NotFound, Rejected, SessionEnded, Unavailable, WaitTimeout)
from .results import Chunk, OutputFn, Result, _stale


CANCEL_WAIT_S = 10  # how long a cancel waits for the scheduler's answer (direct Redis)
OUTAGE_S = 30  # a session call rides out a Redis restart this long (its id: it runs once)
_ID_RE = re.compile(r"\A[A-Za-z0-9._:-]{1,64}\Z")  # a job's or a call's id (PROTOCOL.md)



class PausedInfo(Exception):
    """SESSION_CALL's answer to an info call of a paused session: its
    record's JSON (state, paused_ms, paused_until_ms, snapshot_bytes)."""

class _Redis:
    """Direct Redis (operators): the protocol's scripts, msgpack."""

    def __init__(self, url: str, tenant: str):
        try:
            __import__("msgpack")  # checked here, used where results decode
            import redis
        except ImportError as e:  # pragma: no cover - Debian: python3-redis python3-msgpack
            raise AirlockError("direct Redis needs python3-redis and python3-msgpack: %s"
                               % e) from e
        from . import _scripts
        u = urllib.parse.urlsplit(url)
        if u.scheme == "unix":
            q = urllib.parse.parse_qs(u.query)
            self.r = redis.Redis(unix_socket_path=u.path, username=q.get("user", [None])[0],
                                 password=q.get("password", [None])[0],
                                 db=int(q.get("db", ["0"])[0]))
        else:
            self.r = redis.Redis.from_url(url)
        self.tenant = tenant
        self.scripts = {n: self.r.register_script(getattr(_scripts, n))
                        for n in ("SUBMIT", "SESSION_CALL")}
        self.ro_sha = {n: hashlib.sha1(getattr(_scripts, n).encode()).hexdigest()
                       for n in ("LOOKUP", "AWAIT")}
        self.no_xread = False  # the user may not XREAD: waits poll (_end_wait)

    def _call(self, fn, *a, **kw):
        import redis
        try:
            return fn(*a, **kw)
        except redis.exceptions.ConnectionError as e:
            raise Unavailable("cannot reach Redis: %s" % e) from e

    def submit(self, job: Dict[str, Any]) -> str:
        import msgpack
        job = dict(job)
        job.setdefault("v", 1)
        job.setdefault("id", uuid.uuid4().hex)
        job.setdefault("tenant", self.tenant)
        job.setdefault("submitted_ms", int(time.time() * 1000))
        key = job.get("idempotency_key")
        keys = ["al:sub:" + job["id"], "al:idem:%s/%s" % (job["tenant"], key or "-")]
        args = [job["id"], msgpack.packb(job, use_bin_type=True), job["submitted_ms"], 86400,
                1 if key else 0, job.get("tier", ""), job["tenant"]]
        (code, jid), = self._call(self.scripts["SUBMIT"], keys=keys, args=args)
        if code == -1:
            raise Rejected(Result(id=job["id"], status="rejected",
                                  error="id %s is taken" % job["id"]))
        return jid.decode()

    def _result(self, jid: str) -> Optional[Result]:
        import msgpack
        raw = self._call(self.r.get, "al:res:" + jid)
        return Result.from_map(msgpack.unpackb(raw, raw=False)) if raw else None

    def _ro(self, name: str, *keys: str):
        """A read-only client script (EVALSHA_RO: a client may only read
        what it names), loaded when Redis lacks it."""
        import redis
        from . import _scripts
        try:
            return self._call(self.r.evalsha_ro, self.ro_sha[name], len(keys), *keys)
        except redis.exceptions.NoScriptError:
            self._call(self.r.script_load, getattr(_scripts, name))
            return self._call(self.r.evalsha_ro, self.ro_sha[name], len(keys), *keys)

    def _await(self, jid: str) -> Tuple[Optional[Result], bytes]:
        """AWAIT: the result, or the id of the live output's newest entry
        (the result's end entry comes after it)."""
        import msgpack
        found, v = self._ro("AWAIT", "al:res:" + jid, "al:out:" + jid)
        if found == 1:
            return Result.from_map(msgpack.unpackb(v, raw=False)), b""
        return None, v

    def _end_wait(self, jid: str, after: bytes) -> None:
        """Block (at most a second) until anything comes after after; a
        Redis user that may not XREAD (an ACL from before live output)
        polls every 0.1 s instead."""
        import redis
        if not self.no_xread:
            try:
                self._call(self.r.xread, {"al:out:" + jid: after}, count=1, block=1000)
                return
            except redis.exceptions.NoPermissionError:
                self.no_xread = True
        time.sleep(0.1)

    def wait(self, jid: str, timeout: Optional[float]) -> Result:
        end = time.monotonic() + timeout if timeout else None
        while True:
            res, after = self._await(jid)
            if res:
                return res
            if end is not None and time.monotonic() >= end:
                raise WaitTimeout("timed out waiting for %s" % jid)
            self._end_wait(jid, after)

    def _lookup(self, jid: str) -> Optional[bytes]:
        """The job's state: its record's, or "submitted" from its marker
        (LOOKUP, read only: EVALSHA_RO, loaded when Redis lacks it)."""
        st, _ = self._ro("LOOKUP", "al:job:" + jid, "al:sub:" + jid)
        return st

    def status(self, jid: str) -> Tuple[str, Optional[Result]]:
        st = self._lookup(jid)
        res = self._result(jid)
        if st is None and res is None:
            raise NotFound("no job %s" % jid)
        return ("done" if res else st.decode()), res

    def cancel(self, jid: str) -> str:
        """A request on the intake that the scheduler carries out; its
        answer comes on al:reply:<nonce> (PROTOCOL.md, "Cancelling")."""
        nonce = uuid.uuid4().hex
        self._call(self.r.xadd, "al:intake", {"cancel": jid, "reply": nonce})
        for _ in range(CANCEL_WAIT_S):
            got = self._call(self.r.blpop, ["al:reply:" + nonce], timeout=1)
            if got:
                n = int(got[1])
                if n == -1:
                    raise NotFound("no job %s" % jid)
                return {0: "finished", 1: "ended", 2: "kill_sent"}[n]
        return "requested"  # on the intake: carried out when a scheduler reads it

    def stream(self, jid: str, after: str, timeout: Optional[float]) -> Iterator[Chunk]:
        if not self._call(self.r.exists, "al:job:" + jid, "al:res:" + jid, "al:sub:" + jid):
            raise NotFound("no job %s" % jid)
        end = time.monotonic() + timeout if timeout else None
        last, seen = after or "0", [0]
        while True:
            if end is not None and time.monotonic() >= end:
                raise WaitTimeout("timed out following %s's output" % jid)
            chunks, nxt = self._chunks(jid, last)
            for ch in chunks:
                if _stale(ch, seen):
                    continue
                yield ch
                if ch.kind == "end":
                    return
            if nxt == last and self._call(self.r.exists, "al:res:" + jid):
                return  # ended, its end entry gone (expired or trimmed)
            last = nxt

    _KINDS = {b"out": "stdout", b"err": "stderr", b"restart": "restart", b"end": "end"}

    def _chunks(self, jid: str, last: str) -> Tuple[List[Chunk], str]:
        """One round of al:out:<jid> after entry last (a second at most):
        its chunks (entries of unknown kinds passed over) and the id to
        read after next (last itself when nothing came)."""
        got = self._call(self.r.xread, {"al:out:" + jid: last}, count=256, block=1000)
        out, seen = [], last
        for eid, f in (got[0][1] if got else []):
            seen = eid.decode()
            kind = self._KINDS.get(f.get(b"t"))
            if kind:
                out.append(Chunk(id=seen, kind=kind, data=f.get(b"d", b""),
                                 attempt=int(f.get(b"a", b"0")),
                                 status=f.get(b"s", b"").decode()))
        return out, seen

    def session_call(self, sid: str, call: Dict[str, Any]) -> str:
        """Queue a call for the session's worker (SESSION_CALL); its id (a
        caller's own must be a job-like id: it names the answer's keys
        al:res:<sid>/<id>, so it is only ever unique within the session)."""
        import msgpack
        call = dict(call, v=1, session=sid)
        call.setdefault("id", uuid.uuid4().hex)
        call.setdefault("tenant", self.tenant)
        call.setdefault("submitted_ms", int(time.time() * 1000))
        if not isinstance(call["id"], str) or not _ID_RE.match(call["id"]):
            raise ValueError("id: expected 1..64 of [A-Za-z0-9._:-], got %r" % (call["id"],))
        raw = msgpack.packb(call, use_bin_type=True)
        # sent again while Redis restarts: the worker runs a call id once
        got = self._riding(lambda: self._call(self.scripts["SESSION_CALL"], keys=[],
                                              args=[sid, call["tenant"], raw]), call["id"])
        if got[0] == 0:
            raise NotFound("no session %s" % sid)
        if got[0] == 2:
            raise SessionEnded(sid, got[1].decode())
        if got[0] == 3:
            raise ValueError("SESSION_CALL refused the call: %s" % got[1].decode())
        if got[0] == 4:  # an info call to a paused session: the record answers
            raise PausedInfo(got[1].decode())
        return call["id"]

    def _riding(self, fn: Callable[[], Any], cid: str) -> Any:
        """fn(), again while Redis is unreachable, OUTAGE_S at most (a
        restart); then Unavailable naming the call's id, whose answer
        Session.result(id) fetches later."""
        end = time.monotonic() + OUTAGE_S
        while True:
            try:
                return fn()
            except Unavailable as e:
                if time.monotonic() >= end:
                    raise Unavailable("%s (call %s: Session.result(%r) fetches its answer "
                                      "later)" % (e, cid, cid)) from e
                time.sleep(0.2)

    def session_wait(self, sid: str, cid: str, timeout: Optional[float],
                     on_output: Optional[OutputFn] = None) -> Result:
        """The call's result; SessionEnded when the session ended first (its
        record says so, or its worker stopped renewing it). With on_output,
        its live output (al:out:<sid>/<call>) is followed until its end
        entry."""
        end = time.monotonic() + timeout if timeout else None
        last = "0"
        name = sid + "/" + cid  # the answer's keys: al:res:<name>, al:out:<name>
        while True:
            if on_output:
                chunks, nxt = self._riding(lambda: self._chunks(name, last), cid)
                for ch in chunks:
                    if ch.kind in ("stdout", "stderr"):
                        on_output(ch.kind, ch.data)
                more = nxt != last and not any(ch.kind == "end" for ch in chunks)
                last = nxt
                if more:
                    continue  # more may follow at once
            res, after = self._riding(lambda: self._await(name), cid)
            if res:
                return res
            # ended, by a client, its worker or (its lease out, on Redis's
            # clock) the scheduler: no clock of this host's decides it
            st = self._riding(lambda: self._call(self.r.hmget, "al:sess:" + sid, "state",
                                                 "reason"), cid)
            if st[0] == b"ended":
                res = self._result(name)
                if res:
                    return res
                raise SessionEnded(sid, st[1].decode() if st[1] else "ended")
            if end is not None and time.monotonic() >= end:
                raise WaitTimeout("timed out waiting for call %s" % cid)
            if not on_output:
                self._riding(lambda: self._end_wait(name, after), cid)

    def close(self) -> None:
        self.r.close()
