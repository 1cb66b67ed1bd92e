"""The Python binding (python/hamer) against the CLI.

Every result of the binding must equal the CLI's bit for bit: ``regress``
the arrays of ``hamer regress``'s .npz, ``predict`` the hands of ``hamer
run``'s RESULT.json (numbers converted to float32), ``render`` the pictures
of ``--render`` / ``--side-view``. The binding is imported from
<repo>/python with HAMER_LIB pointing at $HAMER_BUILD/libhamer.so.

Sanitizer builds (HAMER_SANITIZE=1): an ASan-instrumented libhamer.so can
only be loaded into a process whose first library is the ASan runtime, which
the plain python3 running pytest is not. There every test below is skipped
in this process and test_binding_under_sanitizer runs this file again in a
python3 with LD_PRELOAD=libasan.so (ASAN_OPTIONS=detect_leaks=0: CPython
keeps objects alive until exit by design), so the binding checks still run
against the sanitized library.
"""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from PIL import Image

from conftest import (BUILD, HAMER_LIB, REPO, SANITIZE, TIMEOUT_SMALL, checkpoint_path, describe, float_crops,
                      make_image, mano_npz_path, run_hamer, uint8_crops)

sys.path.insert(0, str(REPO / "python"))
os.environ["HAMER_LIB"] = str(HAMER_LIB)

import hamer  # noqa: E402  (the library itself is loaded on first use)

IN_ASAN_CHILD = os.environ.get("HAMER_PY_ASAN_CHILD") == "1"
DELEGATE_TO_ASAN_CHILD = SANITIZE and not IN_ASAN_CHILD

RIGHT = (60.5, 40.25, 170.0, 200.0)
LEFT = (230.0, 90.0, 330.0, 240.5)
OUTSIDE = (5000.0, 5000.0, 5100.0, 5100.0)


def box_arg(b, side):
    return ",".join(repr(float(v)) for v in b) + ":" + side


def bits(a):
    """The bit patterns of a float32 array (so -0.0 != 0.0 and NaN == NaN)."""
    a = np.ascontiguousarray(a)
    assert a.dtype == np.float32, a.dtype
    return a.view(np.uint32)


def assert_same_arrays(got, want):
    assert list(got) == list(want), f"outputs {list(got)} != {list(want)}"
    for k in want:
        assert got[k].dtype == np.float32 and got[k].flags.c_contiguous, k
        assert got[k].shape == want[k].shape, f"{k}: {got[k].shape} != {want[k].shape}"
        assert np.array_equal(bits(got[k]), bits(want[k])), \
            f"{k}: max |diff| {np.abs(got[k].astype(np.float64) - want[k]).max()}"


def assert_detection_equal_json(got, want, where):
    """A detection's fields == the CLI's JSON (float32 values; pass an int;
    landmarks float32 [21, 3])."""
    assert sorted(got) == sorted(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
    for k, v in want.items():
        if k == "landmarks":
            ref = np.array(v, np.float32)
            assert got[k].dtype == np.float32 and np.array_equal(bits(got[k]), bits(ref)), f"{where} {k}"
        elif k in ("pass", "is_right", "source", "person"):
            assert type(got[k]) is type(v) and got[k] == v, f"{where} {k}"
        elif k == "bbox":
            assert np.array_equal(bits(got[k]), bits(np.array(v, np.float32))), f"{where} {k}"
        else:
            assert type(got[k]) is float and got[k] == float(np.float32(v)), f"{where} {k}"


def assert_hands_equal_json(got, want):
    """predict()'s hands == RESULT.json's hands, bit for bit after float32
    conversion of the JSON's numbers (crop: float64 as in the JSON)."""
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert list(g) == list(w), f"hand {i}: keys {list(g)} != {list(w)}"
        for k, v in w.items():
            where = f"hand {i} {k}"
            if k in ("is_right", "error"):
                assert type(g[k]) is type(v) and g[k] == v, where
            elif k == "crop":
                assert list(g[k]) == ["center", "size"], where
                assert g[k]["center"].dtype == np.float64, where
                assert np.array_equal(g[k]["center"], np.array(v["center"], np.float64)), where
                assert type(g[k]["size"]) is float and g[k]["size"] == v["size"], where
            elif k == "focal_length":
                assert type(g[k]) is float and g[k] == float(np.float32(v)), where
            elif k == "detection":
                assert_detection_equal_json(g[k], v, where)
            elif k in ("camera", "reprojection_error", "smplx"):
                assert list(g[k]) == list(v), where
                for kk, vv in v.items():
                    if isinstance(vv, str):
                        assert g[k][kk] == vv, where
                    elif isinstance(vv, list):
                        assert np.array_equal(bits(g[k][kk]), bits(np.array(vv, np.float32))), where
                    else:
                        assert type(g[k][kk]) is float and g[k][kk] == float(np.float32(vv)), where
            else:
                ref = np.array(v, np.float32)
                assert isinstance(g[k], np.ndarray) and g[k].shape == ref.shape, where
                assert np.array_equal(bits(g[k]), bits(ref)), where


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model(ckpt):
    """d2h2 with the CLI's default threads."""
    with hamer.Model(ckpt("d2h2")) as m:
        yield m


@pytest.fixture(scope="module")
def model1(ckpt):
    """d2h2 with one worker thread per state (for the threading tests)."""
    with hamer.Model(ckpt("d2h2"), threads=1) as m:
        yield m


@pytest.fixture(scope="module")
def small(ckpt):
    """d1h1, the smallest model, for the error tests."""
    with hamer.Model(ckpt("d1h1"), threads=1) as m:
        yield m


@pytest.fixture(scope="module")
def scene(tmp_path_factory, ckpt, hamer_bin):
    """A photo with a right, a left and an outside box, run by the CLI."""
    d = tmp_path_factory.mktemp("pyrun")
    img = make_image(d / "photo.png")
    out = d / "result.json"
    proc = run_hamer(["run", "--model", ckpt("d2h2"), "--image", d / "photo.png",
                      "--box", box_arg(RIGHT, "right"), "--box", box_arg(LEFT, "left"),
                      "--box", box_arg(OUTSIDE, "right"), "--output", out, "--vertices",
                      "--render", d / "overlay.png", "--side-view", d / "side.png"])
    assert proc.returncode == 3, describe(proc)  # 3: written, one hand failed
    return dict(dir=d, img=img, png=d / "photo.png", json=json.loads(out.read_text()))


# ---------------------------------------------------------------------------
# Loading the library
# ---------------------------------------------------------------------------

def test_library_from_hamer_lib(hamer_bin):
    assert hamer.library_path() == os.environ["HAMER_LIB"]
    proc = run_hamer(["--version"])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.split()[:2] == ["hamer", hamer.library_version()]


def test_missing_library_is_reported(tmp_path):
    """A wrong HAMER_LIB is an error naming it (no silent fallback)."""
    env = dict(os.environ, HAMER_LIB=str(tmp_path / "nope.so"), PYTHONPATH=str(REPO / "python"))
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run([sys.executable, "-c", "import hamer; hamer.library_version()"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode != 0
    assert "nope.so" in proc.stderr and "HAMER_LIB" in proc.stderr, proc.stderr


def layout_structs():
    """Each structure of include/hamer.h the binding mirrors, by C name."""
    from hamer import _lib
    return {"hamer_model_params": _lib.ModelParams, "hamer_model_info": _lib.ModelInfo,
            "hamer_state_params": _lib.StateParams, "hamer_backend_info": _lib.BackendInfo,
            "hamer_output": _lib.Output, "hamer_box": _lib.Box,
            "hamer_predict_params": _lib.PredictParams, "hamer_timings": _lib.Timings,
            "hamer_hand": _lib.Hand, "hamer_detection": _lib.Detection,
            "hamer_detect_params": _lib.DetectParams, "hamer_detector_params": _lib.DetectorParams,
            "hamer_job_params": _lib.JobParams, "hamer_job_input": _lib.JobInput,
            "hamer_job_result": _lib.JobResult, "hamer_folder_params": _lib.FolderParams,
            "hamer_folder_image": _lib.FolderImage, "hamer_folder_decoded": _lib.FolderDecoded,
            "hamer_tracker_params": _lib.TrackerParams, "hamer_video_params": _lib.VideoParams,
            "hamer_video_info": _lib.VideoInfo, "hamer_video_frame": _lib.VideoFrame,
            "hamer_render_params": _lib.RenderParams, "hamer_anim_params": _lib.AnimParams,
            "hamer_capture_params": _lib.CaptureParams, "hamer_live_params": _lib.LiveParams}


def layout_fields(cls, prefix="", base=0):
    """(C member designator, offset, size) of every field of a ctypes
    structure, nested structures' fields too ("detection.pass")."""
    for name, t in cls._fields_:
        path = prefix + ("pass" if name == "pass_" else name)
        off = base + getattr(cls, name).offset
        yield path, off, ctypes.sizeof(t)
        if isinstance(t, type) and issubclass(t, ctypes.Structure):
            yield from layout_fields(t, path + ".", off)


def test_struct_layouts_match_the_header(tmp_path):
    """The ctypes structures mirror include/hamer.h: the C compiler, given a
    probe that names every field the binding declares (a field C lacks does
    not compile), prints each structure's size and each field's offset and
    size, which must equal ctypes'. A field C has and the binding lacks
    changes the size. Every *_params struct of the header is mirrored."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to check the structure layouts with")
    import re
    structs = layout_structs()
    header = (REPO / "include" / "hamer.h").read_text()
    params = set(re.findall(r"\} (hamer_\w+_params);", header))
    assert len(params) >= 8 and params <= set(structs), params - set(structs)
    want = {}
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "hamer.h"',
             '#define S(T) printf("%s %zu\\n", #T, sizeof(T));',
             '#define F(T, f) printf("%s.%s %zu %zu\\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f));',
             "int main(void) {"]
    for cname, cls in structs.items():
        lines.append(f"    S({cname})")
        want[cname] = ctypes.sizeof(cls)
        for path, off, size in layout_fields(cls):
            lines.append(f"    F({cname}, {path})")
            want[f"{cname}.{path}"] = (off, size)
    lines += ["    return 0;", "}"]
    src = tmp_path / "probe.c"
    src.write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    subprocess.run([cc, "-std=c11", "-I", str(REPO / "include"), "-I", str(BUILD / "include"), "-o", str(tmp_path / "probe"), str(src)],
                   check=True, env=env, timeout=120)
    out = subprocess.run([str(tmp_path / "probe")], check=True, stdout=subprocess.PIPE, text=True,
                         env=env, timeout=60).stdout
    got = {}
    for line in out.splitlines():
        name, *values = line.split()
        got[name] = int(values[0]) if len(values) == 1 else tuple(map(int, values))
    assert set(got) == set(want)
    bad = [f"{k}: ctypes {want[k]}, C {got[k]}" for k in want if got[k] != want[k]]
    assert not bad, "\n".join(bad)
    # fields grown from the front of the reserved space: body_boxes (and 3 bytes of
    # alignment) and proposals; render_draw and bvh; device with the alignment before it;
    # proposals; focal_px and fov_deg
    taken = {"hamer_detect_params": 8, "hamer_folder_params": 5, "hamer_model_params": 15,
             "hamer_detector_params": 4, "hamer_tracker_params": 4, "hamer_predict_params": 8}
    for cname in params:  # each ends with its reserved bytes
        fields = structs[cname]._fields_
        assert fields[-1][0] == "reserved" and ctypes.sizeof(fields[-1][1]) == 64 - taken.get(cname, 0), cname


def test_reserved_bytes_refused_through_the_binding():
    """The binding's reserved array is where the library reads it: the
    defaults it gets are zero there, and a byte set in it (as a caller built
    against a newer header might) is refused with the struct named."""
    from hamer import _lib
    lib = _lib.load()
    vp = lib.hamer_video_default_params()
    assert bytes(vp.reserved) == bytes(64)
    assert lib.hamer_video_check_params(ctypes.byref(vp)) == 0
    vp.reserved[63] = 1
    assert lib.hamer_video_check_params(ctypes.byref(vp)) == _lib.E_ARG
    assert _lib.last_error().startswith("hamer_video_params: reserved bytes must be zero (use "
                                        "hamer_video_default_params; reserved[63] is 0x01")
    for fn in ["hamer_model_default_params", "hamer_predict_default_params", "hamer_detector_default_params",
               "hamer_detect_default_params", "hamer_tracker_default_params", "hamer_job_default_params",
               "hamer_folder_default_params", "hamer_state_default_params", "hamer_anim_default_params"]:
        p = getattr(lib, fn)()
        # 56: body_boxes and proposals took eight (or focal_px and fov_deg), 60: proposals four,
        # 59: render_draw and bvh five, 49: device fifteen
        assert any(p.reserved) is False and len(bytes(p.reserved)) in (49, 56, 59, 60, 64), fn


# ---------------------------------------------------------------------------
# regress == hamer regress
# ---------------------------------------------------------------------------

def layouts(crops):
    """The same crops as C-ordered, strided, Fortran-ordered, negatively
    strided and read-only arrays."""
    big = np.zeros(crops.shape[:-1] + (crops.shape[-1] * 2,), crops.dtype)
    big[..., ::2] = crops
    flipped = np.ascontiguousarray(crops[:, ::-1])[:, ::-1]
    ro = crops.copy()
    ro.flags.writeable = False
    return {"c": crops, "strided": big[..., ::2], "fortran": np.asfortranarray(crops),
            "negative": flipped, "readonly": ro}


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("kind", ["float32", "uint8"])
def test_regress_equals_cli(model, regress, ckpt, kind, batch):
    crops = float_crops(batch, seed=30) if kind == "float32" else uint8_crops(batch, seed=31)
    want = regress(ckpt("d2h2"), crops)
    views = layouts(crops)
    if batch == 1:  # every layout at batch 3; two suffice here (sanitizer runs are slow)
        views = {k: views[k] for k in ("c", "negative")}
    for name, view in views.items():
        if name != "c":
            assert not view.flags.c_contiguous or not view.flags.writeable, name
        got = model.regress(view)
        assert_same_arrays(got, want)
    # the input was not modified
    assert np.array_equal(crops, float_crops(batch, seed=30) if kind == "float32" else uint8_crops(batch, seed=31))


def test_regress_params_only_and_mano_file(model, ckpt, mano_npz):
    crops = uint8_crops(2, seed=32)
    full = model.regress(crops)
    with hamer.Model(ckpt("d2h2_nomano")) as m:
        assert m.info["has_mano"] is False and m.faces is None
        with pytest.raises(hamer.HamerError) as e:
            m.regress(crops)
        assert e.value.code == hamer.E_NOMANO and "MANO" in str(e.value)
        with pytest.raises(hamer.HamerError) as e:
            m.predict(np.zeros((64, 64, 3), np.uint8), [[10, 10, 40, 40]])
        assert e.value.code == hamer.E_NOMANO
        got = m.regress(crops, params_only=True)
        assert_same_arrays(got, {k: full[k] for k in ("params", "pred_cam", "pred_cam_t")})
    with hamer.Model(ckpt("d2h2_nomano"), mano=mano_npz) as m:
        assert m.info["has_mano"] is True
        assert_same_arrays(m.regress(crops), full)


# ---------------------------------------------------------------------------
# predict / render == hamer run
# ---------------------------------------------------------------------------

BOXES = [RIGHT, LEFT, OUTSIDE]
SIDES = [True, False, True]


def test_predict_equals_cli_json(model, scene):
    want = scene["json"]["hands"]
    assert "error" in want[2] and "error" not in want[0] and "error" not in want[1]
    sources = {
        "Path": scene["png"],
        "array": scene["img"],
        "bytes": scene["png"].read_bytes(),
        "strided array": np.pad(scene["img"], ((0, 0), (0, 0), (0, 1)))[..., :3],
    }
    for name, src in sources.items():
        got = model.predict(src, BOXES, is_right=SIDES, vertices=True)
        assert_hands_equal_json(got, want)
    # without vertices: the same minus "vertices"
    got = model.predict(scene["img"], np.array(BOXES), is_right=np.array(SIDES))
    assert_hands_equal_json(got, [{k: v for k, v in h.items() if k not in ("vertices", "vertices_cam")} for h in want])


def test_predict_pad_rescale_equals_cli(model, scene, ckpt):
    out = scene["dir"] / "pad.json"
    proc = run_hamer(["run", "--model", ckpt("d2h2"), "--image", scene["png"], "--box", box_arg(LEFT, "left"),
                      "--box", box_arg(RIGHT, "left"), "--crop-mode", "pad", "--rescale", "1.5",
                      "--output", out])
    assert proc.returncode == 0, describe(proc)
    got = model.predict(str(scene["png"]), [LEFT, RIGHT], is_right=False, rescale=1.5, crop_mode="pad")
    assert_hands_equal_json(got, json.loads(out.read_text())["hands"])


def test_render_equals_cli(model, scene):
    hands = model.predict(scene["img"], BOXES, is_right=SIDES, vertices=True)
    for side_view, ref in ((False, "overlay.png"), (True, "side.png")):
        png = model.render(scene["img"], hands, side_view=side_view)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        want = np.asarray(Image.open(scene["dir"] / ref).convert("RGB"))
        assert np.array_equal(hamer.read_image(png), want), ref
    with pytest.raises(hamer.HamerError, match="vertices=True"):
        model.render(scene["img"], model.predict(scene["img"], [RIGHT]))


def test_read_image_and_empty_requests(model, scene, tmp_path):
    assert np.array_equal(hamer.read_image(scene["png"]), scene["img"])
    assert np.array_equal(hamer.read_image(bytearray(scene["png"].read_bytes())), scene["img"])
    assert model.predict(scene["img"], []) == []
    one = model.predict(scene["img"], [RIGHT, LEFT], is_right=False)
    assert [h["is_right"] for h in one] == [False, False]


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

def cli_load_error(tmp_path, model_path):
    """The CLI's one-line message for a model that fails to load."""
    inp = tmp_path / "in.npy"
    np.save(inp, uint8_crops(1))
    proc = run_hamer(["regress", "--model", model_path, "--input", inp, "--output", tmp_path / "o.npz"])
    assert proc.returncode == 1, describe(proc)
    line, = proc.stderr.splitlines()
    assert line.startswith("hamer: ")
    return line[len("hamer: "):]


@pytest.mark.parametrize("case", ["missing", "garbage", "d1h1_missing_key", "d1h1_transposed"])
def test_model_load_errors_match_cli(tmp_path, ckpt, hamer_bin, case):
    if case == "missing":
        path = tmp_path / "no_such_model.ckpt"
    elif case == "garbage":
        path = tmp_path / "garbage.ckpt"
        path.write_bytes(b"this is not a checkpoint\n" * 100)
    else:
        path = ckpt(case)
    with pytest.raises(hamer.HamerError) as e:
        hamer.Model(path)
    # The code comes from hamer_last_error_code (hamer_model_load returns
    # only NULL) and picks the subclass: I/O for a missing file, format for
    # a file that is not what it claims.
    if case == "missing":
        assert "no_such_model.ckpt" in str(e.value)
        assert isinstance(e.value, hamer.HamerIOError) and isinstance(e.value, OSError)
        assert e.value.code == hamer.E_IO
    else:
        assert isinstance(e.value, hamer.HamerFormatError) and isinstance(e.value, ValueError)
        assert e.value.code in (hamer.E_FORMAT, hamer.E_SHAPE)
    assert str(e.value) == cli_load_error(tmp_path, path)


def test_model_option_errors(ckpt):
    for kwargs in ({"precision": "fp16"}, {"threads": 0}, {"threads": "2"}, {"max_batch": 0},
                   {"max_states": 0}):
        with pytest.raises(hamer.HamerError) as e:
            hamer.Model(ckpt("d1h1"), **kwargs)
        assert e.value.code == hamer.E_ARG, kwargs
    with pytest.raises(TypeError):
        hamer.Model(12345)


@pytest.mark.parametrize("crops,needle", [
    (np.zeros((1, 3, 256, 192), np.float64), "float64"),
    (np.zeros((1, 256, 192, 3), np.int32), "int32"),
    (np.zeros((1, 256, 192, 3), np.float32), "[B,3,256,192]"),
    (np.zeros((1, 3, 256, 192), np.uint8), "[B,256,192,3]"),
    (np.zeros((3, 256, 192), np.float32), "[B,3,256,192]"),
    (np.zeros((0, 3, 256, 192), np.float32), "B >= 1"),
    ([[[[0.0]]]], "float64"),
])
def test_regress_bad_crops(small, crops, needle):
    with pytest.raises(hamer.HamerError) as e:
        small.regress(crops)
    assert e.value.code == hamer.E_ARG and needle in str(e.value), str(e.value)


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_regress_non_finite_crops(small, value):
    """Refused by the library, as by the CLI (issue 12, finding 13)."""
    crops = float_crops(2)
    crops[1, 0, 3, 4] = value
    with pytest.raises(hamer.HamerArgumentError) as e:
        small.regress(crops)
    assert e.value.code == hamer.E_ARG and "crop 1 has a non-finite value" in str(e.value), str(e.value)
    small.regress(float_crops(1))  # the state is still good


_INTERRUPT_CHILD = r"""
import signal, sys, time
import numpy as np
import hamer
# One crop per pass: the library asks the cancel callback between blocks and passes.
model = hamer.Model(sys.argv[1], threads=1, max_batch=1)
crops = np.random.RandomState(0).randint(0, 256, (64, 256, 192, 3)).astype(np.uint8)
print("start", flush=True)
t0 = time.monotonic()
try:
    model.regress(crops)
    print("finished", time.monotonic() - t0, flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic() - t0, flush=True)
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
model.regress(crops[:1])  # the state is still good
print("usable", flush=True)
"""


def test_keyboard_interrupt_stops_a_long_batch(ckpt, tmp_path):
    """Ctrl-C during a 64-crop batch (tens of seconds) raises
    KeyboardInterrupt promptly instead of after the batch (issue 12,
    finding 13)."""
    script = tmp_path / "child.py"
    script.write_text(_INTERRUPT_CHILD)
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    proc = subprocess.Popen([sys.executable, str(script), str(ckpt("d2h2"))], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "start"
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        t_sig = time.monotonic()
        out, err = proc.communicate(timeout=120)
        waited = time.monotonic() - t_sig
    finally:
        proc.kill()
    assert proc.returncode == 0 and "interrupted" in out and "usable" in out, f"{out}\n{err}"
    bound = 15 if SANITIZE else 5
    assert waited < bound, f"took {waited:.1f} s after SIGINT (bound {bound} s)"


def test_sigint_handler_restored_after_calls(small):
    small.regress(float_crops(1))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_model_cannot_be_copied_or_pickled(small):
    """A copy would share the handle and free it under the original (issue
    12, finding 12: a heap-use-after-free under ASan): refused."""
    import copy
    import pickle
    for what, fn in [("copied", copy.copy), ("copied", copy.deepcopy), ("pickled", pickle.dumps),
                     ("pickled", lambda m: pickle.dumps(m, protocol=0)), ("pickled", lambda m: m.__reduce_ex__(2))]:
        with pytest.raises(TypeError) as e:
            fn(small)
        assert f"cannot be {what}" in str(e.value) and "Model" in str(e.value), str(e.value)
    with pytest.raises(TypeError):
        copy.deepcopy({"model": small})
    # The original is intact after the refused copies.
    out = small.regress(float_crops(1))
    assert np.isfinite(out["params"]).all()


def test_predict_bad_requests(small, tmp_path):
    img = np.zeros((120, 160, 3), np.uint8)
    good = [[10, 10, 60, 80]]
    cases = [
        (dict(image=img, boxes=[[1, 2, 3]]), "x1, y1, x2, y2"),
        (dict(image=img, boxes="abc"), "x1, y1, x2, y2"),
        (dict(image=img, boxes=[[1, 2, 3, 4], [1, 2]]), "x1, y1, x2, y2"),
        (dict(image=img, boxes=good, is_right=[True, False]), "2 entries for 1 boxes"),
        (dict(image=img, boxes=good, is_right=["left"]), "bools"),
        (dict(image=img, boxes=good, is_right=1), "bool"),
        (dict(image=img, boxes=[[10, 10, 60, 80]] * 65), "at most 64"),
        (dict(image=img[..., 0], boxes=good), "HxWx3 uint8"),
        (dict(image=img.astype(np.float32), boxes=good), "HxWx3 uint8"),
        (dict(image=np.zeros((0, 5, 3), np.uint8), boxes=good), "empty"),
        (dict(image=img, boxes=good, crop_mode="crop"), "crop_mode"),
        (dict(image=img, boxes=good, rescale=0), "rescale"),
        (dict(image=img, boxes=good, rescale=20), "(0, 16]"),
        (dict(image=tmp_path / "missing.png", boxes=good), "missing.png"),
        (dict(image=b"\xff\xd8\xff\xe0garbage", boxes=good), ""),
    ]
    for kwargs, needle in cases:
        with pytest.raises(hamer.HamerError) as e:
            small.predict(**kwargs)
        assert needle in str(e.value), (needle, str(e.value))
        assert e.value.code is not None and e.value.code < 0
    with pytest.raises(hamer.HamerError) as e:
        hamer.read_image(tmp_path / "missing.png")
    assert e.value.code == hamer.E_IO and e.value.code_name == "HAMER_E_IO"
    assert isinstance(e.value, hamer.HamerIOError)


def test_integers_out_of_c_range_are_refused(small, tmp_path):
    """Issue 21: ctypes passes the low 32 bits of a Python int, so
    max_hands=2**32+8 ran as 8. The public functions check what they hand
    over (HamerArgumentError naming the argument); under them every
    integer structure field and by-value integer argument of the bound
    functions (those of hamer._folder included) refuses what its C type
    cannot hold."""
    from hamer import _lib
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(hamer.HamerArgumentError, match="max_hands = 4294967304 does not fit"):
        list(small.predict_folder(empty, max_hands=2**32 + 8))
    for kw, needle in [({"min_score": "0.5"}, "min_score must be a number"), ({"rescale": None}, "rescale")]:
        with pytest.raises(hamer.HamerArgumentError, match=needle):
            list(small.predict_folder(empty, **kw))
    img = np.zeros((64, 64, 3), np.uint8)
    for rescale in ("2", 2**1100):
        with pytest.raises(hamer.HamerArgumentError, match="rescale must be a number"):
            small.predict(img, [[1, 1, 20, 20]], rescale=rescale)
    with pytest.raises(ValueError, match=r"PredictParams\.crop_mode = 4294967296 is outside"):
        _lib.PredictParams(rescale=2.0, crop_mode=2**32)
    with pytest.raises(ValueError, match=r"DetectParams\.max_hands"):
        _lib.DetectParams().max_hands = 2**31
    with pytest.raises(ValueError, match=r"Box\.is_right"):
        _lib.Box().is_right = -2**31 - 1
    lib = _lib.load()
    with pytest.raises(ctypes.ArgumentError, match="outside"):
        lib.hamer_strerror(2**32 - 1)
    list(small.predict_folder(empty))  # binds hamer._folder's functions
    with pytest.raises(ctypes.ArgumentError, match="outside"):
        lib.hamer_detect_state_new(None, 2**32 + 1)
    assert lib.hamer_strerror(hamer.E_IO)  # in range: unchanged


def test_error_classes_and_library_tables():
    """Each HAMER_E_* code maps to one subclass (bad arguments stay
    ValueErrors); descriptions come from the library's hamer_strerror."""
    want = {hamer.E_ARG: (hamer.HamerArgumentError, ValueError), hamer.E_IO: (hamer.HamerIOError, OSError),
            hamer.E_FORMAT: (hamer.HamerFormatError, ValueError), hamer.E_SHAPE: (hamer.HamerFormatError, ValueError),
            hamer.E_NOMEM: (hamer.HamerMemoryError, MemoryError),
            hamer.E_UNSUPPORTED: (hamer.HamerUnsupportedError, RuntimeError),
            hamer.E_NOMANO: (hamer.HamerUnsupportedError, RuntimeError)}
    texts = set()
    for code, (cls, base) in want.items():
        e = hamer.HamerError("m", code)
        assert type(e) is cls and isinstance(e, base) and isinstance(e, hamer.HamerError)
        assert str(e) == "m" and e.code == code
        texts.add(hamer.strerror(code))
    assert len(texts) == len(want) and "unknown error" not in texts
    assert hamer.strerror(-99) == "unknown error"
    assert hamer.system_info().startswith("kernels: ")


def test_constants_match_the_header():
    """The binding's copies of the header's macros (a shared library cannot
    export them) equal include/hamer.h's."""
    import re
    from hamer import _lib
    text = (REPO / "include" / "hamer.h").read_text()
    defs = dict(re.findall(r"#define HAMER_(\w+) +([-0-9.]+)f?\b", text))
    defs.update(re.findall(r"\bHAMER_(\w+) = (-?\d+)\b", text))  # enum constants
    for name in ["CROP_H", "CROP_W", "N_VERTS", "N_FACES", "N_KP", "N_PARAMS", "MAX_HANDS", "MAX_RESCALE",
                 "FOCAL", "PRECISION_FP32", "PRECISION_FAST", "PARAMS_RESERVED", "HAND_RESERVED",
                 "TIMINGS_RESERVED", "SMOOTH_NONE",
                 "SMOOTH_ONE_EURO", "BODY_AUTO", "BODY_ON", "BODY_OFF"]:
        assert float(defs[name]) == float(getattr(_lib, name)), name
    codes = dict(re.findall(r"HAMER_(E_\w+|OK) = (-?\d+)", text))
    assert codes and all(int(v) == getattr(_lib, k) for k, v in codes.items()), codes


def test_one_version_everywhere():
    """CMakeLists.txt's project version is the library's, the header's
    (hamer_version.h, generated), and the Python package's."""
    import re
    cmake = (REPO / "CMakeLists.txt").read_text()
    v = re.search(r"project\(hamer VERSION ([0-9.]+)", cmake).group(1)
    assert hamer.library_version() == v
    assert hamer.__version__ == v
    hdr = (BUILD / "include" / "hamer_version.h").read_text()
    assert f'#define HAMER_VERSION_STRING "{v}"' in hdr
    # the build backend reads hamer/_version.py and refuses a library of another version
    backend = (REPO / "python" / "_hamer_build.py").read_text()
    assert '"hamer" / "_version.py"' in backend and "HAMER_VERSION_STRING" in backend


def test_bad_box_fails_only_its_hand(small):
    """As in the library: a NaN / empty / outside box gives that hand an
    "error" entry; the other hands are computed."""
    img = np.full((120, 160, 3), 90, np.uint8)
    nan = float("nan")
    hands = small.predict(img, [[nan, 10, 60, 80], [10, 10, 60, 80], [30, 30, 30, 50]],
                          is_right=[True, False, True])
    assert "finite" in hands[0]["error"] and hands[0]["error"].startswith("hand 0:")
    assert np.isnan(hands[0]["bbox"][0]) and list(hands[0]) == ["bbox", "is_right", "error"]
    assert "error" not in hands[1] and hands[1]["betas"].shape == (10,)
    assert hands[2]["error"].startswith("hand 2:")


# ---------------------------------------------------------------------------
# Threads
# ---------------------------------------------------------------------------

def test_two_threads_share_one_model(model1):
    inputs = [float_crops(1, seed=40 + i) if i % 2 else uint8_crops(1, seed=40 + i) for i in range(4)]
    want = [model1.regress(c) for c in inputs]
    results, errors = {}, []
    barrier = threading.Barrier(2)

    def work(tid):
        try:
            for j in range(tid, len(inputs), 2):
                barrier.wait(timeout=TIMEOUT_SMALL)  # both threads call at the same time
                results[j] = model1.regress(inputs[j])
        except Exception as e:  # reported by the main thread
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for j in range(len(inputs)):
        assert_same_arrays(results[j], want[j])
    assert model1._n_states <= 2  # one state per concurrently calling thread


def test_gil_released_during_inference(model1):
    """While a thread is inside the library, other Python threads run: the
    main thread's loop keeps ticking (ctypes.CDLL drops the GIL around the
    foreign call; with the GIL held it would stall for the whole call)."""
    crops = uint8_crops(1, seed=50)
    model1.regress(crops)  # a warm state
    for _ in range(3):  # retried: a busy machine may deschedule us for a while
        span = {}

        def call():
            span["t0"] = time.perf_counter()
            model1.regress(crops)
            span["t1"] = time.perf_counter()

        th = threading.Thread(target=call)
        ticks = []
        th.start()
        while th.is_alive():
            ticks.append(time.perf_counter())
        th.join()
        inside = np.array([t for t in ticks if span["t0"] <= t <= span["t1"]])
        duration = span["t1"] - span["t0"]
        edges = np.concatenate([[span["t0"]], inside, [span["t1"]]])
        max_gap = np.diff(edges).max()
        if max_gap < 0.5 * duration:
            return
    pytest.fail(f"the main thread stalled {max_gap:.3f} s during a {duration:.3f} s call")


def test_two_threads_run_in_parallel(model1):
    """Soft timing check: 2 threads x N calls take about as long as 1 x N on
    a machine with two free cores. Skipped (not failed) when the machine is
    too busy to tell, unless HAMER_STRICT_TIMING=1; result equality and the
    GIL check above are the hard checks."""
    if SANITIZE:
        pytest.skip("timing is meaningless under the sanitizers")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two CPUs")
    crops, n = uint8_crops(1, seed=60), 2
    model1.regress(crops)
    # two warm states
    ts = [threading.Thread(target=model1.regress, args=(crops,)) for _ in range(2)]
    [t.start() for t in ts], [t.join() for t in ts]

    def serial():
        for _ in range(n):
            model1.regress(crops)

    t0 = time.perf_counter()
    serial()
    one = time.perf_counter() - t0
    ts = [threading.Thread(target=serial) for _ in range(2)]
    t0 = time.perf_counter()
    [t.start() for t in ts], [t.join() for t in ts]
    two = time.perf_counter() - t0
    ratio = two / one
    if ratio >= 1.8:
        msg = f"2 threads took {ratio:.2f}x one thread's time (load average {os.getloadavg()[0]:.1f})"
        if os.environ.get("HAMER_STRICT_TIMING") == "1":
            pytest.fail(msg)
        pytest.skip("machine too busy: " + msg)


# ---------------------------------------------------------------------------
# Lifetime
# ---------------------------------------------------------------------------

def test_context_manager_closes(ckpt):
    crops = uint8_crops(1, seed=70)
    with hamer.Model(ckpt("d1h1"), threads=1) as m:
        assert not m.closed
        assert m.regress(crops)["vertices"].shape == (1, 778, 3)
    assert m.closed and "closed" in repr(m)
    img = np.zeros((50, 50, 3), np.uint8)
    for use in (lambda: m.regress(crops), lambda: m.predict(img, [[1, 1, 20, 20]]),
                lambda: m.render(img, []), lambda: m.info, lambda: m.faces, lambda: m.__enter__()):
        with pytest.raises(hamer.HamerError, match="closed"):
            use()
    m.close()  # idempotent


def test_close_waits_for_calls_in_progress(ckpt):
    m = hamer.Model(ckpt("d1h1"), threads=1)
    crops = uint8_crops(2, seed=71)
    want = m.regress(crops)
    out = {}
    th = threading.Thread(target=lambda: out.update(m.regress(crops)))
    th.start()
    deadline = time.monotonic() + TIMEOUT_SMALL
    while m._active == 0 and th.is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)
    m.close()
    th.join()
    assert_same_arrays(out, want)
    assert m.closed and m._idle == []


def test_max_states_bounds_the_pool(ckpt):
    with hamer.Model(ckpt("d1h1"), threads=1, max_states=1) as m:
        crops = [uint8_crops(1, seed=80 + i) for i in range(3)]
        want = [m.regress(c) for c in crops]
        got = [None] * 3
        ts = [threading.Thread(target=lambda i=i: got.__setitem__(i, m.regress(crops[i]))) for i in range(3)]
        [t.start() for t in ts], [t.join() for t in ts]
        for g, w in zip(got, want):
            assert_same_arrays(g, w)
        assert m._n_states == 1


def test_info_and_faces(model, hamer_bin):
    info = model.info
    assert info["vit_depth"] == 2 and info["head_depth"] == 2 and info["vit_dim"] == 1280
    assert info["n_tokens"] == 192 and info["has_mano"] is True
    assert info["precision"] == "fp32" and info["scheme"]
    proc = run_hamer(["--version"])
    assert f"kernels: {info['isa']}" in proc.stdout, describe(proc)
    faces = model.faces
    assert faces.shape == (1538, 3) and faces.dtype == np.int32
    assert faces.min() == 0 and faces.max() == 777


# ---------------------------------------------------------------------------
# Hand detection (issue 13): Model.detect, predict without boxes
# ---------------------------------------------------------------------------

from detect.common import models_dir, shared_images  # noqa: E402


@pytest.fixture(scope="module")
def dmodel(ckpt):
    with hamer.Model(ckpt("d2h2"), detector=str(models_dir())) as m:
        yield m


def test_detect_equals_cli_detect(dmodel, tmp_path, hamer_bin):
    img = shared_images() / "hamer_example_1.jpg"
    out = tmp_path / "boxes.json"
    proc = run_hamer(["detect", "--image", img, "--output", out, "--detector", models_dir()])
    assert proc.returncode == 0, describe(proc)
    want = json.loads(out.read_text())["hands"]
    got = dmodel.detect(img)
    assert len(got) == len(want) >= 3
    for i, (g, w) in enumerate(zip(got, want)):
        assert_detection_equal_json(g, w, f"hand {i}")
    # An array and the file's bytes give the same hands as the path.
    for source in (hamer.read_image(img), img.read_bytes()):
        again = dmodel.detect(source)
        assert [d["bbox"].tolist() for d in again] == [d["bbox"].tolist() for d in got]
    assert dmodel.detect(img, max_hands=1)[0]["bbox"].tolist() == got[0]["bbox"].tolist()


def test_predict_without_boxes_equals_cli_run(dmodel, tmp_path, ckpt, hamer_bin):
    """predict(image) == `hamer run` without boxes, hand for hand, bit for bit."""
    img = shared_images() / "hamer_example_1.jpg"
    out = tmp_path / "result.json"
    proc = run_hamer(["run", "--model", ckpt("d2h2"), "--image", img, "--output", out, "--vertices",
                      "--detector", models_dir()])
    assert proc.returncode == 0, describe(proc)
    doc = json.loads(out.read_text())
    assert doc["boxes"] == "detected"
    got = dmodel.predict(str(img), vertices=True)
    assert all("detection" in h for h in got)
    assert_hands_equal_json(got, doc["hands"])


def test_predict_without_boxes_on_a_photo_without_hands(dmodel):
    flat = np.full((240, 320, 3), 128, np.uint8)
    assert dmodel.detect(flat) == [] and dmodel.predict(flat) == []


def test_missing_detector_says_how_to_install(ckpt, tmp_path):
    with hamer.Model(ckpt("d1h1"), detector=tmp_path) as m:
        m.regress(float_crops(1))  # loading the model does not need the detector
        img = np.zeros((64, 64, 3), np.uint8)
        for call in (m.detect, m.predict):
            with pytest.raises(hamer.HamerIOError) as e:
                call(img)
            assert str(tmp_path) in str(e.value) and "scripts/get_detector.sh" in str(e.value), str(e.value)


def test_detector_shared_between_models(ckpt):
    import copy
    import pickle
    with hamer.Detector(models_dir(), threads=1) as det:
        for fn in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError):
                fn(det)
        img = hamer.read_image(shared_images() / "hamer_example_5.jpg")
        want = det.detect(img)
        for _ in range(2):
            with hamer.Model(ckpt("d1h1"), detector=det) as m:
                assert m.detector is det
                assert [d["bbox"].tolist() for d in m.detect(img)] == [d["bbox"].tolist() for d in want]
        assert not det.closed  # a Detector given to a Model is the caller's
    assert det.closed
    with pytest.raises(hamer.HamerError):
        det.detect(img)
    with pytest.raises(TypeError):
        hamer.Model(ckpt("d1h1"), detector=3)


# ---------------------------------------------------------------------------
# Sanitizer builds
# ---------------------------------------------------------------------------

@pytest.mark.skipif(not DELEGATE_TO_ASAN_CHILD, reason="only in sanitizer builds (HAMER_SANITIZE=1)")
def test_binding_under_sanitizer(ckpt, mano_npz, hamer_bin):
    """Run this file in a python3 with the ASan runtime preloaded."""
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "a sanitizer build needs the compiler's libasan.so"
    libasan = subprocess.run([cc, "-print-file-name=libasan.so"], stdout=subprocess.PIPE, text=True,
                             check=True).stdout.strip()
    assert os.path.isabs(libasan) and os.path.exists(libasan), f"libasan.so not found ({libasan!r})"
    # Generate the fixtures here, so the child only reads them.
    for name in ("d2h2", "d2h2_nomano", "d1h1", "d1h1_missing_key", "d1h1_transposed"):
        checkpoint_path(name)
    mano_npz_path()
    env = dict(os.environ, LD_PRELOAD=libasan, ASAN_OPTIONS="detect_leaks=0", HAMER_PY_ASAN_CHILD="1",
               HAMER_BUILD=str(BUILD), HAMER_SANITIZE="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", __file__],
                          cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", timeout=3 * TIMEOUT_SMALL)
    assert proc.returncode == 0, f"binding tests under ASan failed (exit {proc.returncode}):\n{proc.stdout[-12000:]}"


def test_detector_body_option():
    """body=: the detector's body models (has_body) and the pass per call;
    a bad value and on without the models are HamerError."""
    img = hamer.read_image(shared_images() / "hamer_example_5.jpg")
    with pytest.raises(hamer.HamerError):
        hamer.Detector(models_dir(), body="yes")
    with hamer.Detector(models_dir(), threads=1) as det:
        assert det.has_body
        off, on = det.detect(img, tiles=False, body="off"), det.detect(img, tiles=False, body="on")
        assert [d["bbox"].tolist() for d in on] == [d["bbox"].tolist() for d in off]
        assert all("source" not in d for d in off) and all(d["source"] == "palm" for d in on)
        with pytest.raises(hamer.HamerError):
            det.detect(img, body="sometimes")
        # body_boxes (default True): basketball1's keypoint-only box, as `hamer detect` gives it
        bb = "/usr/share/doc/opencv-doc/examples/data/basketball1.png"
        with_boxes, without = det.detect(bb, body="on"), det.detect(bb, body="on", body_boxes=False)
        kp = [d for d in with_boxes if d.get("source") == "body-keypoints"]
        assert len(kp) == 1 and kp[0]["landmarks"] is None and kp[0]["score"] >= 0.5, with_boxes
        assert [d["bbox"].tolist() for d in with_boxes if d.get("source") != "body-keypoints"] == \
            [d["bbox"].tolist() for d in without]
        with pytest.raises(hamer.HamerError, match="body_boxes"):
            det.detect(bb, body_boxes="yes")
    with hamer.Detector(models_dir(), threads=1, body="off") as det:
        assert not det.has_body
        with pytest.raises(hamer.HamerError, match="get_detector.sh"):
            det.detect(img, body="on")




# ---------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------

def test_devices(ckpt, small):
    """hamer.backends() lists the CPU (and any other backend with its state);
    Model(device=...) loads on the CPU, refuses an unknown or missing device
    with the library's reason, and never falls back."""
    names = {b["name"]: b for b in hamer.backends()}
    assert names["cpu"]["devices"] == 1 and names["cpu"]["why"] is None and "kernels:" in names["cpu"]["info"]
    for b in names.values():
        assert (b["devices"] > 0) == (b["why"] is None)
    assert small.info["device"] == "cpu"
    with pytest.raises(hamer.HamerArgumentError, match="unknown backend 'nope'"):
        hamer.Model(ckpt("d1h1"), device="nope")
    with pytest.raises(hamer.HamerUnsupportedError, match="'cpu:2' is unavailable"):
        hamer.Model(ckpt("d1h1"), device="cpu:2")
    with pytest.raises(hamer.HamerError, match="device must be a string"):
        hamer.Model(ckpt("d1h1"), device=0)


def test_detector_proposals_option():
    """proposals=: the proposal pass's model (has_proposals) and the pass
    per call; the cooking photo's tongs hand comes from it; a bad value and
    on without the model are HamerError."""
    img = hamer.read_image(shared_images() / "wilor_cooking.jpg")
    with pytest.raises(hamer.HamerError):
        hamer.Detector(models_dir(), proposals="yes")
    with hamer.Detector(models_dir()) as d:
        assert d.has_proposals and d.has_body
        hands = d.detect(img)
        assert len(hands) == 1 and hands[0]["source"] == "proposal", hands
        assert d.detect(img, proposals="off") == []
        with pytest.raises(hamer.HamerError):
            d.detect(img, proposals="maybe")
    with hamer.Detector(models_dir(), proposals="off") as d:
        assert not d.has_proposals
        with pytest.raises(hamer.HamerError) as e:
            d.detect(img, proposals="on")
        assert "proposal pass" in str(e.value)


def test_the_sanitizer_block_is_last():
    """A test defined below the block that follows is not marked: in a
    sanitizer build it loads the instrumented library into the plain python
    and aborts the whole file (two tests once did)."""
    src = open(__file__).read()
    tail = src[src.index("\n# Keep this last: it marks every test defined above it.\n"):]
    assert "\ndef test_" not in tail and "\nasync def test_" not in tail


# Keep this last: it marks every test defined above it.
if DELEGATE_TO_ASAN_CHILD:
    # Everything else runs in the ASan child; the decision is made before
    # any fixture is built, so nothing is computed twice.
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and _name != "test_binding_under_sanitizer" and callable(_fn):
            globals()[_name] = pytest.mark.skip(reason="runs in test_binding_under_sanitizer's ASan python")(_fn)
