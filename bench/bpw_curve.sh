#!/usr/bin/env bash
# bench/bpw_curve.sh — mixed precision to a budget (`memwall quant --bpw B` /
# `--size S`) on tinyllama-8m: file bytes, bpw, perplexity and KL divergence
# to llama.cpp's F16 logits (first 60 KB of eval.txt, ctx 256, scored by the
# llama-peer exactly as bench/methods_bench.sh does), next to llama.cpp's own
# presets from datasets/reference/anchors.md.
# usage: bench/bpw_curve.sh [BUILD_DIR] [METHOD...]
#   METHOD: rtn+imatrix (llama.cpp's imatrix, ggml's imatrix RTN) and/or
#   gptq / awq / rtn / awq+gptq (--corpus calib.txt --method M, same imatrix
#   for the allocation); default: rtn+imatrix gptq.
# env: MW_BENCH_OUT (scratch dir), MW_BENCH_THREADS, MW_BPW_POINTS (default
#   "bpw:2.5 bpw:3 ... bpw:6 size:5339584 size:4449728").
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}; shift || true
methods=("$@"); [ ${#methods[@]} -gt 0 ] || methods=(rtn+imatrix gptq)
mw=$build/tools/memwall
peer=$(bash "$src/tests/peer/setup.sh" | tail -n 1)
ds=$src/datasets
f16=$ds/reference/tinyllama-8m.llamacpp-f16.gguf
im=$ds/reference/tinyllama-8m.llamacpp.imatrix.gguf
out=${MW_BENCH_OUT:-$build/bpw-curve}
thr=${MW_BENCH_THREADS:-$(nproc)}
points=${MW_BPW_POINTS:-"bpw:2.5 bpw:3 bpw:3.5 bpw:4 bpw:4.5 bpw:5 bpw:5.5 bpw:6 size:5339584 size:4449728"}
mkdir -p "$out"
head -c 60000 "$ds/corpora/eval.txt" > "$out/eval60k.txt"
[ -s "$out/f16.logits" ] || "$peer" --threads "$thr" ppl "$f16" "$out/eval60k.txt" --ctx 256 \
    --bytes 60000 --save-logits-llamacpp "$out/f16.logits" > /dev/null
# n_elements of the model (for bpw): from the F16 file's tensor data (2 bytes each)
nel=$("$mw" inspect "$f16" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(t["params"] for t in d["tensors"]))' 2>/dev/null || echo 8445952)
printf '| budget | method | file bytes | bpw (data) | ppl | KLD | same top-1 | quant s |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for m in "${methods[@]}"; do
  for pt in $points; do
    kind=${pt%%:*}; val=${pt#*:}
    f=$out/$kind-$val-$m.gguf
    t0=$(date +%s.%N)
    if [ "$m" = rtn+imatrix ]; then
      set -- "$mw" quant "$f16" -o "$f" "--$kind" "$val" --imatrix "$im" -q -t "$thr"
    else
      set -- "$mw" quant "$f16" -o "$f" "--$kind" "$val" --imatrix "$im" \
        --corpus "$ds/corpora/calib.txt" --method "$m" -q -t "$thr"
    fi
    if ! msg=$("$@" 2>&1); then
      printf '| --%s %s | %s | not possible: %s | | | | | |\n' "$kind" "$val" "$m" \
        "$(head -n 1 <<< "$msg" | sed 's/^memwall quant: //')"
      continue
    fi
    t1=$(date +%s.%N)
    "$mw" verify "$f" > /dev/null
    data=$("$mw" inspect "$f" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(t["bytes"] for t in d["tensors"]))' 2>/dev/null || echo 0)
    r=$("$peer" --threads "$thr" ppl "$f" "$out/eval60k.txt" --ctx 256 --bytes 60000 --kld-base "$out/f16.logits")
    g() { awk -v k="$1" '$1 == k {print $2}' <<< "$r"; }
    printf '| --%s %s | %s | %s | %s | %s | %s | %s | %.1f |\n' "$kind" "$val" "$m" "$(stat -c %s "$f")" \
      "$(python3 -c "print(f'{$data*8/$nel:.3f}')")" "$(g ppl)" "$(g kld)" "$(g same_top)" "$(echo "$t1 - $t0" | bc)"
  done
done
printf '\nllama.cpp (datasets/reference/anchors.md): Q2_K-im 3622592 B 3.36 bpw KLD 0.019885; '
printf 'Q3_K_S-im 4128448 3.84 0.005635; Q3_K_M-im 4449984 4.15 0.004175; Q3_K_L-im 4736704 4.42 0.003950; '
printf 'IQ4_XS-im 4873920 4.55 0.001687; Q4_K_S-im 5144256 4.81 0.001239; Q4_K_M-im 5339840 5.00 0.001137; '
printf 'Q5_K_M 6142400 5.76 0.000556; Q6_K 6995392 6.58 0.000394; Q8_0 9027008 8.51 0.000068\n'
