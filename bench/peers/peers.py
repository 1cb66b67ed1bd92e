"""Helpers of bench/peers/run.sh: prepare the inputs, then tabulate the results.

    peers.py prepare --out DIR [--ckpt PATH] [--seed S]
        writes (or reuses) the full-size synthetic checkpoint (tests/hamer_fixture.py,
        regenerated when the generator changes) and the crop (crop.f32, crop.npy)
    peers.py table --out DIR
        reads DIR/results/*.json (NAME.json, NAME.r2.json, ...: the rounds of one
        row), cpu_peak.txt, hamer-version.txt and the runtimes' outputs, prints
        the markdown tables: runtimes, hamer's stages (% of each unit's peak),
        hamer's 1 -> N thread scaling
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


def _rounds(out, name):
    """The result files of one row, round 1 first: NAME.json, NAME.r2.json, ..."""
    res = out / "results"
    files = [res / f"{name}.json"] + sorted(res.glob(f"{name}.r*.json"), key=lambda f: int(f.stem.rsplit(".r", 1)[1]))
    return [json.loads(f.read_text()) for f in files if f.exists()]


def _merge(runs):
    """One row from its rounds: round 1's fields, every round's timed runs
    (ms_all), the per-stage median over the rounds' stage medians."""
    err = next((r for r in runs if "error" in r), None)
    if err:
        return dict(err)
    r = dict(runs[0])
    ms = []
    for x in runs:
        if "times_s" in x:
            ms += [1000 * t for t in x["times_s"]]
        elif "ms_per_crop_all" in x:
            ms += x["ms_per_crop_all"]
        elif "ms_per_crop_median" in x:
            ms.append(x["ms_per_crop_median"])
    r["ms_all"], r["rounds"] = ms, len(runs)
    if all("stages" in x for x in runs):
        r["stages"] = {k: statistics.median(x["stages"][k] for x in runs) for k in runs[0]["stages"]}
    return r


# Full-size HaMeR: 192 tokens of 1280, MLP 5120 (FLOPs per crop as hamer bench counts them).
T, D, M = 192, 1280, 5120


def _stage_gflop(depth, total_gflop):
    g = {"patch_embed": 2 * T * 768 * D, "qkv": depth * 2 * T * D * 3 * D, "attention": depth * 4 * T * T * D,
         "proj": depth * 2 * T * D * D, "fc1_gelu": depth * 2 * T * D * M, "fc2": depth * 2 * T * D * M}
    g = {k: v / 1e9 for k, v in g.items()}
    g["head"] = total_gflop - sum(g.values())  # the decoder and the readout: the rest of the count
    return g


def _peaks(out, threads):
    """{unit: peak Gop/s on `threads` threads} from bench/cpu_peak.c's lines."""
    f = out / "results" / "cpu_peak.txt"
    peaks = {}
    if f.exists():
        for line in f.read_text().splitlines():
            if f"threads={threads} " not in line + " ":
                continue
            name, val = line.split("threads=")
            unit = " ".join(w for w in name.split() if w not in ("GFLOP/s", "Gop/s"))
            peaks[unit] = float(val.split()[1])
    return peaks


def _units(precision, version, isa):
    """The unit each stage ran on, from `hamer --version` (kernels, fast's
    scheme and attention). Stages not listed have no single unit."""
    fp32 = "fp32 FMA zmm" if isa == "avx512" else "fp32 FMA ymm"
    u = {k: fp32 for k in ("patch_embed", "qkv", "attention", "proj", "fc1_gelu", "fc2", "head")}
    if precision == "fp32":
        return u
    amx = "int8 on amx tiles" in version
    i8 = "int8 amx tdpbusd" if amx else "int8 dpbusd"
    rest = "bf16" if "decoder: bf16" in version else "fp32"
    u.update(qkv=i8, fc1_gelu=i8, fc2=i8, head=i8 + f" (K/V; rest {rest})")
    if "proj: int8 centred" in version:
        u["proj"] = i8
    elif "sensitive matmuls: bf16" in version:
        u["proj"] = "bf16 amx tdpbf16ps" if amx and "amx-bf16" in version else "bf16 dpbf16ps"
    if "fast attention: bf16 on amx tiles" in version:
        u["attention"] = "bf16 amx tdpbf16ps"
    elif "fast attention: bf16" in version:
        u["attention"] = "bf16 dpbf16ps"
    return u


def _stage_tables(out, rows):
    ham = {r["precision"]: r for r in rows if r["_name"].startswith("hamer") and "stages" in r}
    if not ham:
        return
    any_r = next(iter(ham.values()))
    threads = any_r.get("threads", 0)
    peaks = _peaks(out, threads)
    vf = out / "results" / "hamer-version.txt"
    version = vf.read_text() if vf.exists() else ""
    gfl = _stage_gflop(any_r.get("vit_depth", 32), any_r.get("gflop_per_crop", 0))
    cols = [p for p in ("fp32", "fast") if p in ham]
    print(f"\nhamer.c per stage, ms per crop (median over the rounds), and the share of the peak of the unit "
          f"each ran on ({threads} threads, bench/cpu_peak.c on this CPU):\n")
    head = "| stage | GFLOP a crop | " + " | ".join(f"{p} ms | {p} unit | {p} % of peak" for p in cols) + " |"
    print(head)
    print("|" + "---|" * (2 + 3 * len(cols)))
    for st in any_r["stages"]:
        cells = [st, f"{gfl[st]:.1f}" if st in gfl else "-"]
        for p in cols:
            ms = ham[p]["stages"].get(st)
            unit = _units(p, version, ham[p].get("isa", ""))
            un = unit.get(st, "-")
            pk = peaks.get(un.split(" (")[0])
            pct = f"{100 * gfl[st] / (ms / 1000) / pk:.0f} %" if st in gfl and pk and ms else "-"
            cells += [f"{ms:.1f}" if ms is not None else "-", un, pct]
        print("| " + " | ".join(cells) + " |")
    if peaks:
        print("\n- unit peaks on " + f"{threads} threads: " +
              ", ".join(f"{k} {v:.0f}" for k, v in peaks.items()) + " (Gop/s, GFLOP/s)", end="")
    # 1 -> threads scaling
    sc = {p: json.loads((out / "results" / f"scaling-{p}.json").read_text()) for p in cols
          if (out / "results" / f"scaling-{p}.json").exists()}
    sc = {p: r for p, r in sc.items() if "stages" in r}
    if sc:
        print(f"\n\nhamer.c 1 -> {threads} threads, ms per crop (1 thread: one run after the rounds; "
              f"{threads}: the rounds' medians):\n")
        print("| stage | " + " | ".join(f"{p} 1 thread | {p} {threads} threads | {p} speed-up" for p in sc) + " |")
        print("|" + "---|" * (1 + 3 * len(sc)))
        names = list(any_r["stages"]) + ["whole crop"]
        for st in names:
            cells = [st]
            for p, r in sc.items():
                one = r["ms_per_crop_median"] if st == "whole crop" else r["stages"].get(st)
                two = statistics.median(ham[p]["ms_all"]) if st == "whole crop" else ham[p]["stages"].get(st)
                sp = f"{one / two:.2f}x" if one and two else "-"
                cells += [f"{one:.1f}" if one is not None else "-", f"{two:.1f}" if two is not None else "-", sp]
            print("| " + " | ".join(cells) + " |")


def table(args):
    out = Path(args.out)
    rows = []
    for name, label in RUNS:
        runs = _rounds(out, name)
        if runs:
            r = _merge(runs)
            r["_name"], r["label"] = name, label
            rows.append(r)

    def stats(r):
        t = r.get("ms_all")
        return (statistics.median(t), min(t), len(t)) if t else None

    cpu = out / "results" / "cpu.txt"
    if cpu.exists():
        print(f"CPU: {cpu.read_text().strip()} ({os.cpu_count()} logical CPUs)\n")
    ort = next((r for r in rows if r["_name"] == "ort"), None)
    ort8 = next((r for r in rows if r["_name"] == "ort-int8"), None)
    ort_med = stats(ort)[0] if ort and "error" not in ort and stats(ort) else None
    ort8_med = stats(ort8)[0] if ort8 and "error" not in ort8 and stats(ort8) else None
    # One fp32 reference for every row's accuracy: ONNX Runtime's fp32 outputs.
    ref_p, ref_v = _outputs(out, "ort")

    print("| runtime | precision | threads | rounds | N | median ms/crop | min ms/crop | crops/s | speed vs ORT fp32 "
          "| speed vs ORT int8 | params PCC vs fp32 ref | max abs Δ params vs fp32 ref "
          "| vertices MAE vs fp32 ref (mm) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        label, prec = r["label"], r.get("precision", "int8" if r["_name"] == "ort-int8" else "fp32")
        if "error" in r:
            print(f"| {label} | {prec} | | | | unavailable: {r['error']} | | | | | | | |")
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
        print(f"| {label} | {prec} | {r.get('threads', '')} | {r['rounds']} | {n} | {med:.0f} | {mn:.0f} "
              f"| {1000 / med:.3f} | {ratio} | {ratio8} | {pcc} | {dp} | {dv} |")
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
            notes.append(f"hamer {r['precision']} ({r['scheme']}): peak RSS {r['peak_rss_mb']:.0f} MB"
                         + (f", params PCC vs fp32 {r['params_pcc_vs_fp32']:.6f}, vertices MAE vs fp32 "
                            f"{r['vertices_mae_mm_vs_fp32']:.4f} mm" if r["precision"] != "fp32" else ""))
    vf = out / "results" / "hamer-version.txt"
    if vf.exists():
        notes.append(vf.read_text().strip())
    for n in notes:
        print(f"\n- {n}", end="")
    print()
    _stage_tables(out, rows)
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
