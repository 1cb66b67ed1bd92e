#!/usr/bin/env bash
# The AArch64 stage (scripts/test.sh runs it after the Release build): cross-
# build with Debian's cross compiler (cmake/aarch64-linux-gnu.cmake; the
# packages: scripts/deps.sh) and run under qemu-user, whose CPU models give
# the ISA levels: cortex-a53 (ARMv8.0: Advanced SIMD only), neoverse-n1
# (+ dot product), max (+ i8mm, BF16, SVE). What runs (docs/testing.md):
#   1. the op test (tests/c/test_kernels.c) at each level: every kernel of
#      the level (the max model also runs SDOT with i8mm hidden);
#   2. test_lowp_exact at the dot-product and i8mm levels: the int8 GEMM
#      equals the scalar emulation of the scheme bit for bit (as on x86);
#   3. the small-model regression: fp32 against the float64 reference
#      (test_regress.py), the fast precision within its gate at the
#      dot-product and the i8mm + BF16 levels (test_fast_gate.py);
#   4. the detector against the stored TFLite-runtime reference on a photo
#      (test_detect_photos.py), and `hamer run` on a shared photo against
#      this machine's native build (tests/aarch64/test_cross.py).
# Needs the native Release build in build/ (for 4). BUILD_ARM overrides the
# cross build's directory (default build-arm64).
set -euo pipefail
cd "$(dirname "$0")/.."
b=${BUILD_ARM:-build-arm64}
jobs=$(nproc)
export HAMER_NO_CACHE=1 HAMER_FIXTURE_DIR=${HAMER_FIXTURE_DIR:-$PWD/build-fixtures}
t0=$SECONDS
lap() { echo "   ($((SECONDS - t0)) s)"; }

echo "-- cross build ($b)"
tc=()
[ -f "$b/CMakeCache.txt" ] || tc=(-DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake)
cmake -S . -B "$b" "${tc[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$b" -j"$jobs" --target hamer test_kernels test_lowp_exact tool_detect >/dev/null
lap

# 1 and 2: the C tests, two at a time (each is one process).
ctests() {
    local cpu=$1 t=$2
    qemu-aarch64 -cpu "$cpu" "$b/tests/$t" >"$b/$t.$cpu.log" 2>&1 || { cat "$b/$t.$cpu.log"; return 1; }
    echo "   $t on $cpu: $(tail -n 1 "$b/$t.$cpu.log")"
}
pids=()
for run in "cortex-a53 test_kernels" "neoverse-n1 test_kernels" "max test_kernels" \
           "neoverse-n1 test_lowp_exact" "max test_lowp_exact"; do
    # shellcheck disable=SC2086
    ctests $run &
    pids+=($!)
    if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p"; done
cat "$b/test_kernels.max.log"
lap

# 3 and 4: the Python tests, the build's programs run by qemu.
py() { # cpu, pytest arguments
    local cpu=$1
    shift
    HAMER_BUILD=$b HAMER_RUNNER="qemu-aarch64 -cpu $cpu" /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@"
}
rc=0
# two processes side by side, about the same length each (~140 CPU-s; the
# fp32 regression and the detector run only fp32 kernels, the same at
# every level)
py max tests/test_fast_gate.py::test_fast_gate_small tests/aarch64/test_cross.py >"$b/pytest.max.log" 2>&1 &
p1=$!
py neoverse-n1 tests/test_fast_gate.py::test_fast_gate_small tests/test_regress.py::'test_regress_float[1]' \
    tests/test_detect_photos.py::'test_c_matches_reference[True-hamer_example_5.jpg]' \
    >"$b/pytest.neoverse-n1.log" 2>&1 || rc=1
wait "$p1" || rc=1
for cpu in max neoverse-n1; do
    echo "   python tests on $cpu:"
    if [ "$rc" = 0 ]; then tail -n 1 "$b/pytest.$cpu.log"; else cat "$b/pytest.$cpu.log"; fi
done
lap
exit "$rc"
