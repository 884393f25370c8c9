#!/usr/bin/env bash
# Calibration on the architectures its forward does not run yet: Gemma 4
# (gemma4: per-layer embeddings, shared KV, two head sizes, experts beside
# the MLP) and gpt-oss (attention sinks, biased clamped-SwiGLU experts, no
# ffn_norm). Until it does, `memwall calib` and `memwall quant --corpus` (a
# preset and --size) refuse them by name as soon as the model is opened:
# exit 1, "calibration does not run <arch> yet", no output file, for
#  - the GGUF fixtures written directly: tests/fixtures/mk_gemma4_gguf.py e2b,
#    moe and dense, tests/fixtures/mk_gptoss_gguf.py;
#  - the HF checkpoints of tests/fixtures/mk_family_fixture.py gemma4e2b and
#    gptoss (the refusal comes before the tensor plan: gpt-oss's MXFP4
#    experts are never decoded).
# Without --corpus the same files still quantize (Q8_0), as a control.
# Exit 77 when python3 or the tokenizer files are missing.
. "$(dirname "$0")/common.sh"
have_python || skip "no python3"
fetch_tokenizers
scratch_on_shm calib_gemma4
printf 'The quick brown fox jumps over the lazy dog. It was a bright cold day.\n' > "$T/corpus.txt"
C=(--corpus "$T/corpus.txt" --samples 1 --seq-len 8 -t 2 -q)

# refused ARCH MODEL LABEL [QUANT_ARGS...]: calib, quant --preset and quant
# --size with the corpus exit 1 naming ARCH and write nothing (gpt-oss's
# MXFP4 experts need --allow-requantize first, as llama-quantize's)
refused() {
    local arch=$1 m=$2 l=$3 o f0=$fails
    shift 3
    for o in im k s; do rm -f "$T/$o.gguf"; done
    run 1 calib "$m" "${C[@]}" -o "$T/im.gguf" &&
        has "$err" "calibration does not run $arch yet" "$l: calib"
    run 1 quant "$m" -o "$T/k.gguf" --preset Q4_K_M "$@" "${C[@]}" &&
        has "$err" "calibration does not run $arch yet" "$l: quant --corpus"
    run 1 quant "$m" -o "$T/s.gguf" --size 1M "$@" "${C[@]}" &&
        has "$err" "calibration does not run $arch yet" "$l: quant --size --corpus"
    for o in im k s; do
        [ -e "$T/$o.gguf" ] && fail "$l: a refused run left $o.gguf"
    done
    [ "$fails" -eq "$f0" ] && echo "  $l: refused (calib, quant --corpus, quant --size --corpus)"
}

for k in e2b moe dense; do
    python3 "$FIX/mk_gemma4_gguf.py" "$k" "$T/g4-$k.gguf" || { fail "mk_gemma4_gguf $k"; continue; }
    refused gemma4 "$T/g4-$k.gguf" "gemma4 $k (GGUF)"
done
python3 "$FIX/mk_gptoss_gguf.py" "$T/gptoss.gguf" || fail "mk_gptoss_gguf"
[ -f "$T/gptoss.gguf" ] && refused gpt-oss "$T/gptoss.gguf" "gpt-oss (GGUF)" --allow-requantize
# the control: without a corpus the refused files quantize
run 0 quant "$T/gptoss.gguf" -o "$T/q.gguf" --preset Q8_0 --allow-requantize -t 2 -q ||
    fail "gpt-oss: quant without --corpus"
rm -f "$T"/*.gguf

for k in gemma4e2b gptoss; do
    d=$T/hf-$k
    python3 "$FIX/mk_family_fixture.py" "$k" "$d" > "$T/mk.log" 2>&1; rc=$?
    [ $rc -eq 77 ] && skip "$k: tokenizer files missing (tests/fixtures/fetch_tokenizers.sh)"
    [ $rc -eq 0 ] || { cat "$T/mk.log"; fail "$k: fixture"; continue; }
    if [ $k = gptoss ]; then refused gpt-oss "$d" "$k (HF)" --allow-requantize
    else refused gemma4 "$d" "$k (HF)"; fi
    rm -rf "$d"
done
finish
