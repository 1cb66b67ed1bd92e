"""Per-op tests of the TFLite executor (src/tflite/) on small hand-made
models (tests/tflite_fb.py writes them), checked against a float64 numpy
reference and against the real TFLite runtime (tests/detect/tflite_ref.js).

Bound: max |C - reference| <= 1e-5 * max |reference| for every output, for
both references, on the active ISA, the portable scalar path and AVX2, and the
result is the same with 1 and 2 threads. The shapes are odd on purpose:
channel counts not multiples of 16, odd spatial sizes, SAME and VALID
padding, strides 1 and 2, each fused activation the models use and the
others TFLite defines, fp16 weights through DEQUANTIZE, broadcasting.

Needs the built tests/c/tool_tflite_run ($HAMER_BUILD) and the reference
runtime (cd tests/detect && npm install --ignore-scripts --legacy-peer-deps).
"""

import numpy as np
import pytest

import tflite_fb as fb
import tflite_ref as tr
from conftest import require_tool

TOL = 1e-5


@pytest.fixture(scope="session")
def tool():
    return require_tool("tool_tflite_run")


@pytest.fixture(scope="session")
def ref_runtime():
    why = tr.ref_runtime_problem()
    if why:
        pytest.fail(why)


def rs(seed):
    return np.random.RandomState(seed)


def weight(m, w, fp16):
    """A constant weight tensor, fp32 or fp16 behind a DEQUANTIZE (as the
    MediaPipe models store them); returns (tensor, the values as used)."""
    if not fp16:
        return m.const(w), w.astype(np.float64)
    h = w.astype(np.float16)
    c = m.const(h)
    d = m.tensor(w.shape)
    m.op("DEQUANTIZE", [c], [d], version=2)
    return d, h.astype(np.float64)


def one_op(build):
    """A case from build(m) -> (inputs, outputs as (tensor, reference))."""
    def case():
        m = fb.ModelBuilder()
        inputs, outs = build(m)
        for t, _ in outs:
            m.output(t)
        case.expect_runs = getattr(m, "expect_runs", None)
        return m.build(), inputs, [r for _, r in outs]
    return case


CASES = {}
# Cases the reference runtime refuses while this executor runs them: checked
# against numpy only. (The runtime's float CONV_2D insists on a bias.)
NUMPY_ONLY = set()


def case(name, runtime=True):
    def reg(f):
        CASES[name] = one_op(f)
        if not runtime:
            NUMPY_ONLY.add(name)
        return f
    return reg


# ---- CONV_2D -----------------------------------------------------------------

def conv_case(name, shape, o, k, s, padding, a="NONE", bias="yes", fp16=False, seed=0, scale=1.0):
    @case(name, runtime=bias == "yes")
    def build(m):
        r = rs(seed)
        n, h, w_, c = shape
        kh, kw = k if isinstance(k, tuple) else (k, k)
        sh, sw = s if isinstance(s, tuple) else (s, s)
        x = r.randn(*shape).astype(np.float32)
        w = (scale * r.randn(o, kh, kw, c) / np.sqrt(kh * kw * c)).astype(np.float32)
        b = r.randn(o).astype(np.float32)
        xi = m.input(shape)
        wi, wv = weight(m, w, fp16)
        ins = [xi, wi]
        if bias == "yes":
            bi, bv = weight(m, b, fp16)
            ins.append(bi)
        elif bias == "omitted":
            ins.append(-1)
        ref = tr.conv2d(x, wv, bv if bias == "yes" else None, sh, sw, padding, a)
        y = m.tensor(ref.shape)
        m.op("CONV_2D", ins, [y], "Conv2DOptions", padding=padding, stride_w=sw, stride_h=sh,
             fused_activation_function=a)
        return [x], [(y, ref)]


conv_case("conv_3x3_s1_same", (1, 9, 11, 5), 7, 3, 1, "SAME")
conv_case("conv_5x5_s2_same_relu_stem", (1, 13, 13, 3), 32, 5, 2, "SAME", "RELU", fp16=True)
conv_case("conv_1x1_direct_relu6", (1, 8, 10, 19), 33, 1, 1, "VALID", "RELU6", scale=6.0)
conv_case("conv_1x1_s2", (1, 9, 9, 6), 5, 1, 2, "VALID")
conv_case("conv_3x3_s2_valid_relu_n1", (1, 10, 7, 4), 6, 3, 2, "VALID", "RELU_N1_TO_1", scale=2.0)
conv_case("conv_no_bias_batch2", (2, 6, 5, 3), 4, 3, 1, "SAME", bias="no")
conv_case("conv_2x3_strides_1x2_bias_omitted", (1, 6, 6, 3), 4, (2, 3), (1, 2), "SAME", bias="omitted")
conv_case("conv_3x3_chunked", (1, 32, 30, 17), 40, 3, 1, "SAME", "RELU")
conv_case("conv_1x1_chunked_fp16", (1, 30, 30, 16), 24, 1, 1, "SAME", fp16=True)
# >= 8 chunks of 192 rows: the chunked im2col path on 2 threads too.
conv_case("conv_3x3_chunked_two_threads", (1, 40, 41, 5), 20, 3, 1, "SAME", "RELU6", scale=4.0)
conv_case("conv_1x1_s2_chunked", (2, 70, 50, 7), 9, 1, 2, "VALID")
conv_case("conv_3x3_s2_same_odd", (1, 7, 9, 2), 3, 3, 2, "SAME", "RELU6", scale=5.0)

# ---- DEPTHWISE_CONV_2D -------------------------------------------------------


def dw_case(name, shape, k, s, padding, a="NONE", bias=True, fp16=False, seed=1, scale=1.0):
    @case(name)
    def build(m):
        r = rs(seed)
        c = shape[3]
        x = r.randn(*shape).astype(np.float32)
        w = (scale * r.randn(1, k, k, c) / k).astype(np.float32)
        b = r.randn(c).astype(np.float32)
        xi = m.input(shape)
        wi, wv = weight(m, w, fp16)
        ins = [xi, wi]
        bv = None
        if bias:
            bi, bv = weight(m, b, fp16)
            ins.append(bi)
        ref = tr.depthwise(x, wv, bv, s, s, padding, a)
        y = m.tensor(ref.shape)
        m.op("DEPTHWISE_CONV_2D", ins, [y], "DepthwiseConv2DOptions", padding=padding, stride_w=s, stride_h=s,
             depth_multiplier=1, fused_activation_function=a)
        return [x], [(y, ref)]


dw_case("dw_3x3_s1_same_relu6", (1, 9, 11, 17), 3, 1, "SAME", "RELU6", scale=6.0)
dw_case("dw_5x5_s2_same", (1, 13, 13, 35), 5, 2, "SAME", fp16=True)
dw_case("dw_5x5_s1_valid_relu_72ch", (1, 12, 21, 72), 5, 1, "VALID", "RELU")
dw_case("dw_3x3_s2_valid_1ch", (1, 10, 9, 1), 3, 2, "VALID")
dw_case("dw_5x5_s1_same_no_bias_batch2_wide", (2, 7, 37, 20), 5, 1, "SAME", bias=False)
dw_case("dw_3x3_s2_same_relu_n1_wide", (1, 6, 40, 16), 3, 2, "SAME", "RELU_N1_TO_1", fp16=True, scale=3.0)
dw_case("dw_5x5_whole_input", (1, 5, 5, 3), 5, 1, "VALID")
dw_case("dw_5x5_s1_same_palm_like", (1, 24, 24, 128), 5, 1, "SAME")
# Few rows, many channels: tasks split the channels too.
dw_case("dw_5x5_small_map_many_channels_relu6", (1, 7, 7, 200), 5, 1, "SAME", "RELU6", scale=4.0)
dw_case("dw_3x3_s2_small_map_batch2", (2, 6, 9, 136), 3, 2, "SAME", fp16=True)
# Row tiling: one tile exactly; a last tile overlapping the one before
# (stride 2, both edges); a filter without a register-tiled kernel (7x7:
# generic interior tiles, per-pixel edges).
dw_case("dw_3x3_s1_same_width_8", (1, 4, 8, 24), 3, 1, "SAME", "RELU")
dw_case("dw_5x5_s2_same_width_17_overlap", (1, 6, 17, 40), 5, 2, "SAME")
dw_case("dw_3x3_s2_valid_width_20_overlap", (1, 5, 20, 16), 3, 2, "VALID", fp16=True)
dw_case("dw_7x7_s1_same_generic", (1, 5, 30, 20), 7, 1, "SAME", "RELU6", scale=4.0)

# ---- MAX_POOL_2D -------------------------------------------------------------


def pool_case(name, shape, f, s, padding, a="NONE", seed=2):
    @case(name)
    def build(m):
        x = rs(seed).randn(*shape).astype(np.float32)
        fh, fw = f
        ref = tr.maxpool(x, fh, fw, s, s, padding, a)
        xi = m.input(shape)
        y = m.tensor(ref.shape)
        m.op("MAX_POOL_2D", [xi], [y], "Pool2DOptions", padding=padding, stride_w=s, stride_h=s, filter_width=fw,
             filter_height=fh, fused_activation_function=a)
        return [x], [(y, ref)]


pool_case("maxpool_2x2_s2_same_odd", (1, 7, 9, 13), (2, 2), 2, "SAME")
pool_case("maxpool_2x2_s2_valid", (1, 8, 8, 6), (2, 2), 2, "VALID")
pool_case("maxpool_3x3_s2_same_relu", (1, 9, 10, 5), (3, 3), 2, "SAME", "RELU")
pool_case("maxpool_3x2_s1_valid", (1, 5, 7, 3), (3, 2), 1, "VALID")

# ---- ADD, PRELU --------------------------------------------------------------


def add_case(name, sa, sb, a="NONE", b_const=False, seed=3, scale=1.0):
    @case(name)
    def build(m):
        r = rs(seed)
        x = np.asarray(scale * r.randn(*sa), np.float32)
        z = np.asarray(scale * r.randn(*sb), np.float32)
        xi = m.input(sa)
        zi = m.const(z) if b_const else m.input(sb)
        ref = tr.act(x.astype(np.float64) + z, a)
        y = m.tensor(ref.shape)
        m.op("ADD", [xi, zi], [y], "AddOptions", fused_activation_function=a)
        return ([x] if b_const else [x, z]), [(y, ref)]


add_case("add_same_shape", (1, 6, 7, 19), (1, 6, 7, 19))
add_case("add_same_shape_relu6", (1, 6, 7, 19), (1, 6, 7, 19), "RELU6", scale=5.0)
add_case("add_broadcast_channel_const", (1, 5, 7, 3), (3,), "RELU", b_const=True)
add_case("add_broadcast_both", (2, 1, 4, 3), (1, 5, 1, 3))
add_case("add_scalar_const", (1, 4, 4, 2), (), "RELU_N1_TO_1", b_const=True)
add_case("add_large_parallel_relu", (1, 96, 96, 32), (1, 96, 96, 32), "RELU")


def prelu_case(name, shape, ashape, fp16=False, seed=4):
    @case(name)
    def build(m):
        r = rs(seed)
        x = r.randn(*shape).astype(np.float32)
        al = r.uniform(-0.5, 1.5, ashape).astype(np.float32)
        xi = m.input(shape)
        ai, av = weight(m, al, fp16)
        ref = tr.prelu(x, av)
        y = m.tensor(ref.shape)
        m.op("PRELU", [xi, ai], [y])
        return [x], [(y, ref)]


prelu_case("prelu_alpha_11c_fp16", (1, 6, 7, 19), (1, 1, 19), fp16=True)
prelu_case("prelu_alpha_c", (1, 6, 7, 19), (19,))
prelu_case("prelu_alpha_full", (1, 3, 4, 5), (1, 3, 4, 5))
prelu_case("prelu_large_parallel", (1, 48, 48, 64), (1, 1, 64))

# ---- PAD, RESIZE_BILINEAR, RESHAPE, CONCATENATION, MEAN ---------------------------


def pad_case(name, shape, pads, seed=5):
    @case(name)
    def build(m):
        x = rs(seed).randn(*shape).astype(np.float32)
        ref = np.pad(x.astype(np.float64), pads)
        xi = m.input(shape)
        pi = m.const(np.array(pads, np.int32))
        y = m.tensor(ref.shape)
        m.op("PAD", [xi, pi], [y], "PadOptions")
        return [x], [(y, ref)]


pad_case("pad_4d_all_axes", (1, 5, 6, 7), [[0, 0], [1, 2], [0, 3], [0, 9]])
pad_case("pad_channels_palm_like", (1, 48, 48, 32), [[0, 0], [0, 0], [0, 0], [0, 32]])
pad_case("pad_2d", (3, 4), [[1, 0], [2, 1]])


def resize_case(name, shape, size, align=False, half=False, seed=6):
    @case(name)
    def build(m):
        x = rs(seed).randn(*shape).astype(np.float32)
        ref = tr.resize_bilinear(x, size[0], size[1], align, half)
        xi = m.input(shape)
        si = m.const(np.array(size, np.int32))
        y = m.tensor(ref.shape)
        m.op("RESIZE_BILINEAR", [xi, si], [y], "ResizeBilinearOptions", version=3, align_corners=align,
             half_pixel_centers=half)
        return [x], [(y, ref)]


resize_case("resize_x2_half_pixel", (1, 6, 6, 5), (12, 12), half=True)
resize_case("resize_align_corners", (1, 5, 7, 3), (8, 11), align=True)
resize_case("resize_down_plain", (1, 9, 6, 4), (4, 5))
resize_case("resize_mixed_half_pixel", (1, 4, 4, 2), (9, 3), half=True)
resize_case("resize_palm_like", (2, 6, 6, 40), (12, 12), half=True)


@case("reshape_shape_tensor_then_add")
def _(m):
    x = rs(7).randn(1, 4, 4, 6).astype(np.float32)
    xi = m.input(x.shape)
    si = m.const(np.array([1, -1, 3], np.int32))
    t = m.tensor([1, 32, 3])
    m.op("RESHAPE", [xi, si], [t], "ReshapeOptions")
    c = rs(8).randn(3).astype(np.float32)
    y = m.tensor([1, 32, 3])
    m.op("ADD", [t, m.const(c)], [y], "AddOptions")
    return [x], [(y, x.reshape(1, 32, 3).astype(np.float64) + c)]


@case("reshape_new_shape_option")
def _(m):
    x = rs(9).randn(2, 3, 16).astype(np.float32)
    xi = m.input(x.shape)
    y = m.tensor([2, 48])
    m.op("RESHAPE", [xi], [y], "ReshapeOptions", new_shape=[2, 48])
    return [x], [(y, x.reshape(2, 48).astype(np.float64))]


@case("reshape_twice_both_outputs")
def _(m):
    x = rs(10).randn(1, 2, 3, 4).astype(np.float32)
    xi = m.input(x.shape)
    t = m.tensor([6, 4])
    m.op("RESHAPE", [xi], [t], "ReshapeOptions", new_shape=[6, 4])
    y = m.tensor([24])
    m.op("RESHAPE", [t, m.const(np.array([-1], np.int32))], [y], "ReshapeOptions")
    return [x], [(t, x.reshape(6, 4).astype(np.float64)), (y, x.reshape(24).astype(np.float64))]


def concat_case(name, shapes, axis, a="NONE", seed=11):
    @case(name)
    def build(m):
        xs = [(3 * rs(seed + i).randn(*s)).astype(np.float32) for i, s in enumerate(shapes)]
        ins = [m.input(s) for s in shapes]
        ref = tr.act(np.concatenate([x.astype(np.float64) for x in xs], axis=axis), a)
        y = m.tensor(ref.shape)
        m.op("CONCATENATION", ins, [y], "ConcatenationOptions", axis=axis, fused_activation_function=a)
        return xs, [(y, ref)]


concat_case("concat_axis1", [(1, 10, 3), (1, 7, 3)], 1)
concat_case("concat_axis_minus1_three", [(2, 3, 4), (2, 3, 1), (2, 3, 5)], -1)
concat_case("concat_axis0", [(1, 4), (3, 4)], 0)


def mean_case(name, shape, axes, keep, seed=14):
    @case(name)
    def build(m):
        x = rs(seed).randn(*shape).astype(np.float32)
        ref = x.astype(np.float64).mean(axis=tuple(axes), keepdims=keep)
        xi = m.input(shape)
        ai = m.const(np.array(axes, np.int32))
        y = m.tensor(ref.shape)
        m.op("MEAN", [xi, ai], [y], "ReducerOptions", keep_dims=keep)
        return [x], [(y, ref)]


mean_case("mean_hw_landmark_like", (1, 7, 7, 20), [1, 2], False)
mean_case("mean_hw_keep_dims", (1, 5, 6, 3), [1, 2], True)
mean_case("mean_last_negative_axis", (2, 3, 7), [-1], False)
mean_case("mean_axes_0_3", (2, 3, 4, 5), [0, 3], False)

# ---- FULLY_CONNECTED, LOGISTIC, DEQUANTIZE ---------------------------------------


def fc_case(name, xshape, n, a="NONE", bias=True, keep=False, fp16=False, seed=15):
    @case(name)
    def build(m):
        r = rs(seed)
        k = xshape[-1]
        x = r.randn(*xshape).astype(np.float32)
        w = (r.randn(n, k) / np.sqrt(k)).astype(np.float32)
        b = r.randn(n).astype(np.float32)
        xi = m.input(xshape)
        wi, wv = weight(m, w, fp16)
        ins = [xi, wi]
        bv = None
        if bias:
            bi, bv = weight(m, b, fp16)
            ins.append(bi)
        ref = tr.fully_connected(x, wv, bv, keep, a)
        y = m.tensor(ref.shape)
        m.op("FULLY_CONNECTED", ins, [y], "FullyConnectedOptions", fused_activation_function=a, keep_num_dims=keep)
        return [x], [(y, ref)]


fc_case("fc_bias", (1, 37), 13)
fc_case("fc_flatten_no_bias_relu", (3, 2, 10), 9, "RELU", bias=False)
fc_case("fc_keep_num_dims", (2, 3, 10), 7, keep=True)
fc_case("fc_landmark_like_fp16", (1, 1152), 63, fp16=True)
# fp16 weights of more than 4 M elements: DEQUANTIZE is folded whatever its size.
fc_case("fc_large_fp16_weights", (1, 2000), 2100, fp16=True)


@case("logistic_wide_range")
def _(m):
    x = np.concatenate([np.linspace(-100, 100, 57), [0.0, -1e-3, 88.0, -88.0, -104.0]]).astype(np.float32)
    x = x.reshape(1, -1)
    xi = m.input(x.shape)
    y = m.tensor(x.shape)
    m.op("LOGISTIC", [xi], [y])
    return [x], [(y, tr.logistic(x))]


@case("dequantize_fp16_special_values")
def _(m):
    # Subnormals, the smallest normal, the largest finite, signed zeros.
    h = np.array([0.0, -0.0, 6e-8, -6e-8, 3e-5, 6.1035e-5, 65504.0, -65504.0, 1.0 / 3, -2.5, 1e-4, 0.1],
                 np.float16)
    x = rs(16).randn(12).astype(np.float32)
    xi = m.input([12])
    c = m.const(h)
    d = m.tensor([12])
    m.op("DEQUANTIZE", [c], [d], version=2)
    y = m.tensor([12])
    m.op("ADD", [xi, d], [y], "AddOptions")
    return [x], [(y, (x + h.astype(np.float32)).astype(np.float64))]


# ---- folding and graphs ------------------------------------------------------------


@case("fold_constant_add_and_constant_output")
def _(m):
    r = rs(17)
    x = r.randn(2, 5).astype(np.float32)
    c1 = r.randn(2, 5).astype(np.float32)
    c2 = r.randn(5).astype(np.float16)
    xi = m.input(x.shape)
    d = m.tensor([5])
    m.op("DEQUANTIZE", [m.const(c2)], [d], version=2)
    s = m.tensor([2, 5])
    m.op("ADD", [m.const(c1), d], [s], "AddOptions")  # constant: folded at load
    y = m.tensor([2, 5])
    m.op("ADD", [xi, s], [y], "AddOptions", fused_activation_function="RELU")
    k = (c1.astype(np.float64) + c2.astype(np.float32))
    return [x], [(y, np.maximum(x + k, 0)), (s, k)]


@case("constant_too_large_to_fold_runs_at_invoke")
def _(m):
    r = rs(20)
    a = r.randn(2100, 1).astype(np.float32)
    b = r.randn(1, 2000).astype(np.float32)
    x = r.randn(1, 2000).astype(np.float32)
    s = m.tensor([2100, 2000])
    m.op("ADD", [m.const(a), m.const(b)], [s], "AddOptions")  # 4.2 M elements: not folded
    xi = m.input(x.shape)
    y = m.tensor([2100, 2000])
    m.op("ADD", [s, xi], [y], "AddOptions")
    return [x], [(y, a.astype(np.float64) + b + x)]


def fused_case(name, shape, o, add="before", prelu="channel", add_act="NONE", extra_reader=False, runs=1,
               seed=21):
    """CONV_2D 1x1 -> ADD (residual) -> PRELU, which the loader fuses into
    one op when it may (`runs`: the ops left to run); the residual computed
    before the conv (fusable) or after it (not), alpha per channel
    (fusable) or full-shaped (not), the conv's output read twice (not)."""
    @case(name)
    def build(m):
        m.expect_runs = runs
        r = rs(seed)
        c = shape[3]
        x = r.randn(*shape).astype(np.float32)
        xi = m.input(shape)
        w = (r.randn(o, 1, 1, c) / np.sqrt(c)).astype(np.float32)
        b = r.randn(o).astype(np.float32)
        z = r.randn(*shape[:3], o).astype(np.float32)
        zi = m.input(z.shape)
        res, vres = zi, z.astype(np.float64)
        outs = []
        if add == "before":
            res = m.tensor(z.shape)
            m.op("LOGISTIC", [zi], [res])
            vres = tr.logistic(z)
        t = m.tensor([*shape[:3], o])
        m.op("CONV_2D", [xi, m.const(w), m.const(b)], [t], "Conv2DOptions", padding="VALID", stride_w=1, stride_h=1,
             fused_activation_function="RELU")
        v = tr.conv2d(x, w, b, 1, 1, "VALID", "RELU")
        if add == "after":
            res = m.tensor(z.shape)
            m.op("LOGISTIC", [zi], [res])
            vres = tr.logistic(z)
        s_ = m.tensor([*shape[:3], o])
        m.op("ADD", [t, res], [s_], "AddOptions", fused_activation_function=add_act)
        vs = tr.act(v + vres, add_act)
        al = r.uniform(-1, 1, (1, 1, o) if prelu == "channel" else (*shape[1:3], o)).astype(np.float32)
        y = m.tensor([*shape[:3], o])
        m.op("PRELU", [s_, m.const(al)], [y])
        outs.append((y, tr.prelu(vs, al)))
        if extra_reader:
            q = m.tensor([*shape[:3], o])
            m.op("LOGISTIC", [t], [q])
            outs.append((q, tr.logistic(v)))
        return [x, z], outs


fused_case("fuse_conv_add_prelu", (1, 9, 7, 19), 21, runs=2)
fused_case("fuse_conv_add_prelu_chunked_relu6", (1, 32, 32, 16), 24, add_act="RELU6", runs=2)
fused_case("fuse_not_residual_after_conv", (1, 5, 6, 8), 9, add="after", runs=4)
fused_case("fuse_conv_add_only_full_alpha", (1, 5, 6, 8), 9, prelu="full", runs=3)
fused_case("fuse_not_conv_output_read_twice", (1, 5, 6, 8), 9, extra_reader=True, runs=5)


@case("graph_palm_block")
def _(m):
    """The shape of a palm-detector block: stem conv, PRELU, depthwise +
    pointwise with a residual, pooling with channel padding, two heads
    reshaped and concatenated; intermediate tensors share arena space."""
    r = rs(18)
    x = r.rand(1, 16, 16, 3).astype(np.float32)
    xi = m.input(x.shape)
    outs = []
    w0 = (r.randn(8, 5, 5, 3) / 5).astype(np.float32)
    b0 = r.randn(8).astype(np.float32)
    w0i, w0v = weight(m, w0, True)
    b0i, b0v = weight(m, b0, True)
    t = m.tensor([1, 8, 8, 8])
    m.op("CONV_2D", [xi, w0i, b0i], [t], "Conv2DOptions", padding="SAME", stride_w=2, stride_h=2)
    v = tr.conv2d(x, w0v, b0v, 2, 2, "SAME")
    al = r.uniform(0, 0.5, (1, 1, 8)).astype(np.float32)
    ali, alv = weight(m, al, True)
    p = m.tensor([1, 8, 8, 8])
    m.op("PRELU", [t, ali], [p])
    v = tr.prelu(v, alv)
    wd = (r.randn(1, 5, 5, 8) / 5).astype(np.float32)
    wdi, wdv = weight(m, wd, True)
    d = m.tensor([1, 8, 8, 8])
    m.op("DEPTHWISE_CONV_2D", [p, wdi, m.const(np.zeros(8, np.float32))], [d], "DepthwiseConv2DOptions",
         padding="SAME", stride_w=1, stride_h=1, depth_multiplier=1)
    vd = tr.depthwise(v, wdv, None, 1, 1, "SAME")
    w1 = (r.randn(8, 1, 1, 8) / 3).astype(np.float32)
    w1i, w1v = weight(m, w1, True)
    q = m.tensor([1, 8, 8, 8])
    m.op("CONV_2D", [d, w1i, m.const(np.zeros(8, np.float32))], [q], "Conv2DOptions", padding="VALID",
         stride_w=1, stride_h=1)
    vq = tr.conv2d(vd, w1v, None, 1, 1, "VALID")
    s = m.tensor([1, 8, 8, 8])
    m.op("ADD", [q, p], [s], "AddOptions")
    vs = vq + v
    mp = m.tensor([1, 4, 4, 8])
    m.op("MAX_POOL_2D", [s], [mp], "Pool2DOptions", padding="SAME", stride_w=2, stride_h=2, filter_width=2,
         filter_height=2)
    vm = tr.maxpool(vs, 2, 2, 2, 2, "SAME")
    pd = m.tensor([1, 4, 4, 16])
    m.op("PAD", [mp, m.const(np.array([[0, 0], [0, 0], [0, 0], [0, 8]], np.int32))], [pd], "PadOptions")
    vp = np.pad(vm, [[0, 0], [0, 0], [0, 0], [0, 8]])
    up = m.tensor([1, 8, 8, 16])
    m.op("RESIZE_BILINEAR", [pd, m.const(np.array([8, 8], np.int32))], [up], "ResizeBilinearOptions", version=3,
         half_pixel_centers=True)
    vu = tr.resize_bilinear(vp, 8, 8, half_pixel=True)
    wh = (r.randn(6, 1, 1, 16) / 4).astype(np.float32)
    h1 = m.tensor([1, 8, 8, 6])
    m.op("CONV_2D", [up, m.const(wh), m.const(np.ones(6, np.float32))], [h1], "Conv2DOptions", padding="VALID",
         stride_w=1, stride_h=1)
    vh1 = tr.conv2d(vu, wh, np.ones(6), 1, 1, "VALID")
    h2 = m.tensor([1, 4, 4, 6])
    m.op("CONV_2D", [pd, m.const(wh), m.const(np.ones(6, np.float32))], [h2], "Conv2DOptions", padding="VALID",
         stride_w=1, stride_h=1)
    vh2 = tr.conv2d(vp, wh, np.ones(6), 1, 1, "VALID")
    r1 = m.tensor([1, 128, 3])
    m.op("RESHAPE", [h1, m.const(np.array([1, -1, 3], np.int32))], [r1], "ReshapeOptions")
    r2 = m.tensor([1, 32, 3])
    m.op("RESHAPE", [h2, m.const(np.array([1, -1, 3], np.int32))], [r2], "ReshapeOptions")
    cat = m.tensor([1, 160, 3])
    m.op("CONCATENATION", [r1, r2], [cat], "ConcatenationOptions", axis=1)
    outs.append((cat, np.concatenate([vh1.reshape(1, -1, 3), vh2.reshape(1, -1, 3)], axis=1)))
    outs.append((s, vs))
    return [x], outs


@case("graph_two_inputs_output_read_later")
def _(m):
    r = rs(19)
    a = r.randn(1, 5, 5, 4).astype(np.float32)
    b = r.randn(1, 5, 5, 4).astype(np.float32)
    ai, bi = m.input(a.shape), m.input(b.shape)
    s = m.tensor(a.shape)
    m.op("ADD", [ai, bi], [s], "AddOptions")
    al = np.full((4,), 0.25, np.float32)
    p = m.tensor(a.shape)
    m.op("PRELU", [s, m.const(al)], [p])
    mn = m.tensor([1, 4])
    m.op("MEAN", [p, m.const(np.array([1, 2], np.int32))], [mn], "ReducerOptions")
    g = m.tensor([1, 4])
    m.op("LOGISTIC", [mn], [g])
    vs = a.astype(np.float64) + b
    vp = tr.prelu(vs, al)
    vm = vp.mean(axis=(1, 2))
    return [a, b], [(g, tr.logistic(vm)), (s, vs), (mn, vm)]


# ---- sparse constants (densified at load), DENSIFY ----------------------------

def sparse_weights(shape, density, seed, dtype=np.float32):
    """Random values with about `density` of them non-zero."""
    r = rs(seed)
    w = r.randn(*shape) * (r.rand(*shape) < density)
    return w.astype(dtype)


@case("sparse_fp16_conv_1x1_pose_like")
def _(m):
    # pose_detection's layout: [O,1,1,I] fp16, the last axis SPARSE_CSR
    # (uint8 segments, uint16 indices), DENSIFY then DEQUANTIZE.
    x = rs(40).randn(1, 7, 5, 24).astype(np.float32)
    w = sparse_weights((19, 1, 1, 24), 0.25, 41, np.float16)
    xi = m.input(x.shape)
    sp = m.sparse_const(w, formats=[fb.DENSE, fb.DENSE, fb.DENSE, fb.SPARSE_CSR], seg_kind="u8", idx_kind="u16")
    dn = m.tensor(w.shape, np.float16)
    m.op("DENSIFY", [sp], [dn])
    wf = m.tensor(w.shape)
    m.op("DEQUANTIZE", [dn], [wf], version=3)
    b = rs(42).randn(19).astype(np.float32)
    y = m.tensor([1, 7, 5, 19])
    m.op("CONV_2D", [xi, wf, m.const(b)], [y], "Conv2DOptions", padding="VALID", stride_w=1, stride_h=1)
    ref = np.einsum("nhwi,oi->nhwo", x.astype(np.float64), w.astype(np.float64)[:, 0, 0, :]) + b
    return [x], [(y, ref)]


def densify_add_case(name, shape, order, formats, block_map=(), block_sizes=(), seg="i32", idx="i32", density=0.3,
                     seed=43):
    @case(name)
    def build(m):
        x = rs(seed).randn(*shape).astype(np.float32)
        w = sparse_weights(shape, density, seed + 1)
        if block_map:  # whole blocks zero or not, as a block-sparse converter writes them
            w = np.zeros(shape, np.float32)
            w += sparse_weights(shape, 1.0, seed + 2)
            keep = rs(seed + 3).rand(*[s // (block_sizes[list(block_map).index(d)] if d in block_map else 1)
                                       for d, s in enumerate(shape)]) < density
            for d, bs in zip(block_map, block_sizes):
                keep = np.repeat(keep, bs, axis=d)
            w *= keep
        xi = m.input(shape)
        sp = m.sparse_const(w, order, block_map, block_sizes, formats, seg, idx)
        dn = m.tensor(shape)
        m.op("DENSIFY", [sp], [dn])
        y = m.tensor(shape)
        m.op("ADD", [xi, dn], [y], "AddOptions")
        return [x], [(y, x.astype(np.float64) + w)]


densify_add_case("densify_csr_2d_i32", (9, 13), [0, 1], [fb.DENSE, fb.SPARSE_CSR])
densify_add_case("densify_csr_both_levels_u8", (6, 11), [0, 1], [fb.SPARSE_CSR, fb.SPARSE_CSR], seg="u8", idx="u8",
                 density=0.15)
densify_add_case("densify_column_major_traversal", (7, 10), [1, 0], [fb.DENSE, fb.SPARSE_CSR], seg="u16",
                 idx="u16")
densify_add_case("densify_block_1x4", (8, 12), [0, 1, 2], [fb.DENSE, fb.SPARSE_CSR, fb.DENSE], block_map=(1,),
                 block_sizes=(4,), density=0.4)
densify_add_case("densify_3d_blocks_2x3", (4, 6, 9), [0, 1, 2, 3, 4],
                 [fb.DENSE, fb.DENSE, fb.SPARSE_CSR, fb.DENSE, fb.DENSE], block_map=(1, 2), block_sizes=(2, 3),
                 density=0.5)


@case("sparse_fp32_fc_weights_without_densify", runtime=False)
def _(m):
    # A sparse constant read directly by an op: densified at load all the same.
    # (The reference runtime's sparse FULLY_CONNECTED kernel wants its own
    # block layout and answers NaN for this one: numpy only.)
    x = rs(50).randn(3, 20).astype(np.float32)
    w = sparse_weights((7, 20), 0.3, 51)
    xi = m.input(x.shape)
    wi = m.sparse_const(w, formats=[fb.DENSE, fb.SPARSE_CSR])
    y = m.tensor([3, 7])
    m.op("FULLY_CONNECTED", [xi, wi, m.const(np.zeros(7, np.float32))], [y], "FullyConnectedOptions")
    return [x], [(y, x.astype(np.float64) @ w.astype(np.float64).T)]


# ---- DEPTH_TO_SPACE ------------------------------------------------------------

def d2s_ref(x, b):
    n, h, w, c = x.shape
    co = c // (b * b)
    return x.reshape(n, h, w, b, b, co).transpose(0, 1, 3, 2, 4, 5).reshape(n, h * b, w * b, co).astype(np.float64)


def d2s_case(name, shape, b, seed=60):
    @case(name)
    def build(m):
        x = rs(seed).randn(*shape).astype(np.float32)
        ref = d2s_ref(x, b)
        xi = m.input(shape)
        y = m.tensor(ref.shape)
        m.op("DEPTH_TO_SPACE", [xi], [y], "DepthToSpaceOptions", block_size=b)
        return [x], [(y, ref)]


d2s_case("depth_to_space_2_pose_like", (1, 7, 7, 48), 2)
d2s_case("depth_to_space_3_odd", (2, 3, 5, 18), 3)
d2s_case("depth_to_space_1", (1, 2, 3, 5), 1)


# ---- STRIDED_SLICE -----------------------------------------------------------

def slice_ref(x, begin, end, strides, begin_mask=0, end_mask=0, shrink=0, offset=False):
    """numpy's slicing with TFLite's mask rules."""
    idx = []
    for d in range(x.ndim):
        b, e, s = begin[d], end[d], strides[d]
        if offset:
            e = b + e
        if shrink >> d & 1:
            idx.append(b)
            continue
        idx.append(slice(None if begin_mask >> d & 1 else b, None if end_mask >> d & 1 else e, s))
    return x[tuple(idx)].astype(np.float64)


def slice_case(name, shape, begin, end, strides, runtime=True, seed=70, **opts):
    @case(name, runtime=runtime)
    def build(m):
        x = rs(seed).randn(*shape).astype(np.float32)
        ref = slice_ref(x, begin, end, strides, opts.get("begin_mask", 0), opts.get("end_mask", 0),
                        opts.get("shrink_axis_mask", 0), opts.get("offset", False))
        xi = m.input(shape)
        y = m.tensor(ref.shape)
        m.op("STRIDED_SLICE", [xi] + [m.const(np.array(v, np.int32)) for v in (begin, end, strides)], [y],
             "StridedSliceOptions", **opts)
        return [x], [(y, ref)]


slice_case("strided_slice_recrop_like", (1, 4, 4, 64), [0, 0, 0, 0], [1, 4, 4, 32], [1, 1, 1, 1])
slice_case("strided_slice_steps_negative_index", (2, 9, 8, 5), [0, 1, -7, 1], [2, 9, 8, 5], [1, 3, 2, 2])
slice_case("strided_slice_reverse", (1, 6, 7, 3), [0, 5, -1, 2], [1, 0, 0, 0], [1, -1, -2, -1], end_mask=0b0100)
slice_case("strided_slice_masks_shrink", (3, 5, 6), [1, 0, 2], [0, 0, 5], [1, 1, 1], begin_mask=0b010,
           end_mask=0b011, shrink_axis_mask=0b001)
slice_case("strided_slice_clamped_ends", (4, 7), [-100, 2], [100, 50], [1, 2])
# offset (end relative to begin) is newer than the reference runtime's build: numpy only
slice_case("strided_slice_offset", (5, 8), [1, 2], [3, 4], [1, 1], runtime=False, offset=True)


def check(got, want, what):
    assert got.shape == want.shape, "%s: shape %s, want %s" % (what, got.shape, want.shape)
    err = tr.max_rel_err(got, want)
    assert err <= TOL, "%s: max error %.3g of max |ref| (bound %g)" % (what, err, TOL)


@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name, tool, ref_runtime):
    model, inputs, refs = CASES[name]()
    got = tr.run_c(tool, model, inputs)
    assert len(got) == len(refs)
    for i, (g, want) in enumerate(zip(got, refs)):
        check(g, want, "%s output %d: C vs numpy" % (name, i))
    if name not in NUMPY_ONLY:
        rt = tr.run_ref(model, inputs)
        assert len(rt) == len(refs)
        for i, (g, r, want) in enumerate(zip(got, rt, refs)):
            check(r, want, "%s output %d: TFLite runtime vs numpy" % (name, i))
            check(g, r.astype(np.float64), "%s output %d: C vs TFLite runtime" % (name, i))
    for isa in tr.other_isas():
        for i, g in enumerate(tr.run_c(tool, model, inputs, isa=isa)):
            check(g, refs[i], "%s output %d: C (%s ISA) vs numpy" % (name, i, isa))
    for i, g in enumerate(tr.run_c(tool, model, inputs, threads=2)):
        assert np.array_equal(g, got[i]), "%s output %d: 2 threads differ from 1" % (name, i)
    if CASES[name].expect_runs is not None:
        info = tr.run_c_info(tool, model)
        assert info["run"] == CASES[name].expect_runs, "%s: %d ops run, want %d" % (name, info["run"],
                                                                                  CASES[name].expect_runs)
