#!/usr/bin/python3
"""Benchmark: end-to-end latency of print(1) on the container backend alone
(bundle, cgroup, runtime start, wait, delete, result) against the same OCI
runtime invoked directly (`runc run`) on the same bundle, and against
`podman run --rootfs` on the same root filesystem with equivalent limits, all
interleaved in the same rounds. Reports medians and ratios. Needs root,
runc, the toolchain image (make images) and, for its series, podman.
Usage: container_latency.py [N]

Podman runs without a user namespace (with one, its container root cannot
read the root-owned image) and with --rm: less isolation than the backend's,
so the comparison favours it.

The bare run's bundle is the backend's own config.json (kept with
bench_backend --bundle-copy) with three changes that a direct invocation
needs: the script is given with -c instead of on fd 3 (and without the
backend's first program, airlock-exec, which comes in as a descriptor: the
backend does one exec more), /work, /tmp and /dev/shm are plain tmpfs (the
job's tmpfs was removed with it), the CPU list bound on
/sys/devices/system/cpu/online is a file of the bare bundle's, and the
cgroup path is its own."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import series
import summary

BUILD = os.path.join(os.path.dirname(__file__), "..", "..", os.environ.get("BUILD", "build"))
BENCH = os.path.join(BUILD, "tests", "bench_backend")
N = int(sys.argv[1]) if len(sys.argv) > 1 else 60
RUNC = shutil.which("runc") or "/usr/sbin/runc"
IMAGE = os.path.join(os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images"), "toolchain")
PY = ["/usr/bin/python3", "-I", "-c", "print(1)"]
PODMAN = ["podman", "--runtime", RUNC, "--cgroup-manager", "cgroupfs", "run", "--rm", "--rootfs",
          "--network", "none", "--read-only", "--memory", "256m", "--memory-swap", "256m",
          "--pids-limit", "64", "--cpus", "1", "--cap-drop", "all",
          "--security-opt", "no-new-privileges", "--ulimit", "nofile=256:256",
          "--ulimit", "nproc=4096:4096", "--user", "1000:1000", IMAGE, *PY]


def main():
    tmp = tempfile.mkdtemp(prefix="airlock-bench-", dir="/var/tmp")
    os.chmod(tmp, 0o711)
    state = os.path.join(tmp, "state")
    kept = os.path.join(tmp, "kept.json")
    if not os.path.exists(os.path.join(IMAGE, ".airlock-image")):
        print("no toolchain image at %s: run `make images` first" % IMAGE)
        return 1
    img = ["--image", "toolchain", "--images", os.path.dirname(IMAGE)]
    p = subprocess.run([BENCH, "--backend", "container", "--n", "1", "--state-dir", state,
                        "--bundle-copy", kept, *img], capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr)
        return 1
    with open(kept) as f:
        cfg = json.load(f)
    cfg["process"]["args"] = PY
    own = ("/work", "/tmp", "/dev/shm")
    cfg["mounts"] = [m for m in cfg["mounts"] if m["destination"] not in own]
    for d in own:
        cfg["mounts"].append({"destination": d, "type": "tmpfs", "source": "tmpfs",
                              "options": ["nosuid", "nodev", "mode=1777", "size=65536k"]})
    # the job's CPU count (a file of its own bound on the CPU list, gone
    # with the job): the same, from a file of the bare bundle's
    online = os.path.join(tmp, "cpu-online")
    with open(online, "w") as f:
        f.write("0\n")
    os.chmod(online, 0o644)
    for m in cfg["mounts"]:
        if m["destination"] == "/sys/devices/system/cpu/online":
            m["source"] = online
    cfg["linux"]["cgroupsPath"] = "/airlock-bench-bare"
    bundle = os.path.join(tmp, "bare")
    os.makedirs(bundle)
    os.chmod(bundle, 0o711)
    with open(os.path.join(bundle, "config.json"), "w") as f:
        json.dump(cfg, f)
    root = os.path.join(tmp, "runc-root")
    bare = [RUNC, "--root", root, "run", "--bundle", bundle, "airlock-bench-bare"]
    # Two passes in this run, each interleaved: the backend against the bare
    # runtime, then against podman. Podman leaves a cleanup process running
    # after it returns (conmon's `podman container cleanup --rm`), which
    # would disturb the close comparison with the bare runtime.
    bare_base = os.path.join(tmp, "bare.txt")
    with open(bare_base, "w") as f:
        f.write("bare_runc\t" + "\t".join(bare) + "\n")
    st = series.run([BENCH, "--backend", "container", "--n", str(N), "--settle-ms", "150",
                     "--baselines", bare_base,
                     "--state-dir", state, *img], lambda: None)
    pod = None
    if st is not None and shutil.which("podman"):
        pod_base = os.path.join(tmp, "podman.txt")
        with open(pod_base, "w") as f:
            f.write("podman\t" + "\t".join([shutil.which("podman")] + PODMAN[1:]) + "\n")
        pod = series.run([BENCH, "--backend", "container", "--n", str(max(N // 2, 1)),
                          "--settle-ms", "150",
                          "--baselines", pod_base, "--state-dir", state, *img], lambda: None)
    subprocess.run(["rm", "-rf", tmp])
    if st is None:
        return 1
    series.table("container backend latency, print(1), %d interleaved rounds, %s" % (N, RUNC),
                 st, ("bare_runc", "container"), "bare_runc")
    ratio = series.paired(st, "container", "bare_runc")
    print("container / bare runc: %.2fx of the medians, %.2fx per round (target <= 1.05x)"
          % (series.p50(st["container"]) / series.p50(st["bare_runc"]), ratio))
    summary.record("container backend, print(1), p50", "%.2f ms" % series.p50(st["container"]),
                   "bare runc %.2f ms" % series.p50(st["bare_runc"]), ratio, ("<=", 1.05, "ratio"))
    if pod is None:
        print("podman: not installed; no comparison made")
        return 0
    print()
    series.table("against podman run --rootfs, %d interleaved rounds" % max(N // 2, 1),
                 pod, ("container", "podman"), "container")
    print("podman / container: %.2fx of the medians, %.2fx per round (target >= 3x)"
          % (series.p50(pod["podman"]) / series.p50(pod["container"]),
             series.paired(pod, "podman", "container")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
