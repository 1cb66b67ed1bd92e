#!/usr/bin/env bash
# Build hamer.c twice (Release, and AddressSanitizer + UndefinedBehaviorSanitizer)
# and run the whole test suite on both builds; then every fuzz target for a
# short budget (FUZZ_SECONDS, default 20) and a valgrind memcheck subset.
# First it installs what the tests read: the hand-detector models
# (scripts/get_detector.sh) and tests/detect's npm packages.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

# The hand detector's models (installed where the library looks by default)
# and the real TFLite runtime the detector tests compare against.
bash scripts/get_detector.sh
(cd tests/detect && npm ci --ignore-scripts --legacy-peer-deps --no-audit --no-fund >/dev/null)

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHAMER_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure

FUZZ_SECONDS=${FUZZ_SECONDS:-20} FUZZ_SEED=${FUZZ_SEED:-1} bash fuzz/run
bash scripts/valgrind.sh
