#!/usr/bin/env bash
# bench/quant_bench.sh — `memwall quant` against llama.cpp's quantizer
# (llama_model_quantize in node-llama-cpp's libllama, through llama-peer),
# in the same run, on the same F16 GGUF, with the same thread count.
#
# Part 1, throughput: `--preset Q4_K_M` without and with an imatrix on a
# synthetic llama-shaped F16 GGUF (bench/quant_mkmodel.c; default
# TinyLlama-1.1B shapes, 2.2 GB) and on tinyllama-8m (17 MB). Reports MB/s of
# F16 input (decimal MB), peak RSS and the ratio memwall / llama.cpp (target
# >= 1.0x). Page cache warm (a warm-up read first); best of MW_BENCH_RUNS runs.
# Both tools write their output to the same directory; memwall's writer
# fsyncs before its rename, llama.cpp's does not, so memwall's times include
# getting the file onto the disk.
#
# Part 2 (MW_BENCH_TABLE=1, slow: ~40 s of llama.cpp perplexity per file on
# 2 cores): tinyllama-8m, every preset, without and with llama.cpp's imatrix:
# our bytes, llama.cpp's bytes (its llama_model_quantize, this run), whether
# the files are identical once memwall.* keys are dropped, perplexity on the
# first 60,000 bytes of eval.txt (ctx 256) and KL divergence against the F16
# file's logits, both by llama.cpp's own code (llama-peer ppl), next to the
# figures in shared/anchors.md.
#
#   bench/quant_bench.sh [BUILD_DIR]        (default: build)
#   env: MW_BENCH_DIR (default bench/out; needs ~4 GB), MW_BENCH_THREADS
#        (default: all CPUs), MW_BENCH_RUNS (default 3), MW_BENCH_LAYERS
#        (default 22), MW_BENCH_TABLE=1, MW_BENCH_SPEED=0 (skip part 1),
#        MW_BENCH_KEEP=1 (keep the outputs)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
BUILD=$(cd "${1:-$repo/build}" && pwd)
MEMWALL=$BUILD/tools/memwall
MWGGUF=$repo/tests/lib/mwgguf.py # the GGUF toolkit of the tests
[ -x "$MEMWALL" ] || { echo "no $MEMWALL (build first)"; exit 2; }
W=${MW_BENCH_DIR:-$repo/bench/out}
TH=${MW_BENCH_THREADS:-$(nproc)}
RUNS=${MW_BENCH_RUNS:-3}
L=${MW_BENCH_LAYERS:-22}
mkdir -p "$W"
W=$(cd "$W" && pwd)
REPORT=$W/quant_bench.txt
: > "$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }

PEER=$(bash "$repo/tests/peer/setup.sh" 2> "$W/peer-setup.log" | tail -n 1) || PEER=""
[ -n "$PEER" ] && [ -x "$PEER" ] || { echo "llama-peer unavailable (see $W/peer-setup.log)"; exit 77; }

refdir=""
for d in "$repo/datasets/reference" "$repo/../shared/models/reference"; do
    [ -f "$d/tinyllama-8m.llamacpp-f16.gguf" ] && { refdir=$d; break; }
done
[ -n "$refdir" ] || { echo "need tinyllama-8m.llamacpp-f16.gguf (datasets/reference)"; exit 2; }
F16T=$refdir/tinyllama-8m.llamacpp-f16.gguf
IMT=$refdir/tinyllama-8m.llamacpp.imatrix.gguf

# --- the synthetic model and a synthetic imatrix for it ---
SYN=$W/quant_synth_${L}L.gguf
SYNIM=$W/quant_synth_${L}L.imatrix.gguf
if [ ! -f "$SYN" ]; then
    cc -std=c11 -O2 -I"$repo" "$here/quant_mkmodel.c" "$BUILD/gguf/libmw_gguf.a" \
        "$BUILD/core/libmw_core.a" -lm -o "$W/quant_mkmodel"
    echo "generating $SYN ($L layers) ..."
    "$W/quant_mkmodel" "$SYN.part" "$L"
    mv "$SYN.part" "$SYN"
fi
if [ ! -f "$SYNIM" ]; then
    python3 "$MWGGUF" imatrix-synth "$SYN" "$SYNIM"
fi

mb() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", b / 1e6 / s }'; }
# timed NAME CMD...: best wall time, the peak RSS and CPU seconds of that run
# into $best / $rss / $cpu
timed() {
    local name=$1
    shift
    best="" rss="" cpu=""
    for r in $(seq "$RUNS"); do
        /usr/bin/time -f '%e %M %U %S' -o "$W/time.txt" "$@" > "$W/$name.log" 2>&1 ||
            { echo "$name failed:"; tail -n 5 "$W/$name.log"; exit 1; }
        read -r t m u sy < "$W/time.txt"
        if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then
            best=$t
            rss=$m
            cpu=$(awk -v u="$u" -v s="$sy" 'BEGIN { printf "%.2f", u + s }')
        fi
    done
}

bench_model() { # LABEL F16 IMATRIX
    local label=$1 src=$2 im=$3 bytes
    bytes=$(stat -c %s "$src")
    cat "$src" > /dev/null # warm the page cache
    say ""
    say "== $label: $(basename "$src"), $bytes bytes F16, $TH threads, best of $RUNS =="
    printf '%-26s %9s %9s %11s %9s\n' "" "seconds" "MB/s" "peak RSS" "CPU s" | tee -a "$REPORT"
    local tm tl rm rl cm cl
    for mode in rtn imatrix; do
        local ia=() ib=()
        [ $mode = imatrix ] && ia=(--imatrix "$im") && ib=(--imatrix "$im")
        timed mw "$MEMWALL" quant "$src" -o "$W/q-mw.gguf" --preset Q4_K_M -t "$TH" -q "${ia[@]}"
        tm=$best rm=$rss cm=$cpu
        timed lc "$PEER" --threads "$TH" quantize "$src" "$W/q-lc.gguf" Q4_K_M "${ib[@]}"
        tl=$best rl=$rss cl=$cpu
        printf '%-26s %9.2f %9s %8d MB %9s\n' "memwall Q4_K_M $mode" "$tm" "$(mb "$bytes" "$tm")" \
            $((rm / 1024)) "$cm" | tee -a "$REPORT"
        printf '%-26s %9.2f %9s %8d MB %9s\n' "llama.cpp Q4_K_M $mode" "$tl" "$(mb "$bytes" "$tl")" \
            $((rl / 1024)) "$cl" | tee -a "$REPORT"
        say "$(printf '%-26s %9s %9s' "ratio (memwall/llama.cpp)" "" \
            "$(awk -v a="$tl" -v b="$tm" 'BEGIN { printf "%.2fx", a / b }')")"
        say "  files: $(python3 "$MWGGUF" cmp "$W/q-mw.gguf" "$W/q-lc.gguf" | head -n 1)" \
            "(once memwall.* KVs are dropped)"
    done
    [ "${MW_BENCH_KEEP:-0}" = 1 ] || rm -f "$W/q-mw.gguf" "$W/q-lc.gguf"
}

if [ "${MW_BENCH_SPEED:-1}" = 1 ]; then
    say "memwall quant vs llama.cpp llama_model_quantize ($(basename "$PEER"), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg))"
    bench_model "synthetic" "$SYN" "$SYNIM"
    bench_model "tinyllama-8m" "$F16T" "$IMT"
fi

[ "${MW_BENCH_TABLE:-0}" = 1 ] || { echo "report: $REPORT"; exit 0; }

# --- part 2: the side-by-side table on tinyllama-8m ---
EVAL=$repo/datasets/corpora/eval.txt
[ -f "$EVAL" ] || EVAL=$repo/../shared/corpora/eval.txt
head -c 60000 "$EVAL" > "$W/eval60k.txt"
ANCH=$refdir/anchors.md
[ -f "$ANCH" ] || ANCH=$repo/../shared/anchors.md
anchor() { awk -F'|' -v f="$1" -v c="$2" '{ g = $2; gsub(/ /, "", g) } g == f { v = $c; gsub(/ /, "", v); print v }' "$ANCH" 2> /dev/null; }
"$PEER" --threads "$TH" ppl "$F16T" "$W/eval60k.txt" --ctx 256 --save-logits "$W/f16.logits" > "$W/ppl-f16.txt" 2>&1
say ""
say "== tinyllama-8m: every preset (ppl: eval.txt first 60,000 bytes, ctx 256; KLD vs F16; llama-peer ppl) =="
say "F16 ppl $(awk '$1=="ppl"{print $2}' "$W/ppl-f16.txt") (anchors.md: $(anchor F16 5))"
printf '| %-10s | %9s | %9s | %6s | %8s | %10s | %10s | %9s | %9s | %s |\n' preset "ours B" "llama.cpp B" "+memwall" bpw "ours ppl" "anchor ppl" "ours KLD" "anchor KLD" "data vs llama.cpp" | tee -a "$REPORT"
printf '|%s|\n' "------------|-----------|-----------|--------|----------|------------|------------|-----------|-----------|------" | tee -a "$REPORT"
row() { # NAME PRESET [--imatrix F]
    local name=$1 p=$2
    shift 2
    "$MEMWALL" quant "$F16T" -o "$W/t-mw.gguf" --preset "$p" -t "$TH" -q "$@"
    "$PEER" --threads "$TH" quantize "$F16T" "$W/t-lc.gguf" "$p" "$@" > /dev/null 2>&1
    local same=differs
    if python3 "$MWGGUF" cmp "$W/t-mw.gguf" "$W/t-lc.gguf" > /dev/null 2>&1; then
        same="identical"
    fi
    "$PEER" --threads "$TH" ppl "$W/t-mw.gguf" "$W/eval60k.txt" --ctx 256 --kld-base "$W/f16.logits" > "$W/ppl.txt" 2>&1
    local ppl kld bpw
    ppl=$(awk '$1=="ppl"{print $2}' "$W/ppl.txt")
    kld=$(awk '$1=="kld"{print $2}' "$W/ppl.txt")
    bpw=$("$MEMWALL" quant "$F16T" --preset "$p" --dry-run "$@" 2> /dev/null | awk '/bpw/ { gsub(/[(]/, "", $7); print $7 }')
    printf '| %-10s | %9d | %9d | %6d | %8s | %10s | %10s | %9s | %9s | %s |\n' "$name" \
        "$(stat -c %s "$W/t-mw.gguf")" "$(stat -c %s "$W/t-lc.gguf")" \
        $(($(stat -c %s "$W/t-mw.gguf") - $(stat -c %s "$W/t-lc.gguf"))) "$bpw" "$ppl" \
        "$(anchor "$name" 5)" "$kld" "$(anchor "$name" 6)" "$same" | tee -a "$REPORT"
}
for p in Q8_0 Q6_K Q5_K_M Q5_K_S Q4_K_M Q4_K_S Q4_0 Q3_K_L Q3_K_M Q3_K_S Q2_K; do row "$p" "$p"; done
for p in Q4_K_M Q4_K_S Q3_K_L Q3_K_M Q3_K_S Q2_K; do row "$p-im" "$p" --imatrix "$IMT"; done
rm -f "$W/t-mw.gguf" "$W/t-lc.gguf"
echo "report: $REPORT"
