#!/usr/bin/env bash
# `memwall quant` on the gated-delta-net families (qwen35, qwen35moe,
# qwen3next) against llama.cpp's own quantizer (llama-peer: libllama of
# node-llama-cpp 3.21.1, llama.cpp 80fb11ac; skipped with 77 when
# tests/peer/setup.sh cannot provide it). Fixtures: tests/fixtures/mk_qwen35_gguf.py
# (random F16 weights in the converter's layout: 3 gated delta net layers and
# a full-attention layer, key heads 2 != value heads 4, the MTP block as
# blk.4 with block_count 5; qwen35 tied, qwen35moe 8 experts, qwen3next 4
# experts with the fused ssm_ba) and the header-only tensor tables of the
# real Qwen3.5 0.8B, 4B, 9B, 27B and 35B-A3B.
#  - type rules: for every preset memwall's per-tensor types equal llama.cpp's
#    own llama_quant_compute_types (tests/peer/llama_quant_types.c) on all
#    eight, and on the 0.8B the rules the families need hold by name:
#    attn_qkv counts as attn_v (Q6_K on use_more_bits layers under Q4_K_M,
#    the count taking the MTP block's attn_v as the last of 25), ssm_conv1d,
#    ssm_a, ssm_dt.bias and the norms stay F32, the MTP block is quantized
#  - files: our file minus its memwall.* KVs is byte-for-byte
#    llama_model_quantize's for the same source (presets below; every preset
#    with MW_QWEN35_PRESETS=all; the i-quants that need one with a synthetic
#    imatrix that covers the experts)
#  - plan's Q4_K_M bytes on qwen35moe = the tensor data quant writes
#  - the HF checkpoints of mk_family_fixture.py: Q4_K_M of memwall convert's
#    F16 file byte for byte llama-quantize's; quant from the directory, the
#    same tensors
#  - --size on qwen35, --fit-ram on qwen35moe (the room plan shows), --bpw on
#    qwen3next: within the target, verify --deep passes, what llama-quantize
#    keeps F32 stays F32
source "$(dirname "${BASH_SOURCE[0]}")/quant_common.sh"
have_python || skip "no python3"
need_peer
MK="$MW_SRC/tests/fixtures/mk_qwen35_gguf.py"

for k in qwen35 qwen35moe qwen3next; do
    python3 "$MK" "$k" "$T/$k.gguf" || { fail "mk_qwen35_gguf $k"; finish; }
done
for k in 0.8b 4b 9b 27b 35b-a3b; do
    python3 "$MK" "$k" "$T/h-$k.gguf" --header-only || { fail "mk_qwen35_gguf $k"; finish; }
done

# --- type rules against llama_quant_compute_types ---
rules_vs_llama qwen35 qwen35moe qwen3next h-0.8b h-4b h-9b h-27b h-35b-a3b

# the rules the families need, by name, on the real 0.8B (24 layers + the MTP block)
dry_types "$T/h-0.8b.gguf" Q4_K_M > "$T/t08" 2> /dev/null
want_type() { # NAME TYPE
    awk -v n="$1" -v t="$2" '$1 == n && $2 == t { f = 1 } END { exit !f }' "$T/t08" ||
        fail "0.8B Q4_K_M: $1 is not $2: $(awk -v n="$1" '$1 == n' "$T/t08")"
}
# attn_v-like count: 18 attn_qkv + 6 attn_v + the MTP's attn_v = 25; use_more_bits(i, 25):
# i < 3, i >= 21 or (i - 3) % 3 == 2: blk.0-2 (counts 0-2), blk.5 (5), the MTP's attn_v (24)
want_type blk.0.attn_qkv.weight q6_K
want_type blk.4.attn_qkv.weight q4_K
want_type blk.5.attn_qkv.weight q6_K
want_type blk.24.attn_v.weight q6_K
want_type blk.24.nextn.eh_proj.weight q4_K
want_type blk.24.attn_q.weight q4_K
want_type blk.24.ffn_down.weight q6_K
want_type token_embd.weight q6_K
for n in ssm_conv1d.weight ssm_a ssm_dt.bias ssm_norm.weight attn_norm.weight; do
    want_type "blk.0.$n" f32
done
want_type blk.0.ssm_alpha.weight q4_K
want_type blk.0.ssm_beta.weight q4_K
want_type blk.0.attn_gate.weight q4_K
want_type blk.0.ssm_out.weight q4_K
want_type blk.24.nextn.enorm.weight f32

# --- files: byte identity with llama_model_quantize ---
NEEDS_IM="Q2_K_S IQ3_XXS IQ3_XS IQ2_M IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S"
if [ "${MW_QWEN35_PRESETS:-}" = all ]; then
    declare -A LIST=([qwen35]="$ALL_PRESETS" [qwen35moe]="$ALL_PRESETS" [qwen3next]="$ALL_PRESETS")
else
    # (llama.cpp's IQ1_M takes 12 s of CPU on qwen3next: in the full run only)
    declare -A LIST=([qwen35]="Q4_K_M IQ4_XS IQ2_XXS" [qwen35moe]="Q4_K_M Q3_K_S"
                     [qwen3next]="Q5_K_M Q2_K_S")
fi
n_ok=0
n_all=0
for m in qwen35 qwen35moe qwen3next; do
    mwgguf imatrix-synth "$T/$m.gguf" "$T/$m.imatrix" 11 || { fail "imatrix-synth $m"; continue; }
    for p in ${LIST[$m]}; do
        n_all=$((n_all + 1))
        im=()
        [[ " $NEEDS_IM " == *" $p "* ]] && im=(--imatrix "$T/$m.imatrix")
        run 0 quant "$T/$m.gguf" -o "$T/a.gguf" --preset "$p" -t 2 -q "${im[@]}" || continue
        "$PEER" --threads 2 quantize "$T/$m.gguf" "$T/b.gguf" "$p" "${im[@]}" > /dev/null 2> "$T/lq.err" ||
            { fail "llama-peer quantize $m $p: $(tail -n 2 "$T/lq.err")"; continue; }
        c=$(mwgguf cmp "$T/a.gguf" "$T/b.gguf") || { fail "$m $p: $c"; continue; }
        n_ok=$((n_ok + 1))
    done
done
echo "files: $n_ok of $n_all byte-identical to llama_model_quantize's (minus memwall.* KVs)"

# --- plan: its Q4_K_M bytes (the MTP block in them) are the tensors quant writes
# (unpadded), and a token reads all but the experts not routed and the MTP block ---
run 0 plan "$T/qwen35moe.gguf" && cp "$T/out" "$T/plan"
run 0 quant "$T/qwen35moe.gguf" -o "$T/q4.gguf" --preset Q4_K_M -t 2 -q
read -r w_tot w_act <<< "$(mwgguf active-bytes "$T/q4.gguf" 2)"
mwgguf cut-layers "$T/q4.gguf" "$T/q4-nomtp.gguf" 4 > /dev/null
read -r _ w_run <<< "$(mwgguf active-bytes "$T/q4-nomtp.gguf" 2)"
awk -v t="$w_tot" '$1 == "Q4_K_M" && $NF == t { f = 1 } END { exit !f }' "$T/plan" ||
    fail "plan: qwen35moe's Q4_K_M is not $w_tot bytes: $(grep -m1 '^ *Q4_K_M' "$T/plan")"
plan_act=$(sed -n '/^decode/,/^$/p' "$T/plan" | awk '$1 == "Q4_K_M" { print $4 }')
[ "${plan_act:-}" = "$w_run" ] && [ "$w_run" -lt "$w_act" ] ||
    fail "plan: a token's Q4_K_M bytes ${plan_act:-?}, want $w_run (without the MTP block; with it $w_act)"

# --- from Hugging Face checkpoints (mk_family_fixture.py: 8 layers, key heads 2 !=
# value heads 6, experts; skipped without their tokenizer files): Q4_K_M of
# memwall convert's F16 file is llama_model_quantize's, and quant straight from
# the directory writes the same tensors (qwen35moe; all three in the full run:
# each checkpoint costs ~3.5 s of CPU, most of it its 151936-row embedding) ---
HF_KINDS=qwen35moe
[ "${MW_QWEN35_PRESETS:-}" = all ] && HF_KINDS="qwen35 qwen35moe qwen3next"
for k in $HF_KINDS; do
    python3 "$MW_SRC/tests/fixtures/mk_family_fixture.py" "$k" "$T/hf-$k" > "$T/mk.log" 2>&1
    mrc=$?
    [ $mrc -eq 77 ] && { echo "$k: no tokenizer files, HF checkpoint not quantized"; continue; }
    [ $mrc -eq 0 ] || { fail "mk_family_fixture.py $k: exit $mrc: $(tail -n 2 "$T/mk.log")"; continue; }
    run 0 convert "$T/hf-$k" -o "$T/c.gguf" --type f16 -q &&
        run 0 quant "$T/c.gguf" -o "$T/a.gguf" --preset Q4_K_M -t 2 -q &&
        run 0 quant "$T/hf-$k" -o "$T/h.gguf" --preset Q4_K_M -t 2 -q || continue
    "$PEER" --threads 2 quantize "$T/c.gguf" "$T/b.gguf" Q4_K_M > /dev/null 2> "$T/lq.err" ||
        { fail "llama-peer quantize $k (converted): $(tail -n 2 "$T/lq.err")"; continue; }
    c=$(mwgguf cmp "$T/a.gguf" "$T/b.gguf") || fail "$k converted, Q4_K_M: $c"
    c=$(mwgguf tensors-cmp "$T/h.gguf" "$T/b.gguf") || fail "$k from the HF directory, Q4_K_M: $c"
    echo "$k HF checkpoint: Q4_K_M as llama-quantize's ($c)"
    rm -rf "${T:?}/hf-$k"
done

# --- --size, --fit-ram, --bpw (k-quants: the i-quants' candidates cost more to measure) ---
run 0 quant "$T/qwen35.gguf" -o "$T/s.gguf" --size 1.5M --no-iquants -t 2 -q &&
    run 0 verify "$T/s.gguf" --deep || fail "--size 1.5M on qwen35"
sz=$(stat -c %s "$T/s.gguf" 2> /dev/null || echo 0)
[ "$sz" -le 1572864 ] && [ "$sz" -gt 1450000 ] || fail "--size 1.5M on qwen35: the file has $sz bytes"
# --fit-ram: the runtime's memory at ctx 512 (the MoE's 3 recurrent layers' state
# and 1 full-attention layer's KV, scratch, the 64 MiB base) leaves about 5 MiB
run 0 quant "$T/qwen35moe.gguf" -o "$T/f.gguf" --fit-ram 110M --ctx 512 --no-iquants -t 2
fb=$(echo "$err" | sed -n 's/.*fit-ram=[0-9]*,ctx=512,kv=f16,file=\([0-9]*\).*/\1/p' | head -n 1)
run 0 verify "$T/f.gguf" --deep || fail "--fit-ram 110M on qwen35moe"
fz=$(stat -c %s "$T/f.gguf" 2> /dev/null || echo 0)
[ -n "$fb" ] && [ "$fz" -le "$fb" ] && [ "$fz" -gt $((fb * 9 / 10)) ] ||
    fail "--fit-ram 110M: file $fz bytes for a budget of '$fb'"
run 0 plan "$T/qwen35moe.gguf" --ram 110M --ctx 512
has "$out" "$(awk -v b="$fb" 'BEGIN { printf "%.1f MiB", b / 1048576 }')" "plan's room for the weights at 110M"
run 0 quant "$T/qwen3next.gguf" -o "$T/b3.gguf" --bpw 3.5 --no-iquants -t 2 -q &&
    run 0 verify "$T/b3.gguf" --deep || fail "--bpw 3.5 on qwen3next"
for f in s f b3; do
    mwgguf types "$T/$f.gguf" |
        awk '$1 ~ /ssm_conv1d|ssm_a$|ssm_dt|_norm|ffn_gate_inp/ && $2 != "f32" { bad = bad " " $1 } END { if (bad) { print bad; exit 1 } }' \
        > "$T/bad" || fail "$f: a budget quantized what llama-quantize keeps F32:$(cat "$T/bad")"
done
echo "--size 1.5M on qwen35: $sz bytes; --fit-ram 110M --ctx 512 on qwen35moe: $fz of $fb bytes;" \
    "--bpw 3.5 on qwen3next: $(stat -c %s "$T/b3.gguf") bytes"
finish
