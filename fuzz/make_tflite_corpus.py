#!/usr/bin/python3
"""Write the seeds of fuzz_tflite under fuzz/corpus/tflite/: tiny valid
.tflite models (tests/tflite_fb.py), one or two per op the executor runs,
each option value the MediaPipe models use, fp16 weights behind DEQUANTIZE,
external buffers, and a small palm-style graph. A few hundred bytes to a
few KB each, so the fuzzer mutates structure rather than weights.

    /usr/bin/python3 fuzz/make_tflite_corpus.py

Deterministic (fixed seeds); tests/c/test_tflite.c also loads, truncates
and corrupts every seed.
"""

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
import tflite_fb as fb  # noqa: E402

R = np.random.RandomState(0)


def f32(*shape):
    return R.randn(*shape).astype(np.float32)


def fp16_const(m, a):
    c = m.const(a.astype(np.float16))
    d = m.tensor(a.shape)
    m.op("DEQUANTIZE", [c], [d], version=2)
    return d


def conv():
    m = fb.ModelBuilder()
    x = m.input([1, 5, 6, 3])
    y = m.tensor([1, 3, 3, 4])
    m.op("CONV_2D", [x, fp16_const(m, f32(4, 3, 3, 3)), fp16_const(m, f32(4))], [y], "Conv2DOptions",
         padding="SAME", stride_w=2, stride_h=2, fused_activation_function="RELU6")
    z = m.tensor([1, 3, 3, 2])
    m.op("CONV_2D", [y, m.const(f32(2, 1, 1, 4)), m.const(f32(2))], [z], "Conv2DOptions", padding="VALID",
         stride_w=1, stride_h=1)
    m.output(z)
    return m


def depthwise():
    m = fb.ModelBuilder()
    x = m.input([1, 6, 5, 3])
    y = m.tensor([1, 6, 5, 3])
    m.op("DEPTHWISE_CONV_2D", [x, m.const(f32(1, 3, 3, 3)), m.const(f32(3))], [y], "DepthwiseConv2DOptions",
         padding="SAME", stride_w=1, stride_h=1, depth_multiplier=1, fused_activation_function="RELU")
    z = m.tensor([1, 1, 1, 3])
    m.op("DEPTHWISE_CONV_2D", [y, m.const(f32(1, 5, 5, 3))], [z], "DepthwiseConv2DOptions", padding="VALID",
         stride_w=2, stride_h=2, depth_multiplier=1)
    m.output(z)
    return m


def pool_pad():
    m = fb.ModelBuilder()
    x = m.input([1, 5, 4, 2])
    y = m.tensor([1, 3, 2, 2])
    m.op("MAX_POOL_2D", [x], [y], "Pool2DOptions", padding="SAME", stride_w=2, stride_h=2, filter_width=2,
         filter_height=2)
    z = m.tensor([1, 3, 2, 4])
    m.op("PAD", [y, m.const(np.array([[0, 0], [0, 0], [0, 0], [0, 2]], np.int32))], [z], "PadOptions")
    m.output(z)
    return m


def add_prelu():
    m = fb.ModelBuilder()
    a = m.input([1, 2, 3, 4])
    b = m.input([3, 1])
    y = m.tensor([1, 2, 3, 4])
    m.op("ADD", [a, b], [y], "AddOptions", fused_activation_function="RELU_N1_TO_1")
    z = m.tensor([1, 2, 3, 4])
    m.op("PRELU", [y, fp16_const(m, f32(1, 1, 4))], [z])
    m.output(z)
    return m


def resize_concat_reshape():
    m = fb.ModelBuilder()
    x = m.input([1, 2, 2, 3])
    y = m.tensor([1, 4, 4, 3])
    m.op("RESIZE_BILINEAR", [x, m.const(np.array([4, 4], np.int32))], [y], "ResizeBilinearOptions", version=3,
         half_pixel_centers=True)
    r1 = m.tensor([1, 16, 3])
    m.op("RESHAPE", [y, m.const(np.array([1, -1, 3], np.int32))], [r1], "ReshapeOptions")
    r2 = m.tensor([1, 4, 3])
    m.op("RESHAPE", [x], [r2], "ReshapeOptions", new_shape=[1, 4, 3])
    c = m.tensor([1, 20, 3])
    m.op("CONCATENATION", [r1, r2], [c], "ConcatenationOptions", axis=1)
    m.output(c)
    return m


def mean_fc_logistic():
    m = fb.ModelBuilder()
    x = m.input([1, 3, 3, 5])
    y = m.tensor([1, 5])
    m.op("MEAN", [x, m.const(np.array([1, 2], np.int32))], [y], "ReducerOptions", keep_dims=False)
    z = m.tensor([1, 2])
    m.op("FULLY_CONNECTED", [y, fp16_const(m, f32(2, 5)), m.const(f32(2))], [z], "FullyConnectedOptions")
    p = m.tensor([1, 2])
    m.op("LOGISTIC", [z], [p])
    m.output(p)
    m.output(z)
    return m


def resize_align():
    m = fb.ModelBuilder()
    x = m.input([1, 3, 2, 1])
    y = m.tensor([1, 5, 3, 1])
    m.op("RESIZE_BILINEAR", [x, m.const(np.array([5, 3], np.int32))], [y], "ResizeBilinearOptions",
         align_corners=True)
    z = m.tensor([1, 5, 3, 1])
    m.op("ADD", [y, m.const(np.float32(1.5))], [z], "AddOptions")
    m.output(z)
    return m


def palm_block():
    m = fb.ModelBuilder()
    x = m.input([1, 8, 8, 3])
    t = m.tensor([1, 4, 4, 4])
    m.op("CONV_2D", [x, fp16_const(m, f32(4, 3, 3, 3)), fp16_const(m, f32(4))], [t], "Conv2DOptions",
         padding="SAME", stride_w=2, stride_h=2)
    p = m.tensor([1, 4, 4, 4])
    m.op("PRELU", [t, fp16_const(m, f32(1, 1, 4))], [p])
    d = m.tensor([1, 4, 4, 4])
    m.op("DEPTHWISE_CONV_2D", [p, fp16_const(m, f32(1, 3, 3, 4)), fp16_const(m, f32(4))], [d],
         "DepthwiseConv2DOptions", padding="SAME", stride_w=1, stride_h=1, depth_multiplier=1)
    q = m.tensor([1, 4, 4, 4])
    m.op("CONV_2D", [d, fp16_const(m, f32(4, 1, 1, 4)), fp16_const(m, f32(4))], [q], "Conv2DOptions",
         padding="VALID", stride_w=1, stride_h=1)
    s = m.tensor([1, 4, 4, 4])
    m.op("ADD", [q, p], [s], "AddOptions")
    h = m.tensor([1, 4, 4, 2])
    m.op("CONV_2D", [s, m.const(f32(2, 1, 1, 4)), m.const(f32(2))], [h], "Conv2DOptions", padding="VALID",
         stride_w=1, stride_h=1)
    r = m.tensor([1, 16, 2])
    m.op("RESHAPE", [h, m.const(np.array([1, -1, 2], np.int32))], [r], "ReshapeOptions")
    m.output(r)
    return m


def sparse_pose_block():
    """pose_detection's sparse fp16 1x1 conv weights (DENSIFY, DEQUANTIZE),
    a block-sparse constant, DEPTH_TO_SPACE and hand_recrop's STRIDED_SLICE."""
    m = fb.ModelBuilder()
    x = m.input([1, 2, 2, 8])
    w = (f32(8, 1, 1, 8) * (R.rand(8, 1, 1, 8) < 0.3)).astype(np.float16)
    sp = m.sparse_const(w, formats=[fb.DENSE, fb.DENSE, fb.DENSE, fb.SPARSE_CSR], seg_kind="u8", idx_kind="u16")
    dn = m.tensor(w.shape, np.float16)
    m.op("DENSIFY", [sp], [dn])
    wf = m.tensor(w.shape)
    m.op("DEQUANTIZE", [dn], [wf], version=3)
    c = m.tensor([1, 2, 2, 8])
    m.op("CONV_2D", [x, wf, m.const(f32(8))], [c], "Conv2DOptions", padding="VALID", stride_w=1, stride_h=1)
    b = f32(4, 4, 2) * np.repeat(R.rand(4, 2, 2) < 0.5, 2, axis=1)
    bs = m.sparse_const(b.astype(np.float32), [0, 1, 2, 3], block_map=(1,), block_sizes=(2,),
                        formats=[fb.DENSE, fb.SPARSE_CSR, fb.DENSE, fb.DENSE])
    bd = m.tensor([4, 4, 2])
    m.op("DENSIFY", [bs], [bd])
    d = m.tensor([1, 4, 4, 2])
    m.op("DEPTH_TO_SPACE", [c], [d], "DepthToSpaceOptions", block_size=2)
    e = m.tensor([1, 4, 4, 2])
    m.op("ADD", [d, bd], [e], "AddOptions")
    y = m.tensor([1, 2, 4, 1])
    m.op("STRIDED_SLICE", [e] + [m.const(np.array(v, np.int32)) for v in ([0, 1, 0, 0], [1, 4, 4, 1], [1, 2, 1, 1])],
         [y], "StridedSliceOptions", end_mask=1)
    m.output(y)
    return m


SEEDS = {
    "conv.tflite": (conv, False),
    "depthwise.tflite": (depthwise, False),
    "pool_pad.tflite": (pool_pad, False),
    "add_prelu.tflite": (add_prelu, False),
    "resize_concat_reshape.tflite": (resize_concat_reshape, False),
    "mean_fc_logistic.tflite": (mean_fc_logistic, False),
    "resize_align.tflite": (resize_align, False),
    "palm_block.tflite": (palm_block, False),
    "palm_block_external.tflite": (palm_block, True),
    "sparse_pose_block.tflite": (sparse_pose_block, False),
}


def main():
    out = HERE / "corpus" / "tflite"
    out.mkdir(parents=True, exist_ok=True)
    for name, (make, external) in SEEDS.items():
        global R
        R = np.random.RandomState(sum(map(ord, name)))
        data = make().build(external=external)
        (out / name).write_bytes(data)
        print("%-32s %6d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
