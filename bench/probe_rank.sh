#!/usr/bin/env bash
# bench/probe_rank.sh — how well the allocator's per-tensor loss ranks the
# tensors of tinyllama-8m by the damage they do, before and after the probes
# (docs/commands.md "Probes").
#   truth: llama.cpp's KLD to F16 (eval.txt first 20 KB, ctx 256: text the
#          probes never saw) of a file where ONE tensor is Q3_K (with the
#          corpus imatrix, as memwall's probe quantizes it) and all others F16;
#   before: the unscaled loss L(Q3_K) (imatrix-weighted squared error);
#   after:  memwall's probe KLD (its own f32 forward on 2048 calib.txt
#           positions), i.e. the scaled loss at Q3_K.
# Prints Spearman's rank correlation of each with the truth, and the ratio of
# memwall's probe KLD to llama.cpp's per tensor (median, range).
# usage: bench/probe_rank.sh [BUILD_DIR]   (MW_BENCH_OUT: scratch)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
mw=$build/tools/memwall
peer=$(bash "$src/tests/peer/setup.sh" | tail -n 1)
ds=$src/datasets
f16=$ds/reference/tinyllama-8m.llamacpp-f16.gguf
out=${MW_BENCH_OUT:-$build/probe-rank}
thr=$(nproc)
mkdir -p "$out"
head -c 20000 "$ds/corpora/eval.txt" > "$out/eval20k.txt"
"$peer" --threads "$thr" ppl "$f16" "$out/eval20k.txt" --ctx 256 --bytes 20000 \
    --save-logits-llamacpp "$out/f16.logits" > /dev/null
"$mw" calib "$f16" --corpus "$ds/corpora/calib.txt" -o "$out/calib.imatrix" -t "$thr" 2> /dev/null
t0=$(date +%s)
"$mw" quant "$f16" -o "$out/x.gguf" --size 3622592 --corpus "$ds/corpora/calib.txt" -t "$thr" \
    --dry-run --progress none 2> "$out/table.txt" > /dev/null
echo "quant --dry-run with probes: $(( $(date +%s) - t0 )) s"
grep "rank correlation" "$out/table.txt"
# tensor, probe type, probe KLD, factor -> unscaled loss = KLD / factor
awk '$1 ~ /\.weight$/ && NF >= 9 && $7 == "q3_K" {print $1, $8, $8 / $9}' "$out/table.txt" \
    > "$out/probes.txt"
: > "$out/truth.txt"
while read -r name kld loss; do
    re="^${name//./\\.}\$"
    "$mw" quant "$f16" -o "$out/p.gguf" --preset Q8_0 --pure --imatrix "$out/calib.imatrix" \
        --type-override "$re=q3_K" --type-override ".*=f16" -q -t "$thr"
    k=$("$peer" --threads "$thr" ppl "$out/p.gguf" "$out/eval20k.txt" --ctx 256 --bytes 20000 \
        --kld-base "$out/f16.logits" | awk '$1 == "kld" {print $2}')
    echo "$name $k" >> "$out/truth.txt"
done < "$out/probes.txt"
python3 "$src/bench/probe_rank.py" "$out/probes.txt" "$out/truth.txt"
