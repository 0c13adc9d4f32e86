#!/usr/bin/python3
"""CI of a project that is not yours, on every trust tier: its code comes in
by reference (a URL and its SHA-256, fetched by the worker through the
tier's egress rules, verified, cached by hash: the job itself needs no
network), its test suite runs in the tier's image, its JUnit report comes
back as a result file, and the counts are printed per tier, side by side.

    examples/ci.py --redis unix:///run/airlock/redis.sock \\
        --input URL,SHA256,PATH[,tar|zip|none] [--input ...] \\
        --run 'python3 -m pytest -q --junitxml=/work/junit.xml tests' \\
        --tiers trusted,internal,untrusted [--image python] [--timeout 300]

The default --run takes a Debian binary package that ships its tests (as
python3-toolz does): it unpacks the .deb given as `pkg.deb` with dpkg-deb
and runs pytest on the package's tests directory (--tests, e.g. toolz/tests)
in its dist-packages. With --gateway URL (and $AIRLOCK_TOKEN) it goes
through the gateway instead of Redis. Exit status 0 when every tier ran
its suite and all tiers agree on the counts; 1 otherwise.

Needs only the Python client (client/python, or `pip install ./client/python`)."""
import argparse
import os
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client",
                                "python"))
from airlock import Client  # noqa: E402

DEB_RUN = ("set -e\n"
           "dpkg-deb -x pkg.deb src\n"
           "cd src/usr/lib/python3/dist-packages\n"
           "python3 -m pytest -q -p no:cacheprovider --junitxml=/work/junit.xml {tests}\n")


def junit_counts(xml):
    """(passed, failed, skipped) of a JUnit report: the testsuite elements'
    attributes, errors counted as failed."""
    root = ET.fromstring(xml)
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    total = failed = skipped = 0
    for s in suites:
        total += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0))
    return total - failed - skipped, failed, skipped


def parse_input(text):
    """URL,SHA256,PATH[,UNPACK] as the CLI's --input takes it."""
    parts = text.rsplit(",", 3)
    unpack = "none"
    if parts[-1] in ("tar", "zip", "none"):
        unpack = parts.pop()
        parts = ",".join(parts).rsplit(",", 2)
    if len(parts) != 3:
        raise SystemExit("--input: expected URL,SHA256,PATH[,tar|zip|none], got %r" % text)
    url, digest, path = parts
    return {"url": url, "sha256": digest, "path": path, "unpack": unpack}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", default=os.environ.get("AIRLOCK_REDIS"))
    ap.add_argument("--gateway", default=os.environ.get("AIRLOCK_GATEWAY"))
    ap.add_argument("--tiers", default="trusted,internal,untrusted")
    ap.add_argument("--input", action="append", required=True)
    ap.add_argument("--run", help="the suite's shell command (it writes /work/junit.xml)")
    ap.add_argument("--tests", default="tests", help="with the default --run: the directory "
                    "of the package's tests in its dist-packages")
    ap.add_argument("--image", help="a catalogue image every tier offers (default: theirs)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per tier's run")
    ap.add_argument("--memory", type=int, default=512 << 20)
    args = ap.parse_args()
    inputs = [parse_input(i) for i in args.input]
    script = args.run or DEB_RUN.format(tests=args.tests)
    kw = {"gateway": args.gateway} if args.gateway else {"redis": args.redis}
    rows, counts = [], set()
    with Client(**kw) as c:
        for tier in args.tiers.split(","):
            fields = {"inputs": inputs, "collect": ["junit.xml"]}
            if args.image:
                fields["image"] = args.image
            r = c.run(script.encode(), runtime="sh", tier=tier, timeout=args.timeout,
                      memory=args.memory, check=False, **fields)
            report = r.files.get("junit.xml")
            got = junit_counts(report) if report else None
            if got:
                counts.add(got)
            rows.append((tier, r.backend or "?", r.status, got, r.info.get("inputs", ""),
                         r.wall_ms, (r.error or r.stderr.decode(errors="replace"))[-200:]))
    print("%-12s %-10s %-13s %-26s %8s  %s" % ("tier", "backend", "status", "tests",
                                               "wall_ms", "inputs"))
    for tier, backend, status, got, info, wall, err in rows:
        text = "%d passed, %d failed, %d skipped" % got if got else "no report"
        print("%-12s %-10s %-13s %-26s %8s  %s" % (tier, backend, status, text, wall, info))
        if not got:
            print("    " + err.replace("\n", "\n    "))
    agree = len(counts) == 1 and all(row[3] for row in rows)
    print("every tier agrees: %s" % ("yes" if agree else "NO"))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
