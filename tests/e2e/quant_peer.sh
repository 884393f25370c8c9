#!/usr/bin/env bash
# `memwall quant` against llama.cpp itself (llama-peer: libllama of
# node-llama-cpp 3.21.1, llama.cpp 80fb11ac; skipped with 77 when
# tests/peer/setup.sh cannot provide it):
#  - files: for every preset, without and with llama.cpp's imatrix, our file
#    with its memwall.* KVs removed is byte-for-byte llama_model_quantize's
#    file for the same F16 source (same KVs in the same order, same tensor
#    infos, same tensor data); so our file is larger only by those keys
#    (printed) and scores exactly what llama.cpp's scores
#  - llama.cpp loads each of our files and its logits are finite (ppl over
#    one chunk); Q4_K_M's perplexity on the first 60,000 bytes of eval.txt
#    (ctx 256) matches shared/anchors.md's llama.cpp figure within 0.2%
#  - type rules: for shapes without weights (Llama-2-7B, Llama-3-8B, a 70B,
#    a Qwen2-0.5B-like 896-wide model with tied embeddings, a 200-wide toy),
#    every preset, --pure and --type-override, memwall's per-tensor types
#    equal llama.cpp's own llama_quant_compute_types (tests/peer/llama_quant_types.c)
source "$(dirname "${BASH_SOURCE[0]}")/quant_common.sh"
REF_Q4KM_PPL=58.304300

[ -n "$F16" ] || { skip "no tinyllama-8m.llamacpp-f16.gguf"; }
have_python || { skip "no python3"; }
need_peer

# --- files: byte identity with llama_model_quantize ---
IM_PRESETS="Q4_K_M Q4_K_S Q3_K_L Q3_K_M Q3_K_S Q2_K Q4_0 Q5_0 IQ4_NL Q8_0"
printf '%-10s %10s %10s %8s  %s\n' preset ours llama.cpp memwall.* "ours minus memwall.* KVs vs llama.cpp"
check_pair() { # NAME PRESET [--imatrix F]
    local name=$1 p=$2
    shift 2
    run 0 quant "$F16" -o "$T/m-$name.gguf" --preset "$p" -t 2 -q "$@" || return
    "$PEER" --threads 2 quantize "$F16" "$T/l-$name.gguf" "$p" "$@" > /dev/null 2> "$T/lq.err" ||
        { fail "llama-peer quantize $p: $(tail -n 2 "$T/lq.err")"; return; }
    local c ours theirs extra
    c=$(mwgguf cmp "$T/m-$name.gguf" "$T/l-$name.gguf") || fail "$name: $c"
    ours=$(stat -c %s "$T/m-$name.gguf")
    theirs=$(stat -c %s "$T/l-$name.gguf")
    extra=$(mwgguf memwall-bytes "$T/m-$name.gguf")
    printf '%-10s %10d %10d %8d  %s\n' "$name" "$ours" "$theirs" "$extra" "$(echo "$c" | head -n 1)"
    rm -f "$T/l-$name.gguf"
}
for p in $PRESETS $EXTRA_PRESETS; do check_pair "$p" "$p"; done
if [ -n "$IMAT" ]; then
    for p in $IM_PRESETS; do check_pair "$p-im" "$p" --imatrix "$IMAT"; done
fi

# --- llama.cpp loads ours; logits finite; Q4_K_M perplexity ---
EVAL="$MW_DATASETS/corpora/eval.txt"
[ -f "$EVAL" ] || EVAL="$MW_SHARED/corpora/eval.txt"
if [ -f "$EVAL" ]; then
    head -c 60000 "$EVAL" > "$T/eval60k.txt"
    head -c 3000 "$EVAL" > "$T/eval3k.txt" # one chunk of 256 tokens, cheap to tokenize
    for p in $PRESETS $EXTRA_PRESETS; do
        "$PEER" ppl "$T/m-$p.gguf" "$T/eval3k.txt" --ctx 256 --chunks 1 > "$T/ppl" 2> "$T/ppl.err" ||
            { fail "$p: llama.cpp cannot load or run it: $(tail -n 2 "$T/ppl.err")"; continue; }
        v=$(awk '$1=="ppl"{print $2}' "$T/ppl")
        awk -v v="$v" 'BEGIN { exit !(v + 0 > 1 && v + 0 < 1e4) }' ||
            fail "$p: perplexity over one chunk is '$v'"
    done
    echo "llama.cpp loads all $(echo $PRESETS $EXTRA_PRESETS | wc -w) presets; one-chunk perplexities finite"
    "$PEER" ppl "$T/m-Q4_K_M.gguf" "$T/eval60k.txt" --ctx 256 > "$T/ppl" 2> "$T/ppl.err" ||
        fail "Q4_K_M ppl: $(tail -n 2 "$T/ppl.err")"
    v=$(awk '$1=="ppl"{print $2}' "$T/ppl")
    echo "Q4_K_M perplexity (eval.txt first 60000 bytes, ctx 256): $v (llama.cpp's file: $REF_Q4KM_PPL)"
    awk -v p="$v" -v r="$REF_Q4KM_PPL" 'BEGIN { exit !(p > 0 && p <= r * 1.002) }' ||
        fail "Q4_K_M perplexity $v is more than 0.2% above llama.cpp's $REF_Q4KM_PPL"
fi

# --- type rules against llama_quant_compute_types ---
mwgguf header "$T/l2-7b.gguf" llama 4096 11008 32 32 32 32000 0 \
    + header "$T/l3-8b.gguf" llama 4096 14336 32 32 8 128256 0 \
    + header "$T/l2-70b.gguf" llama 8192 28672 80 64 8 32000 0 \
    + header "$T/q2-05b.gguf" qwen2 896 4864 24 14 2 151936 1 \
    + header "$T/toy200.gguf" llama 200 600 4 4 2 1000 0
if RULES_PRESETS="$PRESETS $EXTRA_PRESETS" rules_vs_llama "$F16" l2-7b l3-8b l2-70b q2-05b toy200; then
    N_RULES=0
    for m in "$F16" "$T/l2-7b.gguf" "$T/l3-8b.gguf" "$T/l2-70b.gguf" "$T/q2-05b.gguf" "$T/toy200.gguf"; do
        types_vs_llama "$m" Q4_K_M --pure -- --pure
        types_vs_llama "$m" Q3_K_M --type-override 'attn_v=q8_0' --type-override 'blk\.1\.=q2_K' \
            -- --tt 'attn_v=q8_0' --tt 'blk\.1\.=q2_K'
    done
    echo "type rules with --pure / --type-override: $N_RULES cases equal llama.cpp's llama_quant_compute_types"
fi
finish
