"""An open session (Client.session): its calls, one at a time, in one
sandbox whose state lasts."""
from __future__ import annotations

import fnmatch
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import (AirlockError, NotFound, OutputLimit, SessionEnded)
from .results import Bytes, OutputFn, Result
from ._gateway import _Gateway


class Session:
    """An open session (Client.session): calls run one at a time, in order,
    in one sandbox whose state lasts. Each returns a Result like a job's
    (a python exception is a nonzero_exit with its traceback in stderr and
    its summary in error; a call past its time is a timeout, interrupted,
    and the session goes on); SessionEnded once the session has ended."""

    def __init__(self, client: Any, sid: str, tier: Optional[str]):
        self.client = client  # a Client (client.py): its way in is the session's
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
                   collect: Sequence[str] = (), cpu: Optional[float] = None,
                   output_max: Optional[int] = None, call_id: Optional[str] = None) -> Result:
        """Run code in the session's Python interpreter (its globals last);
        a last expression's value is printed; open figures come back in
        outputs (image/png). on_output(kind, data) gets its stdout and
        stderr as they come ("stdout"/"stderr", bytes), before the result
        (which holds all of it). files: {path: bytes} put first; collect:
        paths or globs (as a job's) of files brought back after, in
        Result.files ({path: bytes}, 64 at most). timeout and cpu (seconds)
        are this call's time and CPU time (else the session's per-call
        ones): past either the call is interrupted, its status timeout or
        cpu_limit, and the session goes on. output_max (bytes): each stream
        cut to its first and last halves, status output_limit, what was
        cut said in error. call_id: the call's id (1..64 of
        [A-Za-z0-9._:-], unique in the session; else one is drawn): the call
        runs once however often it is sent, and Session.result(call_id)
        fetches its answer after a fault (Result.id is it either way)."""
        return self._run({"op": "python", "code": code if isinstance(code, str)
                          else bytes(code).decode()}, timeout, on_output, files, collect,
                         cpu, output_max, call_id)

    def exec(self, cmd: Union[str, Sequence[str]], *, timeout: Optional[float] = None,
             on_output: Optional[OutputFn] = None,
             files: Optional[Mapping[str, Bytes]] = None, collect: Sequence[str] = (),
             cpu: Optional[float] = None, output_max: Optional[int] = None,
             call_id: Optional[str] = None) -> Result:
        """A shell line (a str) or a program and its arguments (a list), in
        the session's work directory; on_output, files, collect, timeout,
        cpu, output_max and call_id as for run_python."""
        call = {"op": "exec", "code": cmd} if isinstance(cmd, str) else \
            {"op": "exec", "argv": list(cmd)}
        return self._run(call, timeout, on_output, files, collect, cpu, output_max, call_id)

    def _run(self, call: Dict[str, Any], timeout: Optional[float],
             on_output: Optional[OutputFn], files: Optional[Mapping[str, Bytes]],
             collect: Sequence[str], cpu: Optional[float] = None,
             output_max: Optional[int] = None, call_id: Optional[str] = None) -> Result:
        # the call's id, drawn here when the caller gave none: known before
        # the call runs, so that it can be sent again, fetched or cancelled
        call["id"] = call_id if call_id is not None else uuid.uuid4().hex
        if cpu is not None:
            call["cpu_ms"] = max(1, int(cpu * 1000))
        if output_max:
            call["output_max"] = int(output_max)
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

    def cancel(self, call_id: str) -> str:
        """Stop the session's call call_id (from another thread than the
        one waiting for it): running, it is interrupted within about a
        second and answers cancelled; queued, it never runs. The session
        goes on. Returns what was done: "interrupted", "dropped before it
        ran", or "not running (answered, or unknown)"."""
        via = self.client._via
        if isinstance(via, _Gateway):
            res = via.session_cancel(self.id, call_id)
        else:
            res = self._call({"op": "cancel", "target": call_id}, None)
        if res.status == "session_ended":
            reason, _, detail = (res.error or "").partition(": ")[2].partition(": ")
            raise SessionEnded(self.id, reason or "ended", detail)
        return res.stdout.decode(errors="replace")

    def info(self) -> Dict[str, Any]:
        """The session's limits (memory_bytes, pids, disk_bytes, cpu_millis,
        each call's call_timeout_ms and call_cpu_ms, stdout_bytes,
        stderr_bytes, cpu_budget_ms, idle_ms, max_life_ms), its usage
        (calls, cpu_ms, queued, running) and idle_left_ms, life_left_ms.
        Answered at once, even while a call runs."""
        import json
        from ._redis import PausedInfo
        try:
            res = self._call({"op": "info"}, None)
        except PausedInfo as e:  # paused: its record answers, nothing resumes
            return json.loads(str(e))
        if res.status != "ok":
            raise AirlockError("info: %s" % (res.error or res.status))
        return json.loads(res.stdout)

    def pause(self) -> Dict[str, Any]:
        """Save the session's sandbox whole (its memory: variables,
        imports; its files; its working directory) and free it, once the
        calls before this one are answered: the session is paused (its
        info says so) until its next call, which resumes it, on any worker
        of its tier that reaches the snapshot. Returns {"state": "paused",
        "snapshot_bytes", "pause_ms"}. Rejected (AirlockError) on a tier
        that cannot (process, container: unsupported) or a tenant at its
        max_paused_per_tenant (QuotaExceeded). A paused session's pause is
        answered by its record ({"state": "paused", "snapshot_bytes",
        "paused_ms", "paused_until_ms"}): nothing resumes."""
        import json
        from ._redis import PausedInfo
        try:
            res = self._call({"op": "pause"}, None)
        except PausedInfo as e:  # paused already: its record answers
            return json.loads(str(e))
        if res.status == "rejected" and (res.error or "").startswith("quota"):
            from .errors import QuotaExceeded
            raise QuotaExceeded(res)
        if res.status != "ok":
            raise AirlockError("pause: %s" % (res.error or res.status))
        return json.loads(res.stdout)

    def resume(self) -> Dict[str, Any]:
        """Bring a paused session back now (any call does it too) and
        return its info; an open session's info as it is."""
        import json
        res = self._call({"op": "resume"}, None)
        if res.status != "ok":
            raise AirlockError("resume: %s" % (res.error or res.status))
        return json.loads(res.stdout)

    def fork(self, n: int = 1) -> List["Session"]:
        """n new sessions (1..16) from one snapshot of this one, each with
        its own id, its own copy of the memory and the files, paused until
        its first call; each restored copy is reseeded (os.urandom,
        random, OpenSSL's generator) apart from the others. They count among the tenant's
        paused sessions. This session goes on."""
        import json
        res = self._call({"op": "fork", "count": int(n)}, None)
        if res.status == "rejected" and (res.error or "").startswith("quota"):
            from .errors import QuotaExceeded
            raise QuotaExceeded(res)
        if res.status != "ok":
            raise AirlockError("fork: %s" % (res.error or res.status))
        return [Session(self.client, sid, self.tier)
                for sid in json.loads(res.stdout)["sessions"]]

    def extend(self, *, idle: Optional[float] = None,
               life: Optional[float] = None) -> Dict[str, Any]:
        """Keep the session longer: idle (seconds) its idle time from now
        on, life (seconds) its life from now; each up to its tier's most
        (sessions: max_idle_s, max_life_s). Returns its info after."""
        import json
        call: Dict[str, Any] = {"op": "extend"}
        if idle is not None:
            call["idle_ms"] = max(1, int(idle * 1000))
        if life is not None:
            call["life_ms"] = max(1, int(life * 1000))
        res = self._call(call, None)
        if res.status != "ok":
            raise AirlockError("extend: %s" % (res.error or res.status))
        return json.loads(res.stdout)

    def result(self, call_id: str, timeout: Optional[float] = None) -> Result:
        """The answer of the session's call call_id (sent with run_python's
        or exec's call_id=), waited for up to timeout (None: as long as the
        session lives); kept as long as a job's result. SessionEnded when
        the session ended without answering it."""
        via = self.client._via
        if isinstance(via, _Gateway):
            res = via.session_result(self.id, call_id, timeout)
        else:
            res = via.session_wait(self.id, call_id, timeout)
        if res.status == "session_ended":
            reason, _, detail = (res.error or "").partition(": ")[2].partition(": ")
            raise SessionEnded(self.id, reason or "ended", detail)
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
