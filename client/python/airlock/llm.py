"""The answers a model reads: a job's output cut to fit its context
(cut_for_model), and run_python's answer (tool_answer); used by
Client.run_python and airlock-mcp."""
from __future__ import annotations

from typing import Any, Dict, Optional

from .results import Result


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
