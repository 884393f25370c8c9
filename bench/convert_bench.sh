#!/usr/bin/env bash
# bench/convert_bench.sh — `memwall convert` on a synthetic checkpoint of
# >= 2 GB (TinyLlama-1.1B-like: hidden 2048, 22 layers, FFN 5632, 32 heads /
# 4 KV heads, vocab 32000; F16; two shards), to F16 and to Q8_0.
# Reports peak RSS (target < 300 MB) and throughput against `cp` of the same
# bytes (target: within 2x), with a warm page cache (a warm-up run, then the
# best of MW_BENCH_RUNS=3 runs counts: the figures are noisy on a shared box). convert's output is durable (the gguf writer fsyncs
# before the rename), so the fair yardstick is cp followed by an fsync of the
# copy; plain cp (data still in the page cache when it exits) is shown too.
#
#   bench/convert_bench.sh [BUILD_DIR]     (default: build)
#   env: MW_BENCH_DIR (work dir, default bench/out; needs ~7 GB free),
#        MW_BENCH_LAYERS (default 22), MW_BENCH_KEEP=1 (keep the files)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
BUILD=${1:-$repo/build}
MEMWALL=$BUILD/tools/memwall
[ -x "$MEMWALL" ] || { echo "no $MEMWALL (build first)"; exit 2; }
W=${MW_BENCH_DIR:-$repo/bench/out}
L=${MW_BENCH_LAYERS:-22}
mkdir -p "$W"
CK="$W/synth-ckpt"

TOK=""
for d in "$repo/datasets/tinyllama-8m" "$repo/../shared/models/tinyllama-8m"; do
    [ -f "$d/tokenizer.model" ] && { TOK=$d; break; }
done
[ -n "$TOK" ] || { echo "need tinyllama-8m's tokenizer.model (datasets/ or ../shared)"; exit 2; }

if [ ! -f "$CK/.complete-$L" ]; then
    rm -rf "$CK" && mkdir -p "$CK"
    echo "generating the synthetic checkpoint ($L layers) in $CK ..."
    python3 "$here/synth_ckpt.py" "$CK" "$L"
    for f in tokenizer.model tokenizer_config.json special_tokens_map.json; do
        cp "$TOK/$f" "$CK/"
    done
    touch "$CK/.complete-$L"
fi
bytes=$(cat "$CK"/*.safetensors | wc -c)
echo "checkpoint: $(awk -v b="$bytes" 'BEGIN{printf "%.2f GB", b/1e9}') in $(ls "$CK"/*.safetensors | wc -l) shards"

# measure LABEL CMD...: one warm-up run, then the best wall time of
# MW_BENCH_RUNS (default 3) runs and the largest peak RSS (KiB) seen
measure() {
    local label=$1
    shift
    local best="" rss=0 t
    for i in $(seq 0 "${MW_BENCH_RUNS:-3}"); do
        rm -f "$W/out.gguf" "$W/cp.bin"
        sync
        /usr/bin/time -f '%e %M' -o "$W/time" "$@" > /dev/null 2> "$W/cmd.err" ||
            { cat "$W/cmd.err"; exit 1; }
        [ "$i" -eq 0 ] && continue
        t=$(tail -n 1 "$W/time")
        best=$(awk -v a="$best" -v b="${t% *}" 'BEGIN{print (a == "" || b < a) ? b : a}')
        rss=$(awk -v a="$rss" -v b="${t#* }" 'BEGIN{print (b > a) ? b : a}')
    done
    printf '%-28s %8.2f s  %8.0f MB/s  peak RSS %7.1f MB\n' "$label" "$best" \
        "$(awk -v b="$bytes" -v s="$best" 'BEGIN{print (s > 0) ? b/1e6/s : 0}')" \
        "$(awk -v k="$rss" 'BEGIN{print k/1024}')"
    eval "${label%% *}_s=$best; ${label%% *}_rss=$rss"
}

measure "cp (same bytes)" sh -c "cat \"$CK\"/*.safetensors > \"$W/cp.bin\""
measure "cpsync (cp + fsync)" sh -c "cat \"$CK\"/*.safetensors > \"$W/cp.bin\" && sync \"$W/cp.bin\""
measure "convert --type f16" "$MEMWALL" convert "$CK" -o "$W/out.gguf" --type f16 -q
out_bytes=$(stat -c %s "$W/out.gguf")
"$MEMWALL" verify "$W/out.gguf" > /dev/null || { echo "verify failed"; exit 1; }
measure "q8_0 --type q8_0" "$MEMWALL" convert "$CK" -o "$W/out.gguf" --type q8_0 -q

ratio=$(awk -v a="$convert_s" -v b="$cpsync_s" 'BEGIN{printf "%.2f", a/b}')
ratio_plain=$(awk -v a="$convert_s" -v b="$cp_s" 'BEGIN{printf "%.2f", a/b}')
echo "f16 output: $out_bytes bytes; convert time / (cp + fsync): $ratio (target <= 2);" \
     "/ plain cp: $ratio_plain; peak RSS $((convert_rss / 1024)) MB (target < 300)"
ok=1
awk -v r="$ratio" 'BEGIN{exit !(r <= 2.0)}' || { echo "FAIL: throughput"; ok=0; }
[ "$convert_rss" -lt $((300 * 1024)) ] || { echo "FAIL: peak RSS"; ok=0; }
[ "$q8_0_rss" -lt $((300 * 1024)) ] || { echo "FAIL: peak RSS (q8_0)"; ok=0; }
rm -f "$W/out.gguf" "$W/cp.bin"
[ "${MW_BENCH_KEEP:-0}" = 1 ] || rm -rf "$CK"
[ $ok = 1 ] && echo "PASS" || exit 1
