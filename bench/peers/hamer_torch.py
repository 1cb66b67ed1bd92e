"""HaMeR's per-hand regressor as a plain PyTorch nn.Module, for the peer benchmarks.

Backbone (ViT-H/16) + MANO transformer-decoder head + 6D->rotation + MANO
linear blend skinning, fp32, parameter and buffer names equal to the
checkpoint's state-dict keys so that ``load_state_dict`` takes a HaMeR
checkpoint directly. Written from the published architecture
(geopavlakos/hamer, smplx's MANO layer); only operations that export to ONNX
opset 13 are used (no einsum over 4 operands, no torch.cross, no in-place
index writes), so the whole thing, MANO included, goes into one graph.

Input: normalised crops [B,3,256,192]. Outputs: params [B,157] (16 row-major
rotations, 10 betas, pred_cam) and vertices [B,778,3] (metres).
"""

import math
import pickle
import types

import torch
from torch import nn

VIT_HEAD_DIM = 80
DEC_HEAD_DIM = 64


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.heads = dim // VIT_HEAD_DIM
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, VIT_HEAD_DIM).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax((q * VIT_HEAD_DIM ** -0.5) @ k.transpose(-2, -1), dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()          # exact erf form
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, mlp):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, mlp)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, kernel_size=16, stride=16, padding=2)


class ViT(nn.Module):
    def __init__(self, depth, dim=1280, mlp=5120, tokens=192):
        super().__init__()
        self.patch_embed = PatchEmbed(dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, tokens + 1, dim))
        self.blocks = nn.ModuleList([Block(dim, mlp) for _ in range(depth)])
        self.last_norm = nn.LayerNorm(dim, eps=1e-6)

    def forward(self, x):
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)     # [B,192,dim], row-major tokens
        x = x + self.pos_embed[:, 1:] + self.pos_embed[:, :1]       # class slot broadcast, no class token
        for blk in self.blocks:
            x = blk(x)
        return self.last_norm(x)


def _attend(q, k, v, heads):
    """[B,n,h*d] inputs; scale applied to the logits, as the decoder does."""
    b, nq, inner = q.shape
    d = inner // heads
    q = q.reshape(b, nq, heads, d).transpose(1, 2)
    k = k.reshape(b, k.shape[1], heads, d).transpose(1, 2)
    v = v.reshape(b, v.shape[1], heads, d).transpose(1, 2)
    a = torch.softmax((q @ k.transpose(-1, -2)) * d ** -0.5, dim=-1)
    return (a @ v).transpose(1, 2).reshape(b, nq, inner)


class SelfAttn(nn.Module):
    def __init__(self, dim, inner):
        super().__init__()
        self.heads = inner // DEC_HEAD_DIM
        self.to_qkv = nn.Linear(dim, 3 * inner, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner, dim))

    def forward(self, x):
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        return self.to_out(_attend(q, k, v, self.heads))


class CrossAttn(nn.Module):
    def __init__(self, dim, inner, context_dim):
        super().__init__()
        self.heads = inner // DEC_HEAD_DIM
        self.to_kv = nn.Linear(context_dim, 2 * inner, bias=False)
        self.to_q = nn.Linear(dim, inner, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner, dim))

    def forward(self, x, context):
        k, v = self.to_kv(context).chunk(2, dim=-1)
        return self.to_out(_attend(self.to_q(x), k, v, self.heads))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(0.0), nn.Linear(hidden, dim))

    def forward(self, x):
        return self.net(x)


class PreNorm(nn.Module):
    """``layers.{j}.{0,1,2}``: LayerNorm (eps 1e-5) then the function."""

    def __init__(self, dim, fn):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fn = fn

    def forward(self, x, *context):
        return self.fn(self.norm(x), *context)


class DecoderLayers(nn.Module):
    def __init__(self, depth, dim, inner, mlp, context_dim):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.ModuleList([PreNorm(dim, SelfAttn(dim, inner)),
                           PreNorm(dim, CrossAttn(dim, inner, context_dim)),
                           PreNorm(dim, FeedForward(dim, mlp))])
            for _ in range(depth)])

    def forward(self, x, context):
        for sa, ca, ff in self.layers:
            x = x + sa(x)
            x = x + ca(x, context)
            x = x + ff(x)
        return x


class TokenDecoder(nn.Module):
    def __init__(self, depth, dim=1024, inner=512, mlp=1024, context_dim=1280):
        super().__init__()
        self.to_token_embedding = nn.Linear(1, dim)
        self.pos_embedding = nn.Parameter(torch.zeros(1, 1, dim))
        self.transformer = DecoderLayers(depth, dim, inner, mlp, context_dim)

    def forward(self, context):
        token = torch.zeros(context.shape[0], 1, 1, dtype=context.dtype)
        x = self.to_token_embedding(token) + self.pos_embedding
        return self.transformer(x, context)[:, 0]                  # no final norm


class ManoHead(nn.Module):
    def __init__(self, depth, dim=1024):
        super().__init__()
        self.transformer = TokenDecoder(depth, dim)
        self.decpose = nn.Linear(dim, 96)
        self.decshape = nn.Linear(dim, 10)
        self.deccam = nn.Linear(dim, 3)
        self.register_buffer("init_hand_pose", torch.zeros(1, 96))
        self.register_buffer("init_betas", torch.zeros(1, 10))
        self.register_buffer("init_cam", torch.zeros(1, 3))

    def forward(self, context):
        x = self.transformer(context)
        return (self.decpose(x) + self.init_hand_pose, self.decshape(x) + self.init_betas,
                self.deccam(x) + self.init_cam)


def _normalize(v):
    return v / torch.clamp(torch.sqrt((v * v).sum(-1, keepdim=True)), min=1e-12)


def _cross(a, b):
    a0, a1, a2 = a[..., 0:1], a[..., 1:2], a[..., 2:3]
    b0, b1, b2 = b[..., 0:1], b[..., 1:2], b[..., 2:3]
    return torch.cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim=-1)


def rot6d_to_rotmat(x):
    """[..., 6] -> [..., 3, 3]; b1, b2, b1 x b2 are the columns."""
    a1, a2 = x[..., 0:3], x[..., 3:6]
    b1 = _normalize(a1)
    b2 = _normalize(a2 - (b1 * a2).sum(-1, keepdim=True) * b1)
    return torch.stack((b1, b2, _cross(b1, b2)), dim=-1)


class Mano(nn.Module):
    """smplx MANO layer with pose given as rotation matrices, zero translation."""

    def __init__(self, parents):
        super().__init__()
        self.parents = [int(p) for p in parents]
        self.register_buffer("v_template", torch.zeros(778, 3))
        self.register_buffer("shapedirs", torch.zeros(778, 3, 10))
        self.register_buffer("posedirs", torch.zeros(135, 2334))
        self.register_buffer("J_regressor", torch.zeros(16, 778))
        self.register_buffer("lbs_weights", torch.zeros(778, 16))
        # Bottom row of the 4x4 transforms; not in the checkpoint.
        self.register_buffer("bottom", torch.tensor([[[0.0, 0.0, 0.0, 1.0]]]), persistent=False)

    def forward(self, rotmats, betas):
        b = rotmats.shape[0]
        v_shaped = self.v_template + (self.shapedirs.reshape(-1, 10) @ betas.t()).t().reshape(b, 778, 3)
        joints = self.J_regressor @ v_shaped                        # [B,16,3]
        eye = torch.eye(3, dtype=rotmats.dtype)
        pose_feature = (rotmats[:, 1:] - eye).reshape(b, 135)
        v_posed = v_shaped + (pose_feature @ self.posedirs).reshape(b, 778, 3)
        bottom = self.bottom.expand(b, 1, 4)
        chain = []
        for i, p in enumerate(self.parents):
            t = joints[:, i] if p < 0 else joints[:, i] - joints[:, p]
            local = torch.cat([torch.cat([rotmats[:, i], t.unsqueeze(-1)], dim=2), bottom], dim=1)
            chain.append(local if p < 0 else chain[p] @ local)
        g = torch.stack(chain, dim=1)                               # [B,16,4,4]
        # A_i = G_i - [0 | G_i . (J_i, 0)]
        rj = (g[:, :, :3, :3] @ joints.unsqueeze(-1))                # [B,16,3,1]
        a = torch.cat([g[:, :, :3, :3], g[:, :, :3, 3:] - rj], dim=3)  # [B,16,3,4]
        t = (self.lbs_weights @ a.reshape(b, 16, 12)).reshape(b, 778, 3, 4)
        return (t[..., :3] @ v_posed.unsqueeze(-1)).squeeze(-1) + t[..., 3]


class HamerRegressor(nn.Module):
    def __init__(self, depth=32, head_depth=6, parents=(-1, 0, 1, 2, 0, 4, 5, 0, 7, 8, 0, 10, 11, 0, 13, 14),
                 with_mano=True):
        super().__init__()
        self.backbone = ViT(depth)
        self.mano_head = ManoHead(head_depth)
        self.mano = Mano(parents) if with_mano else None

    def forward(self, crops):
        b = crops.shape[0]
        pose6d, betas, cam = self.mano_head(self.backbone(crops))
        rotmats = rot6d_to_rotmat(pose6d.reshape(b, 16, 6))
        params = torch.cat([rotmats.reshape(b, 144), betas, cam], dim=1)
        if self.mano is None:
            return params
        return params, self.mano(rotmats, betas)


# ---------------------------------------------------------------------------
# Loading a HaMeR checkpoint
# ---------------------------------------------------------------------------

class _Opaque:
    def __setstate__(self, state):
        if isinstance(state, dict):
            self.__dict__.update(state)


class _TolerantUnpickler(pickle.Unpickler):
    """Classes of the checkpoint's hyper-parameters (omegaconf's in the
    release) need not be importable: they become opaque objects."""

    def find_class(self, module, name):
        try:
            return super().find_class(module, name)
        except (ImportError, AttributeError):
            return type(name, (_Opaque,), {"__module__": module})


_tolerant_pickle = types.ModuleType("pickle")
_tolerant_pickle.__dict__.update({k: v for k, v in vars(pickle).items() if not k.startswith("__")})
_tolerant_pickle.Unpickler = _TolerantUnpickler


def load_state_dict(path):
    ser = torch.serialization
    saved = ser.pickle
    ser.pickle = _tolerant_pickle    # Debian's torch 1.13 ignores pickle_module without weights_only
    try:
        ckpt = torch.load(path, map_location="cpu", pickle_module=_tolerant_pickle)
    finally:
        ser.pickle = saved
    return ckpt["state_dict"] if "state_dict" in ckpt else ckpt


def _count(sd, fmt):
    n = 0
    while fmt.format(n) in sd:
        n += 1
    return n


def from_checkpoint(path, with_mano=True):
    """HamerRegressor in eval mode with the checkpoint's weights (fp32)."""
    sd = load_state_dict(path)
    depth = _count(sd, "backbone.blocks.{}.norm1.weight")
    head_depth = _count(sd, "mano_head.transformer.transformer.layers.{}.0.norm.weight")
    with_mano = with_mano and "mano.v_template" in sd
    parents = sd["mano.parents"].tolist() if with_mano else (-1,) * 16
    model = HamerRegressor(depth, head_depth, parents, with_mano)
    want = model.state_dict().keys()
    missing = [k for k in want if k not in sd]
    if missing:
        raise KeyError(f"{path}: missing {missing[:5]}")
    model.load_state_dict({k: sd[k].float() for k in want})
    del sd
    return model.eval()
