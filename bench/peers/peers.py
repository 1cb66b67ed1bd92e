"""Helpers of bench/peers/run.sh: prepare the inputs, then tabulate the results.

    peers.py prepare --out DIR [--ckpt PATH] [--seed S]
        writes (or reuses) the full-size synthetic checkpoint (tests/hamer_fixture.py,
        regenerated when the generator changes) and the crop (crop.f32, crop.npy)
    peers.py table --out DIR
        reads DIR/results/*.json and the runtimes' outputs, prints the markdown table
"""

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))


def prepare(args):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.ckpt:
        ckpt = Path(args.ckpt)
    else:
        import hamer_fixture  # torch import: only here
        ckpt = out / f"synthetic-d32h6-s{args.seed}.ckpt"
        meta = out / (ckpt.name + ".json")
        want = {"generator": hamer_fixture.generator_digest(), "depth": 32, "head_depth": 6, "seed": args.seed}
        have = json.loads(meta.read_text()) if meta.exists() else None
        if not (ckpt.exists() and have and {k: have.get(k) for k in want} == want
                and have.get("size") == ckpt.stat().st_size):
            print(f"peers: writing {ckpt} (tests/hamer_fixture.py, 32/6, seed {args.seed})", file=sys.stderr)
            tmp = ckpt.with_suffix(".tmp")
            hamer_fixture.write_checkpoint(str(tmp), depth=32, head_depth=6, seed=args.seed, mano=True)
            os.replace(tmp, ckpt)
            want["size"] = ckpt.stat().st_size
            meta.write_text(json.dumps(want))
    # One normalised crop (values like a normalised image: ~N(0,1)).
    crop = np.random.RandomState(7).standard_normal((1, 3, 256, 192)).astype("<f4")
    crop.tofile(out / "crop.f32")
    np.save(out / "crop.npy", crop)
    print(ckpt)


# Result files (results/<name>.json) in table order, with their labels.
RUNS = [
    ("ort", "ONNX Runtime (onnxruntime-node, CPU EP)"),
    ("ort-int8", "ONNX Runtime (onnxruntime-node, CPU EP), dynamic int8 backbone"),
    ("torch-mkldnn", "PyTorch 1.13 + to_mkldnn (oneDNN Linear/Conv)"),
    ("torch-eager", "PyTorch 1.13 eager (Debian, system BLAS)"),
    ("hamer-fp32", "hamer.c bench"),
    ("hamer-fast", "hamer.c bench"),
]


def _load_f32(path):
    return np.fromfile(path, "<f4") if Path(path).exists() else None


def _outputs(out, name):
    """(params, vertices) a run wrote: outputs/<name>/*.f32 or outputs/<name>.npz."""
    npz = out / "outputs" / f"{name}.npz"
    if npz.exists():
        with np.load(npz) as z:
            return (z["params"].astype("<f4").ravel(),
                    z["vertices"].astype("<f4").ravel() if "vertices" in z.files else None)
    d = out / "outputs" / name
    return _load_f32(d / "params.f32"), _load_f32(d / "vertices.f32")


def table(args):
    out = Path(args.out)
    rows = []
    for name, label in RUNS:
        f = out / "results" / f"{name}.json"
        if f.exists():
            r = json.loads(f.read_text())
            r["_name"], r["label"] = name, label
            rows.append(r)

    def stats(r):
        if "times_s" in r:
            t = r["times_s"]
            return 1000 * statistics.median(t), 1000 * min(t), len(t)
        if "ms_per_crop_median" in r:
            return r["ms_per_crop_median"], r["ms_per_crop_min"], r["iters"]
        return None

    ort = next((r for r in rows if r["_name"] == "ort"), None)
    ort8 = next((r for r in rows if r["_name"] == "ort-int8"), None)
    ort_med = stats(ort)[0] if ort and stats(ort) else None
    ort8_med = stats(ort8)[0] if ort8 and "error" not in ort8 and stats(ort8) else None
    # One fp32 reference for every row's accuracy: ONNX Runtime's fp32 outputs.
    ref_p, ref_v = _outputs(out, "ort")

    print("| runtime | precision | threads | N | median ms/crop | min ms/crop | crops/s | speed vs ORT fp32 "
          "| speed vs ORT int8 | params PCC vs fp32 ref | max abs Δ params vs fp32 ref "
          "| vertices MAE vs fp32 ref (mm) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        label, prec = r["label"], r.get("precision", "int8" if r["_name"] == "ort-int8" else "fp32")
        if "error" in r:
            print(f"| {label} | {prec} | | | unavailable: {r['error']} | | | | | | | |")
            continue
        s = stats(r)
        if not s:
            continue
        med, mn, n = s
        ratio = f"{ort_med / med:.2f}x" if ort_med else "n/a"
        ratio8 = f"{ort8_med / med:.2f}x" if ort8_med else "n/a"
        pcc = dp = dv = ""
        p, v = _outputs(out, r["_name"])
        if ref_p is not None and p is not None and p.shape == ref_p.shape:
            dp = f"{np.abs(p - ref_p).max():.2e}"
            pcc = f"{np.corrcoef(p.astype(np.float64), ref_p.astype(np.float64))[0, 1]:.6f}"
        if ref_v is not None and v is not None and v.shape == ref_v.shape:
            dv = f"{1000 * np.abs(v.astype(np.float64) - ref_v).mean():.4f}"
        print(f"| {label} | {prec} | {r.get('threads', '')} | {n} | {med:.0f} | {mn:.0f} | {1000 / med:.3f} "
              f"| {ratio} | {ratio8} | {pcc} | {dp} | {dv} |")
    notes = []
    for r in rows:
        if r.get("runtime") == "pytorch" and r.get("blas"):
            notes.append(f"PyTorch {r['version']} BLAS: {', '.join(r['blas'])}"
                         f" (OPENBLAS_CORETYPE={r.get('openblas_coretype')})")
            break
    for o, what in ((ort, "fp32"), (ort8, "dynamic int8")):
        if o and "error" not in o:
            notes.append(f"onnxruntime-node {o.get('version')} {what}: session creation {o['session_create_s']:.1f} s, "
                         f"peak RSS {o.get('peak_rss_mb', 0):.0f} MB")
    for r in rows:
        if "gflops" in r:
            pk = r.get("pct_of_peak")
            notes.append(f"hamer {r['precision']} ({r['scheme']}): {r['gflops']:.1f} GFLOP/s"
                         + (f" = {pk:.1f}% of the measured fp32 FMA peak {r['peak_gflops_fp32']:.1f} GFLOP/s"
                            if pk is not None else "")
                         + (" (model FLOPs; not the int8/bf16 units' own peak)" if r["precision"] != "fp32" else "")
                         + f", peak RSS {r['peak_rss_mb']:.0f} MB"
                         + (f", params PCC vs fp32 {r['params_pcc_vs_fp32']:.6f}, vertices MAE vs fp32 "
                            f"{r['vertices_mae_mm_vs_fp32']:.4f} mm" if r["precision"] != "fp32" else ""))
    for n in notes:
        print(f"\n- {n}", end="")
    print()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", required=True)
    p.add_argument("--ckpt")
    p.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("table")
    t.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    (prepare if args.cmd == "prepare" else table)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
