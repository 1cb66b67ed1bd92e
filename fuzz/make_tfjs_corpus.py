#!/usr/bin/python3
"""Write the seeds of fuzz_tfjs under fuzz/corpus/tfjs/: tiny TF.js graph
models (tests/tfjs_model.py), one or two per op the compiler translates
(fused and plain convolutions and depthwise convolutions, Add with
broadcasting, Pack + Reshape upsampling, ConcatV2, Identity, Sigmoid), with
float32, uint8, uint16 and float16 weights, in fuzz_tfjs's input layout: 3
bytes of the fed shape (h, w, c: each 1 + byte % 16), a little-endian
uint32 length of model.json, model.json, then the weights. The JSON is
written compactly so the fuzzer mutates structure rather than spaces.

    /usr/bin/python3 fuzz/make_tfjs_corpus.py

Deterministic (fixed seeds); tests/c/test_tfjs.c also reads, truncates and
corrupts every seed.
"""

import json
import struct
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
import tfjs_model as tm  # noqa: E402

R = np.random.RandomState(0)


def seed(name, g, h, w, c):
    doc = json.dumps(g.json(), separators=(",", ":")).encode()
    blob = b"".join(g.chunks)
    out = HERE / "corpus" / "tfjs" / (name + ".bin")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(bytes([h - 1, w - 1, c - 1]) + struct.pack("<I", len(doc)) + doc + blob)


def conv(quant=None, act="Relu6"):
    g = tm.Graph()
    g.placeholder("x", (1, 5, 6, 3))
    g.conv("y", "x", R.randn(3, 3, 3, 4) * 0.3, R.randn(4), stride=2, act=act, quant=quant)
    return g


def plain():
    g = tm.Graph()
    g.placeholder("x", (1, 4, 4, 2))
    g.conv("a", "x", R.randn(1, 1, 2, 3), padding="VALID")
    g.conv("y", "a", R.randn(3, 3, 3, 1), depthwise=True)
    return g


def depthwise(quant=None):
    g = tm.Graph()
    g.placeholder("x", (1, 6, 5, 4))
    g.conv("y", "x", R.randn(3, 3, 4, 1), R.randn(4), act="Relu6", depthwise=True, quant=quant)
    return g


def upsample():
    g = tm.Graph()
    g.placeholder("x", (1, 2, 3, 2))
    g.node("Pack", "p1", ["x", "x"], axis={"i": "3"}, N={"i": "2"})
    g.node("Pack", "p2", ["p1", "p1"], axis={"i": "2"}, N={"i": "2"})
    g.const("s", np.array([1, 4, 6, 2], np.int32))
    g.node("Reshape", "y", ["p2", "s"])
    return g


def concat():
    g = tm.Graph()
    g.placeholder("x", (1, 3, 4, 2))
    g.const("s", np.array([1, -1, 2], np.int32))
    g.node("Reshape", "r", ["x", "s"])
    g.node("Identity", "i", ["r"])
    g.const("axis", np.array(-2, np.int32))
    g.node("ConcatV2", "c", ["r", "i", "axis"], N={"i": "2"})
    g.node("Sigmoid", "y", ["c"])
    return g


def add():
    g = tm.Graph()
    g.placeholder("x", (1, 3, 3, 5))
    g.const("b", R.randn(5))
    g.node("AddV2", "y", ["x", "b"])
    return g


if __name__ == "__main__":
    seed("conv_relu6", conv(), 5, 6, 3)
    seed("conv_uint8", conv("uint8", act="Relu"), 5, 6, 3)
    seed("conv_uint16", conv("uint16", act=None), 5, 6, 3)
    seed("depthwise_float16", depthwise("float16"), 6, 5, 4)
    seed("depthwise", depthwise(), 6, 5, 4)
    seed("plain_conv_depthwise", plain(), 4, 4, 2)
    seed("pack_upsample", upsample(), 2, 3, 2)
    seed("concat_sigmoid", concat(), 3, 4, 2)
    seed("add_broadcast", add(), 3, 3, 5)
