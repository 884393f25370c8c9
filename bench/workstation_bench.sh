#!/usr/bin/env bash
# bench/workstation_bench.sh — the 8 GB workstation end to end: a
# synthetic Hugging Face llama checkpoint with 32B-class layer shapes (hidden
# 5120, FFN 27648, 64 / 8 heads; vocab 4096 with tinyllama-8m's tokenizer;
# values from an LCG with rare 10x outliers, bench/synth_ckpt.py), then
#   convert (F16) -> calib (imatrix) -> quant --size (awq+gptq, --corpus) -> verify --deep
# each under --max-memory where it applies, with wall and CPU seconds, peak
# RSS (GNU time) and the peaks of anonymous and file-backed memory per stage,
# and the extrapolation of the per-layer cost to 64 layers.
#
# usage: bench/workstation_bench.sh [BUILD_DIR]
#   env: WS_LAYERS (4), WS_SHAPE ("5120 27648 64 8"), WS_SAMPLES (8), WS_SEQ (512),
#        WS_MAXMEM (6G), WS_BPW (3.5: --size = this many bits per weight of the F16
#        file's weights), WS_THREADS (nproc), WS_OUT (BUILD/workstation-bench)
# Heavy at the real shapes: ~1 GB of F16 per layer; each layer of quant costs
# what bench/scale_bench.sh measures (~17 min on 2 cores at 4 x 512). Results:
# bench/out/workstation.txt. Needs python3 (stdlib) and GNU time.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
L=${WS_LAYERS:-4}
shape=${WS_SHAPE:-"5120 27648 64 8"}
S=${WS_SAMPLES:-8}
seq=${WS_SEQ:-512}
maxmem=${WS_MAXMEM:-6G}
bpw=${WS_BPW:-3.5}
thr=${WS_THREADS:-$(nproc)}
out=${WS_OUT:-$build/workstation-bench}
report=$src/bench/out/workstation.txt
corpus=$src/datasets/corpora/calib.txt
[ -x /usr/bin/time ] || { echo "workstation_bench: needs GNU time" >&2; exit 77; }
command -v python3 >/dev/null || { echo "workstation_bench: needs python3" >&2; exit 77; }
. "$src/bench/rss_sample.sh"
mkdir -p "$out" "$src/bench/out"
mw=$out/memwall.bin
cp "$build/tools/memwall" "$mw"
ck=$out/ckpt
if [ ! -s "$ck/config.json" ]; then
    rm -rf "$ck" && mkdir -p "$ck"
    SYNTH_SHAPE="$shape 4096" SYNTH_OUTLIERS=1 python3 "$src/bench/synth_ckpt.py" "$ck" "$L"
    for f in tokenizer.model tokenizer_config.json special_tokens_map.json; do
        cp "$src/datasets/tinyllama-8m/$f" "$ck/"
    done
fi
{
echo "# workstation_bench $(date -u +%FT%TZ) $(uname -m) $(nproc) CPUs, threads $thr, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $L layers of (n_embd n_ff heads kv_heads) $shape, vocab 4096; calibration $S x $seq; --max-memory $maxmem"
printf '| stage | wall s | CPU s | peak RSS MiB | peak anon MiB | peak file MiB | result |\n|---|---|---|---|---|---|---|\n'
} | tee "$report"
row() { printf '| %s | %s | %s | %d | %d | %d | %s |\n' "$1" "$m_wall" "$m_cpu" $((m_rss / 1024)) \
            $((m_anon / 1024)) $((m_file / 1024)) "$2" | tee -a "$report"; }
fail() { echo "workstation_bench: $1 failed (exit $m_rc):" >&2; tail "$m_log" >&2; exit 1; }

m_log=$out/convert.log
measured "$mw" convert "$ck" -o "$out/f16.gguf" -q
[ "$m_rc" = 0 ] || fail convert
row convert "$(stat -c %s "$out/f16.gguf") bytes"
m_log=$out/calib.log
measured "$mw" calib "$out/f16.gguf" --corpus "$corpus" -o "$out/im.gguf" --samples "$S" \
    --seq-len "$seq" -t "$thr" --max-memory "$maxmem" --progress=none
[ "$m_rc" = 0 ] || fail calib
row calib "imatrix $(stat -c %s "$out/im.gguf") bytes"
size=$(awk -v b="$(stat -c %s "$out/f16.gguf")" -v bpw="$bpw" 'BEGIN {printf "%d", b / 16 * bpw}')
m_log=$out/quant.log
rm -f "$out/q.gguf"
measured "$mw" quant "$out/f16.gguf" -o "$out/q.gguf" --size "$size" --corpus "$corpus" \
    --samples "$S" --seq-len "$seq" -t "$thr" --max-memory "$maxmem" --progress=none
[ "$m_rc" = 0 ] || fail "quant --size"
row "quant --size $size (awq+gptq)" "$(stat -c %s "$out/q.gguf") bytes; $(grep -o 'time: calibration [0-9.]*s' "$m_log" | head -1)"
m_log=$out/verify.log
measured "$mw" verify --deep "$out/q.gguf"
[ "$m_rc" = 0 ] || fail verify
row "verify --deep" "exit 0"
awk -v L="$L" -v tl="$(grep -o 'time: .*' "$out/quant.log" | head -1)" 'BEGIN {
    if (!match(tl, /calibration [0-9.]+s/)) exit
    t = substr(tl, RSTART + 12, RLENGTH - 13) + 0
    printf "# quant calibration %.0f s for %d layers = %.0f s/layer; 64 layers: %.1f h at this sample count\n",
           t, L, t / L, t / L * 64 / 3600 }' | tee -a "$report"
