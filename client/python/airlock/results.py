"""What a job, a test and a call give back: Result, TestResult, Output,
Chunk (live output), from a result map of either way in."""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from .errors import _FAILURES, JobFailed, QuotaExceeded


Bytes = Union[bytes, str]
# a live output callback: the stream ("stdout", "stderr") and its bytes
OutputFn = Callable[[str, bytes], None]


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
    # network egress: each connection the job (or the call) made or was refused,
    # as the proxy's transcript: {host, port, addr, allowed, why, up, down, ms}
    egress: List[Dict[str, Any]] = field(default_factory=list)
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
                   info=dict(m.get("info") or {}), egress=list(m.get("egress") or []),
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



def _stale(ch: "Chunk", seen: List[int]) -> bool:
    """A chunk of an older attempt than one already seen: a fenced-out
    worker's late output, not the job's (seen[0]: the highest attempt)."""
    if ch.kind == "end" or not ch.attempt:
        return False
    if ch.attempt < seen[0]:
        return True
    seen[0] = ch.attempt
    return False
