"""GLB export (hamer run --glb, hamer_hands_glb): every file passes the
Khronos glTF-Validator (npm gltf-validator) with 0 errors and 0 warnings,
and the skin, evaluated from the file alone (tests/gltf/skin.mjs reads it
with glTF-Transform and applies glTF's skinning), reproduces the hands:

- against MANO LBS with the same 4-largest-weights-renormalised skin,
  computed here by the float64 reference (hamer_reference.mano_lbs): equal
  to float precision (5e-6 m), so the file's bind shape, correctives,
  joints, rotations, inverse bind matrices and placement are exact;
- against RESULT.json's vertices (MANO's full 16-weight LBS): within 2 mm,
  the truncation to 4 weights (0.9 mm at most on the fixture's MANO; the
  largest weights hold nearly all of each vertex's mass);
- the 21 keypoint nodes at RESULT.json's keypoints_3d (1e-6 m);
- in the camera frame: C (cam_t + v), C = diag(1, -1, -1), so the two
  hands stand where they are in the photo's camera (cam_t: the translation
  solved through it; cam_t_full kept in the hand node's extras); left hands
  mirrored.

The animated GLB of a video (hamer video --glb): keys on the clip's whole
frames (its rate in the scene's and animation's extras), at each key the
skin on the track's shape (--shape track, the default: the median betas;
first: the first frame's) at the frame's own place.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import hamer_reference as ref
import video_fixtures as V
from conftest import HAMER_LIB, REPO, describe, make_image, python_child_env, run_hamer
from detect.common import models_dir

GLTF = Path(__file__).resolve().parent / "gltf"
RIGHT, LEFT = "60,40,170,200", "230,90,330,240:left"
C = np.array([1.0, -1.0, -1.0])


def node_bin():
    node = shutil.which("node")
    if not node or not (GLTF / "node_modules" / "gltf-validator").is_dir():
        pytest.fail("tests/gltf needs node and its packages: cd tests/gltf && npm ci --ignore-scripts")
    return node


def evaluate(path):
    proc = subprocess.run([node_bin(), str(GLTF / "skin.mjs"), str(path)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def top4_lbs(mano, hand, betas=None, correctives=True):
    """The hand's vertices (MANO frame, mirrored back for a left hand) with
    each vertex's 4 largest LBS weights, renormalised; betas: others than
    the hand's; correctives False: without MANO's pose correctives."""
    R = np.array([hand["global_orient"]] + hand["hand_pose"], np.float64).reshape(16, 3, 3)
    right = hand["is_right"]
    M = np.diag([1.0 if right else -1.0, 1.0, 1.0])
    R = M @ R @ M
    w = mano["lbs_weights"].to(torch.float64).numpy().copy()
    keep = np.argsort(-w, axis=1)[:, :4]
    w4 = np.zeros_like(w)
    np.put_along_axis(w4, keep, np.take_along_axis(w, keep, 1), 1)
    w4 /= w4.sum(1, keepdims=True)
    m4 = dict(mano, lbs_weights=torch.from_numpy(w4))
    if not correctives:
        m4["posedirs"] = torch.zeros_like(mano["posedirs"])
    b = hand["betas"] if betas is None else betas
    v, _ = ref.mano_lbs(m4, torch.from_numpy(R)[None], torch.tensor(np.array([b], np.float64)))
    return v[0].numpy() * np.diag(M)


@pytest.fixture(scope="module")
def scene(tmp_path_factory, ckpt):
    d = tmp_path_factory.mktemp("glb")
    make_image(d / "photo.png")
    model = ckpt("d2h2")
    out = d / "r.json"
    proc = run_hamer(["run", "--model", model, "--image", d / "photo.png", "--box", RIGHT, "--box", LEFT,
                      "--box", "900,900,950,950", "--output", out, "--vertices", "--glb", d / "hands.glb"])
    assert proc.returncode == 3, describe(proc)   # the third box is outside the image: that hand fails
    mano = ref.mano_from_state_dict(ref.load_state_dict(model))
    return {"dir": d, "model": model, "result": json.loads(out.read_text()), "glb": d / "hands.glb", "mano": mano}


def test_valid_and_the_skin_reproduces_the_hands(scene):
    got = evaluate(scene["glb"])
    v = got["validator"]
    assert v["errors"] == 0 and v["warnings"] == 0, v
    hands = [h for h in scene["result"]["hands"] if "error" not in h]
    assert [h["name"] for h in got["hands"]] == ["hand_0_mesh", "hand_1_mesh"] and len(hands) == 2
    worst = 0.0
    for g, h in zip(got["hands"], hands):
        t = np.array(h["cam_t"])
        skinned = np.array(g["vertices"])
        exact = C * (np.array(h["vertices"]) + t)
        four = C * (top4_lbs(scene["mano"], h) + t)
        assert np.abs(skinned - four).max() < 5e-6, np.abs(skinned - four).max()
        err = np.linalg.norm(skinned - exact, axis=1).max()
        worst = max(worst, err)
        assert err < 2e-3, f"{g['name']}: 4-weight skin {err * 1e3:.3f} mm from the full LBS"
        kp = np.array([g["keypoints"][k] for k in sorted(g["keypoints"])])
        assert kp.shape == (21, 3)
        assert np.abs(kp - C * (np.array(h["keypoints_3d"]) + t)).max() < 1e-6
    print(f"\nmax distance of the 4-weight skin from MANO's full LBS: {worst * 1e3:.3f} mm")


def test_no_hand_is_a_valid_empty_scene(scene, tmp_path):
    proc = run_hamer(["run", "--model", scene["model"], "--image", scene["dir"] / "photo.png", "--box",
                      "900,900,950,950", "--output", tmp_path / "r.json", "--glb", tmp_path / "none.glb"])
    assert proc.returncode == 3, describe(proc)
    got = evaluate(tmp_path / "none.glb")
    assert got["validator"]["errors"] == 0 and got["validator"]["warnings"] == 0 and got["hands"] == []


def test_glb_errors(scene, ckpt, tmp_path):
    # a model without MANO: no mesh, nothing written
    proc = run_hamer(["run", "--model", ckpt("d2h2_nomano"), "--image", scene["dir"] / "photo.png", "--box", RIGHT,
                      "--output", tmp_path / "r.json", "--glb", tmp_path / "x.glb"])
    assert proc.returncode != 0 and "MANO" in proc.stderr and not (tmp_path / "x.glb").exists(), describe(proc)
    assert not (tmp_path / "r.json").exists()
    # the GLB may not overwrite an input
    proc = run_hamer(["run", "--model", scene["model"], "--image", scene["dir"] / "photo.png", "--box", RIGHT,
                      "--output", tmp_path / "r.json", "--glb", scene["dir"] / "photo.png"])
    assert proc.returncode == 2 and "--glb" not in proc.stdout and len(proc.stderr.splitlines()) == 1, describe(proc)


PY_CHILD = r"""
import sys
import hamer
model, image, out = sys.argv[1:4]
with hamer.Model(model) as m:
    hands = m.predict(hamer.read_image(image), boxes=[[60, 40, 170, 200], [230, 90, 330, 240]],
                      is_right=[True, False])
    open(out, "wb").write(m.glb(hands))
    try:
        m.glb([{"bbox": [0, 0, 9, 9], "is_right": True, "cam_t_full": [0, 0, 1]}])
    except hamer.HamerError as e:
        print("refused:", e)
"""


def test_python_glb_is_the_same_file(scene, tmp_path):
    """Model.glb(predict(...)): the bytes `hamer run --glb` writes."""
    env = python_child_env(dict(os.environ, PYTHONPATH=str(REPO / "python"), HAMER_LIB=str(HAMER_LIB)))
    proc = subprocess.run([sys.executable, "-c", PY_CHILD, str(scene["model"]), str(scene["dir"] / "photo.png"),
                           str(tmp_path / "py.glb")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert "refused: hand 0: glb needs global_orient, hand_pose, betas, keypoints_3d" in proc.stdout, proc.stdout
    assert (tmp_path / "py.glb").read_bytes() == scene["glb"].read_bytes()


def test_batch_glb_per_image_and_resume(scene, tmp_path):
    """hamer batch --glb: NAME.glb is `hamer run --glb`'s file for that
    image; a rerun skips it; without NAME.glb the image is redone."""
    inp, boxes, out = tmp_path / "in", tmp_path / "boxes", tmp_path / "out"
    inp.mkdir(), boxes.mkdir()
    shutil.copy(scene["dir"] / "photo.png", inp / "p.png")
    (boxes / "p.json").write_text(json.dumps([{"bbox": [60, 40, 170, 200], "is_right": True},
                                              {"bbox": [230, 90, 330, 240], "is_right": False},
                                              {"bbox": [900, 900, 950, 950], "is_right": True}]))
    args = ["batch", "--model", scene["model"], "--input-dir", inp, "--out-dir", out, "--boxes-dir", boxes,
            "--glb", "--json"]
    proc = run_hamer(args)
    assert proc.returncode == 3, describe(proc)   # the third box fails its hand, as in the scene
    assert (out / "p.glb").read_bytes() == scene["glb"].read_bytes()
    proc = run_hamer(args)
    assert json.loads(proc.stdout)["skipped"] == 1, describe(proc)
    (out / "p.glb").unlink()
    proc = run_hamer(args)
    assert json.loads(proc.stdout)["computed"] == 1 and (out / "p.glb").is_file(), describe(proc)


@pytest.mark.parametrize("shape", ["first", "track"])
def test_video_animation(scene, tmp_path, shape):
    """hamer video --glb: valid; keys on whole frames at the clip's rate (in
    the extras); at each frame the animated skin is that frame's hand (its
    rotations) on the track's shape, without pose correctives, at its place
    (float precision against the reference with the same skin); hands are
    hidden outside their track."""
    V.need_ffmpeg()
    frames_in = V.pan_zoom(V.photo("hamer_example_5.jpg", 320), 6, (240, 320))
    vid = V.encode(frames_in, tmp_path / "pan.mkv", codec="png", fps=30)
    out, glb = tmp_path / "v.jsonl", tmp_path / "anim.glb"
    proc = run_hamer(["video", "--model", scene["model"], "--video", vid, "--output", out, "--glb", glb,
                      "--detector", models_dir(), "--smooth", "none", "--shape", shape])
    assert proc.returncode == 0, describe(proc)
    _, frames, _ = V.read_lines(out)
    doc = glb_json(glb)
    extras = {"fps": 30.0, "frame_start": frames[0]["frame"], "frame_end": frames[-1]["frame"]}
    assert doc["scenes"][0]["extras"] == extras and doc["animations"][0]["extras"] == extras
    times = {round(float(t) * 30, 6) for a in doc["animations"] for s in a["samplers"]
             for t in accessor(glb, doc, s["input"])}
    assert all(abs(k - round(k)) < 1e-4 for k in times), sorted(times)
    by_track = {}
    for f in frames:
        for h in f["hands"]:
            by_track.setdefault(h["track_id"], []).append(h)
    assert len(by_track) >= 1
    betas = {t: np.median([h["betas"] for h in hs], axis=0) if shape == "track" else hs[0]["betas"]
             for t, hs in by_track.items()}
    for f in frames:
        got = evaluate_at(glb, f["frame"] / 30)
        assert got["validator"]["errors"] == 0 and got["validator"]["warnings"] == 0, got["validator"]
        by_root = {int(g["root"].split("_")[1]): g for g in got["hands"]}
        assert sorted(by_root) == sorted(h["track_id"] for h in f["hands"]), f["frame"]
        for h in f["hands"]:
            g = by_root[h["track_id"]]
            verts = top4_lbs(scene["mano"], h, betas=betas[h["track_id"]], correctives=False)
            want = C * (verts + np.array(h["cam_t"]))  # each frame's own place
            assert np.abs(np.array(g["vertices"]) - want).max() < 1e-5, (f["frame"], h["track_id"])
    # a frame after the last every hand is hidden
    assert evaluate_at(glb, (frames[-1]["frame"] + 1) / 30)["hands"] == []


def glb_json(path):
    data = path.read_bytes()
    n = int.from_bytes(data[12:16], "little")
    return json.loads(data[20:20 + n])


def accessor(path, doc, i):
    """A float accessor's values (the BIN chunk)."""
    data = path.read_bytes()
    n = int.from_bytes(data[12:16], "little")
    binary = data[20 + n + 8:]
    a = doc["accessors"][i]
    v = doc["bufferViews"][a["bufferView"]]
    return np.frombuffer(binary, np.float32, a["count"] * {"SCALAR": 1, "VEC3": 3, "VEC4": 4}[a["type"]],
                         v.get("byteOffset", 0))


def evaluate_at(path, t):
    proc = subprocess.run([node_bin(), str(GLTF / "skin.mjs"), str(path), repr(float(t))], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
