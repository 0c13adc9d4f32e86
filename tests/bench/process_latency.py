#!/usr/bin/python3
"""Benchmark: end-to-end latency of print(1) on the process backend alone,
against bare `/usr/bin/python3 -I -c 'print(1)'` and bubblewrap set up with
comparable isolation (all namespaces, nobody, no capabilities, the same
seccomp filter, a fresh /tmp and /proc), interleaved in the same rounds.
Two passes of N rounds: the jobs as they come (after the first, each runs in
the warm interpreter its sandbox started: docs/backends/process.md), then
jobs with PYTHONHASHSEED=0, which python3 reads at start-up, so each runs
cold (in a python3 started for it), each pass against its own baselines.
Reports medians and ratios. Needs root. Usage: process_latency.py [N]"""
import os
import subprocess
import sys
import tempfile

import series
import summary

BUILD = os.path.join(os.path.dirname(__file__), "..", "..", os.environ.get("BUILD", "build"))
BENCH = os.path.join(BUILD, "tests", "bench_backend")
N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
PY = ["/usr/bin/python3", "-I", "-c", "print(1)"]


def main():
    tmp = tempfile.mkdtemp(prefix="airlock-bench-", dir="/var/tmp")
    bpf = os.path.join(tmp, "filter.bpf")
    subprocess.run([BENCH, "--dump-seccomp", bpf], check=True)
    bwrap = ["/usr/bin/bwrap", "--unshare-all", "--die-with-parent", "--new-session",
             "--cap-drop", "ALL", "--uid", "65534", "--gid", "65534",
             "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
             "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
             "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
             "--tmpfs", "/tmp", "--chdir", "/tmp", "--clearenv",
             "@fd9=" + bpf, "--seccomp", "9", *PY]
    lines = ["bare_python\t" + "\t".join(PY), "bubblewrap\t" + "\t".join(bwrap)]
    base = os.path.join(tmp, "baselines.txt")
    with open(base, "w") as f:
        f.write("\n".join(lines) + "\n")
    for label, env in (("warm", []), ("cold", ["--env", "PYTHONHASHSEED=0"])):
        st = series.run([BENCH, "--n", str(N), "--baselines", base, "--state-dir",
                         os.path.join(tmp, "state"), *env], lambda: None)
        if st is None:
            subprocess.run(["rm", "-rf", tmp])
            return 1
        series.table("process backend latency, print(1), %d interleaved rounds, %s"
                     % (N, "the jobs as they come (the warm interpreter)" if label == "warm"
                        else "each job cold (PYTHONHASHSEED set: read at start-up)"), st,
                     ("bare_python", "bubblewrap", "process"), "bare_python")
        ratio = series.paired(st, "process", "bare_python")
        print("process (%s) / bare python: %.2fx of the medians, %.2fx per round%s"
              % (label, series.p50(st["process"]) / series.p50(st["bare_python"]), ratio,
                 " (target <= 1.05x)" if label == "warm" else ""))
        summary.record("process backend, print(1), p50%s" % (
            "" if label == "warm" else ", a cold job (no warm interpreter)"),
            "%.2f ms" % series.p50(st["process"]),
            "bare python %.2f ms" % series.p50(st["bare_python"]), ratio,
            ("<=", 1.05, "ratio") if label == "warm" else None)
        print("process (%s) / bubblewrap: %.2fx of the medians, %.2fx per round"
              % (label, series.p50(st["process"]) / series.p50(st["bubblewrap"]),
                 series.paired(st, "process", "bubblewrap")))
    subprocess.run(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())
