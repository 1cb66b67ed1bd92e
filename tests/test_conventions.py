"""A hand's rotations in the conventions other tools ask for, against
independent numpy implementations and back to the rotation matrices:

* quaternions (w, x, y, z; w >= 0): against the principal eigenvector of
  Bar-Itzhack's 4 x 4 matrix (numpy.linalg.eigh), a method unlike the
  library's; back to the matrices by the textbook formula (1e-6);
* axis-angle: back to the matrices by torch.linalg.matrix_exp of the skew
  matrix (1e-6), the angle in [0, pi];
* MANO PCA coefficients: numpy.linalg.lstsq of hand_mean + c . C = the
  right hand's 45 axis-angle values, C the checkpoint's hand_components
  (the released 6 rows, and a MANO file's 45: then the pose comes back
  exactly, 1e-5); a left hand's are its mirror image's;
* SMPL-X: flat_hand_mean_true is what HaMeR's issue #26 prescribes for the
  right-hand pose the model predicted (axis-angle, the second and third
  elements negated for a left hand), flat_hand_mean_false that minus the
  side's hand mean (mirrored the same way for a left hand).
"""

import json

import numpy as np
import pytest
import torch

import hamer_fixture as fx
from conftest import describe, make_image, run_hamer

BOXES = ["60,40,170,200", "230,90,330,240:left"]
MIRROR = np.array([1.0, -1.0, -1.0])


def rotations(hand):
    return np.array([hand["global_orient"]] + hand["hand_pose"], np.float64).reshape(16, 3, 3)


def quat_eig(R):
    """Bar-Itzhack: the unit quaternion is the eigenvector of the largest
    eigenvalue of K (symmetric 4 x 4 from R); w >= 0."""
    (xx, xy, xz), (yx, yy, yz), (zx, zy, zz) = R
    K = np.array([[xx - yy - zz, yx + xy, zx + xz, zy - yz],
                  [yx + xy, yy - xx - zz, zy + yz, xz - zx],
                  [zx + xz, zy + yz, zz - xx - yy, yx - xy],
                  [zy - yz, xz - zx, yx - xy, xx + yy + zz]]) / 3.0
    w, v = np.linalg.eigh(K)
    x, y, z, q0 = v[:, np.argmax(w)]
    q = np.array([q0, x, y, z])
    return q if q[0] >= 0 else -q


def quat_to_rot(q):
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def aa_to_rot(v):
    x, y, z = v
    K = torch.tensor([[0, -z, y], [z, 0, -x], [-y, x, 0]], dtype=torch.float64)
    return torch.linalg.matrix_exp(K).numpy()


def aa_of(R):
    """Axis-angle of R from the quaternion (eigen method above)."""
    q = quat_eig(R)
    s = np.linalg.norm(q[1:])
    return np.zeros(3) if s < 1e-12 else q[1:] / s * 2 * np.arctan2(s, q[0])


def run(ckpt_args, tmp_path, name="r.json"):
    img = tmp_path / "photo.png"
    make_image(img)
    out = tmp_path / name
    proc = run_hamer(["run", *ckpt_args, "--image", img, "--output", out, *sum((["--box", b] for b in BOXES), [])])
    assert proc.returncode == 0, describe(proc)
    return json.loads(out.read_text())["hands"]


def check_hand(hand, components, mean):
    R = rotations(hand)
    quats = np.array([hand["global_orient_quaternion"]] + hand["hand_pose_quaternion"], np.float64)
    aa = np.array([hand["global_orient_axis_angle"]] + hand["hand_pose_axis_angle"], np.float64)
    for j in range(16):
        q = quats[j]
        assert q[0] >= 0 and abs(np.linalg.norm(q) - 1) < 1e-6
        assert np.allclose(q, quat_eig(R[j]), atol=2e-6), (j, q, quat_eig(R[j]))
        assert np.allclose(quat_to_rot(q), R[j], atol=2e-6)
        assert np.allclose(aa_to_rot(aa[j]), R[j], atol=2e-6)
        assert np.linalg.norm(aa[j]) <= np.pi + 1e-6
    # the right hand the model saw: a left hand's pose mirrored back
    m = np.tile(np.ones(3) if hand["is_right"] else MIRROR, 15)
    right_aa = np.concatenate([aa_of((np.diag(m[:3]) @ R[j] @ np.diag(m[:3]))) for j in range(1, 16)])
    assert np.allclose(right_aa, m * aa[1:].reshape(-1), atol=2e-6)
    # PCA: least squares in numpy
    k = len(components)
    c = np.linalg.lstsq(components.T, right_aa - mean, rcond=None)[0]
    got = np.array(hand["hand_pose_pca"], np.float64)
    assert got.shape == (k,) and np.allclose(got, c, atol=2e-5, rtol=1e-5), (got, c)
    back = mean + got @ components
    if k == 45:  # a full basis: the pose itself
        assert np.allclose(back, right_aa, atol=2e-5)
        for j in range(15):
            Rj = aa_to_rot(m[:3] * back[3 * j:3 * j + 3])
            assert np.allclose(Rj, R[j + 1], atol=1e-4)
    else:  # a projection: the residual is orthogonal to the components
        assert np.abs(components @ (right_aa - back)).max() < 1e-4
    # SMPL-X (issue #26): the predicted right-hand pose, mirrored for a left hand; minus the side's mean
    sx = hand["smplx"]
    assert sx["param"] == ("right_hand_pose" if hand["is_right"] else "left_hand_pose")
    assert np.allclose(sx["flat_hand_mean_true"], m * right_aa, atol=2e-6)
    assert np.allclose(sx["flat_hand_mean_false"], m * (right_aa - mean), atol=2e-6)


def test_released_layout_six_components(ckpt, tmp_path):
    """The d2h2 fixture carries hand_components [6, 45] as the release does."""
    bufs = fx.mano_buffers(0)
    hands = run(["--model", ckpt("d2h2")], tmp_path)
    assert [h["is_right"] for h in hands] == [True, False]
    for hand in hands:
        check_hand(hand, bufs["hand_components"].astype(np.float64), bufs["hand_mean"].astype(np.float64))


def test_full_basis_from_a_mano_file(ckpt, tmp_path):
    """A MANO .npz with all 45 components (a random basis: not orthonormal,
    the least squares must not assume it) beside a checkpoint without
    mano.*; and one without the PCA arrays: no PCA, no SMPL-X block."""
    bufs = fx.mano_buffers(0)
    rng = np.random.RandomState(3)
    comps = rng.normal(0, 0.5, (45, 45)).astype(np.float32)
    keys = fx.MANO_NPZ_KEYS
    full = tmp_path / "mano45.npz"
    np.savez(full, hand_components=comps, hand_mean=bufs["hand_mean"], **{k: bufs[k] for k in keys})
    hands = run(["--model", ckpt("d2h2_nomano"), "--mano", full], tmp_path)
    for hand in hands:
        check_hand(hand, comps.astype(np.float64), bufs["hand_mean"].astype(np.float64))
    bare = tmp_path / "mano.npz"
    np.savez(bare, **{k: bufs[k] for k in keys})
    for hand in run(["--model", ckpt("d2h2_nomano"), "--mano", bare], tmp_path, "bare.json"):
        assert "hand_pose_pca" not in hand and "smplx" not in hand and "hand_pose_quaternion" in hand
    # a malformed basis is refused by the loader with a one-line message
    bad = tmp_path / "bad.npz"
    np.savez(bad, hand_components=np.zeros((46, 45), np.float32), hand_mean=bufs["hand_mean"],
             **{k: bufs[k] for k in keys})
    img = tmp_path / "photo.png"
    proc = run_hamer(["run", "--model", ckpt("d2h2_nomano"), "--mano", bad, "--image", img, "--output",
                      tmp_path / "x.json", "--box", BOXES[0]])
    assert proc.returncode == 1 and "hand_components" in proc.stderr and len(proc.stderr.splitlines()) == 1
