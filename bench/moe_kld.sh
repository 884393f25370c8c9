#!/usr/bin/env bash
# bench/moe_kld.sh — quality per byte on a mixture of experts:
# tinyllama-8m's dense F16 weights upcycled into 8 experts, top-2
# (tests/tools/moe_upcycle: experts = the dense FFN with 15 % multiplicative
# noise, a random router), then for llama.cpp's Q4_K_M, Q3_K_M and Q2_K
# (llama-peer quantize, no imatrix) and `memwall quant --size` at each of
# their file sizes: without calibration, then calibrated on calib.txt
# (MOE_SAMPLES x 256 tokens, default 64): llama.cpp's preset with memwall's
# per-expert imatrix (llama-quantize --imatrix) against `memwall quant --size
# --corpus` (awq+gptq: GPTQ per expert on its routed rows, the allocation
# weighted by routing frequency): perplexity and KL divergence to the F16
# logits, both scored by llama.cpp (llama-peer ppl --kld-base), on the first
# 30 KB of eval.txt at ctx 256.
#   bench/moe_kld.sh [BUILD_DIR]      env: MOE_OUT (BUILD/moe-bench), MOE_SAMPLES
# Results: bench/out/moe_kld.txt.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
out=${MOE_OUT:-$build/moe-bench}
mkdir -p "$out" "$src/bench/out"
P=$(bash "$src/tests/peer/setup.sh" | tail -n 1)
MW=$build/tools/memwall
up=$build/tests/moe_upcycle
[ -x "$up" ] || { echo "moe_kld: build the moe_upcycle target first" >&2; exit 2; }
report=$src/bench/out/moe_kld.txt
"$up" "$src/datasets/reference/tinyllama-8m.llamacpp-f16.gguf" "$out/mx8.gguf" 8 2
head -c 30000 "$src/datasets/corpora/eval.txt" > "$out/ev30.txt"
base=$("$P" ppl "$out/mx8.gguf" "$out/ev30.txt" --ctx 256 --save-logits "$out/base.bin" | awk '$1=="ppl"{print $2}')
{
echo "# moe_kld $(date -u +%FT%TZ): tinyllama-8m upcycled to 8 experts top-2, F16 ppl $base"
printf '| target | who | bytes | ppl | KLD to F16 |\n|---|---|---|---|---|\n'
} | tee "$report"
score() { "$P" ppl "$1" "$out/ev30.txt" --ctx 256 --kld-base "$out/base.bin" |
          awk '$1=="ppl"{p=$2} $1=="kld"{k=$2} END{print p, k}'; }
ns=${MOE_SAMPLES:-64}
"$MW" calib "$out/mx8.gguf" --corpus "$src/datasets/corpora/calib.txt" -o "$out/mx8.imatrix" \
    --samples "$ns" --seq-len 256 -q
for t in Q4_K_M Q3_K_M Q2_K; do
    "$P" quantize "$out/mx8.gguf" "$out/ll-$t.gguf" "$t" > /dev/null 2>&1
    sz=$(stat -c %s "$out/ll-$t.gguf")
    "$MW" quant "$out/mx8.gguf" -o "$out/mw-$t.gguf" --size "$sz" -q
    read -r p k <<< "$(score "$out/ll-$t.gguf")"
    printf '| %s size | llama.cpp %s | %d | %s | %s |\n' "$t" "$t" "$sz" "$p" "$k" | tee -a "$report"
    read -r p k <<< "$(score "$out/mw-$t.gguf")"
    printf '| %s size | memwall --size | %d | %s | %s |\n' "$t" "$(stat -c %s "$out/mw-$t.gguf")" "$p" "$k" | tee -a "$report"
    "$P" quantize "$out/mx8.gguf" "$out/lli-$t.gguf" "$t" --imatrix "$out/mx8.imatrix" > /dev/null 2>&1
    read -r p k <<< "$(score "$out/lli-$t.gguf")"
    printf '| %s size | llama.cpp %s + memwall imatrix (%d x 256) | %d | %s | %s |\n' "$t" "$t" "$ns" "$(stat -c %s "$out/lli-$t.gguf")" "$p" "$k" | tee -a "$report"
    "$MW" quant "$out/mx8.gguf" -o "$out/mwc-$t.gguf" --size "$sz" --corpus "$src/datasets/corpora/calib.txt" \
        --samples "$ns" --seq-len 256 -q
    read -r p k <<< "$(score "$out/mwc-$t.gguf")"
    printf '| %s size | memwall --size --corpus (%d x 256) | %d | %s | %s |\n' "$t" "$ns" "$(stat -c %s "$out/mwc-$t.gguf")" "$p" "$k" | tee -a "$report"
done
