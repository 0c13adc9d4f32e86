#!/usr/bin/python3
"""airlock images: what each catalogue image holds. On a catalogue made
here (an image's recipe packages, its dpkg status, its hash): the listing
in text and JSON, a package the image lacks shown as such, the guest's
directory and non-images passed over; bad input (no directory, an empty
one, an unknown option) exits with its code and says why. Then on the real
catalogue (make images): every shipped recipe is listed with each of its
packages installed and the hash results report."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from altest import Tap  # noqa: E402

t = Tap()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.path.join(ROOT, os.environ.get("BUILD", "build"), "airlock")
IMAGES = os.environ.get("AIRLOCK_IMAGES", "/var/lib/airlock/images")


def images(*a):
    p = subprocess.run([CLI, "images", *a], capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def make(root, name, packages, installed, ext4=0):
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "var/lib/dpkg"))
    with open(os.path.join(d, ".airlock-image"), "w") as f:
        f.write("sha256:%064x\n" % len(name))
    with open(os.path.join(d, ".inputs"), "w") as f:
        f.write("format 4\nsuite bookworm\npackages %s\nscript none\n" % ",".join(packages))
    with open(os.path.join(d, "var/lib/dpkg/status"), "w") as f:
        for pkg, (ver, st) in installed.items():
            f.write("Package: %s\nStatus: %s\nPriority: optional\nVersion: %s\n"
                    "Description: x\n more\n\n" % (pkg, st, ver))
    if ext4:
        with open(os.path.join(root, name + ".ext4"), "wb") as f:
            f.truncate(ext4)


with tempfile.TemporaryDirectory() as root:
    make(root, "sci", ["python3", "python3-numpy", "python3-gone"],
         {"python3": ("3.11.2-1+b1", "install ok installed"),
          "python3-numpy": ("1:1.24.2-1", "install ok installed"),
          "python3-gone": ("1.0", "deinstall ok config-files"),
          "libc6": ("2.36-9", "install ok installed")}, ext4=3 << 20)
    make(root, "alpha", ["nodejs"], {"nodejs": ("18.20.4", "install ok installed")})
    os.makedirs(os.path.join(root, "microvm"))  # the guest: no dpkg status
    with open(os.path.join(root, "microvm", ".airlock-image"), "w") as f:
        f.write("sha256:00\n")
    os.makedirs(os.path.join(root, "scratch"))  # not an image at all
    rc, out, err = images("--dir", root)
    t.ok(rc == 0 and out.splitlines() == [
        "alpha          sha256:%064x  no block image (microVMs cannot use it)" % 5,
        "  nodejs                     18.20.4",
        "sci            sha256:%064x  3 MiB block image" % 3,
        "  python3                    3.11.2-1+b1",
        "  python3-numpy              1:1.24.2-1",
        "  python3-gone               NOT INSTALLED"],
         "1: the listing: images by name, hash, block image size, each recipe package's "
         "version; a package removed (config-files) shows NOT INSTALLED; the guest and a "
         "plain directory are passed over", (rc, out, err))
    rc, out, err = images("--dir", root, "--json")
    doc = json.loads(out) if rc == 0 else None
    t.ok(doc and [d["name"] for d in doc] == ["alpha", "sci"] and
         doc[1]["packages"] == {"python3": "3.11.2-1+b1", "python3-numpy": "1:1.24.2-1",
                                "python3-gone": None} and
         doc[1]["size_bytes"] == 3 << 20 and doc[0]["size_bytes"] == -1,
         "2: --json: the same as data (null for a package not installed, -1 without a block "
         "image)", (rc, out, err))
    empty = os.path.join(root, "scratch")
    bad = [images("--dir", os.path.join(root, "nope")), images("--dir", empty),
           images("--frob")]
    t.ok([b[0] for b in bad] == [66, 66, 2] and "cannot read" in bad[0][2] and
         "no image in" in bad[1][2] and
         "unknown option --frob (see airlock images --help)" in bad[2][2],
         "3: no such directory 66, no image in it 66 (saying how to build them), an unknown "
         "option 2, named, with where its usage is", bad)

shipped = sorted(d for d in os.listdir(os.path.join(ROOT, "deploy/images/recipes")))
if all(os.path.exists(os.path.join(IMAGES, n, ".airlock-image")) for n in shipped):
    rc, out, err = images("--json")
    got = {d["name"]: d for d in json.loads(out)} if rc == 0 else {}
    missing = {n: [p for p, v in got.get(n, {}).get("packages", {"?": None}).items() if not v]
               for n in shipped}
    hashes = {n: open(os.path.join(IMAGES, n, ".airlock-image")).read().strip()
              for n in shipped}
    t.ok(set(shipped) <= set(got) and not any(missing.values()) and
         all(got[n]["hash"] == hashes[n] and got[n]["size_bytes"] > 0 for n in shipped) and
         {"python3-matplotlib", "python3-scipy", "python3-sklearn", "python3-pandas"} <=
         set(got["datascience"]["packages"]),
         "4: the real catalogue (%s): each recipe's every package installed, its hash the one "
         "results report, a block image each; datascience holds matplotlib, scipy, "
         "scikit-learn and pandas" % ", ".join(shipped), (missing, rc, err))
else:
    t.ok(False, "4: the real catalogue is built (make images; tests/run.sh builds it as root)")
sys.exit(t.done())
