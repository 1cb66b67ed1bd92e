"""Dynamic int8 quantisation of the exported HaMeR ONNX model, as
onnxruntime.quantization.quantize_dynamic (per_channel=True, weight_type
QInt8) writes it, built with the onnx package alone (Debian python3-onnx):

    /usr/bin/python3 bench/peers/quantize_onnx.py --model DIR/hamer.onnx --out DIR8/hamer.onnx [--scope backbone]

Every MatMul of the backbone (scope) whose second input is a constant
[K, N] weight becomes
    DynamicQuantizeLinear(x) -> x_q (uint8), x_scale, x_zero_point   (per tensor, at run time)
    MatMulInteger(x_q, W_q, x_zero_point, W_zero_point)              (W_q int8 [K, N], zero points 0)
    Cast(int32 -> float) * (x_scale * W_scale)                       (W_scale [N]: max|W[:, n]| / 127)
which ONNX Runtime's graph optimiser fuses into DynamicQuantizeMatMul.
The decoder head, MANO and the patch convolution stay fp32 (as in hamer.c's
fast precision, whose int8 is the backbone's four big matmuls per block).
Weights are written as one external data file beside the output.
"""

import argparse
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def in_scope(node, consumers, inits, scope):
    if scope in node.name:
        return True
    # Export without scoped node names: the Add after the MatMul holds the
    # Linear's bias, named after the module ("backbone.blocks.0.attn.qkv.bias").
    for c in consumers.get(node.output[0], []):
        if c.op_type == "Add" and any(i in inits and i.startswith(scope + ".") for i in c.input):
            return True
    return False


def quantize(model, scope):
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    new_nodes, drop, count = [], set(), 0
    for n in g.node:
        w = inits.get(n.input[1]) if n.op_type == "MatMul" and len(n.input) == 2 else None
        if w is None or len(w.dims) != 2 or w.data_type != TensorProto.FLOAT or not in_scope(n, consumers, inits, scope):
            new_nodes.append(n)
            continue
        W = numpy_helper.to_array(w).astype(np.float32)             # [K, N]
        amax = np.abs(W).max(axis=0)
        scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        Wq = np.clip(np.rint(W / scale), -127, 127).astype(np.int8)
        base = f"{w.name}_q{count}"
        g.initializer.extend([
            numpy_helper.from_array(Wq, base + "_quantized"),
            numpy_helper.from_array(scale, base + "_scale"),
            numpy_helper.from_array(np.zeros(W.shape[1], np.int8), base + "_zero_point"),
        ])
        drop.add(w.name)
        x, y, p = n.input[0], n.output[0], f"{n.name or base}_dq"
        new_nodes += [
            helper.make_node("DynamicQuantizeLinear", [x], [p + "_x_q", p + "_x_scale", p + "_x_zp"], name=p + "_quant"),
            helper.make_node("MatMulInteger", [p + "_x_q", base + "_quantized", p + "_x_zp", base + "_zero_point"],
                             [p + "_i32"], name=p + "_matmul"),
            helper.make_node("Cast", [p + "_i32"], [p + "_f32"], to=TensorProto.FLOAT, name=p + "_cast"),
            helper.make_node("Mul", [p + "_x_scale", base + "_scale"], [p + "_scale"], name=p + "_scale_mul"),
            helper.make_node("Mul", [p + "_f32", p + "_scale"], [y], name=p + "_output_mul"),
        ]
        count += 1
    # A weight another node still reads stays.
    still = {i for n in new_nodes for i in n.input}
    keep = [t for t in g.initializer if t.name not in drop or t.name in still]
    del g.initializer[:]
    g.initializer.extend(keep)
    del g.node[:]
    g.node.extend(new_nodes)
    return count


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scope", default="backbone")
    args = ap.parse_args(argv)
    t0 = time.time()
    model = onnx.load(args.model)
    n = quantize(model, args.scope)
    if n == 0:
        print(f"quantize_onnx: no MatMul with a constant weight in scope '{args.scope}'", file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    onnx.save_model(model, args.out, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=os.path.basename(args.out) + ".data", size_threshold=1024)
    print(f"quantize_onnx: {n} MatMuls in '{args.scope}' to int8 ({args.out}, {time.time() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
