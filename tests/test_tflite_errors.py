"""Malformed, hostile and unsupported .tflite files through the C executor
(tool_tflite_run): each must fail with the right error code and one line
naming what is wrong, never crash (the ASan/UBSan build runs these too:
HAMER_BUILD=build-asan). Byte-level truncation and corruption of every
offset are in tests/c/test_tflite.c and fuzz/fuzz_tflite.c; here each defect
is built on purpose.
"""

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

import tflite_fb as fb
import tflite_ref as tr
from conftest import SANITIZE, require_tool

E_FORMAT, E_SHAPE, E_UNSUPPORTED = -3, -4, -6
# A refusal at load comes at once; the slack is for a loaded machine.
FAST_S = 15 if SANITIZE else 5


@pytest.fixture(scope="session")
def tool():
    return require_tool("tool_tflite_run")


def base(**conv):
    """x [1,6,6,3] -> CONV_2D 3x3 (4 outputs) -> ADD with a constant -> y."""
    r = np.random.RandomState(0)
    m = fb.ModelBuilder()
    x = m.input([1, 6, 6, 3], name="x")
    w = m.const(r.randn(4, 3, 3, 3).astype(np.float32), name="w")
    b = m.const(r.randn(4).astype(np.float32), name="b")
    t = m.tensor([1, 6, 6, 4], name="conv")
    opts = dict(padding="SAME", stride_w=1, stride_h=1)
    opts.update(conv)
    m.op("CONV_2D", [x, w, b], [t], "Conv2DOptions", **opts)
    c = m.const(r.randn(4).astype(np.float32), name="c")
    y = m.tensor([1, 6, 6, 4], name="y")
    m.op("ADD", [t, c], [y], "AddOptions")
    m.output(y)
    return m


def parts(root):
    sub = root.fields[2][1][0]
    return {"codes": root.fields[1][1], "sub": sub, "tensors": sub.fields[0][1], "ops": sub.fields[3][1],
            "buffers": root.fields[4][1]}


def expect(tool, data, code, pattern):
    rc, err = tr.run_c_error(tool, data)
    lines = err.strip("\n").split("\n")
    assert rc == 1, "exit %d, stderr %r" % (rc, err)
    assert len(lines) == 1 and lines[0], "not one line: %r" % err
    got = re.match(r"tool_tflite_run: error (-?\d+): (.*)$", lines[0])
    assert got, lines[0]
    assert int(got.group(1)) == code, "code %s, want %d: %s" % (got.group(1), code, lines[0])
    assert re.search(pattern, got.group(2)), "%r does not match %r" % (got.group(2), pattern)


def edited(edit, m=None):
    root = (m or base()).tables()
    edit(parts(root), root)
    return fb.write_root(root)


def test_base_model_runs(tool):
    x = np.random.RandomState(1).randn(1, 6, 6, 3).astype(np.float32)
    assert tr.run_c(tool, base().build(), [x])[0].shape == (1, 6, 6, 4)


def test_not_a_flatbuffer(tool):
    expect(tool, b"TFL", E_FORMAT, "too short")
    expect(tool, bytes(64), E_FORMAT, "TFL3")
    expect(tool, b"\xff\xff\xff\x7fTFL3" + bytes(8), E_FORMAT, r"Model: table at offset \d+ is outside")


def test_vtable_outside(tool):
    data = bytearray(base().build())
    root = struct.unpack_from("<I", data, 0)[0]
    struct.pack_into("<i", data, root, -(1 << 30))
    expect(tool, bytes(data), E_FORMAT, "Model: vtable .* outside")


def test_schema_version(tool):
    expect(tool, edited(lambda p, r: r.fields.__setitem__(0, ("u32", 2))), E_UNSUPPORTED, "Model.version is 2")


def test_no_subgraphs(tool):
    expect(tool, edited(lambda p, r: r.fields.__setitem__(2, ("vec_tables", []))), E_FORMAT, "subgraphs is empty")


def test_op_tensor_index_out_of_range(tool):
    expect(tool, edited(lambda p, r: p["ops"][0].fields.__setitem__(1, ("vec_i32", [0, 1, 99]))), E_FORMAT,
           r"operators\[0\]: tensor index 99")
    expect(tool, edited(lambda p, r: p["ops"][1].fields.__setitem__(2, ("vec_i32", [-1]))), E_FORMAT,
           r"operators\[1\]: tensor index -1")
    expect(tool, edited(lambda p, r: p["sub"].fields.__setitem__(1, ("vec_i32", [7]))), E_FORMAT,
           r"inputs: tensor index 7")


def test_opcode_index_out_of_range(tool):
    expect(tool, edited(lambda p, r: p["ops"][0].fields.__setitem__(0, ("u32", 5))), E_FORMAT, "opcode_index 5")


def test_buffer_index_out_of_range(tool):
    expect(tool, edited(lambda p, r: p["tensors"][1].fields.__setitem__(2, ("u32", 57))), E_FORMAT,
           "'w': buffer 57 of")


def test_buffer_size_mismatch(tool):
    expect(tool, edited(lambda p, r: p["tensors"][1].fields.__setitem__(0, ("vec_i32", [4, 3, 3, 4]))), E_FORMAT,
           "'w': buffer .* holds 432 bytes, its shape needs 576")


def test_external_buffers(tool):
    """Constant data after the FlatBuffer (Buffer.offset/size) is read."""
    x = np.random.RandomState(2).randn(1, 6, 6, 3).astype(np.float32)
    inline = tr.run_c(tool, base().build(), [x])[0]
    assert np.array_equal(tr.run_c(tool, base().build(external=True), [x])[0], inline)


def test_external_buffer_outside_file(tool):
    data = base().build(external=True)
    root = base().tables(external=[len(data) - 16 if i == 1 else 0 for i in range(len(base().buffers))])
    # Buffer 1 (w, 432 bytes) claimed to start 16 bytes before the end.
    root.fields[4][1][1] = fb.Table({1: ("u64", len(data) - 16), 2: ("u64", 432)})
    expect(tool, fb.write_root(root), E_FORMAT, r"buffers\[1\]: external data .* outside")


def test_op_versions(tool):
    def version(v):
        return lambda p, r: p["codes"][0].fields.__setitem__(2, ("i32", v))
    expect(tool, edited(version(9)), E_UNSUPPORTED, r"CONV_2D\): version 9 \(versions 1..8")
    expect(tool, edited(version(0)), E_FORMAT, r"CONV_2D\): version 0")


def test_unsupported_and_custom_ops(tool):
    def softmax(p, r):
        p["codes"][1].fields = {0: ("i8", 25), 3: ("i32", 25)}
        p["ops"][1].fields.pop(3)
        p["ops"][1].fields.pop(4)
    expect(tool, edited(softmax), E_UNSUPPORTED, "builtin op 25 is not supported")

    def custom(p, r):
        p["codes"][1].fields = {0: ("i8", 32), 1: ("string", "MyOp\n"), 3: ("i32", 32)}
    expect(tool, edited(custom), E_UNSUPPORTED, "custom op 'MyOp\\?' is not supported")

    def big_code(p, r):  # an extended builtin code (> 127), e.g. GELU = 150
        p["codes"][1].fields = {0: ("i8", 127), 3: ("i32", 150)}
    expect(tool, edited(big_code), E_UNSUPPORTED, "builtin op 150 is not supported")


def test_options(tool):
    def wrong_union(p, r):
        p["ops"][0].fields[3] = ("u8", 11)
    expect(tool, edited(wrong_union), E_FORMAT, "union member 11, expected 1")
    expect(tool, fb.write_root(base(fused_activation_function="TANH").tables()), E_UNSUPPORTED, "TANH")
    expect(tool, fb.write_root(base(fused_activation_function=9).tables()), E_FORMAT, "fused_activation_function 9")
    expect(tool, fb.write_root(base(dilation_w_factor=2).tables()), E_UNSUPPORTED, "dilation 1x2 is not supported")
    expect(tool, fb.write_root(base(stride_w=0).tables()), E_FORMAT, "stride_w is 0")
    expect(tool, fb.write_root(base(padding=2).tables()), E_FORMAT, "padding 2")


def test_unsupported_types(tool):
    m = fb.ModelBuilder()
    x = m.input([1, 4])
    q = m.const(np.arange(4, dtype=np.int8))
    d = m.tensor([4])
    m.op("DEQUANTIZE", [q], [d], version=2)
    y = m.tensor([1, 4])
    m.op("ADD", [x, d], [y], "AddOptions")
    m.output(y)
    expect(tool, m.build(), E_UNSUPPORTED, "type INT8")

    m = fb.ModelBuilder()
    x = m.input([1, 4])
    d = m.tensor([1, 4])
    m.op("DEQUANTIZE", [x], [d], version=2)
    m.output(d)
    expect(tool, m.build(), E_UNSUPPORTED, "DEQUANTIZE.*only constant FLOAT16")

    def variable(p, r):
        p["tensors"][3].fields[5] = ("bool", 1)
    expect(tool, edited(variable), E_UNSUPPORTED, "variable tensors")


def test_shapes(tool):
    expect(tool, edited(lambda p, r: p["tensors"][3].fields.__setitem__(0, ("vec_i32", [1, 6, 6, 5]))), E_FORMAT,
           r"'conv' is declared \[1,6,6,5\], the op computes \[1,6,6,4\]")
    expect(tool, edited(lambda p, r: p["tensors"][0].fields.__setitem__(0, ("vec_i32", [1, -6, 6, 3]))), E_FORMAT,
           "dimension 1 is -6")
    expect(tool, edited(lambda p, r: p["tensors"][0].fields.__setitem__(0, ("vec_i32", [1, 1, 1, 1, 1, 1, 1]))),
           E_UNSUPPORTED, "rank 7")
    expect(tool, edited(lambda p, r: p["tensors"][0].fields.__setitem__(0, ("vec_i32", [65536, 65536, 3]))),
           E_UNSUPPORTED, "more than 268435456 elements")
    expect(tool, edited(lambda p, r: p["tensors"][0].fields.__setitem__(0, ("vec_i32", [1, 0, 6, 3]))),
           E_UNSUPPORTED, "empty")


def test_graph_structure(tool):
    def swapped(p, r):
        ops = p["ops"]
        ops[0], ops[1] = ops[1], ops[0]
    expect(tool, edited(swapped), E_FORMAT, r"op 0 \(ADD\): input 0 \('conv'\) is not computed before it is read")

    def twice(p, r):
        p["ops"][1].fields[2] = ("vec_i32", [3])
    expect(tool, edited(twice), E_FORMAT, "output 'conv' is written twice|declared")

    def writes_const(p, r):
        p["ops"][1].fields[2] = ("vec_i32", [4])
    expect(tool, edited(writes_const), E_FORMAT, "output 'c' is a constant")

    def input_twice(p, r):
        p["sub"].fields[1] = ("vec_i32", [0, 0])
    expect(tool, edited(input_twice), E_FORMAT, "graph input 'x' is listed twice")

    def never(p, r):
        p["tensors"].append(fb.Table({0: ("vec_i32", [2]), 3: ("string", "orphan")}))
        p["sub"].fields[2] = ("vec_i32", [5, 6])
    expect(tool, edited(never), E_FORMAT, "graph output 'orphan' is never computed")


def test_weights_and_channels(tool):
    m = fb.ModelBuilder()
    x = m.input([1, 5, 5, 3])
    w = m.input([4, 3, 3, 3])
    b = m.const(np.zeros(4, np.float32))
    y = m.tensor([1, 5, 5, 4])
    m.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", padding="SAME", stride_w=1, stride_h=1)
    m.output(y)
    expect(tool, m.build(), E_UNSUPPORTED, "the filter .* must be constant")

    m = fb.ModelBuilder()
    x = m.input([1, 5, 5, 4])
    w = m.const(np.zeros((4, 3, 3, 2), np.float32))
    y = m.tensor([1, 5, 5, 4])
    m.op("CONV_2D", [x, w, m.const(np.zeros(4, np.float32))], [y], "Conv2DOptions", padding="SAME", stride_w=1,
         stride_h=1)
    m.output(y)
    expect(tool, m.build(), E_UNSUPPORTED, "grouped convolution")

    m = fb.ModelBuilder()
    x = m.input([1, 5, 5, 2])
    w = m.const(np.zeros((1, 3, 3, 4), np.float32))
    y = m.tensor([1, 5, 5, 4])
    m.op("DEPTHWISE_CONV_2D", [x, w], [y], "DepthwiseConv2DOptions", padding="SAME", stride_w=1, stride_h=1,
         depth_multiplier=2)
    m.output(y)
    expect(tool, m.build(), E_UNSUPPORTED, "depth multiplier 1")

    m = fb.ModelBuilder()
    xs = [m.input([1, 3]), m.input([1, 3])]
    y = m.tensor([1, 6])
    m.op("CONCATENATION", xs, [y], "ConcatenationOptions", axis=1, fused_activation_function="RELU")
    m.output(y)
    expect(tool, m.build(), E_UNSUPPORTED, "CONCATENATION.*fused activation")


def test_arena_limit(tool):
    m = fb.ModelBuilder()
    x = m.input([1 << 14, 1 << 14])
    y = m.tensor([1 << 14, 1 << 14])
    m.op("ADD", [x, x], [y], "AddOptions")
    z = m.tensor([1 << 14, 1 << 14])
    m.op("ADD", [x, y], [z], "AddOptions")
    m.output(z)
    expect(tool, m.build(), E_UNSUPPORTED, "MiB of activations")


# ---- work and memory limits (HM_TFL_MAX_OP_WORK, _MAX_WORK, _MAX_FOLD_BYTES) ----
#
# Small files that pass every shape check yet ask for unbounded work or
# memory: each must be refused at load, at once, naming the op and the limit.

# Runs argv[1:] and prints its own peak RSS (KiB): a child's ru_maxrss
# starts at its parent's RSS at the fork, so the tool is forked from this
# small process rather than from pytest.
_RSS_WRAPPER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
print(ru.ru_maxrss)
sys.exit(min(max(os.waitstatus_to_exitcode(status), 0), 255) if os.WIFEXITED(status) else 128)
"""


def run_measured(tool, data, limit_s):
    """(exit status, stderr, seconds, peak RSS in MiB) of tool_tflite_run
    loading (and, if that succeeds, running) `data`; killed after limit_s."""
    with tempfile.TemporaryDirectory() as d:
        mp = Path(d) / "m.tflite"
        mp.write_bytes(data)
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-c", _RSS_WRAPPER, str(tool), str(mp)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            out, err = p.communicate()
        secs = time.monotonic() - t0
        rss = int(out.split()[-1]) / 1024 if out.split() else float("nan")
        return p.returncode, err, secs, rss


def expect_fast(tool, data, pattern, max_rss_mb=None):
    rc, err, secs, rss = run_measured(tool, data, 4 * FAST_S)
    assert rc == 1, "exit %d after %.1f s (RSS %.0f MiB), stderr %r" % (rc, secs, rss, err)
    assert secs < FAST_S, "refused after %.1f s" % secs
    if max_rss_mb is not None and not SANITIZE:
        assert rss < max_rss_mb, "peak RSS %.0f MiB" % rss
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, "not one line: %r" % err
    got = re.match(r"tool_tflite_run: error (-?\d+): (.*)$", lines[0])
    assert got and int(got.group(1)) == E_UNSUPPORTED, lines[0]
    assert re.search(pattern, got.group(2)), "%r does not match %r" % (got.group(2), pattern)


def fold_copies_model(copies):
    """One constant padded to 2048x2048 (16 MiB, folded at load), then
    `copies` RESHAPEs of it: each RESHAPE of a constant is folded into a new
    16 MiB constant. 13 KB of file for 16 MiB per op."""
    m = fb.ModelBuilder()
    c = m.const(np.ones((1, 1), np.float32), name="one")
    t = m.tensor([2048, 2048], name="padded")
    m.op("PAD", [c, m.const(np.array([[0, 2047], [0, 2047]], np.int32))], [t], "PadOptions")
    for i in range(copies):
        shape = [4096, 1024] if i % 2 == 0 else [2048, 2048]
        y = m.tensor(shape, name="copy%d" % i)
        m.op("RESHAPE", [t, m.const(np.array(shape, np.int32))], [y], "ReshapeOptions")
        t = y
    m.output(t)
    return m.build()


def test_folded_constants_bounded(tool):
    """256 MiB of constants folded at load at most: the PAD (16 MiB) and 15
    copies fit, the 16th copy is refused before it is allocated. (Without
    the limit this 60-copy model reaches ~1 GB of RSS at load.)"""
    data = fold_copies_model(60)
    assert len(data) < 20000
    expect_fast(tool, data, r"tflite: op 16 \(RESHAPE\): folding it at load takes the constants made at load to "
                r"272 MiB, over the limit of 256 MiB$", max_rss_mb=400)
    # At the limit the model loads and runs.
    x = tr.run_c(tool, fold_copies_model(15), [])
    assert x[0].shape == (1024 * 4, 1024) and x[0][0, 0] == 1 and x[0].sum() == 1


def pooled_model(side, const):
    """MAX_POOL_2D with a side x side window over a side x side map: a
    constant one (1 element padded, folded at load: the pooling ran at load)
    or a graph input (run at invoke). side^4 window taps; 430 bytes."""
    m = fb.ModelBuilder()
    if const:
        c = m.const(np.ones((1, 1, 1, 1), np.float32))
        x = m.tensor([1, side, side, 1])
        m.op("PAD", [c, m.const(np.array([[0, 0], [0, side - 1], [0, side - 1], [0, 0]], np.int32))], [x],
             "PadOptions")
    else:
        x = m.input([1, side, side, 1])
    y = m.tensor([1, side, side, 1])
    m.op("MAX_POOL_2D", [x], [y], "Pool2DOptions", padding="SAME", stride_w=1, stride_h=1, filter_width=side,
         filter_height=side)
    m.output(y)
    return m.build()


@pytest.mark.parametrize("const", [True, False], ids=["folded", "at-invoke"])
def test_pool_window_work_bounded(tool, const):
    """window x outputs of one op is bounded before it runs: folded at load
    this pooling (side 128) took seconds there, and 16x more per doubling
    of the side (side 2048: about two days)."""
    data = pooled_model(128, const)
    assert len(data) < 1000
    expect_fast(tool, data, r"tflite: op %d \(MAX_POOL_2D\) needs \d+ operations, over the limit of 1073741824 "
                r"per op$" % (1 if const else 0))
    # A small pooling of the same shape loads and runs.
    out = tr.run_c(tool, pooled_model(16, const), [] if const else [np.ones((1, 16, 16, 1), np.float32)])[0]
    # SAME windows of 16 reach back 7: the folded map's one 1 is in 8x8 of them.
    assert out.shape == (1, 16, 16, 1) and out.sum() == (64 if const else 256)


def palm_shaped_model(layers, pool=False):
    """The palm detector's interface ([1,192,192,3] in, [1,2016,18] and
    [1,2016,1] out), between them `layers` 3x3 convolutions of 64 channels at
    96x96 sharing one filter (0.35 G multiply-adds each; a 180 KB file), or
    with pool=True 31x31 MAX_POOL_2Ds (0.85 G element visits each): each op
    is within the per-op limit, the graph is not."""
    r = np.random.RandomState(0)
    m = fb.ModelBuilder()
    x = m.input([1, 192, 192, 3], name="input_1")
    t = m.tensor([1, 96, 96, 64])
    m.op("CONV_2D", [x, m.const(r.randn(64, 3, 3, 3).astype(np.float32) * 0.1)], [t], "Conv2DOptions",
         padding="SAME", stride_w=2, stride_h=2)
    w = m.const(r.randn(64, 3, 3, 64).astype(np.float32) * 0.01)
    for _ in range(layers):
        y = m.tensor([1, 96, 96, 64])
        if pool:
            m.op("MAX_POOL_2D", [t], [y], "Pool2DOptions", padding="SAME", stride_w=1, stride_h=1, filter_width=31,
                 filter_height=31)
        else:
            m.op("CONV_2D", [t, w], [y], "Conv2DOptions", padding="SAME", stride_w=1, stride_h=1,
                 fused_activation_function="RELU")
        t = y
    boxes, scores = m.tensor([1, 24, 24, 63]), m.tensor([1, 12, 12, 14])
    m.op("CONV_2D", [t, m.const(r.randn(63, 1, 1, 64).astype(np.float32) * 0.1)], [boxes], "Conv2DOptions",
         padding="SAME", stride_w=4, stride_h=4)
    m.op("CONV_2D", [t, m.const(r.randn(14, 1, 1, 64).astype(np.float32) * 0.1)], [scores], "Conv2DOptions",
         padding="SAME", stride_w=8, stride_h=8)
    o1, o2 = m.tensor([1, 2016, 18], name="regressors"), m.tensor([1, 2016, 1], name="classificators")
    m.op("RESHAPE", [boxes, m.const(np.array([1, 2016, 18], np.int32))], [o1], "ReshapeOptions")
    m.op("RESHAPE", [scores, m.const(np.array([1, 2016, 1], np.int32))], [o2], "ReshapeOptions")
    m.output(o1)
    m.output(o2)
    return m.build()


def test_graph_work_bounded(tool):
    """The whole graph's work is bounded at load: 16 layers (5.5 G) are
    refused at the 13th, where the sum passes 2^32; 4 layers load and run."""
    data = palm_shaped_model(16)
    assert len(data) < 200000
    expect_fast(tool, data, r"tflite: op 13 \(CONV_2D\) takes the graph to \d+ operations, over the limit of "
                r"4294967296 for the whole graph$")
    expect_fast(tool, palm_shaped_model(6, pool=True), r"tflite: op 6 \(MAX_POOL_2D\) takes the graph to \d+ "
                r"operations, over the limit of 4294967296 for the whole graph$")
    info = tr.run_c_info(tool, palm_shaped_model(4))
    assert 1.3e9 < info["run_work"] <= info["work"] < 1 << 32, info


def test_graph_work_bounded_in_the_detector(tool, tmp_path):
    """Through `hamer detect`: the palm-shaped model is refused when the
    detector loads, one line, exit 1, nothing written."""
    from conftest import run_hamer
    from detect.common import models_dir, shared_images
    real = models_dir()
    d = tmp_path / "detector"
    d.mkdir()
    (d / "palm_detection_full.tflite").write_bytes(palm_shaped_model(6, pool=True))
    shutil.copy(real / "hand_landmark_full.tflite", d)
    out = tmp_path / "boxes.json"
    t0 = time.monotonic()
    p = run_hamer(["detect", "--image", shared_images() / "hamer_example_1.jpg", "--output", out, "--detector", d])
    secs = time.monotonic() - t0
    lines = p.stderr.strip().split("\n")
    assert p.returncode == 1 and len(lines) == 1, (p.returncode, p.stderr)
    assert re.search(r"palm_detection_full.tflite: tflite: op 6 \(MAX_POOL_2D\) takes the graph to \d+ operations, "
                     r"over the limit of 4294967296 for the whole graph$", lines[0]), lines[0]
    assert secs < FAST_S and not out.exists()


def sparse_model(sparsity=None, values=None, dtype=np.float32):
    """x [4,6] + DENSIFY(sparse constant [4,6], last axis CSR) -> y; with
    `sparsity` (a SparsityParameters Table) and / or `values` replaced."""
    w = np.zeros((4, 6), dtype)
    w[0, 1], w[2, 0], w[2, 5], w[3, 3] = 1, 2, 3, 4
    m = fb.ModelBuilder()
    x = m.input([4, 6], name="x")
    s = m.sparse_const(w, formats=[fb.DENSE, fb.SPARSE_CSR], name="w", sparsity=sparsity)
    if values is not None:
        m.buffers[-1] = np.asarray(values, dtype).tobytes()
    d = m.tensor([4, 6], dtype, name="dense")
    m.op("DENSIFY", [s], [d])
    y = m.tensor([4, 6], name="y")
    m.op("ADD", [x, d], [y], "AddOptions")
    m.output(y)
    return m.build()


def csr(segs, idx, order=(0, 1), dense=4, kinds=("i32", "i32"), block_map=()):
    return fb.sparsity_table(list(order), block_map, [(fb.DENSE, dense, None, None), (fb.SPARSE_CSR, 0, segs, idx)],
                             *kinds)


def test_sparse_metadata_checked(tool):
    good = [0, 1, 1, 3, 4], [1, 0, 5, 3]
    x = np.zeros((4, 6), np.float32)
    want = np.zeros((4, 6))
    want[0, 1], want[2, 0], want[2, 5], want[3, 3] = 1, 2, 3, 4
    assert np.array_equal(tr.run_c(tool, sparse_model(csr(*good)), [x])[0], want)
    for kinds in [("u8", "u16"), ("u16", "u8")]:
        assert np.array_equal(tr.run_c(tool, sparse_model(csr(*good, kinds=kinds)), [x])[0], want)
    # every defect refused at load with one line naming it
    expect(tool, sparse_model(csr([0, 1, 1, 3, 4], [1, 0, 6, 3])), E_FORMAT, r"array_indices\[2\] is 6, dimension 1 has 6")
    expect(tool, sparse_model(csr([0, 1, 1, 3], [1, 0, 5, 3])), E_FORMAT, "array_segments has 4 entries, 5 expected")
    expect(tool, sparse_model(csr([0, 2, 1, 3, 4], [1, 0, 5, 3])), E_FORMAT, r"array_segments\[2\] is 1 .*not decrease")
    expect(tool, sparse_model(csr([1, 1, 1, 3, 4], [1, 0, 5, 3])), E_FORMAT, r"array_segments\[0\] is 1")
    expect(tool, sparse_model(csr([0, 1, 1, 3, 9], [1, 0, 5, 3])), E_FORMAT, "ends at 9, array_indices has 4")
    expect(tool, sparse_model(csr(*good), values=[1, 2, 3]), E_FORMAT, "describes 4 values, its buffer holds 3")
    expect(tool, sparse_model(csr(*good, dense=5)), E_FORMAT, "dense_size is 5, dimension 0 has 4")
    expect(tool, sparse_model(csr(*good, order=(1, 1))), E_FORMAT, "traversal_order is not a permutation")
    expect(tool, sparse_model(csr(*good, order=(0, 1, 2))), E_FORMAT, "3 traversal entries and 2 dim_metadata")
    expect(tool, sparse_model(csr(*good, block_map=(5,))), E_FORMAT, "2 traversal entries and 2 dim_metadata for 3")
    # union members and missing vectors
    t = csr(*good)
    t.fields[2][1][1].fields[2] = ("u8", 7)
    expect(tool, sparse_model(t), E_FORMAT, "array_segments is union member 7")
    t = csr(*good)
    t.fields[2][1][1].fields.pop(5)
    expect(tool, sparse_model(t), E_FORMAT, "array_indices is missing")
    t = csr(*good)
    t.fields[2][1][0].fields[0] = ("i8", 3)
    expect(tool, sparse_model(t), E_FORMAT, r"dim_metadata\[0\].format is 3")
    # a negative int32 index, and a sparse constant without data
    expect(tool, sparse_model(csr([0, 1, 1, 3, 4], [1, 0, -1, 3])), E_FORMAT, "negative index value")
    m = fb.ModelBuilder()
    x = m.input([4, 6])
    s = m.tensor([4, 6])
    m.sparsity[s] = csr(*good)
    y = m.tensor([4, 6])
    m.op("ADD", [x, s], [y], "AddOptions")
    m.output(y)
    expect(tool, m.build(), E_FORMAT, "sparse but without constant data")


def test_sparse_blocks_checked(tool):
    def blocked(bs, block_fmt=fb.DENSE):
        levels = [(fb.DENSE, 4, None, None), (fb.SPARSE_CSR, 0, [0] + [1] * 4, [0]), (block_fmt, bs, None, None)]
        if block_fmt == fb.SPARSE_CSR:
            levels[2] = (fb.SPARSE_CSR, 0, [0, 1], [0])
        return fb.sparsity_table([0, 1, 2], [1], levels)
    expect(tool, sparse_model(blocked(4)), E_FORMAT, "block size 4 for dimension 1 of 6")
    expect(tool, sparse_model(blocked(0)), E_FORMAT, "block size 0")
    expect(tool, sparse_model(blocked(3, fb.SPARSE_CSR)), E_UNSUPPORTED, "sparse block dimension")
    expect(tool, sparse_model(fb.sparsity_table([0, 1, 2, 3], [1, 1], [(fb.DENSE, 4, None, None)] * 4)), E_FORMAT,
           r"block_map\[1\] is 1")


def test_new_ops_checked(tool):
    def densify_of_plain():
        m = fb.ModelBuilder()
        x = m.input([2, 3])
        c = m.const(np.ones((2, 3), np.float32))
        d = m.tensor([2, 3])
        m.op("DENSIFY", [c], [d])
        y = m.tensor([2, 3])
        m.op("ADD", [x, d], [y], "AddOptions")
        m.output(y)
        return m.build()
    expect(tool, densify_of_plain(), E_UNSUPPORTED, "DENSIFY.*not a sparse constant")

    def d2s(b, shape=(1, 2, 2, 8), out=(1, 4, 4, 2)):
        m = fb.ModelBuilder()
        x = m.input(list(shape))
        y = m.tensor(list(out))
        m.op("DEPTH_TO_SPACE", [x], [y], "DepthToSpaceOptions", block_size=b)
        m.output(y)
        return m.build()
    expect(tool, d2s(3), E_FORMAT, "DEPTH_TO_SPACE.*block size 3 for 8 channels")
    expect(tool, d2s(0), E_FORMAT, "block size 0")

    def ss(begin, end, strides, out, **opts):
        m = fb.ModelBuilder()
        x = m.input([3, 4])
        y = m.tensor(out)
        m.op("STRIDED_SLICE", [x] + [m.const(np.array(v, np.int32)) for v in (begin, end, strides)], [y],
             "StridedSliceOptions", **opts)
        m.output(y)
        return m.build()
    expect(tool, ss([0, 0], [3, 4], [1, 0], [3, 4]), E_FORMAT, "stride 0 on axis 1")
    expect(tool, ss([0], [3], [1], [3, 4]), E_FORMAT, "must have 2 values")
    expect(tool, ss([2, 0], [1, 4], [1, 1], [1, 4]), E_UNSUPPORTED, "empty slice on axis 0")
    expect(tool, ss([0, 0], [3, 4], [1, 1], [3, 4], ellipsis_mask=1), E_UNSUPPORTED, "ellipsis_mask")
    expect(tool, ss([5, 0], [3, 4], [1, 1], [4], shrink_axis_mask=1), E_FORMAT, "index 5 out of range on axis 0")
    expect(tool, ss([0, 0], [3, 4], [1, 2], [3, 4]), E_FORMAT, r"declared \[3,4\], the op computes \[3,2\]")
