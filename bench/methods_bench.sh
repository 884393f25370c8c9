#!/usr/bin/env bash
# bench/methods_bench.sh — memwall quant --corpus/--method vs RTN+imatrix on
# tinyllama-8m: file size, perplexity and KL divergence to the F16 model on
# the first 60 KB of eval.txt at ctx 256, scored by llama.cpp (llama-peer).
# usage: bench/methods_bench.sh [BUILD_DIR] [PRESET...]   (default build-m, Q4_K_M Q3_K_M)
#   env: MW_BENCH_METHODS (default "rtn+imatrix rtn gptq awq awq+gptq gptq-act awq+gptq-act round
#        awq+gptq+round"),
#        MW_BENCH_OUT, MW_BENCH_THREADS
# The memwall binary is copied first, so a rebuild during the run does not mix versions.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-m}; shift || true
presets=("$@"); [ ${#presets[@]} -gt 0 ] || presets=(Q4_K_M Q3_K_M)
methods=(${MW_BENCH_METHODS:-rtn+imatrix rtn gptq awq awq+gptq gptq-act awq+gptq-act round awq+gptq+round})
peer=$(bash "$src/tests/peer/setup.sh" | tail -n 1)
ds=$src/datasets
f16=$ds/reference/tinyllama-8m.llamacpp-f16.gguf
im=$ds/reference/tinyllama-8m.llamacpp.imatrix.gguf
out=${MW_BENCH_OUT:-$build/methods-bench}
thr=${MW_BENCH_THREADS:-$(nproc)}
mkdir -p "$out"
mw=$out/memwall.bin
cp "$build/tools/memwall" "$mw"
head -c 60000 "$ds/corpora/eval.txt" > "$out/eval60k.txt"
[ -s "$out/f16.logits" ] || "$peer" --threads "$thr" ppl "$f16" "$out/eval60k.txt" --ctx 256 \
    --bytes 60000 --save-logits-llamacpp "$out/f16.logits" > /dev/null
printf '| preset | method | bytes | ppl | KLD | same top-1 | quant s |\n|---|---|---|---|---|---|---|\n'
for p in "${presets[@]}"; do
  for m in "${methods[@]}"; do
    f=$out/$p-$m.gguf
    t0=$(date +%s.%N)
    if [ "$m" = rtn+imatrix ]; then
      "$mw" quant "$f16" -o "$f" --preset "$p" --imatrix "$im" -q -t "$thr"
    else
      "$mw" quant "$f16" -o "$f" --preset "$p" --corpus "$ds/corpora/calib.txt" --method "$m" -q -t "$thr"
    fi
    t1=$(date +%s.%N)
    r=$("$peer" --threads "$thr" ppl "$f" "$out/eval60k.txt" --ctx 256 --bytes 60000 --kld-base "$out/f16.logits")
    g() { awk -v k="$1" '$1 == k {print $2}' <<< "$r"; }
    printf '| %s | %s | %s | %s | %s | %s | %.1f |\n' "$p" "$m" "$(stat -c %s "$f")" "$(g ppl)" \
      "$(g kld)" "$(g same_top)" "$(echo "$t1 - $t0" | bc)"
  done
done
