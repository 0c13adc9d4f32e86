"""Packages built here for the egress tests' package indexes: a pure-Python
wheel (a correct RECORD) and an npm tarball with the packument an npm
registry serves for it (dist.tarball, shasum, integrity)."""
import base64
import hashlib
import io
import json
import tarfile
import zipfile


def wheel(name, version, files):
    """The wheel of name (a distribution name, '-' in it is '_' in its
    files) at version holding files ({path: bytes}) and its dist-info."""
    dist = "%s-%s.dist-info" % (name.replace("-", "_"), version)
    files = dict(files)
    files[dist + "/METADATA"] = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
                                 % (name, version)).encode()
    files[dist + "/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: airlock-test\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += "%s,sha256=%s,%d\n" % (path, digest, len(data))
    record += dist + "/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(dist + "/RECORD", record)
    return buf.getvalue()


def wheel_name(name, version):
    return "%s-%s-py3-none-any.whl" % (name.replace("-", "_"), version)


def npm_package(name, version, index_js, tarball_url):
    """(tarball bytes, packument dict) for an npm package whose main is
    index.js, its tarball served at tarball_url."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, data in (("package/package.json",
                            json.dumps({"name": name, "version": version,
                                        "main": "index.js"}).encode()),
                           ("package/index.js", index_js)):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    tgz = buf.getvalue()
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
    meta = {"name": name, "dist-tags": {"latest": version},
            "versions": {version: {"name": name, "version": version, "main": "index.js",
                                   "dist": {"tarball": tarball_url,
                                            "shasum": hashlib.sha1(tgz).hexdigest(),
                                            "integrity": integrity}}}}
    return tgz, meta
