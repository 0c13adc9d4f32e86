"""Policy fixtures shared by the test suites: the one-tier policy most of
them run ("trusted": the process backend, 256 MiB, 64 pids), with the
knobs a suite turns, and the text of any further tiers it needs."""


def trusted(lease_ms=30000, max_attempts=1, wall_ms=20000, backoff_ms=None, result_ttl_s=600,
            more=""):
    """The YAML text: result_ttl_s and lease_ms, tier trusted with these
    attempts, backoff and wall-clock default, then `more` (further tiers,
    indented as tiers are)."""
    return ("result_ttl_s: %d\nlease_ms: %d\ntiers:\n  trusted:\n    backend: process\n"
            "    max_attempts: %d\n%s"
            "    defaults: {wall_ms: %d, memory_bytes: 268435456, pids: 64}\n%s"
            % (result_ttl_s, lease_ms, max_attempts,
               "    backoff_ms: %d\n" % backoff_ms if backoff_ms else "", wall_ms, more))
