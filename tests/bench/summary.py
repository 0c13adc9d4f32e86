#!/usr/bin/python3
"""The one table `make bench` ends with (tests/bench/run.sh): each benchmark
calls record() for its headline figures as it prints them; the file named by
BENCH_SUMMARY gathers them (one JSON object a line), and `summary.py FILE`
prints them as one Markdown table: figure, value, baseline (measured in the
same run), ratio, goal, and whether it was met. Without BENCH_SUMMARY (a
benchmark run alone) record() does nothing."""
import json
import os
import sys

OPS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b}


def record(figure, value, baseline="", ratio=None, goal=None):
    """figure: what was measured; value, baseline: text with units (the
    baseline is what the figure is compared with, from the same run); ratio:
    value / baseline (a float) or None; goal: (op, target, on) with op ">="
    or "<=", on "ratio" or a float value to compare instead (a figure whose
    goal is not a ratio, e.g. Redis CPU per job), or None."""
    path = os.environ.get("BENCH_SUMMARY")
    if not path:
        return
    met = None
    goal_text = ""
    if goal:
        op, target, on = goal
        x = ratio if on == "ratio" else on
        met = None if x is None else OPS[op](x, target)
        goal_text = "%s %s%s" % (op, target, "x" if on == "ratio" else "")
    with open(path, "a") as f:
        f.write(json.dumps({"figure": figure, "value": value, "baseline": baseline,
                            "ratio": ratio, "goal": goal_text, "met": met}) + "\n")


def table(rows):
    out = ["| figure | value | baseline (same run) | ratio | goal | met |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            r["figure"], r["value"], r["baseline"] or "-",
            "%.2fx" % r["ratio"] if r["ratio"] is not None else "-", r["goal"] or "-",
            {True: "yes", False: "**no**", None: "-"}[r["met"]]))
    return "\n".join(out)


def main(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    print("## Summary (%d figures; %d goals met of %d)\n" % (
        len(rows), sum(1 for r in rows if r["met"]), sum(1 for r in rows if r["met"] is not None)))
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv[1])
