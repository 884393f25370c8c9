#!/usr/bin/env bash
# bench/llamacpp_imatrix_qwen35.sh — llama.cpp's importance matrices of the
# Qwen3.5 fixtures (tests/fixtures/mk_family_fixture.py qwen35, qwen35moe,
# qwen3next; tests/e2e/calib_qwen35.sh) and the Gemma 4 ones (gemma4e2b,
# gemma4dense, gemma4moe: experts beside the dense MLP, per-expert entries of
# ffn_gate_up_exps / ffn_down_exps from MUL_MAT_ID; tests/e2e/calib_gemma4.sh),
# which those tests compare memwall's with:
#   tests/fixtures/llamacpp_ref/<kind>-calib32.imatrix.gguf
#       llama-imatrix's settings: F16 KV cache, flash attention "auto"
#   tests/fixtures/llamacpp_ref/<kind>-calib32-kvf32.imatrix.gguf
#       the same graph with an F32 KV cache and no flash attention (whose CPU
#       kernel rounds Q to F16): the attention rounds as memwall's FP32
#       calibration does, so what is left is the graphs' own F32 rounding
# Each: the fixture converted to F32 by llama.cpp's convert_hf_to_gguf.py
# (bench/llamacpp_shim, as bench/llamacpp_ref.sh), then
# bench/llamacpp_imatrix_cb.c — llama-imatrix's collection and file format
# over llama.cpp's own graph, linked to the peer's prebuilt libllama
# (tests/peer, commit 80fb11ac; building llama-imatrix itself takes the
# whole of ggml and libllama) — with -c 32 over the first 6000 bytes of
# calib.txt, 2 chunks, 2 threads. Not run by the tests.
#
#   bench/llamacpp_imatrix_qwen35.sh [KIND...]
#   env: LLAMA_SRC (default /tmp/llama-src), MW_BENCH_PYTHON (/usr/bin/python3,
#        with torch), MW_DATASETS (default <repo>/datasets)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
LLAMA=${LLAMA_SRC:-/tmp/llama-src}
PY=${MW_BENCH_PYTHON:-/usr/bin/python3}
DATA=${MW_DATASETS:-$repo/datasets}
OUT=$repo/tests/fixtures/llamacpp_ref
[ -f "$LLAMA/convert_hf_to_gguf.py" ] || { echo "no llama.cpp source at $LLAMA (LLAMA_SRC)"; exit 2; }
peer=$(bash "$repo/tests/peer/setup.sh" | tail -n 1)
libdir=$("$peer" version | awk '$1 == "libdir" { print $2 }')
cpu=$("$peer" version | awk '$1 == "cpu_backend" { print $2 }')
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
gcc -std=c11 -O2 -Wall -Wextra -I"$repo/.peer/include" -o "$W/lcimx" "$here/llamacpp_imatrix_cb.c" \
    "$libdir/libllama.v0.4.0.so" "$libdir/libggml.v0.4.0.so" "$libdir/libggml-base.so" \
    -Wl,-rpath,"$libdir" -ldl -lm
head -c 6000 "$DATA/corpora/calib.txt" > "$W/calib.txt"
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(qwen35 qwen35moe qwen3next gemma4e2b gemma4dense gemma4moe)
for k in "${kinds[@]}"; do
    "$PY" "$repo/tests/fixtures/mk_family_fixture.py" "$k" "$W/$k" > /dev/null
    PYTHONPATH=$here/llamacpp_shim:$LLAMA/gguf-py "$PY" "$LLAMA/convert_hf_to_gguf.py" \
        --outtype f32 --outfile "$W/$k.gguf" "$W/$k" > "$W/$k.log" 2>&1 ||
        { tail -n 20 "$W/$k.log"; exit 1; }
    (cd "$W" && MW_GGML_CPU_LIB="$libdir/libggml-cpu-$cpu.so" ./lcimx "$k.gguf" calib.txt 32 2 \
        "$OUT/$k-calib32.imatrix.gguf" 2 2> /dev/null)
    (cd "$W" && MW_KV_F32=1 MW_GGML_CPU_LIB="$libdir/libggml-cpu-$cpu.so" ./lcimx "$k.gguf" \
        calib.txt 32 2 "$OUT/$k-calib32-kvf32.imatrix.gguf" 2 2> /dev/null)
    echo "llamacpp_imatrix_qwen35: $OUT/$k-calib32{,-kvf32}.imatrix.gguf"
    rm -rf "${W:?}/$k" "$W/$k.gguf"
done
