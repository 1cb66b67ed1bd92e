"""hamer.c's GLB and BVH files imported by Blender, headless (Debian's
`blender` 3.4, installed by scripts/deps.sh), the way docs/usage.md tells a
user to (tests/blender/check_import.py: the clip's frame rate from the
GLB's extras set before the import, import_shading="SMOOTH" for the 3.4
glTF add-on, the BVH add-on's "rU" open mode fixed for Python 3.11), and
what Blender then holds checked against hamer.c's own results. Blender's
axes: z up, the camera looking along +y (the files' y-up frame turned by
the importers' default axis conversion), so a point (x, y, z) of the camera
frame is (x, z, -y) there.

* photo GLB: an armature of MANO's 16 bones per hand, a skinned mesh per
  hand (16 vertex groups, at most 4 weights per vertex summing to 1, an
  Armature modifier; turning index1 moves part of the mesh), every bone's
  head at RESULT.json's keypoints_3d_cam (0.1 mm: Blender keeps float32);
* photo BVH: one armature holding both hands' 16 bones, heads likewise;
* video GLB and BVH (--shape first, --smooth none): the scene at the clip's
  frame rate, every key on a whole frame, the GLB's frame range the clip's
  processed frames, the BVH one line a frame; at two frames of a track
  every bone's head within 1 mm of that frame's keypoints_3d_cam.

Without the `blender` command these tests are reported as not run (skipped,
naming the package); after scripts/deps.sh (CI) a missing blender fails.
"""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import video_fixtures as V
from conftest import REPO, describe, make_image, run_hamer
from detect.common import models_dir

SCRIPT = REPO / "tests" / "blender" / "check_import.py"
JOINTS = ["wrist", "index1", "index2", "index3", "middle1", "middle2", "middle3", "pinky1", "pinky2", "pinky3",
          "ring1", "ring2", "ring3", "thumb1", "thumb2", "thumb3"]
JOINT_MAP = [0, 13, 14, 15, 16, 1, 2, 3, 17, 4, 5, 6, 18, 10, 11, 12, 19, 7, 8, 9, 20]
KP_OF_JOINT = [JOINT_MAP.index(j) for j in range(16)]
BOXES = ["60,40,170,200", "230,90,330,240:left"]


def to_blender(p):
    p = np.asarray(p, np.float64)
    return np.stack([p[..., 0], p[..., 2], -p[..., 1]], -1)


def blender_exe():
    exe = shutil.which("blender")
    if exe:
        return exe
    if os.environ.get("HAMER_CI_DEPS_S"):  # scripts/deps.sh ran: it installs blender
        pytest.fail("the blender command is missing although scripts/deps.sh ran (Debian package blender)")
    pytest.skip("blender is not installed (Debian package blender; scripts/deps.sh installs it): not run")


def blender_import(kind, path, out, frames=()):
    proc = subprocess.run([blender_exe(), "-b", "--factory-startup", "--python", str(SCRIPT), "--", kind, str(path),
                           str(out), *[str(f) for f in frames]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=300)
    assert proc.returncode == 0 and out.exists() and "Traceback" not in proc.stdout + proc.stderr, describe(proc)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def photo(tmp_path_factory, ckpt):
    blender_exe()
    d = tmp_path_factory.mktemp("blender")
    make_image(d / "photo.png")
    proc = run_hamer(["run", "--model", ckpt("d2h2"), "--image", d / "photo.png", "--box", BOXES[0], "--box",
                      BOXES[1], "--focal", "800", "--output", d / "r.json", "--bvh", d / "hands.bvh", "--glb",
                      d / "hands.glb"])
    assert proc.returncode == 0, describe(proc)
    return {"dir": d, "hands": json.loads((d / "r.json").read_text())["hands"]}


def test_photo_glb(photo):
    got = blender_import("glb", photo["dir"] / "hands.glb", photo["dir"] / "glb.json", [1])
    names = ["hand_0_right", "hand_1_left"]
    assert sorted(got["armatures"]) == names
    for k, (name, hand) in enumerate(zip(names, photo["hands"])):
        arm = got["armatures"][name]
        assert sorted(arm["bones"]) == sorted(f"hand_{k}_{j}" for j in JOINTS)
        mesh = got["meshes"][f"hand_{k}_mesh"]
        assert mesh["armature"] == name and mesh["vertices"] == 778
        assert sorted(mesh["groups"]) == sorted(arm["bones"]) and mesh["max_groups_per_vertex"] <= 4
        assert abs(mesh["weight_sum_min"] - 1) < 1e-5 and abs(mesh["weight_sum_max"] - 1) < 1e-5
        assert 0 < mesh["moved_by_index1"] < 778, mesh["moved_by_index1"]
        want = to_blender(np.array(hand["keypoints_3d_cam"])[KP_OF_JOINT])
        heads = np.array([got["joints"]["1"][f"hand_{k}_{j}"] for j in JOINTS])
        assert np.abs(heads - want).max() < 1e-4, np.abs(heads - want).max()
    print(f"\nphoto GLB in Blender: index1 moves {[m['moved_by_index1'] for m in got['meshes'].values()]} "
          f"of 778 vertices")


def test_photo_bvh(photo):
    got = blender_import("bvh", photo["dir"] / "hands.bvh", photo["dir"] / "bvh.json", [1])
    assert list(got["armatures"]) == ["hands"]
    sides = ["right", "left"]
    assert sorted(got["armatures"]["hands"]["bones"]) == sorted(f"hand{k}_{sides[k]}_{j}" for k in range(2)
                                                              for j in JOINTS)
    for k, hand in enumerate(photo["hands"]):
        want = to_blender(np.array(hand["keypoints_3d_cam"])[KP_OF_JOINT])
        heads = np.array([got["joints"]["1"][f"hand{k}_{sides[k]}_{j}"] for j in JOINTS])
        assert np.abs(heads - want).max() < 1e-4, np.abs(heads - want).max()


def test_video(ckpt, tmp_path):
    blender_exe()
    V.need_ffmpeg()
    frames_in = V.pan_zoom(V.photo("hamer_example_5.jpg", 320), 8, (240, 320))
    vid = V.encode(frames_in, tmp_path / "pan.mkv", codec="png", fps=25)
    out, bvh, glb = tmp_path / "v.jsonl", tmp_path / "anim.bvh", tmp_path / "anim.glb"
    proc = run_hamer(["video", "--model", ckpt("d2h2"), "--video", vid, "--output", out, "--bvh", bvh, "--glb", glb,
                      "--detector", models_dir(), "--smooth", "none", "--shape", "first", "--focal", "300"])
    assert proc.returncode == 0, describe(proc)
    _, lines, _ = V.read_lines(out)
    frame_of = [f["frame"] for f in lines]
    track = lines[0]["hands"][0]["track_id"]
    seen = [f["frame"] for f in lines if any(h["track_id"] == track for h in f["hands"])]
    two = [seen[0], seen[-1]]
    assert two[0] != two[1]
    hand_at = {f["frame"]: next(h for h in f["hands"] if h["track_id"] == track) for f in lines
               if f["frame"] in two}

    g = blender_import("glb", glb, tmp_path / "glb.json", two)
    assert g["fps"] == pytest.approx(25) and (g["frame_start"], g["frame_end"]) == (frame_of[0], frame_of[-1])
    side = "right" if lines[0]["hands"][0]["is_right"] else "left"
    arm = g["armatures"][f"hand_{track}_{side}"]
    assert len(arm["bones"]) == 16 and arm["keys"]
    assert all(abs(k - round(k)) < 1e-3 for k in arm["keys"]), arm["keys"][:10]
    assert frame_of[0] <= arm["frame_range"][0] and arm["frame_range"][1] <= frame_of[-1] + 1
    for fr in two:
        want = to_blender(np.array(hand_at[fr]["keypoints_3d_cam"])[KP_OF_JOINT])
        heads = np.array([g["joints"][str(fr)][f"hand_{track}_{j}"] for j in JOINTS])
        err = np.linalg.norm(heads - want, axis=1).max()
        assert err < 1e-3, (fr, err)

    b = blender_import("bvh", bvh, tmp_path / "bvh.json", [frame_of.index(fr) + 1 for fr in two])
    assert b["fps"] == pytest.approx(25) and b["frame_end"] >= len(lines)
    (bones,) = [a["bones"] for a in b["armatures"].values()]
    assert f"hand{track}_{side}_wrist" in bones
    for fr in two:
        want = to_blender(np.array(hand_at[fr]["keypoints_3d_cam"])[KP_OF_JOINT])
        heads = np.array([b["joints"][str(frame_of.index(fr) + 1)][f"hand{track}_{side}_{j}"] for j in JOINTS])
        err = np.linalg.norm(heads - want, axis=1).max()
        assert err < 1e-3, (fr, err)
