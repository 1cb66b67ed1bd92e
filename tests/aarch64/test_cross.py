"""The AArch64 build against this machine's own, end to end: `hamer run`
on a shared photo (detector, crops, the small model), run under qemu-user
(HAMER_RUNNER) from HAMER_BUILD and natively from HAMER_NATIVE_BUILD
(default <repo>/build). Run by scripts/test_aarch64.sh; outside that stage
the file is not collected (tests/CMakeLists.txt takes tests/test_*.py).

The two builds run different kernels (NEON against AVX2 / AVX-512): the
ViT's fp32 GEMMs are the same arithmetic, but the detector's convolution
and depthwise tiles sum in other orders, which moves a hand's landmarks by
up to 1.2 px and its box by 0.27 px (measured on this photo), and the crop
and so the mesh follow the box. So they must find the same hands with the
same handedness and agree within the detector test's bounds against the
TFLite runtime (tests/test_detect_photos.py): boxes and 2D keypoints
within 1 % of the hand's size, detection scores within 2e-3; vertices and
3D keypoints within 1 mm (the fast precision's gate; measured 0.14 mm).
"""

import json
import os
import subprocess
from pathlib import Path

import numpy as np

from conftest import REPO, RUNNER, checkpoint_path, describe
from detect.common import annotations, score_image, shared_images

NATIVE = Path(os.environ.get("HAMER_NATIVE_BUILD") or REPO / "build").resolve()
CROSS = Path(os.environ.get("HAMER_BUILD") or REPO / "build-arm64").resolve()


def run(cmd, timeout=600):
    return subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


def test_run_photo_matches_native(tmp_path):
    assert RUNNER, "HAMER_RUNNER must name the emulator (scripts/test_aarch64.sh sets it)"
    ver = run(RUNNER + [CROSS / "hamer", "--version"])
    assert ver.returncode == 0 and "kernels: neon" in ver.stdout, describe(ver)
    name = "hamer_example_5.jpg"
    img, model = shared_images() / name, checkpoint_path("d1h1")
    out = {}
    for tag, cmd in (("arm", RUNNER + [CROSS / "hamer"]), ("native", [NATIVE / "hamer"])):
        dst = tmp_path / f"{tag}.json"
        p = run(cmd + ["run", "--model", model, "--image", img, "--output", dst, "--vertices", "--threads", "2"])
        assert p.returncode == 0, f"{tag}: " + describe(p)
        out[tag] = json.loads(dst.read_text())
    a, n = out["arm"]["hands"], out["native"]["hands"]
    r = score_image([h["bbox"] for h in a], [h["is_right"] for h in a], annotations()[name]["hands"])
    assert r["pass"], r
    assert len(a) == len(n) >= 2
    for ha, hn in zip(a, n):
        assert ha["is_right"] == hn["is_right"]
        size = max(hn["bbox"][2] - hn["bbox"][0], hn["bbox"][3] - hn["bbox"][1])
        np.testing.assert_allclose(ha["bbox"], hn["bbox"], atol=0.01 * size)
        np.testing.assert_allclose(ha["keypoints_2d"], hn["keypoints_2d"], atol=0.01 * size)
        assert abs(ha["detection"]["score"] - hn["detection"]["score"]) < 2e-3
        np.testing.assert_allclose(ha["vertices"], hn["vertices"], atol=1e-3)
        np.testing.assert_allclose(ha["keypoints_3d"], hn["keypoints_3d"], atol=1e-3)


def test_packed_files(tmp_path):
    """`hamer convert` on AArch64 writes files that load there in both
    precisions (the NEON and low-precision layouts the packed-file reader
    accepts) and give the checkpoint's outputs bit for bit; this machine's
    build refuses them, naming the ISA, and vice versa."""
    model = REPO / "fuzz" / "corpus" / "model" / "tiny_mano.ckpt"
    crops = tmp_path / "crops.npy"
    np.save(crops, np.arange(2 * 256 * 192 * 3, dtype=np.uint64).astype(np.uint8).reshape(2, 256, 192, 3))
    arm = RUNNER + [CROSS / "hamer"]
    env = dict(os.environ, HAMER_NO_CACHE="1")
    for prec in ("fp32", "fast"):
        hpk, a, b = tmp_path / f"arm_{prec}.hpk", tmp_path / f"a_{prec}.npz", tmp_path / f"b_{prec}.npz"
        for cmd in (arm + ["convert", "--model", model, "--output", hpk, "--precision", prec],
                    arm + ["regress", "--model", hpk, "--precision", prec, "--input", crops, "--output", a],
                    arm + ["regress", "--model", model, "--precision", prec, "--input", crops, "--output", b]):
            p = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=600, env=env)
            assert p.returncode == 0, describe(p)
        with np.load(a) as za, np.load(b) as zb:
            for k in za.files:
                assert np.array_equal(za[k], zb[k]), f"{prec} {k}: the packed file's outputs differ"
        p = run([NATIVE / "hamer", "regress", "--model", hpk, "--precision", prec, "--input", crops,
                 "--output", tmp_path / "native.npz"])
        assert p.returncode == 1 and "packed for ISA neon" in p.stderr, describe(p)
    native_hpk = tmp_path / "native.hpk"
    p = run([NATIVE / "hamer", "convert", "--model", model, "--output", native_hpk])
    assert p.returncode == 0, describe(p)
    p = run(arm + ["regress", "--model", native_hpk, "--input", crops, "--output", tmp_path / "x.npz"])
    assert p.returncode == 1 and "which this CPU (neon) cannot run" in p.stderr, describe(p)
