"""tflite_fb.py - a small FlatBuffer writer and reader for .tflite files, for
the tests of src/tflite/ (Debian has no flatbuffers package for Python 3's
numpy-only test environment, and the tests want byte-level control anyway).

Writer: ModelBuilder assembles tensors, constant buffers and operators and
build() returns the file bytes. Objects are laid out parent first (every
uoffset points forward), each vtable right before its table, every scalar
aligned to its size and constant data to 16 bytes, as the TFLite runtime's
FlatBuffer verifier requires.

Reader: read_model(bytes) returns a dict of the parts the tests inspect
(operator codes, tensors, operators with decoded options), and `python3
tests/tflite_fb.py FILE.tflite...` prints that summary (the op list and
every distinct option value), which is how the op list of the MediaPipe
models was established.

Field ids, enum values and union indices follow tensorflow/lite/schema/
schema.fbs (TFLite schema version 3).
"""

import struct
import sys

import numpy as np

# ---- schema facts --------------------------------------------------------

TENSOR_TYPES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING",
                6: "BOOL", 7: "INT16", 8: "COMPLEX64", 9: "INT8", 10: "FLOAT64"}
TYPE_CODE = {v: k for k, v in TENSOR_TYPES.items()}
NP_TYPE = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int32): 2,
           np.dtype(np.uint8): 3, np.dtype(np.int64): 4, np.dtype(np.int8): 9}

BUILTIN = {"ADD": 0, "AVERAGE_POOL_2D": 1, "CONCATENATION": 2, "CONV_2D": 3, "DEPTHWISE_CONV_2D": 4,
           "DEPTH_TO_SPACE": 5, "DEQUANTIZE": 6, "STRIDED_SLICE": 45, "DENSIFY": 124, "FULLY_CONNECTED": 9, "LOGISTIC": 14, "MAX_POOL_2D": 17, "MUL": 18,
           "RELU": 19, "RELU6": 21, "RESHAPE": 22, "RESIZE_BILINEAR": 23, "SOFTMAX": 25, "TANH": 28,
           "CUSTOM": 32, "PAD": 34, "MEAN": 40, "SUB": 41, "PRELU": 54, "HARD_SWISH": 117,
           "PLACEHOLDER_FOR_GREATER_OP_CODES": 127, "GELU": 150}
BUILTIN_NAME = {v: k for k, v in BUILTIN.items()}

# Option tables: union index (BuiltinOptions) and fields as (name, id, kind, default).
OPTIONS = {
    "Conv2DOptions": (1, [("padding", 0, "i8", 0), ("stride_w", 1, "i32", 0), ("stride_h", 2, "i32", 0),
                          ("fused_activation_function", 3, "i8", 0), ("dilation_w_factor", 4, "i32", 1),
                          ("dilation_h_factor", 5, "i32", 1), ("quantized_bias_type", 6, "i8", 0)]),
    "DepthwiseConv2DOptions": (2, [("padding", 0, "i8", 0), ("stride_w", 1, "i32", 0), ("stride_h", 2, "i32", 0),
                                   ("depth_multiplier", 3, "i32", 0), ("fused_activation_function", 4, "i8", 0),
                                   ("dilation_w_factor", 5, "i32", 1), ("dilation_h_factor", 6, "i32", 1)]),
    "Pool2DOptions": (5, [("padding", 0, "i8", 0), ("stride_w", 1, "i32", 0), ("stride_h", 2, "i32", 0),
                          ("filter_width", 3, "i32", 0), ("filter_height", 4, "i32", 0),
                          ("fused_activation_function", 5, "i8", 0)]),
    "FullyConnectedOptions": (8, [("fused_activation_function", 0, "i8", 0), ("weights_format", 1, "i8", 0),
                                  ("keep_num_dims", 2, "bool", 0), ("asymmetric_quantize_inputs", 3, "bool", 0),
                                  ("quantized_bias_type", 4, "i8", 0)]),
    "SoftmaxOptions": (9, [("beta", 0, "f32", 0.0)]),
    "ConcatenationOptions": (10, [("axis", 0, "i32", 0), ("fused_activation_function", 1, "i8", 0)]),
    "AddOptions": (11, [("fused_activation_function", 0, "i8", 0), ("pot_scale_int16", 1, "bool", 1)]),
    "ResizeBilinearOptions": (15, [("new_height", 0, "i32", 0), ("new_width", 1, "i32", 0),
                                   ("align_corners", 2, "bool", 0), ("half_pixel_centers", 3, "bool", 0)]),
    "ReshapeOptions": (17, [("new_shape", 0, "vec_i32", None)]),
    "MulOptions": (21, [("fused_activation_function", 0, "i8", 0)]),
    "PadOptions": (22, []),
    "ReducerOptions": (27, [("keep_dims", 0, "bool", 0)]),
    "SubOptions": (28, [("fused_activation_function", 0, "i8", 0), ("pot_scale_int16", 1, "bool", 1)]),
    "DequantizeOptions": (38, []),
    "StridedSliceOptions": (32, [("begin_mask", 0, "i32", 0), ("end_mask", 1, "i32", 0), ("ellipsis_mask", 2, "i32", 0),
                                 ("new_axis_mask", 3, "i32", 0), ("shrink_axis_mask", 4, "i32", 0),
                                 ("offset", 5, "bool", 0)]),
    "DepthToSpaceOptions": (94, [("block_size", 0, "i32", 0)]),
    "DensifyOptions": (99, []),
}

# SparseIndexVector union members and DimensionType values.
INDEX_VECTOR = {"i32": 1, "u16": 2, "u8": 3}
DENSE, SPARSE_CSR = 0, 1


def sparse_encode(dense, traversal_order, block_map=(), block_sizes=(), formats=None):
    """TFLite's sparse encoding of `dense`: the expanded array (each blocked
    dimension split into blocks, the block dimensions appended) walked in
    traversal_order; a SPARSE_CSR level keeps only the children with a
    non-zero value under them. Returns (values, [(format, dense_size,
    segments, indices)] per level)."""
    a = np.asarray(dense)
    rank = a.ndim
    shape, axes = [], []
    for d in range(rank):
        if d in block_map:
            bs = block_sizes[list(block_map).index(d)]
            shape += [a.shape[d] // bs, bs]
        else:
            shape += [a.shape[d]]
    e = a.reshape(shape)
    # positions of each original dim in `shape`, then the block dims
    pos, k = [], 0
    blockpos = {}
    for d in range(rank):
        pos.append(k)
        if d in block_map:
            blockpos[list(block_map).index(d)] = k + 1
            k += 2
        else:
            k += 1
    expanded = pos + [blockpos[b] for b in range(len(block_map))]
    t = e.transpose([expanded[x] for x in traversal_order])
    formats = formats or [DENSE] * t.ndim
    prefixes, levels = [()], []
    for lv in range(t.ndim):
        size = t.shape[lv]
        new = []
        if formats[lv] == DENSE:
            for p in prefixes:
                new += [p + (i,) for i in range(size)]
            levels.append((DENSE, size, None, None))
        else:
            segs, idx = [0], []
            for p in prefixes:
                for i in range(size):
                    if np.any(t[p + (i,)] != 0):
                        new.append(p + (i,))
                        idx.append(i)
                segs.append(len(idx))
            levels.append((SPARSE_CSR, 0, segs, idx))
        prefixes = new
    values = np.array([t[p] for p in prefixes], a.dtype)
    return values, levels


def sparsity_table(traversal_order, block_map, levels, seg_kind="i32", idx_kind="i32"):
    """The SparsityParameters Table for sparse_encode's levels."""
    dims = []
    for fmt, size, segs, idx in levels:
        f = {0: ("i8", fmt), 1: ("i32", size)}
        if fmt == SPARSE_CSR:
            f[2] = ("u8", INDEX_VECTOR[seg_kind])
            f[3] = ("table", Table({0: ("vec_" + seg_kind, segs)}))
            f[4] = ("u8", INDEX_VECTOR[idx_kind])
            f[5] = ("table", Table({0: ("vec_" + idx_kind, idx)}))
        dims.append(Table(f))
    f = {0: ("vec_i32", list(traversal_order)), 2: ("vec_tables", dims)}
    if len(block_map):
        f[1] = ("vec_i32", list(block_map))
    return Table(f)
OPTIONS_BY_INDEX = {v[0]: k for k, v in OPTIONS.items()}

PADDING = {"SAME": 0, "VALID": 1}
ACT = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3, "TANH": 4, "SIGN_BIT": 5}
ACT_NAME = {v: k for k, v in ACT.items()}

SCALAR = {"u8": ("<B", 1), "i8": ("<b", 1), "bool": ("<B", 1), "u16": ("<H", 2), "i32": ("<i", 4),
          "u32": ("<I", 4), "i64": ("<q", 8), "u64": ("<Q", 8), "f32": ("<f", 4)}


# ---- writer ----------------------------------------------------------------

class Table:
    """A table to write: fields is {id: (kind, value)}. Kinds: the SCALAR
    keys; 'table' (a Table); 'string'; 'vec_tables' (list of Table);
    'vec_<scalar>' (list); 'bytes' (a bytes vector, 16-byte aligned)."""

    def __init__(self, fields=None):
        self.fields = dict(fields or {})


class _Writer:
    def __init__(self):
        self.buf = bytearray()

    def pad_to(self, align, extra=0):
        """Pad so that (len + extra) % align == 0."""
        while (len(self.buf) + extra) % align:
            self.buf.append(0)

    def put(self, fmt, pos, value):
        struct.pack_into(fmt, self.buf, pos, value)

    def table(self, t):
        ids = sorted(t.fields)
        nf = (ids[-1] + 1) if ids else 0
        # Inline layout, biggest scalars first so each lands aligned.
        def size_of(kind):
            return SCALAR[kind][1] if kind in SCALAR else 4
        order = sorted(ids, key=lambda i: -size_of(t.fields[i][0]))
        self.pad_to(2)
        vt = len(self.buf)
        self.buf += bytes(4 + 2 * nf)
        self.pad_to(8)
        tp = len(self.buf)
        rel = {}
        off = 4
        for i in order:
            s = size_of(t.fields[i][0])
            while (tp + off) % s:
                off += 1
            rel[i] = off
            off += s
        tsize = off
        while tsize % 4:
            tsize += 1
        self.buf += bytes(tsize)
        self.put("<i", tp, tp - vt)
        self.put("<H", vt, 4 + 2 * nf)
        self.put("<H", vt + 2, tsize)
        for i in ids:
            self.put("<H", vt + 4 + 2 * i, rel[i])
        later = []
        for i in ids:
            kind, value = t.fields[i]
            p = tp + rel[i]
            if kind in SCALAR:
                self.put(SCALAR[kind][0], p, value)
            else:
                later.append((p, kind, value))
        for p, kind, value in later:
            q = self.obj(kind, value)
            self.put("<I", p, q - p)
        return tp

    def obj(self, kind, value):
        if kind == "table":
            return self.table(value)
        if kind == "string":
            b = value.encode() if isinstance(value, str) else bytes(value)
            self.pad_to(4)
            p = len(self.buf)
            self.buf += struct.pack("<I", len(b)) + b + b"\0"
            return p
        if kind == "bytes":
            b = bytes(value)
            self.pad_to(16, 4)
            p = len(self.buf)
            self.buf += struct.pack("<I", len(b)) + b
            return p
        if kind == "vec_tables":
            self.pad_to(4)
            p = len(self.buf)
            self.buf += struct.pack("<I", len(value)) + bytes(4 * len(value))
            for k, t in enumerate(value):
                slot = p + 4 + 4 * k
                q = self.table(t)
                self.put("<I", slot, q - slot)
            return p
        if kind.startswith("vec_"):
            fmt, s = SCALAR[kind[4:]]
            self.pad_to(max(s, 4), 4)
            p = len(self.buf)
            self.buf += struct.pack("<I", len(value))
            for v in value:
                self.buf += struct.pack(fmt, v)
            return p
        raise ValueError(kind)


def write_root(root, ident=b"TFL3"):
    """Serialise a root Table: uoffset to it, then the file identifier."""
    w = _Writer()
    w.buf += bytes(8)
    w.buf[4:8] = ident
    p = w.table(root)
    w.put("<I", 0, p)
    w.pad_to(16)
    return bytes(w.buf)


def options_table(name, values):
    """An options Table for builtin option table `name` from a dict of its
    fields (names as in the schema; unknown names raise)."""
    _, fields = OPTIONS[name]
    by_name = {f[0]: f for f in fields}
    out = {}
    for k, v in values.items():
        _, fid, kind, _ = by_name[k]
        if kind in ("i8", "u8") and isinstance(v, str):
            v = PADDING[v] if k == "padding" else ACT[v]
        out[fid] = (kind, int(v) if kind != "f32" and kind != "vec_i32" else v)
    return Table(out)


class ModelBuilder:
    """Build a one-subgraph .tflite model.

        m = ModelBuilder()
        x = m.input([1, 8, 8, 3])
        w = m.const(np.zeros((4, 3, 3, 3), np.float32))
        y = m.tensor([1, 8, 8, 4])
        m.op("CONV_2D", [x, w, -1], [y], "Conv2DOptions", padding="SAME", stride_w=1, stride_h=1)
        m.output(y)
        data = m.build()
    """

    def __init__(self):
        self.tensors = []      # (shape, type code, buffer index, name)
        self.buffers = [b""]   # buffer 0: the empty sentinel
        self.ops = []          # (opcode index, inputs, outputs, options (name, Table) or None)
        self.opcodes = []      # (builtin, version)
        self.inputs = []
        self.outputs = []
        self.sparsity = {}     # tensor index -> SparsityParameters Table

    def tensor(self, shape, dtype=np.float32, name=None, buffer=0):
        self.tensors.append((list(int(d) for d in shape), NP_TYPE[np.dtype(dtype)], buffer,
                             name or "t%d" % len(self.tensors)))
        return len(self.tensors) - 1

    def sparse_const(self, dense, traversal_order=None, block_map=(), block_sizes=(), formats=None,
                     seg_kind="i32", idx_kind="i32", name=None, sparsity=None):
        """A constant of dense's shape stored sparse (sparse_encode); the
        SparsityParameters Table may be given instead (hostile files)."""
        a = np.ascontiguousarray(dense)
        order = list(range(a.ndim + len(block_map))) if traversal_order is None else traversal_order
        values, levels = sparse_encode(a, order, block_map, block_sizes, formats)
        self.buffers.append(values.tobytes())
        t = self.tensor(a.shape, a.dtype, name, buffer=len(self.buffers) - 1)
        self.sparsity[t] = sparsity or sparsity_table(order, block_map, levels, seg_kind, idx_kind)
        return t

    def input(self, shape, name=None):
        t = self.tensor(shape, name=name)
        self.inputs.append(t)
        return t

    def output(self, t):
        self.outputs.append(t)
        return t

    def const(self, array, name=None):
        a = np.ascontiguousarray(array)
        self.buffers.append(a.tobytes())
        return self.tensor(a.shape, a.dtype, name, buffer=len(self.buffers) - 1)

    def opcode(self, builtin, version=1):
        code = BUILTIN[builtin] if isinstance(builtin, str) else builtin
        key = (code, version)
        if key not in self.opcodes:
            self.opcodes.append(key)
        return self.opcodes.index(key)

    def op(self, builtin, inputs, outputs, options=None, version=1, **values):
        opt = (options, options_table(options, values)) if options else None
        self.ops.append((self.opcode(builtin, version), list(inputs), list(outputs), opt))

    def tables(self, external=None):
        """The Model as a Table, for tests that edit it before writing."""
        tensors = []
        for ti, (shape, tcode, buf, name) in enumerate(self.tensors):
            f = {0: ("vec_i32", shape), 2: ("u32", buf), 3: ("string", name)}
            if tcode:
                f[1] = ("i8", tcode)
            if ti in self.sparsity:
                f[6] = ("table", self.sparsity[ti])
            tensors.append(Table(f))
        ops = []
        for oi, ins, outs, opt in self.ops:
            f = {0: ("u32", oi), 1: ("vec_i32", ins), 2: ("vec_i32", outs)}
            if opt:
                f[3] = ("u8", OPTIONS[opt[0]][0])
                f[4] = ("table", opt[1])
            ops.append(Table(f))
        sub = Table({0: ("vec_tables", tensors), 1: ("vec_i32", self.inputs),
                     2: ("vec_i32", self.outputs), 3: ("vec_tables", ops), 4: ("string", "main")})
        codes = []
        for code, version in self.opcodes:
            f = {0: ("i8", min(code, 127)), 3: ("i32", code)}
            if version != 1:
                f[2] = ("i32", version)
            codes.append(Table(f))
        if external is None:
            bufs = [Table({0: ("bytes", b)}) if b else Table() for b in self.buffers]
        else:
            # Data after the FlatBuffer: Buffer.offset / Buffer.size (schema 3c).
            bufs = [Table({1: ("u64", off), 2: ("u64", len(b))}) if b else Table()
                    for b, off in zip(self.buffers, external)]
        return Table({0: ("u32", 3), 1: ("vec_tables", codes), 2: ("vec_tables", [sub]),
                      3: ("string", "hamer.c test model"), 4: ("vec_tables", bufs)})

    def build(self, external=False):
        """The file; with external=True the constant data follows the
        FlatBuffer (16-byte aligned) and buffers refer to it by offset."""
        if not external:
            return write_root(self.tables())
        # The layout does not depend on the offsets' values: size it first.
        head = len(write_root(self.tables(external=[2] * len(self.buffers))))
        offs, at = [], head
        for b in self.buffers:
            offs.append(at if b else 0)
            at += (len(b) + 15) // 16 * 16
        out = bytearray(write_root(self.tables(external=offs)))
        assert len(out) == head
        for b in self.buffers:
            out += b + bytes((-len(b)) % 16)
        return bytes(out)


# ---- reader (for dumps and test assertions; trusts its input) ------------

class _Reader:
    def __init__(self, b):
        self.b = b

    def u32(self, p):
        return struct.unpack_from("<I", self.b, p)[0]

    def field(self, t, fid):
        vt = t - struct.unpack_from("<i", self.b, t)[0]
        vts = struct.unpack_from("<H", self.b, vt)[0]
        if 4 + 2 * fid >= vts:
            return None
        o = struct.unpack_from("<H", self.b, vt + 4 + 2 * fid)[0]
        return t + o if o else None

    def scalar(self, t, fid, kind, default=0):
        p = self.field(t, fid)
        return default if p is None else struct.unpack_from(SCALAR[kind][0], self.b, p)[0]

    def ref(self, t, fid):
        p = self.field(t, fid)
        return None if p is None else p + self.u32(p)

    def vec(self, t, fid, kind):
        p = self.ref(t, fid)
        if p is None:
            return None
        n = self.u32(p)
        if kind == "tables":
            return [p + 4 + 4 * i + self.u32(p + 4 + 4 * i) for i in range(n)]
        fmt, s = SCALAR[kind]
        return [struct.unpack_from(fmt, self.b, p + 4 + s * i)[0] for i in range(n)]

    def string(self, t, fid):
        p = self.ref(t, fid)
        return None if p is None else self.b[p + 4:p + 4 + self.u32(p)].decode("utf-8", "replace")


def read_model(b):
    r = _Reader(b)
    root = r.u32(0)
    codes = []
    for c in r.vec(root, 1, "tables") or []:
        dep = r.scalar(c, 0, "i8")
        code = max(dep, r.scalar(c, 3, "i32"))
        codes.append({"builtin": code, "name": BUILTIN_NAME.get(code, "op%d" % code),
                      "version": r.scalar(c, 2, "i32", 1), "custom": r.string(c, 1)})
    buffers = []
    for bt in r.vec(root, 4, "tables") or []:
        d = r.ref(bt, 0)
        buffers.append({"size": 0 if d is None else r.u32(d), "offset": r.scalar(bt, 1, "u64"),
                        "ext_size": r.scalar(bt, 2, "u64")})
    subs = []
    for s in r.vec(root, 2, "tables") or []:
        tensors = []
        for t in r.vec(s, 0, "tables") or []:
            tensors.append({"shape": r.vec(t, 0, "i32"), "type": TENSOR_TYPES.get(r.scalar(t, 1, "i8"), "?"),
                            "buffer": r.scalar(t, 2, "u32"), "name": r.string(t, 3),
                            "quantized": r.ref(t, 4) is not None})
        ops = []
        for o in r.vec(s, 3, "tables") or []:
            ot = r.scalar(o, 3, "u8")
            opts = {}
            ref = r.ref(o, 4)
            if ot and ref is not None and ot in OPTIONS_BY_INDEX:
                name = OPTIONS_BY_INDEX[ot]
                for fname, fid, kind, default in OPTIONS[name][1]:
                    opts[fname] = r.vec(ref, fid, "i32") if kind == "vec_i32" else r.scalar(ref, fid, kind, default)
                opts = {"table": name, **opts}
            elif ot:
                opts = {"table": "union#%d" % ot}
            ops.append({"opcode": r.scalar(o, 0, "u32"), "inputs": r.vec(o, 1, "i32") or [],
                        "outputs": r.vec(o, 2, "i32") or [], "options": opts})
        subs.append({"tensors": tensors, "inputs": r.vec(s, 1, "i32"), "outputs": r.vec(s, 2, "i32"), "ops": ops})
    return {"version": r.scalar(root, 0, "u32"), "codes": codes, "subgraphs": subs, "buffers": buffers}


def summary(b):
    m = read_model(b)
    lines = ["schema version %d, %d subgraph(s), %d buffers" % (m["version"], len(m["subgraphs"]), len(m["buffers"]))]
    ext = [x for x in m["buffers"] if x["offset"] > 1]
    if ext:
        lines.append("%d buffers stored after the flatbuffer" % len(ext))
    for c in m["codes"]:
        lines.append("opcode %s v%d" % (c["name"], c["version"]))
    for si, s in enumerate(m["subgraphs"]):
        types = {}
        for t in s["tensors"]:
            types[t["type"]] = types.get(t["type"], 0) + 1
        q = sum(t["quantized"] for t in s["tensors"])
        lines.append("subgraph %d: %d tensors %s, %d with quantization params, %d ops" %
                     (si, len(s["tensors"]), types, q, len(s["ops"])))
        for i in s["inputs"]:
            lines.append("  input %s %s" % (s["tensors"][i]["name"], s["tensors"][i]["shape"]))
        for i in s["outputs"]:
            lines.append("  output %s %s" % (s["tensors"][i]["name"], s["tensors"][i]["shape"]))
        seen = {}
        for o in s["ops"]:
            name = m["codes"][o["opcode"]]["name"]
            opts = {k: (ACT_NAME.get(v, v) if k == "fused_activation_function" else v)
                    for k, v in o["options"].items() if k != "table"}
            if name == "RESHAPE":
                opts = {"new_shape": "present" if opts.get("new_shape") else "absent", "inputs": len(o["inputs"])}
            if name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
                w = s["tensors"][o["inputs"][1]]["shape"]
                opts["kernel"] = "x".join(map(str, w[1:3])) if name != "FULLY_CONNECTED" else "fc"
                opts["bias"] = len(o["inputs"]) > 2 and o["inputs"][2] >= 0
            if name == "DEQUANTIZE":
                opts = {"from": s["tensors"][o["inputs"][0]]["type"],
                        "const": s["tensors"][o["inputs"][0]]["buffer"] != 0}
            if name == "MEAN":
                axes_t = s["tensors"][o["inputs"][1]]
                opts["axes_shape"] = axes_t["shape"]
            key = name + " " + " ".join("%s=%s" % kv for kv in sorted(opts.items()))
            seen[key] = seen.get(key, 0) + 1
        for k in sorted(seen):
            lines.append("  %4d x %s" % (seen[k], k))
    return "\n".join(lines)


if __name__ == "__main__":
    for f in sys.argv[1:]:
        print("== " + f)
        print(summary(open(f, "rb").read()))
