"""The four MediaPipe Hands models and the three of Holistic's body pass
(pose_detection, with sparse fp16 weights; pose_landmark_full; hand_recrop)
through the C TFLite executor, against the real TFLite runtime
(tests/detect/tflite_ref.js), on real photos and on random inputs.

Bound: for every output, max |C - runtime| <= 1e-4 x the output's range
(max - min of the runtime's values; for the one-element outputs, the
hand-presence and handedness probabilities, the range is taken as 1). Run on
the active ISA and the portable scalar path (and AVX2 on random inputs); 2
threads must give the same bits as 1.

pose_landmark_full's segmentation logits (output 2, not used by the
detector) are held to 2e-3 of their range at the worst value and 1e-4 at
the 99th percentile. Why, measured on wilor_typing.jpg (letterboxed, the
photo that reached 1.04e-3 on the scalar path): its segmentation head
amplifies float rounding about a hundredfold. Op by op, scalar against AVX-512
(both this executor, FMA vs separate multiply and add, different summation
order), the relative difference stays at 1e-6..3e-5 through the backbone and
grows from 2.8e-5 (first head convolution) to 1.3e-3 (its last RELU6 layer),
and the 8 -> 1 channel convolution producing logits of +-2000 carries that
to the output. The runtime against itself, its input changed by at most half
an ulp per value (24 draws), moves output 2 by up to 7.6e-4 of the range
(median 4.3e-4); this executor's scalar / AVX2 / AVX-512 paths against
themselves the same way up to 5.1e-4 / 4.7e-4 / 9.6e-4 (the scalar path is
no noisier than the others), and scalar against the runtime on the same
perturbed inputs up to 1.07e-3 (median 4.6e-4). So the difference is two
draws of the head's rounding noise, not an error of one path; 2e-3 is about
twice the largest seen. The 99th percentile (1.6e-5 there) keeps a
systematic error visible.

Environment:
  HAMER_DETECTOR_DIR  directory with palm_detection_{full,lite}.tflite,
                      hand_landmark_{full,lite}.tflite, pose_detection.tflite,
                      pose_landmark_full.tflite, hand_recrop.tflite (scripts/get_detector.sh
                      installs them); the tests fail when it is not set.
  HAMER_SHARED_IMAGES   the test photos (default: ../shared/images beside the
                      repository, with hands.json).
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest

import tflite_ref as tr
from conftest import SANITIZE, require_tool

TOL = 1e-4
MODELS = {"palm_detection_full": 192, "palm_detection_lite": 192, "hand_landmark_full": 224,
          "hand_landmark_lite": 224, "pose_detection": 224, "pose_landmark_full": 256, "hand_recrop": 256}
TOL_OUTPUT = {("pose_landmark_full", 2): 2e-3}
TOL_P99 = {("pose_landmark_full", 2): 1e-4}


@pytest.fixture(scope="session")
def tool():
    return require_tool("tool_tflite_run")


@pytest.fixture(scope="session")
def ref_runtime():
    why = tr.ref_runtime_problem()
    if why:
        pytest.fail(why)


@pytest.fixture(scope="session")
def detector_dir():
    # Where the library looks: $HAMER_DETECTOR_DIR, then the install directory
    # of scripts/get_detector.sh.
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(os.environ.get("HOME", "/nonexistent"), ".local", "share")
    d = os.environ.get("HAMER_DETECTOR_DIR") or os.path.join(xdg, "hamer", "detector")
    missing = [m for m in MODELS if not (Path(d) / (m + ".tflite")).is_file()]
    if missing:
        pytest.fail("%s lacks %s: run scripts/get_detector.sh (or set HAMER_DETECTOR_DIR)" %
                    (d, ", ".join(m + ".tflite" for m in missing)))
    return Path(d)


@pytest.fixture(scope="session")
def images():
    d = Path(os.environ.get("HAMER_SHARED_IMAGES") or tr.REPO.parent / "shared" / "images")
    if not (d / "hands.json").is_file():
        pytest.fail("test photos not found in %s (set HAMER_SHARED_IMAGES to the folder with hands.json)" % d)
    return d, json.loads((d / "hands.json").read_text())["images"]


def letterbox(path, n):
    """The photo scaled to fit n x n (aspect kept, centred, zero border),
    RGB in [0, 1]: the palm detector's input."""
    from PIL import Image
    im = Image.open(path).convert("RGB")
    w, h = im.size
    s = n / max(w, h)
    sw, sh = max(1, round(w * s)), max(1, round(h * s))
    px = np.asarray(im.resize((sw, sh), Image.BILINEAR), np.float32) / 255
    out = np.zeros((n, n, 3), np.float32)
    y0, x0 = (n - sh) // 2, (n - sw) // 2
    out[y0:y0 + sh, x0:x0 + sw] = px
    return out[None]


def hand_crop(path, point, side, n):
    """A square of `side` pixels around an annotated hand, resized to n x n."""
    from PIL import Image
    im = Image.open(path).convert("RGB")
    x, y = point
    c = im.crop((x - side // 2, y - side // 2, x + side // 2, y + side // 2)).resize((n, n), Image.BILINEAR)
    return (np.asarray(c, np.float32) / 255)[None]


def real_inputs(model, images):
    d, ann = images
    n = MODELS[model]
    if model.startswith("palm") or model.startswith("pose"):
        return [(name, letterbox(d / name, n)) for name in sorted(ann)]
    out = []
    for name in sorted(ann):
        side = 200 if ann[name]["width"] < 1000 else 450
        for k, h in enumerate(ann[name]["hands"]):
            out.append(("%s#%d" % (name, k), hand_crop(d / name, h["point"], side, n)))
    return out


def output_scale(ref):
    return 1.0 if ref.size == 1 else float(ref.max() - ref.min())


def compare(got, ref, what, model=None):
    assert len(got) == len(ref), what
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.shape == r.shape, "%s output %d: shape %s, runtime %s" % (what, i, g.shape, r.shape)
        err = tr.max_rel_err(g, r, output_scale(r))
        tol = TOL_OUTPUT.get((model, i), TOL)
        assert err <= tol, "%s output %d: max error %.3g of the output's range (bound %g)" % (what, i, err, tol)
        if (model, i) in TOL_P99:
            p99 = float(np.percentile(np.abs(g.astype(np.float64) - r), 99)) / max(output_scale(r), 1e-30)
            assert p99 <= TOL_P99[(model, i)], "%s output %d: 99th percentile error %.3g of the range" % (what, i, p99)


@pytest.mark.slow
@pytest.mark.accuracy  # under ASan: the same models, ops and input sizes in test_model_random_input
@pytest.mark.parametrize("model", sorted(MODELS))
def test_model_real_photos(model, tool, ref_runtime, detector_dir, images):
    data = (detector_dir / (model + ".tflite")).read_bytes()
    isas = [None] if SANITIZE else [None, "scalar"]
    for name, x in real_inputs(model, images):
        ref = tr.run_ref(data, [x])
        for isa in isas:
            got = tr.run_c(tool, data, [x], isa=isa)
            compare(got, ref, "%s on %s (isa %s)" % (model, name, isa or "native"), model)
        # The models do what they are for on these photos (a sanity check of
        # the inputs, not of the executor): a palm above the detector's 0.5
        # threshold; a hand present in the crops of the HaMeR photos, whose
        # fixed-size square crops fit their hands (presence 0.91-0.99 full,
        # 0.62-0.98 lite). Not on the WiLoR photos: there the same unrotated
        # squares cut hands on a keyboard, in a garden or holding a plate at
        # a size and angle the landmark model is unsure of (presence 0.00-
        # 0.95, e.g. wilor_cooking.jpg#1 0.38 full / 0.26 lite, the same in
        # the runtime); their outputs are still compared above.
        if model.startswith("palm") or model == "pose_detection":
            assert got[1].max() > 0, "%s on %s: no anchor scores above 0.5" % (model, name)
        elif model in ("pose_landmark_full", "hand_recrop"):  # whole photos / hand crops, not their ROIs
            assert np.all(np.isfinite(got[0])), "%s on %s" % (model, name)
        elif name.startswith("hamer_example"):
            assert got[1].ravel()[0] > 0.5, "%s on %s: hand presence %.3f" % (model, name, got[1].ravel()[0])


@pytest.mark.parametrize("model", sorted(MODELS))
def test_model_random_input(model, tool, ref_runtime, detector_dir):
    data = (detector_dir / (model + ".tflite")).read_bytes()
    n = MODELS[model]
    x = np.random.RandomState(7).rand(1, n, n, 3).astype(np.float32)
    ref = tr.run_ref(data, [x])
    got = tr.run_c(tool, data, [x])
    compare(got, ref, "%s on a random input" % model, model)
    for isa in [] if SANITIZE else tr.other_isas():
        compare(tr.run_c(tool, data, [x], isa=isa), ref, "%s on a random input (%s)" % (model, isa), model)
    two = tr.run_c(tool, data, [x], threads=2)
    for i, (a, b) in enumerate(zip(got, two)):
        assert np.array_equal(a, b), "%s output %d: 2 threads differ from 1" % (model, i)


def test_models_far_inside_the_work_limits(tool, detector_dir):
    """The work and folding limits checked at load (HM_TFL_MAX_WORK,
    _MAX_OP_WORK, _MAX_FOLD_BYTES in src/tflite/tflite_impl.h) leave every
    model far inside. Measured: work 0.02-0.47 G of 2^32 (pose_landmark_full
    the most, 1/9), largest op 4-43 M of 2^30 (pose_detection the most,
    1/24), folded constants 0-22.7 MiB of 256 MiB (pose_detection the most,
    its densified sparse weights: 1/11)."""
    for name in MODELS:
        info = tr.run_c_info(tool, (detector_dir / (name + ".tflite")).read_bytes())
        assert 0 < info["run_work"] <= info["work"] and info["work"] * 8 < 1 << 32, (name, info)
        assert 0 < info["max_op_work"] * 16 < 1 << 30, (name, info)
        assert 0 <= info["folded_bytes"] * 8 < 1 << 28, (name, info)
