#!/usr/bin/python3
"""How the animation files' skeleton should get its shape: runs `hamer video
--bvh` on a clip with --shape track and --shape first (and --smooth none,
so the lines are the per-frame results) and measures, per mode, over every
tracked hand of every frame:

  bones      the spread (std over the frames, mean over the 15 bones) of the
             per-frame results' bone lengths, which a BVH / GLB skeleton
             cannot follow (its bones are fixed): what one shape must give up
  2d         the skeleton's 16 joints projected through the frame's camera,
             against the frame's 2D keypoints (pixels, mean): what the image
             says
  3d         the skeleton's joints against the frame's keypoints_3d_cam (mm,
             mean and max): how far the file is from the per-frame lines
  3d rel     the same relative to the wrist (mm): the shape alone

    bench/anim_shape.py MODEL CLIP [--focal PX] [--detector DIR] [--build build]

The BVH is read with tests/bvh_reader.py (independent of the writer)."""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import bvh_reader  # noqa: E402

JOINTS = ["wrist", "index1", "index2", "index3", "middle1", "middle2", "middle3", "pinky1", "pinky2", "pinky3",
          "ring1", "ring2", "ring3", "thumb1", "thumb2", "thumb3"]
JOINT_MAP = [0, 13, 14, 15, 16, 1, 2, 3, 17, 4, 5, 6, 18, 10, 11, 12, 19, 7, 8, 9, 20]
KP = [JOINT_MAP.index(j) for j in range(16)]
PARENTS = [-1, 0, 1, 2, 0, 4, 5, 0, 7, 8, 0, 10, 11, 0, 13, 14]
D = np.array([1.0, -1.0, -1.0])


def run(args, shape, tmp):
    out, bvh = tmp / f"{shape}.jsonl", tmp / f"{shape}.bvh"
    cmd = [str(Path(args.build) / "hamer"), "video", "--model", args.model, "--video", args.clip, "--output", out,
           "--bvh", bvh, "--shape", shape, "--smooth", "none"]
    if args.focal:
        cmd += ["--focal", str(args.focal)]
    if args.detector:
        cmd += ["--detector", args.detector]
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)
    lines = [json.loads(s) for s in out.read_text().splitlines()]
    return [l for l in lines if "frame" in l], bvh_reader.read(bvh.read_text())


def measure(lines, bvh):
    joints, n, _, motion = bvh
    roots = {j.name.split("_")[0][4:]: j.name.split("_")[1] for j in joints if j.parent is None}
    d2, d3, d3r, lengths = [], [], [], {}
    for row, f in enumerate(lines):
        pos, _ = bvh_reader.world(joints, motion[row])
        for h in f["hands"]:
            side = roots[str(h["track_id"])]
            got = np.array([D * pos[f"hand{h['track_id']}_{side}_{name}"] for name in JOINTS])
            own = np.array(h["keypoints_3d_cam"])[KP]
            cam = h["camera"]
            f_, (cx, cy) = cam["focal_length"], cam["principal_point"]
            px = np.stack([f_ * got[:, 0] / got[:, 2] + cx, f_ * got[:, 1] / got[:, 2] + cy], 1)
            d2.append(np.linalg.norm(px - np.array(h["keypoints_2d"])[KP], axis=1).mean())
            d3.append(np.linalg.norm(got - own, axis=1))
            d3r.append(np.linalg.norm((got - got[0]) - (own - own[0]), axis=1))
            lengths.setdefault(h["track_id"], []).append(
                [np.linalg.norm(own[j] - own[PARENTS[j]]) for j in range(1, 16)])
    spread = np.mean([np.std(np.array(v), axis=0).mean() for v in lengths.values()])
    d3, d3r = np.concatenate(d3), np.concatenate(d3r)
    return spread, np.mean(d2), d3.mean(), d3.max(), d3r.mean(), d3r.max()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("clip")
    p.add_argument("--focal", type=float)
    p.add_argument("--detector")
    p.add_argument("--build", default=str(REPO / "build"))
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        print("shape   bones std (mm)  2d (px)  3d mean/max (mm)  3d wrist-relative mean/max (mm)")
        for shape in ("track", "first"):
            lines, bvh = run(args, shape, tmp)
            s, e2, m3, x3, m3r, x3r = measure(lines, bvh)
            print(f"{shape:6}  {s * 1e3:13.4f}  {e2:7.3f}  {m3 * 1e3:7.3f} / {x3 * 1e3:7.3f}  "
                  f"{m3r * 1e3:9.4f} / {x3r * 1e3:7.4f}")


if __name__ == "__main__":
    main()
