"""Malformed, hostile and unsupported .tflite files through the C executor
(tool_tflite_run): each must fail with the right error code and one line
naming what is wrong, never crash (the ASan/UBSan build runs these too:
HAMER_BUILD=build-asan). Byte-level truncation and corruption of every
offset are in tests/c/test_tflite.c and fuzz/fuzz_tflite.c; here each defect
is built on purpose.
"""

import os
import re
import struct
from pathlib import Path

import numpy as np
import pytest

import tflite_fb as fb
import tflite_ref as tr

BUILD = Path(os.environ.get("HAMER_BUILD") or tr.REPO / "build").resolve()
TOOL = BUILD / "tests" / "tool_tflite_run"
E_FORMAT, E_SHAPE, E_UNSUPPORTED = -3, -4, -6


@pytest.fixture(scope="session")
def tool():
    if not TOOL.exists():
        pytest.fail("%s is missing: build the project first (cmake --build %s)" % (TOOL, BUILD))
    return TOOL


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
