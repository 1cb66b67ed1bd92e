# Cross build for 64-bit ARM Linux with Debian's cross compiler
# (gcc-aarch64-linux-gnu) and the dependencies' arm64 packages installed
# through multiarch (scripts/deps.sh --arm64):
#
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#
# The binaries run on an AArch64 machine, or here under qemu-user:
# `qemu-aarch64 -cpu max build-arm64/hamer ...` (CMAKE_CROSSCOMPILING_EMULATOR
# below lets ctest do that by itself). No -L / QEMU_LD_PREFIX: the loader
# and libc must be the arm64 multiarch libc6 the dependencies came with
# (/lib/ld-linux-aarch64.so.1); the cross compiler's own copy under
# /usr/aarch64-linux-gnu is another build of glibc, and a process that
# mixes the two hangs in its first pthread_create or fork.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Headers and libraries: the cross compiler's own sysroot plus the arm64
# packages' multiarch directories (/usr/include/aarch64-linux-gnu,
# /usr/lib/aarch64-linux-gnu), which the cross compiler searches already.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config: the arm64 packages' .pc files only.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# HAMER_QEMU_CPU picks the emulated CPU model (default max: every extension).
if(NOT DEFINED HAMER_QEMU_CPU)
  set(HAMER_QEMU_CPU max)
endif()
find_program(HAMER_QEMU qemu-aarch64)
if(HAMER_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${HAMER_QEMU};-cpu;${HAMER_QEMU_CPU})
endif()
# The CUDA backend is built with the host's nvcc for the host: not here.
set(HAMER_CUDA OFF CACHE BOOL "Build the CUDA backend (libhamer-cuda.so, loaded at run time)")
