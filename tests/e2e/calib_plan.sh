#!/usr/bin/env bash
# memwall plan: usage errors; tables for an HF dir and a GGUF file; preset
# sizes equal the tensor data memwall quant writes; the KV column follows
# 2 * n_layer * n_ctx * n_head_kv * head_dim * bytes.
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
finish
