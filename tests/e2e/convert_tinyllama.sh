#!/usr/bin/env bash
# tinyllama-8m converted to F16 loads in llama.cpp and its perplexity on the
# first 60,000 bytes of eval.txt (llama-perplexity's protocol, ctx 256)
# matches the figure of llama.cpp's own F16 conversion (58.248257, from
# shared/anchors.md) within 0.5%; the tensor data is byte-identical with that
# reference file; --type q8_0 equals llama.cpp's own Q8_0 quantization of our
# F16 file tensor for tensor.
#
#   convert_tinyllama.sh [peer]   without "peer": the memwall side only
source "$(dirname "${BASH_SOURCE[0]}")/hf_common.sh"
REF_PPL=58.248257
WITH_PEER=${1:-}

SRC=$(model_dir tinyllama-8m)
[ -n "$SRC" ] || { skip "no tinyllama-8m in datasets/ or shared/"; }
run 0 convert "$SRC" -o "$T/t-f16.gguf" -q || finish
run 0 convert "$SRC" -o "$T/t-q8_0.gguf" --type q8_0 -q || finish
REF="$MW_DATASETS/reference/tinyllama-8m.llamacpp-f16.gguf"
[ -f "$REF" ] || REF="$MW_SHARED/models/reference/tinyllama-8m.llamacpp-f16.gguf"
if have_python && [ -f "$REF" ]; then
    mwgguf tensors-cmp "$T/t-f16.gguf" "$REF" > "$T/cmp" ||
        fail "tensor data differs from llama.cpp's F16 conversion: $(cat "$T/cmp")"
    echo "vs llama.cpp's convert_hf_to_gguf.py F16: $(cat "$T/cmp")"
fi

[ "$WITH_PEER" = peer ] || finish
need_peer
"$PEER" info "$T/t-f16.gguf" > "$T/info" 2> "$T/info.err" ||
    { fail "llama.cpp cannot load the F16 file: $(tail -n 3 "$T/info.err")"; finish; }
grep -q '^n_vocab 4096$' "$T/info" || fail "n_vocab: $(grep n_vocab "$T/info")"

# Q8_0: ours == llama-quantize's from our F16
if have_python; then
    "$PEER" quantize "$T/t-f16.gguf" "$T/t-q8_0-llamacpp.gguf" Q8_0 > /dev/null 2> "$T/q.err" ||
        fail "llama-peer quantize: $(tail -n 2 "$T/q.err")"
    mwgguf tensors-cmp "$T/t-q8_0.gguf" "$T/t-q8_0-llamacpp.gguf" > "$T/cmpq" ||
        fail "q8_0 differs from llama.cpp's Q8_0: $(cat "$T/cmpq")"
    echo "q8_0 vs llama-quantize Q8_0: $(cat "$T/cmpq")"
fi

EVAL="$MW_DATASETS/corpora/eval.txt"
[ -f "$EVAL" ] || EVAL="$MW_SHARED/corpora/eval.txt"
if [ ! -f "$EVAL" ]; then
    echo "no eval.txt: perplexity not checked"
    finish
fi
head -c 60000 "$EVAL" > "$T/eval60k.txt"
"$PEER" ppl "$T/t-f16.gguf" "$T/eval60k.txt" --ctx 256 > "$T/ppl" 2> "$T/ppl.err" ||
    { fail "llama-peer ppl failed: $(tail -n 3 "$T/ppl.err")"; finish; }
ppl=$(awk '$1=="ppl"{print $2}' "$T/ppl")
echo "perplexity (F16, eval.txt first 60000 bytes, ctx 256): $ppl (llama.cpp's F16 file: $REF_PPL)"
awk -v p="$ppl" -v r="$REF_PPL" 'BEGIN { d = (p - r) / r; if (d < 0) d = -d; exit !(p > 0 && d <= 0.005) }' ||
    fail "perplexity $ppl is not within 0.5% of $REF_PPL"
finish
