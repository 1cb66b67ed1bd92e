#!/usr/bin/env bash
# Run a subset of the C unit tests and `hamer regress` under valgrind
# memcheck (Release build with -g, no sanitizers). Fails on any memcheck
# error or leak, and on any test failure.
#
#   scripts/valgrind.sh            ~4 minutes: unit tests + regress on the tiny
#                                  model of the fuzz seeds (ViT width 80, with
#                                  MANO: the same loader, ViT, decoder and MANO
#                                  code as the release, at small widths)
#   VALGRIND_FIXTURE=1 scripts/valgrind.sh
#                                  also regress on the smallest test fixture at
#                                  the release widths (d1h1: 1 ViT block, 1
#                                  decoder layer; ~4 more minutes)
#
# HAMER_ISA=avx2 is forced: valgrind 3.19 does not implement AVX-512 (the
# AVX-512 kernels are covered by the ASan/UBSan runs). test_gemm and
# test_gemm_lowp are left out: they exercise the kernels valgrind cannot run
# (and valgrind's CPUID makes test_gemm's ISA-selection check fail), and
# take over 10 minutes under it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${VALGRIND_BUILD:-build-valgrind}
fixtures=${HAMER_FIXTURE_DIR:-build-fixtures}
tests=(test_ckpt test_npy test_image test_render test_pool test_limits test_regression test_norm test_pack)

command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind not installed (apt-get install valgrind)" >&2; exit 2; }
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-g -DHAMER_SANITIZE=OFF -DHAMER_TESTS=ON -DHAMER_CUDA=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target hamer "${tests[@]}"

export HAMER_ISA=avx2
# A distinct exit code tells memcheck errors apart from test failures.
vg=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect,possible)
status=0
run() {
    local name=$1 rc=0 t0=$SECONDS
    shift
    "${vg[@]}" "$@" >"$work/$name.log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "   ok   $name ($((SECONDS - t0)) s)"
    else
        status=1
        [ "$rc" -eq 99 ] && why="memcheck errors" || why="exit $rc"
        echo "!! FAIL $name ($why); log:"
        tail -40 "$work/$name.log" | sed 's/^/      /'
    fi
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# test_pool's 300 back-to-back runs per pool size are a hand-off stress test
# for the Release and sanitizer passes; 30 show memcheck the same code.
for t in "${tests[@]}"; do HAMER_TEST_POOL_REPS=30 run "$t" "$build/tests/$t"; done

/usr/bin/python3 - "$work" <<'EOF'
import sys
import numpy as np
rng = np.random.RandomState(0)
np.save(sys.argv[1] + "/crops_f32.npy", rng.uniform(-2, 2, (1, 3, 256, 192)).astype(np.float32))
np.save(sys.argv[1] + "/crops_u8.npy", rng.randint(0, 256, (2, 256, 192, 3)).astype(np.uint8))
EOF
tiny=fuzz/corpus/model/tiny_mano.ckpt
run regress_tiny_f32 "$build/hamer" regress --model "$tiny" --input "$work/crops_f32.npy" --output "$work/o1.npz" --threads 2
run regress_tiny_u8_plain "$build/hamer" regress --model "$tiny" --input "$work/crops_u8.npy" --output "$work/o2.npz" --threads 2 --plain

if [ "${VALGRIND_FIXTURE:-0}" = 1 ]; then
    fixture=$fixtures/d1h1.ckpt
    if [ ! -f "$fixture" ]; then
        fixture=$build/valgrind-d1h1.ckpt
        [ -f "$fixture" ] || /usr/bin/python3 tests/hamer_fixture.py --depth 1 --head-depth 1 --seed 1 --out "$fixture"
    fi
    run regress_d1h1 "$build/hamer" regress --model "$fixture" --input "$work/crops_f32.npy" --output "$work/o3.npz" --threads 2
fi
[ "$status" -eq 0 ] && echo "valgrind.sh: no memcheck errors, no leaks, all tests passed"
exit $status
