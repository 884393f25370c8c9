#!/usr/bin/env bash
# Bad HF input -> exit 1, a message naming the file and the place, and no
# output file: truncated safetensors, lying offsets, a missing shard, an
# unknown dtype, a wrong-shaped tensor, malformed config.json, malformed
# tokenizer.json and tokenizer.model; mixture-of-experts configs llama.cpp
# cannot represent and missing / misshapen / out-of-range expert tensors;
# Qwen3.5 configs whose layer_types contradict full_attention_interval, that
# lack a linear_* key, whose value heads are not a multiple of the key heads
# or whose recurrent state overflows, and a conv1d whose kernel is not
# linear_conv_kernel_dim; Gemma 4 configs whose layer_types contradict the
# shared-KV layers, sharing every layer, or whose per-layer widths disagree
# with the tensors. Damage is made on copies by
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
# the Qwen3 / Gemma 2-3 / Phi-3 families (tests/fixtures/mk_family_fixture.py): a config
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

    # mixture of experts: configs llama.cpp cannot represent, and
    # expert tensors missing, misshapen or out of range -> exit 1 naming the
    # JSON path / the tensor, no output
    for k in mixtral qwen2moe; do
        python3 "$FIX/mk_family_fixture.py" $k "$T/$k" --tok-dir "$TOKDIR" > /dev/null ||
            { fail "mk_family_fixture.py $k"; continue; }
    done
    fam qwen2moe-topk "$T/qwen2moe" 'c["num_experts_per_tok"] = 7' -- \
        "config.json" "num_experts_per_tok" "7 is more than num_experts 6"
    fam qwen2moe-sparse-step "$T/qwen2moe" 'c["decoder_sparse_step"] = 2' -- \
        "config.json" "decoder_sparse_step" "dense MLP"
    fam qwen2moe-mlp-only "$T/qwen2moe" 'c["mlp_only_layers"] = [1]' -- \
        "config.json" "mlp_only_layers[0]" "layer 1 with a dense MLP"
    fam qwen2moe-norm "$T/qwen2moe" 'c["norm_topk_prob"] = True' -- \
        "config.json" "norm_topk_prob" "never renormalizes"
    fam mixtral-topk "$T/mixtral" 'c["num_experts_per_tok"] = 5' -- \
        "config.json" "num_experts_per_tok" "5 is more than num_local_experts 4"
    fam mixtral-experts "$T/mixtral" 'c["num_local_experts"] = 5' -- \
        "model.layers.0.block_sparse_moe.gate.weight" "shape [4, 64], expected [5, 64]"
    # st NAME BASE MODE TENSOR [NEW-NAME] -- EXPECT...: rewrite a copy of
    # BASE's model.safetensors with TENSOR dropped (drop), its shape reversed
    # (transpose: same bytes) or renamed (rename), convert, want exit 1
    st() {
        local name=$1 base=$2 mode=$3 tensor=$4 new=""
        shift 4
        if [ "$1" != "--" ]; then new=$1; shift; fi
        shift
        local d="$T/bad-$name"
        rm -rf "$d" && mkdir -p "$d"
        for f in "$base"/*; do ln -s "$f" "$d/$(basename "$f")"; done
        rm "$d/model.safetensors"
        python3 "$FIX/hf_rewrite.py" \
            "$base/model.safetensors" "$d/model.safetensors" "$mode" "$tensor" "$new" ||
            { fail "$name: rewrite failed"; return; }
        run 1 convert "$d" -o "$T/out-$name.gguf"
        local e
        for e in "$@"; do has "$err" "$e" "$name"; done
        [ -e "$T/out-$name.gguf" ] && fail "$name: output file created"
        echo "ok $name: $(echo "$err" | head -n 1)"
    }
    X=model.layers.1.block_sparse_moe.experts
    st mixtral-missing-expert "$T/mixtral" drop $X.3.w2.weight -- \
        "tensor '$X.3.w2.weight'" "missing (expert 3 of layer 1" "num_local_experts 4"
    st mixtral-expert-shape "$T/mixtral" transpose $X.2.w1.weight -- \
        "model.safetensors" "tensor '$X.2.w1.weight'" "shape [64, 128], expected [128, 64]" \
        "(intermediate_size, hidden_size)"
    st mixtral-expert-range "$T/mixtral" rename $X.3.w3.weight $X.4.w3.weight -- \
        "tensor '$X.4.w3.weight'" "expert 4 does not exist (config.json num_local_experts is 4)"
    Q=model.layers.1.mlp.experts
    st qwen2moe-missing-expert "$T/qwen2moe" drop $Q.3.up_proj.weight -- \
        "tensor '$Q.3.up_proj.weight'" "missing (expert 3 of layer 1"
    st qwen2moe-expert-shape "$T/qwen2moe" transpose $Q.0.down_proj.weight -- \
        "tensor '$Q.0.down_proj.weight'" "expected [64, 48] (hidden_size, moe_intermediate_size)"
    st qwen2moe-no-shared-gate "$T/qwen2moe" drop model.layers.0.mlp.shared_expert_gate.weight -- \
        "tensor 'model.layers.0.mlp.shared_expert_gate.weight'" "missing"
    st qwen2moe-leading-zero "$T/qwen2moe" rename $Q.1.gate_proj.weight $Q.01.gate_proj.weight -- \
        "tensor '$Q.01.gate_proj.weight'" "not a tensor of the qwen2moe architecture"
    # the fused layout of transformers 5 (mlp.experts.gate_up_proj / down_proj)
    python3 "$FIX/mk_family_fixture.py" qwen2moe "$T/qwen2moe-fused" --fused-experts \
        --tok-dir "$TOKDIR" > /dev/null || fail "mk_family_fixture.py qwen2moe --fused-experts"
    st fused-missing "$T/qwen2moe-fused" drop $Q.gate_up_proj -- \
        "tensor '$Q.gate_up_proj'" "missing (layer 1 has the fused mlp.experts.down_proj)"
    st fused-shape "$T/qwen2moe-fused" transpose $Q.down_proj -- \
        "tensor '$Q.down_proj'" "shape [48, 64, 6], expected [6, 64, 48]"
    # a per-expert name on the fused tensor: refused at that tensor (per-expert
    # names sort first, so its shape is what is wrong with it)
    st fused-mixed "$T/qwen2moe-fused" rename $Q.gate_up_proj $Q.0.gate_proj.weight -- \
        "tensor '$Q.0.gate_proj.weight'" "shape [6, 96, 64], expected [48, 64]"

    # the gated delta net (qwen35: Qwen3_5ForConditionalGeneration, keys
    # under text_config): layer kinds, head counts, state size, conv kernel
    python3 "$FIX/mk_family_fixture.py" qwen35 "$T/qwen35" --tok-dir "$TOKDIR" > /dev/null ||
        fail "mk_family_fixture.py qwen35"
    fam qwen35-layer-types "$T/qwen35" 'c["text_config"]["layer_types"][3] = "linear_attention"' -- \
        "config.json" "text_config.layer_types[3]" "contradicts full_attention_interval 4"
    fam qwen35-no-linear-key "$T/qwen35" 'del c["text_config"]["linear_value_head_dim"]' -- \
        "config.json" "text_config.linear_value_head_dim" "missing"
    fam qwen35-value-heads "$T/qwen35" 'c["text_config"]["linear_num_value_heads"] = 5' -- \
        "config.json" "text_config.linear_num_value_heads" "not a multiple of linear_num_key_heads 2"
    fam qwen35-state-overflow "$T/qwen35" 'c["text_config"].update(linear_key_head_dim=2**32 - 1, linear_num_value_heads=2**32 - 2)' -- \
        "config.json" "text_config.linear_num_value_heads" "overflows"
    fam qwen35-conv-kernel "$T/qwen35" 'c["text_config"]["linear_conv_kernel_dim"] = 3' -- \
        "model.safetensors" "tensor 'model.language_model.layers.0.linear_attn.conv1d.weight'" \
        "shape [320, 1, 4], expected [320, 1, 3]" "linear_conv_kernel_dim"

    # Gemma 4 (gemma4e2b: Gemma4ForConditionalGeneration in E2B's layout):
    # layer kinds the shared-KV layers cannot read from, every layer shared,
    # and per-layer widths (double-wide MLP, full-layer head dim, per-layer
    # embedding width) that disagree with the tensors
    python3 "$FIX/mk_family_fixture.py" gemma4e2b "$T/gemma4e2b" --tok-dir "$TOKDIR" > /dev/null ||
        fail "mk_family_fixture.py gemma4e2b"
    G4=model.language_model
    fam g4-layer-types "$T/gemma4e2b" 'c["text_config"]["layer_types"][2] = "sliding_attention"' -- \
        "config.json" "text_config.layer_types[2]" "contradicts num_kv_shared_layers 2" \
        "must be full_attention"
    fam g4-kv-shared "$T/gemma4e2b" 'c["text_config"]["num_kv_shared_layers"] = 5' -- \
        "config.json" "text_config.num_kv_shared_layers" "not below num_hidden_layers 5"
    fam g4-ffn-width "$T/gemma4e2b" 'c["text_config"]["use_double_wide_mlp"] = False' -- \
        "model.safetensors" "tensor '$G4.layers.3.mlp.down_proj.weight'" \
        "shape [64, 256], expected [64, 128]" "for layer 3"
    fam g4-head-dim "$T/gemma4e2b" 'c["text_config"]["global_head_dim"] = 128' -- \
        "model.safetensors" "tensor '$G4.layers.2.self_attn.k_norm.weight'" \
        "shape [64], expected [128] (global_head_dim)" "full_attention"
    fam g4-ple-width "$T/gemma4e2b" 'c["text_config"]["hidden_size_per_layer_input"] = 8' -- \
        "model.safetensors" "tensor '$G4.embed_tokens_per_layer.weight'" \
        "shape [262144, 80], expected [262144, 40]"
    rm -rf "${T:?}/gemma4e2b"
else
    echo "family cases skipped: tokenizer files unavailable ($(tail -n 1 "$T/fetch.log"))"
fi
finish
