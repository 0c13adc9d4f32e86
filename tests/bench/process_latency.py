#!/usr/bin/python3
"""Benchmark: end-to-end latency of print(1) on the process backend alone,
against bare `/usr/bin/python3 -I -c 'print(1)'` and bubblewrap set up with
comparable isolation (all namespaces, nobody, no capabilities, the same
seccomp filter, a fresh /tmp and /proc), interleaved in the same rounds.
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
    st = series.run([BENCH, "--n", str(N), "--baselines", base, "--state-dir",
                     os.path.join(tmp, "state")], lambda: subprocess.run(["rm", "-rf", tmp]))
    if st is None:
        return 1
    series.table("process backend latency, print(1), %d interleaved rounds" % N, st,
                 ("bare_python", "bubblewrap", "process"), "bare_python")
    ratio = series.paired(st, "process", "bare_python")
    print("process / bare python: %.2fx of the medians, %.2fx per round (target <= 1.05x)"
          % (series.p50(st["process"]) / series.p50(st["bare_python"]), ratio))
    summary.record("process backend, print(1), p50", "%.2f ms" % series.p50(st["process"]),
                   "bare python %.2f ms" % series.p50(st["bare_python"]), ratio,
                   ("<=", 1.05, "ratio"))
    print("process / bubblewrap: %.2fx of the medians, %.2fx per round"
          % (series.p50(st["process"]) / series.p50(st["bubblewrap"]),
             series.paired(st, "process", "bubblewrap")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
