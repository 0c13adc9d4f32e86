"""Airlock's Python client (client/python/README.md).

    from airlock import Client, run_python
    Client(gateway="http://127.0.0.1:8088", token=KEY).run("print(6*7)").stdout  # b"42\\n"
    run_python("print(6*7)")  # {"stdout": "42\\n", "stderr": "", "exit_code": 0, "status": "ok"}
"""
from typing import Any, Dict, Optional

from .client import (AirlockError, Cancelled, Chunk, Client, CompileError, CpuLimit, Expired,
                     JobFailed, MemoryLimit, NotFound, OutputLimit, QuotaExceeded, Rejected,
                     Result, SandboxError, TestResult, Timeout, Unauthorized, Unavailable,
                     WaitTimeout, WorkerLost, load_grading_dir, tool_answer, Session,
                     SessionEnded, Output)

__version__ = "0.1.0"
__all__ = ["Client", "Result", "Chunk", "run_python", "tool_answer", "AirlockError",
           "Unavailable", "Unauthorized", "NotFound", "Rejected", "QuotaExceeded",
           "WaitTimeout", "JobFailed", "Timeout", "CpuLimit", "MemoryLimit", "OutputLimit",
           "Cancelled", "SandboxError", "WorkerLost", "Expired", "CompileError", "TestResult",
           "load_grading_dir", "Session", "SessionEnded", "Output"]

_default: Optional[Client] = None


def run_python(code: str, *, tier: Optional[str] = None,
               timeout: Optional[float] = None) -> Dict[str, Any]:
    """run_python(code) -> {"stdout", "stderr", "exit_code", "status"}, on the
    Airlock that $AIRLOCK_GATEWAY and $AIRLOCK_TOKEN (or $AIRLOCK_REDIS) name,
    in tier ($AIRLOCK_TIER, else the gateway's default). Client.run_python
    says what each field holds."""
    global _default
    if _default is None:
        import os
        _default = Client(tier=os.environ.get("AIRLOCK_TIER") or None)
    return _default.run_python(code, tier=tier, timeout=timeout)
