#!/usr/bin/env bash
# run.sh - hamer.c against ONNX Runtime (Node) and PyTorch on one full-size model.
#
#   bench/peers/run.sh            (from anywhere; needs build/hamer and bench/peers/node_modules)
#
# One run: writes (or reuses) the full-size synthetic checkpoint with
# tests/hamer_fixture.py, exports it to ONNX (bench/peers/export_onnx.py:
# backbone + head + MANO, batch 1, opset 13), then times, on the same crop,
# fp32, batch 1, THREADS threads:
#   ONNX Runtime via npm onnxruntime-node (CPU EP, intra-op THREADS, inter-op 1),
#     fp32 and with the backbone dynamically quantised to int8 (quantize_onnx.py;
#     needs Debian's python3-onnx)
#   Debian's PyTorch with Linear/Conv in oneDNN (to_mkldnn) and plain eager
#   hamer bench --model <ckpt> --json, fp32 and fast (a row saying why when fast is unavailable)
# and prints a markdown table (medians over ITERS after WARMUP warm-up runs;
# plain eager PyTorch runs EAGER_ITERS times without warm-up: with Debian's
# reference BLAS one crop takes minutes). The outputs of every runtime are
# compared with ONNX Runtime's fp32 outputs, the one reference (params PCC and
# max abs difference, vertices MAE).
#
# Generated files go under $HAMER_BUILD/peers (default build/peers): the
# checkpoint (~2.7 GB), the ONNX model and its external weights (~2.7 GB),
# the int8 one (~1 GB), hamer's model cache (cache/, ~3.6 GB), results/*.json,
# outputs/.
#
# Environment: HAMER_BUILD, PEERS_OUT, PEERS_CKPT (use this checkpoint
# instead of generating one), PEERS_THREADS (2), PEERS_WARMUP (2),
# PEERS_ITERS (10), PEERS_EAGER_ITERS (1; 0 skips plain eager PyTorch),
# PYTHON (/usr/bin/python3: Debian's torch 1.13).
#
# First time: (cd bench/peers && npm install --ignore-scripts) - the
# package's install script only fetches optional GPU binaries from outside;
# the CPU binary for linux x64 ships in the npm tarball.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${HAMER_BUILD:-$REPO/build}
OUT=${PEERS_OUT:-$BUILD/peers}
PY=${PYTHON:-/usr/bin/python3}
THREADS=${PEERS_THREADS:-2}
WARMUP=${PEERS_WARMUP:-2}
ITERS=${PEERS_ITERS:-10}
EAGER_ITERS=${PEERS_EAGER_ITERS:-1}
HAMER=$BUILD/hamer
# hamer's loads of the checkpoint (bench, its fp32 reference, regress) share
# one model cache here rather than in the user's.
export HAMER_CACHE_DIR=${HAMER_CACHE_DIR:-$OUT/cache}
# Debian's OpenBLAS 0.3.21 (PyTorch's BLAS when libopenblas0-pthread is the
# libblas.so.3 alternative) runs AVX2 kernels on AVX-512 CPUs it does not
# recognise unless told.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; fi

say() { printf 'peers: %s\n' "$*" >&2; }

[ -x "$HAMER" ] || { say "$HAMER not built (cmake -B build && cmake --build build -j2)"; exit 1; }
[ -d "$HERE/node_modules/onnxruntime-node" ] ||
    { say "onnxruntime-node missing: (cd $HERE && npm install --ignore-scripts)"; exit 1; }
node -e "require('$HERE/node_modules/onnxruntime-node')" ||
    { say "onnxruntime-node does not load (see the error above)"; exit 1; }

mkdir -p "$OUT"
CKPT=$("$PY" "$HERE/peers.py" prepare --out "$OUT" ${PEERS_CKPT:+--ckpt "$PEERS_CKPT"})
say "checkpoint $CKPT"

ONNX=$OUT/onnx/hamer.onnx
if [ ! -f "$ONNX" ] || [ "$ONNX" -ot "$CKPT" ] || [ "$ONNX" -ot "$HERE/hamer_torch.py" ] ||
   [ "$ONNX" -ot "$HERE/export_onnx.py" ]; then
    say "exporting $ONNX"
    rm -rf "$OUT/onnx"
    "$PY" "$HERE/export_onnx.py" --ckpt "$CKPT" --out "$ONNX" 2> >(grep -v -e UserWarning -e _jit_pass_onnx >&2)
fi

# Dynamic int8 (bench/peers/quantize_onnx.py: what quantize_dynamic writes,
# per-column int8 weights, per-tensor uint8 activations) of the backbone.
ONNX8=$OUT/onnx-int8/hamer.onnx
if [ ! -f "$ONNX8" ] || [ "$ONNX8" -ot "$ONNX" ] || [ "$ONNX8" -ot "$HERE/quantize_onnx.py" ]; then
    if "$PY" -c 'import onnx' 2> /dev/null; then
        say "quantising $ONNX8"
        rm -rf "$OUT/onnx-int8"
        "$PY" "$HERE/quantize_onnx.py" --model "$ONNX" --out "$ONNX8"
    else
        say "python3 onnx missing (apt-get install python3-onnx): no ONNX Runtime int8 row"
    fi
fi

rm -rf "$OUT/results" "$OUT/outputs"
mkdir -p "$OUT/results" "$OUT/outputs"
R=$OUT/results

say "ONNX Runtime ($WARMUP + $ITERS iterations)"
node "$HERE/ort_time.js" --model "$ONNX" --input "$OUT/crop.f32" --threads "$THREADS" \
    --warmup "$WARMUP" --iters "$ITERS" --outdir "$OUT/outputs/ort" > "$R/ort.json"

if [ -f "$ONNX8" ]; then
    say "ONNX Runtime dynamic int8 ($WARMUP + $ITERS iterations)"
    node "$HERE/ort_time.js" --model "$ONNX8" --input "$OUT/crop.f32" --threads "$THREADS" \
        --warmup "$WARMUP" --iters "$ITERS" --outdir "$OUT/outputs/ort-int8" > "$R/ort-int8.json"
fi

say "PyTorch + to_mkldnn ($WARMUP + $ITERS iterations)"
"$PY" "$HERE/torch_time.py" --ckpt "$CKPT" --input "$OUT/crop.f32" --mode mkldnn --threads "$THREADS" \
    --warmup "$WARMUP" --iters "$ITERS" --outdir "$OUT/outputs/torch-mkldnn" > "$R/torch-mkldnn.json"

if [ "$EAGER_ITERS" -gt 0 ]; then
    say "PyTorch eager (0 + $EAGER_ITERS iterations; minutes each with the reference BLAS)"
    "$PY" "$HERE/torch_time.py" --ckpt "$CKPT" --input "$OUT/crop.f32" --mode eager --threads "$THREADS" \
        --warmup 0 --iters "$EAGER_ITERS" --outdir "$OUT/outputs/torch-eager" > "$R/torch-eager.json"
fi

for prec in fp32 fast; do
    say "hamer bench --precision $prec ($WARMUP + $ITERS iterations)"
    if "$HAMER" bench --model "$CKPT" --precision "$prec" --threads "$THREADS" --warmup "$WARMUP" \
            --iters "$ITERS" --json > "$R/hamer-$prec.json" 2> "$OUT/hamer-$prec.err"; then
        "$HAMER" regress --model "$CKPT" --input "$OUT/crop.npy" --output "$OUT/outputs/hamer-$prec.npz" \
            --precision "$prec" --threads "$THREADS" 2> /dev/null ||
            say "hamer regress --precision $prec failed: outputs not compared"
    else
        "$PY" -c 'import json, sys; print(json.dumps({"precision": sys.argv[1], "error": sys.argv[2]}))' \
            "$prec" "$(tail -n 1 "$OUT/hamer-$prec.err")" > "$R/hamer-$prec.json"
    fi
done

"$PY" "$HERE/peers.py" table --out "$OUT"
