"""Airlock's Python client: submit, wait, run, cancel, status and stream jobs,
through the HTTP gateway (docs/api.md; the standard library only) or
directly to Redis (proto/PROTOCOL.md; python3-redis and python3-msgpack,
operators only: direct Redis access may name any tenant)."""
from __future__ import annotations

import base64
import fnmatch
import hashlib
import http.client
import json
import os
import re
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = [
    "Client", "Result", "Chunk", "AirlockError", "Unavailable", "Unauthorized", "NotFound",
    "Rejected", "QuotaExceeded", "WaitTimeout", "JobFailed", "Timeout", "CpuLimit",
    "MemoryLimit", "OutputLimit", "Cancelled", "SandboxError", "WorkerLost", "Expired",
    "CompileError", "TestResult", "load_grading_dir", "Session", "SessionEnded", "Output",
]

Bytes = Union[bytes, str]
CANCEL_WAIT_S = 10  # how long a cancel waits for the scheduler's answer (direct Redis)
_ID_RE = re.compile(r"\A[A-Za-z0-9._:-]{1,64}\Z")  # a job's or a call's id (PROTOCOL.md)


# ---- outcomes ----

class AirlockError(Exception):
    """Every error this client raises."""


class Unavailable(AirlockError):
    """The gateway or Redis could not be reached, or answered something unexpected."""


class Unauthorized(AirlockError):
    """The gateway refused the API key (401)."""


class NotFound(AirlockError):
    """No such job (or one of another tenant: the gateway answers alike)."""


class WaitTimeout(AirlockError):
    """The client's own wait ran out before the job had a result; the job goes on."""


class JobFailed(AirlockError):
    """The job ended without running to an exit of its own; .result says how."""

    status = ""

    def __init__(self, result: "Result"):
        self.result = result
        super().__init__("job %s: %s: %s" % (result.id, result.status, result.error or ""))


class Rejected(JobFailed):
    """The job never ran: invalid, or refused by the tier's policy (.result.error says why)."""
    status = "rejected"


class QuotaExceeded(Rejected):
    """Rejected by the tenant's quota or rate limit (.quota: max_queued or rate_per_s)."""

    @property
    def quota(self) -> str:
        return self.result.info.get("quota", "")


class Timeout(JobFailed):
    """The job reached its wall-clock limit and was killed."""
    status = "timeout"


class CpuLimit(JobFailed):
    """The job reached its CPU-time limit."""
    status = "cpu_limit"


class MemoryLimit(JobFailed):
    """The job ran out of memory in its cgroup or VM."""
    status = "memory_limit"


class OutputLimit(JobFailed):
    """The job wrote more than its output caps (or filled its disk)."""
    status = "output_limit"


class Cancelled(JobFailed):
    """A client cancelled the job."""
    status = "cancelled"


class SandboxError(JobFailed):
    """The isolation boundary failed (infrastructure, never the job's own doing)."""
    status = "sandbox_error"


class WorkerLost(JobFailed):
    """Every attempt's worker died."""
    status = "worker_lost"


class Expired(JobFailed):
    """The job did not start before its deadline."""
    status = "expired"


class SessionEnded(AirlockError):
    """The session has ended (closed, idle, max_life, limit, call_stuck,
    exited, worker_lost, worker_stop, broken): open another. reason says
    which, detail the rest."""

    def __init__(self, session: str, reason: str, detail: str = ""):
        super().__init__("session %s ended: %s%s" % (session, reason,
                                                     ": " + detail if detail else ""))
        self.session = session
        self.reason = reason
        self.detail = detail


class CompileError(JobFailed):
    """A grading job's build failed: no test ran (stdout and stderr are the build's)."""
    status = "compile_error"


_FAILURES = {c.status: c for c in (Rejected, Timeout, CpuLimit, MemoryLimit, OutputLimit,
                                    Cancelled, SandboxError, WorkerLost, Expired, CompileError)}


def _bytes_of(m: Mapping[str, Any], name: str) -> bytes:
    """A bytes field of a result map: msgpack bin, or the gateway's text or NAME_base64."""
    if name + "_base64" in m:
        return base64.b64decode(m[name + "_base64"])
    v = m.get(name) or b""
    return v.encode() if isinstance(v, str) else bytes(v)


@dataclass
class TestResult:
    """One test of a grading job (PROTOCOL.md, "Grading jobs"): its verdict
    (accepted, wrong_answer, timeout, memory_limit, output_limit,
    runtime_error, skipped; the build's: accepted or compile_error; cpu_limit
    from older workers), detail (wrong_answer: the first differing line),
    usage, kept output, points earned of max_points, group, hidden."""
    __test__ = False  # not a test case for pytest
    name: str
    verdict: str
    exit_code: Optional[int] = None
    signal: int = 0
    wall_ms: int = 0
    cpu_ms: int = 0
    peak_memory_bytes: int = 0
    max_rss_bytes: int = 0  # wait4's ru_maxrss, as autograders report it (0: unknown)
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    detail: Optional[str] = None
    points: int = 0
    max_points: int = 0
    group: Optional[str] = None
    hidden: bool = False

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"

    @classmethod
    def from_map(cls, m: Mapping[str, Any]) -> "TestResult":
        return cls(name=m.get("name", ""), verdict=m.get("verdict", ""),
                   exit_code=m.get("exit_code"), signal=m.get("signal") or 0,
                   wall_ms=m.get("wall_ms") or 0, cpu_ms=m.get("cpu_ms") or 0,
                   peak_memory_bytes=m.get("peak_memory_bytes") or 0,
                   max_rss_bytes=m.get("max_rss_bytes") or 0,
                   stdout=_bytes_of(m, "stdout"), stderr=_bytes_of(m, "stderr"),
                   stdout_truncated=bool(m.get("stdout_truncated")),
                   stderr_truncated=bool(m.get("stderr_truncated")), detail=m.get("detail"),
                   points=m.get("points") or 0, max_points=m.get("max_points") or 0,
                   group=m.get("group"), hidden=bool(m.get("hidden")))


@dataclass
class Output:
    """A rich output of a session's python call: a figure left open (or
    display()ed) is an image/png."""
    mime: str
    data: bytes


@dataclass
class Result:
    """A job's result (proto/PROTOCOL.md, "Result"); stdout and stderr are bytes."""
    id: str
    status: str
    exit_code: Optional[int] = None
    signal: int = 0
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    error: Optional[str] = None
    wall_ms: int = 0
    cpu_ms: int = 0
    peak_memory_bytes: int = 0
    max_rss_bytes: int = 0  # wait4's ru_maxrss of its processes (0: unknown)
    attempt: int = 0
    backend: Optional[str] = None
    info: Dict[str, str] = field(default_factory=dict)
    files: Dict[str, bytes] = field(default_factory=dict)  # collected: {path: bytes}
    files_truncated: List[str] = field(default_factory=list)  # ...those cut at the cap
    build: Optional[TestResult] = None  # a grading job's build
    tests: List[TestResult] = field(default_factory=list)  # ...and its tests, in order
    score: Optional[int] = None  # ...the points earned, of max_score (None: not graded)
    max_score: Optional[int] = None
    groups: List[Dict[str, Any]] = field(default_factory=list)  # [{name, score, max_score}]
    outputs: List[Output] = field(default_factory=list)  # a session's python call: figures
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """The job exited by itself (with code 0 or not)."""
        return self.status in ("ok", "nonzero_exit")

    def raise_for_status(self) -> "Result":
        """Raise the matching JobFailed unless the job exited by itself."""
        if self.ok:
            return self
        if self.status == "rejected" and self.info.get("quota"):
            raise QuotaExceeded(self)
        raise _FAILURES.get(self.status, JobFailed)(self)

    @property
    def all_accepted(self) -> bool:
        """A grading job: it ran, and every test was accepted."""
        return self.status == "ok" and all(x.accepted for x in self.tests)

    @classmethod
    def from_map(cls, m: Mapping[str, Any]) -> "Result":
        """From the protocol's result map: msgpack (bytes) or the gateway's JSON
        (bytes as text, or NAME_base64)."""
        return cls(id=m.get("id", ""), status=m.get("status", ""), exit_code=m.get("exit_code"),
                   signal=m.get("signal") or 0, stdout=_bytes_of(m, "stdout"),
                   stderr=_bytes_of(m, "stderr"),
                   stdout_truncated=bool(m.get("stdout_truncated")),
                   stderr_truncated=bool(m.get("stderr_truncated")), error=m.get("error"),
                   wall_ms=m.get("wall_ms") or 0, cpu_ms=m.get("cpu_ms") or 0,
                   peak_memory_bytes=m.get("peak_memory_bytes") or 0,
                   max_rss_bytes=m.get("max_rss_bytes") or 0,
                   attempt=m.get("attempt") or 0, backend=m.get("backend"),
                   info=dict(m.get("info") or {}),
                   files={f.get("path", ""): _bytes_of(f, "data") for f in m.get("files") or []},
                   files_truncated=[f.get("path", "") for f in m.get("files") or []
                                    if f.get("truncated")],
                   build=TestResult.from_map(m["build"]) if m.get("build") else None,
                   tests=[TestResult.from_map(x) for x in m.get("tests") or []],
                   score=m.get("score"), max_score=m.get("max_score"),
                   groups=[dict(g) for g in m.get("groups") or []],
                   outputs=[Output(mime=o.get("mime", ""), data=_bytes_of(o, "data"))
                            for o in m.get("outputs") or []],
                   raw=dict(m))


@dataclass
class Chunk:
    """One entry of a job's live output (PROTOCOL.md, "Live output").

    kind: "stdout" or "stderr" (data holds the bytes), "restart" (the output so
    far is void: the job runs again) or "end" (the last one; status is the
    result's). id: resume after it with stream(after=id). A chunk of a newer
    attempt than the ones before also means the output starts over (a lost
    worker's job run again); late chunks of an older attempt are dropped."""
    id: str
    kind: str
    data: bytes = b""
    attempt: int = 0
    status: str = ""


def _job(code: Optional[Bytes], argv: Optional[Sequence[str]], tier: Optional[str],
         runtime: Optional[str], timeout: Optional[float], memory: Optional[int],
         stdin: Optional[Bytes], env: Optional[Mapping[str, str]],
         files: Optional[Mapping[str, Bytes]], extra: Mapping[str, Any]) -> Dict[str, Any]:
    """A job map (without v, id and tenant) from the Pythonic arguments."""
    def raw(v: Bytes) -> bytes:
        return v.encode() if isinstance(v, str) else bytes(v)

    job: Dict[str, Any] = {}
    if tier:
        job["tier"] = tier
    if code is not None:
        job["runtime"] = runtime or "python"
        job["code"] = raw(code)
    elif runtime:
        raise ValueError("runtime needs code")
    if argv is not None:
        job["argv"] = list(argv)
    if code is None and argv is None:
        raise ValueError("give code (with a runtime, python by default) or argv")
    limits = dict(extra.get("limits") or {})
    if timeout is not None:
        if timeout <= 0:
            raise ValueError("timeout: expected seconds > 0")
        limits["wall_ms"] = max(1, int(timeout * 1000))
    if memory is not None:
        limits["memory_bytes"] = int(memory)
    if limits:
        job["limits"] = limits
    if stdin is not None:
        job["stdin"] = raw(stdin)
    if env:
        job["env"] = dict(env)
    if files:
        job["files"] = [{"path": p, "data": raw(d)} for p, d in files.items()]
    for k, v in extra.items():
        if k != "limits" and v is not None:  # None: the field left out
            job[k] = v
    return job


def _stale(ch: "Chunk", seen: List[int]) -> bool:
    """A chunk of an older attempt than one already seen: a fenced-out
    worker's late output, not the job's (seen[0]: the highest attempt)."""
    if ch.kind == "end" or not ch.attempt:
        return False
    if ch.attempt < seen[0]:
        return True
    seen[0] = ch.attempt
    return False


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


OutputFn = Callable[[str, bytes], None]


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
        # a GET or DELETE, or a POST whose job has an idempotency key
        again = method != "POST" or bool(body and body.get("idempotency_key"))
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

    def _call_answer(self, st: int, doc: Dict[str, Any]) -> Result:
        if st == 410:
            return Result(id="", status="session_ended", error=doc.get("error"))
        if "result" in doc:
            return Result.from_map(doc["result"])
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


class Session:
    """An open session (Client.session): calls run one at a time, in order,
    in one sandbox whose state lasts. Each returns a Result like a job's
    (a python exception is a nonzero_exit with its traceback in stderr and
    its summary in error; a call past its time is a timeout, interrupted,
    and the session goes on); SessionEnded once the session has ended."""

    def __init__(self, client: "Client", sid: str, tier: Optional[str]):
        self.client = client
        self.id = sid
        self.tier = tier

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, call: Dict[str, Any], timeout: Optional[float],
              on_output: Optional[OutputFn] = None) -> Result:
        if timeout is not None:
            call["timeout_ms"] = max(1, int(timeout * 1000))
        via = self.client._via
        if isinstance(via, _Gateway):
            res = via.session_call(self.id, call, on_output)
        else:
            res = via.session_wait(self.id, via.session_call(self.id, call), None, on_output)
        if res.status == "session_ended":
            reason, _, detail = (res.error or "").partition(": ")[2].partition(": ")
            raise SessionEnded(self.id, reason or "ended", detail)
        return res

    def run_python(self, code: Bytes, *, timeout: Optional[float] = None,
                   on_output: Optional[OutputFn] = None,
                   files: Optional[Mapping[str, Bytes]] = None,
                   collect: Sequence[str] = ()) -> Result:
        """Run code in the session's Python interpreter (its globals last);
        a last expression's value is printed; open figures come back in
        outputs (image/png). on_output(kind, data) gets its stdout and
        stderr as they come ("stdout"/"stderr", bytes), before the result
        (which holds all of it). files: {path: bytes} put first; collect:
        paths or globs (as a job's) of files brought back after, in
        Result.files ({path: bytes}, 64 at most)."""
        return self._run({"op": "python", "code": code if isinstance(code, str)
                          else bytes(code).decode()}, timeout, on_output, files, collect)

    def exec(self, cmd: Union[str, Sequence[str]], *, timeout: Optional[float] = None,
             on_output: Optional[OutputFn] = None,
             files: Optional[Mapping[str, Bytes]] = None, collect: Sequence[str] = ()) -> Result:
        """A shell line (a str) or a program and its arguments (a list), in
        the session's work directory; on_output, files and collect as for
        run_python."""
        call = {"op": "exec", "code": cmd} if isinstance(cmd, str) else \
            {"op": "exec", "argv": list(cmd)}
        return self._run(call, timeout, on_output, files, collect)

    def _run(self, call: Dict[str, Any], timeout: Optional[float],
             on_output: Optional[OutputFn], files: Optional[Mapping[str, Bytes]],
             collect: Sequence[str]) -> Result:
        for path, data in (files or {}).items():
            self.put(path, data)
        res = self._call(call, timeout, on_output)
        if collect:
            names = [n for _, n in self.ls()]
            for name in [n for n in names if any(_collect_match(c, n) for c in collect)][:64]:
                try:
                    res.files[name] = self.get(name)
                except OutputLimit:
                    res.files_truncated.append(name)
        return res

    def put(self, path: str, data: Bytes, mode: int = 0o644) -> None:
        """Write a file under the session's work directory."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        res = self._call({"op": "put", "path": path, "data": raw, "mode": mode}, None)
        if res.status != "ok":
            raise AirlockError("put %s: %s" % (path, res.error or res.status))

    def get(self, path: str) -> bytes:
        """A file's bytes (OutputLimit past the worker's cap on files)."""
        res = self._call({"op": "get", "path": path}, None)
        if res.status != "ok":
            raise NotFound("get %s: %s" % (path, res.error or res.status))
        if res.stdout_truncated:
            raise OutputLimit(res)
        return res.stdout

    def ls(self, path: str = "") -> List[Tuple[int, str]]:
        """(size, path) of each file under path (the work directory)."""
        call: Dict[str, Any] = {"op": "ls"}
        if path:
            call["path"] = path
        res = self._call(call, None)
        if res.status != "ok":
            raise NotFound("ls %s: %s" % (path or ".", res.error or res.status))
        out = []
        for line in res.stdout.decode(errors="replace").splitlines():
            size, _, name = line.partition("\t")
            out.append((int(size), name))
        return out

    def close(self) -> None:
        """End the session (its sandbox is destroyed); closing twice is fine."""
        try:
            self._call({"op": "close"}, None)
        except (SessionEnded, NotFound):
            pass


def _collect_match(entry: str, path: str) -> bool:
    """A collect entry against a path, as the worker matches it (PROTOCOL.md:
    fnmatch with FNM_PATHNAME and FNM_PERIOD); an entry without *, ? or [
    is the path itself."""
    if not any(ch in entry for ch in "*?["):
        return entry == path
    pat, parts = entry.split("/"), path.split("/")
    return len(pat) == len(parts) and all(
        fnmatch.fnmatchcase(p, g) and (not p.startswith(".") or g.startswith("."))
        for g, p in zip(pat, parts))


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
        got = self._call(self.scripts["SESSION_CALL"], keys=[],
                         args=[sid, call["tenant"], msgpack.packb(call, use_bin_type=True)])
        if got[0] == 0:
            raise NotFound("no session %s" % sid)
        if got[0] == 2:
            raise SessionEnded(sid, got[1].decode())
        if got[0] == 3:
            raise ValueError("SESSION_CALL refused the call: %s" % got[1].decode())
        return call["id"]

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
                chunks, nxt = self._chunks(name, last)
                for ch in chunks:
                    if ch.kind in ("stdout", "stderr"):
                        on_output(ch.kind, ch.data)
                more = nxt != last and not any(ch.kind == "end" for ch in chunks)
                last = nxt
                if more:
                    continue  # more may follow at once
            res, after = self._await(name)
            if res:
                return res
            st = self._call(self.r.hmget, "al:sess:" + sid, "state", "reason", "lease_ms")
            if st[0] == b"ended" or (st[2] and int(st[2]) < time.time() * 1000):
                res = self._result(name)
                if res:
                    return res
                raise SessionEnded(sid, st[1].decode() if st[0] == b"ended" and st[1]
                                   else "worker_lost")
            if end is not None and time.monotonic() >= end:
                raise WaitTimeout("timed out waiting for call %s" % cid)
            if not on_output:
                self._end_wait(name, after)

    def close(self) -> None:
        self.r.close()


class Client:
    """A connection to Airlock.

    Client(gateway="https://airlock.example:8088", token=KEY): a tenant,
    through the HTTP gateway (the key decides the tenant; the standard
    library only). Client(redis="redis://..."): an operator, straight to
    Redis (python3-redis, python3-msgpack). With neither, $AIRLOCK_GATEWAY
    (and $AIRLOCK_TOKEN) or else $AIRLOCK_REDIS. tier and timeout (seconds)
    are the defaults of every job this client submits; output_max (bytes)
    the default cut of run_python's answer for a model (None: whole)."""

    def __init__(self, gateway: Optional[str] = None, token: Optional[str] = None,
                 redis: Optional[str] = None, *, tier: Optional[str] = None,
                 timeout: Optional[float] = None, tenant: str = "default",
                 http_timeout: float = 60.0, output_max: Optional[int] = None):
        if gateway and redis:
            raise ValueError("give gateway= or redis=, not both")
        if not gateway and not redis:
            gateway = os.environ.get("AIRLOCK_GATEWAY") or None
            redis = None if gateway else os.environ.get("AIRLOCK_REDIS") or None
        if not gateway and not redis:
            raise ValueError("no gateway= or redis= (nor $AIRLOCK_GATEWAY, $AIRLOCK_REDIS)")
        if output_max is not None and output_max < 0:
            raise ValueError("output_max: expected bytes >= 0")
        self.tier = tier
        self.timeout = timeout
        self.output_max = output_max
        self._via: Union[_Gateway, _Redis]
        if gateway:
            self._via = _Gateway(gateway, token or os.environ.get("AIRLOCK_TOKEN", ""),
                                 http_timeout)
        else:
            self._via = _Redis(redis, tenant)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._via.close()

    def submit(self, code: Optional[Bytes] = None, *, argv: Optional[Sequence[str]] = None,
               tier: Optional[str] = None, runtime: Optional[str] = None,
               timeout: Optional[float] = None, memory: Optional[int] = None,
               stdin: Optional[Bytes] = None, env: Optional[Mapping[str, str]] = None,
               files: Optional[Mapping[str, Bytes]] = None, **fields: Any) -> str:
        """Submit a job; its id. code runs with runtime (python by default, or
        sh); or argv runs a command. timeout: wall-clock seconds; memory: bytes;
        files: {relative path: bytes}. Any other field of the protocol's job
        (limits, network, image, inputs, priority, idempotency_key, labels,
        ...) as a keyword; inputs=[{"url", "sha256", "path", "unpack"}] brings
        files and archives by reference, inputs=[{"git": {"url", "ref"},
        "path"}] a repository's commit (PROTOCOL.md "Input map"). Raises Rejected when the gateway refuses the job at once."""
        job = _job(code, argv, tier or self.tier, runtime,
                   timeout if timeout is not None else self.timeout, memory, stdin, env,
                   files, fields)
        if isinstance(self._via, _Gateway):
            return self._via.submit(_gateway_body(job))
        if "tier" not in job:
            raise ValueError("tier: needed (the gateway's policy has no default here)")
        return self._via.submit(job)

    def wait(self, job_id: str, timeout: Optional[float] = None) -> Result:
        """The job's result, waiting up to timeout seconds (None: as long as it
        takes); WaitTimeout when it runs out. Never raises for the job's own
        outcome: see Result.raise_for_status."""
        return self._via.wait(job_id, timeout)

    def run(self, code: Optional[Bytes] = None, *, check: bool = True,
            wait_timeout: Optional[float] = None, **kw: Any) -> Result:
        """Submit and wait. With check (the default) a job that did not exit by
        itself raises its JobFailed (Timeout, MemoryLimit, Rejected, ...); a
        non-zero exit is a Result, not an exception."""
        res = self.wait(self.submit(code, **kw), wait_timeout)
        return res.raise_for_status() if check else res

    def cancel(self, job_id: str) -> str:
        """"ended" (it was waiting: cancelled now), "kill_sent" (it runs),
        "finished" (it had a result) or "requested" (no scheduler answered
        within 10 s: the request waits on the intake for one)."""
        return self._via.cancel(job_id)

    def status(self, job_id: str) -> Tuple[str, Optional[Result]]:
        """(state, result or None): submitted, queued, running, retrying, done."""
        return self._via.status(job_id)

    def stream(self, job_id: str, *, after: Optional[str] = None,
               timeout: Optional[float] = None) -> Iterator[Chunk]:
        """The job's live output as it comes, Chunk by Chunk, from the start
        or after the chunk id `after`, ending with its "end" chunk. The
        stream is bounded by the job's caps; the result keeps the whole
        capped output."""
        return self._via.stream(job_id, after or "0", timeout)

    def session(self, *, tier: Optional[str] = None, memory: Optional[int] = None,
                timeout: Optional[float] = None, open_timeout: Optional[float] = 120,
                **fields: Any) -> "Session":
        """Open a session (PROTOCOL.md, "Sessions"): one sandbox of the tier
        whose state (variables, imports, files) lasts between calls, until
        it is closed, idle or old past the tier's policy. memory (bytes)
        holds for the whole session, timeout (seconds) is each call's
        default. Use it in a with block (closed at the end). Raises the
        open job's JobFailed (QuotaExceeded: the tenant has its tier's
        max_per_tenant open, Rejected: the tier has no sessions)."""
        lim = dict(fields.pop("limits", None) or {})
        if memory is not None:
            lim["memory_bytes"] = int(memory)
        t = timeout if timeout is not None else self.timeout
        if t is not None:
            lim["wall_ms"] = max(1, int(t * 1000))
        job: Dict[str, Any] = dict(fields, session=True)
        if lim:
            job["limits"] = lim
        tier = tier or self.tier
        if tier:
            job["tier"] = tier
        if isinstance(self._via, _Gateway):
            return Session(self, self._via.session_open(job, open_timeout), tier)
        if "tier" not in job:
            raise ValueError("tier: needed (the gateway's policy has no default here)")
        res = self._via.wait(self._via.submit(job), open_timeout)
        res.raise_for_status()
        return Session(self, res.id, tier)

    def grade(self, tests: Sequence[Mapping[str, Any]], code: Optional[Bytes] = None, *,
              argv: Optional[Sequence[str]] = None,
              build: Union[None, Sequence[str], Mapping[str, Any]] = None,
              stop_on_failure: bool = False, check: bool = True,
              wait_timeout: Optional[float] = None, **kw: Any) -> Result:
        """A grading job (PROTOCOL.md, "Grading jobs"): build (an argv, or a
        map with argv or runtime+code, and limits) runs once, then code or
        argv once per test. Each test: {"name", "stdin", "expect", "compare"
        (exact, trim: the default, tokens), "argv" (appended), "files"
        ({path: bytes}), "limits", or "timeout" (s) and "memory" (bytes)}.
        The Result's tests hold each verdict (TestResult); all_accepted says
        whether all passed. A compile_error is a Result too (build says why);
        with check, an outcome that is neither raises its JobFailed."""
        def raw(v: Bytes) -> bytes:
            return v.encode() if isinstance(v, str) else bytes(v)

        out = []
        for t in tests:
            t = dict(t)
            lim = dict(t.pop("limits", None) or {})
            if "timeout" in t:
                lim["wall_ms"] = max(1, int(t.pop("timeout") * 1000))
            if "memory" in t:
                lim["memory_bytes"] = int(t.pop("memory"))
            if lim:
                t["limits"] = lim
            for k in ("stdin", "expect"):
                if k in t:
                    t[k] = raw(t[k])
            if isinstance(t.get("files"), Mapping):
                t["files"] = [{"path": p, "data": raw(d)} for p, d in t["files"].items()]
            out.append(t)
        fields: Dict[str, Any] = {"tests": out}
        if build is not None:
            b = {"argv": list(build)} if not isinstance(build, Mapping) else dict(build)
            if "code" in b:
                b["code"] = raw(b["code"])
            fields["build"] = b
        if stop_on_failure:
            fields["stop_on_failure"] = True
        kw.update(fields)
        res = self.wait(self.submit(code, argv=argv, **kw), wait_timeout)
        if check and res.status not in ("ok", "compile_error"):
            res.raise_for_status()
        return res

    def grade_dir(self, path: str, **kw: Any) -> Result:
        """grade() of the grading job in directory path, laid out as for
        `airlock grade DIR` (see load_grading_dir); kw overrides its fields
        (tier=, stop_on_failure=, ...)."""
        job = load_grading_dir(path)
        job.update(kw)
        return self.grade(**job)

    def run_python(self, code: str, *, tier: Optional[str] = None,
                   timeout: Optional[float] = None, files: Optional[Mapping[str, Bytes]] = None,
                   collect: Sequence[str] = (), output_max: Optional[int] = None
                   ) -> Dict[str, Any]:
        """An agent's tool: run code in the sandbox of tier (this client's by
        default), return {"stdout", "stderr", "exit_code", "status",
        "files"}. files: {relative path: bytes} put in its work directory
        first; collect: paths or globs ("out/*.csv") of files to bring back.
        Every *.png the code saved in its work directory (a chart) comes
        back too, unnamed; "files" is {path: bytes} (64 at most, each cut at
        the worker's cap). Every outcome of the job is a value (a non-zero
        exit, a timeout, a memory limit: status says which, stderr ends with
        why); only an Airlock that cannot be reached raises (Unavailable,
        Unauthorized), and a bad argument (ValueError). output_max (bytes;
        default: the client's output_max, else whole): a longer stdout or
        stderr keeps its head and tail around a line saying how much was
        cut, for a model's context."""
        want = ["*.png"] + [c for c in collect if c != "*.png"]
        if len(want) > 16:
            raise ValueError("collect: at most 15 paths or globs besides *.png")
        try:
            res = self.run(code, tier=tier, timeout=timeout, runtime="python", check=False,
                           files=files, collect=want)
        except Rejected as e:
            res = e.result
        limit = self.output_max if output_max is None else output_max
        return dict(tool_answer(res, limit), files=res.files)


def load_grading_dir(path: str) -> Dict[str, Any]:
    """The grading job in a directory, as `airlock grade DIR` reads it:
    grade.json (or grade.yaml / grade.yml, with python3-yaml) holds the job's
    fields, and "compare" for the tests found here; files/... are the job's
    files; tests/NAME.in is a test's stdin (one test per .in, in name order),
    NAME.out its expected stdout, NAME.args its extra arguments (one a line).
    Returns the keywords of Client.grade (tests, argv, build, files, ...)."""
    spec: Dict[str, Any] = {}
    for name in ("grade.yaml", "grade.yml", "grade.json"):
        p = os.path.join(path, name)
        if not os.path.exists(p):
            continue
        with open(p, "rb") as f:
            text = f.read()
        if name.endswith(".json"):
            spec = json.loads(text)
        else:
            try:
                import yaml  # type: ignore
            except ImportError as e:
                raise ValueError("%s: reading YAML needs python3-yaml (or use grade.json)"
                                 % p) from e
            spec = yaml.safe_load(text) or {}
        if not isinstance(spec, dict):
            raise ValueError("%s: expected a mapping of the job's fields" % p)
        break
    compare = spec.pop("compare", "trim")
    files = {}
    top = os.path.join(path, "files")
    for d, _, names in sorted(os.walk(top)) if os.path.isdir(top) else []:
        for n in sorted(names):
            full = os.path.join(d, n)
            with open(full, "rb") as f:
                files[os.path.relpath(full, top)] = f.read()
    tests = list(spec.pop("tests", []))
    tdir = os.path.join(path, "tests")
    for n in sorted(os.listdir(tdir)) if os.path.isdir(tdir) else []:
        if not n.endswith(".in") or len(n) <= 3:
            continue
        base = os.path.join(tdir, n[:-3])
        with open(base + ".in", "rb") as f:
            t: Dict[str, Any] = {"name": n[:-3], "stdin": f.read(), "compare": compare}
        if os.path.exists(base + ".out"):
            with open(base + ".out", "rb") as f:
                t["expect"] = f.read()
        if os.path.exists(base + ".args"):
            with open(base + ".args") as f:
                t["argv"] = f.read().splitlines()
        tests.append(t)
    if not tests:
        raise ValueError("%s: no tests: expected tests/NAME.in files (and NAME.out)" % path)
    given = spec.get("files") or {}
    if isinstance(given, list):  # the protocol's form: [{"path", "data"}]
        given = {f["path"]: f["data"] for f in given}
    if files or given:
        spec["files"] = dict(given, **files)
    spec["tests"] = tests
    return spec

def cut_for_model(data: bytes, max_bytes: Optional[int], truncated: bool = False) -> str:
    """data as text for a model's context: whole when it fits max_bytes
    (None or 0: always), else its head and tail (about half each, cut at
    character boundaries) around one line saying how much is left out.
    truncated: the stream was already cut at the job's cap (said too)."""
    note = " (and more past the job's output cap)" if truncated else ""
    if not max_bytes or len(data) <= max_bytes:
        text = data.decode(errors="replace")
        return text + ("\n" if note and text and not text.endswith("\n") else "") + \
            ("[airlock: output cut at the job's cap]\n" if note else "")
    half = max_bytes // 2
    head = data[:half].decode(errors="ignore")
    tail = data[len(data) - half:].decode(errors="ignore")
    return "%s\n[airlock: %d of %d bytes cut here%s; the head and tail are shown]\n%s" % (
        head, len(data) - 2 * half, len(data), note, tail)


def tool_answer(res: Result, max_bytes: Optional[int] = None) -> Dict[str, Any]:
    """A result as a tool's answer: text, with the verdict on stderr when the
    job did not exit by itself. max_bytes: each stream past it keeps its
    head and tail around a line saying how much was cut (cut_for_model);
    the Result keeps the whole output."""
    err = cut_for_model(res.stderr, max_bytes, res.stderr_truncated) if max_bytes else \
        res.stderr.decode(errors="replace")
    if not res.ok:
        err += ("" if not err or err.endswith("\n") else "\n") + \
            "airlock: %s: %s\n" % (res.status, res.error or "")
    out = cut_for_model(res.stdout, max_bytes, res.stdout_truncated) if max_bytes else \
        res.stdout.decode(errors="replace")
    return {"stdout": out, "stderr": err, "exit_code": res.exit_code, "status": res.status}
