#!/usr/bin/env bash
# `memwall quant` on Gemma 4 (gemma4) against llama.cpp's own quantizer
# (llama-peer: libllama of node-llama-cpp 3.21.1, llama.cpp 80fb11ac; skipped
# with 77 when tests/peer/setup.sh cannot provide it). Fixtures:
# tests/fixtures/mk_gemma4_gguf.py (random F16 weights in the converter's
# layout with widths of 256, so that the k-quants apply: e2b with per-layer
# embeddings, shared-KV layers and double-wide MLPs; moe with the fused
# ffn_gate_up_exps, its .scale tensors and per-layer kv heads; dense) and the
# header-only tensor tables of the real E2B, E4B, 26B-A4B and 31B
# (tests/fixtures/configs/gemma-4-*/config.json).
#  - type rules: for every preset memwall's per-tensor types equal llama.cpp's
#    own llama_quant_compute_types (tests/peer/llama_quant_types.c) on all
#    seven, and on the real E2B the rules the family needs hold by name:
#    per_layer_token_embd takes the token-embedding rule (tied: the output's,
#    Q6_K under Q4_K_M), per_layer_model_proj stays F16, rope_freqs,
#    layer_output_scale and the .scale tensors F32, inp_gate and proj
#    quantized
#  - files: our file minus its memwall.* KVs is byte-for-byte
#    llama_model_quantize's for the same source (presets below; every preset
#    with MW_GEMMA4_PRESETS=all; those that need one with a synthetic
#    imatrix that covers the experts)
#  - the HF checkpoint of mk_family_fixture.py gemma4e2b (hidden 64: the
#    legacy fallbacks, per_layer_token_embd's row of 80 falls back to F16):
#    Q4_K_M of memwall convert's F16 file byte for byte llama-quantize's;
#    plan's KV at ctx 512 is what memwall-run allocates for that file (a NOTE
#    where the runtime does not run gemma4); quant --corpus on it writes a
#    file that passes verify --deep
#  - --size and --bpw on e2b: within the target, verify --deep passes, what
#    llama-quantize keeps F32/F16 stays so
#  - plan: per_layer_token_embd is file bytes, not resident (e2b's Q4_K_M
#    bytes are quant's tensor data, resident = that minus the table); the KV
#    of only the layers that own a cache, sliding ones capped at the ring, to
#    the byte on e2b and on the real E2B / E4B config.json at 4k and 32k; the
#    4/6/8 GiB phone rows
#  - --fit-ram on e2b: the file minus per_layer_token_embd (kept Q6_K) fits
#    the room plan shows, the file itself is larger; verify --deep passes
source "$(dirname "${BASH_SOURCE[0]}")/quant_common.sh"
have_python || skip "no python3"
need_peer
MK="$MW_SRC/tests/fixtures/mk_gemma4_gguf.py"
CFG="$MW_SRC/tests/fixtures/configs"

for k in e2b moe dense; do
    python3 "$MK" "$k" "$T/$k.gguf" || { fail "mk_gemma4_gguf $k"; finish; }
done
for k in E2B E4B 26B-A4B 31B; do
    python3 "$MK" --config "$CFG/gemma-4-$k/config.json" "$T/h-$k.gguf" --header-only ||
        { fail "mk_gemma4_gguf --config gemma-4-$k"; finish; }
done

# --- type rules against llama_quant_compute_types ---
rules_vs_llama e2b moe dense h-E2B h-E4B h-26B-A4B h-31B

# the rules the family needs, by name, on the real E2B (35 layers, tied)
dry_types "$T/h-E2B.gguf" Q4_K_M > "$T/te2b" 2> /dev/null
want_type() { # FILE NAME TYPE
    awk -v n="$2" -v t="$3" '$1 == n && $2 == t { f = 1 } END { exit !f }' "$1" ||
        fail "$(basename "$1") Q4_K_M: $2 is not $3: $(awk -v n="$2" '$1 == n' "$1")"
}
want_type "$T/te2b" per_layer_token_embd.weight q6_K
want_type "$T/te2b" token_embd.weight q6_K
want_type "$T/te2b" per_layer_model_proj.weight f16
want_type "$T/te2b" per_layer_proj_norm.weight f32
want_type "$T/te2b" rope_freqs.weight f32
want_type "$T/te2b" blk.0.layer_output_scale.weight f32
want_type "$T/te2b" blk.0.inp_gate.weight q4_K
want_type "$T/te2b" blk.0.proj.weight q4_K
want_type "$T/te2b" blk.34.ffn_up.weight q4_K
# the MoE: the fused gate+up is an ffn_gate (no ffn_up rule), the .scale tensors F32
dry_types "$T/moe.gguf" Q3_K_L > "$T/tmoe" 2> /dev/null
want_type "$T/tmoe" blk.0.ffn_gate_up_exps.weight q3_K
want_type "$T/tmoe" blk.0.ffn_down_exps.weight q5_K
want_type "$T/tmoe" blk.0.ffn_down_exps.scale f32
want_type "$T/tmoe" blk.0.ffn_gate_inp.scale f32
want_type "$T/tmoe" blk.0.ffn_gate_inp.weight f32

# --- files: byte identity with llama_model_quantize ---
NEEDS_IM="Q2_K_S IQ3_XXS IQ3_XS IQ2_M IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S"
if [ "${MW_GEMMA4_PRESETS:-}" = all ]; then
    declare -A LIST=([e2b]="$ALL_PRESETS" [moe]="$ALL_PRESETS" [dense]="$ALL_PRESETS")
else
    declare -A LIST=([e2b]="Q4_K_M Q6_K IQ4_XS Q2_K_S" [moe]="Q4_K_M Q3_K_S" [dense]="Q5_K_M")
fi
n_ok=0
n_all=0
for m in e2b moe dense; do
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

# --- the HF checkpoint (mk_family_fixture.py gemma4e2b; skipped without its
# tokenizer files): Q4_K_M of memwall convert's F16 file is llama_model_quantize's ---
TOKDIR=$(bash "$MW_SRC/tests/fixtures/fetch_tokenizers.sh" 2> "$T/fetch.log" | tail -n 1)
python3 "$MW_SRC/tests/fixtures/mk_family_fixture.py" gemma4e2b "$T/hf" ${TOKDIR:+--tok-dir "$TOKDIR"} \
    > "$T/mk.log" 2>&1
mrc=$?
if [ $mrc -eq 77 ]; then
    echo "gemma4e2b: no tokenizer files, HF checkpoint not quantized"
elif [ $mrc -ne 0 ]; then
    fail "mk_family_fixture.py gemma4e2b: exit $mrc: $(tail -n 2 "$T/mk.log")"
elif run 0 convert "$T/hf" -o "$T/c.gguf" --type f16 -q &&
        run 0 quant "$T/c.gguf" -o "$T/a.gguf" --preset Q4_K_M -t 2 -q; then
    if "$PEER" --threads 2 quantize "$T/c.gguf" "$T/b.gguf" Q4_K_M > /dev/null 2> "$T/lq.err"; then
        c=$(mwgguf cmp "$T/a.gguf" "$T/b.gguf") && echo "gemma4e2b HF checkpoint: Q4_K_M as llama-quantize's ($c)" ||
            fail "gemma4e2b converted, Q4_K_M: $c"
        want_type_f() { mwgguf types "$T/a.gguf" | awk -v n="$1" -v t="$2" '$1 == n && $2 == t { f = 1 } END { exit !f }' ||
            fail "gemma4e2b Q4_K_M: $1 is not $2"; }
        want_type_f per_layer_token_embd.weight f16
        want_type_f per_layer_model_proj.weight f16
        # plan's KV is what memwall-run allocates (ctx 512, its default batch)
        run 0 plan "$T/c.gguf" --ctx 512
        kvp=$(echo "$out" | sed -n 's/.* \([0-9]*\) bytes in f16 at ctx 512$/\1/p')
        "$MW_BIN/memwall-run" -m "$T/c.gguf" -c 512 -p "Hello world" -n 1 -t 2 < /dev/null \
            > /dev/null 2> "$T/run.err"
        rrc=$?
        kvr=$(sed -n 's/.*KV cache \([0-9.]*\) MiB (f16, 512 positions).*/\1/p' "$T/run.err")
        if [ $rrc -ne 0 ] && grep -q "architecture 'gemma4'" "$T/run.err"; then
            echo "NOTE: memwall-run does not run gemma4 in this build: plan's KV not compared with its allocation"
        elif [ $rrc -ne 0 ] || [ -z "$kvr" ] || [ -z "$kvp" ]; then
            fail "memwall-run / plan on the converted gemma4e2b: exit $rrc, KV '${kvr:-?}' MiB, plan '${kvp:-?}': $(tail -n 2 "$T/run.err")"
        else
            want=$(awk -v b="$kvp" 'BEGIN { printf "%.2f", b / 1048576 }')
            [ "$kvr" = "$want" ] || fail "plan's KV at ctx 512 ($kvp bytes, $want MiB) is not memwall-run's ($kvr MiB)"
            echo "gemma4e2b at ctx 512: plan's KV $kvp bytes = memwall-run's allocation ($kvr MiB)"
        fi
        # quant --corpus calibrates through gemma4 (tests/e2e/calib_gemma4.sh has the rest)
        printf 'The quick brown fox jumps over the lazy dog.\n' > "$T/corpus.txt"
        run 0 quant "$T/c.gguf" -o "$T/k.gguf" --preset Q4_K_M --corpus "$T/corpus.txt" \
            --samples 1 --seq-len 8 -q && run 0 verify --deep "$T/k.gguf"
    else
        fail "llama-peer quantize gemma4e2b (converted): $(tail -n 2 "$T/lq.err")"
    fi
fi
rm -rf "${T:?}/hf" "$T/c.gguf"

# --- --size, --bpw (k-quants: the i-quants' candidates cost more to measure) ---
e2b_f16=$(stat -c %s "$T/e2b.gguf")
run 0 quant "$T/e2b.gguf" -o "$T/s.gguf" --size 5M --no-iquants -t 2 -q &&
    run 0 verify "$T/s.gguf" --deep || fail "--size 5M on e2b"
sz=$(stat -c %s "$T/s.gguf" 2> /dev/null || echo 0)
[ "$sz" -le 5242880 ] && [ "$sz" -gt 4700000 ] || fail "--size 5M on e2b: the file has $sz bytes"
run 0 quant "$T/e2b.gguf" -o "$T/b3.gguf" --bpw 3.5 --no-iquants -t 2 -q &&
    run 0 verify "$T/b3.gguf" --deep || fail "--bpw 3.5 on e2b"
for f in s b3; do
    mwgguf types "$T/$f.gguf" |
        awk '($1 ~ /_norm|rope_freqs|layer_output_scale|\.scale$/ && $2 != "f32") ||
             ($1 == "per_layer_model_proj.weight" && $2 != "f16") { bad = bad " " $1 }
             END { if (bad) { print bad; exit 1 } }' \
        > "$T/bad" || fail "$f: a budget quantized what llama-quantize keeps:$(cat "$T/bad")"
done
echo "--size 5M on e2b ($e2b_f16 bytes in F16): $sz bytes; --bpw 3.5: $(stat -c %s "$T/b3.gguf") bytes"

# --- plan: per_layer_token_embd is file bytes, not resident; its Q4_K_M bytes
# are the tensor data quant writes, resident = that minus the table ---
run 0 plan "$T/e2b.gguf" --ctx 512 && cp "$T/out" "$T/plan"
run 0 quant "$T/e2b.gguf" -o "$T/q4.gguf" --preset Q4_K_M -t 2 -q
mwgguf drop "$T/q4.gguf" "$T/q4-nople.gguf" per_layer_token_embd > /dev/null
read -r w_tot _ <<< "$(mwgguf active-bytes "$T/q4.gguf" 2)"
read -r w_res _ <<< "$(mwgguf active-bytes "$T/q4-nople.gguf" 2)"
awk -v t="$w_tot" '$1 == "Q4_K_M" && $NF == t { f = 1 } END { exit !f }' "$T/plan" ||
    fail "plan: e2b's Q4_K_M is not $w_tot bytes: $(grep -m1 '^ *Q4_K_M' "$T/plan")"
grep -q "^  Q4_K_M .* resident $w_res\$" "$T/plan" ||
    fail "plan: e2b's Q4_K_M resident is not $w_res bytes (the file's $w_tot minus per_layer_token_embd)"
# e2b owns K/V in layers 0-2 (3, 4 shared): sliding 0, 1 keep min(512, 16 - 1 + 64) = 79
# rows, full 2 keeps 512, each row the widest layer's 1 x 512 (the runtime's
# one-width cache); K and V in f16
kv_e2b=$(( 2 * 2 * (2 * 79 + 512) * 512 ))
has "$(cat "$T/plan")" "3 of 5 layers own a cache (2 shared-KV layers none)" "plan e2b"
has "$(cat "$T/plan")" "$kv_e2b bytes in f16 at ctx 512" "plan e2b's KV"

# the real E2B and E4B from their config.json alone: KV of the layers that own a
# cache (E2B: 15 of 35, 12 sliding at min(ctx, 575) rows, 3 full; rows of 1 x 512;
# E4B: 24 of 42, 20 sliding, 4 full; rows of 2 x 512), the resident set at 4k and
# 32k, the 4/6/8 GiB phones
for c in "E2B 15 35 12 1 3" "E4B 24 42 20 2 4"; do
    read -r name own nl nsw kvh nfull <<< "$c"
    for ctx in 4096 32768; do
        run 0 plan "$CFG/gemma-4-$name" --ctx $ctx || continue
        want=$(( 2 * 2 * (nsw * 575 + nfull * ctx) * kvh * 512 ))
        has "$out" "$own of $nl layers own a cache" "plan $name"
        has "$out" "$want bytes in f16 at ctx $ctx" "plan $name's KV at ctx $ctx"
        for d in "4 GiB" "6 GiB" "8 GiB"; do
            echo "$out" | grep -q "^  $d " || fail "plan $name: no $d phone row"
        done
        echo "$out" | grep -q "^  Q4_K_M .* resident [0-9]*\$" || fail "plan $name: no resident Q4_K_M row"
    done
    echo "plan $name: $(echo "$out" | sed -n '/^weights/,/^$/p' | awk '$1 == "Q4_K_M" { print $NF " bytes of file at Q4_K_M" }')," \
        "$(echo "$out" | awk '$1 == "Q4_K_M" && $NF ~ /^[0-9]+$/ && $(NF-1) == "resident" { print $NF " resident" }')"
done

# --- --fit-ram budgets resident bytes: the room plan shows at 110M, ctx 512
# (~3.1 MiB) holds the file minus per_layer_token_embd, which keeps Q6_K ---
run 0 quant "$T/e2b.gguf" -o "$T/f.gguf" --fit-ram 110M --ctx 512 --no-iquants -t 2
room=$(echo "$err" | sed -n 's/.*overhead [0-9]* = \([0-9]*\) bytes for the file.*/\1/p' | head -n 1)
run 0 verify "$T/f.gguf" --deep || fail "--fit-ram 110M on e2b"
mwgguf drop "$T/f.gguf" "$T/f-nople.gguf" per_layer_token_embd > /dev/null
fz=$(stat -c %s "$T/f.gguf" 2> /dev/null || echo 0)
fr=$(stat -c %s "$T/f-nople.gguf" 2> /dev/null || echo 0)
[ -n "$room" ] && [ "$fr" -le "$room" ] && [ "$fr" -gt $((room * 9 / 10)) ] ||
    fail "--fit-ram 110M: resident file part $fr bytes for a room of '$room'"
[ "$fz" -gt "$room" ] || fail "--fit-ram 110M: the file ($fz) is not larger than the room ($room)"
mwgguf types "$T/f.gguf" | grep -qx "per_layer_token_embd.weight q6_K" ||
    fail "--fit-ram: per_layer_token_embd is not q6_K"
run 0 plan "$T/e2b.gguf" --ram 110M --ctx 512
has "$out" "$(awk -v b="$room" 'BEGIN { printf "%.1f MiB", b / 1048576 }')" "plan's room for the weights at 110M"
echo "--fit-ram 110M --ctx 512 on e2b: file $fz bytes, $fr without per_layer_token_embd (room $room)"
finish
