#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU (CI has none):
# build with the CUDA backend, run its numerical tests and its benchmark,
# and write the log and a JSON summary into OUTDIR. Under 8 minutes on an
# H100 with 16 cores (the full-size comparisons' CPU reference included).
#
#   bash scripts/gpu_check.sh OUTDIR [BUILD_DIR]
#
#   OUTDIR/gpu.txt           nvidia-smi's view of the GPU (when present)
#   OUTDIR/test_cuda.log     tests/c/test_cuda: each op against float64, the
#                            whole forward (depth 2 and full size) against
#                            the CPU's exact path, both precisions
#   OUTDIR/bench_P_bB.json   `hamer bench --synthetic --device cuda` for
#                            precision P (fp32, fast) and batch B (1, 32): ms
#                            per crop (crop upload included), crops/s, stage
#                            times, accuracy against the CPU's fp32
#   OUTDIR/summary.json      the table of all of it, and what passed
#   OUTDIR/check.log         everything this script printed
#
# Exit 0 only when the tests passed and every benchmark ran; the summary is
# written either way. BUILD_DIR (default build-gpu) is configured and built
# here unless it already has libhamer-cuda.so and the test programs.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu_check.sh OUTDIR [BUILD_DIR]}
build=${2:-build-gpu}
mkdir -p "$out"
exec > >(tee "$out/check.log") 2>&1
t0=$SECONDS
status=0
echo "== gpu_check: $(date -u +%FT%TZ), $(uname -m), $(nproc) cores"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv | tee "$out/gpu.txt"
else
    echo "nvidia-smi not found" | tee "$out/gpu.txt"
fi

if ! [ -f "$build/libhamer-cuda.so" ] || ! [ -x "$build/tests/test_cuda" ] || ! [ -x "$build/hamer" ]; then
    echo "== build ($build, HAMER_CUDA=ON)"
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHAMER_CUDA=ON >/dev/null &&
        cmake --build "$build" -j"$(nproc)" --target hamer test_cuda test_cuda_host hamer_cuda ||
        { echo "gpu_check: the build failed"; exit 1; }
fi
export HAMER_CUDA_LIB=$PWD/$build/libhamer-cuda.so HAMER_NO_CACHE=1
"$build/hamer" --version

echo "== tests (test_cuda_host, test_cuda with the full-size model)"
"$build/tests/test_cuda_host" || status=1
HAMER_TEST_CUDA_FULL=1 "$build/tests/test_cuda" 2>&1 | tee "$out/test_cuda.log"
tc=${PIPESTATUS[0]}
case $tc in
    0) echo "test_cuda: passed" ;;
    77) echo "test_cuda: NOT RUN (no GPU)"; status=1 ;;
    *) echo "test_cuda: FAILED ($tc)"; status=1 ;;
esac

echo "== benchmark (full-size synthetic model, crops uploaded each call)"
for prec in fp32 fast; do
    for b in 1 32; do
        iters=$([ "$b" = 1 ] && echo 50 || echo 10)
        if "$build/hamer" bench --synthetic --device cuda --precision "$prec" --batch "$b" --iters "$iters" --warmup 3 \
            --json >"$out/bench_${prec}_b$b.json" 2>"$out/bench_${prec}_b$b.err"; then
            echo "bench $prec batch $b: ok"
        else
            echo "bench $prec batch $b: FAILED: $(cat "$out/bench_${prec}_b$b.err")"
            status=1
        fi
    done
done

echo "== summary"
python3 - "$out" "$tc" "$status" <<'EOF' || status=1
import json, os, sys
out, tc, status = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = []
for prec in ("fp32", "fast"):
    for b in (1, 32):
        p = os.path.join(out, f"bench_{prec}_b{b}.json")
        try:
            j = json.load(open(p))
        except (OSError, ValueError):
            rows.append({"precision": prec, "batch": b, "error": "no result"})
            continue
        rows.append({k: j.get(k) for k in ("device", "device_info", "precision", "scheme", "batch",
                                           "ms_per_crop_median", "ms_per_crop_min", "crops_per_s",
                                           "params_pcc_vs_fp32", "params_max_abs_vs_fp32",
                                           "vertices_max_mm_vs_fp32", "stages", "reference")})
gpu = open(os.path.join(out, "gpu.txt")).read().strip()
summary = {"gpu": gpu, "test_cuda": {0: "passed", 77: "not run"}.get(tc, f"failed ({tc})"),
           "benchmarks": rows, "targets": {"fast_b1_ms": 3.49, "fast_b32_crops_per_s": 1000, "fp32_b1_ms": 15},
           "ok": status == 0}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(f"{'precision':9} {'batch':>5} {'ms/crop':>8} {'crops/s':>8} {'PCC vs cpu':>11} {'max abs':>9} {'verts mm':>9}")
for r in rows:
    if "error" in r:
        print(f"{r['precision']:9} {r['batch']:>5} {r['error']}")
        continue
    print(f"{r['precision']:9} {r['batch']:>5} {r['ms_per_crop_median']:8.3f} {r['crops_per_s']:8.1f} "
          f"{r['params_pcc_vs_fp32']:11.7f} {r['params_max_abs_vs_fp32']:9.2e} {r['vertices_max_mm_vs_fp32'] or 0:9.4f}")
EOF
echo "gpu_check: $((SECONDS - t0)) s, $([ $status = 0 ] && echo ok || echo FAILED); results in $out"
exit $status
