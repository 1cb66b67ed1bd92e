#!/usr/bin/env bash
# Install the Debian 12 packages hamer.c builds and tests with (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config zlib1g-dev libjpeg-dev libpng-dev libjansson-dev libmicrohttpd-dev libxxhash-dev libhiredis-dev \
    libavdevice-dev libavformat-dev libavcodec-dev libswscale-dev libavutil-dev libwebp-dev ffmpeg \
    python3 python3-numpy python3-torch python3-pytest python3-opencv python3-skimage python3-pil python3-requests curl redis-server \
    libopenblas0-pthread clang libclang-rt-14-dev valgrind chromium opencv-doc blender >/dev/null
# libwebp-dev: WebP photos (AVIF, BMP, TIFF, GIF are read through FFmpeg's libraries).
# The AArch64 stage (scripts/test_aarch64.sh): Debian's cross compiler, qemu's
# user-mode emulator and the dependencies' arm64 packages through multiarch
# (their libc6:arm64 provides the loader the emulated programs run with).
dpkg --add-architecture arm64
apt-get update -qq
apt-get install -y -qq --no-install-recommends gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
    zlib1g-dev:arm64 libjpeg62-turbo-dev:arm64 libpng-dev:arm64 libjansson-dev:arm64 libmicrohttpd-dev:arm64 \
    libxxhash-dev:arm64 libhiredis-dev:arm64 libavformat-dev:arm64 libavcodec-dev:arm64 libswscale-dev:arm64 \
    libavutil-dev:arm64 libwebp-dev:arm64 >/dev/null
# chromium: the browser tests/test_web.py drives the web page of hamer serve in
# (and tests/test_holistic_web.py runs MediaPipe Holistic in); opencv-doc: its
# sample photos (messi5.jpg, basketball1.png, handSrc.jpg, handDst.jpg) for that test;
# blender: tests/test_blender.py imports the GLB and BVH files in it, headless
# (Debian's 3.4 and 20 libraries it needs: 77 MB of packages, 11 s to unpack
# and configure on the 2-core CI machine; the tests take about a minute).
# npm fetches the hand-detector models (scripts/get_detector.sh), three.js
# for the web page (scripts/get_web.sh) and, for the tests, the reference
# TFLite runtime, the glTF validator and playwright-core; most machines
# already have Node.js.
if ! command -v npm >/dev/null; then
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
