"""The overlay's marks (`hamer run --render`, `--draw LIST`): each hand's
box, its 21 keypoints as a skeleton and a label, over the meshes.

The marks are drawn by Model.render (one model load) and the command's
default and --draw mesh by `hamer run --render`. The photo is given as a
PNG, so the input's pixels are known exactly
(decoded here by Pillow, not by the code under test), and every changed
pixel must lie where a mark is drawn, computed here from RESULT.json:

- --draw none: the photo unchanged;
- --draw boxes: the pixels within half a line width (+1.5 px of coverage
  slack) of each box outline, the outline's middles in the side's colour;
- --draw keypoints: the pixels near the 21-keypoint skeleton, each
  keypoint inside the picture red;
- --draw labels: the pixels inside each label's tag, above (or inside)
  its box, filled with the side's colour around dark text;
- --draw mesh equals the overlay of meshes alone (hamer batch with
  --draw mesh, a second front end), and the default draws the marks over
  it: every pixel that differs from the meshes-only picture is a mark's
  (and the command's hands equal Model.predict's);
- an unknown name is a usage error.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import HAMER_LIB, REPO, describe, python_child_env, run_hamer
from detect.common import shared_images

GREEN, ORANGE, RED = (40, 220, 60), (255, 150, 20), (240, 30, 30)


@pytest.fixture(scope="module")
def photo(tmp_path_factory):
    d = tmp_path_factory.mktemp("overlay")
    img = Image.open(shared_images() / "hamer_example_5.jpg").convert("RGB")
    img = img.resize((img.width // 2, img.height // 2))
    img.save(d / "photo.png")
    return d / "photo.png", np.asarray(img)


@pytest.fixture(scope="module")
def drawn(photo, ckpt, tmp_path_factory):
    """Model.render's pictures of the photo's two detected hands, one per
    `draw`, from one model (as `hamer run --render --draw D` draws them:
    the same library call; test_default_... checks the command). In a
    child Python: an instrumented library needs the sanitizer runtime
    loaded first."""
    d = tmp_path_factory.mktemp("drawn")
    script = f"""
import json, hamer
with hamer.Model({str(ckpt("d2h2"))!r}) as m:
    hands = m.predict({str(photo[0])!r}, vertices=True)
    for draw in ("none", "boxes", "keypoints", "labels"):
        open({str(d)!r} + "/" + draw + ".png", "wb").write(m.render({str(photo[0])!r}, hands, draw=draw))
    try:
        m.render({str(photo[0])!r}, hands, draw="feet")
    except hamer.HamerArgumentError as e:
        print("refused:", e)
json.dump(hands, open({str(d)!r} + "/hands.json", "w"), default=lambda v: v.tolist())
"""
    env = python_child_env(dict(os.environ, PYTHONPATH=str(REPO / "python"), HAMER_LIB=str(HAMER_LIB)))
    proc = subprocess.run([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.startswith("refused: draw: unknown 'feet'"), proc.stdout
    hands = json.loads((d / "hands.json").read_text())
    assert len(hands) == 2, hands
    pics = {p.stem: np.asarray(Image.open(p).convert("RGB")) for p in d.glob("*.png")}
    return pics, hands


def render(tmp_path, ckpt, photo, draw=None, name="ov.png"):
    out, png = tmp_path / "r.json", tmp_path / name
    proc = run_hamer(["run", "--model", ckpt("d2h2"), "--image", photo, "--output", out, "--render", png,
                      *(["--draw", draw] if draw else [])])
    assert proc.returncode == 0, describe(proc)
    doc = json.loads(out.read_text())
    assert len(doc["hands"]) == 2, doc["hands"]
    return np.asarray(Image.open(png).convert("RGB")), doc["hands"]


def line_width(img):
    return max(1.5, max(img.shape[:2]) / 400)


def dist_to_segments(shape, segs):
    """Distance of every pixel centre to the nearest segment (x0, y0, x1, y1)."""
    h, w = shape[:2]
    y, x = np.mgrid[0:h, 0:w].astype(np.float64) + 0.5
    best = np.full((h, w), np.inf)
    for x0, y0, x1, y1 in segs:
        dx, dy = x1 - x0, y1 - y0
        l2 = dx * dx + dy * dy
        t = np.clip(((x - x0) * dx + (y - y0) * dy) / l2, 0, 1) if l2 > 0 else 0
        best = np.minimum(best, np.hypot(x - x0 - t * dx, y - y0 - t * dy))
    return best


def box_segments(b):
    x0, y0, x1, y1 = b
    return [(x0, y0, x1, y0), (x1, y0, x1, y1), (x1, y1, x0, y1), (x0, y1, x0, y0)]


BONES = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (5, 6), (6, 7), (7, 8), (5, 9), (9, 10), (10, 11), (11, 12),
         (9, 13), (13, 14), (14, 15), (15, 16), (13, 17), (0, 17), (17, 18), (18, 19), (19, 20)]


def changed(a, b):
    return np.any(a != b, axis=2)


def test_none_is_the_photo(drawn, photo):
    img = drawn[0]["none"]
    assert np.array_equal(img, photo[1])


def test_boxes(drawn, photo):
    img, hands = drawn[0]["boxes"], drawn[1]
    lw = line_width(img)
    near = dist_to_segments(img.shape, [s for h in hands for s in box_segments(h["bbox"])]) <= lw / 2 + 1.5
    diff = changed(img, photo[1])
    assert diff.any() and not (diff & ~near).any()
    for h in hands:
        x0, y0, x1, y1 = h["bbox"]
        want = GREEN if h["is_right"] else ORANGE
        for x, y in (((x0 + x1) / 2, y0), (x1, (y0 + y1) / 2), ((x0 + x1) / 2, y1), (x0, (y0 + y1) / 2)):
            assert tuple(img[int(y), int(x)]) == want, (h["bbox"], x, y)


def test_keypoints(drawn, photo):
    img, hands = drawn[0]["keypoints"], drawn[1]
    lw = line_width(img)
    segs = []
    for h in hands:
        k = h["keypoints_2d"]
        segs += [(*k[a], *k[b]) for a, b in BONES] + [(*p, *p) for p in k]
    near = dist_to_segments(img.shape, segs) <= 1.2 * lw + 1.5
    diff = changed(img, photo[1])
    assert diff.any() and not (diff & ~near).any()
    H, W = img.shape[:2]
    inside = [(x, y) for h in hands for x, y in h["keypoints_2d"] if 1 <= x < W - 1 and 1 <= y < H - 1]
    assert inside
    for x, y in inside:
        assert tuple(img[int(y), int(x)]) == RED, (x, y)


def test_labels(drawn, photo):
    img, hands = drawn[0]["labels"], drawn[1]
    diff = changed(img, photo[1])
    scale = max(2, round(line_width(img)))
    tags = np.zeros(diff.shape, bool)
    for i, h in enumerate(hands):
        text = f"#{i} {'right' if h['is_right'] else 'left'} {h['detection']['score']:.2f}"
        tw, th = (len(text) * 6 - 1) * scale + 2 * scale, 7 * scale + 2 * scale
        x, y = int(np.floor(h["bbox"][0])), int(np.floor(h["bbox"][1])) - th
        y = y if y >= 0 else int(np.floor(h["bbox"][1]))
        x = max(0, min(x, img.shape[1] - tw))
        tag = img[y:y + th, x:x + tw].reshape(-1, 3)
        want = GREEN if h["is_right"] else ORANGE
        colours = {tuple(c) for c in tag}
        # a later hand's tag may cover part of an earlier one's; the last is whole
        allowed = {want, (16, 16, 16)} if i == len(hands) - 1 else {GREEN, ORANGE, (16, 16, 16)}
        assert want in colours and colours <= allowed, (text, colours - allowed)
        dark = sum(tuple(c) == (16, 16, 16) for c in tag)
        assert 0.1 * len(tag) < dark < 0.5 * len(tag), (text, dark, len(tag))
        tags[max(y, 0):y + th, x:x + tw] = True
    assert diff.any() and not (diff & ~tags).any()


def test_default_draws_marks_over_the_meshes(tmp_path, ckpt, photo, drawn):
    mesh, hands = render(tmp_path, ckpt, photo[0], "mesh", "mesh.png")
    full, hands2 = render(tmp_path, ckpt, photo[0], None, "full.png")
    assert hands == hands2
    assert np.array_equal(np.float32([h["keypoints_2d"] for h in hands]),
                          np.float32([h["keypoints_2d"] for h in drawn[1]]))
    # meshes alone: what hamer batch --draw mesh writes too
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    (inp / "photo.png").write_bytes(photo[0].read_bytes())
    proc = run_hamer(["batch", "--model", ckpt("d2h2"), "--input-dir", inp, "--out-dir", out, "--render",
                      "--draw", "mesh"])
    assert proc.returncode == 0, describe(proc)
    assert np.array_equal(np.asarray(Image.open(out / "photo_all.png").convert("RGB")), mesh)
    # every pixel the marks change is near a box, the skeleton or above a box
    lw = line_width(full)
    segs = [s for h in hands for s in box_segments(h["bbox"])]
    for h in hands:
        k = h["keypoints_2d"]
        segs += [(*k[a], *k[b]) for a, b in BONES] + [(*p, *p) for p in k]
    near = dist_to_segments(full.shape, segs) <= 1.2 * lw + 1.5
    for h in hands:
        x0, y0 = int(h["bbox"][0]), int(h["bbox"][1])
        near[max(0, y0 - 40):y0 + 40, max(0, x0 - 10):x0 + 400] = True
    diff = changed(full, mesh)
    assert diff.any() and not (diff & ~near).any()


def test_bad_draw_is_a_usage_error(tmp_path, ckpt, photo):
    proc = run_hamer(["run", "--model", ckpt("d2h2"), "--image", photo[0], "--output", tmp_path / "r.json",
                      "--render", tmp_path / "o.png", "--draw", "mesh,feet"])
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "--draw must be a comma-separated list of mesh, boxes, " \
        "keypoints and labels, or all or none, got 'mesh,feet'" in lines[0], describe(proc)
    assert not (tmp_path / "r.json").exists()
