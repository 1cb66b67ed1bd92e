"""``hamer regress`` against the independent float64 reference.

Tolerances (the C code computes in float32):
  params           max |c - r| <= 1e-4 and Pearson r >= 0.99999
  pred_cam         max |c - r| <= 1e-4
  pred_cam_t       |c - r| <= 1e-4 * max(1, |r|) per element (x, y absolute;
                   z = 2*5000/(256 s) ~ 45, relative)
  vertices         max |c - r| <= 1e-4 m
  keypoints_3d     max |c - r| <= 1e-4 m
  keypoints_2d     max |c - r| <= 1e-4 * max |r| (normalised crop units)

The first group of tests checks the reference itself and needs no binary.
"""

import subprocess
import sys
import types
import zipfile

import numpy as np
import pytest
import torch

import hamer_fixture
import hamer_reference as ref
from conftest import (FULL_SIZE_CROPS, FULL_SIZE_SKIP_REASON, SANITIZE, checkpoint_path, describe, float_crops,
                      full_size_outputs, reference_outputs, run_hamer, uint8_crops)

ALL_OUTPUTS = ("params", "pred_cam", "pred_cam_t", "vertices", "keypoints_3d", "keypoints_2d")
PARAM_OUTPUTS = ("params", "pred_cam", "pred_cam_t")
SHAPES = {"params": (157,), "pred_cam": (3,), "pred_cam_t": (3,), "vertices": (778, 3),
          "keypoints_3d": (21, 3), "keypoints_2d": (21, 2)}
TOL = 1e-4
MIN_PEARSON = 0.99999


# ---------------------------------------------------------------------------
# Comparison helpers
# ---------------------------------------------------------------------------

def _where(err):
    idx = np.unravel_index(int(np.argmax(err)), err.shape)
    return tuple(int(i) for i in idx)


def _check(name, c, r, bound):
    """Assert |c - r| <= bound (broadcast), reporting the worst element."""
    c = np.asarray(c, np.float64)
    err = np.abs(c - r)
    excess = err - bound
    if not np.all(np.isfinite(c)) or np.any(excess > 0):
        i = _where(np.where(np.isfinite(excess), excess, np.inf))
        b = np.broadcast_to(bound, err.shape)[i]
        pytest.fail(f"{name}: max |C - reference| = {err.max():.3g} (bound {b:.3g} at {i}: "
                    f"C {c[i]!r}, reference {r[i]!r}); {int(np.sum(excess > 0))} of {err.size} "
                    f"elements out of tolerance")


def check_format(out, batch, names=ALL_OUTPUTS):
    for k in names:
        assert k in out, f"output lacks {k!r} (has {sorted(out)})"
        assert out[k].dtype == np.float32, f"{k} is {out[k].dtype}, expected float32"
        assert out[k].shape == (batch,) + SHAPES[k], f"{k} has shape {out[k].shape}"
        assert np.all(np.isfinite(out[k])), f"{k} has non-finite values"


def compare(out, r, names=ALL_OUTPUTS):
    """Compare CLI outputs with reference outputs (see the module doc)."""
    batch = r["params"].shape[0]
    check_format(out, batch, names)
    _check("params", out["params"], r["params"], TOL)
    corr = np.corrcoef(out["params"].astype(np.float64).ravel(), r["params"].ravel())[0, 1]
    assert corr >= MIN_PEARSON, f"params: Pearson correlation {corr:.8f} < {MIN_PEARSON}"
    _check("pred_cam", out["pred_cam"], r["pred_cam"], TOL)
    _check("pred_cam_t", out["pred_cam_t"], r["pred_cam_t"], TOL * np.maximum(1.0, np.abs(r["pred_cam_t"])))
    if "vertices" in names:
        _check("vertices", out["vertices"], r["vertices"], TOL)
        _check("keypoints_3d", out["keypoints_3d"], r["keypoints_3d"], TOL)
        _check("keypoints_2d", out["keypoints_2d"], r["keypoints_2d"], TOL * np.abs(r["keypoints_2d"]).max())


def check_self_consistent(out):
    """Relations that hold within the CLI's own outputs."""
    p = out["params"].astype(np.float64)
    rot = p[:, :144].reshape(-1, 16, 3, 3)
    orth = np.abs(rot @ rot.transpose(0, 1, 3, 2) - np.eye(3)).max()
    assert orth < 1e-5, f"params rotations not orthonormal (max |R R^T - I| = {orth:.3g})"
    assert np.all(np.linalg.det(rot) > 0.999), "params rotations have det != +1"
    assert np.array_equal(out["pred_cam"], out["params"][:, 154:157]), "pred_cam != params[:, 154:157]"
    cam = out["pred_cam"].astype(np.float64)
    _check("pred_cam_t[:, :2] vs pred_cam[:, 1:]", out["pred_cam_t"][:, :2], cam[:, 1:], 0.0)
    tz = 2 * 5000.0 / (256 * cam[:, 0] + 1e-9)
    _check("pred_cam_t[:, 2] vs 2*5000/(256*s)", out["pred_cam_t"][:, 2], tz, 1e-6 * tz)


# ---------------------------------------------------------------------------
# The reference on its own (no binary needed)
# ---------------------------------------------------------------------------

@pytest.mark.no_binary
def test_rot6d_orthonormal_and_column_convention():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, 6, generator=g, dtype=torch.float64)
    x[:500] *= 100.0          # scale must not matter
    x[500:] *= 1e-3
    r = ref.rot6d_to_rotmat(x)
    eye = torch.eye(3, dtype=torch.float64)
    assert (r @ r.transpose(-1, -2) - eye).abs().max() < 1e-12
    assert (torch.linalg.det(r) - 1).abs().max() < 1e-12
    # b1 = a1/|a1| is the first COLUMN; the second column lies in span(a1, a2).
    a1 = x[:, :3] / x[:, :3].norm(dim=1, keepdim=True)
    assert (r[:, :, 0] - a1).abs().max() < 1e-12
    n = torch.cross(x[:, :3], x[:, 3:], dim=1)
    assert ((r[:, :, 1] * n).sum(1) / n.norm(dim=1)).abs().max() < 1e-10
    ident = ref.rot6d_to_rotmat(torch.tensor([1.0, 0, 0, 0, 1, 0], dtype=torch.float64))
    assert torch.equal(ident, eye)



def _small_model(vit_dim=160, vit_mlp=640, vit_depth=2, dec_dim=128, dec_mlp=96, dec_depth=2, seed=5):
    """A random state dict of HaMeR's layout at reduced widths (2 heads of
    80 in the ViT, 2 heads of 64 in the decoder, whose inner width equals
    its model width here so torch's MultiheadAttention can express it)."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, std=0.05, mean=0.0):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * std + mean

    sd = {"backbone.pos_embed": rnd(1, 193, vit_dim, std=0.02),
          "backbone.patch_embed.proj.weight": rnd(vit_dim, 3, 16, 16, std=0.02),
          "backbone.patch_embed.proj.bias": rnd(vit_dim)}

    def ln(prefix, dim):
        sd[prefix + ".weight"] = rnd(dim, std=0.1, mean=1.0)
        sd[prefix + ".bias"] = rnd(dim)

    def lin(prefix, o, i, bias=True):
        sd[prefix + ".weight"] = rnd(o, i, std=i ** -0.5)
        if bias:
            sd[prefix + ".bias"] = rnd(o)

    for i in range(vit_depth):
        b = f"backbone.blocks.{i}."
        ln(b + "norm1", vit_dim)
        lin(b + "attn.qkv", 3 * vit_dim, vit_dim)
        lin(b + "attn.proj", vit_dim, vit_dim)
        ln(b + "norm2", vit_dim)
        lin(b + "mlp.fc1", vit_mlp, vit_dim)
        lin(b + "mlp.fc2", vit_dim, vit_mlp)
    ln("backbone.last_norm", vit_dim)
    t = "mano_head.transformer."
    sd[t + "pos_embedding"] = rnd(1, 1, dec_dim, std=0.5)
    lin(t + "to_token_embedding", dec_dim, 1)
    for j in range(dec_depth):
        p = f"{t}transformer.layers.{j}."
        ln(p + "0.norm", dec_dim)
        lin(p + "0.fn.to_qkv", 3 * dec_dim, dec_dim, bias=False)
        lin(p + "0.fn.to_out.0", dec_dim, dec_dim)
        ln(p + "1.norm", dec_dim)
        lin(p + "1.fn.to_kv", 2 * dec_dim, vit_dim, bias=False)
        lin(p + "1.fn.to_q", dec_dim, dec_dim, bias=False)
        lin(p + "1.fn.to_out.0", dec_dim, dec_dim)
        ln(p + "2.norm", dec_dim)
        lin(p + "2.fn.net.0", dec_mlp, dec_dim)
        lin(p + "2.fn.net.3", dec_dim, dec_mlp)
    for name, n in (("decpose", 96), ("decshape", 10), ("deccam", 3)):
        lin("mano_head." + name, n, dec_dim)
    sd["mano_head.init_hand_pose"] = rnd(1, 96)
    sd["mano_head.init_betas"] = rnd(1, 10)
    sd["mano_head.init_cam"] = rnd(1, 3)
    return sd


@pytest.mark.no_binary
def test_reference_matches_torch_modules():
    """Cross-check the hand-written reference against torch's own modules
    (nn.TransformerEncoderLayer for the pre-norm ViT block,
    nn.MultiheadAttention for the decoder's attentions), at reduced widths."""
    nn = torch.nn
    sd = _small_model()
    vit_dim, dec_dim = 160, 128
    x = torch.randn(2, 3, 256, 192, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    with torch.no_grad():
        context = ref.vit_backbone(sd, x)
        pose, betas, cam = ref.mano_head(sd, context)

        tok = torch.nn.functional.conv2d(x, sd["backbone.patch_embed.proj.weight"],
                                         sd["backbone.patch_embed.proj.bias"], stride=16, padding=2)
        tok = tok.flatten(2).transpose(1, 2) + sd["backbone.pos_embed"][:, 1:] + sd["backbone.pos_embed"][:, :1]
        for i in range(2):
            b = f"backbone.blocks.{i}."
            layer = nn.TransformerEncoderLayer(vit_dim, 2, 640, dropout=0.0, activation="gelu",
                                               layer_norm_eps=1e-6, batch_first=True,
                                               norm_first=True).double().eval()
            layer.self_attn.in_proj_weight.copy_(sd[b + "attn.qkv.weight"])
            layer.self_attn.in_proj_bias.copy_(sd[b + "attn.qkv.bias"])
            layer.self_attn.out_proj.weight.copy_(sd[b + "attn.proj.weight"])
            layer.self_attn.out_proj.bias.copy_(sd[b + "attn.proj.bias"])
            for mine, theirs in (("mlp.fc1", layer.linear1), ("mlp.fc2", layer.linear2),
                                 ("norm1", layer.norm1), ("norm2", layer.norm2)):
                theirs.weight.copy_(sd[b + mine + ".weight"])
                theirs.bias.copy_(sd[b + mine + ".bias"])
            tok = layer(tok)
        ctx = torch.nn.functional.layer_norm(tok, (vit_dim,), sd["backbone.last_norm.weight"],
                                             sd["backbone.last_norm.bias"], eps=1e-6)
        assert (ctx - context).abs().max() < 1e-10

        t = "mano_head.transformer."
        h = sd[t + "to_token_embedding.bias"].reshape(1, 1, -1).repeat(2, 1, 1) + sd[t + "pos_embedding"]
        for j in range(2):
            p = f"{t}transformer.layers.{j}."

            def norm(v, k):
                return torch.nn.functional.layer_norm(v, (dec_dim,), sd[p + k + ".norm.weight"],
                                                      sd[p + k + ".norm.bias"], eps=1e-5)

            sa = nn.MultiheadAttention(dec_dim, 2, batch_first=True).double().eval()
            sa.in_proj_weight.copy_(sd[p + "0.fn.to_qkv.weight"])
            sa.in_proj_bias.zero_()
            sa.out_proj.weight.copy_(sd[p + "0.fn.to_out.0.weight"])
            sa.out_proj.bias.copy_(sd[p + "0.fn.to_out.0.bias"])
            y = norm(h, "0")
            h = h + sa(y, y, y, need_weights=False)[0]
            ca = nn.MultiheadAttention(dec_dim, 2, kdim=vit_dim, vdim=vit_dim, batch_first=True).double().eval()
            ca.q_proj_weight.copy_(sd[p + "1.fn.to_q.weight"])
            ca.k_proj_weight.copy_(sd[p + "1.fn.to_kv.weight"][:dec_dim])
            ca.v_proj_weight.copy_(sd[p + "1.fn.to_kv.weight"][dec_dim:])
            ca.in_proj_bias.zero_()
            ca.out_proj.weight.copy_(sd[p + "1.fn.to_out.0.weight"])
            ca.out_proj.bias.copy_(sd[p + "1.fn.to_out.0.bias"])
            h = h + ca(norm(h, "1"), ctx, ctx, need_weights=False)[0]
            ff = torch.nn.functional.linear(norm(h, "2"), sd[p + "2.fn.net.0.weight"], sd[p + "2.fn.net.0.bias"])
            h = h + torch.nn.functional.linear(torch.nn.functional.gelu(ff), sd[p + "2.fn.net.3.weight"],
                                               sd[p + "2.fn.net.3.bias"])
        h = h[:, 0]
        for name, got in (("decpose", pose), ("decshape", betas), ("deccam", cam)):
            init = {"decpose": "init_hand_pose", "decshape": "init_betas", "deccam": "init_cam"}[name]
            want = torch.nn.functional.linear(h, sd[f"mano_head.{name}.weight"], sd[f"mano_head.{name}.bias"])
            assert (got - want - sd["mano_head." + init]).abs().max() < 1e-10, name

@pytest.fixture(scope="module")
def mano_buffers():
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in hamer_fixture.mano_buffers(0).items()}


@pytest.mark.no_binary
def test_fixture_mano_buffers_plausible(mano_buffers):
    m = {k: v.numpy() for k, v in mano_buffers.items()}
    extent = m["v_template"].max(0) - m["v_template"].min(0)
    assert 0.05 < extent.max() < 0.25, extent
    assert np.allclose(m["J_regressor"].sum(1), 1, atol=1e-6) and (m["J_regressor"] >= 0).all()
    assert np.allclose(m["lbs_weights"].sum(1), 1, atol=1e-6) and (m["lbs_weights"] >= 0).all()
    assert m["parents"].dtype == np.int64 and list(m["parents"]) == hamer_fixture.MANO_PARENTS
    f = m["faces_tensor"]
    assert f.dtype == np.int64 and f.shape == (1538, 3) and f.min() >= 0 and f.max() < 778
    assert (f[:, 0] != f[:, 1]).all() and (f[:, 1] != f[:, 2]).all() and (f[:, 0] != f[:, 2]).all()
    assert m["posedirs"].shape == (135, 2334) and m["shapedirs"].shape == (778, 3, 10)


@pytest.mark.no_binary
def test_mano_rest_pose_returns_template(mano_buffers):
    """Identity rotations and zero betas: smplx's lbs returns v_template
    itself (A_i = [I | 0]); nothing is shifted to the root.  (Exactly:
    v_template times the row sums of the float32 skinning weights, which
    are 1 only to float32 precision.)"""
    rot = torch.eye(3, dtype=torch.float64).expand(2, 16, 3, 3)
    verts, joints = ref.mano_lbs(mano_buffers, rot, torch.zeros(2, 10, dtype=torch.float64))
    wsum = mano_buffers["lbs_weights"].double().sum(1, keepdim=True)
    vt = mano_buffers["v_template"].double()
    assert (verts - vt * wsum).abs().max() < 1e-15
    assert (verts - vt).abs().max() < 1e-8
    assert (joints - mano_buffers["J_regressor"].double() @ vt).abs().max() < 1e-12


@pytest.mark.no_binary
def test_mano_global_rotation_is_rigid_about_root(mano_buffers):
    """Only global_orient = R: no pose blend shapes (R[1:] - I = 0) and every
    vertex turns rigidly about the root joint: v = R (v_shaped - J0) + J0."""
    g = torch.Generator().manual_seed(1)
    r0 = ref.rot6d_to_rotmat(torch.randn(3, 6, generator=g, dtype=torch.float64))
    rot = torch.eye(3, dtype=torch.float64).repeat(3, 16, 1, 1)
    rot[:, 0] = r0
    betas = torch.randn(3, 10, generator=g, dtype=torch.float64)
    verts, joints = ref.mano_lbs(mano_buffers, rot, betas)
    m = {k: v.double() for k, v in mano_buffers.items() if v.is_floating_point()}
    v_shaped = m["v_template"] + torch.einsum("bl,mkl->bmk", betas, m["shapedirs"])
    j = torch.einsum("jv,bvk->bjk", m["J_regressor"], v_shaped)
    want = torch.einsum("bij,bvj->bvi", r0, v_shaped - j[:, :1]) + j[:, :1]
    want = want * m["lbs_weights"].sum(1, keepdim=True)      # row sums are 1 to float32 precision
    assert (verts - want).abs().max() < 1e-15
    want_j = torch.einsum("bij,bvj->bvi", r0, j - j[:, :1]) + j[:, :1]
    assert (joints - want_j).abs().max() < 1e-12


@pytest.mark.no_binary
def test_mano_child_joint_rotation_moves_only_its_chain(mano_buffers):
    """Rotating one finger joint (index joint 2) leaves the posed joints of
    other fingers in place and moves its descendant (joint 3)."""
    g = torch.Generator().manual_seed(2)
    rot = torch.eye(3, dtype=torch.float64).repeat(1, 16, 1, 1)
    rot[0, 2] = ref.rot6d_to_rotmat(torch.randn(6, generator=g, dtype=torch.float64))
    _, joints = ref.mano_lbs(mano_buffers, rot, torch.zeros(1, 10, dtype=torch.float64))
    _, rest = ref.mano_lbs(mano_buffers, torch.eye(3, dtype=torch.float64).repeat(1, 16, 1, 1),
                           torch.zeros(1, 10, dtype=torch.float64))
    moved = (joints - rest).norm(dim=-1)[0]
    assert moved[3] > 1e-3
    assert moved[[0, 1, 2] + list(range(4, 16))].max() < 1e-12


@pytest.mark.no_binary
def test_openpose_order():
    verts = torch.arange(778 * 3, dtype=torch.float64).reshape(1, 778, 3)
    joints = -torch.arange(16 * 3, dtype=torch.float64).reshape(1, 16, 3) - 1
    kp = ref.openpose_keypoints(verts, joints)[0]
    assert torch.equal(kp[0], joints[0, 0])             # wrist
    assert torch.equal(kp[4], verts[0, 744])            # thumb tip
    assert torch.equal(kp[1], joints[0, 13])            # thumb base
    assert torch.equal(kp[8], verts[0, 320])            # index tip
    assert torch.equal(kp[20], verts[0, 671])           # pinky tip
    assert torch.equal(kp[17], joints[0, 7])            # pinky base


@pytest.mark.no_binary
def test_checkpoint_layout():
    """The fixtures are laid out as the release: prefix 'archive', a
    byteorder record, 563 keys at 32/6 (counted without generating), an
    unimportable hyper-parameter class; the cuda variant is tagged cuda:0
    under another prefix."""
    with zipfile.ZipFile(checkpoint_path("d2h2")) as z:
        names = z.namelist()
        assert names[0] == "archive/data.pkl"
        assert "archive/byteorder" in names and "archive/version" in names
        assert b"hamer_fixture" in z.read("archive/data.pkl")
    with zipfile.ZipFile(checkpoint_path("d2h2_cuda")) as z:
        names = z.namelist()
        prefix = names[0].split("/")[0]
        assert prefix != "archive" and names[0].endswith("/data.pkl")
        pkl = z.read(prefix + "/data.pkl")
        assert b"cuda:0" in pkl and b"\x8c\x03cpu" not in pkl and b"X\x03\x00\x00\x00cpu" not in pkl
    sd = hamer_fixture.build_state_dict(1, 1, 0)
    assert len(sd) + 31 * 12 + 5 * 17 == 563


@pytest.mark.no_binary
def test_tolerant_loader_handles_unknown_classes(tmp_path):
    """The reference loads checkpoints whose hyper-parameter classes cannot
    be imported (omegaconf's, in the release)."""
    mod = types.ModuleType("hamer_vanished_module")

    class Config:
        pass

    Config.__module__ = mod.__name__
    Config.__qualname__ = "Config"
    mod.Config = Config
    sys.modules[mod.__name__] = mod
    try:
        cfg = Config()
        cfg.depth = 6
        torch.save({"state_dict": {"w": torch.ones(2)}, "hyper_parameters": cfg}, tmp_path / "x.ckpt")
    finally:
        del sys.modules[mod.__name__]
    sd = ref.load_state_dict(str(tmp_path / "x.ckpt"))
    assert torch.equal(sd["w"], torch.ones(2))


@pytest.mark.no_binary
def test_reference_batch_consistent_and_plausible():
    crops = float_crops(3)
    r3 = reference_outputs("d2h2", crops)
    debug = {}
    r1 = ref.run_reference(ref.load_state_dict(str(checkpoint_path("d2h2"))), crops[:1], debug=debug)
    for k in ALL_OUTPUTS:
        assert r3[k].shape[0] == 3
        assert np.all(np.isfinite(r3[k])), k
        assert np.abs(r3[k][:1] - r1[k]).max() <= 1e-9 * max(1.0, np.abs(r1[k]).max()), k
    # Crops give distinguishable outputs (row mix-ups would be caught).
    assert np.abs(r3["params"][0] - r3["params"][1]).max() > 100 * TOL
    # The camera stays near init_cam: tz ~ 2*5000/(256*0.9) = 43.4.
    s = r3["pred_cam"][:, 0]
    assert np.all((s > 0.7) & (s < 1.1)), s
    assert np.all(np.abs(r3["pred_cam_t"][:, 2] - 43.4) < 10), r3["pred_cam_t"]
    assert np.abs(r3["keypoints_2d"]).max() < 0.5
    assert np.ptp(r3["vertices"], axis=1).max() < 0.3
    # The 6D pose is well conditioned (Gram-Schmidt far from degenerate), so
    # float32 rounding cannot be amplified.
    p6 = debug["pose6d"].reshape(-1, 16, 6)
    a1, a2 = p6[..., :3], p6[..., 3:]
    b1 = a1 / a1.norm(dim=-1, keepdim=True)
    perp = (a2 - (b1 * a2).sum(-1, keepdim=True) * b1).norm(dim=-1)
    assert a1.norm(dim=-1).min() > 0.3 and perp.min() > 0.3


@pytest.mark.no_binary
def test_fixture_generator_cli(tmp_path):
    """The generator's command line writes a loadable checkpoint and MANO
    file (cheap: depth 1/1)."""
    out, mano = tmp_path / "g.ckpt", tmp_path / "g.npz"
    proc = subprocess.run([sys.executable, hamer_fixture.__file__, "--depth", "1", "--head-depth", "1",
                           "--seed", "3", "--out", str(out), "--no-mano", "--mano-npz", str(mano),
                           "--cuda-tag"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    sd = ref.load_state_dict(str(out))
    assert "mano.v_template" not in sd and ref.vit_depth(sd) == 1 and ref.head_depth(sd) == 1
    hparams = torch.load(str(out), map_location="cpu")["hyper_parameters"]
    assert type(hparams).__module__ == "hamer_fixture"
    with np.load(mano) as z:
        assert sorted(z.files) == sorted(hamer_fixture.MANO_NPZ_KEYS)


# ---------------------------------------------------------------------------
# hamer regress vs the reference (2 ViT blocks, 2 decoder layers)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("batch", [1, 3])
def test_regress_float(regress, batch):
    crops = float_crops(3)
    r = {k: v[:batch] for k, v in reference_outputs("d2h2", crops).items()}
    out = regress(checkpoint_path("d2h2"), crops[:batch])
    compare(out, r)
    check_self_consistent(out)


@pytest.mark.parametrize("batch", [1, 3])
def test_regress_uint8(regress, batch):
    crops = uint8_crops(3)
    r = {k: v[:batch] for k, v in reference_outputs("d2h2", crops).items()}
    out = regress(checkpoint_path("d2h2"), crops[:batch])
    compare(out, r)
    check_self_consistent(out)


def test_uint8_matches_float_input(regress):
    """uint8 crops and the same crops normalised in float32 agree (the
    uint8 path folds the normalisation into the patch embedding; the zero
    padding must still be a normalised zero)."""
    u8 = uint8_crops(3)
    mean = np.array(ref.IMAGE_MEAN, np.float32)
    std = np.array(ref.IMAGE_STD, np.float32)
    f32 = ((u8.astype(np.float32) / 255.0 - mean) / std).transpose(0, 3, 1, 2).copy()
    a = regress(checkpoint_path("d2h2"), u8)
    b = regress(checkpoint_path("d2h2"), f32)
    r = {k: v.astype(np.float64) for k, v in b.items()}
    compare(a, r)


def test_threads_give_identical_outputs(regress):
    crops = float_crops(3)
    one = regress(checkpoint_path("d2h2"), crops, "--threads", "1")
    two = regress(checkpoint_path("d2h2"), crops, "--threads", "2")
    for k in ALL_OUTPUTS:
        assert np.array_equal(one[k], two[k]), \
            f"{k}: --threads 1 and 2 differ by up to {np.abs(one[k] - two[k]).max():.3g}"


@pytest.mark.parametrize("precision", ["fp32", "fast"])
def test_batch_rows_bit_identical(regress, precision):
    """A crop's outputs are the same bits alone or in a batch (the rows of
    every GEMM, norm and attention are computed independently); the
    full-size tests compare a one-crop run with a row of a batch on this."""
    crops = float_crops(4)
    batch = regress(checkpoint_path("d2h2"), crops, "--precision", precision)
    for i in (0, 3):
        one = regress(checkpoint_path("d2h2"), crops[i:i + 1], "--precision", precision)
        for k in ALL_OUTPUTS:
            assert np.array_equal(one[k], batch[k][i:i + 1]), \
                f"{precision} {k}: crop {i} alone and in a batch of 4 differ by {np.abs(one[k] - batch[k][i:i + 1]).max():.3g}"


def test_separate_mano_file_matches_embedded(regress, mano_npz):
    crops = float_crops(3)
    embedded = regress(checkpoint_path("d2h2"), crops)
    separate = regress(checkpoint_path("d2h2_nomano"), crops, "--mano", mano_npz)
    check_format(separate, 3)
    for k in ALL_OUTPUTS:
        assert np.array_equal(embedded[k], separate[k]), \
            f"{k}: --mano file and embedded buffers differ by up to " \
            f"{np.abs(embedded[k] - separate[k]).max():.3g}"


def test_missing_mano_is_an_error(hamer_bin, tmp_path):
    inp, out = tmp_path / "crops.npy", tmp_path / "out.npz"
    np.save(inp, float_crops(1))
    proc = run_hamer(["regress", "--model", checkpoint_path("d2h2_nomano"), "--input", inp,
                      "--output", out])
    assert proc.returncode > 0, describe(proc)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "mano" in lines[0].lower(), describe(proc)
    assert not out.exists()


def test_params_only_without_mano(regress):
    crops = float_crops(3)
    r = reference_outputs("d2h2", crops)
    out = regress(checkpoint_path("d2h2_nomano"), crops, "--params-only")
    assert set(out) == set(PARAM_OUTPUTS), f"--params-only wrote {sorted(out)}"
    compare(out, r, PARAM_OUTPUTS)


def test_params_only_with_mano_matches_full_run(regress):
    crops = float_crops(3)
    full = regress(checkpoint_path("d2h2"), crops)
    part = regress(checkpoint_path("d2h2"), crops, "--params-only")
    assert set(part) == set(PARAM_OUTPUTS), f"--params-only wrote {sorted(part)}"
    for k in PARAM_OUTPUTS:
        assert np.array_equal(full[k], part[k]), k


def test_cuda_tagged_checkpoint_loads(regress):
    """Storages tagged cuda:0 and a zip prefix other than 'archive': same
    weights, so the outputs are identical to the plain checkpoint's."""
    crops = float_crops(3)
    plain = regress(checkpoint_path("d2h2"), crops)
    tagged = regress(checkpoint_path("d2h2_cuda"), crops)
    for k in ALL_OUTPUTS:
        assert np.array_equal(plain[k], tagged[k]), k


# ---------------------------------------------------------------------------
# The released architecture (32 ViT blocks, 6 decoder layers)
# ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(SANITIZE, reason=FULL_SIZE_SKIP_REASON)
def test_regress_full_size():
    # The full-size run every full-size test reads (conftest); the float64
    # reference of its first crop (a reference crop costs what a C batch does).
    out = full_size_outputs("fp32")
    check_format(out, FULL_SIZE_CROPS)
    check_self_consistent(out)
    r = reference_outputs("full", float_crops(1), keep_in_memory=False)
    compare({k: v[:1] for k, v in out.items()}, r)
