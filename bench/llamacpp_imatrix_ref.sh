#!/usr/bin/env bash
# bench/llamacpp_imatrix_ref.sh — regenerate llama.cpp's reference importance
# matrices of a mixture-of-experts model:
#   tests/fixtures/llamacpp_ref/mx8-calib.imatrix.gguf    (every chunk of calib.txt)
#   tests/fixtures/llamacpp_ref/mx8-calib16.imatrix.gguf  (the first 16 chunks)
# The model is tinyllama-8m's F16 reference GGUF upcycled by
# tests/tools/moe_upcycle.c into a Mixtral-layout llama with 8 experts, top-2
# (`moe_upcycle IN OUT 8 2`, default noise and router gain: byte-identical
# every time); the matrices are `llama-imatrix -c 256 -t 2` (default GGUF
# output, perplexity pass on) over /work/shared/corpora/calib.txt, run in the
# corpus directory so imatrix.datasets holds "calib.txt", not a path.
# Compare memwall's MoE calibration with them using
# `tests/lib/mwgguf.py imatrix-cmp-experts`. Not run by the tests.
#
# Needs: the llama.cpp source at commit 80fb11ac (the peer's; re-clone from
# node-llama-cpp's llama/gitRelease.bundle), cmake and a C++ compiler
# (llama-imatrix is configured and built, CPU only, when missing), and a
# configured memwall build dir (moe_upcycle is built when missing).
#
#   bench/llamacpp_imatrix_ref.sh
#   env: LLAMA_SRC   (default /tmp/llama-src)
#        LLAMA_BUILD (default /tmp/llama-build)
#        MW_BUILD    (default <repo>/build)
#        MW_SHARED   (default /work/shared: models/reference, corpora)
#        MW_REF_WORK (scratch dir for the 83 MB model; default a mktemp dir,
#                     removed at the end)
#        IMATRIX_THREADS (default 2)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
LLAMA_SRC=${LLAMA_SRC:-/tmp/llama-src}
LLAMA_BUILD=${LLAMA_BUILD:-/tmp/llama-build}
MW_BUILD=${MW_BUILD:-$repo/build}
MW_SHARED=${MW_SHARED:-/work/shared}
THREADS=${IMATRIX_THREADS:-2}
DENSE=$MW_SHARED/models/reference/tinyllama-8m.llamacpp-f16.gguf
CORPUS_DIR=$MW_SHARED/corpora
OUT=$repo/tests/fixtures/llamacpp_ref
MAX_BYTES=$((2 * 1024 * 1024))

[ -f "$DENSE" ] || { echo "missing $DENSE (MW_SHARED)" >&2; exit 2; }
[ -f "$CORPUS_DIR/calib.txt" ] || { echo "missing $CORPUS_DIR/calib.txt (MW_SHARED)" >&2; exit 2; }

IMATRIX=$LLAMA_BUILD/bin/llama-imatrix
if [ ! -x "$IMATRIX" ]; then
    [ -f "$LLAMA_SRC/tools/imatrix/imatrix.cpp" ] || {
        echo "no llama.cpp source at $LLAMA_SRC (LLAMA_SRC)" >&2
        exit 2
    }
    cmake -S "$LLAMA_SRC" -B "$LLAMA_BUILD" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF > /dev/null
    nice -n 19 cmake --build "$LLAMA_BUILD" --target llama-imatrix -j2
fi

UPCYCLE=$MW_BUILD/tests/moe_upcycle
if [ ! -x "$UPCYCLE" ]; then
    [ -f "$MW_BUILD/Makefile" ] || cmake -S "$repo" -B "$MW_BUILD" -DCMAKE_BUILD_TYPE=Release > /dev/null
    nice -n 19 make -C "$MW_BUILD" moe_upcycle -j2
fi

W=${MW_REF_WORK:-}
if [ -z "$W" ]; then
    W=$(mktemp -d)
    trap 'rm -rf "$W"' EXIT
fi
mkdir -p "$W" "$OUT"

"$UPCYCLE" "$DENSE" "$W/mx8.gguf" 8 2

# run NAME [extra llama-imatrix args]: writes $OUT/NAME.imatrix.gguf when it
# is under 2 MiB
run() {
    local name=$1
    shift
    local t0 t1 size
    t0=$(date +%s.%N)
    (cd "$CORPUS_DIR" && nice -n 19 "$IMATRIX" -m "$W/mx8.gguf" -f calib.txt -c 256 -t "$THREADS" \
        "$@" -o "$W/$name.imatrix.gguf") > "$W/$name.log" 2>&1 || {
        tail -20 "$W/$name.log" >&2
        echo "llama-imatrix failed ($name)" >&2
        exit 1
    }
    t1=$(date +%s.%N)
    size=$(stat -c %s "$W/$name.imatrix.gguf")
    grep -E 'computing over|Final estimate' "$W/$name.log" || true
    awk -v n="$name" -v s="$size" -v a="$t0" -v b="$t1" 'BEGIN { printf "%s: %d bytes, %.1f s\n", n, s, b - a }'
    if [ "$size" -ge "$MAX_BYTES" ]; then
        echo "$name.imatrix.gguf is $size bytes (>= 2 MiB): not stored in $OUT" >&2
        return 1
    fi
    cp "$W/$name.imatrix.gguf" "$OUT/$name.imatrix.gguf"
}

run mx8-calib
run mx8-calib16 --chunks 16
