"""``hamer convert`` and the packed model file.

* A packed file gives bit-identical outputs to its checkpoint in the same
  precision (small model: float and uint8 crops, the plain path; the
  full-size model: fp32 and fast), through regress, run, bench and the
  Python binding.
* Every refusal is one line and exit 1, with no output written: a flipped
  byte (the checksum error names the section), truncation, an unsupported
  version, another precision, another ISA (HAMER_ISA=avx2), another
  low-precision variant (HAMER_LOWP). Edits that need the checksums
  recomputed (sections out of bounds, overlapping, misaligned, bad config,
  bad MANO indices, ...) are tested in tests/c/test_pack.c.
* A failed convert leaves no file (and an existing one untouched).
* Full size: load time of the packed file (printed; asserted only < 5 s, as
  machines vary: docs/models.md has the measurement) and peak RSS, for loading
  the packed file and for loading the checkpoint.
"""

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import (FULL_SIZE_SKIP_REASON, HAMER_BIN, HAMER_LIB, REPO, SANITIZE, TIMEOUT_FULL, checkpoint_path,
                      describe, float_crops, full_size_outputs, make_image, mano_npz_path, run_hamer, uint8_crops)

HEADER_BYTES, ENTRY_BYTES = 256, 96
VERSION_OFFSET, ISA_OFFSET = 8, 52
ISA_AVX512 = 2

# Peak RSS allowance on top of the packed bytes (+10%): the binary and its
# shared libraries (~10 MB), one crop's activation buffers at full size
# (~20 MB), thread stacks and the .npz being written. Measured: ~23 MB.
RSS_ALLOWANCE = 64 << 20


def fast_available():
    proc = run_hamer(["--version"])
    return proc.returncode == 0 and "fast: unavailable" not in proc.stdout


def needs_fast(precision):
    if precision == "fast" and not fast_available():
        pytest.skip("precision fast is unavailable on this CPU")


def convert(src, dst, precision="fp32", *extra, timeout=None):
    proc = run_hamer(["convert", "--model", src, "--output", dst, "--precision", precision, *extra],
                     timeout=timeout)
    assert proc.returncode == 0, "hamer convert failed: " + describe(proc)
    assert os.path.getsize(dst) > HEADER_BYTES
    return dst


def sections(path):
    """name -> (offset, bytes) from the file's section table."""
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
        n = struct.unpack_from("<I", head, 32)[0]
        table = f.read(n * ENTRY_BYTES)
    out = {}
    for i in range(n):
        name, off, size = struct.unpack_from("<64sQQ", table, i * ENTRY_BYTES)
        out[name.rstrip(b"\0").decode()] = (off, size)
    return out


def regress_arrays(tmp_path, model, crops, *extra, timeout=None, tag="x"):
    inp, out = tmp_path / f"in_{tag}.npy", tmp_path / f"out_{tag}.npz"
    np.save(inp, crops)
    proc = run_hamer(["regress", "--model", model, "--input", inp, "--output", out, *extra], timeout=timeout)
    assert proc.returncode == 0, "hamer regress failed: " + describe(proc)
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def assert_identical(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert np.array_equal(a[k], b[k]), f"{k}: max |diff| {np.abs(a[k] - b[k]).max()}"


def expect_refusal(tmp_path, model, needle, *extra, env=None):
    out = tmp_path / "refused.npz"
    inp = tmp_path / "refused_in.npy"
    np.save(inp, float_crops(1))
    cmd = [str(HAMER_BIN), "regress", "--model", str(model), "--input", str(inp), "--output", str(out), *extra]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300,
                          env=dict(os.environ, **(env or {})))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, describe(proc)
    assert len(lines) == 1 and needle in lines[0], f"expected one line with {needle!r}: " + describe(proc)
    assert not out.exists()
    return lines[0]


# ---------------------------------------------------------------------------
# Small model
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small(tmp_path_factory, hamer_bin):
    """d2h2 and d1h1 packed in fp32 (and fast where the CPU has it)."""
    d = tmp_path_factory.mktemp("packed")
    out = {}
    for name in ("d2h2", "d1h1"):
        for prec in ("fp32", "fast"):
            if prec == "fast" and not fast_available():
                continue
            out[name, prec] = convert(checkpoint_path(name), d / f"{name}_{prec}.hpk", prec)
    return out


@pytest.mark.parametrize("precision", ["fp32", "fast"])
def test_small_bit_identical(tmp_path, small, precision):
    needs_fast(precision)
    ckpt, packed = checkpoint_path("d2h2"), small["d2h2", precision]
    args = ["--precision", precision]
    for crops, tag in ((float_crops(2), "f32"), (uint8_crops(2), "u8")):
        assert_identical(regress_arrays(tmp_path, ckpt, crops, *args, tag="c" + tag),
                         regress_arrays(tmp_path, packed, crops, *args, tag="p" + tag))
    if precision == "fp32":  # the textbook path reads the arrays only it uses
        crops = float_crops(1)
        assert_identical(regress_arrays(tmp_path, ckpt, crops, "--plain", tag="cp"),
                         regress_arrays(tmp_path, packed, crops, "--plain", tag="pp"))


def test_convert_is_deterministic(tmp_path, small):
    again = convert(checkpoint_path("d2h2"), tmp_path / "again.hpk")
    assert open(again, "rb").read() == open(small["d2h2", "fp32"], "rb").read()


def test_mano_from_npz(tmp_path, hamer_bin):
    """Without mano.*: a packed file without MANO takes --mano at load, or
    has it baked in by convert --mano; both equal the checkpoint + --mano."""
    ckpt, npz = checkpoint_path("d2h2_nomano"), mano_npz_path()
    bare = convert(ckpt, tmp_path / "bare.hpk")
    baked = convert(ckpt, tmp_path / "baked.hpk", "fp32", "--mano", npz)
    crops = float_crops(1)
    want = regress_arrays(tmp_path, ckpt, crops, "--mano", npz, tag="c")
    assert_identical(want, regress_arrays(tmp_path, bare, crops, "--mano", npz, tag="b"))
    assert_identical(want, regress_arrays(tmp_path, baked, crops, tag="k"))
    params = regress_arrays(tmp_path, bare, crops, "--params-only", tag="po")
    assert np.array_equal(params["params"], want["params"])
    proc = run_hamer(["regress", "--model", bare, "--input", tmp_path / "in_po.npy", "--output",
                      tmp_path / "nomano.npz"])
    assert proc.returncode == 1 and "no MANO" in proc.stderr


def test_run_and_bench_take_packed(tmp_path, small):
    from test_run import RIGHT, box_arg  # noqa: E402
    make_image(tmp_path / "photo.png")
    results = []
    for model in (checkpoint_path("d2h2"), small["d2h2", "fp32"]):
        out = tmp_path / f"r{len(results)}.json"
        proc = run_hamer(["run", "--model", model, "--image", tmp_path / "photo.png", "--box",
                          box_arg(RIGHT, "right"), "--output", out, "--vertices"])
        assert proc.returncode == 0, describe(proc)
        results.append(json.loads(out.read_text())["hands"])
    assert results[0] == results[1]
    proc = run_hamer(["bench", "--model", small["d1h1", "fp32"], "--iters", "1", "--warmup", "0",
                      "--threads", "1", "--peak", "100", "--json"])
    assert proc.returncode == 0, describe(proc)
    if fast_available():
        fast = small["d1h1", "fast"]
        base = ["bench", "--model", fast, "--precision", "fast", "--iters", "1", "--warmup", "0",
                "--threads", "1", "--peak", "100", "--json"]
        proc = run_hamer(base)
        assert proc.returncode == 1 and "--reference" in proc.stderr, describe(proc)
        proc = run_hamer(base + ["--reference", checkpoint_path("d1h1")])
        assert proc.returncode == 0, describe(proc)


@pytest.mark.skipif(SANITIZE, reason="the binding under ASan is covered by test_python.py's child run")
def test_python_binding(tmp_path, small):
    sys.path.insert(0, str(REPO / "python"))
    os.environ["HAMER_LIB"] = str(HAMER_LIB)
    import hamer
    crops = float_crops(2)
    with hamer.Model(str(checkpoint_path("d2h2"))) as m:
        want = m.regress(crops)
        m.save_packed(str(tmp_path / "py.hpk"))
    assert open(tmp_path / "py.hpk", "rb").read() == open(small["d2h2", "fp32"], "rb").read()
    with hamer.Model(str(small["d2h2", "fp32"])) as m:
        assert_identical(want, m.regress(crops))
    with pytest.raises(hamer.HamerError, match="convert the checkpoint again"):
        hamer.Model(str(small["d2h2", "fp32"]), precision="fast")


# ---------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------

def edited(src, dst, offset, data):
    raw = bytearray(open(src, "rb").read())
    raw[offset:offset + len(data)] = data
    dst.write_bytes(bytes(raw))
    return dst


def test_flipped_byte_names_the_section(tmp_path, small):
    src = small["d1h1", "fp32"]
    off, size = sections(src)["blocks.0.fc1.w"]
    raw = open(src, "rb").read()
    bad = edited(src, tmp_path / "flip.hpk", off + size // 2, bytes([raw[off + size // 2] ^ 0x10]))
    expect_refusal(tmp_path, bad, "section 'blocks.0.fc1.w': checksum mismatch")
    table = edited(src, tmp_path / "table.hpk", HEADER_BYTES + 70, b"\x7f")
    expect_refusal(tmp_path, table, "header or section table")


def test_truncated(tmp_path, small):
    src = small["d1h1", "fp32"]
    raw = open(src, "rb").read()
    for n in (100, HEADER_BYTES + 10, len(raw) // 2, len(raw) - 1):
        (tmp_path / "cut.hpk").write_bytes(raw[:n])
        expect_refusal(tmp_path, tmp_path / "cut.hpk", "truncated")


def test_unsupported_version(tmp_path, small):
    # 1: the format before the head's kv_all followed the model's precision;
    # 2: the one before the header named the backend; 3: the one before
    # MANO's PCA pose space; 4: the one before fast's attention projection
    # was int8; 6: from the future
    for v in (1, 2, 3, 4, 6):
        bad = edited(small["d1h1", "fp32"], tmp_path / f"v{v}.hpk", VERSION_OFFSET, struct.pack("<I", v))
        expect_refusal(tmp_path, bad, f"version {v} is not supported")


def test_bad_magic(tmp_path, small):
    bad = edited(small["d1h1", "fp32"], tmp_path / "magic.hpk", 0, b"X")
    expect_refusal(tmp_path, bad, "neither a checkpoint (zip) nor a packed model file")


def test_other_precision(tmp_path, small):
    expect_refusal(tmp_path, small["d1h1", "fp32"], "packed in precision fp32 but fast was requested; "
                   "convert the checkpoint again with --precision fast", "--precision", "fast")
    if fast_available():
        expect_refusal(tmp_path, small["d1h1", "fast"], "packed in precision fast but fp32 was requested")


def test_other_isa(tmp_path, small):
    src = small["d1h1", "fp32"]
    if struct.unpack_from("<i", open(src, "rb").read(64), ISA_OFFSET)[0] != ISA_AVX512:
        pytest.skip("this CPU packs for AVX2 or scalar")
    expect_refusal(tmp_path, src, "packed for ISA avx512 but the active ISA is avx2", env={"HAMER_ISA": "avx2"})
    # The refusal, not a repack: the same file loads without the override.
    regress_arrays(tmp_path, src, float_crops(1), "--params-only")


def test_other_low_precision_kind(tmp_path, small):
    needs_fast("fast")
    expect_refusal(tmp_path, small["d1h1", "fast"], "low-precision kind int8", "--precision", "fast",
                   env={"HAMER_LOWP": "bf16"})


def test_convert_usage(tmp_path, hamer_bin):
    proc = run_hamer(["convert", "--help"])
    assert proc.returncode == 0 and "--precision" in proc.stdout and "--output" in proc.stdout
    proc = run_hamer(["--help"])
    assert "convert" in proc.stdout
    for args in ([], ["--model", "x.ckpt"], ["--output", "y"], ["--model", "x", "--output", "y", "--precision", "int4"],
                 ["--model", "x", "--output", "y", "--bogus"], ["--model"]):
        proc = run_hamer(["convert", *args])
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, describe(proc)


def test_failed_convert_leaves_no_file(tmp_path, hamer_bin):
    out = tmp_path / "model.hpk"
    out.write_bytes(b"old")
    proc = run_hamer(["convert", "--model", checkpoint_path("d1h1_missing_key"), "--output", out])
    assert proc.returncode == 1 and "backbone.last_norm.weight" in proc.stderr
    proc = run_hamer(["convert", "--model", tmp_path / "missing.ckpt", "--output", out])
    assert proc.returncode == 1
    assert out.read_bytes() == b"old"
    proc = run_hamer(["convert", "--model", checkpoint_path("d1h1"), "--output", tmp_path / "no" / "dir.hpk"])
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.hpk"]


# ---------------------------------------------------------------------------
# Full size
# ---------------------------------------------------------------------------

def measured(args, timeout):
    """Run hamer ARGS in a fresh Python parent; (process, peak RSS bytes)."""
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
            "sys.stderr.write(p.stderr)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(p.returncode)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(HAMER_BIN), *map(str, args)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)
    return proc, int(proc.stdout.strip() or 0) * 1024


@pytest.fixture(scope="module")
def full(tmp_path_factory, hamer_bin):
    """The full-size fixture packed in fp32 and fast (~3.6 GB, removed after
    the module), with the peak RSS of each convert (= a checkpoint load)."""
    if SANITIZE:
        pytest.skip(FULL_SIZE_SKIP_REASON)
    d = tmp_path_factory.mktemp("packed_full")
    ckpt = checkpoint_path("full")
    out = {}
    for prec in ("fp32", "fast"):
        if prec == "fast" and not fast_available():
            continue
        dst = d / f"full_{prec}.hpk"
        proc, rss = measured(["convert", "--model", ckpt, "--output", dst, "--precision", prec], TIMEOUT_FULL)
        assert proc.returncode == 0, describe(proc)
        out[prec] = (dst, rss)
    yield out
    for dst, _ in out.values():
        dst.unlink()


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "fast"])
def test_full_size(tmp_path, full, precision):
    needs_fast(precision)
    packed, convert_rss = full[precision]
    size = os.path.getsize(packed)
    crops = float_crops(1)
    # The checkpoint's outputs: the first crop of the shared full-size run
    # (conftest.full_size_outputs; a crop's bits do not depend on its batch:
    # test_regress.py::test_batch_rows_bit_identical).
    want = {k: v[:1] for k, v in full_size_outputs(precision).items()}
    np.save(tmp_path / "in.npy", crops)
    proc, rss = measured(["regress", "--model", packed, "--input", tmp_path / "in.npy", "--output",
                          tmp_path / "p.npz", "--precision", precision, "--timings"], TIMEOUT_FULL)
    assert proc.returncode == 0, describe(proc)
    with np.load(tmp_path / "p.npz") as z:
        assert_identical(want, {k: z[k] for k in z.files})
    load_s = float(proc.stderr.split("hamer: load ")[1].split(" s")[0])
    limit = 1.1 * size + RSS_ALLOWANCE
    print(f"\n{precision}: packed file {size / 1e9:.3f} GB, load {load_s:.3f} s, peak RSS {rss / 1e9:.3f} GB "
          f"(limit {limit / 1e9:.3f}); checkpoint load (convert) peak RSS {convert_rss / 1e9:.3f} GB")
    assert load_s < 5.0, f"loading the packed file took {load_s:.2f} s"
    assert rss <= limit, f"peak RSS {rss} > 1.1 x {size} + {RSS_ALLOWANCE}"
    # Loading the checkpoint drops each tensor's pages once packed: its peak
    # is about the packed model too, not packed model + checkpoint.
    assert convert_rss <= limit, f"checkpoint load peak RSS {convert_rss} > 1.1 x {size} + {RSS_ALLOWANCE}"
