"""The outcomes a caller catches: every error of the client, and one
class per job status that is not a success (_FAILURES, by status)."""
from __future__ import annotations

from typing import Any


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

    def __init__(self, result: Any):  # a Result (results.py)
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
    exited, worker_lost, worker_stop, broken, paused_expired, snapshot_refused):
    open another. reason says which, detail the rest."""

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
