"""What the warm-interpreter suites share (test_process_warm.py,
test_container_warm.py): jobs of one tier with ids of their own, results
with their output as text, and what a warm job's program shows."""
import os

# printed first by a job: which program runs it (the launcher, or the warm
# interpreter's program: WARM_MARK); a job killed by a limit has no word
# from its sandbox, so it shows where it ran before its loop
WHERE = "import sys; print(sys.orig_argv[2][:17], flush=True)\n"
WARM_MARK = "def _airlock_warm\n"


class Jobs:
    """job(**fields): a python job of tier with a fresh id (prefix-PID-N);
    run(cluster, job): its result through the queue, stdout and stderr as
    text."""

    def __init__(self, prefix, tier):
        self.prefix, self.tier, self.n = prefix, tier, 0

    def job(self, **kw):
        self.n += 1
        j = {"v": 1, "id": "%s-%d-%d" % (self.prefix, os.getpid(), self.n), "tier": self.tier,
             "runtime": "python"}
        j.update(kw)
        return j

    @staticmethod
    def run(c, j):
        r = c.run_job(j) or {}
        for f in ("stdout", "stderr"):
            if isinstance(r.get(f), bytes):
                r[f] = r[f].decode(errors="replace")
        return r


def interp(r):
    """The result's info.interpreter: warm or cold."""
    return r.get("info", {}).get("interpreter")
