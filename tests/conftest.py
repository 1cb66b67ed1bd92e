"""Shared fixtures of the Python tests.

* Checkpoints are generated once per clone, under $HAMER_FIXTURE_DIR
  (default <repo>/build-fixtures, shared by every build directory: the
  ASan pass reads what the Release pass wrote), and reused while the
  generator (hamer_fixture.py) and the fixture's parameters are unchanged
  (a JSON manifest sits beside each). Concurrent test processes generate
  each file once: a lock file beside it serialises the writers.
* Reference outputs (hamer_reference.py, float64, slow on the CPU) are
  cached there too, keyed by the reference's source, the checkpoint and the
  input bytes.
* run_hamer() runs the CLI in a subprocess with a timeout.

Environment: HAMER_BUILD (cmake build directory; default <repo>/build),
HAMER_SANITIZE ("1" in sanitizer builds: longer timeouts; tests marked
``accuracy`` are skipped: see tests/README.md), HAMER_FIXTURE_DIR,
HAMER_TEST_QUICK ("1": tests marked ``slow`` are deselected, the
contributors' quick loop of scripts/test.sh --quick), HAMER_RUNNER (a command
that runs the build's programs: "qemu-aarch64 -cpu max" for an AArch64
cross build, scripts/test_aarch64.sh). HAMER_NO_CACHE is set to 1 for everything the tests run
(in this process and the commands it starts), so no test writes to the
user's model cache; tests/test_cache.py points its own commands at a
temporary HAMER_CACHE_DIR instead.
"""

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

# The float64 references run on Debian's OpenBLAS (scripts/deps.sh installs
# libopenblas0-pthread; netlib's reference BLAS is ~30x slower). OpenBLAS
# 0.3.21 takes Zen 4 for Haswell (AVX2); its AVX-512 kernels are ~1.8x
# faster there. Set before numpy loads the library.
def _avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f " in line + " " for line in f)
    except OSError:
        return False


if "OPENBLAS_CORETYPE" not in os.environ and _avx512():
    os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"

import numpy as np
import pytest

os.environ["HAMER_NO_CACHE"] = "1"

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

import torch  # noqa: E402

torch.set_num_threads(2)

import hamer_fixture  # noqa: E402
import hamer_reference  # noqa: E402

REPO = TESTS_DIR.parent
BUILD = Path(os.environ.get("HAMER_BUILD") or REPO / "build").resolve()
SANITIZE = os.environ.get("HAMER_SANITIZE", "0").strip().lower() in ("1", "on", "true", "yes")
FIXTURE_DIR = Path(os.environ.get("HAMER_FIXTURE_DIR") or REPO / "build-fixtures").resolve()
QUICK = os.environ.get("HAMER_TEST_QUICK", "0").strip().lower() in ("1", "on", "true", "yes")
HAMER_BIN = BUILD / "hamer"
RUNNER = shlex.split(os.environ.get("HAMER_RUNNER", ""))
HAMER_LIB = BUILD / "libhamer.so"       # what the Python binding loads (HAMER_LIB=...)
# Sanitizer builds run several times slower.
TIMEOUT_SMALL = 1200 if SANITIZE else 300
TIMEOUT_FULL = 900

FULL_SIZE_SKIP_REASON = "full-size model under ASan is too slow; covered by the Release run"
# Left out of the ASan + UBSan pass (tests/README.md lists them and why).
SANITIZER_SKIPS = {
    "no_binary": "runs no hamer code (a check of a Python reference or fixture generator): nothing for the "
                 "sanitizers to see; runs in the Release pass",
    "accuracy": "a numeric comparison only, whose C paths other tests drive under ASan (tests/README.md); "
                "runs in the Release pass",
}


def pytest_configure(config):
    config.addinivalue_line("markers", "no_binary: runs no hamer code; not rerun under ASan + UBSan")
    config.addinivalue_line("markers", "accuracy: a numeric comparison only; not rerun under ASan + UBSan, "
                            "where the C paths it drives are covered by other tests (tests/README.md)")
    config.addinivalue_line("markers", "slow: left out of the quick loop (scripts/test.sh --quick)")


def pytest_collection_modifyitems(config, items):
    if SANITIZE:
        for item in items:
            for name, reason in SANITIZER_SKIPS.items():
                if item.get_closest_marker(name):
                    item.add_marker(pytest.mark.skip(reason=reason))
                    break
    if QUICK:
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]


# Checkpoints the tests use: name -> hamer_fixture.write_checkpoint kwargs
# (JSON-serialisable; they are the cache key with the generator's digest).
CHECKPOINTS = {
    # The main small model: 2 ViT blocks, 2 decoder layers, MANO embedded,
    # zip prefix 'archive' as in the release.
    "d2h2": dict(depth=2, head_depth=2, seed=0, mano=True),
    # Same weights without mano.* (MANO supplied by --mano or absent).
    "d2h2_nomano": dict(depth=2, head_depth=2, seed=0, mano=False),
    # Same weights, storages tagged cuda:0, zip prefix not 'archive'.
    "d2h2_cuda": dict(depth=2, head_depth=2, seed=0, mano=True, cuda_tag=True,
                      zip_prefix="hamer_cuda_release"),
    # Smallest model, for the error tests, and broken variants of it.
    "d1h1": dict(depth=1, head_depth=1, seed=1, mano=True),
    "d1h1_missing_key": dict(depth=1, head_depth=1, seed=1, mano=True,
                             drop=["backbone.last_norm.weight"]),
    "d1h1_transposed": dict(depth=1, head_depth=1, seed=1, mano=True,
                            transpose=["backbone.blocks.0.mlp.fc1.weight"]),
    # The released architecture (~2.7 GB).
    "full": dict(depth=32, head_depth=6, seed=1234, mano=True),
}


def _fresh(path, want):
    meta_path = path.with_suffix(".json")
    if not (path.exists() and meta_path.exists()):
        return False
    try:
        have = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return False
    return (have.get("generator") == want["generator"] and have.get("params") == want["params"]
            and have.get("size") == path.stat().st_size)


def _cached_file(path, params, write):
    """Return ``path``, (re)writing it with ``write(tmp_path)`` unless the
    JSON manifest beside it records the same generator digest, parameters
    and file size. Test processes running side by side (ctest -j) take a
    lock beside the file, so each fixture is written once."""
    FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
    want = {"generator": hamer_fixture.generator_digest(), "params": params}
    if _fresh(path, want):
        return path
    with open(path.with_name(f".{path.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _fresh(path, want):          # written by another process meanwhile
            return path
        # Write to a temporary name and rename, so an interrupted run never
        # leaves a half-written file under the final name.
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
        try:
            write(str(tmp))
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        want["size"] = path.stat().st_size
        meta_tmp = path.with_name(f".{path.stem}.{os.getpid()}.json.tmp")
        meta_tmp.write_text(json.dumps(want, indent=1))
        os.replace(meta_tmp, path.with_suffix(".json"))
    return path


def checkpoint_path(name):
    """Path of fixture checkpoint ``name``, generated if missing or stale."""
    params = CHECKPOINTS[name]
    return _cached_file(FIXTURE_DIR / f"{name}.ckpt", params,
                        lambda tmp: hamer_fixture.write_checkpoint(tmp, **params))


def mano_npz_path():
    """Separate MANO file matching the d2h2 checkpoints' embedded buffers."""
    seed = CHECKPOINTS["d2h2"]["seed"]
    return _cached_file(FIXTURE_DIR / f"mano_s{seed}.npz", {"seed": seed},
                        lambda tmp: hamer_fixture.write_mano_npz(tmp, seed))


# ---------------------------------------------------------------------------
# Reference outputs (cached)
# ---------------------------------------------------------------------------

_STATE_DICTS = {}


def _reference_digest():
    with open(hamer_reference.__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def reference_outputs(name, crops, mano_npz=None, params_only=False, keep_in_memory=True):
    """float64 reference outputs for checkpoint fixture ``name`` on ``crops``.

    Cached as ref-<name>-<source digests>-<input key>.npz; entries made by
    other versions of the generator or the reference are removed."""
    crops = np.ascontiguousarray(crops)
    version = hamer_fixture.generator_digest()[:8] + _reference_digest()[:8]
    key = hashlib.sha256()
    for part in (json.dumps(CHECKPOINTS[name], sort_keys=True), str(crops.dtype), str(crops.shape),
                 str(mano_npz and Path(mano_npz).name), str(params_only)):
        key.update(part.encode() + b"\0")
    key.update(crops.tobytes())
    cache = FIXTURE_DIR / f"ref-{name}-{version}-{key.hexdigest()[:16]}.npz"
    if cache.exists():
        with np.load(cache) as z:
            return {k: z[k] for k in z.files}
    path = checkpoint_path(name)
    sd = _STATE_DICTS.get(name)
    if sd is None:
        sd = hamer_reference.load_state_dict(str(path))
        if keep_in_memory:
            _STATE_DICTS[name] = sd
    mano = hamer_reference.load_mano_npz(str(mano_npz)) if mano_npz else None
    out = hamer_reference.run_reference(sd, crops, mano=mano, params_only=params_only)
    del sd
    for old in FIXTURE_DIR.glob(f"ref-{name}-*.npz"):
        if old.name.split("-")[2] != version:
            old.unlink(missing_ok=True)     # another test process may have removed it
    tmp = FIXTURE_DIR / f".ref.{os.getpid()}.npz"
    np.savez(tmp, **out)
    os.replace(tmp, cache)
    return out


# ---------------------------------------------------------------------------
# The full-size model's outputs (one run, read by several test files)
# ---------------------------------------------------------------------------

FULL_SIZE_CROPS = 4     # float_crops(4): the fast gate holds per crop on each


def full_size_outputs(precision):
    """``hamer regress`` of the full-size fixture on float_crops(4) in
    ``precision`` (fp32 or fast), run once per build of the binary and
    shared by the tests that read it (test_regress, test_fast_gate,
    test_convert: separate processes under ctest) through FIXTURE_DIR. The
    key is the binary's bytes, the checkpoint's manifest, the precision and
    the ISA switches, so a rebuilt binary runs again."""
    ckpt = checkpoint_path("full")
    key = hashlib.sha256()
    key.update(HAMER_BIN.read_bytes())
    key.update(ckpt.with_suffix(".json").read_bytes())
    for part in (precision, os.environ.get("HAMER_ISA", ""), os.environ.get("HAMER_LOWP", ""), str(FULL_SIZE_CROPS)):
        key.update(part.encode() + b"\0")
    path = FIXTURE_DIR / f"run-full-{precision}-{key.hexdigest()[:16]}.npz"

    def write(tmp):
        inp = path.with_name(f".{path.stem}.{os.getpid()}.npy")
        np.save(inp, float_crops(FULL_SIZE_CROPS))
        try:
            proc = run_hamer(["regress", "--model", ckpt, "--input", inp, "--output", tmp, "--precision", precision],
                             timeout=TIMEOUT_FULL)
        finally:
            inp.unlink()
        assert proc.returncode == 0, "hamer regress (full size) failed: " + describe(proc)
        for old in FIXTURE_DIR.glob(f"run-full-{precision}-*.npz"):
            if old != path:
                old.unlink(missing_ok=True)
                old.with_suffix(".json").unlink(missing_ok=True)
    _cached_file(path, {"binary_run": path.name}, write)
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


# ---------------------------------------------------------------------------
# Test inputs
# ---------------------------------------------------------------------------

def float_crops(batch, seed=10):
    """Normalised float32 crops [B,3,256,192]: standard-normal values (the
    range of normalised images), a different pattern per crop."""
    rng = np.random.RandomState(seed)
    return rng.standard_normal((batch, 3, 256, 192)).astype(np.float32)


def uint8_crops(batch, seed=20):
    """uint8 RGB crops [B,256,192,3] over the full 0..255 range (the
    borders included: the patch convolution's zero padding must act as a
    normalised 0, not as a black pixel)."""
    rng = np.random.RandomState(seed)
    return rng.randint(0, 256, (batch, 256, 192, 3)).astype(np.uint8)


# The textured test picture: horizontal and vertical ramps and a diagonal
# pattern, with uniform noise over the middle two thirds / three fifths.
# At the default 400 x 300 it is the picture test_run, test_python,
# test_serve and test_worker feed `hamer run` and the server.
W, H = 400, 300


def textured_image(w=W, h=H, seed=0):
    """The deterministic textured RGB picture (uint8, h x w x 3)."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // w, y * 255 // h, (x * 3 + y * 5) % 256], -1).astype(np.uint8)
    img[h // 6:h - h // 6, w // 5:w - w // 5] = rng.randint(0, 256, (h - 2 * (h // 6), w - 2 * (w // 5), 3))
    return img


def make_image(path, seed=0, w=W, h=H):
    """textured_image saved at ``path`` (PNG: lossless); returns the array."""
    from PIL import Image
    img = textured_image(w, h, seed)
    Image.fromarray(img).save(path)
    return img


# ---------------------------------------------------------------------------
# The build directory's tools
# ---------------------------------------------------------------------------

def build_tool(name):
    """Path of test tool ``name`` (tests/c/tool_*.c) in the build directory."""
    return BUILD / "tests" / name


def require_tool(name):
    """build_tool(name), failing the test when it is not built."""
    path = build_tool(name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built (cmake --build {BUILD}; HAMER_BUILD names the build directory)")
    return path


# ---------------------------------------------------------------------------
# Running the CLI
# ---------------------------------------------------------------------------

def run_hamer(args, timeout=None, env=None):
    """Run ``hamer ARGS``; returns the CompletedProcess (text mode)."""
    cmd = RUNNER + [str(HAMER_BIN)] + [str(a) for a in args]
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout or TIMEOUT_SMALL, text=True, errors="replace", env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"timed out after {timeout or TIMEOUT_SMALL}s: {' '.join(cmd)}")


def python_child_env(env):
    """env for a child python that loads libhamer.so with ctypes: in a
    sanitizer build the instrumented library needs the ASan runtime loaded
    first (leak checks off: CPython itself keeps memory to the end)."""
    env = dict(env)
    if SANITIZE:
        cc = shutil.which("gcc") or shutil.which("cc")
        assert cc, "a sanitizer build needs the compiler's libasan.so"
        libasan = subprocess.run([cc, "-print-file-name=libasan.so"], stdout=subprocess.PIPE, text=True,
                                 check=True).stdout.strip()
        assert os.path.isabs(libasan) and os.path.exists(libasan), f"libasan.so not found ({libasan!r})"
        env.update(LD_PRELOAD=libasan, ASAN_OPTIONS="detect_leaks=0")
    return env


def describe(proc):
    return (f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-4000:]}"
            f"\n--- stderr ---\n{proc.stderr[-4000:]}")


class Regressor:
    """Runs ``hamer regress`` on arrays and returns the output arrays."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.n = 0

    def paths(self, crops):
        self.n += 1
        inp = self.tmp / f"crops{self.n}.npy"
        out = self.tmp / f"out{self.n}.npz"
        np.save(inp, crops)
        return inp, out

    def __call__(self, ckpt, crops, *extra, timeout=None, env=None):
        inp, out = self.paths(crops)
        proc = run_hamer(["regress", "--model", ckpt, "--input", inp, "--output", out, *extra],
                         timeout=timeout, env=env)
        assert proc.returncode == 0, "hamer regress failed: " + describe(proc)
        assert out.exists(), "hamer regress exited 0 but wrote no output"
        with np.load(out) as z:
            return {k: z[k] for k in z.files}


@pytest.fixture(scope="session")
def hamer_bin():
    if not HAMER_BIN.exists():
        msg = f"{HAMER_BIN} not built (cmake -B build && cmake --build build)"
        if os.environ.get("HAMER_BUILD"):
            pytest.fail(msg)        # under ctest the binary must exist
        pytest.skip(msg)
    return HAMER_BIN


@pytest.fixture
def regress(hamer_bin, tmp_path):
    return Regressor(tmp_path)


@pytest.fixture(scope="session")
def ckpt():
    """Fixture checkpoints by name, generated on first use."""
    return checkpoint_path


@pytest.fixture(scope="session")
def mano_npz():
    return mano_npz_path()
