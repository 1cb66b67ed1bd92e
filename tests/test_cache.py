"""The packed-model cache (src/load/model_cache.c).

Every command here runs with HAMER_CACHE_DIR set to a temporary directory
and HAMER_NO_CACHE removed (conftest.py sets it for all other tests):
* a second load of a checkpoint maps the entry the first one wrote, and the
  outputs of the miss, the hit and an uncached load are bit-identical;
* a corrupted, truncated or mislabelled entry is rejected and rebuilt; a
  changed checkpoint gets a new entry;
* two processes missing at once both succeed and leave one valid entry;
* --no-cache, HAMER_NO_CACHE=1 and the no_cache field write nothing;
* HAMER_CACHE_MAX_MB bounds the directory; an unusable directory is a
  warning, never a failed load.
"""

import ctypes
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import HAMER_BIN, HAMER_LIB, TIMEOUT_SMALL, checkpoint_path, describe, float_crops, python_child_env, run_hamer

WROTE = "model cache: wrote"
REJECTED = "model cache: entry rejected"


def cache_env(cache_dir, **extra):
    env = dict(os.environ)
    env.pop("HAMER_NO_CACHE", None)
    env["HAMER_CACHE_DIR"] = str(cache_dir)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def entries(cache_dir):
    if not cache_dir.exists():
        return []
    return sorted(p for p in cache_dir.iterdir() if p.suffix == ".hpk")


class Runner:
    def __init__(self, tmp_path, crops):
        self.tmp = tmp_path
        self.inp = tmp_path / "crops.npy"
        np.save(self.inp, crops)
        self.n = 0

    def regress(self, model, env, *extra, ok=True):
        self.n += 1
        out = self.tmp / f"out{self.n}.npz"
        proc = run_hamer(["regress", "--model", model, "--input", self.inp, "--output", out, *extra], env=env)
        if ok:
            assert proc.returncode == 0, describe(proc)
        with np.load(out) as z:
            return {k: z[k] for k in z.files}, proc.stderr


def assert_identical(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert np.array_equal(a[k], b[k]), f"{k} differs"


@pytest.fixture
def runner(tmp_path, hamer_bin):
    return Runner(tmp_path, float_crops(2))


@pytest.fixture(scope="module")
def small():
    return checkpoint_path("d1h1")


def fast_available():
    proc = run_hamer(["--version"])
    return proc.returncode == 0 and "fast: unavailable" not in proc.stdout


@pytest.mark.parametrize("precision", ["fp32", "fast"])
def test_second_load_hits_and_is_bit_identical(tmp_path, runner, small, precision):
    if precision == "fast" and not fast_available():
        pytest.skip("precision fast is unavailable on this CPU")
    cache = tmp_path / "cache"
    env = cache_env(cache)
    plain, _ = runner.regress(small, env, "--precision", precision, "--no-cache")
    assert entries(cache) == []
    miss, err = runner.regress(small, env, "--precision", precision)
    assert WROTE in err, err
    [entry] = entries(cache)
    with open(entry, "rb") as f:
        assert f.read(8) == b"HAMERPK\0"
    ino, size = entry.stat().st_ino, entry.stat().st_size
    os.utime(entry, (1, 1))
    hit, err = runner.regress(small, env, "--precision", precision)
    assert WROTE not in err and REJECTED not in err, err
    assert entry.stat().st_ino == ino and entry.stat().st_size == size, "the hit rewrote the entry"
    assert entry.stat().st_mtime > 1, "a hit refreshes the entry's mtime (least recently used goes first)"
    assert_identical(plain, miss)
    assert_identical(plain, hit)
    assert not [p for p in cache.iterdir() if ".tmp." in p.name]


def test_precisions_have_their_own_entries(tmp_path, runner, small):
    if not fast_available():
        pytest.skip("precision fast is unavailable on this CPU")
    cache = tmp_path / "cache"
    env = cache_env(cache)
    runner.regress(small, env, "--precision", "fp32")
    runner.regress(small, env, "--precision", "fast")
    assert len(entries(cache)) == 2
    # The other precision's entry is not taken for this one.
    _, err = runner.regress(small, env, "--precision", "fp32")
    assert WROTE not in err and REJECTED not in err


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


@pytest.mark.parametrize("damage", ["flipped_weight", "flipped_header", "truncated", "empty", "garbage"])
def test_damaged_entry_is_rebuilt(tmp_path, runner, small, damage):
    cache = tmp_path / "cache"
    env = cache_env(cache)
    want, _ = runner.regress(small, env)
    [entry] = entries(cache)
    size = entry.stat().st_size
    if damage == "flipped_weight":
        flip_byte(entry, size // 2)
    elif damage == "flipped_header":
        flip_byte(entry, 100)
    elif damage == "truncated":
        os.truncate(entry, size - 4096)
    elif damage == "empty":
        os.truncate(entry, 0)
    else:
        entry.write_bytes(b"PK\3\4" + os.urandom(5000))
    got, err = runner.regress(small, env)
    assert REJECTED in err and WROTE in err, err
    assert_identical(want, got)
    [again] = entries(cache)
    assert again == entry and again.stat().st_size == size
    got, err = runner.regress(small, env)
    assert REJECTED not in err and WROTE not in err, err
    assert_identical(want, got)


@pytest.mark.slow
def test_changed_checkpoint_gets_a_new_entry(tmp_path, runner, small):
    cache = tmp_path / "cache"
    env = cache_env(cache)
    model = tmp_path / "model.ckpt"
    shutil.copyfile(small, model)
    runner.regress(model, env)
    [old] = entries(cache)
    # Another checkpoint under the same path (other weights and depths).
    other = checkpoint_path("d2h2")
    shutil.copyfile(other, model)
    want, _ = runner.regress(other, env, "--no-cache")
    got, err = runner.regress(model, env)
    assert WROTE in err, err
    assert_identical(want, got)
    assert len(entries(cache)) == 2 and old in entries(cache)

    # Same bytes, new mtime: a new key. A valid entry copied under that
    # name carries the old key in its header and is not used.
    runner.regress(model, env)
    new = [e for e in entries(cache) if e != old]
    assert len(new) == 1
    os.utime(model, (12345, 12345))
    before = set(entries(cache))
    got, err = runner.regress(model, env)
    assert WROTE in err
    [fresh] = set(entries(cache)) - before
    shutil.copyfile(old, fresh)
    got, err = runner.regress(model, env)
    assert REJECTED in err and "another key" in err, err
    assert_identical(want, got)


def test_racing_processes(tmp_path, runner, small):
    cache = tmp_path / "cache"
    env = cache_env(cache)
    want, _ = runner.regress(small, env, "--no-cache")
    procs, outs = [], []
    for i in range(2):
        out = tmp_path / f"race{i}.npz"
        outs.append(out)
        procs.append(subprocess.Popen([str(HAMER_BIN), "regress", "--model", str(small), "--input", str(runner.inp),
                                       "--output", str(out)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=TIMEOUT_SMALL)
        assert p.returncode == 0, err
    for out in outs:
        with np.load(out) as z:
            assert_identical(want, {k: z[k] for k in z.files})
    assert len(entries(cache)) == 1
    assert not [p for p in cache.iterdir() if ".tmp." in p.name]
    got, err = runner.regress(small, env)
    assert REJECTED not in err and WROTE not in err, err
    assert_identical(want, got)


def test_no_cache_writes_nothing(tmp_path, runner, small):
    cache = tmp_path / "cache"
    runner.regress(small, cache_env(cache), "--no-cache")
    runner.regress(small, cache_env(cache, HAMER_NO_CACHE=1))
    assert not cache.exists()
    # HAMER_NO_CACHE=0 is "on".
    runner.regress(small, cache_env(cache, HAMER_NO_CACHE=0))
    assert len(entries(cache)) == 1


def test_no_cache_param(tmp_path, hamer_bin, small):
    """hamer_model_params.no_cache, through the C ABI (its own structure
    declaration, so a layout change in hamer.h shows here)."""
    cache = tmp_path / "cache"
    code = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
class P(ctypes.Structure):
    _fields_ = [("mano_path", ctypes.c_char_p), ("progress", ctypes.c_bool), ("precision", ctypes.c_int),
                ("no_cache", ctypes.c_bool), ("reserved", ctypes.c_uint8 * 64)]
lib.hamer_model_default_params.restype = P
lib.hamer_model_load.restype = ctypes.c_void_p
lib.hamer_model_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(P)]
lib.hamer_model_free.argtypes = [ctypes.c_void_p]
p = lib.hamer_model_default_params()
assert p.no_cache == 0
p.no_cache = int(sys.argv[3])
m = lib.hamer_model_load(sys.argv[2].encode(), ctypes.byref(p))
assert m
lib.hamer_model_free(m)
"""
    lib = HAMER_LIB
    for flag, n in ((1, 0), (0, 1)):
        proc = subprocess.run([sys.executable, "-c", code, str(lib), str(small), str(flag)], env=python_child_env(cache_env(cache)),
                              capture_output=True, text=True, timeout=TIMEOUT_SMALL)
        assert proc.returncode == 0, proc.stderr
        assert len(entries(cache)) == n


def test_size_bound(tmp_path, runner, small):
    cache = tmp_path / "cache"
    runner.regress(small, cache_env(cache))
    [first] = entries(cache)
    mb = first.stat().st_size / 2**20
    model = tmp_path / "copy.ckpt"
    shutil.copyfile(small, model)
    # Room for one entry and a half: the second evicts the first.
    env = cache_env(cache, HAMER_CACHE_MAX_MB=int(mb * 1.6) + 1)
    _, err = runner.regress(model, env)
    assert WROTE in err and "removed" in err, err
    [second] = entries(cache)
    assert second != first
    # A bound smaller than one entry: loads, warns, keeps nothing new.
    other = tmp_path / "other.ckpt"
    shutil.copyfile(small, other)
    want, _ = runner.regress(small, env, "--no-cache")
    got, err = runner.regress(other, cache_env(cache, HAMER_CACHE_MAX_MB=1))
    assert "not cached" in err, err
    assert entries(cache) == [second]
    assert_identical(want, got)


def test_unusable_directory_is_a_warning(tmp_path, runner, small):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    want, _ = runner.regress(small, cache_env(tmp_path), "--no-cache")
    got, err = runner.regress(small, cache_env(blocker / "sub"))
    assert "model cache: cannot create" in err, err
    assert_identical(want, got)
    env = cache_env(tmp_path)
    env.pop("HAMER_CACHE_DIR")
    env.pop("XDG_CACHE_HOME", None)
    env["HOME"] = "relative"
    got, err = runner.regress(small, env)
    assert "model cache:" in err and "HOME" in err, err
    assert_identical(want, got)


def test_xdg_cache_home(tmp_path, runner, small):
    env = cache_env(tmp_path)
    env.pop("HAMER_CACHE_DIR")
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    runner.regress(small, env)
    assert len(entries(tmp_path / "xdg" / "hamer")) == 1
