"""``hamer`` command-line errors.

Every bad invocation must end with exit status 1 or 2 (never a signal, so
never a crash or a sanitizer abort), exactly one non-empty line on stderr
naming what was wrong, and no output file.
"""

import io
import json
import os
import time

import numpy as np
import pytest
from PIL import Image

from conftest import SANITIZE, checkpoint_path, describe, float_crops, mano_npz_path, run_hamer, uint8_crops


@pytest.fixture(scope="module")
def good_ckpt():
    return checkpoint_path("d1h1")


@pytest.fixture
def good_input(tmp_path):
    path = tmp_path / "good.npy"
    np.save(path, float_crops(1))
    return path


def expect_error(args, out, keywords=(), tmp_path=None):
    """Run hamer; assert a clean one-line failure that leaves no output.

    keywords: the error line must contain at least one (case-insensitive).
    """
    proc = run_hamer(args)
    assert proc.returncode in (1, 2), f"expected exit 1 or 2: {describe(proc)}"
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip(), f"expected exactly one stderr line: {describe(proc)}"
    if keywords:
        low = lines[0].lower()
        assert any(k.lower() in low for k in keywords), \
            f"error line {lines[0]!r} names none of {list(keywords)}"
    assert not os.path.exists(out), f"{out} was created although the command failed"
    if tmp_path is not None:
        # No temporary or partial files left beside the output either.
        left = [p.name for p in tmp_path.iterdir() if p.name.startswith(os.path.basename(out))]
        assert not left, f"left behind: {left}"
    return lines[0]


def regress_args(model, inp, out, *extra):
    return ["regress", "--model", model, "--input", inp, "--output", out, *extra]


# ---------------------------------------------------------------------------
# Files that are missing or not what they claim
# ---------------------------------------------------------------------------

def test_missing_model_file(hamer_bin, tmp_path, good_input):
    out = tmp_path / "out.npz"
    model = tmp_path / "no_such_model.ckpt"
    expect_error(regress_args(model, good_input, out), out, ["no_such_model.ckpt"], tmp_path)


def test_missing_input_file(hamer_bin, tmp_path, good_ckpt):
    out = tmp_path / "out.npz"
    expect_error(regress_args(good_ckpt, tmp_path / "no_such_crops.npy", out), out,
                 ["no_such_crops.npy"], tmp_path)


def test_truncated_checkpoint(hamer_bin, tmp_path, good_ckpt, good_input):
    bad = tmp_path / "truncated.ckpt"
    with open(good_ckpt, "rb") as f:
        bad.write_bytes(f.read(1 << 20))
    out = tmp_path / "out.npz"
    expect_error(regress_args(bad, good_input, out), out, tmp_path=tmp_path)


def test_garbage_checkpoint(hamer_bin, tmp_path, good_input):
    bad = tmp_path / "garbage.ckpt"
    bad.write_bytes(np.random.RandomState(0).randint(0, 256, 1 << 16).astype(np.uint8).tobytes())
    out = tmp_path / "out.npz"
    expect_error(regress_args(bad, good_input, out), out, tmp_path=tmp_path)


def test_empty_checkpoint(hamer_bin, tmp_path, good_input):
    bad = tmp_path / "empty.ckpt"
    bad.write_bytes(b"")
    out = tmp_path / "out.npz"
    expect_error(regress_args(bad, good_input, out), out, tmp_path=tmp_path)


def test_checkpoint_missing_required_key(hamer_bin, tmp_path, good_input):
    out = tmp_path / "out.npz"
    expect_error(regress_args(checkpoint_path("d1h1_missing_key"), good_input, out), out,
                 ["backbone.last_norm.weight", "last_norm"], tmp_path)


def test_checkpoint_with_wrong_shape(hamer_bin, tmp_path, good_input):
    """fc1 stored transposed: the element count is right, the shape is not."""
    out = tmp_path / "out.npz"
    expect_error(regress_args(checkpoint_path("d1h1_transposed"), good_input, out), out,
                 ["backbone.blocks.0.mlp.fc1.weight", "fc1", "mlp"], tmp_path)


def test_missing_mano_file(hamer_bin, tmp_path, good_input):
    out = tmp_path / "out.npz"
    expect_error(regress_args(checkpoint_path("d2h2_nomano"), good_input, out,
                              "--mano", tmp_path / "no_such_mano.npz"),
                 out, ["no_such_mano.npz"], tmp_path)


def test_mano_file_missing_an_array(hamer_bin, tmp_path, good_input):
    with np.load(mano_npz_path()) as z:
        arrays = {k: z[k] for k in z.files if k != "posedirs"}
    bad = tmp_path / "mano_without_posedirs.npz"
    np.savez(bad, **arrays)
    out = tmp_path / "out.npz"
    expect_error(regress_args(checkpoint_path("d2h2_nomano"), good_input, out, "--mano", bad),
                 out, ["posedirs"], tmp_path)


# ---------------------------------------------------------------------------
# Bad crops
# ---------------------------------------------------------------------------

def _bad_input(tmp_path, good_ckpt, array, keywords):
    inp = tmp_path / "bad.npy"
    np.save(inp, array)
    out = tmp_path / "out.npz"
    return expect_error(regress_args(good_ckpt, inp, out), out, keywords, tmp_path)


def test_float64_crops(hamer_bin, tmp_path, good_ckpt):
    _bad_input(tmp_path, good_ckpt, float_crops(1).astype(np.float64),
               ["float64", "f8", "dtype", "double", "type"])


def test_int32_crops(hamer_bin, tmp_path, good_ckpt):
    _bad_input(tmp_path, good_ckpt, np.zeros((1, 3, 256, 192), np.int32),
               ["int32", "i4", "dtype", "type"])


def test_wrong_shape_crops(hamer_bin, tmp_path, good_ckpt):
    _bad_input(tmp_path, good_ckpt, np.zeros((1, 3, 256, 256), np.float32), ["shape", "256", "192"])


def test_three_dimensional_crops(hamer_bin, tmp_path, good_ckpt):
    _bad_input(tmp_path, good_ckpt, np.zeros((3, 256, 192), np.float32), ["shape", "256", "192", "dim"])


def test_uint8_wrong_layout(hamer_bin, tmp_path, good_ckpt):
    """uint8 crops must be HWC [B,256,192,3]; CHW is refused."""
    chw = uint8_crops(1).transpose(0, 3, 1, 2).copy()
    _bad_input(tmp_path, good_ckpt, chw, ["shape", "layout", "256", "192", "uint8"])


def test_truncated_npy(hamer_bin, tmp_path, good_ckpt):
    inp = tmp_path / "truncated.npy"
    np.save(inp, float_crops(2))
    data = inp.read_bytes()
    inp.write_bytes(data[:len(data) - 1000])
    out = tmp_path / "out.npz"
    expect_error(regress_args(good_ckpt, inp, out), out, tmp_path=tmp_path)


def test_npy_header_only(hamer_bin, tmp_path, good_ckpt):
    inp = tmp_path / "header_only.npy"
    np.save(inp, float_crops(1))
    data = inp.read_bytes()
    inp.write_bytes(data[:128])
    out = tmp_path / "out.npz"
    expect_error(regress_args(good_ckpt, inp, out), out, tmp_path=tmp_path)


def test_not_an_npy(hamer_bin, tmp_path, good_ckpt):
    inp = tmp_path / "text.npy"
    inp.write_text("this is not a numpy file\n")
    out = tmp_path / "out.npz"
    expect_error(regress_args(good_ckpt, inp, out), out, tmp_path=tmp_path)


@pytest.mark.parametrize("variant", ["fortran", "big_endian"])
def test_unusual_npy_layouts_are_read_correctly_or_refused(hamer_bin, tmp_path, good_ckpt, variant):
    """A Fortran-ordered or big-endian .npy must either give the same result
    as the plain file or be refused cleanly, never be misread."""
    crops = float_crops(1)
    plain = tmp_path / "plain.npy"
    np.save(plain, crops)
    odd = tmp_path / f"{variant}.npy"
    np.save(odd, np.asfortranarray(crops) if variant == "fortran" else crops.astype(">f4"))
    ref_out = tmp_path / "plain.npz"
    proc = run_hamer(regress_args(good_ckpt, plain, ref_out))
    assert proc.returncode == 0, describe(proc)
    out = tmp_path / "odd.npz"
    proc = run_hamer(regress_args(good_ckpt, odd, out))
    if proc.returncode == 0:
        with np.load(ref_out) as a, np.load(out) as b:
            for k in a.files:
                assert np.array_equal(a[k], b[k]), f"{variant} .npy misread ({k} differs)"
    else:
        assert proc.returncode in (1, 2), describe(proc)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].strip(), describe(proc)
        assert not out.exists()


# ---------------------------------------------------------------------------
# Bad options
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("threads", ["0", "-1", "abc", "2x", ""])
def test_bad_thread_count(hamer_bin, tmp_path, good_ckpt, good_input, threads):
    out = tmp_path / "out.npz"
    expect_error(regress_args(good_ckpt, good_input, out, "--threads", threads), out,
                 ["threads"], tmp_path)


def test_unknown_option(hamer_bin, tmp_path, good_ckpt, good_input):
    out = tmp_path / "out.npz"
    expect_error(regress_args(good_ckpt, good_input, out, "--bogus-option"), out,
                 ["--bogus-option", "bogus"], tmp_path)


def test_option_missing_its_value(hamer_bin, tmp_path, good_ckpt, good_input):
    out = tmp_path / "out.npz"
    expect_error(regress_args(good_ckpt, good_input, out, "--threads"), out, ["threads"], tmp_path)


def test_missing_output_option(hamer_bin, tmp_path, good_ckpt, good_input):
    proc = run_hamer(["regress", "--model", good_ckpt, "--input", good_input])
    assert proc.returncode in (1, 2), describe(proc)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "output" in lines[0].lower(), describe(proc)


def test_missing_model_option(hamer_bin, tmp_path, good_input):
    out = tmp_path / "out.npz"
    expect_error(["regress", "--input", good_input, "--output", out], out, ["model"], tmp_path)


def test_unknown_command(hamer_bin, tmp_path):
    proc = run_hamer(["frobnicate"])
    assert proc.returncode in (1, 2), describe(proc)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip(), describe(proc)


def test_output_in_missing_directory(hamer_bin, tmp_path, good_ckpt, good_input):
    out = tmp_path / "no_such_dir" / "out.npz"
    expect_error(regress_args(good_ckpt, good_input, out), out, ["no_such_dir", "out.npz", "output"])


# ---------------------------------------------------------------------------
# Help
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["--help"], ["regress", "--help"]])
def test_help(hamer_bin, args):
    proc = run_hamer(args)
    assert proc.returncode == 0, describe(proc)
    text = proc.stdout + proc.stderr
    for opt in ("--model", "--input", "--output"):
        assert opt in text, f"`hamer {' '.join(args)}` does not mention {opt}"



@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_crops_refused(hamer_bin, tmp_path, good_ckpt, value):
    """A NaN or infinity in a crop would give non-finite outputs without a
    sign; the library refuses it, naming the crop (issue 12, finding 13)."""
    crops = float_crops(3)
    crops[1, 2, 100, 50] = value
    inp = tmp_path / "crops.npy"
    np.save(inp, crops)
    out = tmp_path / "out.npz"
    line = expect_error(regress_args(good_ckpt, inp, out), out, ["crop 1 has a non-finite value"], tmp_path)
    assert ("NaN" if np.isnan(value) else "Inf") in line and "row 100, column 50" in line, line


def progressive_jpeg(side):
    """A side x side progressive JPEG (Pillow: libjpeg's 10-scan progression)."""
    y, x = np.mgrid[0:side, 0:side]
    img = np.stack([x * 255 // side, y * 255 // side, (x + y) * 127 // side], -1).astype(np.uint8)
    b = io.BytesIO()
    Image.fromarray(img).save(b, "JPEG", quality=75, progressive=True)
    return b.getvalue()


def with_empty_scans(jpg, copies):
    """jpg with `copies` more copies of its last scan's SOS header (10 bytes,
    no data) before the EOI: each an empty scan libjpeg warns about and
    decodes anyway, in one pass over the blocks of its component."""
    i, last = 2, None
    while jpg[i + 1] != 0xD9:
        assert jpg[i] == 0xFF
        n = jpg[i + 2] << 8 | jpg[i + 3]
        if jpg[i + 1] == 0xDA:
            last = jpg[i:i + 2 + n]
            i += 2 + n
            # The entropy-coded data ends at a marker (not 0xFF00, not RSTn).
            while not (jpg[i] == 0xFF and jpg[i + 1] != 0 and not 0xD0 <= jpg[i + 1] <= 0xD7):
                i += 1
        else:
            i += 2 + n
    assert last is not None and jpg.endswith(b"\xff\xd9")
    return jpg[:-2] + last * copies + b"\xff\xd9"


def test_progressive_jpeg_scan_bomb(hamer_bin, tmp_path, good_ckpt):
    """A 4 MP progressive JPEG with 100,000 empty scans (1 MB; 44 s to
    decode without a limit) is refused within a couple of seconds, by `hamer
    detect` and `hamer run`; the same image without them still runs."""
    prog = progressive_jpeg(2048)
    bomb = tmp_path / "bomb.jpg"
    bomb.write_bytes(with_empty_scans(prog, 100000))
    assert 1000000 < bomb.stat().st_size < 1100000
    out = tmp_path / "out.json"
    limit = 10 if SANITIZE else 2
    for args in (["detect", "--image", bomb, "--output", out],
                 ["run", "--model", good_ckpt, "--image", bomb, "--output", out, "--boxes", tmp_path / "none.json"]):
        (tmp_path / "none.json").write_text("[]")
        t0 = time.monotonic()
        line = expect_error(args, out)
        secs = time.monotonic() - t0
        assert "bomb.jpg: JPEG's" in line and "times the image's blocks" in line, line
        assert secs < limit, "%s refused after %.1f s" % (args[0], secs)
    ok = tmp_path / "progressive.jpg"
    ok.write_bytes(prog)
    (tmp_path / "box.json").write_text(json.dumps([{"bbox": [900, 900, 1200, 1200], "is_right": True}]))
    proc = run_hamer(["run", "--model", good_ckpt, "--image", ok, "--output", out, "--boxes", tmp_path / "box.json"])
    assert proc.returncode == 0, describe(proc)
    assert json.loads(out.read_text())["image"] == {"width": 2048, "height": 2048}


# ---------------------------------------------------------------------------
# Devices: one that is unknown or cannot run here is refused, never replaced
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("device, words", [
    ("nope", ["unknown backend 'nope'", "this build has: cpu"]),
    ("cpu:1", ["device 'cpu:1' is unavailable", "1 device"]),
    ("cpu:x", ["the index after ':' must be a number"]),
])
def test_bad_device(tmp_path, good_ckpt, good_input, device, words):
    out = tmp_path / "out.npz"
    line = expect_error(regress_args(good_ckpt, good_input, out, "--device", device), out, words[:1], tmp_path)
    assert all(w in line for w in words), line
    img = tmp_path / "photo.png"
    Image.new("RGB", (64, 48), (120, 90, 60)).save(img)
    for args, dst in ((["run", "--model", good_ckpt, "--image", img, "--box", "4,4,40,40", "--output"], "r.json"),
                      (["convert", "--model", good_ckpt, "--output"], "m.hpk")):
        o = tmp_path / dst
        line = expect_error([*args, o, "--device", device], o, words[:1], tmp_path)
        assert all(w in line for w in words), line


def test_fifo_model_and_mano(tmp_path, good_ckpt, good_input):
    """A FIFO given as the model or the MANO file is refused at once (the
    library opens without blocking, then checks the file is regular): the
    open of a FIFO nobody writes used to wait forever."""
    fifo = tmp_path / "model.ckpt"
    os.mkfifo(fifo)
    out = tmp_path / "out.npz"
    t0 = time.monotonic()
    expect_error(regress_args(fifo, good_input, out), out, ["not a regular file"])
    expect_error(regress_args(checkpoint_path("d2h2_nomano"), good_input, out, "--mano", fifo), out,
                 ["not a regular file"])
    expect_error(["convert", "--model", fifo, "--output", out], out, ["not a regular file"])
    assert time.monotonic() - t0 < 30


def test_cuda_unavailable(tmp_path, good_ckpt, good_input):
    """A build with the CUDA backend: without its shared object, or without
    a driver or GPU, --device cuda is one line saying which, exit 1, and no
    output; never a silent CPU run."""
    version = run_hamer(["--version"]).stdout
    if " cuda" not in version.split("backends:")[-1]:
        pytest.skip("this build has no CUDA backend (HAMER_CUDA=OFF)")
    out = tmp_path / "out.npz"
    proc = run_hamer(regress_args(good_ckpt, good_input, out, "--device", "cuda"),
                     env=dict(os.environ, HAMER_CUDA_LIB=str(tmp_path / "missing.so")))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, describe(proc)
    assert "device 'cuda' is unavailable: the cuda backend's library libhamer-cuda.so did not load: not found" \
        in proc.stderr and not out.exists()
    if "cuda (unavailable)" in version:
        line = expect_error(regress_args(good_ckpt, good_input, out, "--device", "cuda"), out,
                            ["device 'cuda' is unavailable"])
        assert "no usable CUDA driver or GPU" in line, line
