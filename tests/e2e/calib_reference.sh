#!/usr/bin/env bash
# memwall calib against the references, on tinyllama-8m over calib.txt:
#  - the models/README.md protocol (345 samples of BOS + 256 tokens, every
#    position counted) vs the independent numpy FP32 reference
#    (models/reference/tinyllama-8m.calib-imatrix.npz): max relative error
#    of in_sum2/counts per channel below 1e-5;
#  - llama-imatrix's chunking (--llamacpp-chunks, 345 chunks of 256) vs
#    llama.cpp's own imatrix (datasets/reference), which runs with F16
#    weights in mixed f16/f32: max relative error below 2e-3, mean below 1e-4.
# With "peer": llama.cpp's quantizer (tests/peer llama-peer) accepts our file.
. "$(dirname "$0")/calib_common.sh"
NPZ="$MW_DATASETS/reference/tinyllama-8m.calib-imatrix.npz"
have_python || { skip "python3 not available"; }
[ -d "$TINY" ] && [ -f "$LC_IMATRIX" ] || { skip "no tinyllama-8m data"; }

if [ "${1:-}" = peer ]; then
    need_peer
    peer=$PEER
    run 0 calib "$TINY" --corpus "$CALIB" -o "$T/p.imatrix" --samples 16 --seq-len 256 -t 2 -q
    for preset in Q4_K_M IQ4_NL Q2_K; do
        if "$peer" quantize "$TINY_GGUF" "$T/q-$preset.gguf" "$preset" --imatrix "$T/p.imatrix" \
            > "$T/peer.out" 2>&1; then
            run 0 inspect "$T/q-$preset.gguf" && has "$out" "quantize.imatrix.entries_count" "$preset"
        else
            cat "$T/peer.out"; fail "llama-quantize refused our imatrix ($preset)"
        fi
    done
    finish
fi

run 0 calib "$TINY" --corpus "$CALIB" -o "$T/ref.imatrix" --samples all --seq-len 256 -t 2 &&
    has "$err" "345 samples x 257 positions" "reference protocol"
echo "$err"
if [ -f "$NPZ" ]; then
    r=$(mwgguf imatrix-cmp "$T/ref.imatrix" "$NPZ" --max-rel 1e-5 --mean-rel 1e-7) ||
        fail "numpy reference: $r"
    echo "vs numpy FP32 reference (npz): $r"
else
    fail "$NPZ missing (bundled in datasets/)"
fi
run 0 calib "$TINY" --corpus "$CALIB" -o "$T/lc.imatrix" --samples all --seq-len 256 \
    --llamacpp-chunks -t 2 -q
r=$(mwgguf imatrix-cmp "$T/lc.imatrix" "$LC_IMATRIX" --max-rel 2e-3 --mean-rel 1e-4) ||
    fail "llama.cpp imatrix: $r"
echo "vs llama.cpp's imatrix (llama.cpp chunking): $r"
r=$(mwgguf imatrix-cmp "$T/ref.imatrix" "$LC_IMATRIX") || true
echo "vs llama.cpp's imatrix (reference protocol, 257 vs 256 positions per chunk): $r"
finish
