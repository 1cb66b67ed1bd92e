"""The package's build backend (PEP 517), in the source tree so that
``pip install ./python`` needs nothing from the network: no setuptools or
wheel to fetch into pip's isolated build environment (pyproject.toml asks
for none), only this file and the standard library.

The wheel holds the hamer package and the libhamer.so the package was
built with, copied in as ``hamer/libhamer.so.0`` (the place hamer._lib
looks after $HAMER_LIB), so the installed package needs neither
$HAMER_LIB nor an installed library. The library comes from a built tree:
the ``build`` config setting (``pip install ./python --config-settings
build=DIR``), else $HAMER_BUILD, else ``<repo>/build`` (``cmake -B
build``). Its version (include/hamer_version.h generated there) must equal
the package's (hamer/_version.py): a mismatch, or no library, stops the
build with one line saying what to do. The wheel's tag is this platform's
(the library is native code; the Python code needs any Python 3).
"""

import base64
import hashlib
import io
import os
import re
import sysconfig
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
NAME = "hamer"


class BuildError(Exception):
    pass


def _version():
    text = (HERE / "hamer" / "_version.py").read_text()
    m = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if not m:
        raise BuildError("hamer/_version.py holds no __version__")
    return m.group(1)


def _build_dir(config_settings):
    d = (config_settings or {}).get("build") or os.environ.get("HAMER_BUILD") or str(REPO / "build")
    return Path(d).resolve()


def _library(config_settings, version):
    """The built library file and the build folder it is in."""
    build = _build_dir(config_settings)
    lib = build / "libhamer.so.0"
    if not lib.exists():
        raise BuildError(f"no {lib}: build the library first (cmake -B build && cmake --build build -j), or name "
                         f"the build folder with HAMER_BUILD=DIR or --config-settings build=DIR")
    header = build / "include" / "hamer_version.h"
    m = re.search(r'#define HAMER_VERSION_STRING "([^"]+)"', header.read_text()) if header.exists() else None
    if not m:
        raise BuildError(f"{header}: no HAMER_VERSION_STRING (is {build} a hamer.c build folder?)")
    if m.group(1) != version:
        raise BuildError(f"the library in {build} is version {m.group(1)}, the package {version}: rebuild it from "
                         f"this source tree")
    return lib.resolve(), build


def _metadata(version):
    readme = (HERE / "README.md").read_text()
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
            "Summary: Python binding (ctypes) of hamer.c, a C implementation of the HaMeR hand-mesh regressor\n"
            "Requires-Python: >=3.8\nRequires-Dist: numpy\n"
            "Classifier: Programming Language :: Python :: 3\nClassifier: Operating System :: POSIX :: Linux\n"
            "Classifier: Typing :: Typed\n"
            f"Description-Content-Type: text/markdown\n\n{readme}")


def _tag():
    return "py3-none-" + re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _package_files():
    """(name in the wheel, bytes) of the Python package: its .py files and
    py.typed; a libhamer.so left in the folder is not taken (the build's is)."""
    out = []
    for f in sorted((HERE / NAME).iterdir()):
        if f.is_file() and (f.suffix == ".py" or f.name == "py.typed"):
            out.append((f"{NAME}/{f.name}", f.read_bytes()))
    return out


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    lib, build = _library(config_settings, version)
    dist = f"{NAME}-{version}.dist-info"
    files = _package_files()
    files.append((f"{NAME}/libhamer.so.0", lib.read_bytes()))
    files.append((f"{dist}/METADATA", _metadata(version).encode()))
    files.append((f"{dist}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: hamer.c python/_hamer_build.py\n"
                                    f"Root-Is-Purelib: false\nTag: {_tag()}\n").encode()))
    files.append((f"{dist}/top_level.txt", f"{NAME}\n".encode()))
    record = "\n".join([_record_line(n, d) for n, d in files] + [f"{dist}/RECORD,,"]) + "\n"
    files.append((f"{dist}/RECORD", record.encode()))
    name = f"{NAME}-{version}-{_tag()}.whl"
    path = Path(wheel_directory) / name
    tmp = path.with_name("." + name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files:
            info = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if n.endswith(".so.0") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, d)
    os.replace(tmp, path)
    return name


def build_sdist(sdist_directory, config_settings=None):
    """The Python sources alone (a wheel built from it needs a built
    library named by HAMER_BUILD or --config-settings build=DIR)."""
    version = _version()
    base = f"{NAME}-{version}"
    name = f"{base}.tar.gz"
    path = Path(sdist_directory) / name
    members = [(f"{base}/{n}", d) for n, d in _package_files()]
    for extra in ("pyproject.toml", "README.md", "_hamer_build.py"):
        members.append((f"{base}/{extra}", (HERE / extra).read_bytes()))
    members.append((f"{base}/PKG-INFO", _metadata(version).encode()))
    with tarfile.open(path, "w:gz") as t:
        for n, d in members:
            info = tarfile.TarInfo(n)
            info.size, info.mode = len(d), 0o644
            t.addfile(info, io.BytesIO(d))
    return name


def _fail(e):
    raise SystemExit(f"hamer: {e}")


for _hook in ("build_wheel", "build_sdist"):
    def _wrap(fn):
        def hook(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except BuildError as e:
                _fail(e)
        hook.__name__, hook.__doc__ = fn.__name__, fn.__doc__
        return hook
    globals()[_hook] = _wrap(globals()[_hook])
