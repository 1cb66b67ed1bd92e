"""The attention heads against numpy, through tests/c/tool_attn: the fast
precision's (src/kernels/x86/attn_avx512vnni.c: bf16 dot products, fp32
softmax; src/kernels/x86/attn_amx.c: the same on AMX tiles) and the fp32 ones
(src/kernels/x86/attn_avx512.c fused, and the two GEMMs).

Two references, in float64:
* exact: softmax(scale q k^T) v. The kernel rounds q*scale, k, v and the
  softmax to bf16 (8 significant bits), so it is held to a bound derived
  from that rounding: max |err| <= 2^-7 * (|S| bound + 1) * max|v|, here
  with a few percent of slack on the random inputs;
* emulated: the same rounding done in numpy (round to nearest even) with
  float64 sums: the weights are e = exp(s - max s) rounded to bf16, and each
  output row is divided by the sum of the unrounded e (both heads normalise
  the output rather than the weights). Only the fp32 accumulation order and
  the softmax's fp32 exp (relative 2.2e-7) differ, and a weight sitting on
  a bf16 rounding boundary may round the other way (one bf16 ulp of that
  weight): max |err| <= 2e-3 * max|v| and mean |err| <= 2e-5 * max|v|.
The fp32 heads are checked against the exact reference to 1e-5.
"""

import subprocess

import numpy as np
import pytest

from conftest import build_tool

TOOL = build_tool("tool_attn")


def bf16(x):
    """Round float32 to bf16 (nearest even), returned as float64."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def softmax(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run(mode, qkv):
    """The head `mode` of tool_attn on qkv; skipped (exit 3) where this
    machine cannot run it: bf16 needs AVX-512 BF16, amx AMX-BF16 tiles."""
    n, _, hd = qkv.shape
    data = np.array([n, hd], np.int32).tobytes() + qkv.astype(np.float32).tobytes()
    proc = subprocess.run([str(TOOL), mode], input=data, capture_output=True, timeout=60)
    if proc.returncode == 3:
        pytest.skip(f"this CPU cannot run the {mode} head (AVX-512, and BF16 for bf16)")
    assert proc.returncode == 0, proc.stderr
    return np.frombuffer(proc.stdout, np.float32).reshape(n, hd).astype(np.float64)


def inputs(n, hd, seed, qscale):
    rng = np.random.RandomState(seed)
    qkv = rng.standard_normal((n, 3, hd)).astype(np.float32)
    qkv[:, 0] *= qscale
    return qkv


CASES = [(192, 80, 0, 1.0), (192, 80, 1, 4.0), (64, 16, 2, 1.0), (80, 32, 3, 2.0), (48, 80, 4, 0.25)]


@pytest.fixture(scope="module")
def tool():
    if not TOOL.exists():
        pytest.skip(f"{TOOL} not built")
    return TOOL


@pytest.mark.parametrize("mode", ["bf16", "amx"])
@pytest.mark.parametrize("n,hd,seed,qscale", CASES + [(96, 48, 7, 3.0)])
def test_bf16_head(tool, mode, n, hd, seed, qscale):
    """Both bf16 heads, vdpbf16ps and AMX tiles (the same bf16 operands,
    fp32 sums in other orders), against both references. The AMX head
    takes n a multiple of 32 and refuses other shapes."""
    qkv = inputs(n, hd, seed, qscale)
    q, k, v = (qkv[:, i].astype(np.float64) for i in range(3))
    scale = np.float32(1.0) / np.sqrt(np.float32(hd))
    if mode == "amx" and n % 32:
        proc = subprocess.run([str(TOOL), mode], input=np.array([n, hd], np.int32).tobytes() + qkv.tobytes(),
                              capture_output=True, timeout=60)
        assert proc.returncode == 3
        return
    got = run(mode, qkv)
    vmax = np.abs(v).max()

    s = (q * scale) @ k.T
    exact = softmax(s) @ v
    bound = 2.0 ** -7 * (np.abs(s).max() + 1.0) * vmax
    err = np.abs(got - exact)
    assert err.max() <= bound, (err.max(), bound)

    qs = bf16((qkv[:, 0] * scale).astype(np.float32))
    sb = qs @ bf16(qkv[:, 1]).T
    e = np.exp(sb - sb.max(axis=1, keepdims=True))
    emulated = (bf16(e.astype(np.float32)) @ bf16(qkv[:, 2])) / e.sum(axis=1, keepdims=True)
    err = np.abs(got - emulated)
    assert err.max() <= 2e-3 * vmax, err.max()
    assert err.mean() <= 2e-5 * vmax, err.mean()


@pytest.mark.parametrize("mode", ["fp32", "fp32-fused", "fp32-gemm"])
@pytest.mark.parametrize("n,hd,seed,qscale", CASES + [(40, 24, 6, 1.0), (32, 64, 8, 1.0)])
def test_fp32_head(tool, mode, n, hd, seed, qscale):
    """The fp32 heads (fused, the two GEMMs, and what vit.c runs: fused
    where the shape allows) are plain fp32 sums: 1e-5 of max|v| against
    float64. 40 x 24 is no multiple of 16: vit.c's choice takes the GEMMs
    there and the fused head refuses it. The fused head's blocks: 48 tokens
    or dims at a time, then 32 / 16 (n 64, 80; hd 16, 32, 64, 80)."""
    qkv = inputs(n, hd, seed, qscale)
    q, k, v = (qkv[:, i].astype(np.float64) for i in range(3))
    exact = softmax((q / np.sqrt(hd)) @ k.T) @ v
    if mode == "fp32-fused" and (n % 16 or hd % 16):
        proc = subprocess.run([str(TOOL), mode], input=np.array([n, hd], np.int32).tobytes() + qkv.tobytes(),
                              capture_output=True, timeout=60)
        assert proc.returncode == 3
        return
    assert np.abs(run(mode, qkv) - exact).max() <= 1e-5 * np.abs(v).max()


def test_unsupported_shape_is_refused(tool):
    qkv = inputs(40, 80, 5, 1.0)   # 40 tokens: not a multiple of 16
    proc = subprocess.run([str(TOOL), "bf16"], input=np.array([40, 80], np.int32).tobytes() + qkv.tobytes(),
                          capture_output=True, timeout=60)
    assert proc.returncode == 3
