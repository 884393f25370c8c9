#!/usr/bin/env bash
# bench/scale_bench.sh — the 8 GB workstation: memwall quant --corpus
# --method awq+gptq --max-memory on a synthetic F16 GGUF with the layer shapes
# of a 32B-class model (hidden 5120, intermediate 27648, 64 q heads / 8 kv
# heads, head dim 128; vocab 4096 with tinyllama-8m's tokenizer so the corpus
# can be tokenized; random weights with outliers, bench/quant_mkmodel.c).
# For each layer count and sample count: wall and CPU seconds, peak RSS
# (GNU time) and the peaks of anonymous and file-backed resident memory
# (/proc/PID/status sampled every 0.2 s), and memwall's own time line
# (forward GEMMs, Hessians with their GFLOP/s, AWQ search, GPTQ factor and
# sweep). OpenBLAS's own multi-threaded sgemm on this machine, measured in the
# same run, is the yardstick for the GFLOP/s. Extrapolation: forward and
# Hessian time grow with the samples, the rest (GPTQ, AWQ) does not; x layers;
# 16 cores assume the tile-parallel work scales with the cores (an assumption,
# stated, not measured here).
#
# usage: bench/scale_bench.sh [BUILD_DIR]
#   env: SCALE_SAMPLES ("4": list), SCALE_SEQ (512), SCALE_LAYERS ("1"),
#        SCALE_THREADS (nproc), SCALE_METHOD (awq+gptq), SCALE_MAXMEM (6G; "default": no
#        --max-memory, the machine's bound or MW_MEMAVAILABLE's; "none": unbounded),
#        SCALE_PRESET (Q4_K_M), SCALE_OUT (BUILD/scale-bench), SCALE_CORPUS (calib.txt: ~170
#        samples of 512 tokens; more samples need a longer text),
#        SCALE_SHAPE ("5120 27648 64 8": n_embd n_ff heads kv_heads; e.g. "1024 2816 16 4"
#        for a quick sweep of sample counts)
# Heavy on the real shapes: ~1 GB of F16 per layer, a 27648² Hessian (3 GiB)
# factored in place, ~10 GB of scratch files per layer at 128 x 512.
# Results: bench/out/scale.txt.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
samples_list=${SCALE_SAMPLES:-4}
seq=${SCALE_SEQ:-512}
layers=${SCALE_LAYERS:-1}
thr=${SCALE_THREADS:-$(nproc)}
method=${SCALE_METHOD:-awq+gptq}
maxmem=${SCALE_MAXMEM:-6G}
mm=(--max-memory "$maxmem")
[ "$maxmem" = default ] && mm=()
preset=${SCALE_PRESET:-Q4_K_M}
shape=${SCALE_SHAPE:-"5120 27648 64 8"}
out=${SCALE_OUT:-$build/scale-bench}
corpus=${SCALE_CORPUS:-$src/datasets/corpora/calib.txt}
tok=$src/datasets/reference/tinyllama-8m.llamacpp-f16.gguf
report=$src/bench/out/scale.txt
mkdir -p "$out" "$src/bench/out"
mw=$out/memwall.bin # a copy: a rebuild during the run does not change the binary
cp "$build/tools/memwall" "$mw"
[ -x /usr/bin/time ] || { echo "scale_bench: needs GNU time (/usr/bin/time)" >&2; exit 77; }

cc -std=c11 -O2 -I"$src" "$src/bench/quant_mkmodel.c" "$build/gguf/libmw_gguf.a" \
    "$build/core/libmw_core.a" -lm -o "$out/quant_mkmodel"
cc -std=c11 -O2 "$src/bench/sgemm_peak.c" -lopenblas -o "$out/sgemm_peak"
read -r E _ _ _ <<<"$shape"
peak=$("$out/sgemm_peak" 2048 2048 "$E" "$thr" 3)

. "$src/bench/rss_sample.sh"

{
echo "# scale_bench $(date -u +%FT%TZ) $(uname -m) $(nproc) CPUs, threads $thr, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# shapes (n_embd n_ff heads kv_heads): $shape, vocab 4096; method $method, --max-memory $maxmem, $preset"
echo "# yardstick: OpenBLAS $peak"
printf '| layers | samples x seq | wall s | CPU s | peak RSS MiB | peak anon MiB | peak file MiB | fwd GEMM GFLOP/s | Hessian GFLOP/s | time line |\n|---|---|---|---|---|---|---|---|---|---|\n'
} | tee "$report"
for L in $layers; do
    m=$out/synth-${shape// /x}-${L}L.gguf
    # shellcheck disable=SC2086
    [ -s "$m" ] || "$out/quant_mkmodel" "$m" "$L" $shape 4096 "$tok"
    for S in $samples_list; do
        o=$out/synth-${L}L-$S.gguf
        rm -f "$o"
        log=$out/log-${L}L-$S.txt
        /usr/bin/time -v -o "$out/time.txt" "$mw" quant "$m" -o "$o" --preset "$preset" \
            --corpus "$corpus" --method "$method" --samples "$S" \
            --seq-len "$seq" -t "$thr" "${mm[@]}" > "$log" 2>&1 &
        tp=$!
        cp=""
        for _ in $(seq 50); do cp=$(pgrep -P "$tp" || true); [ -n "$cp" ] && break; sleep 0.1; done
        [ -n "$cp" ] && rss_sample "$cp" "$out/rss.txt" &
        sp=$!
        wait "$tp" || { echo "scale_bench: memwall quant failed ($L layers, $S samples):" >&2;
                        tail "$log" >&2; exit 1; }
        wait "$sp" || true
        read -r anon file < "$out/rss.txt" || { anon=0; file=0; }
        wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0;
                            for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$out/time.txt")
        cpu=$(awk -F': ' '/User time/ {u = $2} /System time/ {s = $2} END {print u + s}' "$out/time.txt")
        rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$out/time.txt")
        tl=$(grep -o 'time: .*' "$log" | head -1 || true)
        gf=$(sed -n 's/.*forward GEMMs [0-9.]*s ([0-9.e+]* GFLOP, \([0-9.]*\) GFLOP\/s).*/\1/p' <<<"$tl")
        hf=$(sed -n 's/.*Hessians [0-9.]*s ([0-9.e+]* GFLOP, \([0-9.]*\) GFLOP\/s).*/\1/p' <<<"$tl")
        printf '| %s | %s x %s | %s | %s | %d | %d | %d | %s | %s | %s |\n' "$L" "$S" "$seq" "$wall" \
            "$cpu" $((rss / 1024)) $((anon / 1024)) $((file / 1024)) "${gf:-?}" "${hf:-?}" \
            "${tl#time: }" | tee -a "$report"
        ls "$out" | grep -q 'tmp\.spill' && { echo "scale_bench: spill file left behind" >&2; exit 1; }
        # extrapolation from this run: fixed = AWQ + GPTQ (sample-independent), the rest x 128/S
        awk -v tl="$tl" -v S="$S" -v L="$L" -v thr="$thr" 'BEGIN {
            n = split(tl, w, /[ :,()s]+/); tot = awq = fac = swp = 0
            if (match(tl, /calibration [0-9.]+s/)) tot = substr(tl, RSTART + 12, RLENGTH - 13) + 0
            if (match(tl, /AWQ search [0-9.]+s/)) awq = substr(tl, RSTART + 11, RLENGTH - 12) + 0
            if (match(tl, /GPTQ factor [0-9.]+s/)) fac = substr(tl, RSTART + 12, RLENGTH - 13) + 0
            if (match(tl, /GPTQ sweep [0-9.]+s/)) swp = substr(tl, RSTART + 11, RLENGTH - 12) + 0
            fixed = (awq + fac + swp) / L; lin = (tot - awq - fac - swp) / L
            per = fixed + lin * 128 / S
            printf "# per layer at %d x 512 (measured): %.0f s; extrapolated to 128 x 512: %.0f s/layer " \
                   "(fixed %.0f + per-sample %.0f); a 64-layer model: %.1f h on %d threads, %.1f h on 16 " \
                   "cores if the work scales with the cores\n", S, tot / L, per, fixed, lin * 128 / S,
                   per * 64 / 3600, thr, per * 64 / 3600 * thr / 16 }' | tee -a "$report"
        rm -f "$o"
    done
done
