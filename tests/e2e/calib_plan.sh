#!/usr/bin/env bash
# memwall plan: usage errors; tables for an HF dir and a GGUF file; preset
# sizes equal the tensor data memwall quant writes; the KV column follows
# 2 * n_layer * n_ctx * n_head_kv * head_dim * bytes.
# A config.json alone (weights not needed): the same tables as the
# checkpoint's (tinyllama; the qwen35, qwen35moe, qwen3next HF fixtures of
# mk_family_fixture.py when their tokenizer files are at hand); the real
# Qwen3.5 0.8B, 4B, 9B, 27B, 35B-A3B (tests/fixtures/configs: 0.8B's values
# are its config.json; 9B, 27B, 35B-A3B's sizes and head counts are those of
# shared/docs/families-2026.md 1a, with 0.8B's keys otherwise; 4B's linear
# heads 16/32, ffn 9216 and tied embeddings, and the other three untied, are
# not in that table) at 4k and
# 32k: the full-attention layers' KV plus the recurrent state (exact bytes:
# check_quant_plan), and what fits 8/12/16 GiB.
. "$(dirname "$0")/calib_common.sh"
[ -d "$TINY" ] || { skip "no $TINY"; }
run 2 plan && has "$err" "missing MODEL" "no args"
run 2 plan "$TINY" --ram lots && has "$err" "--ram" "bad ram"
run 2 plan "$TINY" --kv q4 && has "$err" "--kv" "bad kv"
run 2 plan "$TINY" --ctx 0
run 1 plan "$T/nope"
run 0 plan "$TINY" && has "$out" "Q4_K_M" "presets" && has "$out" "16 GiB" "tiers" &&
    has "$out" "KV cache" "kv table"
# tinyllama: 2 * 8 layers * 4096 * 4 kv heads * 32 * 2 bytes = 16 MiB
has "$out" "    4096     16.0 MiB      8.5 MiB" "kv 4096"
run 0 plan "$TINY_GGUF" --ram 1G --ctx 512 --kv q8_0
has "$out" "1 GiB" "one tier"
[ "$(echo "$out" | grep -c 'GiB  ')" -ge 1 ] || fail "no fit row"
has "$out" "16794624  (this file, tensor data)" "file row"
# Q4_K_M: plan's bytes = the tensor data of memwall quant's Q4_K_M
plan_q4=$(echo "$out" | awk '$1 == "Q4_K_M" { print $NF; exit }')
run 0 quant "$TINY_GGUF" -o "$T/q4.gguf" --preset Q4_K_M -q
run 0 inspect "$T/q4.gguf"
start=$(echo "$out" | sed -n 's/.*data start \([0-9]*\).*/\1/p')
end=$(echo "$out" | sed -n 's/.*data end \([0-9]*\).*/\1/p')
[ -n "$start" ] && [ "$plan_q4" = "$((end - start))" ] ||
    fail "plan Q4_K_M bytes $plan_q4, memwall quant wrote $((end - start))"

# --- config.json alone: the tensor table its conversion has ---
same_plan() { # DIR [kv]: plan DIR and plan DIR/config.json print the same tables
    # (kv: the KV tables only; qwen3next's config does not say that the
    # checkpoint has an MTP block, its mtp.* tensors do)
    local sel='NR > 1 && !/^ *\(config.json alone/'
    [ "${2:-}" = kv ] && sel='/^KV cache/ { f = 1 } /^runtime at/ { f = 0 } f'
    run 0 plan "$1" && echo "$out" | awk "$sel" | sed 's/; the MTP block.*//' > "$T/p-dir" &&
        run 0 plan "$1/config.json" && echo "$out" | awk "$sel" | sed 's/; the MTP block.*//' > "$T/p-cfg" ||
        { fail "plan $1"; return; }
    cmp -s "$T/p-dir" "$T/p-cfg" ||
        { fail "$(basename "$1"): config.json alone plans otherwise:"; diff "$T/p-dir" "$T/p-cfg" | head -n 6; }
}
same_plan "$TINY"
if have_python; then
    for k in qwen35 qwen35moe qwen3next; do
        python3 "$MW_SRC/tests/fixtures/mk_family_fixture.py" "$k" "$T/$k" > "$T/mk.log" 2>&1
        mrc=$?
        [ $mrc -eq 77 ] && { echo "$k: no tokenizer files, config-only table not compared"; continue; }
        [ $mrc -eq 0 ] || { fail "mk_family_fixture.py $k: exit $mrc: $(tail -n 2 "$T/mk.log")"; continue; }
        if [ $k = qwen3next ]; then same_plan "$T/$k" kv; else same_plan "$T/$k"; fi
        rm -rf "${T:?}/$k"
    done
fi
# the real Qwen3.5 shapes; 0.8B at 4k: 6 full-attention layers * 2 * 4096 * 2 kv
# heads * 256 * 2 B = 48 MiB, + 18 delta net layers * (3 * 6144 + 128 * 128 * 16)
# * 4 B = 19.27 MiB
for m in 0.8b 4b 9b 27b 35b-a3b; do
    for ctx in 4096 32768; do
        run 0 plan "$MW_SRC/tests/fixtures/configs/qwen3.5-$m" --ctx "$ctx" || continue
        echo "$out" | grep -q "gated delta net layers keep a fixed f32 state" || fail "$m: no state layout"
        for r in 8 12 16; do
            echo "$out" | grep -q "^  $r GiB " || fail "$m ctx $ctx: no $r GiB row"
        done
        printf 'qwen3.5-%-7s ctx %5d: %s; best 8/12/16 GiB: %s\n' "$m" "$ctx" \
            "$(echo "$out" | sed -n 's/^runtime at ctx [0-9]*, f16 KV, [0-9]* threads: \(KV [^,]*\),.*/\1/p')" \
            "$(echo "$out" | awk '/^  (8|12|16) GiB / { printf "%s%s (%s bpw)", n++ ? ", " : "", $8, $7 }')"
    done
done
run 0 plan "$MW_SRC/tests/fixtures/configs/qwen3.5-0.8b/config.json"
has "$out" "runtime at ctx 4096, f16 KV, 4 threads: KV 67.3 MiB" "0.8B KV at 4k"

# --- calibration's own plan (calib_plan.c) on a gated delta net: under
# --max-memory 40M the peak RSS stays within 40 MiB of a one-sample run's
# (the conv rows, the gated q rows and the per-thread state counted; without
# them this model took 49 MiB). Native release builds only (RSS). ---
MK="$MW_BIN/../tests/rt_mkmodel"
CAL="$MW_DATASETS/corpora/calib.txt"
[ -f "$CAL" ] || CAL="$MW_SHARED/corpora/calib.txt"
if [ -x "$MK" ] && [ -z "${MW_EMU:-}" ] && [ -f "$CAL" ] && ! grep -q __asan_init "$MEMWALL"; then
    "$MK" model "$T/q35.gguf" --arch qwen35 --gpt2 --layers 4 --embd 256 --ff 512 \
        --ssm-state 64 --ssm-heads 2 8 --type f32 > /dev/null || fail "rt_mkmodel qwen35"
    peak() { echo "$err" | sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' | tail -n 1; }
    run 0 calib "$T/q35.gguf" --corpus "$CAL" --samples 1 --seq-len 16 -o "$T/a.imatrix" -t 2 \
        --max-memory none && base=$(peak)
    run 0 calib "$T/q35.gguf" --corpus "$CAL" --samples 32 --seq-len 127 -o "$T/b.imatrix" -t 2 \
        --max-memory 40M && bound=$(peak)
    has "$err" "samples per batch" "calib --max-memory 40M on qwen35"
    awk -v a="${base:-0}" -v b="${bound:-999}" 'BEGIN { exit !(b > 0 && b - a <= 40) }' ||
        fail "calib --max-memory 40M on qwen35: peak RSS $bound MiB, one sample's $base MiB"
    echo "calib --max-memory 40M on a qwen35 model: peak RSS $bound MiB (one sample: $base MiB)"
fi
finish
