#!/usr/bin/env bash
# gpt-oss (GptOssForCausalLM, MXFP4 experts) against llama.cpp.
#
# mw (hf_convert_gptoss): the gptoss fixture of
# tests/fixtures/mk_family_fixture.py (gpt-oss-20b's config.json layout,
# quantization_config mxfp4, o200k_harmony; 4 layers of 64, 8 experts of 64,
# experts as U8 *_blocks + *_scales) converted to f16, bf16 and q8_0 and
# compared with the digests of llama.cpp's converter
# (tests/fixtures/llamacpp_ref/gptoss-<type>.json, bench/llamacpp_ref.sh):
# every tensor (the repacked MXFP4 experts, the de-interleaved gate/up and
# their biases, the sinks) and every KV but memwall.*, general.name and
# general.size_label. Bad input, each exit 1 naming the tensor or JSON path,
# with no output: a scale tensor of the wrong shape, blocks that do not cover
# the weight's columns, an E8M0 scale of 0xFF, a missing scale tensor, U8
# blocks without quantization_config, swiglu_limit other than llama.cpp's
# 7.0, layer_types llama.cpp would not follow. quant: MXFP4_MOE from the HF
# directory equals MXFP4_MOE from its conversion; every other preset
# refuses the MXFP4 experts without --allow-requantize (exit 1, no output).
# plan: from the fixture's config.json alone its MXFP4_MOE and Q4_K_M rows
# are the tensor bytes quant writes; on gpt-oss-20b's and -120b's real
# config.json (tests/fixtures/configs) the MXFP4_MOE row is 12,096,558,336 /
# 63,374,323,968 bytes (the sizes of the released MXFP4 GGUFs' tensor data)
# and the 12/16/24 GiB rows are printed.
#
# peer (hf_peer_gptoss): llama.cpp loads the f16 conversion (arch gpt-oss,
# n_vocab 201088, no pre-tokenizer warning), and memwall quant's files equal
# llama-quantize's (llama-peer quantize, the whole file but memwall.*) for
# MXFP4_MOE and, with --allow-requantize on both sides, Q4_K_M, Q6_K and
# Q2_K (MW_GPTOSS_PRESETS=all: every preset, ~3 min; bench/README.md has that
# run); without --allow-requantize llama-quantize refuses as memwall does.
#
#   convert_gptoss.sh mw|peer
# Skips (77) without the tokenizer files (fetch_tokenizers.sh) or, with peer,
# without llama-peer.
source "$(dirname "${BASH_SOURCE[0]}")/hf_common.sh"
MODE=${1:-mw}
have_python || skip "python3 needed for the fixtures"
scratch_on_shm gptoss
TOKDIR=$(bash "$FIX/fetch_tokenizers.sh" 2> "$T/fetch.log")
frc=$?
[ $frc -eq 77 ] && skip "tokenizer files unavailable: $(tail -n 1 "$T/fetch.log")"
[ $frc -eq 0 ] || { fail "fetch_tokenizers.sh exit $frc: $(tail -n 2 "$T/fetch.log")"; finish; }
TOKDIR=$(echo "$TOKDIR" | tail -n 1)
[ "$MODE" = peer ] && need_peer

python3 "$FIX/mk_family_fixture.py" gptoss "$T/gptoss" --tok-dir "$TOKDIR" > "$T/mk.log" 2>&1
mrc=$?
[ $mrc -eq 77 ] && skip "fixture gptoss: $(tail -n 1 "$T/mk.log")"
[ $mrc -eq 0 ] || { fail "mk_family_fixture.py gptoss: exit $mrc: $(tail -n 2 "$T/mk.log")"; finish; }
G=$T/gptoss
L=model.layers

if [ "$MODE" = peer ]; then
    run 0 convert "$G" -o "$T/f16.gguf" --type f16 -q || finish
    if "$PEER" -v info "$T/f16.gguf" > "$T/info" 2> "$T/info.err"; then
        arch=$(awk '$1=="arch"{print $2}' "$T/info")
        nv=$(awk '$1=="n_vocab"{print $2}' "$T/info")
        [ "$arch" = gpt-oss ] || fail "llama.cpp reads arch '$arch', want gpt-oss"
        [ "$nv" = 201088 ] || fail "llama.cpp reads n_vocab $nv, want 201088"
        grep -qiE 'pre-tokenizer|GENERATION QUALITY' "$T/info.err" &&
            fail "llama.cpp warns about the pre-tokenizer: $(grep -iE 'pre-tokenizer|GENERATION QUALITY' "$T/info.err" | head -n 2)"
    else
        fail "llama.cpp cannot load the f16 conversion: $(grep -v '^llama_model_loader: - ' "$T/info.err" | tail -n 3)"
    fi
    presets="MXFP4_MOE Q4_K_M Q6_K Q2_K"
    [ "${MW_GPTOSS_PRESETS:-}" = all ] &&
        presets="MXFP4_MOE Q8_0 Q6_K Q5_K_M Q5_K_S Q4_K_M Q4_K_S Q4_0 Q3_K_L Q3_K_M Q3_K_S Q2_K Q5_1
                 Q5_0 Q4_1 IQ4_NL IQ4_XS IQ3_M IQ3_S IQ3_XS IQ3_XXS Q2_K_S IQ2_M IQ2_S IQ2_XS IQ2_XXS
                 IQ1_M IQ1_S"
    for q in $presets; do
        rq=(--allow-requantize)
        [ $q = MXFP4_MOE ] && rq=() # the experts are copied: nothing to requantize
        "$PEER" quantize "$T/f16.gguf" "$T/p-$q.gguf" $q "${rq[@]}" > "$T/pq.log" 2>&1 ||
            { fail "llama-peer quantize $q: $(tail -n 2 "$T/pq.log")"; continue; }
        run 0 quant "$T/f16.gguf" -o "$T/m-$q.gguf" --preset $q "${rq[@]}" -q || continue
        mwgguf cmp "$T/m-$q.gguf" "$T/p-$q.gguf" --label "$q" > "$T/cmp" 2>&1 ||
            fail "$q differs from llama-quantize's: $(tail -n 4 "$T/cmp")"
        echo "  $q: $(tail -n 1 "$T/cmp")"
        rm -f "$T/m-$q.gguf" "$T/p-$q.gguf"
    done
    # without --allow-requantize both refuse the MXFP4 experts
    "$PEER" quantize "$T/f16.gguf" "$T/p-no.gguf" Q4_K_M > "$T/pq.log" 2>&1 &&
        fail "llama-peer quantize Q4_K_M without --allow-requantize succeeded"
    grep -q "requantizing from type mxfp4 is disabled" "$T/pq.log" ||
        fail "llama-quantize's refusal changed: $(tail -n 2 "$T/pq.log")"
    finish
fi

# --- conversion against llama.cpp's converter ---------------------------------
REF=$FIX/llamacpp_ref
IGN=(--ignore-kv 'memwall.*' --ignore-kv general.name --ignore-kv general.basename
     --ignore-kv general.finetune --ignore-kv general.size_label)
for t in ${MW_FAMILIES_TYPES:-f16 bf16 q8_0}; do
    run 0 convert "$G" -o "$T/$t.gguf" --type $t -q || continue
    mwgguf digest-cmp "$REF/gptoss-$t.json" "$T/$t.gguf" "${IGN[@]}" > "$T/cmp" ||
        fail "gptoss $t differs from llama.cpp: $(head -n 8 "$T/cmp")"
done
[ -f "$T/f16.gguf" ] && {
    mwgguf shapes "$T/f16.gguf" blk.0.ffn_gate_exps.weight=64x64x8 blk.0.ffn_up_exps.weight=64x64x8 \
        blk.0.ffn_down_exps.weight=64x64x8 blk.0.ffn_gate_exps.bias=64x8 blk.0.attn_sinks.weight=4 \
        > "$T/shp" 2>&1 || fail "f16: shapes: $(tr '\n' ' ' < "$T/shp")"
    [ "$(mwgguf kv "$T/f16.gguf" memwall.source_dtype)" = BF16+MXFP4 ] ||
        fail "memwall.source_dtype is not BF16+MXFP4"
}

# inspect names the MXFP4 layout and YaRN
run 0 inspect "$G" && {
    has "$out" "quantization: mxfp4, E2M1 pairs in *_blocks with U8 (E8M0) *_scales" inspect
    has "$out" "rope_scaling yarn" inspect
}

# --- bad input: exit 1 naming the tensor / JSON path, no output ----------------
# bad NAME EXPECT... : convert $T/bad (prepared by the caller), want exit 1,
# no output file, stderr holding each EXPECT
bad() {
    local name=$1
    shift
    run 1 convert "$T/bad" -o "$T/bad-$name.gguf" || return
    [ -e "$T/bad-$name.gguf" ] && fail "$name: an output file was written"
    for want in "$@"; do has "$err" "$want" "$name"; done
}
fresh() { rm -rf "$T/bad" && cp -r "$G" "$T/bad"; }
edit() { python3 "$FIX/hf_edit.py" "$T/bad" "$@" || fail "hf_edit.py $*"; }
fresh; edit reshape $L.0.mlp.experts.down_proj_scales 8,128
bad scale-shape "$L.0.mlp.experts.down_proj_scales" "shape [8, 128]" "one E8M0 scale per block of 32"
fresh; edit reshape $L.1.mlp.experts.gate_up_proj_blocks 8,128,1,32
bad blocks-cover "$L.1.mlp.experts.gate_up_proj_blocks" "do not cover the weight's columns"
fresh; edit poke $L.2.mlp.experts.gate_up_proj_scales 5 255
bad scale-nan "$L.2.mlp.experts.gate_up_proj_scales" "element 5 is 0xFF (E8M0 NaN)"
fresh
python3 "$FIX/hf_rewrite.py" "$G/model.safetensors" "$T/bad/model.safetensors" drop \
    $L.3.mlp.experts.down_proj_scales || fail "hf_rewrite.py drop"
bad scale-missing "$L.3.mlp.experts.down_proj_scales" "missing"
fresh; edit config quantization_config null
bad no-quant-config "$L.0.mlp.experts.down_proj_blocks" "no quantization_config"
fresh; edit config swiglu_limit 5.0
bad swiglu "swiglu_limit" "clamps at 7.0"
fresh; edit config layer_types '["full_attention", "sliding_attention", "full_attention", "sliding_attention"]'
bad layer-types "layer_types[0]" "expected 'sliding_attention'"
fresh; edit config experts_per_token 2
bad experts-per-token "experts_per_token" "contradicts num_experts_per_tok 4"
fresh; edit config rope_scaling.rope_type '"linear"'
bad rope-type "rope_scaling.rope_type" "not supported for gpt-oss (yarn)"
fresh; edit config tie_word_embeddings true
bad tied "tie_word_embeddings" "needs its own output"
rm -rf "$T/bad"

# --- quant: MXFP4_MOE from the directory; the refusal without --allow-requantize
if [ -f "$T/f16.gguf" ]; then
    run 0 quant "$G" -o "$T/hq.gguf" --preset MXFP4_MOE -q &&
        run 0 quant "$T/f16.gguf" -o "$T/gq.gguf" --preset MXFP4_MOE -q &&
        { mwgguf tensors-cmp "$T/hq.gguf" "$T/gq.gguf" > "$T/qcmp" 2>&1 ||
              fail "MXFP4_MOE from the HF dir differs from MXFP4_MOE of its conversion: $(tail -n 3 "$T/qcmp")"; }
    [ -f "$T/gq.gguf" ] && {
        mwgguf types "$T/gq.gguf" > "$T/types"
        n_mx=$(grep -c ' mxfp4$' "$T/types")
        n_q8=$(grep -c ' q8_0$' "$T/types")
        [ "$n_mx" = 12 ] && [ "$n_q8" = 18 ] ||
            fail "MXFP4_MOE: $n_mx MXFP4 and $n_q8 Q8_0 tensors, want 12 and 18"
        [ "$(mwgguf kv "$T/gq.gguf" general.file_type)" = 38 ] || fail "MXFP4_MOE: file type not 38"
    }
    run 1 quant "$T/f16.gguf" -o "$T/rq.gguf" --preset Q4_K_M &&
        has "$err" "requantizing from type mxfp4 is disabled (--allow-requantize)" "Q4_K_M without --allow-requantize"
    [ -e "$T/rq.gguf" ] && fail "Q4_K_M without --allow-requantize wrote a file"
    run 1 quant "$G" -o "$T/rq.gguf" --preset Q8_0 &&
        has "$err" "ffn_down_exps.weight" "Q8_0 from the HF dir without --allow-requantize"
    run 0 quant "$T/f16.gguf" -o "$T/rq.gguf" --preset Q4_K_M --allow-requantize -q &&
        run 0 verify --deep "$T/rq.gguf"
    # --size keeps the MXFP4 experts as they are without --allow-requantize
    # (a candidate of their own bytes and no loss; with it, beside the other
    # types): the file fits and verifies
    sz=$(( $(wc -c < "$T/gq.gguf") + 200000 ))
    for ar in "" --allow-requantize; do
        run 0 quant "$T/f16.gguf" -o "$T/sz.gguf" --size $sz $ar -q || continue
        [ "$(wc -c < "$T/sz.gguf")" -le $sz ] || fail "--size $sz $ar: $(wc -c < "$T/sz.gguf") bytes"
        n_mx=$(mwgguf types "$T/sz.gguf" | grep -c ' mxfp4$')
        [ "$n_mx" = 12 ] || fail "--size $sz $ar: $n_mx MXFP4 tensors, want the 12 experts kept"
        run 0 verify --deep "$T/sz.gguf"
        rm -f "$T/sz.gguf"
    done
    # plan from config.json alone: the MXFP4_MOE and Q4_K_M rows are the
    # tensor bytes quant writes
    mkdir -p "$T/cfg" && cp "$G/config.json" "$T/cfg/"
    if run 0 plan "$T/cfg/config.json" && [ -f "$T/gq.gguf" ] && [ -f "$T/rq.gguf" ]; then
        for pq in MXFP4_MOE:gq Q4_K_M:rq; do
            want=$(mwgguf active-bytes "$T/${pq#*:}.gguf" 4 | awk '{print $1}')
            got=$(echo "$out" | awk -v p="${pq%:*}" '$1==p && NF==5 {print $5}')
            [ "$got" = "$want" ] || fail "plan ${pq%:*}: $got bytes, quant wrote $want"
        done
    fi
fi

# plan on gpt-oss-20b's and -120b's real config.json: the MXFP4_MOE file
# (the experts as shipped, the rest Q8_0) and the 12/16/24 GiB rows
for m in gpt-oss-20b:12096558336 gpt-oss-120b:63374323968; do
    run 0 plan "$FIX/configs/${m%:*}/config.json" --ctx 4096 || continue
    got=$(echo "$out" | awk '$1=="MXFP4_MOE" && NF==5 {print $5}')
    [ "$got" = "${m#*:}" ] || fail "plan ${m%:*}: MXFP4_MOE ${got:-none} bytes, want ${m#*:}"
    for gb in 12 16 24; do
        echo "$out" | grep -q "^  $gb GiB " || fail "plan ${m%:*}: no $gb GiB row"
    done
    echo "  ${m%:*}: MXFP4_MOE $got bytes; $(echo "$out" | grep '^  24 GiB' | tr -s ' ')"
done
finish
