"""Policy fixtures shared by the test suites, so that no suite spells out
the YAML of a policy: `policy(*tiers, **root keys)` with `tier_def(name,
backend, **keys)` for each tier, and `trusted()`, the one-tier process
policy most suites run (256 MiB, 64 pids), with the knobs a suite turns.

    policy(tier_def("internal", "container", images=["python", "node"]),
           tier_def("untrusted", "microvm", guest=IMAGE, image="python"),
           lease_ms=5000, tenants={"capped": {"max_running": 2}})

A tier gets max_attempts 1 unless it says otherwise, and `defaults` only
when given (DEFAULTS: the usual 20 s, 256 MiB, 64 pids). Values go out as
YAML flow (JSON for lists and maps), so a suite's Python values are the
policy's."""
import json

DEFAULTS = {"wall_ms": 20000, "memory_bytes": 268435456, "pids": 64}


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


def tier_def(name, backend, max_attempts=1, **keys):
    """One tier's YAML (indented under tiers:): backend, max_attempts, then
    keys in the order given (defaults=DEFAULTS, images=[...], ...)."""
    lines = ["  %s:" % name, "    backend: %s" % backend]
    if max_attempts is not None:
        lines.append("    max_attempts: %d" % max_attempts)
    lines += ["    %s: %s" % (k, _value(v)) for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def policy(*tiers, result_ttl_s=600, lease_ms=30000, tenants=None, **root):
    """The YAML text: result_ttl_s, lease_ms and other root keys, the tiers
    (tier_def()'s), then the tenants ({name: {key: value}})."""
    out = "result_ttl_s: %d\nlease_ms: %d\n" % (result_ttl_s, lease_ms)
    out += "".join("%s: %s\n" % (k, _value(v)) for k, v in root.items())
    out += "tiers:\n" + "".join(tiers)
    if tenants:
        out += "tenants:\n" + "".join("  %s: %s\n" % (n, _value(kv))
                                      for n, kv in tenants.items())
    return out


def trusted(lease_ms=30000, max_attempts=1, wall_ms=20000, backoff_ms=None, result_ttl_s=600,
            more=""):
    """Tier trusted (process) with these attempts, backoff and wall-clock
    default, then `more` (further tiers: tier_def()'s)."""
    keys = {"backoff_ms": backoff_ms} if backoff_ms else {}
    keys["defaults"] = dict(DEFAULTS, wall_ms=wall_ms)
    return policy(tier_def("trusted", "process", max_attempts=max_attempts, **keys), more,
                  result_ttl_s=result_ttl_s, lease_ms=lease_ms)
