"""Time HaMeR (bench/peers/hamer_torch.py) in Debian's PyTorch, fp32, batch 1.

    /usr/bin/python3 bench/peers/torch_time.py --ckpt X.ckpt --input crop.f32
        [--mode eager|mkldnn] [--threads 2] [--warmup 2] [--iters 10] [--outdir DIR]

eager:  the module as written (nn.Linear -> addmm -> the system BLAS; on
        Debian bookworm that is the netlib reference BLAS unless OpenBLAS or
        BLIS is installed as the libblas.so.3 alternative).
mkldnn: torch.utils.mkldnn.to_mkldnn(model): Linear and Conv2d run in oneDNN
        (PyTorch's own JIT-compiled AVX-512 kernels), everything else eager.
Prints one JSON object (per-iteration seconds); with --outdir, writes the
outputs as raw float32 for the cross-check.
"""

import argparse
import json
import os
import resource
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hamer_torch  # noqa: E402


def blas_library():
    """The libblas.so.3 this process mapped (the Debian alternative in use)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.split()[-1].lower()}
        return sorted(os.path.realpath(p) for p in libs)
    except OSError:
        return []


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--input", required=True, help="raw float32 [1,3,256,192]")
    ap.add_argument("--mode", choices=["eager", "mkldnn"], default="eager")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--outdir")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    x = torch.from_numpy(np.fromfile(args.input, "<f4").reshape(1, 3, 256, 192).copy())
    t0 = time.time()
    model = hamer_torch.from_checkpoint(args.ckpt)
    if args.mode == "mkldnn":
        from torch.utils import mkldnn as mkldnn_utils
        model = mkldnn_utils.to_mkldnn(model)
    load_s = time.time() - t0
    times = []
    with torch.no_grad():
        for _ in range(args.warmup):
            out = model(x)
        for _ in range(args.iters):
            a = time.perf_counter()
            out = model(x)
            times.append(time.perf_counter() - a)
    if args.outdir:
        os.makedirs(args.outdir, exist_ok=True)
        for name, t in zip(("params", "vertices"), out if isinstance(out, tuple) else (out,)):
            t.numpy().astype("<f4").tofile(os.path.join(args.outdir, name + ".f32"))
    print(json.dumps({
        "runtime": "pytorch", "mode": args.mode, "version": torch.__version__,
        "threads": torch.get_num_threads(), "warmup": args.warmup, "iters": args.iters,
        "load_s": load_s, "times_s": times, "blas": blas_library(),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
