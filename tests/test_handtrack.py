"""The hand-box proposals (src/detect/handtrack.c) stage by stage against
TensorFlow.js running the same graph (tests/tfjs/tfjs_ref.js: @tensorflow/
tfjs 4.22.0, CPU backend), on the shared photos and scikit-image's
astronaut (a face the model likes to call a fist):

- preprocessing (the graph's Preprocessor: x * 0.0078431377 - 1, legacy
  bilinear resize to 320x320): C's input tensor against the graph's
  TensorListStack node from the same int32 image: bit for bit;
- the network from there: raw box encodings and class logits within 1e-4
  of their range (measured: under 1e-5);
- decoding with the file's anchors and the class handling, on TF.js's own
  raw outputs: boxes and the 7 class scores against the graph's
  Postprocessor/ExpandDims_1 and Postprocessor/Slice within 1e-6 (values in
  [0, 1]; float32 rounding of exp and sigmoid);
- NMS (scores > 0.2, IoU 0.3, at most 16) on TF.js's boxes and best
  non-face scores: the same anchors in the same order as
  tf.image.nonMaxSuppression;
- the whole pass: the same proposals (anchor, class) as TF.js's pipeline,
  boxes within 0.05 px.
Also: the model file's checks (another graph is refused with one line).
"""

import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import tfjs_model as tm
from conftest import SANITIZE, require_tool
from test_tfjs import detector_dir, range_err

PRE = "StatefulPartitionedCall/map/TensorArrayV2Stack/TensorListStack"
RAW = ["StatefulPartitionedCall/concat", "StatefulPartitionedCall/concat_1"]
POST = ["StatefulPartitionedCall/Postprocessor/ExpandDims_1", "StatefulPartitionedCall/Postprocessor/Slice"]
NMS = (16, 0.3, 0.2)


@pytest.fixture(scope="module")
def tool():
    return require_tool("tool_handtrack")


@pytest.fixture(scope="module")
def ref():
    why = tm.ref_problem()
    if why:
        pytest.fail(why)
    r = tm.Ref()
    yield r
    r.close()


def photos():
    d = Path(os.environ.get("HAMER_SHARED_IMAGES") or Path(__file__).resolve().parent.parent.parent / "shared" / "images")
    if not (d / "hands.json").is_file():
        pytest.fail("test photos not found in %s (set HAMER_SHARED_IMAGES)" % d)
    import skimage.data
    names = ["wilor_cooking.jpg", "wilor_typing.jpg", "hamer_example_1.jpg"]
    return [d / n for n in names] + [Path(skimage.data.__file__).parent / "astronaut.png"]


def rgb(path):
    import cv2
    im = cv2.imread(str(path), cv2.IMREAD_COLOR)
    return np.ascontiguousarray(im[:, :, ::-1])


def run_tool(tool, *args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "dump.npz")
        r = subprocess.run([str(tool), "--models", str(detector_dir()), "--dump", out, *map(str, args)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        z = np.load(out)
        return (json.loads(r.stdout) if r.stdout.strip() else None), {k: z[k] for k in z.files}


@pytest.mark.parametrize("path", photos(), ids=lambda p: p.name)
def test_stages(path, tool, ref, tmp_path):
    model = detector_dir() / "handtrack.json"
    img = rgb(path)
    want = ref.run(model, img[None].astype(np.int32), [PRE] + RAW + POST, nms=NMS)
    js, got = run_tool(tool, path)
    # 1. preprocessing: the same float32 values
    np.testing.assert_array_equal(got["pre"], want[0])
    # 2. the network on that input
    for k, name in ((1, "enc"), (2, "logits")):
        err = range_err(got[name].reshape(want[k].shape), want[k])
        assert err <= 1e-4, "%s: %s max error %.3g of the range" % (path.name, name, err)
    # 3. decoding + classes on TF.js's raw outputs
    raw = tmp_path / "raw.npz"
    np.savez(raw, enc=want[1].reshape(-1, 4), logits=want[2].reshape(-1, 8))
    _, dec = run_tool(tool, "--decode", raw)
    np.testing.assert_allclose(dec["boxes"], want[3].reshape(-1, 4), rtol=0, atol=1e-6)
    np.testing.assert_allclose(dec["scores"], want[4].reshape(-1, 7), rtol=0, atol=1e-6)
    np.testing.assert_allclose(dec["max"], want["max"], rtol=0, atol=1e-6)
    # 4. NMS: the same anchors, in order
    assert dec["nms"].tolist() == want["nms"].tolist(), (dec["nms"], want["nms"])
    # 5. the whole pass: C's own proposals against TF.js's pipeline
    assert got["nms"].tolist() == want["nms"].tolist()
    h, w = img.shape[:2]
    boxes = want[3].reshape(-1, 4)
    for p, a in zip(js["proposals"], want["nms"]):
        y1, x1, y2, x2 = boxes[a]
        np.testing.assert_allclose(p["box"], [x1 * w, y1 * h, x2 * w, y2 * h], rtol=0, atol=0.05)
        assert abs(p["score"] - want["max"][a]) < 1e-5


def test_cooking_proposals(tool):
    """The two hands of the egocentric cooking photo that the palm model
    misses are among the proposals: the tongs hand (point 335, 228) at 0.89
    and the plate hand (90, 298) at 0.34, as measured in TF.js."""
    d = photos()[0]
    js, _ = run_tool(tool, d)
    def best_at(x, y):
        return max([p["score"] for p in js["proposals"] if p["box"][0] <= x <= p["box"][2] and p["box"][1] <= y <= p["box"][3]],
                   default=0)
    assert best_at(335, 228) > 0.85 and 0.3 < best_at(90, 298) < 0.4


def test_not_the_model(tool, tmp_path):
    g = tm.Graph()
    g.placeholder("x", (1, 4, 4, 3))
    g.conv("y", "x", np.ones((1, 1, 3, 2)))
    g.write(tmp_path)
    (tmp_path / "model.json").rename(tmp_path / "handtrack.json")
    r = subprocess.run([str(tool), "--models", str(tmp_path), str(photos()[0])], capture_output=True, text=True,
                       timeout=60)
    msg = r.stderr.strip()
    assert r.returncode == 1 and "not the hand-box detector" in msg and "\n" not in msg, msg


# The default detection (hamer detect: palm passes, body pass, proposals,
# the identity merge) on the annotated photos: at least what docs/detector.md's
# table gives (found non-difficult hands, extra boxes at most), and no hand
# on the hand-free photos.
EXPECT = {"hamer_example_1.jpg": (3, 0), "hamer_example_5.jpg": (2, 0), "wilor_basketball.jpg": (2, 0),
          "wilor_cooking.jpg": (1, 0), "wilor_garden.jpg": (2, 1), "wilor_typing.jpg": (1, 0)}


def test_default_detection_photos(tmp_path):
    import skimage.data
    from conftest import HAMER_BIN
    from detect.common import annotations, score_image
    ann = annotations()
    d = photos()[0].parent
    sk = Path(skimage.data.__file__).parent
    cases = [(d / n, ann[n]["hands"]) for n in EXPECT] + [(sk / n, []) for n in ("chelsea.png", "coffee.png",
                                                                                   "astronaut.png")]
    for path, hands in cases:
        out = tmp_path / (path.name + ".json")
        r = subprocess.run([str(HAMER_BIN), "detect", "--image", str(path), "--output", str(out), "--detector",
                            str(detector_dir())], capture_output=True, text=True, timeout=600 * (4 if SANITIZE else 1))
        assert r.returncode in (0, 4), r.stderr
        got = json.loads(out.read_text())["hands"]
        if not hands:
            assert got == [], (path.name, got)
            continue
        s = score_image([h["bbox"] for h in got], [h["is_right"] for h in got], hands)
        found = sum(not hands[j]["difficult"] for j in s["pairs"])
        want_found, max_extra = EXPECT[path.name]
        assert found >= want_found and len(s["extra"]) <= max_extra, (path.name, s)
