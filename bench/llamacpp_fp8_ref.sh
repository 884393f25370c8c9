#!/usr/bin/env bash
# bench/llamacpp_fp8_ref.sh — regenerate tests/fixtures/llamacpp_ref/fp8-<layout>-<type>.json:
# digests (tests/lib/mwgguf.py digest) of what llama.cpp's converter
# (convert_hf_to_gguf.py at the bundled commit) writes for the FP8 fixtures of
# tests/fixtures/mk_fp8_fixture.py (tinyllama-8m's first two layers, every
# *_proj weight F8_E4M3 with its scales) in f16, bf16 and q8_0.
# tests/e2e/convert_fp8.sh compares `memwall convert` of each FP8 fixture with
# them, tensor by tensor. Not run by the tests.
#
# Debian's torch 1.13 has no float8_e4m3fn, so the converter cannot load an
# F8_E4M3 tensor here. It reads the fixture's twin instead
# (mk_fp8_fixture.py twin): each FP8 weight stored as F32 holding its E4M3
# values (exact), the scale tensors and quantization_config unchanged, so its
# dequantization (conversion/base.py dequant_model: weight.float() * scale
# repeated over weight_block_size and cut to the weight) runs on the same
# numbers it would with real float8 weights. --no-lazy: torch 1.13 cannot
# repeat_interleave a meta tensor. Layouts: block ([128, 128], F32 scales),
# ragged ([96, 80], BF16), pertensor (one scale_inv), channel
# (compressed-tensors per channel; the twin leaves the input_scale tensors
# out: the converter cannot map them), ctblock (compressed-tensors blocks
# [64, 96]). Not here: compressed-tensors strategy "tensor", which the
# converter refuses (it asserts channel or block).
#
#   bench/llamacpp_fp8_ref.sh [LAYOUT...]
#   env: LLAMA_SRC (default /tmp/llama-src), MW_BENCH_PYTHON (/usr/bin/python3)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
LLAMA=${LLAMA_SRC:-/tmp/llama-src}
PY=${MW_BENCH_PYTHON:-/usr/bin/python3}
OUT=$repo/tests/fixtures/llamacpp_ref
[ -f "$LLAMA/convert_hf_to_gguf.py" ] || { echo "no llama.cpp source at $LLAMA (LLAMA_SRC)"; exit 2; }
"$PY" -c 'import torch, numpy, sentencepiece, tqdm' 2> /dev/null || {
    echo "needs (Debian): apt-get install -y python3-torch python3-numpy python3-sentencepiece python3-tqdm"
    exit 2
}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
layouts=("$@")
[ ${#layouts[@]} -gt 0 ] || layouts=(block ragged pertensor channel ctblock)
commit=$(git -C "$LLAMA" log -1 --format=%H 2> /dev/null || echo unknown)
for L in "${layouts[@]}"; do
    "$PY" "$repo/tests/fixtures/mk_fp8_fixture.py" make "$repo/datasets/tinyllama-8m" "$W/$L" "$L" --layers 2
    "$PY" "$repo/tests/fixtures/mk_fp8_fixture.py" twin "$W/$L" "$W/fp8-$L"
    for t in f16 bf16 q8_0; do
        PYTHONPATH=$here/llamacpp_shim:$LLAMA/gguf-py "$PY" "$LLAMA/convert_hf_to_gguf.py" --no-lazy \
            --outtype "$t" --outfile "$W/$L-$t.gguf" "$W/fp8-$L" > "$W/$L-$t.log" 2>&1 || {
            echo "llamacpp_fp8_ref: $L $t: convert_hf_to_gguf.py failed:"
            tail -n 20 "$W/$L-$t.log"
            exit 1
        }
        "$PY" "$repo/tests/lib/mwgguf.py" digest "$W/$L-$t.gguf" --indent 0 \
            --source "$commit" "mk_fp8_fixture.py twin of make tinyllama-8m $L --layers 2" \
            > "$OUT/fp8-$L-$t.json"
        echo "llamacpp_fp8_ref: $OUT/fp8-$L-$t.json"
        rm -f "$W/$L-$t.gguf"
    done
done
