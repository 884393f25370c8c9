#!/usr/bin/env bash
# bench/step_bench.sh — one forward step of memwall's runtime timed on its
# own (bench/step_bench.c): decode of one token at depth D and a P-token
# prompt, the best of many repetitions, so that it reads right on a busy
# machine too (the figures against llama.cpp: bench/speed_bench.sh, idle).
#
#   bench/step_bench.sh [BUILD_DIR] MODEL.gguf [THREADS [DEPTH [PROMPT [REPS]]]]
#
# BUILD_DIR (default build) must have built mw_runtime. MW_RT_KERNELS caps
# the kernel table as for memwall-run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
BUILD=$repo/build
if [[ $# -gt 0 && -d $1 ]]; then BUILD=$1; shift; fi
[[ $# -ge 1 ]] || { echo "usage: bench/step_bench.sh [BUILD_DIR] MODEL.gguf [THREADS [DEPTH [PROMPT [REPS]]]]" >&2; exit 2; }
for l in runtime/libmw_runtime.a runtime/libmw_rt_kernels.a quant/libmw_quant.a gguf/libmw_gguf.a core/libmw_core.a; do
    [[ -f $BUILD/$l ]] || { echo "no $BUILD/$l (cmake --build $BUILD --target memwall-run)" >&2; exit 2; }
done
exe=$BUILD/step_bench
cc -std=c11 -O2 -Wall -Wextra -I"$repo" -o "$exe" "$here/step_bench.c" \
    "$BUILD/runtime/libmw_runtime.a" "$BUILD/runtime/libmw_rt_kernels.a" "$BUILD/quant/libmw_quant.a" \
    "$BUILD/gguf/libmw_gguf.a" "$BUILD/core/libmw_core.a" -lm -lpthread
"$exe" "$@"
