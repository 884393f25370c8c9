#!/usr/bin/env bash
# bench/scale_bench.sh — memwall quant --corpus --method awq+gptq on a
# synthetic F16 GGUF with the layer shapes of a 32B-class model (hidden
# 5120, intermediate 27648, 64 q heads / 8 kv heads, head dim 128; vocab
# 4096 with tinyllama-8m's tokenizer so the corpus can be tokenized),
# once with 1 decoder layer and once with 2: peak RSS (GNU time's maximum
# resident set size) and wall seconds for each, seconds per layer = the
# difference. Peak RSS should not grow with the layer count (quantized
# tensors are spilled to an unlinked scratch file, only one layer is in
# memory as f32).
#
# usage: bench/scale_bench.sh [BUILD_DIR]
#   env: SCALE_SAMPLES (8), SCALE_SEQ (256), SCALE_LAYERS ("1 2"),
#        SCALE_THREADS (nproc), SCALE_METHOD (awq+gptq), SCALE_OUT (BUILD/scale-bench),
#        SCALE_SHAPE ("5120 27648 64 8": n_embd n_ff heads kv_heads; a small one for a
#        smoke run, e.g. "256 768 8 4")
# Heavy: ~1 GB of F16 per layer, a 27648x27648 Hessian (3 GiB) and its
# Cholesky factor for ffn_down. Results also go to bench/out/scale.txt.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build-h2}" && pwd)
samples=${SCALE_SAMPLES:-8}
seq=${SCALE_SEQ:-256}
layers=${SCALE_LAYERS:-"1 2"}
thr=${SCALE_THREADS:-$(nproc)}
method=${SCALE_METHOD:-awq+gptq}
shape=${SCALE_SHAPE:-"5120 27648 64 8"}
out=${SCALE_OUT:-$build/scale-bench}
tok=$src/datasets/reference/tinyllama-8m.llamacpp-f16.gguf
report=$src/bench/out/scale.txt
mkdir -p "$out" "$src/bench/out"
mw=$out/memwall.bin # a copy: a rebuild during the run does not change the binary
cp "$build/tools/memwall" "$mw"
[ -x /usr/bin/time ] || { echo "scale_bench: needs GNU time (/usr/bin/time)" >&2; exit 77; }

cc -std=c11 -O2 -I"$src" "$src/bench/quant_mkmodel.c" "$build/gguf/libmw_gguf.a" \
    "$build/core/libmw_core.a" -lm -o "$out/quant_mkmodel"

{
echo "# scale_bench $(date -u +%FT%TZ) $(uname -m) $(nproc) CPUs, threads $thr, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# shapes (n_embd n_ff heads kv_heads): $shape, vocab 4096"
echo "# memwall quant --preset Q4_K_M --corpus calib.txt --method $method --samples $samples --seq-len $seq"
printf '| layers | F16 bytes | output bytes | wall s | user s | peak RSS KiB |\n|---|---|---|---|---|---|\n'
} | tee "$report"
for L in $layers; do
    m=$out/synth-${shape// /x}-${L}L.gguf
    # shellcheck disable=SC2086
    [ -s "$m" ] || "$out/quant_mkmodel" "$m" "$L" $shape 4096 "$tok"
    o=$out/synth-${L}L-Q4_K_M.gguf
    rm -f "$o"
    /usr/bin/time -v -o "$out/time-${L}L.txt" "$mw" quant "$m" -o "$o" --preset Q4_K_M \
        --corpus "$src/datasets/corpora/calib.txt" --method "$method" --samples "$samples" \
        --seq-len "$seq" -t "$thr" > "$out/log-${L}L.txt" 2>&1 ||
        { echo "scale_bench: memwall quant failed for $L layers:" >&2; tail "$out/log-${L}L.txt" >&2; exit 1; }
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0;
                        for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$out/time-${L}L.txt")
    user=$(awk -F': ' '/User time/ {print $2}' "$out/time-${L}L.txt")
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$out/time-${L}L.txt")
    printf '| %s | %s | %s | %s | %s | %s |\n' "$L" "$(stat -c %s "$m")" "$(stat -c %s "$o")" \
        "$wall" "$user" "$rss" | tee -a "$report"
    ls "$out" | grep -q 'tmp\.spill' && { echo "scale_bench: spill file left behind" >&2; exit 1; }
    rm -f "$o"
done
