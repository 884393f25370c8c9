#!/usr/bin/env bash
# bench/method_cost.sh — "quant time and peak RSS per method":
# memwall quant --corpus --method M for every method
#   (a) on tinyllama-8m, --preset Q4_K_M, calib.txt: wall s, CPU s, peak RSS,
#       memwall's time line, KLD to F16 on eval.txt's first 60 KB (ctx 256,
#       scored by llama.cpp);
#   (b) on one 4096-wide synthetic layer (n_embd 4096, n_ff 11008, 32 / 8
#       heads of 128: a Llama-2-7B / Qwen-7B-class layer, random weights with
#       outliers, bench/quant_mkmodel.c), --preset Q4_K_M, SAMPLES x 512
#       tokens of calib.txt: wall s, CPU s, peak RSS, the time line.
# and each method's time as a multiple of awq+gptq's in the same run.
# usage: bench/method_cost.sh [BUILD_DIR]
#   env: MW_COST_METHODS (default "rtn gptq awq awq+gptq round gptq+round awq+gptq+round"),
#        MW_COST_PARTS ("tiny wide"), MW_COST_SAMPLES (16), MW_BENCH_THREADS (nproc),
#        MW_BENCH_OUT (BUILD/method-cost)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
methods=(${MW_COST_METHODS:-rtn gptq awq awq+gptq round gptq+round awq+gptq+round})
parts=${MW_COST_PARTS:-tiny wide}
S=${MW_COST_SAMPLES:-16}
thr=${MW_BENCH_THREADS:-$(nproc)}
out=${MW_BENCH_OUT:-$build/method-cost}
ds=$src/datasets
f16=$ds/reference/tinyllama-8m.llamacpp-f16.gguf
mkdir -p "$out"
mw=$out/memwall.bin # a copy: a rebuild during the run does not change the binary
rm -f "$mw"; cp "$build/tools/memwall" "$mw"
[ -x /usr/bin/time ] || { echo "method_cost: needs GNU time (/usr/bin/time)" >&2; exit 77; }
. "$src/bench/rss_sample.sh"
echo "# method_cost $(date -u +%FT%TZ) $(uname -m) $(nproc) CPUs, threads $thr, load $(cut -d' ' -f1-3 /proc/loadavg)"

row() { # part method -> prints a row; needs m_* from measured
  local tl
  tl=$(grep -o 'time: .*' "$m_log" | head -1 || true)
  printf '%s %s %.1f %.1f %d %s\n' "$1" "$2" "$m_wall" "$m_cpu" $((m_rss / 1024)) "${tl#time: }"
}

if [[ " $parts " == *" tiny "* ]]; then
  peer=$(bash "$src/tests/peer/setup.sh" | tail -n 1)
  head -c 60000 "$ds/corpora/eval.txt" > "$out/eval60k.txt"
  [ -s "$out/f16.logits" ] || "$peer" --threads "$thr" ppl "$f16" "$out/eval60k.txt" --ctx 256 \
      --bytes 60000 --save-logits-llamacpp "$out/f16.logits" > /dev/null
  printf '\n(a) tinyllama-8m, --preset Q4_K_M, calib.txt (128 x 512)\n\n'
  printf '| method | wall s | CPU s | x awq+gptq | peak RSS MiB | KLD | time line |\n|---|---|---|---|---|---|---|\n'
  : > "$out/tiny.txt"
  for m in "${methods[@]}"; do
    m_log=$out/tiny-$m.log
    measured "$mw" quant "$f16" -o "$out/tiny-$m.gguf" --preset Q4_K_M \
        --corpus "$ds/corpora/calib.txt" --method "$m" -t "$thr"
    [ "$m_rc" = 0 ] || { echo "method_cost: $m failed" >&2; tail "$m_log" >&2; exit 1; }
    r=$("$peer" --threads "$thr" ppl "$out/tiny-$m.gguf" "$out/eval60k.txt" --ctx 256 --bytes 60000 \
        --kld-base "$out/f16.logits")
    echo "$(row tiny "$m") kld=$(awk '$1 == "kld" {print $2}' <<< "$r")" >> "$out/tiny.txt"
  done
  ref=$(awk '$2 == "awq+gptq" {print $3}' "$out/tiny.txt")
  while read -r _ m w c r rest; do
    k=${rest##*kld=}; tl=${rest% kld=*}
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$m" "$w" "$c" \
      "$( [ -n "$ref" ] && python3 -c "print(f'{$w/$ref:.2f}')" || echo -)" "$r" "$k" "$tl"
  done < "$out/tiny.txt"
fi

if [[ " $parts " == *" wide "* ]]; then
  cc -std=c11 -O2 -I"$src" "$src/bench/quant_mkmodel.c" "$build/gguf/libmw_gguf.a" \
      "$build/core/libmw_core.a" -lm -o "$out/quant_mkmodel"
  model=$out/synth-4096x11008-1L.gguf
  [ -s "$model" ] || "$out/quant_mkmodel" "$model" 1 4096 11008 32 8 4096 "$f16"
  printf '\n(b) one synthetic layer, n_embd 4096, n_ff 11008, 32/8 heads, --preset Q4_K_M, %s x 512 tokens of calib.txt\n\n' "$S"
  printf '| method | wall s | CPU s | x awq+gptq | peak RSS MiB | time line |\n|---|---|---|---|---|---|\n'
  : > "$out/wide.txt"
  for m in "${methods[@]}"; do
    m_log=$out/wide-$m.log
    measured "$mw" quant "$model" -o "$out/wide-$m.gguf" --preset Q4_K_M \
        --corpus "$ds/corpora/calib.txt" --method "$m" --samples "$S" -t "$thr"
    [ "$m_rc" = 0 ] || { echo "method_cost: $m failed" >&2; tail "$m_log" >&2; exit 1; }
    row wide "$m" >> "$out/wide.txt"
    rm -f "$out/wide-$m.gguf"
  done
  ref=$(awk '$2 == "awq+gptq" {print $3}' "$out/wide.txt")
  while read -r _ m w c r tl; do
    printf '| %s | %s | %s | %s | %s | %s |\n' "$m" "$w" "$c" \
      "$( [ -n "$ref" ] && python3 -c "print(f'{$w/$ref:.2f}')" || echo -)" "$r" "$tl"
  done < "$out/wide.txt"
fi
