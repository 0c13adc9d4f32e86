"""Airlock's Python client: submit, wait, run, cancel, status and stream jobs,
through the HTTP gateway (docs/api.md; the standard library only) or
directly to Redis (proto/PROTOCOL.md; python3-redis and python3-msgpack,
operators only: direct Redis access may name any tenant)."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

from ._gateway import _Gateway, _gateway_body
from ._redis import _Redis
from .errors import (AirlockError, Cancelled, CompileError, CpuLimit, Expired, JobFailed,
                     MemoryLimit, NotFound, OutputLimit, QuotaExceeded, Rejected, SandboxError,
                     SessionEnded, Timeout, Unauthorized, Unavailable, WaitTimeout, WorkerLost)
from .grading import load_grading_dir
from .llm import tool_answer
from .results import Bytes, Chunk, Output, Result, TestResult
from .session import Session

__all__ = [
    "Client", "Result", "Chunk", "AirlockError", "Unavailable", "Unauthorized", "NotFound",
    "Rejected", "QuotaExceeded", "WaitTimeout", "JobFailed", "Timeout", "CpuLimit",
    "MemoryLimit", "OutputLimit", "Cancelled", "SandboxError", "WorkerLost", "Expired",
    "CompileError", "TestResult", "load_grading_dir", "Session", "SessionEnded", "Output",
]


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
    if code is None and argv is None and not (extra.get("language") and extra.get("tests")):
        # (a grading job with a language: admission gives its command)
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
                timeout: Optional[float] = None, cpu_budget: Optional[float] = None,
                open_timeout: Optional[float] = 120, **fields: Any) -> "Session":
        """Open a session (PROTOCOL.md, "Sessions"): one sandbox of the tier
        whose state (variables, imports, files) lasts between calls, until
        it is closed, idle or old past the tier's policy. memory (bytes)
        holds for the whole session, timeout (seconds) is each call's
        default. cpu_budget (seconds): the CPU time of all its calls, at
        most (the call that passes it ends the session, "limit"); none by
        default, never above the tier's sessions: cpu_budget_s. Use it in
        a with block (closed at the end). Raises the open job's JobFailed
        (QuotaExceeded: the tenant has its tier's max_per_tenant open,
        Rejected: the tier has no sessions)."""
        lim = dict(fields.pop("limits", None) or {})
        if memory is not None:
            lim["memory_bytes"] = int(memory)
        t = timeout if timeout is not None else self.timeout
        if t is not None:
            lim["wall_ms"] = max(1, int(t * 1000))
        job: Dict[str, Any] = dict(fields, session=True)
        if cpu_budget is not None:
            job["cpu_budget_ms"] = max(1, int(cpu_budget * 1000))
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

