#!/usr/bin/env bash
# bench/kernels_bench.sh — single-thread mat-vec throughput of every runtime
# kernel, for each variant the CPU runs (bench/kernels_bench.c), then the
# prompt's batched product against the mat-vec per token for Q4_K, Q6_K,
# Q8_0 and Q4_0 (bench/gemm_bench.c, GMAC/s).
#
#   bench/kernels_bench.sh [BUILD_DIR] [ROWS COLS REPS]   (default: build, 2048 2048 5)
#
# BUILD_DIR must have built mw_rt_kernels. An aarch64 cross build dir
# (CMAKE_CROSSCOMPILING) is compiled with aarch64-linux-gnu-gcc and run under
# qemu-aarch64 -cpu ${MW_QEMU_CPU:-max}: that checks it runs, but TCG timings
# say nothing about a phone.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
BUILD=${1:-$repo/build}
shift || true
lib=$BUILD/runtime/libmw_rt_kernels.a
[ -f "$lib" ] || { echo "no $lib (cmake --build $BUILD --target mw_rt_kernels)"; exit 2; }
CC=cc RUN=()
if grep -q '^CMAKE_CROSSCOMPILING_EMULATOR' "$BUILD/CMakeCache.txt" 2>/dev/null ||
   grep -q 'aarch64-linux-gnu.cmake' "$BUILD/CMakeCache.txt" 2>/dev/null; then
    CC=aarch64-linux-gnu-gcc
    RUN=(qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu "${MW_QEMU_CPU:-max}")
fi
exe=$BUILD/kernels_bench
$CC -std=c11 -O2 -Wall -Wextra -ffp-contract=off -I"$repo" -o "$exe" "$here/kernels_bench.c" \
    "$lib" "$BUILD/quant/libmw_quant.a" "$BUILD/gguf/libmw_gguf.a" "$BUILD/core/libmw_core.a" -lm $([ "$CC" = cc ] || echo -static)
"${RUN[@]}" "$exe" "$@"

# the prompt's batched product (rt_gemm) against the mat-vec per token
gexe=$BUILD/gemm_bench
$CC -std=c11 -O2 -Wall -Wextra -ffp-contract=off -I"$repo" -o "$gexe" "$here/gemm_bench.c" \
    "$lib" "$BUILD/quant/libmw_quant.a" "$BUILD/gguf/libmw_gguf.a" "$BUILD/core/libmw_core.a" -lm $([ "$CC" = cc ] || echo -static)
for t in 12 14 8 2; do "${RUN[@]}" "$gexe" "$t" 512 2048 64; done  # Q4_K Q6_K Q8_0 Q4_0
