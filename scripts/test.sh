#!/usr/bin/env bash
# The test command (what .ci/run runs after installing the Debian packages).
#
#   scripts/test.sh            everything: the Release build's ctest, the AArch64
#                              stage (scripts/test_aarch64.sh: cross build, qemu),
#                              the Release tests under AddressSanitizer +
#                              UndefinedBehaviorSanitizer,
#                              every fuzz target for FUZZ_SECONDS (default 15)
#                              and the valgrind memcheck subset
#   scripts/test.sh --quick    the contributors' loop: Release build, the C tests
#                              and the Python tests not marked slow (a few minutes)
#
# First it installs what the tests read: the hand-detector models
# (scripts/get_detector.sh), the web page (scripts/get_web.sh) and the npm
# packages of tests/detect, tests/gltf and tests/web. ctest runs
# the test files side by side (-j, default: the number of CPUs; TEST_JOBS
# overrides); checkpoint fixtures are generated once per clone into
# build-fixtures/ and shared by both passes (tests/README.md says what runs
# in which pass and why). At the end, and on a failure, it prints the wall
# time of each stage and the slowest tests of each pass.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
    --quick) quick=1 ;;
    "") ;;
    *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
jobs=$(nproc)
test_jobs=${TEST_JOBS:-$jobs}
export HAMER_FIXTURE_DIR=${HAMER_FIXTURE_DIR:-$PWD/build-fixtures}

stages=()
[ -n "${HAMER_CI_DEPS_S:-}" ] && stages+=("packages (scripts/deps.sh)|$HAMER_CI_DEPS_S")
report() {
    local rc=$?
    echo
    echo "== wall time per stage =="
    local total=0 s
    for s in "${stages[@]}"; do
        printf '  %-34s %5d s\n' "${s%%|*}" "${s##*|}"
        total=$((total + ${s##*|}))
    done
    printf '  %-34s %5d s\n' "total" "$total"
    for b in build build-asan; do
        [ -d "$b/pytest-junit" ] && /usr/bin/python3 scripts/test_report.py "$b" 10
    done
    [ "$rc" -eq 0 ] || echo "scripts/test.sh: FAILED (exit $rc) in stage: ${current:-?}"
    exit "$rc"
}
trap report EXIT

# stage NAME COMMAND...: run it, remember its wall time.
stage() {
    current=$1
    shift
    echo "== $current =="
    local t0=$SECONDS
    "$@"
    stages+=("$current|$((SECONDS - t0))")
}

ctest_pass() {
    local dir=$1
    rm -rf "$dir/pytest-junit"
    ctest --test-dir "$dir" --output-on-failure -j"$test_jobs"
}

# The hand detector's models (installed where the library looks by default),
# the real TFLite runtime and TensorFlow.js the detector tests compare against, the glTF
# validator the GLB tests run, and the web page (three.js) with the
# playwright-core that tests/test_web.py drives chromium with.
detector_deps() {
    bash scripts/get_detector.sh
    (cd tests/detect && npm ci --ignore-scripts --legacy-peer-deps --no-audit --no-fund >/dev/null)
    (cd tests/gltf && npm ci --ignore-scripts --no-audit --no-fund >/dev/null)
    bash scripts/get_web.sh
    (cd tests/web && npm ci --ignore-scripts --no-audit --no-fund >/dev/null)
    (cd tests/holistic && npm ci --ignore-scripts --no-audit --no-fund >/dev/null)
    (cd tests/tfjs && npm ci --ignore-scripts --legacy-peer-deps --no-audit --no-fund >/dev/null)
}
stage "deps (detector models, npm)" detector_deps

build_release() {
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build -j"$jobs"
}
stage "build (Release)" build_release

if [ "$quick" = 1 ]; then
    HAMER_TEST_QUICK=1 stage "tests (Release, quick)" ctest_pass build
    exit 0
fi
stage "tests (Release)" ctest_pass build
# AArch64: cross build, then the op tests at each ISA level, the small-model
# regression, a detector test and `hamer run` under qemu-user (about 4 min).
stage "aarch64 (cross build, qemu)" bash scripts/test_aarch64.sh

build_asan() {
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHAMER_SANITIZE=ON >/dev/null
    cmake --build build-asan -j"$jobs"
}
stage "build (ASan+UBSan)" build_asan
asan_tests() {
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest_pass build-asan
}
stage "tests (ASan+UBSan)" asan_tests

# The fuzzers and valgrind are single-threaded: they run side by side,
# valgrind and two fuzz targets at a time (FUZZ_JOBS). A fuzz target's budget
# is wall time (FUZZ_SECONDS each), so sharing the cores costs executions, not
# time; valgrind's run stretches a little.
fuzz_and_valgrind() {
    local fz=0 vg=0 t0=$SECONDS
    mkdir -p build
    (FUZZ_SECONDS=${FUZZ_SECONDS:-15} FUZZ_SEED=${FUZZ_SEED:-1} FUZZ_JOBS=${FUZZ_JOBS:-2} bash fuzz/run >build/fuzz.log 2>&1; \
        echo $((SECONDS - t0)) >build/fuzz.seconds) &
    local fpid=$!
    bash scripts/valgrind.sh >build/valgrind.log 2>&1 || vg=$?
    echo "valgrind: $((SECONDS - t0)) s (exit $vg)"
    wait "$fpid" || fz=$?
    echo "fuzz: $(cat build/fuzz.seconds 2>/dev/null || echo '?') s (exit $fz)"
    echo "--- fuzz/run ---"; tail -n 40 build/fuzz.log
    echo "--- scripts/valgrind.sh ---"; cat build/valgrind.log
    [ "$fz" -eq 0 ] && [ "$vg" -eq 0 ]
}
stage "fuzz + valgrind (side by side)" fuzz_and_valgrind
