"""The gate of --precision fast (the low-precision scheme) against fp32.

Gate (performance issue): params Pearson correlation >= 0.999 and vertices /
keypoints mean absolute error <= 1 mm versus the fp32 path, on synthetic
models that include realistic activation outliers: a few LayerNorm channels
with a x20 gain in every block, as real ViTs have (those channels dominate
the inputs of qkv and fc1 and break naive per-token int8).
"""

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


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["float", "uint8"])
def test_fast_gate_with_outlier_channels(regress, kind):
    ckpt = outlier_checkpoint(4, 2, 7)
    crops = float_crops(2) if kind == "float" else uint8_crops(2)
    fast = regress(ckpt, crops, "--precision", "fast")
    ref = regress(ckpt, crops, "--precision", "fp32")
    gate(fast, ref)
    # the gate is not vacuous: the fast path really is a different computation
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
