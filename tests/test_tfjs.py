"""The TF.js graph-model reader and compiler (src/tfjs/) against
TensorFlow.js itself (@tensorflow/tfjs 4.22.0, CPU backend in node:
tests/tfjs/tfjs_ref.js) and a float64 numpy reference.

Per op, on small models written by tests/tfjs_model.py (odd channel counts
and sizes, SAME and VALID, strides 1 and 2, each fused activation, bias or
none, weights stored float32, uint8, uint16 and float16): max |C - tfjs| and
max |C - numpy| <= 1e-5 x max |reference|, on the active ISA, the portable
scalar path and AVX2; 2 threads give the same bits as 1.

The hand-box detector (models/handtrack.json of @vladmandic/human 3.3.6,
installed by scripts/get_detector.sh): its convolutional part from the
preprocessed 320x320 input to the raw box encodings and class logits, and
four inner nodes on the way, on three shared photos (preprocessed by TF.js
itself from the photo) and a random input: <= 1e-4 of each output's range
(measured: at most 4.7e-6), the scalar path too on the random input.

Malformed and unsupported files: one line, the right code.
"""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import tflite_ref as tr
import tfjs_model as tm
from conftest import SANITIZE, require_tool

TOL = 1e-5
TOL_MODEL = 1e-4
PRE = "StatefulPartitionedCall/map/TensorArrayV2Stack/TensorListStack"
RAW = ["StatefulPartitionedCall/concat", "StatefulPartitionedCall/concat_1"]
INNER = ["StatefulPartitionedCall/ssd_mobile_net_v2fpn_keras_feature_extractor/model/block_2_add/add",
         "StatefulPartitionedCall/ssd_mobile_net_v2fpn_keras_feature_extractor/model/out_relu/Relu6",
         "StatefulPartitionedCall/ssd_mobile_net_v2fpn_keras_feature_extractor/FeatureMaps/top_down/smoothing_1/Relu6",
         "StatefulPartitionedCall/WeightSharedConvolutionalBoxPredictor/PredictionTower/conv2d_3/activation_4/Relu6"]


@pytest.fixture(scope="module")
def tool():
    return require_tool("tool_tflite_run")


@pytest.fixture(scope="module")
def ref():
    why = tm.ref_problem()
    if why:
        pytest.fail(why)
    r = tm.Ref()
    yield r
    r.close()


def rs(seed):
    return np.random.RandomState(seed)


def ohwi(w):
    return np.transpose(w, (3, 0, 1, 2))


def dw1(w):
    return w[:, :, :, 0][None]


# ---- per-op cases: build(g) -> (input array, [(node, numpy reference)]) ----

CASES = {}


def case(name):
    def reg(f):
        CASES[name] = f
        return f
    return reg


@case("fused_conv3x3_s2_same_relu6")
def _(g):
    x = rs(1).randn(1, 9, 11, 5).astype(np.float32)
    w, b = rs(2).randn(3, 3, 5, 7) * 0.3, rs(3).randn(7)
    g.placeholder("x", x.shape)
    g.conv("y", "x", w, b, stride=2, act="Relu6")
    return x, [("y", tr.conv2d(x, ohwi(g.values["y/w"]), g.values["y/b"], 2, 2, "SAME", "RELU6"))]


@case("conv1x1_valid_nobias")
def _(g):
    x = rs(4).randn(1, 6, 5, 17).astype(np.float32)
    w = rs(5).randn(1, 1, 17, 9) * 0.2
    g.placeholder("x", x.shape)
    g.conv("y", "x", w, padding="VALID")
    return x, [("y", tr.conv2d(x, ohwi(g.values["y/w"]), None, 1, 1, "VALID"))]


@case("fused_conv5x5_valid_relu")
def _(g):
    x = rs(6).randn(1, 8, 7, 3).astype(np.float32)
    w, b = rs(7).randn(5, 5, 3, 4) * 0.2, rs(8).randn(4)
    g.placeholder("x", x.shape)
    g.conv("y", "x", w, b, padding="VALID", act="Relu")
    return x, [("y", tr.conv2d(x, ohwi(g.values["y/w"]), g.values["y/b"], 1, 1, "VALID", "RELU"))]


@case("fused_conv3x3_s1_biasonly")
def _(g):
    x = rs(9).randn(1, 7, 7, 6).astype(np.float32)
    w, b = rs(10).randn(3, 3, 6, 5) * 0.3, rs(11).randn(5)
    g.placeholder("x", x.shape)
    g.conv("y", "x", w, b)
    return x, [("y", tr.conv2d(x, ohwi(g.values["y/w"]), g.values["y/b"], 1, 1, "SAME"))]


@case("depthwise3x3_same_nobias")
def _(g):
    x = rs(12).randn(1, 9, 8, 19).astype(np.float32)
    w = rs(13).randn(3, 3, 19, 1)
    g.placeholder("x", x.shape)
    g.conv("y", "x", w, depthwise=True)
    return x, [("y", tr.depthwise(x, dw1(g.values["y/w"]), None, 1, 1, "SAME"))]


@case("fused_depthwise3x3_s2_relu6")
def _(g):
    x = rs(14).randn(1, 11, 10, 24).astype(np.float32)
    w, b = rs(15).randn(3, 3, 24, 1), rs(16).randn(24)
    g.placeholder("x", x.shape)
    g.conv("y", "x", w, b, stride=2, act="Relu6", depthwise=True)
    return x, [("y", tr.depthwise(x, dw1(g.values["y/w"]), g.values["y/b"], 2, 2, "SAME", "RELU6"))]


@case("depthwise5x5_valid")
def _(g):
    x = rs(17).randn(1, 9, 9, 7).astype(np.float32)
    w = rs(18).randn(5, 5, 7, 1)
    g.placeholder("x", x.shape)
    g.conv("y", "x", w, padding="VALID", depthwise=True)
    return x, [("y", tr.depthwise(x, dw1(g.values["y/w"]), None, 1, 1, "VALID"))]


@case("add_broadcast_identity_sigmoid")
def _(g):
    x = rs(19).randn(1, 5, 6, 4).astype(np.float32)
    c = rs(20).randn(4)
    g.placeholder("x", x.shape)
    g.const("c", c)
    g.node("AddV2", "a", ["x", "c"], T={"type": "DT_FLOAT"})
    g.node("Identity", "i", ["a"], T={"type": "DT_FLOAT"})
    g.node("Sigmoid", "y", ["i"], T={"type": "DT_FLOAT"})
    a = x.astype(np.float64) + g.values["c"]
    return x, [("a", a), ("y", 1 / (1 + np.exp(-a)))]


@case("nearest_upsampling_pack_reshape_add")
def _(g):
    x = rs(21).randn(1, 3, 4, 5).astype(np.float32)
    w, b = rs(22).randn(1, 1, 5, 5) * 0.3, rs(23).randn(5)
    g.placeholder("x", x.shape)
    g.conv("c", "x", w, b)
    g.node("Pack", "p1", ["c", "c"], axis={"i": "3"}, N={"i": "2"}, T={"type": "DT_FLOAT"})
    g.node("Pack", "p2", ["p1", "p1"], axis={"i": "2"}, N={"i": "2"}, T={"type": "DT_FLOAT"})
    g.const("shape", np.array([1, 6, 8, 5], np.int32))
    g.node("Reshape", "up", ["p2", "shape"], T={"type": "DT_FLOAT"})
    big = rs(24).randn(1, 6, 8, 5)
    g.const("big", big)
    g.node("AddV2", "y", ["up", "big"], T={"type": "DT_FLOAT"})
    c = tr.conv2d(x, ohwi(g.values["c/w"]), g.values["c/b"], 1, 1, "SAME")
    up = c.repeat(2, axis=1).repeat(2, axis=2)
    return x, [("up", up), ("y", up + g.values["big"])]


@case("concat_negative_axis_reshape_infer")
def _(g):
    x = rs(25).randn(1, 4, 6, 3).astype(np.float32)
    w1, w2 = rs(26).randn(1, 1, 3, 8) * 0.4, rs(27).randn(3, 3, 3, 4) * 0.3
    g.placeholder("x", x.shape)
    g.conv("c1", "x", w1, padding="VALID")
    g.conv("c2", "x", w2)
    g.const("s1", np.array([1, -1, 4], np.int32))
    g.const("s2", np.array([1, -1, 4], np.int32))
    g.node("Reshape", "r1", ["c1", "s1"])
    g.node("Reshape", "r2", ["c2", "s2"])
    g.const("axis", np.array(-2, np.int32))
    g.node("ConcatV2", "y", ["r1", "r2", "axis"], N={"i": "2"})
    a = tr.conv2d(x, ohwi(g.values["c1/w"]), None, 1, 1, "VALID").reshape(1, -1, 4)
    b = tr.conv2d(x, ohwi(g.values["c2/w"]), None, 1, 1, "SAME").reshape(1, -1, 4)
    return x, [("y", np.concatenate([a, b], axis=1))]


for q in ("uint8", "uint16", "float16"):
    def _quant(g, q=q):
        x = rs(28).randn(1, 7, 6, 9).astype(np.float32)
        w, b = rs(29).randn(3, 3, 9, 6) * 0.2, rs(30).randn(6)
        dw, db = rs(31).randn(3, 3, 6, 1), rs(32).randn(6)
        g.placeholder("x", x.shape)
        g.conv("c", "x", w, b, act="Relu6", quant=q)
        g.conv("y", "c", dw, db, stride=2, depthwise=True, quant=q)
        c = tr.conv2d(x, ohwi(g.values["c/w"]), g.values["c/b"], 1, 1, "SAME", "RELU6")
        return x, [("y", tr.depthwise(c, dw1(g.values["y/w"]), g.values["y/b"], 2, 2, "SAME"))]
    CASES["weights_" + q] = _quant


def within(got, want, what, tol=TOL):
    assert got.shape == want.shape, "%s: shape %s, reference %s" % (what, got.shape, want.shape)
    err = tr.max_rel_err(got, want)
    assert err <= tol, "%s: max error %.3g of max |reference| (bound %g)" % (what, err, tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name, tool, ref, tmp_path):
    g = tm.Graph()
    x, outs = CASES[name](g)
    model = g.write(tmp_path)
    fetch = [n for n, _ in outs]
    want = ref.run(model, x, fetch)
    got = tm.run_c(tool, model, x, "x", fetch)
    for k, (node, npref) in enumerate(outs):
        within(want[k], npref, "%s: tfjs against numpy at %s" % (name, node))
        within(got[k], want[k], "%s: C against tfjs at %s" % (name, node))
        within(got[k], npref, "%s: C against numpy at %s" % (name, node))
    for isa in [] if SANITIZE else tr.other_isas():
        for k, a in enumerate(tm.run_c(tool, model, x, "x", fetch, isa=isa)):
            within(a, want[k], "%s: C (%s) against tfjs at %s" % (name, isa, outs[k][0]))
    for a, b in zip(got, tm.run_c(tool, model, x, "x", fetch, threads=2)):
        assert np.array_equal(a, b), "%s: 2 threads differ from 1" % name


# ---- the hand-box detector's network ----

def detector_dir():
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(os.environ.get("HOME", "/nonexistent"), ".local", "share")
    d = Path(os.environ.get("HAMER_DETECTOR_DIR") or os.path.join(xdg, "hamer", "detector"))
    if not (d / "handtrack.json").is_file() or not (d / "handtrack.bin").is_file():
        pytest.fail("%s lacks handtrack.json / handtrack.bin: run scripts/get_detector.sh (or set HAMER_DETECTOR_DIR)" % d)
    return d


def photos():
    d = Path(os.environ.get("HAMER_SHARED_IMAGES") or tr.REPO.parent / "shared" / "images")
    if not (d / "hands.json").is_file():
        pytest.fail("test photos not found in %s (set HAMER_SHARED_IMAGES)" % d)
    # three of the six (TF.js takes 3-4 s a photo): a WiLoR photo, a HaMeR one, a large one
    return [d / n for n in ("wilor_cooking.jpg", "hamer_example_1.jpg", "wilor_basketball.jpg")]


def rgb_int32(path):
    import cv2
    im = cv2.imread(str(path), cv2.IMREAD_COLOR)
    return np.ascontiguousarray(im[None, :, :, ::-1]).astype(np.int32)


def range_err(got, want):
    return tr.max_rel_err(got, want, float(want.max() - want.min()) or 1.0)


@pytest.mark.slow
def test_handtrack_network(tool, ref):
    """Photo -> TF.js's own preprocessing (the model's resize to 320x320
    and scaling to [-1, 1]) -> C and TF.js from there on the same tensor."""
    model = detector_dir() / "handtrack.json"
    fetch = RAW + INNER
    runs = []
    for p in photos():
        r = ref.run(model, rgb_int32(p), [PRE] + fetch)
        runs.append((p.name, r[0], [r[k + 1] for k in range(len(fetch))]))
    x = rs(33).uniform(-1, 1, (1, 320, 320, 3)).astype(np.float32)
    want = ref.run(model, x, fetch, feed=PRE)
    runs.append(("random", x, [want[k] for k in range(len(fetch))]))
    worst = 0.0
    for name, x, want in runs:
        isas = [None] if SANITIZE or name != "random" else [None, "scalar"]
        for isa in isas:
            got = tm.run_c(tool, model, x, PRE, fetch, isa=isa)
            for k, node in enumerate(fetch):
                err = range_err(got[k], want[k])
                worst = max(worst, err)
                assert err <= TOL_MODEL, "%s (isa %s) at %s: max error %.3g of the range" % (name, isa, node, err)
    print("\nhandtrack network, C against TF.js: worst %.3g of an output's range" % worst)


# ---- malformed and unsupported ----

def tiny():
    g = tm.Graph()
    g.placeholder("x", (1, 4, 4, 3))
    g.conv("y", "x", rs(40).randn(3, 3, 3, 2), rs(41).randn(2), act="Relu6")
    return g


def write(tmp_path, doc, blob):
    (tmp_path / "w.bin").write_bytes(blob)
    p = tmp_path / "model.json"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def mutate(f):
    def m(tmp_path):
        g = tiny()
        doc, blob = g.json(), b"".join(g.chunks)
        r = f(doc, blob)
        if r is not None:
            doc, blob = r
        return write(tmp_path, doc, blob)
    return m


ERRORS = {
    "not json": (mutate(lambda d, b: ("{\"modelTopology\": [", b)), "not JSON"),
    "no topology": (mutate(lambda d, b: ({"weightsManifest": d["weightsManifest"]}, b)), "modelTopology"),
    "weights short": (mutate(lambda d, b: (d, b[:-1])), "weight files"),
    "weights long": (mutate(lambda d, b: (d, b + b"\0")), "the weights take"),
    "duplicate node": (mutate(lambda d, b: d["modelTopology"]["node"].append(dict(d["modelTopology"]["node"][0]))),
                       "defined twice"),
    "unknown input": (mutate(lambda d, b: d["modelTopology"]["node"][-1]["input"].__setitem__(0, "nowhere")),
                      "names no node"),
    "bad dtype": (mutate(lambda d, b: d["weightsManifest"][0]["weights"][0].__setitem__("dtype", "complex64")),
                  "not supported"),
    "negative dim": (mutate(lambda d, b: d["weightsManifest"][0]["weights"][0].__setitem__("shape", [3, -3, 3, 2])),
                     "dimension"),
    "huge dim": (mutate(lambda d, b: d["weightsManifest"][0]["weights"][0].__setitem__("shape", [1 << 30])),
                 "dimension"),
    "path traversal": (mutate(lambda d, b: d["weightsManifest"][0].__setitem__("paths", ["../w.bin"])),
                       "plain file name"),
    "unsupported op": (mutate(lambda d, b: d["modelTopology"]["node"][-1].__setitem__("op", "MatMul")),
                       "op MatMul is not supported"),
    "fused op": (mutate(lambda d, b: d["modelTopology"]["node"][-1]["attr"]["fused_ops"]["list"].__setitem__(
        "s", [tm.b64("BiasAdd"), tm.b64("Elu")])), "fused ops BiasAdd, Elu"),
    "dilation": (mutate(lambda d, b: d["modelTopology"]["node"][-1]["attr"].__setitem__("dilations",
                                                                                      tm.ints([1, 2, 2, 1]))),
                 "dilation"),
    "cycle": (mutate(lambda d, b: d["modelTopology"]["node"].extend([
        {"name": "p", "op": "AddV2", "input": ["q", "x"]}, {"name": "q", "op": "AddV2", "input": ["p", "y"]}])),
        "cycle"),
    "bad padding attr": (mutate(lambda d, b: d["modelTopology"]["node"][-1]["attr"].__setitem__("padding", {"s": "%%"})),
                         "base64"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors(name, tool, tmp_path):
    make, fragment = ERRORS[name]
    model = make(tmp_path)
    fetch = ("q",) if name == "cycle" else ("y",)
    rc, err = tm.run_c_error(tool, model, fetch=fetch)
    msg = err.strip()
    assert rc == 1 and "\n" not in msg and fragment in msg, (rc, msg)


def test_missing_and_unused(tool, tmp_path):
    model = tiny().write(tmp_path)
    rc, err = tm.run_c_error(tool, model, feed="nowhere")
    assert rc == 1 and "no node named 'nowhere'" in err
    rc, err = tm.run_c_error(tool, model, fetch=("y/w",))
    assert rc == 1 and "constant" in err
    (tmp_path / "w.bin").unlink()
    rc, err = tm.run_c_error(tool, model)
    assert rc == 1 and "cannot open" in err and "w.bin" in err
