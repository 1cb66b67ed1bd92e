"""`hamer run`: image + boxes in, RESULT.json / OBJ / pictures out.

The run output must equal `hamer crop` + `hamer regress` followed by the
full-image camera and left-hand mirroring, recomputed here in numpy from the
facts (HaMeR's demo: cam_crop_to_full, vertices x negated for left hands).
"""

import json

import numpy as np
import pytest
from PIL import Image
from scipy.spatial import Delaunay

from conftest import H, W, describe, make_image, run_hamer

RIGHT = (60.5, 40.25, 170.0, 200.0)
LEFT = (230.0, 90.0, 330.0, 240.5)
MIRROR = np.array([1, -1, -1, -1, 1, 1, -1, 1, 1], np.float32)


def box_arg(b, side):
    return ",".join(repr(float(v)) for v in b) + ":" + side


def box_center_size(b, rescale=2.0):
    """The demo's crop centre (float32) and size (float64) of a float32 box."""
    b = np.asarray(b, np.float32)
    center = (b[:2] + b[2:]) / np.float32(2)
    wh = np.float64(rescale) * (b[2:] - b[:2]).astype(np.float64)
    return center, max(wh[1], wh[0] * 256 / 192)


def cam_full(pred_cam, is_right, center, size):
    """cam_crop_to_full in float32 (left hands: tx negated first)."""
    s, tx, ty = (np.float32(v) for v in pred_cam)
    if not is_right:
        tx = -tx
    f = np.float32(5000 / 256 * max(W, H))
    bs = np.float32(size) * s + np.float32(1e-9)
    tz = np.float32(2) * f / bs
    cx = np.float32(2) * (np.float32(center[0]) - np.float32(W / 2)) / bs + tx
    cy = np.float32(2) * (np.float32(center[1]) - np.float32(H / 2)) / bs + ty
    return np.array([cx, cy, tz], np.float32), f


@pytest.fixture(scope="module")
def scene(tmp_path_factory, ckpt, hamer_bin):
    d = tmp_path_factory.mktemp("run")
    img = make_image(d / "photo.png")
    model = ckpt("d2h2")
    out = d / "result.json"
    proc = run_hamer(["run", "--model", model, "--image", d / "photo.png",
                      "--box", box_arg(RIGHT, "right"), "--box", box_arg(LEFT, "left"),
                      "--box", "5000,5000,5100,5100", "--output", out, "--vertices",
                      "--obj-dir", d / "objs", "--render", d / "overlay.png", "--draw", "mesh",
                      "--side-view", d / "side.png"])  # the marks: tests/test_overlay.py
    return dict(dir=d, img=img, model=model, proc=proc, out=out)


def test_partial_failure_reported(scene):
    proc = scene["proc"]
    assert proc.returncode == 3, describe(proc)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "hand 2" in lines[0] and "outside" in lines[0], describe(proc)
    res = json.loads(scene["out"].read_text())
    assert res["image"] == {"width": W, "height": H}
    hands = res["hands"]
    assert len(hands) == 3
    assert "error" in hands[2] and "vertices" not in hands[2]
    assert "error" not in hands[0] and "error" not in hands[1]


def test_run_equals_crop_regress_and_camera(scene):
    d = scene["dir"]
    res = json.loads(scene["out"].read_text())
    crops = d / "crops.npy"
    proc = run_hamer(["crop", "--image", d / "photo.png", "--box", box_arg(RIGHT, "right"),
                      "--box", box_arg(LEFT, "left"), "--output", crops])
    assert proc.returncode == 0, describe(proc)
    reg = d / "reg.npz"
    proc = run_hamer(["regress", "--model", scene["model"], "--input", crops, "--output", reg])
    assert proc.returncode == 0, describe(proc)
    with np.load(reg) as z:
        r = {k: z[k] for k in z.files}
    for i, (box, right) in enumerate(((RIGHT, True), (LEFT, False))):
        h = res["hands"][i]
        assert h["is_right"] is right
        np.testing.assert_allclose(h["bbox"], box, rtol=0, atol=1e-4)
        p = r["params"][i]
        rots = p[:144].reshape(16, 9)
        if not right:
            rots = rots * MIRROR
        np.testing.assert_allclose(np.array(h["global_orient"]).ravel(), rots[0], atol=1e-6)
        np.testing.assert_allclose(np.array(h["hand_pose"]).reshape(15, 9), rots[1:], atol=1e-6)
        np.testing.assert_allclose(h["betas"], p[144:154], atol=1e-6)
        np.testing.assert_allclose(h["pred_cam"], p[154:157], atol=1e-6)
        sx = np.array([1 if right else -1, 1, 1], np.float32)
        verts = r["vertices"][i] * sx
        kp3d = r["keypoints_3d"][i] * sx
        np.testing.assert_allclose(np.array(h["vertices"]), verts, atol=1e-6)
        np.testing.assert_allclose(np.array(h["keypoints_3d"]), kp3d, atol=1e-6)
        center, size = box_center_size(box)
        np.testing.assert_allclose(h["crop"]["center"], center, rtol=1e-6)
        np.testing.assert_allclose(h["crop"]["size"], size, rtol=1e-6)
        cam_t, f = cam_full(p[154:157], right, center, size)
        np.testing.assert_allclose(h["cam_t_full"], cam_t, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(h["focal_length"], f, rtol=1e-6)
        pts = kp3d + cam_t
        kp2d = f * pts[:, :2] / pts[:, 2:] + np.array([W / 2, H / 2], np.float32)
        np.testing.assert_allclose(np.array(h["keypoints_2d"]), kp2d, rtol=0, atol=1e-2)
        # axis-angle agrees with the matrix (Rodrigues)
        aa = np.array(h["global_orient_axis_angle"], np.float64)
        th = np.linalg.norm(aa)
        k = aa / th
        K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        R = np.eye(3) + np.sin(th) * K + (1 - np.cos(th)) * K @ K
        np.testing.assert_allclose(R, np.array(h["global_orient"]), atol=1e-5)


def test_obj_files(scene):
    objs = sorted((scene["dir"] / "objs").glob("*.obj"))
    assert [o.name for o in objs] == ["hand_00_right.obj", "hand_01_left.obj"]
    res = json.loads(scene["out"].read_text())
    faces_by_side = {}
    for o, h in zip(objs, res["hands"]):
        v = [l.split() for l in o.read_text().splitlines() if l.startswith("v ")]
        f = [l.split() for l in o.read_text().splitlines() if l.startswith("f ")]
        assert len(v) == 778
        # the checkpoint's 1538 faces + the demo's 14 faces closing the wrist
        assert len(f) == 1552
        faces = np.array([[int(t) for t in l[1:4]] for l in f])
        assert faces.min() == 1 and faces.max() <= 778
        faces_by_side[h["is_right"]] = faces
        # demo frame: (verts + cam_t) rotated 180 degrees about x
        xyz = np.array([[float(t) for t in l[1:4]] for l in v])
        want = np.array(h["vertices"]) + np.array(h["cam_t_full"])
        want[:, 1:] *= -1
        np.testing.assert_allclose(xyz, want, atol=2e-5)
    # left-hand winding is reversed (a, c, b)
    np.testing.assert_array_equal(faces_by_side[False], faces_by_side[True][:, [0, 2, 1]])


def test_overlay_changes_only_where_the_mesh_projects(scene):
    img = scene["img"]
    over = np.asarray(Image.open(scene["dir"] / "overlay.png").convert("RGB"))
    assert over.shape == img.shape
    changed = np.argwhere((over != img).any(-1))  # (row, col)
    assert len(changed) > 0, "nothing was drawn"
    res = json.loads(scene["out"].read_text())
    pts = []
    for h in res["hands"][:2]:
        v = np.array(h["vertices"]) + np.array(h["cam_t_full"])
        f = h["focal_length"]
        pts.append(np.c_[f * v[:, 0] / v[:, 2] + W / 2, f * v[:, 1] / v[:, 2] + H / 2])
    # every changed pixel centre lies inside (or within a pixel of) one hand's
    # projected convex hull
    centres = changed[:, ::-1] + 0.5
    inside = np.zeros(len(centres), bool)
    for p in pts:
        hull = Delaunay(p)
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                inside |= hull.find_simplex(centres + [dx, dy]) >= 0
    assert inside.all(), f"{(~inside).sum()} changed pixels outside every mesh's projection"


def test_side_view_written(scene):
    side = np.asarray(Image.open(scene["dir"] / "side.png").convert("RGB"))
    assert side.shape == (H, W, 3)
    white = (side == 255).all(-1)
    assert white.mean() > 0.5 and not white.all()


def test_left_right_mirror_symmetry(tmp_path, ckpt, hamer_bin):
    """A right hand in an image and the left hand at the mirrored box of the
    mirrored image see the same crop: same parameters, mirrored outputs."""
    img = make_image(tmp_path / "a.png", seed=3)
    Image.fromarray(np.ascontiguousarray(img[:, ::-1])).save(tmp_path / "b.png")
    x1, y1, x2, y2 = RIGHT
    mirrored = (W - 1 - x2, y1, W - 1 - x1, y2)
    outs = []
    for name, box, side in (("a", RIGHT, "right"), ("b", mirrored, "left")):
        out = tmp_path / f"{name}.json"
        proc = run_hamer(["run", "--model", ckpt("d2h2"), "--image", tmp_path / f"{name}.png",
                          "--box", box_arg(box, side), "--output", out, "--vertices"])
        assert proc.returncode == 0, describe(proc)
        outs.append(json.loads(out.read_text())["hands"][0])
    a, b = outs
    np.testing.assert_allclose(np.array(b["global_orient"]).ravel(),
                               np.array(a["global_orient"]).ravel() * MIRROR, atol=1e-6)
    np.testing.assert_allclose(b["betas"], a["betas"], atol=1e-6)
    va, vb = np.array(a["vertices"]), np.array(b["vertices"])
    np.testing.assert_allclose(vb, va * [-1, 1, 1], atol=1e-6)
    # 2D: x_b = W - 1 - x_a up to the depth term tz / (Z + tz) ~ 1 (see facts)
    ka, kb = np.array(a["keypoints_2d"]), np.array(b["keypoints_2d"])
    np.testing.assert_allclose(kb[:, 1], ka[:, 1], atol=1e-2)
    np.testing.assert_allclose(kb[:, 0], W - 1 - ka[:, 0], atol=0.05)


@pytest.mark.parametrize("args,needle", [
    (["--box", "1,2,3"], "bad box"),
    (["--box", "1,2,3,4:up"], "side"),
    (["--box", "nan,2,3,4"], "finite"),
])
def test_bad_box_syntax(tmp_path, ckpt, hamer_bin, args, needle):
    make_image(tmp_path / "p.png")
    out = tmp_path / "r.json"
    proc = run_hamer(["run", "--model", ckpt("d1h1"), "--image", tmp_path / "p.png", "--output", out, *args])
    assert proc.returncode == 2, describe(proc)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], describe(proc)
    assert not out.exists()


def test_rescale_limit_is_one_and_the_same(tmp_path, ckpt, hamer_bin):
    """The documented limit (0, 16] holds at the command line: the largest
    accepted value regresses its hand, anything above is a usage error
    naming the limit (it used to be accepted and then fail every hand)."""
    make_image(tmp_path / "p.png")
    base = ["run", "--model", ckpt("d1h1"), "--image", tmp_path / "p.png", "--box", box_arg(RIGHT, "right")]
    out = tmp_path / "r.json"
    proc = run_hamer(base + ["--output", out, "--rescale", "16"])
    assert proc.returncode == 0, describe(proc)
    assert json.loads(out.read_text())["hands"][0].get("error") is None
    for bad in ["20", "16.0001", "0", "-1", "0x10", "nan", "inf"]:
        out = tmp_path / f"r_{bad}.json"
        proc = run_hamer(base + ["--output", out, "--rescale", bad])
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and "(0, 16]" in lines[0], describe(proc)
        assert not out.exists()


def test_boxes_json_and_errors(tmp_path, ckpt, hamer_bin):
    make_image(tmp_path / "p.png")
    good = tmp_path / "boxes.json"
    good.write_text(json.dumps([{"bbox": list(RIGHT), "is_right": True}, {"bbox": list(LEFT), "is_right": False}]))
    out = tmp_path / "r.json"
    proc = run_hamer(["run", "--model", ckpt("d1h1"), "--image", tmp_path / "p.png", "--boxes", good,
                      "--output", out])
    assert proc.returncode == 0, describe(proc)
    hands = json.loads(out.read_text())["hands"]
    assert [h["is_right"] for h in hands] == [True, False]
    cases = {
        "notjson.json": "{[",
        "notarray.json": '{"bbox": [1,2,3,4]}',
        "short.json": '[{"bbox": [1,2,3]}]',
        "side.json": '[{"bbox": [1,2,3,4], "is_right": "yes"}]',
        "many.json": json.dumps([{"bbox": [1, 2, 30, 40]}] * 65),
    }
    for name, text in cases.items():
        p = tmp_path / name
        p.write_text(text)
        out = tmp_path / f"{name}.out"
        proc = run_hamer(["run", "--model", ckpt("d1h1"), "--image", tmp_path / "p.png", "--boxes", p,
                          "--output", out])
        assert proc.returncode == 1, name + ": " + describe(proc)
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and "boxes" in lines[0], name + ": " + describe(proc)
        assert not out.exists()


def test_corrupt_image(tmp_path, ckpt, hamer_bin):
    p = tmp_path / "bad.jpg"
    p.write_bytes(b"\xff\xd8\xff\xe0garbage")
    out = tmp_path / "r.json"
    proc = run_hamer(["run", "--model", ckpt("d1h1"), "--image", p, "--box", "1,2,30,40", "--output", out])
    assert proc.returncode == 1, describe(proc)
    assert len([l for l in proc.stderr.splitlines() if l.strip()]) == 1
    assert not out.exists()


def test_no_hand_found_still_says_detected(tmp_path, ckpt, hamer_bin):
    """The detector ran and found nothing (exit 4): RESULT.json says
    "detected" with the detection's time, as with hands found; an empty
    boxes file given is still "given", without a detect time."""
    Image.fromarray(np.full((120, 160, 3), 128, np.uint8)).save(tmp_path / "grey.png")
    out = tmp_path / "r.json"
    proc = run_hamer(["run", "--model", ckpt("d1h1"), "--image", tmp_path / "grey.png", "--output", out])
    assert proc.returncode == 4 and "no hand found" in proc.stderr, describe(proc)
    doc = json.loads(out.read_text())
    assert doc["hands"] == [] and doc["boxes"] == "detected", doc
    assert set(doc["timings_ms"]) == {"decode", "detect", "crop", "regress", "finalise"}, doc
    assert doc["timings_ms"]["detect"] > 0
    empty = tmp_path / "none.json"
    empty.write_text("[]")
    proc = run_hamer(["run", "--model", ckpt("d1h1"), "--image", tmp_path / "grey.png", "--boxes", empty,
                      "--output", out])
    assert proc.returncode == 0, describe(proc)
    doc = json.loads(out.read_text())
    assert doc["hands"] == [] and doc["boxes"] == "given" and "detect" not in doc["timings_ms"], doc
