"""The hands in the photo's camera: the focal length (given, EXIF, the
model's) and the translation solved through it.

* EXIF: photos written with known camera tags, by Pillow (big-endian TIFF)
  and by hand here (little-endian, tests/../fuzz/make_corpus.py's
  tiff_block), JPEG APP1 and PNG eXIf: hamer_exif_focal gives the focal
  length the documented rules give, computed here from the tags
  (FocalLengthIn35mmFilm over the 35 mm frame's diagonal; FocalLength x the
  focal-plane resolution scaled to the image); rotated photos, resized
  ones, cropped ones (refused), values out of range (refused). Hostile
  blocks (every truncation of a valid one, offsets and counts pointing
  anywhere, random bytes) answer 0 or 1 and never crash; the fuzz target
  fuzz/fuzz_exif.c goes deeper.
* `hamer run` on a photo with EXIF: camera.source "exif" with that focal
  length; --focal / --fov win ("given"); a PNG without EXIF: "default".
* The translation: an independent numpy solver (the same least squares
  and Gauss-Newton written here in float64 from the documented equations,
  with numpy.linalg) on RESULT.json's keypoints_3d and keypoints_2d gives
  the library's cam_t (1e-6 relative), its reprojection error, and
  keypoints_3d_cam = keypoints_3d + cam_t. With the model's own focal
  cam_t equals cam_t_full; two hands of one photo keep their sideways
  order and their depth ratio follows their size in the image.
* Python: Model.predict(..., focal=, fov=) and a path's / bytes' EXIF.
"""

import io
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, TiffImagePlugin

from conftest import REPO, describe, make_image, run_hamer, textured_image

sys.path.insert(0, str(REPO / "fuzz"))
from make_corpus import tiff_block  # noqa: E402  (the little-endian writer)

DIAG35 = math.hypot(36.0, 24.0)
BOXES = ["60,40,170,200", "230,90,330,240:left"]


def lib():
    sys.path.insert(0, str(REPO / "python"))
    from hamer import _lib
    return _lib.load()


def exif_focal(data, w, h):
    """(rc, focal) of hamer_exif_focal on the bytes."""
    import ctypes
    f = ctypes.c_float(-1)
    buf = bytes(data)
    rc = lib().hamer_exif_focal(buf, len(buf), w, h, ctypes.byref(f))
    return rc, f.value


def pillow_block(tags, orientation=None):
    """An EXIF block (b"Exif\\0\\0" + big-endian TIFF) written by Pillow."""
    ex = Image.Exif()
    if orientation:
        ex[0x0112] = orientation
    ex[0x8769] = tags
    return ex.tobytes()


def encode(img, fmt, block):
    buf = io.BytesIO()
    img.save(buf, fmt, exif=block)
    return buf.getvalue()


R = TiffImagePlugin.IFDRational


def expected_35mm(f35, w, h):
    return f35 / DIAG35 * math.hypot(w, h)


def expected_plane(f_mm, res, unit_mm, px, py, w, h):
    return f_mm * res / unit_mm * max(w, h) / max(px, py)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_exif_tags_written_by_pillow(fmt):
    img = Image.fromarray(textured_image(400, 300))
    # FocalLengthIn35mmFilm
    data = encode(img, fmt, pillow_block({0xA405: 26}))
    rc, f = exif_focal(data, 400, 300)
    assert rc == 1 and f == pytest.approx(expected_35mm(26, 400, 300), rel=1e-6)
    # FocalLength + FocalPlaneXResolution (pixels per cm) for a 4000 x 3000 original
    tags = {0x920A: R(425, 100), 0xA20E: R(40000, 6), 0xA20F: R(40000, 6), 0xA210: 3, 0xA002: 4000, 0xA003: 3000}
    rc, f = exif_focal(encode(img, fmt, pillow_block(tags)), 400, 300)
    assert rc == 1 and f == pytest.approx(expected_plane(4.25, 40000 / 6, 10.0, 4000, 3000, 400, 300), rel=1e-6)
    # 35 mm equivalent wins over the focal plane
    rc, f = exif_focal(encode(img, fmt, pillow_block({**tags, 0xA405: 50})), 400, 300)
    assert rc == 1 and f == pytest.approx(expected_35mm(50, 400, 300), rel=1e-6)


def test_exif_tags_written_by_hand_little_endian():
    img = Image.fromarray(textured_image(360, 240))
    camera = [(0x920A, 5, [(88, 1)]), (0xA20E, 5, [(24133, 10)]), (0xA20F, 5, [(24133, 10)]), (0xA210, 3, [3]),
              (0xA002, 4, [8688]), (0xA003, 4, [5792])]
    # the resolution in inches: the unit tag left out (the standard's default)
    inch = [(0x920A, 5, [(88, 1)]), (0xA20E, 5, [(61297, 1)]), (0xA002, 3, [8688]), (0xA003, 3, [5792])]
    for fmt in ("JPEG", "PNG"):
        data = encode(img, fmt, b"Exif\0\0" + tiff_block(True, [], camera))
        rc, f = exif_focal(data, 360, 240)
        # a Canon 5DS R (8688 px across 36 mm) at 88 mm, downscaled to 360 px: about 88/36 * 360
        assert rc == 1 and f == pytest.approx(expected_plane(88, 2413.3, 10, 8688, 5792, 360, 240), rel=1e-6)
        assert f == pytest.approx(88 / 36 * 360, rel=2e-3)
        rc, f = exif_focal(encode(img, fmt, b"Exif\0\0" + tiff_block(True, [], inch)), 360, 240)
        assert rc == 1 and f == pytest.approx(expected_plane(88, 61297, 25.4, 8688, 5792, 360, 240), rel=1e-6)


def test_exif_rotation_resize_crop_and_range():
    img = Image.fromarray(textured_image(300, 400))  # stored 300 wide; shown after orientation 6 as 400 x 300
    tags = {0x920A: R(6, 1), 0xA20E: R(1000, 1), 0xA210: 4, 0xA002: 3000, 0xA003: 4000}
    data = encode(img, "JPEG", pillow_block(tags, orientation=6))
    rc, f = exif_focal(data, 400, 300)   # the decoded (rotated) size: the same focal length
    assert rc == 1 and f == pytest.approx(6 * 1000 * 400 / 4000, rel=1e-6)
    # a crop (another aspect ratio than the pixel dimensions): not used
    assert exif_focal(data, 400, 200) == (0, -1.0)
    # no pixel dimensions: the scale to this image is unknown, not used
    no_dims = {k: v for k, v in tags.items() if k not in (0xA002, 0xA003)}
    assert exif_focal(encode(img, "JPEG", pillow_block(no_dims)), 300, 400) == (0, -1.0)
    # values outside 0.05 .. 100 x the longer side: not used
    assert exif_focal(encode(img, "JPEG", pillow_block({0xA405: 1})), 400, 300)[0] == 0
    assert exif_focal(encode(img, "JPEG", pillow_block({0xA405: 9000})), 40, 30)[0] == 0
    # no EXIF, an EXIF without camera tags, other files, nothing
    assert exif_focal(encode(img, "JPEG", pillow_block({0xA001: 1})), 300, 400) == (0, -1.0)
    plain = io.BytesIO()
    img.save(plain, "PNG")
    assert exif_focal(plain.getvalue(), 300, 400) == (0, -1.0)
    assert exif_focal(b"GIF89a" + bytes(100), 10, 10) == (0, -1.0)
    assert exif_focal(b"", 10, 10) == (0, -1.0)


def test_exif_hostile():
    """Every truncation of a valid file, every 4-byte window overwritten with
    0xff and 0x00 over the block, random bytes after a JPEG's SOI: 0 or 1,
    a focal length in range when 1, never a crash."""
    img = Image.fromarray(textured_image(64, 48))
    camera = [(0x920A, 5, [(425, 100)]), (0xA20E, 5, [(4000, 6)]), (0xA210, 3, [4]), (0xA002, 4, [64]),
              (0xA003, 4, [48]), (0xA405, 3, [28])]
    data = encode(img, "JPEG", b"Exif\0\0" + tiff_block(False, [(0x0112, 3, [1])], camera))
    start = data.index(b"Exif")
    seen = set()
    for n in range(len(data)):
        rc, f = exif_focal(data[:n], 64, 48)
        seen.add(rc)
        assert rc in (0, 1) and (rc == 0 or 0.05 * 64 <= f <= 100 * 64)
    assert seen == {0, 1}
    for at in range(start - 4, start + 200):
        for fill in (b"\xff\xff\xff\xff", b"\0\0\0\0", b"\x7f\xff\xff\xff"):
            bad = data[:at] + fill + data[at + 4:]
            rc, f = exif_focal(bad, 64, 48)
            assert rc in (0, 1) and (rc == 0 or 0.05 * 64 <= f <= 100 * 64)
    rng = np.random.RandomState(7)
    for _ in range(300):
        junk = b"\xff\xd8\xff\xe1" + rng.randint(0, 256, rng.randint(2, 400), np.uint8).tobytes()
        assert exif_focal(junk, 64, 48)[0] in (0, 1)


# ---- the translation -----------------------------------------------------------

def numpy_fit(pts, px, f, cx, cy):
    """The translation projecting pts + t onto px through (f, cx, cy):
    linear least squares (numpy.linalg.lstsq), then Gauss-Newton steps with
    halving, in float64. Returns t and the mean / max pixel error."""
    pts, px = np.asarray(pts, np.float64), np.asarray(px, np.float64)
    du, dv = px[:, 0] - cx, px[:, 1] - cy
    A = np.zeros((2 * len(pts), 3))
    A[0::2, 0], A[0::2, 2] = f, -du
    A[1::2, 1], A[1::2, 2] = f, -dv
    b = np.empty(2 * len(pts))
    b[0::2], b[1::2] = du * pts[:, 2] - f * pts[:, 0], dv * pts[:, 2] - f * pts[:, 1]
    t = np.linalg.lstsq(A, b, rcond=None)[0]

    def res(t):
        q = pts + t
        return np.stack([f * q[:, 0] / q[:, 2] + cx, f * q[:, 1] / q[:, 2] + cy], 1) - px

    for _ in range(20):
        q = pts + t
        z = q[:, 2]
        J = np.zeros((2 * len(pts), 3))
        J[0::2, 0], J[0::2, 2] = f / z, -f * q[:, 0] / z ** 2
        J[1::2, 1], J[1::2, 2] = f / z, -f * q[:, 1] / z ** 2
        step = np.linalg.solve(J.T @ J, J.T @ res(t).reshape(-1))
        e0, lam = (res(t) ** 2).sum(), 1.0
        while lam > 1e-9 and (res(t - lam * step) ** 2).sum() > e0:
            lam /= 2
        t = t - lam * step
    d = np.linalg.norm(res(t), axis=1)
    return t, d.mean(), d.max()


def run_json(ckpt, tmp_path, image, *extra, name="r.json"):
    out = tmp_path / name
    proc = run_hamer(["run", "--model", ckpt("d1h1"), "--image", image, "--output", out,
                      *sum((["--box", b] for b in BOXES), []), *extra])
    assert proc.returncode == 0, describe(proc)
    return json.loads(out.read_text())


def test_translation_against_numpy(ckpt, tmp_path):
    img = tmp_path / "photo.png"
    make_image(img)
    base = run_json(ckpt, tmp_path, img)
    given = run_json(ckpt, tmp_path, img, "--focal", "600", name="f.json")
    fov = run_json(ckpt, tmp_path, img, "--fov", "70", name="v.json")
    W, H = base["image"]["width"], base["image"]["height"]
    for doc, focal, source in ((base, 5000 / 256 * max(W, H), "default"), (given, 600, "given"),
                               (fov, max(W, H) / 2 / math.tan(math.radians(35)), "given")):
        for hand in doc["hands"]:
            cam = hand["camera"]
            assert cam["source"] == source and cam["focal_length"] == pytest.approx(focal, rel=1e-6)
            assert cam["principal_point"] == [W / 2, H / 2]
            t, em, ex = numpy_fit(hand["keypoints_3d"], hand["keypoints_2d"], cam["focal_length"], W / 2, H / 2)
            assert np.allclose(hand["cam_t"], t, rtol=1e-6, atol=1e-7), (hand["cam_t"], t)
            assert hand["reprojection_error"]["mean"] == pytest.approx(em, abs=1e-4)
            assert hand["reprojection_error"]["max"] == pytest.approx(ex, abs=1e-4)
            kc = np.array(hand["keypoints_3d"], np.float32) + np.array(hand["cam_t"], np.float32)
            assert np.array_equal(np.array(hand["keypoints_3d_cam"], np.float32), kc)
    # the old fields as they were, whatever the camera
    for a, b in zip(base["hands"], given["hands"]):
        for key in ("cam_t_full", "focal_length", "keypoints_2d", "keypoints_3d", "pred_cam", "global_orient"):
            assert a[key] == b[key], key
        # with the model's own focal the translation is the demo's
        assert np.allclose(a["cam_t"], a["cam_t_full"], rtol=1e-5)
        # a 600 px camera brings the hand to about 600 / focal_length of the depth
        assert b["cam_t"][2] / a["cam_t"][2] == pytest.approx(600 / a["focal_length"], rel=0.05)


def test_exif_end_to_end(ckpt, tmp_path):
    """A JPEG with FocalLengthIn35mmFilm: camera from EXIF; --focal and --fov
    win; the same PNG without EXIF: the model's."""
    rgb = textured_image(400, 300)
    path = tmp_path / "exif.jpg"
    Image.fromarray(rgb).save(path, "JPEG", quality=95, exif=pillow_block({0xA405: 24}))
    doc = run_json(ckpt, tmp_path, path)
    want = expected_35mm(24, 400, 300)
    for hand in doc["hands"]:
        assert hand["camera"]["source"] == "exif"
        assert hand["camera"]["focal_length"] == pytest.approx(want, rel=1e-6)
    doc = run_json(ckpt, tmp_path, path, "--focal", "900", name="g.json")
    assert {h["camera"]["source"] for h in doc["hands"]} == {"given"}
    assert {h["camera"]["focal_length"] for h in doc["hands"]} == {900}
    doc = run_json(ckpt, tmp_path, path, "--fov", "50", name="v.json")
    assert {h["camera"]["source"] for h in doc["hands"]} == {"given"}
    png = tmp_path / "plain.png"
    Image.fromarray(rgb).save(png)
    doc = run_json(ckpt, tmp_path, png, name="p.json")
    assert {h["camera"]["source"] for h in doc["hands"]} == {"default"}
    # bad values: one line, exit 2, nothing written
    for opt, value in (("--focal", "0"), ("--focal", "nan"), ("--focal", "2e7"), ("--fov", "180"), ("--fov", "-1")):
        out = tmp_path / "bad.json"
        proc = run_hamer(["run", "--model", ckpt("d1h1"), "--image", path, "--output", out, "--box", BOXES[0],
                          opt, value])
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and opt in proc.stderr, describe(proc)
        assert not out.exists()


def test_python_focal_and_exif(ckpt, tmp_path):
    sys.path.insert(0, str(REPO / "python"))
    import hamer
    rgb = textured_image(400, 300)
    path = tmp_path / "exif.jpg"
    Image.fromarray(rgb).save(path, "JPEG", quality=95, exif=pillow_block({0xA405: 35}))
    boxes = [[60, 40, 170, 200], [230, 90, 330, 240]]
    with hamer.Model(ckpt("d1h1")) as m:
        by_path = m.predict(str(path), boxes, is_right=[True, False])
        by_bytes = m.predict(path.read_bytes(), boxes, is_right=[True, False])
        by_array = m.predict(hamer.read_image(path), boxes, is_right=[True, False])
        given = m.predict(str(path), boxes, is_right=[True, False], focal=800.0)
        with pytest.raises(hamer.HamerArgumentError):
            m.predict(str(path), boxes, focal=-3)
        with pytest.raises(hamer.HamerArgumentError):
            m.predict(str(path), boxes, fov=180)
    want = expected_35mm(35, 400, 300)
    for h in by_path + by_bytes:
        assert h["camera"]["source"] == "exif" and h["camera"]["focal_length"] == pytest.approx(want, rel=1e-6)
    assert all(h["camera"]["source"] == "default" for h in by_array)  # pixels carry no EXIF
    assert all(h["camera"]["source"] == "given" and h["camera"]["focal_length"] == 800 for h in given)
    for a, b in zip(by_path, by_bytes):
        assert np.array_equal(a["cam_t"], b["cam_t"]) and np.array_equal(a["keypoints_3d_cam"], b["keypoints_3d_cam"])
    # the CLI's bytes
    doc = run_json(ckpt, tmp_path, path)
    for h, d in zip(by_path, doc["hands"]):
        assert np.array_equal(h["cam_t"], np.array(d["cam_t"], np.float32))
