#!/usr/bin/env bash
# bench/llamacpp_ref.sh — regenerate tests/fixtures/llamacpp_ref/<kind>-<type>.json:
# digests (tests/lib/mwgguf.py digest: every KV, every tensor's name,
# type, shape and sha256) of what llama.cpp's own converter
# (convert_hf_to_gguf.py at the bundled commit) writes for each family
# fixture (tests/fixtures/mk_family_fixture.py) in f16, bf16 and q8_0.
# tests/e2e/convert_families.sh compares `memwall convert` with them. Not
# run by the tests (needs torch, numpy, sentencepiece, tqdm: Debian's
# python3-torch python3-numpy python3-sentencepiece python3-tqdm, and the
# llama.cpp source).
#
#   bench/llamacpp_ref.sh [KIND...]     (default: every kind)
#   env: LLAMA_SRC (default /tmp/llama-src), MW_BENCH_PYTHON (/usr/bin/python3),
#        MW_TOK_DIR (tokenizer cache of tests/fixtures/fetch_tokenizers.sh),
#        MW_REF_WORK (scratch dir, default a mktemp dir, removed at the end)
#
# Gemma 3 (gemma3, gemma3mm): llama.cpp's converter has no pre-tokenizer hash
# for Gemma's tokenizer.json (its GPT-2-style path refuses it), so the
# reference is made from the fixture's --spm twin: the same checkpoint plus a
# tokenizer.model written from that tokenizer.json (mk_family_fixture.py
# spm_model()), which takes llama.cpp's SentencePiece path — what a real
# Gemma 3 checkpoint, which ships a tokenizer.model, converts with. The tensors
# and the non-tokenizer keys do not depend on the twin; the tokenizer.* keys
# are llama.cpp's SentencePiece ones (scores: minus the rank of each NORMAL
# piece in id order, 0 for the others, as spm_model() writes them).
#
# Mixture of experts: qwen3moe (two shards, split inside a
# layer's experts), mixtral, qwen2moe (shared expert): the converter's
# Qwen2MoeModel / Qwen3MoeModel / LlamaModel expert stacking; qwen3moe-fused:
# the same checkpoint in transformers 5's fused layout (mlp.experts.gate_up_proj
# / down_proj 3-D tensors).
#
# Gated delta net: qwen35 (Qwen3_5ForConditionalGeneration, dense, tied),
# qwen35moe (Qwen3_5MoeForConditionalGeneration, fused experts, shared
# expert), qwen3next (Qwen3NextForCausalLM, fused in_proj_qkvz / in_proj_ba,
# per-expert tensors), qwen35-causal and qwen35moe-causal (the
# Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM layouts, --causal-lm). Their
# tokenizer is Qwen3's made Qwen3.5-style (its Split regex Qwen3.5's). The
# converter names a BPE pre-tokenizer by hashing its tokenization of a check
# text, and its qwen35 hashes are those of Qwen3.5's own 248k vocabulary,
# which no package here ships: with Qwen3's vocabulary the hash matches
# nothing and the converter would refuse. The shim therefore names the
# pre-tokenizer "qwen35" for a tokenizer.json whose Split regex is exactly
# Qwen3.5's (bench/llamacpp_shim/transformers/__init__.py wraps the
# converter's get_vocab_base_pre for that tokenizer only); every other key
# and every tensor is the converter's own.
#
# Gemma 4: gemma4e2b (Gemma4ForConditionalGeneration, E2B layout: per-layer
# embeddings, shared KV, double-wide MLP, vision and audio towers), gemma4moe
# (26B-A4B layout: the expert block beside the dense MLP, attention_k_eq_v)
# and gemma4dense (Gemma4ForCausalLM, 31B layout). Their tokenizer is Gemma
# 3's tokenizer.json made Gemma 4-like (mk_family_fixture.py); the
# converter's Gemma4Model.set_vocab reads it through gguf-py's LlamaHfVocab,
# which the shim serves (bench/llamacpp_shim/transformers/_tok.py
# SpmJsonTokenizer: vocabulary, added and special tokens).
#
# gpt-oss: gptoss (GptOssForCausalLM in gpt-oss-20b's layout, MXFP4 experts,
# o200k_harmony): the converter's GptOssModel repacks the experts' blocks
# and scales itself (no dequantization), so every output type keeps them
# MXFP4 and f16/bf16 files say file type MOSTLY_MXFP4_MOE (38).
#
# Shim: Debian's torch 1.13 lacks names and there is no `transformers`;
# bench/llamacpp_shim provides AutoConfig (with Gemma3TextConfig defaults for
# a sparse text_config) and a minimal AutoTokenizer over tokenizer.json
# (byte-level BPE: Qwen3) good for the converter's pre-tokenizer hash.
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
W=${MW_REF_WORK:-}
if [ -z "$W" ]; then
    W=$(mktemp -d)
    trap 'rm -rf "$W"' EXIT
fi
mkdir -p "$OUT" "$W"
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(qwen3 gemma3 gemma3mm gemma2 phi3 phi3long gemma2-f16src
                                  qwen3moe mixtral qwen2moe qwen3moe-fused
                                  qwen35 qwen35moe qwen3next qwen35-causal qwen35moe-causal
                                  phi4mini gemma4e2b gemma4moe gemma4dense gptoss)
commit=$(git -C "$LLAMA" log -1 --format=%H 2> /dev/null || echo unknown)
for k in "${kinds[@]}"; do
    # k: a fixture kind, or gemma2-f16src (gemma2 with F16 weights: the
    # F16 source path, where Gemma's norm + 1 is rounded in F16)
    spm=()
    fk=$k
    case $k in
    gemma3|gemma3mm) spm=(--spm) ;;
    gemma2-f16src) fk=gemma2; spm=(--dtype F16) ;;
    qwen3moe-fused) fk=qwen3moe; spm=(--fused-experts) ;;
    qwen35-causal|qwen35moe-causal) fk=${k%-causal}; spm=(--causal-lm) ;;
    esac
    # the directory's name is what the converter derives general.name from;
    # keep it the kind's so reruns give the same digest
    rm -rf "${W:?}/$k"
    "$PY" "$repo/tests/fixtures/mk_family_fixture.py" "$fk" "$W/$k" "${spm[@]}"
    for t in f16 bf16 q8_0; do
        PYTHONPATH=$here/llamacpp_shim:$LLAMA/gguf-py "$PY" "$LLAMA/convert_hf_to_gguf.py" \
            --outtype "$t" --outfile "$W/$k-$t.gguf" "$W/$k" > "$W/$k-$t.log" 2>&1 || {
            echo "llamacpp_ref: $k $t: convert_hf_to_gguf.py failed:"
            tail -n 20 "$W/$k-$t.log"
            exit 1
        }
        "$PY" "$repo/tests/lib/mwgguf.py" digest "$W/$k-$t.gguf" --indent 0 \
            --source "$commit" "$fk ${spm[*]:-}" > "$OUT/$k-$t.json"
        echo "llamacpp_ref: $OUT/$k-$t.json"
    done
    rm -f "$W/$k"-*.gguf
done
