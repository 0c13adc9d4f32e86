"""The gateway way in (docs/api.md): HTTP on the standard library, one
kept-alive connection, Server-Sent Events for live output."""
from __future__ import annotations

import base64
import http.client
import json
import time
import urllib.parse
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from .errors import (AirlockError, NotFound, Rejected, Unauthorized, Unavailable, WaitTimeout)
from .results import Chunk, OutputFn, Result, _stale


# ---- the two ways in ----

def _sse(r: Any, end: Optional[float], what: str) -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    """The events of a Server-Sent Events response: (event, id, its data as
    JSON), until the gateway closes it."""
    ev: Dict[str, str] = {}
    data: List[str] = []
    while True:
        if end is not None and time.monotonic() >= end:
            raise WaitTimeout("timed out following %s's output" % what)
        line = r.readline()
        if not line:
            return
        line = line.decode().rstrip("\r\n")
        if line.startswith(":"):
            continue
        if line:
            k, _, v = line.partition(": ")
            if k == "data":
                data.append(v)
            else:
                ev[k] = v
            continue
        if ev.get("event"):
            yield ev["event"], ev.get("id", ""), json.loads("\n".join(data) or "{}")
        ev, data = {}, []


def _gateway_doc(status: int, text: bytes, missing: str) -> Dict[str, Any]:
    """A gateway answer's JSON body; 401, 404 and 5xx raised as theirs."""
    try:
        doc = json.loads(text) if text else {}
    except ValueError:
        doc = {"error": text.decode(errors="replace")}
    if status == 401:
        raise Unauthorized(doc.get("error", "unauthorized"))
    if status == 404:
        raise NotFound(doc.get("error", missing))
    if status >= 500:
        raise Unavailable("gateway: %d %s" % (status, doc.get("error", "")))
    return doc


def _data_of(d: Mapping[str, Any]) -> bytes:
    return (base64.b64decode(d["data_base64"]) if "data_base64" in d
            else d.get("data", "").encode())




def _peer_closed(conn: http.client.HTTPConnection) -> bool:
    """An idle kept-alive connection with anything to read has been closed
    by the gateway (a restart, its idle timeout): a server sends nothing
    unasked, so end of file, a reset or a TLS close_notify are all it can
    be."""
    import select
    if conn.sock is None:
        return False
    try:
        return bool(select.select([conn.sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class _Gateway:
    """HTTP(S) to airlock-gateway, one connection kept alive (a new one
    when the gateway closed it)."""

    def __init__(self, url: str, token: str, timeout: float):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("gateway: expected an http:// or https:// URL, not %r" % url)
        if not token:
            raise ValueError("gateway: an API key is needed (token=, or $AIRLOCK_TOKEN)")
        self.https = u.scheme == "https"
        self.host, self.port = u.hostname, u.port or (443 if self.https else 80)
        self.prefix = u.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.conn: Optional[http.client.HTTPConnection] = None

    def _new(self, timeout: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=timeout)

    def request(self, method: str, path: str, body: Optional[dict] = None,
                timeout: Optional[float] = None) -> Tuple[int, Dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        # once more on a new connection when the request is safe to repeat:
        # a GET or DELETE, a POST whose job has an idempotency key or whose
        # session call has its id (it runs once)
        again = method != "POST" or bool(body and (body.get("idempotency_key") or
                                                   body.get("id")))
        for attempt in (0, 1):
            if self.conn is not None and _peer_closed(self.conn):
                self.conn.close()  # the gateway closed it (restarted): not reused
                self.conn = None
            if self.conn is None:
                self.conn = self._new(self.timeout)
            self.conn.timeout = timeout or self.timeout
            if self.conn.sock:
                self.conn.sock.settimeout(self.conn.timeout)
            try:
                self.conn.request(method, self.prefix + path, body=data, headers=headers)
                r = self.conn.getresponse()
                text = r.read()
                break
            except (OSError, http.client.HTTPException) as e:
                self.conn.close()
                self.conn = None
                if attempt or not again:
                    raise Unavailable("cannot reach the gateway at %s:%d: %s"
                                      % (self.host, self.port, e)) from e
        return r.status, _gateway_doc(r.status, text, "no such job")

    def submit(self, job: Dict[str, Any]) -> str:
        st, doc = self.request("POST", "/v1/jobs", job)
        if st != 202:
            raise Rejected(Result(id="", status="rejected",
                                  error="%d %s" % (st, doc.get("error", ""))))
        return doc["id"]

    def wait(self, jid: str, timeout: Optional[float]) -> Result:
        end = time.monotonic() + timeout if timeout else None
        while True:
            left = 30.0 if end is None else max(0.0, end - time.monotonic())
            if end is not None and left <= 0:
                raise WaitTimeout("timed out waiting for %s" % jid)
            ms = max(1, int(min(left, 30.0) * 1000))
            st, doc = self.request("GET", "/v1/jobs/%s/wait?timeout_ms=%d" % (jid, ms),
                                   timeout=ms / 1000 + 30)
            if "result" in doc:
                return Result.from_map(doc["result"])
            if st != 202:
                raise Unavailable("gateway: %d %s" % (st, doc.get("error", "")))

    def session_open(self, job: Dict[str, Any], timeout: Optional[float]) -> str:
        """POST /v1/sessions: the session's id once it is open."""
        body = _gateway_body({k: v for k, v in job.items() if k != "session"})
        st, doc = self.request("POST", "/v1/sessions", body,
                               timeout=(timeout or 120) + 60)
        if st == 201:
            return doc["id"]
        res = Result.from_map(doc["result"]) if "result" in doc else Result(
            id="", status="rejected", error="%d %s" % (st, doc.get("error", "")))
        if st == 429 and not res.info.get("quota"):
            res.info["quota"] = "sessions"
        res.raise_for_status()
        raise Unavailable("gateway: %d %s" % (st, doc.get("error", "")))

    def session_call(self, sid: str, call: Dict[str, Any],
                     on_output: Optional[OutputFn] = None) -> Result:
        """POST /v1/sessions/{id}/calls: the call's result (410: the
        session has ended, as a session_ended result); with on_output, as
        Server-Sent Events: its output as it comes, then its result."""
        t = call.get("timeout_ms", 600000) / 1000
        if on_output:
            return self._session_call_live(sid, call, on_output, t + 60)
        st, doc = self.request("POST", "/v1/sessions/%s/calls" % sid, _gateway_body(call),
                               timeout=t + 60)
        return self._call_answer(st, doc)

    def session_cancel(self, sid: str, cid: str) -> Result:
        """DELETE /v1/sessions/{sid}/calls/{cid}, on a connection of its
        own (the call it cancels may hold this client's)."""
        conn = self._new(self.timeout)
        try:
            conn.request("DELETE", "%s/v1/sessions/%s/calls/%s"
                         % (self.prefix, sid, urllib.parse.quote(cid)),
                         headers={"Authorization": "Bearer " + self.token,
                                  "Accept": "application/json"})
            r = conn.getresponse()
            return self._call_answer(r.status, _gateway_doc(r.status, r.read(),
                                                            "no such session"))
        except (OSError, http.client.HTTPException) as e:
            raise Unavailable("cannot reach the gateway at %s:%d: %s"
                              % (self.host, self.port, e)) from e
        finally:
            conn.close()

    def session_result(self, sid: str, cid: str, timeout: Optional[float]) -> Result:
        """GET /v1/sessions/{sid}/calls/{cid}: the call's answer, waited
        for in long polls of at most a minute, up to timeout."""
        end = time.monotonic() + timeout if timeout else None
        while True:
            left = 60.0 if end is None else max(0.0, min(60.0, end - time.monotonic()))
            st, doc = self.request("GET", "/v1/sessions/%s/calls/%s?wait_ms=%d"
                                   % (sid, urllib.parse.quote(cid), int(left * 1000)),
                                   timeout=left + 30)
            if st != 202:
                return self._call_answer(st, doc)
            if end is not None and time.monotonic() >= end:
                raise WaitTimeout("timed out waiting for call %s" % cid)

    def _call_answer(self, st: int, doc: Dict[str, Any]) -> Result:
        if st == 410:
            return Result(id="", status="session_ended", error=doc.get("error"))
        if "result" in doc:
            return Result.from_map(doc["result"])
        if st == 404:
            raise NotFound("gateway: %s" % doc.get("error", "no such call"))
        raise AirlockError("gateway: %d %s" % (st, doc.get("error", "")))

    def _session_call_live(self, sid: str, call: Dict[str, Any], on_output: OutputFn,
                           timeout: float) -> Result:
        conn = self._new(timeout)  # its own: the answer streams
        try:
            conn.request("POST", "%s/v1/sessions/%s/calls" % (self.prefix, sid),
                         body=json.dumps(_gateway_body(call)).encode(),
                         headers={"Authorization": "Bearer " + self.token,
                                  "Content-Type": "application/json",
                                  "Accept": "text/event-stream"})
            r = conn.getresponse()
            if "event-stream" not in (r.getheader("Content-Type") or ""):
                return self._call_answer(r.status,
                                         _gateway_doc(r.status, r.read(), "no such session"))
            for kind, _, d in _sse(r, time.monotonic() + timeout, "the call"):
                if kind in ("stdout", "stderr"):
                    on_output(kind, _data_of(d))
                elif kind == "result":
                    return Result.from_map(d["result"])
                elif kind == "error":
                    return self._call_answer(int(d.get("code", 500)), d)
            raise Unavailable("gateway: the call's event stream ended without its result")
        except (OSError, http.client.HTTPException) as e:
            raise Unavailable("cannot reach the gateway at %s:%d: %s"
                              % (self.host, self.port, e)) from e
        finally:
            conn.close()

    def status(self, jid: str) -> Tuple[str, Optional[Result]]:
        st, doc = self.request("GET", "/v1/jobs/" + jid)
        return doc.get("state", ""), (Result.from_map(doc["result"]) if "result" in doc
                                      else None)

    def cancel(self, jid: str) -> str:
        st, doc = self.request("DELETE", "/v1/jobs/" + jid)
        return doc.get("cancel", "")

    def stream(self, jid: str, after: str, timeout: Optional[float]) -> Iterator[Chunk]:
        end = time.monotonic() + timeout if timeout else None
        last, failures, seen = after or "0", 0, [0]
        while True:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise WaitTimeout("timed out following %s's output" % jid)
            conn = self._new(min(left, 60.0) if left else 60.0)  # its own: it stays open
            try:
                conn.request("GET", "%s/v1/jobs/%s/output" % (self.prefix, jid),
                             headers={"Authorization": "Bearer " + self.token,
                                      "Last-Event-ID": last})
                r = conn.getresponse()
                if r.status != 200 or "event-stream" not in (r.getheader("Content-Type") or ""):
                    doc = _gateway_doc(r.status, r.read(), "no job %s" % jid)
                    raise Unavailable("gateway: %d %s" % (r.status, doc.get("error", "")))
                for kind, eid, d in _sse(r, end, jid):
                    last = eid or last
                    failures = 0
                    ch = Chunk(id=last, kind=kind, attempt=int(d.get("attempt", 0)),
                               status=d.get("status", ""), data=_data_of(d))
                    if ch.kind in ("stdout", "stderr", "restart", "end") and \
                            not _stale(ch, seen):
                        yield ch
                    if ch.kind == "end":
                        return
                # the gateway ended it without "end": resume
            except (OSError, http.client.HTTPException) as e:
                failures += 1
                if failures > 20:
                    raise Unavailable("cannot follow %s's output: %s" % (jid, e)) from e
                time.sleep(0.25)
            finally:
                conn.close()

    def close(self) -> None:
        if self.conn:
            self.conn.close()
            self.conn = None


def _gateway_body(job: Any) -> Any:
    """Bytes fields as text, or NAME_base64 when they are not UTF-8, at any
    depth (files, a grading job's build and tests)."""
    if isinstance(job, list):
        return [_gateway_body(x) for x in job]
    if not isinstance(job, dict):
        return job
    out: Dict[str, Any] = {}
    for k, v in job.items():
        if isinstance(v, (bytes, bytearray)):
            try:
                out[k] = bytes(v).decode()
            except UnicodeDecodeError:
                out[k + "_base64"] = base64.b64encode(v).decode()
        else:
            out[k] = _gateway_body(v)
    return out
