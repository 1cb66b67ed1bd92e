"""Independent float64 PyTorch reference of HaMeR's per-hand regressor.

Written from the published architecture (geopavlakos/hamer, smplx's MANO
layer): ViT-H/16 backbone -> MANO transformer-decoder head -> 6D rotations
-> MANO linear blend skinning -> keypoints and camera.  Everything runs in
float64 with plain tensor operations (no nn.Module), and nothing is
shortcut: the decoder's self-attention over its single token goes through
the full softmax, the patch embedding is a real strided convolution with
padding, and the kinematic chain is composed joint by joint.

The architecture is read from the checkpoint: the number of ViT blocks and
decoder layers from the keys, the widths from the shapes; the head sizes
are HaMeR's (80 in the ViT, 64 in the decoder).

Entry points:
    load_state_dict(path)           -> {key: tensor} (torch.load, CPU)
    load_mano_npz(path)             -> {name: tensor}
    run_reference(sd, crops, ...)   -> dict of float64 numpy arrays named
                                       as the CLI's output .npz
"""

import math
import pickle
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F

IMAGE_MEAN = (0.485, 0.456, 0.406)
IMAGE_STD = (0.229, 0.224, 0.225)
CROP_H, CROP_W = 256, 192
FOCAL_LENGTH = 5000.0       # pixels, for a 256-pixel crop
IMAGE_SIZE = 256
VIT_HEAD_DIM = 80
DEC_HEAD_DIM = 64
VIT_LN_EPS = 1e-6
DEC_LN_EPS = 1e-5
PATCH_PADDING = 2
FINGERTIP_VERTICES = (744, 320, 443, 554, 671)   # thumb, index, middle, ring, pinky
MANO_TO_OPENPOSE = (0, 13, 14, 15, 16, 1, 2, 3, 17, 4, 5, 6, 18, 10, 11, 12, 19, 7, 8, 9, 20)
MANO_KEYS = ("v_template", "shapedirs", "posedirs", "J_regressor", "parents",
             "lbs_weights", "faces_tensor")
OUTPUT_NAMES = ("params", "pred_cam", "pred_cam_t", "vertices", "keypoints_3d", "keypoints_2d")

DTYPE = torch.float64

# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


class _Opaque:
    """Placeholder for classes of the checkpoint's pickle that cannot be
    imported here (omegaconf's, in the release): NEWOBJ and BUILD work on
    it, nothing else is needed since only the state dict is used."""

    def __setstate__(self, state):
        if isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self.__dict__["_state"] = state


class _TolerantUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        try:
            return super().find_class(module, name)
        except (ImportError, AttributeError):
            return type(name, (_Opaque,), {"__module__": module})


# A stand-in for the pickle module whose Unpickler tolerates unknown classes.
_tolerant_pickle = types.ModuleType("pickle")
_tolerant_pickle.__dict__.update({k: v for k, v in vars(pickle).items() if not k.startswith("__")})
_tolerant_pickle.Unpickler = _TolerantUnpickler


def load_state_dict(path):
    """The checkpoint's state dict, loaded on the CPU whatever the storages'
    location tags say (the release was saved from cuda:0)."""
    # torch.load(pickle_module=...) would be the way to pass the tolerant
    # unpickler, but Debian's torch 1.13 resets pickle_module to pickle
    # unless weights_only is set; swap the module torch.serialization uses
    # for the duration of the call instead.
    ser = torch.serialization
    saved = ser.pickle
    ser.pickle = _tolerant_pickle
    try:
        ckpt = torch.load(path, map_location="cpu", pickle_module=_tolerant_pickle)
    finally:
        ser.pickle = saved
    return ckpt["state_dict"] if "state_dict" in ckpt else ckpt


def load_mano_npz(path):
    """MANO buffers from a separate .npz (array names without 'mano.')."""
    with np.load(path) as z:
        return {k: torch.from_numpy(np.array(z[k])) for k in MANO_KEYS}


def mano_from_state_dict(sd):
    """The mano.* buffers of a state dict, or None when it has none."""
    if "mano.v_template" not in sd:
        return None
    return {k: sd["mano." + k] for k in MANO_KEYS}


# ---------------------------------------------------------------------------
# Numerics
# ---------------------------------------------------------------------------

# The Debian torch build calls the reference (netlib) BLAS, which is single
# threaded and slow for double.  A float64 1x1 convolution takes a faster
# path, and two threads each computing half the output features double the
# throughput; the results are the same float64 products either way.
_POOL = ThreadPoolExecutor(max_workers=2)
_BIG_LINEAR = 1 << 20


def _linear_conv(x2d, w):
    """x2d [N, in] @ w[out, in]^T as a 1x1 float64 convolution."""
    n, k = x2d.shape
    inp = x2d.t().contiguous().view(1, k, n, 1)
    out = F.conv2d(inp, w.reshape(w.shape[0], k, 1, 1))
    return out.view(w.shape[0], n).t()


def linear(x, w, b=None):
    """y = x @ w^T + b in float64 (w, b may be float32: converted here)."""
    w = w.to(DTYPE)
    shape = x.shape
    x2d = x.reshape(-1, shape[-1])
    if w.numel() >= _BIG_LINEAR and x2d.shape[0] >= 64:
        halves = w.chunk(2, dim=0)
        y = torch.cat(list(_POOL.map(lambda wh: _linear_conv(x2d, wh), halves)), dim=1)
    else:
        y = x2d @ w.t()
    if b is not None:
        y = y + b.to(DTYPE)
    return y.reshape(*shape[:-1], w.shape[0])


def layer_norm(x, w, b, eps):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)     # biased, as nn.LayerNorm
    return (x - mu) / torch.sqrt(var + eps) * w.to(DTYPE) + b.to(DTYPE)


def gelu(x):
    """The exact (erf) GELU of nn.GELU()."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def softmax(x):
    x = x - x.max(dim=-1, keepdim=True).values
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)


# ---------------------------------------------------------------------------
# Architecture discovery
# ---------------------------------------------------------------------------

def _count(sd, fmt):
    n = 0
    while fmt.format(n) in sd:
        n += 1
    return n


def vit_depth(sd):
    return _count(sd, "backbone.blocks.{}.norm1.weight")


def head_depth(sd):
    return _count(sd, "mano_head.transformer.transformer.layers.{}.0.norm.weight")


# ---------------------------------------------------------------------------
# Backbone
# ---------------------------------------------------------------------------

def crops_to_tensor(crops):
    """float32 [B,3,256,192] normalised crops, or uint8 [B,256,192,3] RGB
    crops (normalised here as the demo does: (x/255 - mean)/std), to a
    float64 [B,3,256,192] tensor."""
    a = np.asarray(crops)
    if a.dtype == np.uint8:
        if a.ndim != 4 or a.shape[1:] != (CROP_H, CROP_W, 3):
            raise ValueError(f"uint8 crops must be [B,256,192,3], got {a.shape}")
        x = torch.from_numpy(a.astype(np.float64)) / 255.0
        mean = torch.tensor(IMAGE_MEAN, dtype=DTYPE)
        std = torch.tensor(IMAGE_STD, dtype=DTYPE)
        x = (x - mean) / std
        return x.permute(0, 3, 1, 2).contiguous()
    if a.dtype == np.float32:
        if a.ndim != 4 or a.shape[1:] != (3, CROP_H, CROP_W):
            raise ValueError(f"float32 crops must be [B,3,256,192], got {a.shape}")
        return torch.from_numpy(a.astype(np.float64))
    raise ValueError(f"crops must be float32 or uint8, got {a.dtype}")


def vit_backbone(sd, x):
    """ViT-H/16 features of crops x [B,3,256,192] -> [B,192,dim]."""
    p = "backbone."
    w = sd[p + "patch_embed.proj.weight"].to(DTYPE)
    patch = w.shape[-1]
    tok = F.conv2d(x, w, sd[p + "patch_embed.proj.bias"].to(DTYPE),
                   stride=patch, padding=PATCH_PADDING)          # [B,dim,16,12]
    bsz, dim = tok.shape[:2]
    tok = tok.flatten(2).transpose(1, 2)                          # row-major tokens
    pos = sd[p + "pos_embed"].to(DTYPE)
    # The class slot is not a token: it is broadcast onto every position.
    tok = tok + pos[:, 1:] + pos[:, :1]
    heads = dim // VIT_HEAD_DIM
    scale = VIT_HEAD_DIM ** -0.5
    n = tok.shape[1]
    for i in range(vit_depth(sd)):
        b = f"{p}blocks.{i}."
        h = layer_norm(tok, sd[b + "norm1.weight"], sd[b + "norm1.bias"], VIT_LN_EPS)
        qkv = linear(h, sd[b + "attn.qkv.weight"], sd[b + "attn.qkv.bias"])
        qkv = qkv.reshape(bsz, n, 3, heads, VIT_HEAD_DIM).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * scale                                 # scaled before q @ k^T, as the ViT does
        attn = softmax(q @ k.transpose(-2, -1))
        o = (attn @ v).transpose(1, 2).reshape(bsz, n, heads * VIT_HEAD_DIM)
        tok = tok + linear(o, sd[b + "attn.proj.weight"], sd[b + "attn.proj.bias"])
        h = layer_norm(tok, sd[b + "norm2.weight"], sd[b + "norm2.bias"], VIT_LN_EPS)
        h = gelu(linear(h, sd[b + "mlp.fc1.weight"], sd[b + "mlp.fc1.bias"]))
        tok = tok + linear(h, sd[b + "mlp.fc2.weight"], sd[b + "mlp.fc2.bias"])
    return layer_norm(tok, sd[p + "last_norm.weight"], sd[p + "last_norm.bias"], VIT_LN_EPS)


# ---------------------------------------------------------------------------
# MANO transformer-decoder head
# ---------------------------------------------------------------------------

def _split_heads(t, heads):
    """[B, n, heads*d] -> [B, heads, n, d] (einops 'b n (h d) -> b h n d')."""
    bsz, n, inner = t.shape
    return t.reshape(bsz, n, heads, inner // heads).transpose(1, 2)


def _merge_heads(t):
    bsz, heads, n, d = t.shape
    return t.transpose(1, 2).reshape(bsz, n, heads * d)


def _attend(q, k, v, heads):
    """Multi-head attention as the decoder computes it: the scale is applied
    to the logits, after q @ k^T."""
    q, k, v = (_split_heads(t, heads) for t in (q, k, v))
    dots = (q @ k.transpose(-1, -2)) * DEC_HEAD_DIM ** -0.5
    return _merge_heads(softmax(dots) @ v)


def mano_head(sd, context):
    """Decoder head on the backbone context [B,192,1280] -> (pose6d [B,96],
    betas [B,10], cam [B,3])."""
    p = "mano_head."
    t = p + "transformer."
    bsz = context.shape[0]
    # The input token is a constant zero of width 1.
    token_in = torch.zeros(bsz, 1, 1, dtype=DTYPE)
    x = linear(token_in, sd[t + "to_token_embedding.weight"], sd[t + "to_token_embedding.bias"])
    x = x + sd[t + "pos_embedding"].to(DTYPE)[:, :1]
    for j in range(head_depth(sd)):
        lp = f"{t}transformer.layers.{j}."
        # Self-attention over the single token (full softmax, not shortcut).
        h = layer_norm(x, sd[lp + "0.norm.weight"], sd[lp + "0.norm.bias"], DEC_LN_EPS)
        w_qkv = sd[lp + "0.fn.to_qkv.weight"]
        heads = w_qkv.shape[0] // 3 // DEC_HEAD_DIM
        q, k, v = linear(h, w_qkv).chunk(3, dim=-1)
        x = x + linear(_attend(q, k, v, heads),
                       sd[lp + "0.fn.to_out.0.weight"], sd[lp + "0.fn.to_out.0.bias"])
        # Cross-attention to the (un-normalised) backbone context.
        h = layer_norm(x, sd[lp + "1.norm.weight"], sd[lp + "1.norm.bias"], DEC_LN_EPS)
        k, v = linear(context, sd[lp + "1.fn.to_kv.weight"]).chunk(2, dim=-1)
        q = linear(h, sd[lp + "1.fn.to_q.weight"])
        heads = q.shape[-1] // DEC_HEAD_DIM
        x = x + linear(_attend(q, k, v, heads),
                       sd[lp + "1.fn.to_out.0.weight"], sd[lp + "1.fn.to_out.0.bias"])
        # Feed-forward.
        h = layer_norm(x, sd[lp + "2.norm.weight"], sd[lp + "2.norm.bias"], DEC_LN_EPS)
        h = gelu(linear(h, sd[lp + "2.fn.net.0.weight"], sd[lp + "2.fn.net.0.bias"]))
        x = x + linear(h, sd[lp + "2.fn.net.3.weight"], sd[lp + "2.fn.net.3.bias"])
    x = x[:, 0]                                       # no final norm
    pose = linear(x, sd[p + "decpose.weight"], sd[p + "decpose.bias"]) + sd[p + "init_hand_pose"].to(DTYPE)
    betas = linear(x, sd[p + "decshape.weight"], sd[p + "decshape.bias"]) + sd[p + "init_betas"].to(DTYPE)
    cam = linear(x, sd[p + "deccam.weight"], sd[p + "deccam.bias"]) + sd[p + "init_cam"].to(DTYPE)
    return pose, betas, cam


def rot6d_to_rotmat(x):
    """[..., 6] -> [..., 3, 3]: Gram-Schmidt on a1 = x[0:3], a2 = x[3:6];
    the results b1, b2, b1 x b2 are the COLUMNS of R."""
    a1, a2 = x[..., 0:3], x[..., 3:6]

    def normalize(v):
        return v / torch.clamp(torch.linalg.norm(v, dim=-1, keepdim=True), min=1e-12)

    b1 = normalize(a1)
    b2 = normalize(a2 - (b1 * a2).sum(-1, keepdim=True) * b1)
    b3 = torch.cross(b1, b2, dim=-1)
    return torch.stack((b1, b2, b3), dim=-1)


# ---------------------------------------------------------------------------
# MANO layer (smplx lbs with pose2rot=False, zero translation)
# ---------------------------------------------------------------------------

def mano_lbs(mano, rotmats, betas):
    """rotmats [B,16,3,3] (global orient first), betas [B,10] ->
    (vertices [B,778,3], posed joints [B,16,3]), metres, no translation."""
    v_template = mano["v_template"].to(DTYPE)
    shapedirs = mano["shapedirs"].to(DTYPE)
    posedirs = mano["posedirs"].to(DTYPE)
    j_regressor = mano["J_regressor"].to(DTYPE)
    weights = mano["lbs_weights"].to(DTYPE)
    parents = [int(p) for p in mano["parents"]]
    bsz, n_j = rotmats.shape[:2]
    n_v = v_template.shape[0]

    v_shaped = v_template + torch.einsum("bl,mkl->bmk", betas, shapedirs)
    joints = torch.einsum("jv,bvk->bjk", j_regressor, v_shaped)

    eye = torch.eye(3, dtype=DTYPE)
    pose_feature = (rotmats[:, 1:] - eye).reshape(bsz, -1)
    v_posed = v_shaped + (pose_feature @ posedirs).reshape(bsz, n_v, 3)

    # Kinematic chain, joint by joint: G_i = G_parent . [R_i | J_i - J_parent].
    chain = []
    for i in range(n_j):
        local = torch.zeros(bsz, 4, 4, dtype=DTYPE)
        local[:, :3, :3] = rotmats[:, i]
        local[:, 3, 3] = 1.0
        if parents[i] < 0:
            local[:, :3, 3] = joints[:, i]
            chain.append(local)
        else:
            assert parents[i] < i, "MANO parents must precede their children"
            local[:, :3, 3] = joints[:, i] - joints[:, parents[i]]
            chain.append(chain[parents[i]] @ local)
    g = torch.stack(chain, dim=1)                                 # [B,16,4,4]
    posed_joints = g[:, :, :3, 3]
    # Remove the rest-pose joint location: A_i = G_i - [0 | G_i . (J_i, 0)].
    a = g.clone()
    a[:, :, :3, 3] -= (g[:, :, :3, :3] @ joints.unsqueeze(-1)).squeeze(-1)

    t = torch.einsum("vj,bjxy->bvxy", weights, a)                 # [B,778,4,4]
    verts = (t[:, :, :3, :3] @ v_posed.unsqueeze(-1)).squeeze(-1) + t[:, :, :3, 3]
    return verts, posed_joints


def openpose_keypoints(verts, joints):
    """16 joints + 5 fingertip vertices, reordered to OpenPose's 21."""
    tips = verts[:, list(FINGERTIP_VERTICES)]
    return torch.cat([joints, tips], dim=1)[:, list(MANO_TO_OPENPOSE)]


def camera_translation(cam):
    """pred_cam (s, tx, ty) -> pred_cam_t (tx, ty, 2 f / (256 s + 1e-9))."""
    tz = 2.0 * FOCAL_LENGTH / (IMAGE_SIZE * cam[:, 0] + 1e-9)
    return torch.stack([cam[:, 1], cam[:, 2], tz], dim=-1)


def project(points, cam_t):
    """Perspective projection in normalised crop units: focal 5000/256,
    principal point 0 (pixels = 256 * k + 128)."""
    p = points + cam_t[:, None]
    return (FOCAL_LENGTH / IMAGE_SIZE) * p[..., :2] / p[..., 2:3]


def params_vector(rotmats, betas, cam):
    """The project's 157-float vector: 16 row-major rotations, betas, cam."""
    bsz = rotmats.shape[0]
    return torch.cat([rotmats.reshape(bsz, -1), betas, cam], dim=1)


# ---------------------------------------------------------------------------
# Full forward
# ---------------------------------------------------------------------------

def run_reference(sd, crops, mano=None, params_only=False, debug=None):
    """HaMeR on crops (see crops_to_tensor) with state dict ``sd``.

    mano: MANO buffers (load_mano_npz); by default the checkpoint's own.
    Returns float64 numpy arrays named as the CLI's output .npz; without
    MANO (or with params_only) only params, pred_cam and pred_cam_t.
    debug: a dict that receives intermediate tensors (context, pose6d).
    """
    x = crops_to_tensor(crops)
    if mano is None:
        mano = mano_from_state_dict(sd)
    with torch.no_grad():
        context = vit_backbone(sd, x)
        pose6d, betas, cam = mano_head(sd, context)
        rotmats = rot6d_to_rotmat(pose6d.reshape(x.shape[0], -1, 6))
        if debug is not None:
            debug.update(context=context, pose6d=pose6d)
        cam_t = camera_translation(cam)
        out = {
            "params": params_vector(rotmats, betas, cam),
            "pred_cam": cam,
            "pred_cam_t": cam_t,
        }
        if mano is not None and not params_only:
            verts, joints = mano_lbs(mano, rotmats, betas)
            kp3d = openpose_keypoints(verts, joints)
            out["vertices"] = verts
            out["keypoints_3d"] = kp3d
            out["keypoints_2d"] = project(kp3d, cam_t)
    return {k: v.numpy() for k, v in out.items()}


def main(argv=None):
    """Command line: run the reference and write an .npz like the CLI's."""
    import argparse
    ap = argparse.ArgumentParser(description="float64 HaMeR reference")
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--mano")
    ap.add_argument("--params-only", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    sd = load_state_dict(args.model)
    mano = load_mano_npz(args.mano) if args.mano else None
    out = run_reference(sd, np.load(args.input), mano=mano, params_only=args.params_only)
    np.savez(args.output, **out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
