"""The gate of --precision fast (the low-precision scheme) against fp32.

Gate (performance issue): params Pearson correlation >= 0.999 and vertices /
keypoints mean absolute error <= 1 mm versus the fp32 path, on synthetic
models that include realistic activation outliers: a few LayerNorm channels
with a x20 gain in every block, as real ViTs have (those channels dominate
the inputs of qkv and fc1 and break naive per-token int8).
"""

import os

import numpy as np
import pytest

import hamer_fixture
from conftest import (FIXTURE_DIR, FULL_SIZE_CROPS, FULL_SIZE_SKIP_REASON, SANITIZE, _cached_file, float_crops,
                      full_size_outputs, uint8_crops)

OUTLIER_CHANNELS = [17, 348, 679, 1010]


def outlier_checkpoint(depth, head_depth, seed):
    def write(tmp):
        sd = hamer_fixture.build_state_dict(depth, head_depth, seed, mano=True)
        for key, t in sd.items():
            if key.startswith("backbone.blocks.") and key.endswith((".norm1.weight", ".norm2.weight")):
                t[OUTLIER_CHANNELS] *= 20.0
        hamer_fixture.save_checkpoint(sd, tmp)
    params = dict(depth=depth, head_depth=head_depth, seed=seed, outlier_channels=OUTLIER_CHANNELS, gain=20.0)
    return _cached_file(FIXTURE_DIR / f"outliers_d{depth}h{head_depth}_s{seed}.ckpt", params, write)


def gate(fast, ref):
    pcc = np.corrcoef(fast["params"].ravel(), ref["params"].ravel())[0, 1]
    v_mm = 1e3 * np.abs(fast["vertices"] - ref["vertices"]).mean()
    k_mm = 1e3 * np.abs(fast["keypoints_3d"] - ref["keypoints_3d"]).mean()
    assert pcc >= 0.999, f"params PCC {pcc:.6f} < 0.999"
    assert v_mm <= 1.0, f"vertices MAE {v_mm:.3f} mm > 1 mm"
    assert k_mm <= 1.0, f"keypoints MAE {k_mm:.3f} mm > 1 mm"
    return pcc, v_mm


def attn_env(attn):
    """The environment with HAMER_ATTN set to attn (None: unset, the CPU's default)."""
    env = {k: v for k, v in os.environ.items() if k != "HAMER_ATTN"}
    if attn:
        env["HAMER_ATTN"] = attn
    return env


def cpu_runs_bf16_attention_by_default():
    """AMD with AVX-512 BF16 (kernels/attn.h: bf16 at twice fp32's rate there),
    read from /proc/cpuinfo, independently of the library's CPUID code."""
    info = open("/proc/cpuinfo").read()
    return "AuthenticAMD" in info and " avx512_bf16" in info and " avx512bw" in info


def cpu_has_amx_bf16():
    """AMX-BF16 tiles (read from /proc/cpuinfo) that the library uses: its
    int8 matmuls are on tiles (Linux granted the tile state)."""
    from conftest import run_hamer
    info = open("/proc/cpuinfo").read()
    flags = all(f" {f}" in info for f in ("amx_tile", "amx_int8", "amx_bf16", "avx512_bf16"))
    return flags and "int8 on amx tiles" in run_hamer(["--version"]).stdout


def default_attention():
    """The head the fast precision takes by default (kernels/attn.h): AMX
    tiles where AMX-BF16 is in use, else bf16 on AMD with AVX-512 BF16, else fp32."""
    return "amx" if cpu_has_amx_bf16() else "bf16" if cpu_runs_bf16_attention_by_default() else "fp32"


def cpu_has_bf16():
    info = open("/proc/cpuinfo").read()
    return " avx512_bf16" in info and " avx512bw" in info


@pytest.mark.slow
@pytest.mark.parametrize("kind,attn", [("float", None), ("uint8", None), ("float", "fp32")])
def test_fast_gate_with_outlier_channels(regress, kind, attn):
    # attn None: the attention kernel this CPU gets by default (AMX tiles
    # where AMX-BF16 is in use, bf16 on AMD with AVX-512 BF16); "fp32": the
    # other one, gated as well.
    ckpt = outlier_checkpoint(4, 2, 7)
    crops = float_crops(2) if kind == "float" else uint8_crops(2)
    fast = regress(ckpt, crops, "--precision", "fast", env=attn_env(attn))
    ref = regress(ckpt, crops, "--precision", "fp32")
    gate(fast, ref)
    # the gate is not vacuous: the fast path really is a different computation
    assert not np.array_equal(fast["params"], ref["params"])


def test_fast_gate_small(regress):
    """The gate on one crop of a two-block model with the outlier channels:
    small enough to run under emulation (scripts/test_aarch64.sh runs it on
    the AArch64 build at the dot-product and the i8mm + BF16 levels)."""
    ckpt = outlier_checkpoint(2, 1, 7)
    crops = float_crops(1)
    fast = regress(ckpt, crops, "--precision", "fast")
    ref = regress(ckpt, crops, "--precision", "fp32")
    gate(fast, ref)
    assert not np.array_equal(fast["params"], ref["params"])


@pytest.mark.slow
@pytest.mark.skipif(SANITIZE, reason=FULL_SIZE_SKIP_REASON)
def test_fast_gate_full_size(hamer_bin):
    # The gate holds per crop, not only on average: with every matmul in
    # int8, one crop in twelve of this kind once reached 1.03 mm. The runs
    # are the shared full-size ones (conftest.full_size_outputs).
    fast, ref = full_size_outputs("fast"), full_size_outputs("fp32")
    assert len(fast["params"]) == len(ref["params"]) == FULL_SIZE_CROPS
    for i in range(FULL_SIZE_CROPS):
        gate({k: v[i:i + 1] for k, v in fast.items()}, {k: v[i:i + 1] for k, v in ref.items()})
    assert not np.array_equal(fast["params"], ref["params"])


def test_version_names_the_scheme(hamer_bin):
    from conftest import run_hamer
    proc = run_hamer(["--version"])
    assert proc.returncode == 0
    assert "fast:" in proc.stdout and "int8" in proc.stdout, proc.stdout


def test_attention_kernel_choice(regress, ckpt):
    """HAMER_ATTN: the default follows the CPU (AMX tiles where AMX-BF16 is
    in use, bf16 on AMD with AVX-512 BF16, fp32 elsewhere), fp32|bf16|amx
    decide, anything else (or a head the CPU cannot run) is a one-line
    error and nothing is written; the kernels really differ and fp32
    precision never uses bf16."""
    from conftest import run_hamer
    crops = float_crops(1)
    want_default = default_attention()
    proc = run_hamer(["--version"], env=attn_env(None))
    assert proc.returncode == 0
    names = {"amx": "fast attention: bf16 on amx tiles", "bf16": "fast attention: bf16 dot products",
             "fp32": "fast attention: fp32"}
    assert names[want_default] in proc.stdout, proc.stdout
    assert "fast attention: fp32" in run_hamer(["--version"], env=attn_env("fp32")).stdout

    model = ckpt("d2h2")
    dflt = regress(model, crops, "--precision", "fast", env=attn_env(None))
    f32 = regress(model, crops, "--precision", "fast", env=attn_env("fp32"))
    runs = {"fp32": f32}
    if cpu_has_bf16():
        runs["bf16"] = b16 = regress(model, crops, "--precision", "fast", env=attn_env("bf16"))
        assert not np.array_equal(b16["params"], f32["params"])   # a different computation
        np.testing.assert_allclose(b16["vertices"], f32["vertices"], atol=2e-4)
    if cpu_has_amx_bf16():
        runs["amx"] = amx = regress(model, crops, "--precision", "fast", env=attn_env("amx"))
        assert not np.array_equal(amx["params"], f32["params"])
        np.testing.assert_allclose(amx["vertices"], f32["vertices"], atol=2e-4)
        # the same bf16 operands as the vdpbf16ps head, sums in another order
        np.testing.assert_allclose(amx["vertices"], b16["vertices"], atol=2e-5)
    same = runs[want_default]
    for k in dflt:
        assert np.array_equal(dflt[k], same[k]), k
    # the exact precision ignores the choice
    e1 = regress(model, crops, "--precision", "fp32", env=attn_env("bf16" if cpu_has_bf16() else "fp32"))
    e2 = regress(model, crops, "--precision", "fp32", env=attn_env("fp32"))
    assert all(np.array_equal(e1[k], e2[k]) for k in e1)

    out = regress.tmp / "bad.npz"
    inp, _ = regress.paths(crops)
    for bad in ["fp16", "BF-16"] + ([] if cpu_has_bf16() else ["bf16"]) + ([] if cpu_has_amx_bf16() else ["amx"]):
        proc = run_hamer(["regress", "--model", model, "--input", inp, "--output", out, "--precision", "fast"],
                         env=attn_env(bad))
        if "fast: unavailable" in run_hamer(["--version"]).stdout:
            break
        assert proc.returncode != 0
        assert "HAMER_ATTN" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
        assert not out.exists()
