"""tflite_ref.py - helpers of the TFLite executor tests: running a model
with the C executor (tool_tflite_run) and with the real TFLite runtime
(tests/detect/tflite_ref.js under node), and float64 numpy references of
every op src/tflite/ implements, with TFLite's semantics (SAME padding
split with the extra at the end, max pooling that skips padding,
RESIZE_BILINEAR's coordinate rules).
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
REF_JS = TESTS / "detect" / "tflite_ref.js"
REF_RUNTIME = TESTS / "detect" / "node_modules" / "@tensorflow" / "tfjs-tflite" / "wasm" / "tflite_web_api_cc.wasm"
INSTALL_HINT = "cd tests/detect && npm install --ignore-scripts --legacy-peer-deps"


def other_isas():
    """The ISAs besides the native one to run the C executor on: the
    portable scalar path always, AVX2 where the CPU has it."""
    flags = ""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        pass
    return ["scalar"] + (["avx2"] if " avx2" in flags and " fma" in flags else [])


def ref_runtime_problem():
    """Why the reference runtime cannot run here, or None."""
    if not shutil.which("node"):
        return "node is not installed (Debian: apt-get install nodejs npm), then: " + INSTALL_HINT
    if not REF_RUNTIME.exists():
        return "the TFLite reference runtime is not installed: " + INSTALL_HINT
    return None


def _write_inputs(d, inputs):
    paths = []
    for i, a in enumerate(inputs):
        p = Path(d) / ("in%d.npy" % i)
        np.save(p, np.ascontiguousarray(a, dtype=np.float32))
        paths.append(str(p))
    return paths


def run_c(tool, model, inputs, threads=1, isa=None, timeout=600):
    """Outputs (float32 arrays) of the C executor; raises on failure."""
    with tempfile.TemporaryDirectory() as d:
        mp = Path(d) / "m.tflite"
        mp.write_bytes(model)
        cmd = [str(tool), str(mp), "--output", str(Path(d) / "out.npz"), "--threads", str(threads)]
        for p in _write_inputs(d, inputs):
            cmd += ["--input", p]
        env = dict(os.environ)
        if isa:
            env["HAMER_ISA"] = isa
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("tool_tflite_run failed (%d): %s" % (r.returncode, r.stderr.strip()))
        z = np.load(Path(d) / "out.npz")
        return [z["output_%d" % i] for i in range(len(z.files))]


def run_c_error(tool, model):
    """(exit status, stderr) of loading and running a model that should fail."""
    with tempfile.TemporaryDirectory() as d:
        mp = Path(d) / "m.tflite"
        mp.write_bytes(model)
        r = subprocess.run([str(tool), str(mp)], capture_output=True, text=True, timeout=300)
        return r.returncode, r.stderr


def run_c_info(tool, model):
    """tool_tflite_run --info's last line as a dict: ops, run (ops left to
    run after folding and fusion), arena_bytes, scratch_bytes, isa."""
    with tempfile.TemporaryDirectory() as d:
        mp = Path(d) / "m.tflite"
        mp.write_bytes(model)
        r = subprocess.run([str(tool), str(mp), "--info"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("tool_tflite_run --info failed: %s" % r.stderr.strip())
        words = r.stdout.strip().split("\n")[-1].split()
        return {k: (v if k == "isa" else int(v)) for k, v in zip(words[::2], words[1::2])}


def run_ref(model, inputs, timeout=300):
    """Outputs of the real TFLite runtime; raises on failure."""
    with tempfile.TemporaryDirectory() as d:
        mp = Path(d) / "m.tflite"
        mp.write_bytes(model)
        cmd = ["node", str(REF_JS), str(mp), "--out-dir", str(Path(d) / "out")]
        for p in _write_inputs(d, inputs):
            cmd += ["--input", p]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("tflite_ref.js failed (%d): %s" % (r.returncode, r.stderr.strip()))
        out = sorted(Path(d, "out").glob("output_*.npy"), key=lambda p: int(p.stem.split("_")[1]))
        return [np.load(p) for p in out]


# ---- float64 references -------------------------------------------------------

def act(y, a):
    if a in (None, "NONE"):
        return y
    if a == "RELU":
        return np.maximum(y, 0)
    if a == "RELU6":
        return np.clip(y, 0, 6)
    if a == "RELU_N1_TO_1":
        return np.clip(y, -1, 1)
    raise ValueError(a)


def window(n, k, s, padding):
    """(output size, padding before, padding after) of one axis."""
    if padding == "SAME":
        out = -(-n // s)
        total = max((out - 1) * s + k - n, 0)
        return out, total // 2, total - total // 2
    out = (n - k) // s + 1
    return out, 0, 0


def _padded(x, kh, kw, sh, sw, padding, value):
    n, h, w, c = x.shape
    oh, pt, pb = window(h, kh, sh, padding)
    ow, pl, pr = window(w, kw, sw, padding)
    xp = np.pad(x, ((0, 0), (pt, max(pb, 0)), (pl, max(pr, 0)), (0, 0)), constant_values=value)
    return xp, oh, ow


def conv2d(x, w, b, sh, sw, padding, a=None):
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    o, kh, kw, c = w.shape
    xp, oh, ow = _padded(x, kh, kw, sh, sw, padding, 0.0)
    y = np.zeros((x.shape[0], oh, ow, o))
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, ky:ky + sh * (oh - 1) + 1:sh, kx:kx + sw * (ow - 1) + 1:sw, :]
            y += patch @ w[:, ky, kx, :].T
    if b is not None:
        y += b
    return act(y, a)


def depthwise(x, w, b, sh, sw, padding, a=None):
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    _, kh, kw, c = w.shape
    xp, oh, ow = _padded(x, kh, kw, sh, sw, padding, 0.0)
    y = np.zeros((x.shape[0], oh, ow, c))
    for ky in range(kh):
        for kx in range(kw):
            y += xp[:, ky:ky + sh * (oh - 1) + 1:sh, kx:kx + sw * (ow - 1) + 1:sw, :] * w[0, ky, kx]
    if b is not None:
        y += b
    return act(y, a)


def maxpool(x, fh, fw, sh, sw, padding, a=None):
    xp, oh, ow = _padded(x.astype(np.float64), fh, fw, sh, sw, padding, -np.inf)
    y = np.full((x.shape[0], oh, ow, x.shape[3]), -np.inf)
    for ky in range(fh):
        for kx in range(fw):
            y = np.maximum(y, xp[:, ky:ky + sh * (oh - 1) + 1:sh, kx:kx + sw * (ow - 1) + 1:sw, :])
    return act(y, a)


def resize_bilinear(x, oh, ow, align_corners=False, half_pixel=False):
    x = x.astype(np.float64)
    n, h, w, c = x.shape

    def coords(o, i):
        scale = (i - 1) / (o - 1) if align_corners and o > 1 else i / o
        v = (np.arange(o) + 0.5) * scale - 0.5 if half_pixel else np.arange(o) * scale
        lo = np.maximum(np.floor(v), 0).astype(int)
        hi = np.minimum(np.ceil(v), i - 1).astype(int)
        return v - lo, lo, hi

    dy, y0, y1 = coords(oh, h)
    dx, x0, x1 = coords(ow, w)
    dy = dy[None, :, None, None]
    dx = dx[None, None, :, None]
    r0, r1 = x[:, y0], x[:, y1]
    return (r0[:, :, x0] * (1 - dy) * (1 - dx) + r1[:, :, x0] * dy * (1 - dx) +
            r0[:, :, x1] * (1 - dy) * dx + r1[:, :, x1] * dy * dx)


def fully_connected(x, w, b, keep_num_dims=False, a=None):
    k = w.shape[1]
    y = x.astype(np.float64).reshape(-1, k) @ w.astype(np.float64).T
    if b is not None:
        y += b
    if keep_num_dims:
        y = y.reshape(x.shape[:-1] + (w.shape[0],))
    return act(y, a)


def prelu(x, alpha):
    x = x.astype(np.float64)
    return np.where(x >= 0, x, x * alpha)


def logistic(x):
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


def max_rel_err(got, want, scale=None):
    """max |got - want| over the scale (default: max |want|, at least 1e-30)."""
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64)
    if scale is None:
        scale = float(np.abs(want).max()) if want.size else 1.0
    return float(np.abs(got - want).max()) / max(scale, 1e-30)
