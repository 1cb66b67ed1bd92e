#!/usr/bin/env bash
# run.sh - hamer.c against ONNX Runtime (Node) and PyTorch on one full-size model.
#
#   bench/peers/run.sh            (from anywhere; needs build/hamer and bench/peers/node_modules)
#
# One run: writes (or reuses) the full-size synthetic checkpoint with
# tests/hamer_fixture.py, exports it to ONNX (bench/peers/export_onnx.py:
# backbone + head + MANO, batch 1, opset 13), measures this CPU's unit peaks
# (bench/cpu_peak.c), then times, on the same crop, batch 1, THREADS
# threads, interleaved in ROUNDS rounds:
#   ONNX Runtime via npm onnxruntime-node (CPU EP, intra-op THREADS, inter-op 1),
#     fp32 and with the backbone dynamically quantised to int8 (quantize_onnx.py;
#     needs Debian's python3-onnx)
#   Debian's PyTorch with Linear/Conv in oneDNN (to_mkldnn) and plain eager
#   hamer bench --model <ckpt> --json, fp32 and fast (a row saying why when fast is unavailable)
# (PyTorch once, after the rounds), then hamer on one thread (SCALING)
# and prints markdown tables (medians over every round's ITERS timed runs,
# each round after WARMUP warm-up runs; plain eager PyTorch runs EAGER_ITERS
# times without warm-up: with Debian's reference BLAS one crop takes
# minutes): the runtimes, hamer's stages with each one's % of the peak of the
# unit it ran on, and hamer's 1 -> THREADS speed-up per stage. The outputs of
# every runtime are compared with ONNX Runtime's fp32 outputs, the one
# reference (params PCC and max abs difference, vertices MAE).
#
# Generated files go under $HAMER_BUILD/peers (default build/peers): the
# checkpoint (~2.7 GB), the ONNX model and its external weights (~2.7 GB),
# the int8 one (~1 GB), hamer's model cache (cache/, ~3.6 GB), results/*.json,
# outputs/.
#
# Environment: HAMER_BUILD, PEERS_OUT, PEERS_CKPT (use this checkpoint
# instead of generating one), PEERS_THREADS (2), PEERS_WARMUP (2),
# PEERS_ITERS (10, per round), PEERS_ROUNDS (3), PEERS_SCALING (1: the
# 1-thread hamer runs; 0 skips them), PEERS_EAGER_ITERS (1; 0 skips plain
# eager PyTorch),
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
ROUNDS=${PEERS_ROUNDS:-3}
SCALING=${PEERS_SCALING:-1}
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

# The register-only peaks of this CPU's units on THREADS threads (fp32 FMA,
# bf16 and int8 dot products, AMX tiles where granted): the stage table's
# "% of peak". Built here, for this CPU.
if gcc -O3 -march=native -pthread "$REPO/bench/cpu_peak.c" -o "$OUT/cpu_peak" 2> "$OUT/cpu_peak.err"; then
    "$OUT/cpu_peak" "$THREADS" > "$R/cpu_peak.txt"
else
    say "bench/cpu_peak.c did not build (see $OUT/cpu_peak.err): no % of peak"
fi
"$HAMER" --version > "$R/hamer-version.txt"
grep -m1 "model name" /proc/cpuinfo | sed 's/.*: //' > "$R/cpu.txt"

# The four compared rows run interleaved: ROUNDS rounds of ORT fp32, ORT
# int8, hamer fp32, hamer fast, each with its warm-up and ITERS timed runs;
# the table takes the median over every timed run of every round, so a
# change in the machine's load falls on all four alike.
hamer_round() { # PRECISION ROUND
    local prec=$1 r=$2 f="$R/hamer-$1.json"
    [ "$r" -gt 1 ] && f="$R/hamer-$1.r$r.json"
    say "round $r: hamer bench --precision $prec ($WARMUP + $ITERS iterations)"
    if "$HAMER" bench --model "$CKPT" --precision "$prec" --threads "$THREADS" --warmup "$WARMUP" \
            --iters "$ITERS" --json > "$f" 2> "$OUT/hamer-$prec.err"; then
        [ "$r" -gt 1 ] || "$HAMER" regress --model "$CKPT" --input "$OUT/crop.npy" \
            --output "$OUT/outputs/hamer-$prec.npz" --precision "$prec" --threads "$THREADS" 2> /dev/null ||
            say "hamer regress --precision $prec failed: outputs not compared"
    else
        "$PY" -c 'import json, sys; print(json.dumps({"precision": sys.argv[1], "error": sys.argv[2]}))' \
            "$prec" "$(tail -n 1 "$OUT/hamer-$prec.err")" > "$f"
    fi
}
ort_round() { # NAME MODEL ROUND
    local f="$R/$1.json"
    [ "$3" -gt 1 ] && f="$R/$1.r$3.json"
    say "round $3: ONNX Runtime $1 ($WARMUP + $ITERS iterations)"
    node "$HERE/ort_time.js" --model "$2" --input "$OUT/crop.f32" --threads "$THREADS" \
        --warmup "$WARMUP" --iters "$ITERS" --outdir "$OUT/outputs/$1" > "$f"
}
for r in $(seq 1 "$ROUNDS"); do
    ort_round ort "$ONNX" "$r"
    [ -f "$ONNX8" ] && ort_round ort-int8 "$ONNX8" "$r"
    hamer_round fp32 "$r"
    hamer_round fast "$r"
done

say "PyTorch + to_mkldnn ($WARMUP + $ITERS iterations)"
"$PY" "$HERE/torch_time.py" --ckpt "$CKPT" --input "$OUT/crop.f32" --mode mkldnn --threads "$THREADS" \
    --warmup "$WARMUP" --iters "$ITERS" --outdir "$OUT/outputs/torch-mkldnn" > "$R/torch-mkldnn.json"

if [ "$EAGER_ITERS" -gt 0 ]; then
    say "PyTorch eager (0 + $EAGER_ITERS iterations; minutes each with the reference BLAS)"
    "$PY" "$HERE/torch_time.py" --ckpt "$CKPT" --input "$OUT/crop.f32" --mode eager --threads "$THREADS" \
        --warmup 0 --iters "$EAGER_ITERS" --outdir "$OUT/outputs/torch-eager" > "$R/torch-eager.json"
fi

# 1 -> THREADS scaling per stage: hamer on one thread, once.
if [ "$SCALING" = 1 ] && [ "$THREADS" -gt 1 ]; then
    for prec in fp32 fast; do
        say "hamer bench --precision $prec --threads 1 ($WARMUP + $ITERS iterations)"
        "$HAMER" bench --model "$CKPT" --precision "$prec" --threads 1 --warmup "$WARMUP" --iters "$ITERS" \
            --json > "$R/scaling-$prec.json" 2> "$OUT/hamer-$prec.err" || say "hamer --threads 1 $prec failed"
    done
fi

"$PY" "$HERE/peers.py" table --out "$OUT"
