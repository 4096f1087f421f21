"""hctune_backend: the package's own PEP 517 build backend, so that
`pip install ./python` needs nothing from an index.

With build isolation (pip's default) pip installs the backend's
[build-system] requires into a fresh environment first; setuptools there
means an index, or a wheel cache, or --no-build-isolation.  This backend
requires nothing: pyproject.toml names it with `requires = []` and
`backend-path = ["_backend"]` (PEP 517's in-tree backends), and it writes
the wheel itself: the hctune/ package is pure Python (ctypes), so a wheel
is a zip of its .py files with METADATA, WHEEL and RECORD (the binary
distribution format, PEP 427 / PyPA's spec).

Hooks: build_wheel, build_sdist, build_editable (PEP 660: a .pth file
pointing at this folder), prepare_metadata_for_build_wheel and
_for_build_editable, and the get_requires_for_* hooks, which return [].
The project's metadata is read from pyproject.toml ([project]): tomllib
from Python 3.11, else a reader of the plain `key = "string"` lines and
the one-level tables this file uses.  Tested by python/tests/test_backend.py.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "hctune"
# A fixed timestamp in the archives: the same sources give the same wheel.
EPOCH = (1980, 1, 1, 0, 0, 0)


def _project():
    """[project] of pyproject.toml as a dict."""
    path = os.path.join(ROOT, "pyproject.toml")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        import tomllib
    except ImportError:
        return _mini_toml(raw.decode("utf-8"))["project"]
    return tomllib.loads(raw.decode("utf-8"))["project"]


def _mini_toml(text):
    """The subset of TOML pyproject.toml is written in (before Python 3.11
    has tomllib): [table] and [a.b] headers, key = "string", key = [strings],
    key = {k = "v"} with string values.  Anything else raises ValueError
    naming the line, never a silent wrong value."""
    out, table = {}, None
    string = r'"((?:[^"\\]|\\.)*)"'
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]", line)
        if m:
            table = out
            for part in m.group(1).split("."):
                table = table.setdefault(part, {})
            continue
        m = re.fullmatch(r"([A-Za-z0-9_-]+)\s*=\s*(.+)", line)
        if not m or table is None:
            raise ValueError("pyproject.toml:%d: not understood without tomllib: %s" % (n, line))
        key, value = m.group(1), m.group(2).strip()
        if re.fullmatch(string, value):
            table[key] = re.fullmatch(string, value).group(1)
        elif re.fullmatch(r"\[\s*(%s\s*,?\s*)*\]" % string, value):
            table[key] = re.findall(string, value)
        elif re.fullmatch(r"\{\s*[A-Za-z0-9_-]+\s*=\s*%s\s*\}" % string, value):
            k, v = re.fullmatch(r"\{\s*([A-Za-z0-9_-]+)\s*=\s*%s\s*\}" % string, value).groups()
            table[key] = {k: v}
        else:
            raise ValueError("pyproject.toml:%d: not understood without tomllib: %s" % (n, line))
    return out


def _metadata():
    """METADATA (core metadata 2.1) of the project, as text."""
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % p["version"]]
    if p.get("description"):
        lines.append("Summary: %s" % p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: %s" % p["requires-python"])
    lic = p.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append("License: %s" % lic["text"])
    for dep in p.get("dependencies", []):
        lines.append("Requires-Dist: %s" % dep)
    for extra, deps in sorted(p.get("optional-dependencies", {}).items()):
        lines.append("Provides-Extra: %s" % extra)
        for dep in deps:
            lines.append('Requires-Dist: %s; extra == "%s"' % (dep, extra))
    body = ""
    readme = p.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _dist_info():
    p = _project()
    return "%s-%s.dist-info" % (p["name"].replace("-", "_"), p["version"])


def _wheel_name():
    p = _project()
    return "%s-%s-py3-none-any.whl" % (p["name"].replace("-", "_"), p["version"])


def _package_files():
    """(path in the wheel, path on disk) for every .py file of hctune/."""
    out = []
    top = os.path.join(ROOT, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                disk = os.path.join(dirpath, name)
                out.append((os.path.relpath(disk, ROOT).replace(os.sep, "/"), disk))
    if not out:
        raise RuntimeError("hctune_backend: no .py files under %s" % top)
    return out


def _meta_files():
    wheel = ("Wheel-Version: 1.0\nGenerator: hctune_backend\nRoot-Is-Purelib: true\n"
             "Tag: py3-none-any\n")
    return {"METADATA": _metadata(), "WHEEL": wheel}


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _write_wheel(directory, entries):
    """Writes the wheel of `entries` ({name: bytes}, the package's files or
    an editable wheel's .pth) with the .dist-info, RECORD last."""
    info = _dist_info()
    for name, text in _meta_files().items():
        entries["%s/%s" % (info, name)] = text.encode("utf-8")
    record = [_record_line(n, d) for n, d in entries.items()]
    record.append("%s/RECORD,," % info)
    entries["%s/RECORD" % info] = ("\n".join(record) + "\n").encode("utf-8")
    name = _wheel_name()
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in entries.items():
            zi = zipfile.ZipInfo(n, EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def _write_metadata(directory):
    info = os.path.join(directory, _dist_info())
    os.makedirs(info, exist_ok=True)
    for name, text in _meta_files().items():
        with open(os.path.join(info, name), "w", encoding="utf-8") as f:
            f.write(text)
    return _dist_info()


# ---- PEP 517 / PEP 660 hooks ----------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = {}
    for name, disk in _package_files():
        with open(disk, "rb") as f:
            entries[name] = f.read()
    return _write_wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel holding one .pth file that puts this folder on sys.path."""
    return _write_wheel(wheel_directory, {"_hctune_editable.pth": (ROOT + "\n").encode("utf-8")})


def build_sdist(sdist_directory, config_settings=None):
    """NAME-VERSION.tar.gz: pyproject.toml, README.md, the backend and the
    package, with PKG-INFO (the metadata) at its top."""
    p = _project()
    base = "%s-%s" % (p["name"].replace("-", "_"), p["version"])
    files = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml"))]
    if p.get("readme"):
        files.append((p["readme"], os.path.join(ROOT, p["readme"])))
    files.append(("_backend/hctune_backend.py", os.path.abspath(__file__)))
    files += _package_files()
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        def add(arcname, data):
            ti = tarfile.TarInfo("%s/%s" % (base, arcname))
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 315532800  # EPOCH in seconds, UTC
            t.addfile(ti, io.BytesIO(data))
        add("PKG-INFO", _metadata().encode("utf-8"))
        for arcname, disk in files:
            with open(disk, "rb") as f:
                add(arcname, f.read())
    return name
