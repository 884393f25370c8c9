#!/usr/bin/env bash
# Bad HF input -> exit 1, a message naming the file and the place, and no
# output file: truncated safetensors, lying offsets, a missing shard, an
# unknown dtype, a wrong-shaped tensor, malformed config.json, malformed
# tokenizer.json and tokenizer.model. Damage is made on copies by
# tests/fixtures/hf_corrupt.py on the fixtures of mk_hf_fixture.py.
source "$(dirname "${BASH_SOURCE[0]}")/hf_common.sh"
have_python || { skip "python3 needed for the fixtures"; }

python3 "$FIX/mk_hf_fixture.py" llama3 "$T/llama3" || exit 1
python3 "$FIX/mk_hf_fixture.py" qwen2 "$T/qwen2" || exit 1
python3 "$FIX/mk_hf_fixture.py" llama3 "$T/sharded" --shards 2 || exit 1
for d in llama3 qwen2 sharded; do
    run 0 convert "$T/$d" -o "$T/$d.gguf" -q || { echo "the good fixture $d does not convert"; exit 1; }
done

K=model.layers.0.self_attn.k_proj.weight
# case NAME BASE MODE [TENSOR] -- EXPECT...: damage a copy of BASE, convert,
# want exit 1, no output, and stderr holding every EXPECT string
case_() {
    local name=$1 base=$2 mode=$3
    shift 3
    local tensor=""
    if [ "$1" != "--" ]; then tensor=$1; shift; fi
    shift
    local d="$T/bad-$name"
    rm -rf "$d" && cp -r "$base" "$d"
    python3 "$FIX/hf_corrupt.py" "$mode" "$d" $tensor || { fail "$name: hf_corrupt.py failed"; return; }
    run 1 convert "$d" -o "$T/out-$name.gguf"
    local e
    for e in "$@"; do has "$err" "$e" "$name"; done
    [ -e "$T/out-$name.gguf" ] && fail "$name: output file created"
    ls "$T" | grep -q "out-$name.gguf." && fail "$name: temp file left: $(ls "$T" | grep "out-$name")"
    echo "ok $name: $(echo "$err" | head -n 1)"
}

case_ truncated "$T/llama3" truncate -- "model.safetensors" "tensor '" "truncated"
case_ lying-offsets "$T/llama3" lie-offsets "$K" -- "model.safetensors" "tensor '" "overlaps"
case_ past-end "$T/llama3" past-end "$K" -- "model.safetensors" "tensor '$K'" "past the end"
case_ missing-shard "$T/sharded" drop-shard -- "model.safetensors.index.json" "weight_map." \
    "model-00002-of-00002.safetensors" "does not exist"
case_ unknown-dtype "$T/llama3" unknown-dtype "$K" -- "model.safetensors" "tensor '$K'" "unknown dtype 'Q4'"
case_ wrong-shape "$T/llama3" wrong-shape "$K" -- "model.safetensors" "tensor '$K'" \
    "shape [64, 32], expected [32, 64]"
case_ config-syntax "$T/llama3" config-syntax -- "config.json: offset" "JSON syntax error"
case_ config-missing "$T/llama3" config-missing -- "config.json" "num_attention_heads" "missing"
case_ config-contra "$T/qwen2" config-contra -- "config.json" "model_type" "contradicts"
case_ tokjson-syntax "$T/qwen2" tokjson-syntax -- "tokenizer.json" "offset"
case_ tokjson-merges "$T/llama3" tokjson-merges -- "tokenizer.json" "merges[3]"

# SentencePiece tokenizer.model: tinyllama-8m with a cut tokenizer.model
SRC=$(model_dir tinyllama-8m)
if [ -n "$SRC" ]; then
    mkdir -p "$T/spm"
    for f in "$SRC"/*; do ln -s "$f" "$T/spm/$(basename "$f")"; done
    rm "$T/spm/tokenizer.model" && cp "$SRC/tokenizer.model" "$T/spm/"
    case_ spm-truncate "$T/spm" spm-truncate -- "tokenizer.model" "offset"
fi
# the families of issue 12 (tests/fixtures/mk_family_fixture.py): a config
# mixing families, lacking a key the family needs, or contradicting itself
# -> exit 1 naming the key's JSON path, no output
TOKDIR=$(bash "$FIX/fetch_tokenizers.sh" 2> "$T/fetch.log" | tail -n 1)
if [ -n "$TOKDIR" ] && [ -d "$TOKDIR" ]; then
    for k in qwen3 gemma3mm gemma2 phi3long; do
        python3 "$FIX/mk_family_fixture.py" $k "$T/$k" --tok-dir "$TOKDIR" > /dev/null ||
            { fail "mk_family_fixture.py $k"; continue; }
    done
    # fam NAME BASE PYTHON-EDIT -- EXPECT...: edit a copy of BASE's config.json
    # (c: the dict), convert, want exit 1, no output, stderr holding each EXPECT
    fam() {
        local name=$1 base=$2 edit=$3
        shift 4
        local d="$T/bad-$name"
        rm -rf "$d" && mkdir -p "$d"
        for f in "$base"/*; do ln -s "$f" "$d/$(basename "$f")"; done
        rm "$d/config.json"
        python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=2)' "$base/config.json" "$d/config.json" "$edit" ||
            { fail "$name: edit failed"; return; }
        run 1 convert "$d" -o "$T/out-$name.gguf"
        local e
        for e in "$@"; do has "$err" "$e" "$name"; done
        [ -e "$T/out-$name.gguf" ] && fail "$name: output file created"
        echo "ok $name: $(echo "$err" | head -n 1)"
    }
    fam qwen3-gemma-key "$T/qwen3" 'c["query_pre_attn_scalar"] = 32' -- \
        "config.json" "query_pre_attn_scalar" "not a Qwen3ForCausalLM key"
    fam qwen3-no-head-dim "$T/qwen3" 'del c["head_dim"]' -- "config.json" "head_dim" "missing"
    fam qwen3-text-config "$T/qwen3" 'c["text_config"] = {"hidden_size": 64}' -- \
        "config.json" "text_config" "not a multimodal architecture"
    fam gemma2-no-softcap "$T/gemma2" 'del c["attn_logit_softcapping"]' -- \
        "config.json" "attn_logit_softcapping" "missing"
    fam gemma2-acts "$T/gemma2" 'c["hidden_act"] = "silu"' -- \
        "config.json" "hidden_activation" "contradicts hidden_act"
    fam gemma2-phi-key "$T/gemma2" 'c["partial_rotary_factor"] = 0.5' -- \
        "config.json" "partial_rotary_factor" "not a Gemma2ForCausalLM key"
    fam gemma3mm-no-layers "$T/gemma3mm" 'del c["text_config"]["num_hidden_layers"]' -- \
        "config.json" "text_config.num_hidden_layers" "missing"
    fam gemma3mm-text-type "$T/gemma3mm" 'c["text_config"]["model_type"] = "qwen3"' -- \
        "config.json" "text_config.model_type" "contradicts"
    fam gemma3mm-as-qwen3 "$T/gemma3mm" 'c["architectures"] = ["Qwen3ForCausalLM"]; c.pop("model_type")' -- \
        "config.json" "text_config" "not a multimodal architecture"
    fam phi3-no-orig "$T/phi3long" 'del c["original_max_position_embeddings"]' -- \
        "config.json" "original_max_position_embeddings" "missing"
    fam phi3-no-short "$T/phi3long" 'del c["rope_scaling"]["short_factor"]' -- \
        "config.json" "rope_scaling.short_factor" "missing"
    fam phi3-gemma-key "$T/phi3long" 'c["sliding_window_pattern"] = 6' -- \
        "config.json" "sliding_window_pattern" "not a Phi3ForCausalLM key"
else
    echo "family cases skipped: tokenizer files unavailable ($(tail -n 1 "$T/fetch.log"))"
fi
finish
