"""A grading job kept as a directory (grade.json or grade.yaml, files/,
tests/NAME.in and .out), read as `airlock grade DIR` reads it."""
from __future__ import annotations

import json
import os
from typing import Any, Dict

from . import _yaml



def load_grading_dir(path: str) -> Dict[str, Any]:
    """The grading job in a directory, as `airlock grade DIR` reads it:
    grade.json (or grade.yaml / grade.yml: no YAML package needed) holds the job's
    fields, and "compare" for the tests found here; files/... are the job's
    files; tests/NAME.in is a test's stdin (one test per .in, in name order),
    NAME.out its expected stdout, NAME.args its extra arguments (one a line);
    per_test: NAME: {points, group, hidden, ...} adds a test's other fields.
    Returns the keywords of Client.grade (tests, argv, build, files, ...)."""
    spec: Dict[str, Any] = {}
    for name in ("grade.yaml", "grade.yml", "grade.json"):
        p = os.path.join(path, name)
        if not os.path.exists(p):
            continue
        with open(p, "rb") as f:
            text = f.read()
        if name.endswith(".json"):
            spec = json.loads(text)
        else:  # read as `airlock grade` reads it, with the standard library alone
            try:
                spec = _yaml.load(text.decode()) or {}
            except (_yaml.YAMLError, UnicodeDecodeError) as e:
                raise ValueError("%s: %s" % (p, e)) from e
        if not isinstance(spec, dict):
            raise ValueError("%s: expected a mapping of the job's fields" % p)
        break
    compare = spec.pop("compare", "trim")
    files = {}
    top = os.path.join(path, "files")
    for d, _, names in sorted(os.walk(top)) if os.path.isdir(top) else []:
        for n in sorted(names):
            full = os.path.join(d, n)
            with open(full, "rb") as f:
                files[os.path.relpath(full, top)] = f.read()
    tests = list(spec.pop("tests", []))
    tdir = os.path.join(path, "tests")
    for n in sorted(os.listdir(tdir)) if os.path.isdir(tdir) else []:
        if not n.endswith(".in") or len(n) <= 3:
            continue
        base = os.path.join(tdir, n[:-3])
        with open(base + ".in", "rb") as f:
            t: Dict[str, Any] = {"name": n[:-3], "stdin": f.read(), "compare": compare}
        if os.path.exists(base + ".out"):
            with open(base + ".out", "rb") as f:
                t["expect"] = f.read()
        if os.path.exists(base + ".args"):
            with open(base + ".args") as f:
                t["argv"] = f.read().splitlines()
        tests.append(t)
    if not tests:
        raise ValueError("%s: no tests: expected tests/NAME.in files (and NAME.out)" % path)
    per = spec.pop("per_test", None) or {}
    if not isinstance(per, dict):
        raise ValueError("%s: per_test: expected a mapping of test names to their fields" % path)
    by_name = {t.get("name"): t for t in tests}
    for name, fields in per.items():
        name = str(name)
        if name not in by_name:
            raise ValueError("%s: per_test.%s: no test of that name (tests/%s.in)"
                             % (path, name, name))
        if not isinstance(fields, dict) or {"name", "stdin", "expect"} & set(fields):
            raise ValueError("%s: per_test.%s: expected a mapping of its fields (points, "
                             "group, hidden, ...; its name, stdin and expect are its files')"
                             % (path, name))
        by_name[name].update(fields)
    given = spec.get("files") or {}
    if isinstance(given, list):  # the protocol's form: [{"path", "data"}]
        given = {f["path"]: f["data"] for f in given}
    if files or given:
        spec["files"] = dict(given, **files)
    spec["tests"] = tests
    return spec
