"""Synthetic HaMeR checkpoints for the tests.

The released ``hamer.ckpt`` is a PyTorch Lightning 2.0.3 checkpoint: a
``torch.save`` zip whose pickle holds a dict with ``epoch``, ``global_step``,
``pytorch-lightning_version``, ``state_dict`` (an OrderedDict carrying a
``_metadata`` attribute, as ``nn.Module.state_dict()`` returns it), ``loops``,
``hparams_name`` and ``hyper_parameters`` (omegaconf objects).  This module
writes files laid out the same way, with random weights of the official key
names and shapes, so that the C loader meets the same container structure
as in the release:

* the hyper-parameters are instances of classes defined here (stand-ins for
  omegaconf's DictConfig / ContainerMetadata), with nested nodes and parent
  back-references (cycles in the pickle memo), so a reader must treat them
  as opaque objects it cannot import;
* ``initialized`` is a 0-d bool tensor and ``discriminator.*`` tensors are
  present; both must be ignored;
* ``mano.*`` holds synthetic but plausible MANO buffers (a hand-shaped
  template of 778 vertices, ~0.1 m across);
* a ``byteorder`` record follows ``data.pkl`` as newer torch versions write
  it (torch 1.13, used here, does not write one by itself);
* optionally every storage carries the location tag ``cuda:0`` (the release
  was saved from a GPU) and the zip prefix can be chosen (torch 1.13 names
  the prefix after the file stem when saving to a path, ``archive`` when
  saving to a file object; the release uses ``archive``).

Every tensor is drawn from a generator seeded by (seed, key name), so
checkpoints that differ only in which keys they contain (with / without
``mano.*``, a dropped key) share all the other weights bit for bit.

Usable as a module and as a command line tool:

    python3 tests/hamer_fixture.py --depth 2 --head-depth 2 --seed 0 \\
        --out x.ckpt [--no-mano] [--mano-npz mano.npz] [--cuda-tag] \\
        [--zip-prefix NAME]
"""

import argparse
import collections
import hashlib
import os
import pickle
import sys
import tempfile

import numpy as np
import torch

# Widths of the released model; the tests vary only the depths.
VIT_DIM = 1280
VIT_MLP = 5120
VIT_TOKENS = 192          # 16 x 12 patches of a 256 x 192 crop
PATCH = 16
HEAD_DIM = 1024
HEAD_INNER = 512          # 8 heads x 64
HEAD_MLP = 1024
N_JOINTS = 16
N_VERTS = 778
N_FACES = 1538
N_BETAS = 10

MANO_PARENTS = [-1, 0, 1, 2, 0, 4, 5, 0, 7, 8, 0, 10, 11, 0, 13, 14]
# smplx vertex_ids['mano']: thumb, index, middle, ring, pinky fingertips.
FINGERTIP_VERTICES = [744, 320, 443, 554, 671]
MANO_TO_OPENPOSE = [0, 13, 14, 15, 16, 1, 2, 3, 17, 4, 5, 6, 18, 10, 11, 12,
                    19, 7, 8, 9, 20]
# The arrays a separate MANO file (--mano-npz) carries.
MANO_NPZ_KEYS = ["v_template", "shapedirs", "posedirs", "J_regressor",
                 "parents", "lbs_weights", "faces_tensor"]


def generator_digest():
    """Hash of this file: cached fixtures are regenerated when it changes."""
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


# ---------------------------------------------------------------------------
# Opaque hyper-parameter objects (stand-ins for omegaconf classes)
# ---------------------------------------------------------------------------

class HParamsMeta:
    """Plays the role of omegaconf's ContainerMetadata."""

    def __init__(self, key=None, ref_type=None, optional=True):
        self.ref_type = ref_type
        self.object_type = dict
        self.optional = optional
        self.key = key
        self.flags = {"struct": False, "readonly": None}
        self.flags_root = False
        self.resolver_cache = collections.defaultdict(dict)


class HParams:
    """Plays the role of omegaconf's DictConfig.

    Pickled with the default protocol-2 reduction (NEWOBJ + BUILD with the
    instance dict); children point back at their parent, as DictConfig
    nodes do, so the pickle contains reference cycles.
    """

    def __init__(self, content, key=None, parent=None):
        self._metadata = HParamsMeta(key=key)
        self._parent = parent
        self._content = {}
        for k, v in content.items():
            self._content[k] = HParams(v, key=k, parent=self) if isinstance(v, dict) else v


def release_like_hparams():
    """Configuration values of the released model (32/6 deep, whatever the
    fixture's depths are: the C reader must derive the depths from the
    state-dict keys, never from here)."""
    cfg = {
        "MODEL": {
            "IMAGE_SIZE": 256,
            "IMAGE_MEAN": [0.485, 0.456, 0.406],
            "IMAGE_STD": [0.229, 0.224, 0.225],
            "BACKBONE": {"TYPE": "vit", "PRETRAINED_WEIGHTS": None},
            "MANO_HEAD": {
                "TYPE": "transformer_decoder",
                "IN_CHANNELS": 2048,
                "IEF_ITERS": 1,
                "TRANSFORMER_DECODER": {
                    "depth": 6, "heads": 8, "mlp_dim": 1024, "dim_head": 64,
                    "dropout": 0.0, "emb_dropout": 0.0, "norm": "layer",
                    "context_dim": 1280,
                },
            },
        },
        "MANO": {
            "DATA_DIR": "_DATA/data/", "MODEL_PATH": "_DATA/data/mano",
            "GENDER": "neutral", "NUM_HAND_JOINTS": 15,
            "MEAN_PARAMS": "_DATA/data/mano_mean_params.npz",
            "CREATE_BODY_POSE": False,
        },
        "EXTRA": {"FOCAL_LENGTH": 5000, "NUM_LOG_IMAGES": 4,
                  "NUM_LOG_SAMPLES_PER_IMAGE": 8, "PELVIS_IND": 0},
        "TRAIN": {"LR": 1e-05, "WEIGHT_DECAY": 0.0001, "BATCH_SIZE": 8,
                  "LOSS_REDUCTION": "mean", "NUM_TRAIN_SAMPLES": 2,
                  "NUM_TEST_SAMPLES": 64, "POSE_2D_NOISE_RATIO": 0.01,
                  "SMPL_PARAM_NOISE_RATIO": 0.005},
        "LOSS_WEIGHTS": {"KEYPOINTS_3D": 0.05, "KEYPOINTS_2D": 0.01,
                         "GLOBAL_ORIENT": 0.001, "HAND_POSE": 0.001,
                         "BETAS": 0.0005, "ADVERSARIAL": 0.0005},
        "misc": {"tuple": (1, 2.5, "three", None, True), "big": 2 ** 40,
                 "negative": -7, "unicode": "caf\u00e9 \u2013 \u624b",
                 "bytes": b"\x00\x01\xfe"},
    }
    return HParams(cfg)


def lightning_loops():
    """The ``loops`` entry of a Lightning 2.0 checkpoint (nested dicts)."""
    def progress(n):
        return {"total": {"ready": n, "completed": n, "started": n, "processed": n},
                "current": {"ready": n, "completed": n, "started": n, "processed": n}}
    return {
        "fit_loop": {
            "state_dict": {},
            "epoch_loop.state_dict": {"_batches_that_stepped": 1000000},
            "epoch_loop.batch_progress": progress(100),
            "epoch_loop.scheduler_progress": progress(0),
            "epoch_loop.automatic_optimization.state_dict": {},
            "epoch_loop.manual_optimization.state_dict": {},
            "epoch_progress": progress(3),
        },
        "validate_loop": {"state_dict": {}, "batch_progress": progress(0)},
        "test_loop": {"state_dict": {}, "batch_progress": progress(0)},
        "predict_loop": {"state_dict": {}, "batch_progress": progress(0)},
    }


# ---------------------------------------------------------------------------
# Random weights
# ---------------------------------------------------------------------------

def _generator(seed, key):
    """A torch generator seeded by (seed, key) only."""
    h = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    g = torch.Generator()
    g.manual_seed(int.from_bytes(h[:8], "little") & ((1 << 63) - 1))
    return g


def _normal(seed, key, shape, std, mean=0.0):
    t = torch.randn(*shape, generator=_generator(seed, key), dtype=torch.float32)
    if std != 1.0:
        t.mul_(std)
    if mean != 0.0:
        t.add_(mean)
    return t


def _linear(sd, seed, prefix, out_f, in_f, bias=True, std=0.02, bias_std=0.01):
    sd[prefix + ".weight"] = _normal(seed, prefix + ".weight", (out_f, in_f), std)
    if bias:
        sd[prefix + ".bias"] = _normal(seed, prefix + ".bias", (out_f,), bias_std)


def _layer_norm(sd, seed, prefix, dim):
    # Non-trivial affine parameters, so that a loader that ignores them or
    # swaps weight and bias is caught.
    sd[prefix + ".weight"] = _normal(seed, prefix + ".weight", (dim,), 0.1, mean=1.0)
    sd[prefix + ".bias"] = _normal(seed, prefix + ".bias", (dim,), 0.05)


def _rotation_6d(rng):
    """6D representation of a random rotation: the first two columns of R,
    laid out as hamer's rot6d_to_rotmat reads them (a1 = x[0:3], a2 = x[3:6])."""
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    w, x, y, z = q
    r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                  [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                  [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    return np.concatenate([r[:, 0], r[:, 1]])


def backbone_state(sd, seed, depth):
    """ViT-H/16 backbone (``backbone.*``) with ``depth`` blocks."""
    sd["backbone.pos_embed"] = _normal(seed, "backbone.pos_embed", (1, VIT_TOKENS + 1, VIT_DIM), 0.02)
    sd["backbone.patch_embed.proj.weight"] = _normal(
        seed, "backbone.patch_embed.proj.weight", (VIT_DIM, 3, PATCH, PATCH), 0.02)
    sd["backbone.patch_embed.proj.bias"] = _normal(seed, "backbone.patch_embed.proj.bias", (VIT_DIM,), 0.02)
    for i in range(depth):
        p = f"backbone.blocks.{i}"
        _layer_norm(sd, seed, p + ".norm1", VIT_DIM)
        _linear(sd, seed, p + ".attn.qkv", 3 * VIT_DIM, VIT_DIM)
        _linear(sd, seed, p + ".attn.proj", VIT_DIM, VIT_DIM)
        _layer_norm(sd, seed, p + ".norm2", VIT_DIM)
        _linear(sd, seed, p + ".mlp.fc1", VIT_MLP, VIT_DIM)
        _linear(sd, seed, p + ".mlp.fc2", VIT_DIM, VIT_MLP)
    _layer_norm(sd, seed, "backbone.last_norm", VIT_DIM)


def head_state(sd, seed, depth):
    """MANO transformer-decoder head (``mano_head.*``) with ``depth`` layers.

    Module order as nn.Module.state_dict() lists it: the head's own buffers
    first, then its children.
    """
    rng = np.random.RandomState(seed + 1000)
    # Mean parameters: a random global orientation (the release's mean
    # global orientation is far from identity) and identity-ish finger
    # joints, so that LBS is exercised away from the rest pose.
    pose = [_rotation_6d(rng)]
    for _ in range(N_JOINTS - 1):
        pose.append(np.array([1, 0, 0, 0, 1, 0], np.float64) + rng.normal(0, 0.15, 6))
    sd["mano_head.init_hand_pose"] = torch.tensor(np.concatenate(pose)[None], dtype=torch.float32)
    sd["mano_head.init_betas"] = torch.tensor(rng.normal(0, 0.3, (1, N_BETAS)), dtype=torch.float32)
    sd["mano_head.init_cam"] = torch.tensor(
        [[0.9 + rng.normal(0, 0.02), rng.normal(0, 0.02), rng.normal(0, 0.02)]], dtype=torch.float32)

    t = "mano_head.transformer"
    sd[t + ".pos_embedding"] = _normal(seed, t + ".pos_embedding", (1, 1, HEAD_DIM), 0.5)
    _linear(sd, seed, t + ".to_token_embedding", HEAD_DIM, 1, std=0.5, bias_std=0.5)
    for j in range(depth):
        p = f"{t}.transformer.layers.{j}"
        _layer_norm(sd, seed, p + ".0.norm", HEAD_DIM)
        _linear(sd, seed, p + ".0.fn.to_qkv", 3 * HEAD_INNER, HEAD_DIM, bias=False)
        _linear(sd, seed, p + ".0.fn.to_out.0", HEAD_DIM, HEAD_INNER)
        _layer_norm(sd, seed, p + ".1.norm", HEAD_DIM)
        _linear(sd, seed, p + ".1.fn.to_kv", 2 * HEAD_INNER, VIT_DIM, bias=False)
        _linear(sd, seed, p + ".1.fn.to_q", HEAD_INNER, HEAD_DIM, bias=False)
        _linear(sd, seed, p + ".1.fn.to_out.0", HEAD_DIM, HEAD_INNER)
        _layer_norm(sd, seed, p + ".2.norm", HEAD_DIM)
        _linear(sd, seed, p + ".2.fn.net.0", HEAD_MLP, HEAD_DIM)
        _linear(sd, seed, p + ".2.fn.net.3", HEAD_DIM, HEAD_MLP)
    # A small camera readout keeps the scale near init_cam (s ~ 0.9), so tz
    # and the 2D keypoints stay well conditioned.  The pose and shape
    # readouts are 5x larger (std 0.01): with random weights the token
    # depends only weakly on the crop, and at 0.002 an error such as the
    # tanh GELU approximation moved the parameters by only 2e-5, below the
    # tests' 1e-4 tolerance; at 0.01 float32 rounding still stays ~1e-6.
    _linear(sd, seed, "mano_head.decpose", 6 * N_JOINTS, HEAD_DIM, std=0.01, bias_std=0.002)
    _linear(sd, seed, "mano_head.decshape", N_BETAS, HEAD_DIM, std=0.01, bias_std=0.002)
    _linear(sd, seed, "mano_head.deccam", 3, HEAD_DIM, std=0.002, bias_std=0.002)


def discriminator_state(sd, seed):
    """HaMeR's pose/shape discriminator (46 tensors, to be ignored by
    readers; with them a 32/6 state dict has the release's 563 keys)."""
    def lin(name, out_f, in_f):
        sd[f"discriminator.{name}.weight"] = _normal(seed, f"discriminator.{name}.weight", (out_f, in_f), 0.05)
        sd[f"discriminator.{name}.bias"] = _normal(seed, f"discriminator.{name}.bias", (out_f,), 0.05)

    for name, out_f, in_f in (("D_conv1", 32, 9), ("D_conv2", 32, 32)):
        sd[f"discriminator.{name}.weight"] = _normal(
            seed, f"discriminator.{name}.weight", (out_f, in_f, 1, 1), 0.05)
        sd[f"discriminator.{name}.bias"] = _normal(seed, f"discriminator.{name}.bias", (out_f,), 0.05)
    for i in range(N_JOINTS - 1):
        lin(f"pose_out.{i}", 1, 32)
    lin("betas_fc1", 10, N_BETAS)
    lin("betas_fc2", 5, 10)
    lin("betas_out", 1, 5)
    lin("D_alljoints_fc1", 1024, 32 * (N_JOINTS - 1))
    lin("D_alljoints_fc2", 1024, 1024)
    lin("D_alljoints_out", 1, 1024)


# ---------------------------------------------------------------------------
# Synthetic MANO buffers
# ---------------------------------------------------------------------------

def _hand_skeleton():
    """Joint positions of a flat right hand (metres, MANO joint order) and,
    per joint, the end point of the bone it drives (its child, or the tip)."""
    wrist = np.array([0.090, 0.006, 0.006])
    # Fingers point along -x, spread along z; lengths of the three segments.
    fingers = {  # first joint index: (MCP offset from wrist, segment lengths)
        1: (np.array([-0.066, 0.004, 0.024]), (0.036, 0.024, 0.020)),    # index
        4: (np.array([-0.068, 0.004, 0.004]), (0.040, 0.026, 0.021)),    # middle
        7: (np.array([-0.058, 0.000, -0.034]), (0.028, 0.019, 0.017)),   # pinky
        10: (np.array([-0.064, 0.002, -0.015]), (0.036, 0.024, 0.020)),  # ring
    }
    joints = np.zeros((N_JOINTS, 3))
    ends = np.zeros((N_JOINTS, 3))
    joints[0] = wrist
    for first, (mcp, lengths) in fingers.items():
        d = np.array([-1.0, -0.05, mcp[2] * 0.8])
        d /= np.linalg.norm(d)
        p = wrist + mcp
        for k, length in enumerate(lengths):
            joints[first + k] = p
            p = p + d * length
            ends[first + k] = p
    # Thumb: from the side of the palm, pointing forward and outwards.
    d = np.array([-0.6, -0.25, 0.75])
    d /= np.linalg.norm(d)
    p = wrist + np.array([-0.020, -0.008, 0.022])
    for k, length in enumerate((0.032, 0.030, 0.026)):
        joints[13 + k] = p
        p = p + d * length
        ends[13 + k] = p
    ends[0] = wrist + np.array([-0.066, 0.003, -0.005])  # palm centre line
    return joints, ends


def mano_buffers(seed):
    """Plausible MANO buffers as numpy arrays, keyed as smplx names them."""
    rng = np.random.RandomState(seed + 2000)
    joints, ends = _hand_skeleton()
    parents = np.array(MANO_PARENTS, np.int64)

    # Assign vertices to bones: the palm (driven by the wrist) takes a larger
    # share; the fingertip vertices sit at the tips of their distal bones.
    weights = np.full(N_JOINTS, 1.0)
    weights[0] = 8.0
    bone = rng.choice(N_JOINTS, size=N_VERTS, p=weights / weights.sum())
    distal = {744: 15, 320: 3, 443: 6, 554: 12, 671: 9}
    t = rng.uniform(0.0, 1.0, N_VERTS)
    for v, j in distal.items():
        bone[v] = j
        t[v] = 1.0
    verts = np.zeros((N_VERTS, 3))
    for v in range(N_VERTS):
        j = bone[v]
        if j == 0:
            # Palm: a random point in the quadrilateral wrist / MCPs.
            c = rng.dirichlet(np.ones(5))
            corners = np.stack([joints[0], joints[1], joints[4], joints[7], joints[10]])
            p = c @ corners + np.array([0, rng.normal(0, 0.008), 0])
        else:
            axis = ends[j] - joints[j]
            radial = rng.normal(size=3)
            radial -= radial.dot(axis) / axis.dot(axis) * axis
            radial *= 0.008 / max(np.linalg.norm(radial), 1e-9)
            p = joints[j] + t[v] * axis + (0 if v in distal else radial)
        verts[v] = p

    # Skinning weights: the bone's joint and its parent, blended along the
    # bone, plus a thin dense tail over all joints (MANO's weights are not
    # strictly sparse), normalised to sum to 1.
    lbs = np.zeros((N_VERTS, N_JOINTS))
    for v in range(N_VERTS):
        j = bone[v]
        if j == 0:
            lbs[v, 0] = 1.0
        else:
            lbs[v, j] = 0.5 + 0.5 * t[v]
            lbs[v, parents[j]] = 0.5 - 0.5 * t[v]
    lbs += rng.uniform(0.0, 2e-3, lbs.shape)
    lbs /= lbs.sum(1, keepdims=True)

    # Joint regressor: each joint is a convex combination of its 6 nearest
    # template vertices.
    jreg = np.zeros((N_JOINTS, N_VERTS))
    for j in range(N_JOINTS):
        near = np.argsort(np.linalg.norm(verts - joints[j], axis=1))[:6]
        w = rng.uniform(0.5, 1.5, 6)
        jreg[j, near] = w / w.sum()

    # Faces: triangles between each seed vertex and two of its neighbours.
    faces = np.zeros((N_FACES, 3), np.int64)
    dist = np.linalg.norm(verts[:, None] - verts[None], axis=2)
    order = np.argsort(dist, axis=1)[:, 1:9]
    for f in range(N_FACES):
        a = f % N_VERTS
        b, c = rng.choice(order[a], 2, replace=False)
        faces[f] = (a, b, c)

    hand_mean = rng.normal(0, 0.1, 45)
    return {
        "faces_tensor": faces,
        "v_template": verts.astype(np.float32),
        "shapedirs": rng.normal(0, 1e-3, (N_VERTS, 3, N_BETAS)).astype(np.float32),
        "J_regressor": jreg.astype(np.float32),
        "posedirs": rng.normal(0, 1e-3, (9 * (N_JOINTS - 1), 3 * N_VERTS)).astype(np.float32),
        "parents": parents,
        "lbs_weights": lbs.astype(np.float32),
        "hand_components": rng.normal(0, 0.3, (6, 45)).astype(np.float32),
        "hand_mean": hand_mean.astype(np.float32),
        "pose_mean": np.concatenate([np.zeros(3), hand_mean]).astype(np.float32),
        "extra_joints_idxs": np.array(FINGERTIP_VERTICES, np.int64),
        "joint_map": np.array(MANO_TO_OPENPOSE, np.int64),
        "vertex_joint_selector.extra_joints_idxs": np.array(FINGERTIP_VERTICES, np.int64),
    }


def write_mano_npz(path, seed=0):
    """The MANO arrays a user may hold separately (names without 'mano.')."""
    bufs = mano_buffers(seed)
    np.savez(path, **{k: bufs[k] for k in MANO_NPZ_KEYS})


# ---------------------------------------------------------------------------
# State dict and checkpoint
# ---------------------------------------------------------------------------

def _metadata_for(keys):
    """The ``_metadata`` OrderedDict nn.Module.state_dict() attaches: one
    entry per module prefix, in first-seen order."""
    meta = collections.OrderedDict()
    meta[""] = {"version": 1}
    for k in keys:
        parts = k.split(".")[:-1]
        for n in range(1, len(parts) + 1):
            prefix = ".".join(parts[:n])
            if prefix not in meta:
                meta[prefix] = {"version": 1}
    return meta


def build_state_dict(depth=2, head_depth=2, seed=0, mano=True):
    """The checkpoint's state dict, in nn.Module.state_dict() order."""
    sd = collections.OrderedDict()
    sd["initialized"] = torch.tensor(True)  # HAMER's own buffer: listed first
    backbone_state(sd, seed, depth)
    head_state(sd, seed, head_depth)
    discriminator_state(sd, seed)
    if mano:
        for k, v in mano_buffers(seed).items():
            sd["mano." + k] = torch.from_numpy(np.ascontiguousarray(v))
    return sd


class _ByteorderZip:
    """Wraps torch's zip writer to add the ``byteorder`` record right after
    ``data.pkl``, where torch >= 2.1 (which saved the release) puts it."""

    def __init__(self, writer):
        self._writer = writer

    def write_record(self, name, data, size):
        self._writer.write_record(name, data, size)
        if name == "data.pkl":
            order = sys.byteorder.encode()
            self._writer.write_record("byteorder", order, len(order))


def _cuda_tagger(storage):
    return "cuda:0"


def _no_restore(storage, location):
    return None  # let the standard deserialisers handle loading


def _torch_save(obj, dest):
    """torch.save with a ``byteorder`` record; falls back to plain
    torch.save if torch's private writer API differs."""
    ser = torch.serialization
    if hasattr(ser, "_open_zipfile_writer") and hasattr(ser, "_save"):
        with ser._open_zipfile_writer(dest) as writer:
            ser._save(obj, _ByteorderZip(writer), pickle, 2)
    else:
        torch.save(obj, dest)


def save_checkpoint(state_dict, path, cuda_tag=False, zip_prefix=None, epoch=3, global_step=1000000):
    """Write ``state_dict`` wrapped as a Lightning 2.0.3 checkpoint.

    zip_prefix None: the zip entries are prefixed ``archive/`` (saved via a
    file object, as the release is).  Otherwise the file is saved through a
    path whose stem is ``zip_prefix`` (torch 1.13 uses the stem as prefix)
    and renamed to ``path``.  cuda_tag: every storage is recorded with
    location ``cuda:0`` although it is a CPU tensor.
    """
    ckpt = {
        "epoch": epoch,
        "global_step": global_step,
        "pytorch-lightning_version": "2.0.3",
        "state_dict": state_dict,
        "loops": lightning_loops(),
        "hparams_name": "cfg",
        "hyper_parameters": release_like_hparams(),
    }
    state_dict._metadata = _metadata_for(state_dict.keys())
    path = os.path.abspath(path)
    entry = (-1000, _cuda_tagger, _no_restore)
    if cuda_tag:
        # Lower number = higher priority: ours is asked before the CPU tagger.
        torch.serialization.register_package(*entry)
    try:
        if zip_prefix is None:
            with open(path, "wb") as f:
                _torch_save(ckpt, f)
        else:
            with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as tmp:
                tmp_path = os.path.join(tmp, zip_prefix + ".ckpt")
                _torch_save(ckpt, tmp_path)
                os.replace(tmp_path, path)
    finally:
        if cuda_tag:
            torch.serialization._package_registry.remove(entry)


def write_checkpoint(path, depth=2, head_depth=2, seed=0, mano=True, cuda_tag=False,
                     zip_prefix=None, drop=(), transpose=(), replace=None):
    """Generate and save one checkpoint.

    drop: keys to remove (a checkpoint missing a required tensor);
    transpose: 2-D keys stored transposed (same element count, wrong shape);
    replace: {key: tensor} overrides.
    """
    sd = build_state_dict(depth, head_depth, seed, mano)
    for k in drop:
        del sd[k]
    for k in transpose:
        sd[k] = sd[k].t().contiguous()
    for k, v in (replace or {}).items():
        sd[k] = v
    save_checkpoint(sd, path, cuda_tag=cuda_tag, zip_prefix=zip_prefix)
    del sd


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write a synthetic HaMeR checkpoint.")
    ap.add_argument("--depth", type=int, default=2, help="ViT blocks (release: 32)")
    ap.add_argument("--head-depth", type=int, default=2, help="decoder layers (release: 6)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="checkpoint path")
    ap.add_argument("--no-mano", action="store_true", help="leave out the mano.* buffers")
    ap.add_argument("--mano-npz", help="also write the MANO buffers to this .npz")
    ap.add_argument("--cuda-tag", action="store_true", help="tag storages as cuda:0")
    ap.add_argument("--zip-prefix", help="zip entry prefix (default: archive)")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    write_checkpoint(args.out, args.depth, args.head_depth, args.seed, mano=not args.no_mano,
                     cuda_tag=args.cuda_tag, zip_prefix=args.zip_prefix)
    if args.mano_npz:
        write_mano_npz(args.mano_npz, args.seed)
    return 0


if __name__ == "__main__":
    # Pickled classes must be importable as hamer_fixture.*, not __main__.*,
    # so that other processes can resolve them by name.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hamer_fixture
    sys.exit(hamer_fixture.main())
