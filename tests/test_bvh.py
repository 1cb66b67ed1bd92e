"""BVH (hamer run --bvh, hamer video --bvh, Model.bvh, batch --bvh), read by
an independent parser (tests/bvh_reader.py: the format's definition, no
code shared with src/pipeline/bvh.c) and its forward kinematics:

* a photo: per hand a ROOT with 16 joints and 5 End Sites; every joint at
  RESULT.json's keypoints_3d_cam (the camera frame turned to the file's
  axes, y up: D = diag(1, -1, -1)) to 1e-5 m, the rest offsets MANO's
  joints for the hand's betas (the float64 reference); the fingertips, as
  End Sites rigid on their last joint, differ from MANO's skinned tips by
  what the skin bends there (measured, printed, bounded);
* a video (the default shape: one betas per track, the median of its
  frames'; each frame its own translation): one motion line per frame at
  the clip's Frame Time; every joint where the float64 reference puts it
  (MANO with the track's betas and the frame's rotations, plus the frame's
  cam_t) to 1e-5 m, and within 1 mm of the lines' own keypoints_3d_cam
  (the shapes differ: printed); a track before its first frame holds its
  first pose; --shape first (the first frame's betas) likewise;
* the same bytes from Model.bvh and batch --bvh as from hamer run --bvh.
"""

import json
import math

import numpy as np
import pytest
import torch

import bvh_reader
import hamer_reference as ref
import video_fixtures as V
from conftest import describe, make_image, run_hamer
from detect.common import models_dir

D = np.array([1.0, -1.0, -1.0])
JOINTS = ["wrist", "index1", "index2", "index3", "middle1", "middle2", "middle3", "pinky1", "pinky2", "pinky3",
          "ring1", "ring2", "ring3", "thumb1", "thumb2", "thumb3"]
JOINT_MAP = [0, 13, 14, 15, 16, 1, 2, 3, 17, 4, 5, 6, 18, 10, 11, 12, 19, 7, 8, 9, 20]
KP_OF_JOINT = [JOINT_MAP.index(j) for j in range(16)]
TIP_KP = {"thumb3": 4, "index3": 8, "middle3": 12, "ring3": 16, "pinky3": 20}
BOXES = ["60,40,170,200", "230,90,330,240:left"]


@pytest.fixture(scope="module")
def photo(tmp_path_factory, ckpt):
    d = tmp_path_factory.mktemp("bvh")
    make_image(d / "photo.png")
    model = ckpt("d2h2")
    proc = run_hamer(["run", "--model", model, "--image", d / "photo.png", "--box", BOXES[0], "--box", BOXES[1],
                      "--focal", "800", "--output", d / "r.json", "--bvh", d / "hands.bvh", "--glb", d / "hands.glb"])
    assert proc.returncode == 0, describe(proc)
    mano = ref.mano_from_state_dict(ref.load_state_dict(model))
    return {"dir": d, "model": model, "result": json.loads((d / "r.json").read_text()), "bvh": d / "hands.bvh",
            "glb": d / "hands.glb", "mano": mano}


def rest_joints(mano, betas, right):
    """MANO's rest joints for betas (float64), mirrored for a left hand."""
    R = torch.eye(3, dtype=torch.float64).expand(1, 16, 3, 3)
    _, _ = ref.mano_lbs(mano, R, torch.tensor([betas], dtype=torch.float64))
    v_shaped = mano["v_template"].double() + torch.einsum("l,mkl->mk", torch.tensor(betas, dtype=torch.float64),
                                                          mano["shapedirs"].double())
    J = (mano["J_regressor"].double() @ v_shaped).numpy()
    return J * (1 if right else np.array([-1.0, 1, 1]))


def test_photo(photo):
    text = photo["bvh"].read_text()
    joints, n, dt, motion = bvh_reader.read(text)
    assert n == 1 and dt > 0 and motion.shape == (1, 2 * (6 + 15 * 3))
    roots = [j for j in joints if j.parent is None]
    assert [r.name for r in roots] == ["hand0_right_wrist", "hand1_left_wrist"]
    pos, ends = bvh_reader.world(joints, motion[0])
    parents = [int(p) for p in photo["mano"]["parents"]]
    worst_tip = 0.0
    for k, hand in enumerate(photo["result"]["hands"]):
        side = "right" if hand["is_right"] else "left"
        name = lambda j: f"hand{k}_{side}_{JOINTS[j]}"  # noqa: E731
        kp_cam = np.array(hand["keypoints_3d_cam"])
        for j in range(16):
            got = D * pos[name(j)]
            assert np.abs(got - kp_cam[KP_OF_JOINT[j]]).max() < 1e-5, (k, JOINTS[j], got, kp_cam[KP_OF_JOINT[j]])
        # the rest offsets: MANO's joints for this hand's betas
        J = rest_joints(photo["mano"], hand["betas"], hand["is_right"])
        by = {j.name: j for j in joints}
        for j in range(1, 16):
            assert np.abs(by[name(j)].offset - (J[j] - J[parents[j]])).max() < 1e-6, JOINTS[j]
        # the five fingertips: End Sites of the last joints, near MANO's skinned tips
        assert sorted(jn for jn in TIP_KP if by[name(JOINTS.index(jn))].end_site is not None) == sorted(TIP_KP)
        for jn, kp in TIP_KP.items():
            worst_tip = max(worst_tip, np.linalg.norm(D * ends[name(JOINTS.index(jn))] - kp_cam[kp]))
    print(f"\nfingertips as rigid End Sites: at most {worst_tip * 1e3:.2f} mm from MANO's skinned tips")
    assert worst_tip < 0.01


def test_python_and_batch_write_the_same_file(photo, tmp_path):
    import sys
    from conftest import REPO
    sys.path.insert(0, str(REPO / "python"))
    import hamer
    with hamer.Model(photo["model"]) as m:
        hands = m.predict(str(photo["dir"] / "photo.png"), [[60, 40, 170, 200], [230, 90, 330, 240]],
                          is_right=[True, False], focal=800)
        assert m.bvh(hands) == photo["bvh"].read_text()
    inp, boxes, out = tmp_path / "in", tmp_path / "boxes", tmp_path / "out"
    inp.mkdir(), boxes.mkdir()
    (inp / "p.png").write_bytes((photo["dir"] / "photo.png").read_bytes())
    (boxes / "p.json").write_text(json.dumps([{"bbox": [60, 40, 170, 200], "is_right": True},
                                              {"bbox": [230, 90, 330, 240], "is_right": False}]))
    args = ["batch", "--model", photo["model"], "--input-dir", inp, "--out-dir", out, "--boxes-dir", boxes,
            "--bvh", "--focal", "800", "--json"]
    proc = run_hamer(args)
    assert proc.returncode == 0, describe(proc)
    assert (out / "p.bvh").read_text() == photo["bvh"].read_text()
    assert json.loads(run_hamer(args).stdout)["skipped"] == 1
    (out / "p.bvh").unlink()
    assert json.loads(run_hamer(args).stdout)["computed"] == 1 and (out / "p.bvh").is_file()


def video_run(ckpt, tmp_path, *extra):
    V.need_ffmpeg()
    frames_in = V.pan_zoom(V.photo("hamer_example_5.jpg", 320), 8, (240, 320))
    vid = V.encode(frames_in, tmp_path / "pan.mkv", codec="png", fps=25)
    out, bvh, glb = tmp_path / "v.jsonl", tmp_path / "anim.bvh", tmp_path / "anim.glb"
    proc = run_hamer(["video", "--model", ckpt("d2h2"), "--video", vid, "--output", out, "--bvh", bvh, "--glb", glb,
                      "--detector", models_dir(), "--smooth", "none", "--focal", "300", *extra])
    assert proc.returncode == 0, describe(proc)
    _, lines, _ = V.read_lines(out)
    return lines, bvh, glb


def expected_track(mano, lines, track, shape):
    """Per frame number: the 16 joints (camera frame) of the track as the
    animation files should place them, by the float64 reference."""
    hands = [(f["frame"], h) for f in lines for h in f["hands"] if h["track_id"] == track]
    betas = np.median([h["betas"] for _, h in hands], axis=0) if shape == "track" else np.array(hands[0][1]["betas"])
    out = {}
    for frame, h in hands:
        R = np.array([h["global_orient"]] + h["hand_pose"], np.float64).reshape(16, 3, 3)
        M = np.diag([1.0 if h["is_right"] else -1.0, 1, 1])
        v, j = ref.mano_lbs(mano, torch.from_numpy(M @ R @ M)[None], torch.tensor(np.array([betas], np.float64)))
        kp = ref.openpose_keypoints(v, j)[0].numpy() * np.diag(M)
        t = np.array(h["cam_t"])  # each frame's own translation, whatever the shape
        out[frame] = (kp + t)[KP_OF_JOINT], np.array(h["keypoints_3d_cam"])[KP_OF_JOINT]
    return out


@pytest.mark.parametrize("shape", ["track", "first"])
def test_video(ckpt, tmp_path, shape):
    lines, bvh, _ = video_run(ckpt, tmp_path, "--shape", shape)
    mano = ref.mano_from_state_dict(ref.load_state_dict(ckpt("d2h2")))
    joints, n, dt, motion = bvh_reader.read(bvh.read_text())
    assert n == len(lines) and dt == pytest.approx(1 / 25, rel=1e-9)
    tracks = sorted({h["track_id"] for f in lines for h in f["hands"]})
    assert tracks and [j.name for j in joints if j.parent is None] == [
        f"hand{t}_{next(h for f in lines for h in f['hands'] if h['track_id'] == t)['is_right'] and 'right' or 'left'}"
        "_wrist" for t in tracks]
    worst_own, worst_rel = 0.0, 0.0
    for t in tracks:
        side = next(j.name for j in joints if j.parent is None and j.name.startswith(f"hand{t}_")).split("_")[1]
        want = expected_track(mano, lines, t, shape)
        first = min(want)
        for row, f in enumerate(lines):
            pos, _ = bvh_reader.world(joints, motion[row])
            got = np.array([D * pos[f"hand{t}_{side}_{name}"] for name in JOINTS])
            if f["frame"] in want:
                exact, own = want[f["frame"]]
                assert np.abs(got - exact).max() < 1e-5, (t, f["frame"], np.abs(got - exact).max())
                worst_own = max(worst_own, np.linalg.norm(got - own, axis=1).max())
                worst_rel = max(worst_rel, np.linalg.norm((got - got[0]) - (own - own[0]), axis=1).max())
            elif f["frame"] < first:  # before its track: its first pose
                assert np.abs(got - want[first][0]).max() < 1e-5
    print(f"\nshape {shape}: BVH joints at most {worst_own * 1e3:.4f} mm from the lines' keypoints_3d_cam, "
          f"{worst_rel * 1e3:.4f} mm relative to the wrist")
    # the skeleton is the lines' hand but for the shape (the track's median, or its first frame's)
    assert worst_rel < 1e-3 and worst_own < 1e-3
