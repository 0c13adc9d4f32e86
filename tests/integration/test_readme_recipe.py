#!/usr/bin/python3
"""The README's own recipe block ("To add one, make a recipe and build
it"), extracted from README.md and run as written (bash, as root; `sudo`
is the identity where the machine has none, as on a fresh Debian as
root), in a copy of deploy/images so that the checkout stays as it was.
Then the image it built (ruby, bundler) is used as the README says: listed
in a tier's images:, a job on it on the process, container and microVM
tiers prints the same, and `airlock images` lists it with its packages.
The image is removed after."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import CLI, Tap, need_root  # noqa: E402
from cluster import Cluster  # noqa: E402
from policies import DEFAULTS, policy, tier_def  # noqa: E402

t = Tap()
need_root("debootstrap and the sandboxes")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
IMAGES = "/var/lib/airlock/images"
readme = open(os.path.join(ROOT, "README.md")).read()
m = re.search(r"To add one, make a\s+recipe and build it:\s*```sh\n(.*?)^```", readme, re.M | re.S)
block = m.group(1) if m else ""
t.ok("deploy/images/build.sh ruby" in block and "recipes/ruby/packages" in block,
     "the README's recipe block is found", block)
after = readme[m.end():m.end() + 300] if m else ""
t.ok("images:" in after, "the README says to list the image in a tier's images:", after)

made = [os.path.join(IMAGES, n) for n in ("ruby", "ruby.ext4", "ruby.log", "ruby.new")]
if any(os.path.exists(p) for p in made[:2]):
    t.ok(False, "no ruby image in %s before the test (it removes what it builds)" % IMAGES)
    sys.exit(t.done())
tmp = tempfile.mkdtemp(prefix="airlock-recipe-", dir="/var/tmp")
c = None
try:
    shutil.copytree(os.path.join(ROOT, "deploy", "images"), os.path.join(tmp, "deploy", "images"),
                    ignore=shutil.ignore_patterns("ruby"))
    script = ("command -v sudo >/dev/null || sudo() { \"$@\"; }\nset -e\n" + block)
    p = subprocess.run(["bash", "-c", script], cwd=tmp, capture_output=True, text=True,
                       timeout=900)
    t.ok(p.returncode == 0 and os.path.isdir(os.path.join(IMAGES, "ruby")) and
         os.path.isfile(os.path.join(IMAGES, "ruby.ext4")) and
         not os.path.exists(os.path.join(ROOT, "deploy", "images", "recipes", "ruby")),
         "the block runs as written: the recipe made, the image built (a tree and its "
         "ext4), the checkout untouched", (p.returncode, p.stdout[-1500:], p.stderr[-1500:]))

    keys = {"images": ["ruby"], "image": "ruby", "defaults": dict(DEFAULTS, wall_ms=60000)}
    c = Cluster(policy=policy(tier_def("rb", "process", **keys),
                              tier_def("rb-ctr", "container", **keys),
                              tier_def("rb-vm", "microvm", **keys)))
    c.scheduler()
    c.worker("w1", slots=2, tiers="rb,rb-ctr,rb-vm")
    code = "ruby -e 'puts [1, 2, 3].sum * 7'; bundle --version | cut -d' ' -f1-2"
    outs = {}
    for tier in ("rb", "rb-ctr", "rb-vm"):
        r = c.run_job({"v": 1, "id": "rb-%d-%s" % (os.getpid(), tier), "tier": tier,
                       "runtime": "sh", "code": code}, timeout=300) or {}
        outs[tier] = (r.get("status"), r.get("stdout", b"").decode(errors="replace"),
                      r.get("stderr", b"").decode(errors="replace")[-300:])
    t.ok(all(o[0] == "ok" and o[1].startswith("42\nBundler version") for o in outs.values())
         and len({o[1] for o in outs.values()}) == 1,
         "a job on the new image prints the same on process, container and microVM", outs)
    p = subprocess.run([CLI, "images"], capture_output=True, text=True)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("ruby")]
    t.ok(p.returncode == 0 and line and "ruby" in p.stdout and "bundler" in p.stdout,
         "`airlock images` lists it with its packages", p.stdout[-1500:])
finally:
    if c:
        c.close()
    for path in made:
        subprocess.run(["rm", "-rf", path])
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(t.done())
