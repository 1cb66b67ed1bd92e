"""tfjs_model.py - writes small TF.js graph models (model.json + one weight
file) for the tests of src/tfjs/, the way tensorflowjs_converter lays them
out: nodes with attributes as TF's AttrValue JSON (ints as decimal strings,
strings base64), Const nodes whose values are the weights manifest's entries
of the same name, weights concatenated in manifest order, optionally
quantized (uint8 / uint16 affine, float16).

Also the TF.js reference runner (tests/tfjs/tfjs_ref.js in --serve mode: one
node process a test session) and the C side (tool_tflite_run on a .json).
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parent
REF_JS = TESTS / "tfjs" / "tfjs_ref.js"
REF_PKG = TESTS / "tfjs" / "node_modules" / "@tensorflow" / "tfjs"
INSTALL_HINT = "cd tests/tfjs && npm ci --ignore-scripts --legacy-peer-deps"


def b64(s):
    return base64.b64encode(s.encode()).decode()


def ints(v):
    return {"list": {"i": [str(int(x)) for x in v]}}


def shape_attr(shape):
    return {"shape": {"dim": [{"size": str(int(d))} for d in shape]}}


class Graph:
    def __init__(self):
        self.nodes = []
        self.weights = []
        self.chunks = []
        self.values = {}

    def node(self, op, name, inputs=(), **attr):
        n = {"name": name, "op": op, "attr": attr}
        if inputs:
            n["input"] = list(inputs)
        self.nodes.append(n)
        return name

    def placeholder(self, name, shape):
        return self.node("Placeholder", name, dtype={"type": "DT_FLOAT"}, shape=shape_attr(shape))

    def const(self, name, a, quant=None):
        """A Const node and its weight; quant None, "uint8", "uint16" or
        "float16". Returns the name; self.values[name] holds the values a
        reader must decode (float64 of the float32 TF.js makes)."""
        a = np.asarray(a)
        is_int = a.dtype.kind in "iu"
        dtype = "int32" if is_int else "float32"
        entry = {"name": name, "shape": list(a.shape), "dtype": dtype}
        if quant is None:
            raw = a.astype(np.int32 if is_int else np.float32)
            self.chunks.append(raw.tobytes())
            self.values[name] = raw.astype(np.float64)
        elif quant == "float16":
            h = a.astype(np.float16)
            self.chunks.append(h.tobytes())
            entry["quantization"] = {"dtype": "float16", "original_dtype": dtype}
            self.values[name] = h.astype(np.float32).astype(np.float64)
        else:
            levels = 255 if quant == "uint8" else 65535
            lo, hi = float(a.min()), float(a.max())
            scale = (hi - lo) / levels if hi > lo else 1.0
            q = np.clip(np.round((a - lo) / scale), 0, levels).astype(np.uint8 if quant == "uint8" else np.uint16)
            self.chunks.append(q.tobytes())
            entry["quantization"] = {"dtype": quant, "min": lo, "scale": scale, "original_dtype": dtype}
            deq = q.astype(np.float64) * scale + lo
            self.values[name] = np.round(deq) if is_int else deq.astype(np.float32).astype(np.float64)
        self.weights.append(entry)
        tdt = "DT_INT32" if is_int else "DT_FLOAT"
        self.node("Const", name, dtype={"type": tdt},
                  value={"tensor": {"dtype": tdt, "tensorShape": {"dim": [{"size": str(d)} for d in a.shape]}}})
        return name

    def conv(self, name, x, w, b=None, stride=1, padding="SAME", act=None, depthwise=False, quant=None):
        """Conv2D / _FusedConv2D / DepthwiseConv2dNative /
        FusedDepthwiseConv2dNative; w in TF's layout (HWIO, or [kh,kw,C,1])."""
        wn = self.const(name + "/w", w, quant)
        inputs = [x, wn]
        attr = {"strides": ints([1, stride, stride, 1]), "padding": {"s": b64(padding)},
                "data_format": {"s": b64("NHWC")}, "dilations": ints([1, 1, 1, 1]), "T": {"type": "DT_FLOAT"}}
        if b is not None:
            inputs.append(self.const(name + "/b", b, quant))
            ops = ["BiasAdd"] + ([act] if act else [])
            attr["fused_ops"] = {"list": {"s": [b64(o) for o in ops]}}
            attr["num_args"] = {"i": "1"}
            op = "FusedDepthwiseConv2dNative" if depthwise else "_FusedConv2D"
        else:
            op = "DepthwiseConv2dNative" if depthwise else "Conv2D"
        return self.node(op, name, inputs, **attr)

    def json(self, path_name="w.bin"):
        return {"format": "graph-model", "generatedBy": "tests/tfjs_model.py", "convertedBy": "tests/tfjs_model.py",
                "modelTopology": {"node": self.nodes, "library": {}, "versions": {"producer": 1}},
                "weightsManifest": [{"paths": [path_name], "weights": self.weights}]}

    def write(self, d):
        """model.json and w.bin in directory d; returns the json path."""
        d = Path(d)
        d.mkdir(parents=True, exist_ok=True)
        (d / "w.bin").write_bytes(b"".join(self.chunks))
        (d / "model.json").write_text(json.dumps(self.json()))
        return d / "model.json"


# ---- runners -------------------------------------------------------------

def ref_problem():
    if not shutil.which("node"):
        return "node is not installed (Debian: apt-get install nodejs npm), then: " + INSTALL_HINT
    if not REF_PKG.is_dir():
        return "TensorFlow.js is not installed: " + INSTALL_HINT
    return None


class Ref:
    """tfjs_ref.js --serve: requests one per line."""

    def __init__(self):
        self.p = subprocess.Popen(["node", str(REF_JS), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)

    def run(self, model, x, fetch, feed=None, resize=None, nms=None):
        """The fetched tensors (and 'resized', 'nms', 'max' when asked for)."""
        with tempfile.TemporaryDirectory() as d:
            inp = os.path.join(d, "x.npy")
            np.save(inp, np.ascontiguousarray(x))
            q = {"model": str(model), "input": inp, "fetch": list(fetch), "out_dir": os.path.join(d, "out")}
            if feed:
                q["feed"] = feed
            if resize:
                q["resize"] = list(resize)
            if nms:
                q["nms"] = list(nms)
            self.p.stdin.write(json.dumps(q) + "\n")
            self.p.stdin.flush()
            reply = json.loads(self.p.stdout.readline())
            if "error" in reply:
                raise RuntimeError("tfjs_ref: " + reply["error"])
            out = {i: np.load(os.path.join(d, "out", "fetch_%d.npy" % i)) for i in range(len(fetch))}
            for extra in ("resized", "nms", "max"):
                p = os.path.join(d, "out", extra + ".npy")
                if os.path.exists(p):
                    out[extra] = np.load(p)
            return out

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def run_c(tool, model, x, feed, fetch, threads=1, isa=None, timeout=300):
    """Outputs of tool_tflite_run on a TF.js model (list, in fetch order)."""
    with tempfile.TemporaryDirectory() as d:
        inp = os.path.join(d, "x.npy")
        np.save(inp, np.ascontiguousarray(x, dtype=np.float32))
        cmd = [str(tool), str(model), "--feed", feed, "--shape", ",".join(map(str, x.shape)), "--input", inp,
               "--output", os.path.join(d, "out.npz"), "--threads", str(threads)]
        for f in fetch:
            cmd += ["--fetch", f]
        env = dict(os.environ)
        if isa:
            env["HAMER_ISA"] = isa
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("tool_tflite_run failed (%d): %s" % (r.returncode, r.stderr.strip()))
        z = np.load(os.path.join(d, "out.npz"))
        return [z["output_%d" % i] for i in range(len(fetch))]


def run_c_error(tool, model, feed="x", fetch=("y",), shape=(1, 4, 4, 3)):
    """(exit status, stderr) of compiling a model that should fail."""
    cmd = [str(tool), str(model), "--feed", feed, "--shape", ",".join(map(str, shape))]
    for f in fetch:
        cmd += ["--fetch", f]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stderr
