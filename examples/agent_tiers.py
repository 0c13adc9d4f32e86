#!/usr/bin/python3
"""One tool, interchangeable backends: an agent-style loop that gives the
same run_python tool to a model on each tier in turn, feeds it the same
hostile programs (CPU, memory, processes, disk, reading secrets, network),
and prints, per tier, what was contained and what each boundary costs in
latency (p50 of print(1)).

    AIRLOCK_GATEWAY=http://127.0.0.1:8088 AIRLOCK_TOKEN=KEY \\
        examples/agent_tiers.py --tiers trusted,internal,untrusted
    examples/agent_tiers.py --redis unix:///run/airlock/redis.sock --tiers trusted

Needs only the Python client (client/python, or `pip install ./client/python`).
Traffic: the network probe connects to 127.0.0.1 only (inside the sandbox
that is its own loopback)."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client",
                                "python"))
from airlock import Client  # noqa: E402

# name -> (the model's program, how to tell it was contained from the tool's answer)
HOSTILE = {
    "cpu": ("while True:\n    pass\n",
            lambda a: a["status"] in ("timeout", "cpu_limit")),
    "memory": ("chunks = []\nwhile True:\n    chunks.append(bytearray(32 << 20))\n"
               "    print(len(chunks) * 32, 'MiB', flush=True)\n",
               lambda a: a["status"] == "memory_limit" or
               (a["status"] == "nonzero_exit" and "MemoryError" in a["stderr"])),
    "processes": ("import os, time\nn = 0\nfor _ in range(5000):\n    try:\n"
                  "        if os.fork() == 0:\n            time.sleep(3)\n            os._exit(0)\n"
                  "        n += 1\n    except OSError:\n        break\nprint('forked', n)\n",
                  lambda a: a["status"] != "ok" or int((a["stdout"].split() or
                                                        ["", "5000"])[-1]) < 5000),
    "disk": ("import os\nn = 0\ntry:\n    with open('fill', 'wb') as f:\n"
             "        for n in range(1, 8193):\n            f.write(b'x' * (1 << 20))\n"
             "            f.flush()\nexcept OSError as e:\n    print('stopped at', n, 'MiB:', e)\n"
             "print('wrote', n, 'MiB')\n",
             lambda a: a["status"] == "output_limit" or "stopped at" in a["stdout"]),
    "secrets": ("import os\nfound = []\nfor p in ('/etc/shadow', '/etc/ssh', '/root', '/home',\n"
                "          '/etc/airlock', '/var/lib/airlock', '/run/secrets'):\n    try:\n"
                "        if os.path.isdir(p):\n            entries = os.listdir(p)\n"
                "            if entries:\n                found.append('%s (%d entries)' % "
                "(p, len(entries)))\n"
                "        else:\n            open(p, 'rb').read(1)\n            found.append(p)\n"
                "    except OSError:\n        pass\nprint('readable:', ', '.join(found) or 'none')\n",
                lambda a: a["status"] == "ok" and a["stdout"].strip() == "readable: none"),
    "network": ("import socket\nopen_ = []\nfor port in (22, 6379, 8088, 9464, 16509):\n"
                "    try:\n        s = socket.socket()\n        s.settimeout(1)\n"
                "        s.connect(('127.0.0.1', port))\n        open_.append(port)\n"
                "        s.close()\n    except OSError as e:\n        err = e\n"
                "print('reachable:', open_ or 'none', '(%s)' % err.strerror if not open_ else '')\n",
                lambda a: a["status"] == "ok" and a["stdout"].startswith("reachable: none")),
}


def why(a):
    """A short reason for the table."""
    if a["status"] not in ("ok", "nonzero_exit"):
        return a["status"]
    out = (a["stdout"].strip().splitlines() or [""])[-1]
    err = (a["stderr"].strip().splitlines() or [""])[-1]
    return out[:48] or err[:48] or "exit %s" % a["exit_code"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiers", default="trusted,internal,untrusted")
    ap.add_argument("--gateway", help="(or $AIRLOCK_GATEWAY, with $AIRLOCK_TOKEN)")
    ap.add_argument("--redis", help="(or $AIRLOCK_REDIS) direct Redis, operators")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds per program")
    ap.add_argument("--latency-runs", type=int, default=5)
    a = ap.parse_args(argv)
    client = Client(gateway=a.gateway, redis=a.redis)
    rows, escaped = [], 0
    for tier in a.tiers.split(","):
        t0 = time.monotonic()
        lat = []
        for _ in range(a.latency_runs):
            s = time.monotonic()
            ans = client.run_python("print(1)", tier=tier, timeout=60)
            lat.append((time.monotonic() - s) * 1000)
            if ans["status"] != "ok":
                print("tier %s: print(1) did not run: %s" % (tier, ans["stderr"].strip()),
                      file=sys.stderr)
                return 2
        lat.sort()
        backend = client.run(code="print(1)", tier=tier, check=False).backend
        cells = {}
        for name, (code, contained) in HOSTILE.items():
            ans = client.run_python(code, tier=tier, timeout=a.timeout)
            ok = contained(ans)
            escaped += not ok
            cells[name] = ("contained" if ok else "NOT CONTAINED") + " (%s)" % why(ans)
        rows.append((tier, backend, cells, lat[len(lat) // 2], time.monotonic() - t0))
    names = list(HOSTILE)
    print("run_python on each tier: the same hostile programs, %.0f s each" % a.timeout)
    print("| tier | backend | " + " | ".join(names) + " | p50 print(1) |")
    print("| --- | --- | " + " | ".join("---" for _ in names) + " | --- |")
    for tier, backend, cells, p50, _ in rows:
        print("| %s | %s | %s | %.0f ms |" % (tier, backend, " | ".join(cells[n] for n in names),
                                               p50))
    base = rows[0][3] if rows else 0
    for tier, backend, _, p50, took in rows:
        print("%s (%s): print(1) p50 %.0f ms, %.1fx the first tier's; the whole row took %.0f s"
              % (tier, backend, p50, p50 / base if base else 0, took))
    return 1 if escaped else 0


if __name__ == "__main__":
    sys.exit(main())
