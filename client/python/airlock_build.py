"""The package's own build backend (PEP 517, PEP 660), standard library only.

setuptools before 70.1 needs the separate `wheel` package to build a wheel,
which an ordinary venv does not have and cannot fetch without an index:
`pip install ./client/python` failed there with "invalid command
'bdist_wheel'". A pure-Python package of four modules needs no more than a
zip file with its metadata, so this backend writes one, from the [project]
table of pyproject.toml (read with tomllib; on Python < 3.11 it hands the
build to setuptools, as before). No build requirement: pip installs it
offline, with or without build isolation."""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import tomllib
except ImportError:  # Python < 3.11: setuptools (and wheel) build it
    tomllib = None
    from setuptools import build_meta as _fallback


def _project():
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _dist(p):
    return "%s-%s" % (p["name"].replace("-", "_"), p["version"])


def _metadata(p):
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"],
             "Summary: " + p.get("description", "")]
    if "requires-python" in p:
        lines.append("Requires-Python: " + p["requires-python"])
    if "text" in p.get("license", {}):
        lines.append("License: " + p["license"]["text"])
    for dep in p.get("dependencies", []):
        lines.append("Requires-Dist: " + dep)
    for extra, deps in sorted(p.get("optional-dependencies", {}).items()):
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s ; extra == "%s"' % (d, extra) for d in deps]
    readme = p.get("readme")
    body = ""
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(HERE, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _entry_points(p):
    scripts = p.get("scripts", {})
    if not scripts:
        return None
    return "[console_scripts]\n" + "".join("%s = %s\n" % kv for kv in sorted(scripts.items()))


def _package_files():
    """(path in the wheel, bytes) of every module of the package."""
    out = []
    for root, dirs, files in os.walk(os.path.join(HERE, "airlock")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out.append((os.path.relpath(full, HERE).replace(os.sep, "/"), f.read()))
    return out


def _write_wheel(directory, contents):
    """A py3-none-any wheel of contents [(path, bytes)] plus the metadata;
    returns its file name."""
    p = _project()
    dist = _dist(p)
    info = dist + ".dist-info"
    files = list(contents)
    files.append((info + "/METADATA", _metadata(p).encode()))
    files.append((info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: airlock_build\n"
                  b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    eps = _entry_points(p)
    if eps:
        files.append((info + "/entry_points.txt", eps.encode()))
    record = io.StringIO()
    for path, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write("%s,sha256=%s,%d\n" % (path, digest, len(data)))
    record.write(info + "/RECORD,,\n")
    files.append((info + "/RECORD", record.getvalue().encode()))
    name = dist + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            zi = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return [] if tomllib else _fallback.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    return [] if tomllib else _fallback.get_requires_for_build_sdist(config_settings)


def get_requires_for_build_editable(config_settings=None):
    return [] if tomllib else _fallback.get_requires_for_build_editable(config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if not tomllib:
        return _fallback.build_wheel(wheel_directory, config_settings, metadata_directory)
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """pip install -e: a .pth file that puts this directory on sys.path."""
    if not tomllib:
        return _fallback.build_editable(wheel_directory, config_settings, metadata_directory)
    return _write_wheel(wheel_directory, [("airlock_client.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    if not tomllib:
        return _fallback.build_sdist(sdist_directory, config_settings)
    p = _project()
    dist = _dist(p)
    name = dist + ".tar.gz"
    members = [("pyproject.toml", None), ("airlock_build.py", None), (p.get("readme"), None)]
    members += [(path, data) for path, data in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        pkg_info = _metadata(p).encode()
        ti = tarfile.TarInfo(dist + "/PKG-INFO")
        ti.size = len(pkg_info)
        tar.addfile(ti, io.BytesIO(pkg_info))
        for path, data in members:
            if not path:
                continue
            if data is None:
                with open(os.path.join(HERE, path), "rb") as f:
                    data = f.read()
            ti = tarfile.TarInfo(dist + "/" + path)
            ti.size = len(data)
            ti.mode = 0o644
            tar.addfile(ti, io.BytesIO(data))
    return name
