"""`pip install ./python` without network, from a built tree, into a fresh
virtual environment: the installed package finds the library it was built
with (bundled in the wheel by python/_hamer_build.py), is typed (py.typed,
every public signature annotated), and its namespace holds only
``__all__`` (and its private submodules).

The install runs with --no-index and a proxy that refuses every
connection, so any network access would fail it; the venv sees the
system's numpy (--system-site-packages), the package's one dependency.
"""

import inspect
import json
import os
import subprocess
import sys
import typing

import numpy as np
import pytest

from conftest import BUILD, REPO, checkpoint_path, describe, python_child_env, run_hamer
from detect.common import shared_images

PHOTO = "hamer_example_5.jpg"
BOX = [600, 490, 780, 870]
OFFLINE = {"PIP_NO_INDEX": "1", "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("HAMER_LIB", "PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update(OFFLINE, HAMER_NO_CACHE="1", **extra)
    return env


def run(cmd, cwd, env, timeout=300):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    d = tmp_path_factory.mktemp("venv")
    proc = run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", d / "v"], d, clean_env())
    assert proc.returncode == 0, describe(proc)
    proc = run([d / "v" / "bin" / "python", "-m", "pip", "install", "--no-index", REPO / "python"], d,
               clean_env(HAMER_BUILD=str(BUILD)))
    assert proc.returncode == 0, describe(proc)
    return d / "v" / "bin" / "python"


def test_installed_package_uses_its_own_library(venv, tmp_path, hamer_bin):
    """From another folder, with neither HAMER_LIB nor PYTHONPATH: the
    library is the one in the package, of the build's version, and a
    prediction equals `hamer run`'s."""
    ckpt, photo = checkpoint_path("d2h2"), shared_images() / PHOTO
    out = tmp_path / "r.json"
    proc = run_hamer(["run", "--model", ckpt, "--image", photo, "--box", ",".join(map(str, BOX)) + ":left",
                      "--output", out])
    assert proc.returncode == 0, describe(proc)
    want = json.loads(out.read_text())["hands"][0]["keypoints_2d"]
    script = f"""
import json, os, hamer
lib = hamer.library_path()
assert os.path.realpath(lib) == os.path.realpath(os.path.join(os.path.dirname(hamer.__file__), "libhamer.so.0")), lib
assert hamer.library_version() == hamer.__version__, (hamer.library_version(), hamer.__version__)
with hamer.Model({str(ckpt)!r}) as m:
    (h,) = m.predict({str(photo)!r}, [{BOX}], is_right=False)
print(json.dumps({{"lib": lib, "file": hamer.__file__, "kp": h["keypoints_2d"].tolist()}}))
"""
    proc = run([venv, "-c", script], tmp_path, python_child_env(clean_env()))
    assert proc.returncode == 0, describe(proc)
    got = json.loads(proc.stdout)
    assert "site-packages" in got["file"] and not got["file"].startswith(str(REPO)), got["file"]
    assert np.array_equal(np.float32(got["kp"]), np.float32(want))  # float32 in both, printed differently


def test_typed_and_clean_namespace(venv, tmp_path):
    script = """
import json, os, hamer
print(json.dumps({"dir": [n for n in dir(hamer) if not n.startswith("__")], "all": hamer.__all__,
                  "typed": os.path.exists(os.path.join(os.path.dirname(hamer.__file__), "py.typed"))}))
"""
    proc = run([venv, "-c", script], tmp_path, python_child_env(clean_env()))
    assert proc.returncode == 0, describe(proc)
    got = json.loads(proc.stdout)
    assert got["typed"]
    private = {"_lib", "_model", "_folder", "_version"}
    assert set(got["dir"]) == (set(got["all"]) - {"__version__"}) | private, set(got["dir"]) ^ set(got["all"])
    for leak in ("ctypes", "json", "np", "os", "signal", "threading", "contextlib"):
        assert leak not in got["dir"]


def public_callables():
    sys.path.insert(0, str(REPO / "python"))
    try:
        import hamer
    finally:
        sys.path.pop(0)
    out = []
    for name in hamer.__all__:
        obj = getattr(hamer, name)
        if inspect.isfunction(obj):
            out.append((name, obj))
        elif inspect.isclass(obj) and obj.__module__ == "hamer" and not issubclass(obj, Exception):
            for m, fn in vars(obj).items():
                if isinstance(fn, property):
                    fn = fn.fget
                if inspect.isfunction(fn) and (not m.startswith("_") or m == "__init__"):
                    out.append((f"{name}.{m}", fn))
    return out


def test_every_public_signature_is_annotated():
    """Every parameter (but self) and every return of the public functions,
    methods and properties carries a type, and the types resolve."""
    missing = []
    for name, fn in public_callables():
        hints = typing.get_type_hints(fn)
        sig = inspect.signature(fn)
        for p in list(sig.parameters.values())[1 if "." in name else 0:]:
            if p.name not in hints:
                missing.append(f"{name}({p.name})")
        if "return" not in hints:
            missing.append(f"{name} -> ?")
    assert not missing, missing


def test_install_without_a_built_library_says_what_to_do(tmp_path):
    empty = tmp_path / "nobuild"
    empty.mkdir()
    proc = run(["/usr/bin/python3", "-m", "pip", "wheel", "--no-index", "--no-deps", "-w", tmp_path / "w",
                REPO / "python"], tmp_path, clean_env(HAMER_BUILD=str(empty)))
    assert proc.returncode != 0
    assert f"no {empty}/libhamer.so.0: build the library first" in proc.stdout + proc.stderr, describe(proc)
