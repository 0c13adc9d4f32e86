#!/usr/bin/python3
"""Benchmark: microVMs on catalogue images against the guest they replaced,
and real workloads per tier, end to end through the real queue.

1. print(6*7), interleaved rounds, four series:
     legacy-cold / legacy-warm   the old guest: python3 inside the initramfs,
                                 no disk (rebuilt from today's guest and python
                                 image by legacy_guest.sh: the baseline)
     image-cold / image-warm     today's guest with the python image as a
                                 read-only virtio disk
   Reported as ratios image/legacy (targets: warm <= 1.1x, cold <= 1.2x).
2. Host memory: RSS of an idle pool VM's VMM, legacy vs image. The image is
   read through the host's page cache, shared by every VM; it should not
   add to the VMM's RSS.
3. Workloads per tier, p50 of a few rounds each:
     numpy   import numpy; print(numpy.arange(10).sum())   (python image)
     c++     g++ -O1 a small program, run it                (toolchain image)
   on the process, container and microVM tiers with the same image.

Usage: image_latency.py [ROUNDS] [WORK_ROUNDS]   (root; make images, make microvm-image)"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import live_pids_of  # noqa: E402
from cluster import Cluster  # noqa: E402
from microvm_latency import Resp, rss_kb  # noqa: E402

import msgpack  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
WORK_ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
UID_BASE = 69000
VM_UIDS = set(range(UID_BASE + 256, UID_BASE + 256 + 512))
GUEST = os.environ.get("AIRLOCK_MICROVM_IMAGE", "/var/lib/airlock/images/microvm")
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")
LEGACY = tempfile.mkdtemp(prefix="airlock-legacy-", dir="/var/tmp")
os.chmod(LEGACY, 0o755)

POLICY = """\
result_ttl_s: 600
lease_ms: 60000
tiers:
  legacy-cold: {{backend: microvm, max_attempts: 1, guest: {legacy}}}
  legacy-warm: {{backend: microvm, max_attempts: 1, guest: {legacy}, pool: 1,
                pool_max_idle_ms: 3600000}}
  image-cold: {{backend: microvm, max_attempts: 1, guest: {guest}, image: python}}
  image-warm: {{backend: microvm, max_attempts: 1, guest: {guest}, image: python, pool: 1,
               pool_max_idle_ms: 3600000}}
  proc: {{backend: process, max_attempts: 1, images: [python, toolchain]}}
  ctr: {{backend: container, max_attempts: 1, images: [python, toolchain]}}
  mvm: {{backend: microvm, max_attempts: 1, guest: {guest}, images: [python, toolchain]}}
"""
CPP = ("#include <iostream>\n#include <vector>\n#include <numeric>\n"
       "int main(){std::vector<int> v(100); std::iota(v.begin(), v.end(), 1);"
       " std::cout << std::accumulate(v.begin(), v.end(), 0) << std::endl;}\n")
SEQ = iter(range(1, 1 << 30))


def run(r, tier, want=b"42\n", **kw):
    jid = "img-%d-%d" % (os.getpid(), next(SEQ))
    job = {"v": 1, "id": jid, "tier": tier, "runtime": "python", "code": "print(6*7)"}
    job.update(kw)
    t0 = time.monotonic()
    r.call("XADD", "al:intake", "*", "job", msgpack.packb(job, use_bin_type=True))
    r.wait_end(jid, 300)
    ms = (time.monotonic() - t0) * 1000
    res = msgpack.unpackb(r.call("GET", "al:res:" + jid), raw=False)
    if res["status"] != "ok" or res["stdout"] != want:
        raise RuntimeError("%s job failed: %r" % (tier, res))
    return ms, res


def main():
    if os.geteuid() != 0:
        print("needs root")
        return 1
    subprocess.run([os.path.join(os.path.dirname(__file__), "legacy_guest.sh"), GUEST,
                    os.path.join(IMAGES, "python"), LEGACY], check=True)
    c = Cluster(policy=POLICY.format(legacy=LEGACY, guest=GUEST))
    try:
        c.scheduler()
        c.worker("bench-img", uid_base=UID_BASE, slots=1,
                 tiers="legacy-cold,legacy-warm,image-cold,image-warm,proc,ctr,mvm",
                 extra=("--images", IMAGES))
        r = Resp(c.sock)
        c.wait_for(lambda: len(live_pids_of(VM_UIDS)) == 2, timeout=30)
        time.sleep(3)
        lat = {k: [] for k in ("legacy-cold", "image-cold", "legacy-warm", "image-warm")}
        rss = {"legacy": [], "image": []}
        boot = {"legacy": [], "image": []}
        for i in range(ROUNDS + 1):  # round 0 warms caches and is dropped
            # the order alternates: neither series always runs second
            kinds = ("legacy", "image") if i % 2 else ("image", "legacy")
            for kind in kinds:
                ms, res = run(r, kind + "-cold")
                if i:
                    lat[kind + "-cold"].append(ms)
                    boot[kind].append(int(res["info"]["boot_ms"]))
            for kind in kinds:
                # nothing else boots meanwhile: the other pool's refill is done
                time.sleep(3.5)
                # the idle pool VMs: the warm job takes its pool's, whose VMM
                # then goes; its RSS while idle is the figure
                before = {int(p): rss_kb(int(p)) for p in live_pids_of(VM_UIDS)}
                ms, res = run(r, kind + "-warm")
                if res["info"]["boot"] != "warm":
                    raise RuntimeError("no pool VM for %s: %r" % (kind, res["info"]))
                gone = [p for p in before if not os.path.exists("/proc/%d" % p)]
                if i and len(gone) == 1:
                    rss[kind].append(before[gone[0]])
                if i:
                    lat[kind + "-warm"].append(ms)
        work = {}
        for tier in ("proc", "ctr", "mvm"):
            for name, kw, want in (
                    ("numpy", {"image": "python",
                               "code": "import numpy; print(numpy.arange(10).sum())",
                               "limits": {"wall_ms": 120000, "memory_bytes": 256 << 20}},
                     b"45\n"),
                    ("c++", {"image": "toolchain", "runtime": "sh",
                             "code": "g++ -O1 -o sum sum.cpp && ./sum",
                             "files": [{"path": "sum.cpp", "data": CPP.encode()}],
                             "limits": {"wall_ms": 240000, "memory_bytes": 512 << 20}},
                     b"5050\n")):
                work[(tier, name)] = [run(r, tier, want, **kw)[0] for _ in range(WORK_ROUNDS)]
    finally:
        c.close()
        subprocess.run(["rm", "-rf", LEGACY])

    p50 = {k: statistics.median(v) for k, v in lat.items()}
    print("microVM on the python catalogue image vs the initramfs python it replaced, "
          "print(6*7) end to end, %d interleaved rounds, %d CPUs" % (ROUNDS, os.cpu_count()))
    print("%-12s %9s %9s" % ("series", "p50 ms", "boot ms"))
    for k in lat:
        kind = k.split("-")[0]
        print("%-12s %9.1f %9s" % (k, p50[k], statistics.median(boot[kind]) if "cold" in k else "-"))
    print("image / legacy, warm: %.2fx (target <= 1.1x); cold: %.2fx (target <= 1.2x)"
          % (p50["image-warm"] / p50["legacy-warm"], p50["image-cold"] / p50["legacy-cold"]))
    if rss["legacy"] and rss["image"]:
        lm, im = statistics.median(rss["legacy"]) / 1024, statistics.median(rss["image"]) / 1024
        print("host memory per idle VM (VMM RSS): legacy %.0f MB, image %.0f MB (%.2fx; the "
              "image's %d MB are page cache, shared)"
              % (lm, im, im / lm, os.path.getsize(os.path.join(IMAGES, "python.ext4")) >> 20))
    print("\nworkloads end to end, p50 of %d (ms):" % WORK_ROUNDS)
    print("%-8s %10s %10s %10s" % ("job", "process", "container", "microvm"))
    for name in ("numpy", "c++"):
        print("%-8s %10.0f %10.0f %10.0f" % (name, *(statistics.median(work[(t, name)])
                                                     for t in ("proc", "ctr", "mvm"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
