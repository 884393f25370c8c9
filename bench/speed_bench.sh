#!/usr/bin/env bash
# bench/speed_bench.sh — x86-64 target table in one command:
# memwall-run against llama.cpp's llama-bench (pp512, tg128 at depths 0 and
# 512), measured in the same run, on the same files, at 1, 2 and 4 threads.
#
#   bench/speed_bench.sh [THREADS...]      (default: 1 2 4)
#
# Files (made once, kept under bench/out/speed/):
#   tiny  tinyllama-8m Q4_K_M: datasets/reference/tinyllama-8m.llamacpp-f16.gguf
#         quantized by llama.cpp's quantizer (llama-peer quantize, or the
#         llama-quantize built by bench/llama_bench_setup.sh); `memwall quant
#         --preset Q4_K_M` of datasets/tinyllama-8m only when neither exists
#   wide  a random llama, 8 layers, n_embd 2048, n_ff 5632, 32 heads,
#         4 kv heads, vocab 4096 (bench/quant_mkmodel.c, tinyllama-8m's
#         tokenizer), quantized to Q4_K_M by llama.cpp's quantizer (~222 MB)
#   qwen35 a random Qwen3.5-layout model (tests/tools/rt_mkmodel): n_embd
#         2048, 4 layers (3 gated delta net: key heads 16, value heads 32,
#         S 128, conv 4; 1 gated full attention: 8 heads / 2 kv of 256,
#         n_rot 64), n_ff 4096, rt_fixture's 323-token vocabulary,
#         quantized to Q4_K_M by llama.cpp's quantizer (~126 MB); its own
#         vocabulary, so run it alone (MW_SPEED_MODELS=qwen35): the prompt
#         is cut to 512 tokens of the first model's tokenizer
#   gemma4e2b a random Gemma 4 model of E2B's widths (hidden 1536, 8 heads
#         of 256 sliding / 512 full, 1 kv head, n_ff 6144 / 12288 in the
#         shared-KV layers, per-layer inputs 256, window 512) cut to 5 layers
#         [sliding, sliding, full, sliding, full] (the last 2 shared-KV) and a
#         4096-token vocabulary (tests/fixtures/mk_gemma4_gguf.py
#         --shape-like), quantized to Q4_K_M by llama.cpp's quantizer
#         (~150 MB); its own vocabulary: run it alone (MW_SPEED_MODELS=gemma4e2b)
# Per file and thread count T:
#   memwall-run  a 512-token prompt (text from datasets/corpora/eval.txt cut
#                to 512 tokens, BOS included) then 128 tokens: prompt tok/s
#                (~pp512) and decode tok/s after it (~tg128 at depth 512);
#                a 4-token prompt then 128 tokens: decode at depth ~0
#                (--temp 0 --ignore-eos --ctx 1024); REPS runs of each,
#                the mean tok/s (as llama-bench's avg_ts)
#   llama.cpp    llama-bench -m F -p 512 -n 0 -t T -r REPS, then -p 0 -n 128
#                -d 0,512 (the tests of -p 512 -n 128 -d 0,512 without its
#                unused pp512 @ d512; bench/llama_bench_setup.sh); when it cannot be built,
#                llama-peer --threads T bench F PROMPT 128 with the same
#                prompts (said in the table's header)
#   peak RSS     /usr/bin/time -f %M of memwall-run's 512+128 run and of the
#                llama-bench processes (the larger) / llama-peer bench
# Targets (at 2 threads): prompt >= 0.7x pp512, decode at depth
# 512 >= 0.9x tg128 @ d512, peak RSS <= llama.cpp's.
#
# Environment:
#   MW_BUILD          memwall build dir (default <repo>/build/speed; configured
#                     Release and built for memwall, memwall-run when needed)
#   MW_SPEED_REPS     llama-bench -r and memwall-run runs per figure (default 3)
#   MW_SPEED_MODELS   which files (default "tiny wide"; also "qwen35", "gemma4e2b", "gptoss")
#   MW_SPEED_PEER=1   skip llama-bench, use llama-peer bench
#   MW_RUN_ARGS       extra memwall-run options (e.g. "--batch 512")
#   MW_SPEED_ISA=avx2 the AVX2-only comparison on any x86-64 CPU: memwall-run
#                     with MW_RT_KERNELS=avx2, llama.cpp built for AVX2 + FMA +
#                     F16C without AVX-512 (bench/llama_bench_setup.sh with
#                     MW_LLAMA_ISA=avx2: GGML_NATIVE=OFF GGML_AVX2=ON ...), or
#                     `llama-peer --cpu haswell` (node-llama-cpp's build for
#                     the same ISA); table, CSV and logs get an -avx2 suffix
#   MW_SPEED_ISA=avx512 memwall-run's own table against llama.cpp built with
#                     AVX-512 and VNNI but no AMX (MW_LLAMA_ISA=avx512): on a
#                     CPU with AMX, where the native llama-bench crashes
#   MW_SPEED_PREPARE=1 make the files and the prompt, measure nothing
#                     (bench/insn_x86.sh counts instructions on them)
# Output: bench/out/speed/table.txt (the table), results.csv, logs/.
# A benchmark, not a test: nothing is asserted; other load on the machine
# changes every figure. Run it on an idle machine: llama.cpp's threads spin
# at a barrier after every op, so with T = the core count and another job
# running, its decode collapses (seen here: tg128 3.3 tok/s at 2 threads on
# 2 busy cores, against 48 at 1 thread) and the ratios say nothing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
OUT=$here/out/speed
LOGS=$OUT/logs
mkdir -p "$OUT" "$LOGS"
BUILD=${MW_BUILD:-$repo/build/speed}
REPS=${MW_SPEED_REPS:-3}
MODELS=${MW_SPEED_MODELS:-tiny wide}
read -r -a RUN_EXTRA <<< "${MW_RUN_ARGS:-}"
THREADS=("$@")
[[ ${#THREADS[@]} -gt 0 ]] || THREADS=(1 2 4)
say() { printf 'speed-bench: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }
ISA=${MW_SPEED_ISA:-native}
case $ISA in
native) SFX="" PEER_CPU=() ;;
avx2) SFX=-avx2 PEER_CPU=(--cpu haswell) LOGS=$LOGS$SFX
      export MW_RT_KERNELS=avx2
      mkdir -p "$LOGS" ;;
avx512) SFX=-avx512 PEER_CPU=() LOGS=$LOGS$SFX   # memwall's own table; llama.cpp without AMX
      mkdir -p "$LOGS" ;;
*) die "MW_SPEED_ISA: native, avx2 or avx512" ;;
esac
[[ -x /usr/bin/time ]] || die "GNU time (/usr/bin/time) is needed for peak RSS (apt-get install time)"

# --- memwall ---
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    say "configuring $BUILD (Release)"
    cmake -S "$repo" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$LOGS/memwall-configure.log" 2>&1 ||
        die "cmake configure failed ($LOGS/memwall-configure.log)"
fi
BUILD=$(cd "$BUILD" && pwd)
cmake --build "$BUILD" -j"${MW_BENCH_JOBS:-2}" --target memwall memwall-run \
    >"$LOGS/memwall-build.log" 2>&1 || die "memwall build failed ($LOGS/memwall-build.log)"
MW=$BUILD/tools/memwall
RUN=$BUILD/tools/memwall-run
[[ -x $MW && -x $RUN ]] || die "no $MW / $RUN"

# --- llama.cpp ---
PEER=$(bash "$repo/tests/peer/setup.sh" 2>"$LOGS/peer-setup.log" | tail -n1) || PEER=
LBENCH=
if [[ ${MW_SPEED_PEER:-0} != 1 ]]; then
    say "llama-bench: bench/llama_bench_setup.sh (the first build takes 10-20 min)"
    LBENCH=$(MW_LLAMA_ISA=$ISA bash "$here/llama_bench_setup.sh" 2>"$LOGS/llama-bench-setup.log" | tail -n1) || LBENCH=
    [[ -n $LBENCH ]] || say "llama-bench could not be built ($LOGS/llama-bench-setup.log): llama-peer bench instead"
fi
[[ -n $LBENCH || -n $PEER ]] || die "neither llama-bench nor llama-peer is available"
LQUANT=
[[ -n $LBENCH && -x $(dirname "$LBENCH")/llama-quantize ]] && LQUANT=$(dirname "$LBENCH")/llama-quantize

REF_F16=$repo/datasets/reference/tinyllama-8m.llamacpp-f16.gguf
[[ -f $REF_F16 ]] || die "no $REF_F16"
# llamacpp_quant IN OUT: Q4_K_M by llama.cpp's quantizer; prints its name
llamacpp_quant() {
    if [[ -n $PEER ]]; then
        "$PEER" --threads 2 quantize "$1" "$2.tmp" Q4_K_M >"$LOGS/quant-$(basename "$2").log" 2>&1 &&
            mv "$2.tmp" "$2" && echo "llama.cpp (llama-peer quantize)" && return 0
    fi
    if [[ -n $LQUANT ]]; then
        "$LQUANT" "$1" "$2.tmp" Q4_K_M 2 >"$LOGS/quant-$(basename "$2").log" 2>&1 &&
            mv "$2.tmp" "$2" && echo "llama.cpp (llama-quantize)" && return 0
    fi
    rm -f "$2.tmp"
    return 1
}
declare -A FILE QUANTIZER
for name in $MODELS; do
    case $name in
    tiny)
        f=$OUT/tinyllama-8m.Q4_K_M.gguf
        if [[ ! -s $f ]]; then
            q=$(llamacpp_quant "$REF_F16" "$f") || {
                say "no llama.cpp quantizer: memwall quant --preset Q4_K_M"
                "$MW" quant "$repo/datasets/tinyllama-8m" -o "$f" --preset Q4_K_M \
                    >"$LOGS/quant-tiny.log" 2>&1 || die "memwall quant failed ($LOGS/quant-tiny.log)"
                q="memwall quant --preset Q4_K_M"
            }
            echo "$q" >"$f.quantizer"
        fi ;;
    wide)
        f=$OUT/llama-2048x8-v4096.Q4_K_M.gguf
        if [[ ! -s $f ]]; then
            cc -std=c11 -O2 -Wall -Wextra -I"$repo" "$here/quant_mkmodel.c" "$BUILD/gguf/libmw_gguf.a" \
                "$BUILD/core/libmw_core.a" -lm -o "$OUT/quant_mkmodel"
            f16=$OUT/llama-2048x8-v4096.f16.gguf
            say "making $f16 (random weights) and its Q4_K_M"
            "$OUT/quant_mkmodel" "$f16" 8 2048 5632 32 4 4096 "$REF_F16" >"$LOGS/mkmodel.log" 2>&1 ||
                die "quant_mkmodel failed ($LOGS/mkmodel.log)"
            q=$(llamacpp_quant "$f16" "$f") || {
                say "no llama.cpp quantizer: memwall quant --preset Q4_K_M"
                "$MW" quant "$f16" -o "$f" --preset Q4_K_M >"$LOGS/quant-wide.log" 2>&1 ||
                    die "memwall quant failed ($LOGS/quant-wide.log)"
                q="memwall quant --preset Q4_K_M"
            }
            echo "$q" >"$f.quantizer"
            rm -f "$f16"
        fi ;;
    qwen35)
        f=$OUT/qwen35-2048x4.Q4_K_M.gguf
        if [[ ! -s $f ]]; then
            cmake --build "$BUILD" -j"${MW_BENCH_JOBS:-2}" --target rt_mkmodel \
                >"$LOGS/rt_mkmodel-build.log" 2>&1 || die "rt_mkmodel build failed ($LOGS/rt_mkmodel-build.log)"
            f16=$OUT/qwen35-2048x4.f16.gguf
            say "making $f16 (random weights) and its Q4_K_M"
            "$BUILD/tests/rt_mkmodel" model "$f16" --arch qwen35 --embd 2048 --heads 8 2 --ff 4096 \
                --layers 4 --ssm-state 128 --ssm-heads 16 32 --no-mtp --type f16 \
                >"$LOGS/mkmodel-qwen35.log" 2>&1 || die "rt_mkmodel failed ($LOGS/mkmodel-qwen35.log)"
            q=$(llamacpp_quant "$f16" "$f") || die "no llama.cpp quantizer for $f16"
            echo "$q" >"$f.quantizer"
            rm -f "$f16"
        fi ;;
    gemma4e2b)
        f=$OUT/gemma4-e2b-shape.Q4_K_M.gguf
        if [[ ! -s $f ]]; then
            f16=$OUT/gemma4-e2b-shape.F16.gguf
            say "making $f16 (random weights) and its Q4_K_M"
            python3 "$repo/tests/fixtures/mk_gemma4_gguf.py" --shape-like \
                "$repo/tests/fixtures/configs/gemma-4-E2B/config.json" "$f16" \
                >"$LOGS/mkmodel-gemma4e2b.log" 2>&1 || die "mk_gemma4_gguf failed ($LOGS/mkmodel-gemma4e2b.log)"
            q=$(llamacpp_quant "$f16" "$f") || die "no llama.cpp quantizer for $f16"
            echo "$q" >"$f.quantizer"
            rm -f "$f16"
        fi ;;
    gptoss)
        # gpt-oss's layout at hidden 1024 (4 layers, 16 query / 4 KV heads,
        # 16 experts of 1024, MXFP4 as gpt-oss ships them; window 128): both
        # programs run the file as written
        f=$OUT/gptoss-1024x4.gguf
        if [[ ! -s $f ]]; then
            say "making $f (random weights)"
            python3 "$repo/tests/fixtures/mk_gptoss_gguf.py" "$f" --window 128 \
                --shape 1024,4,16,4,16,1024 >"$LOGS/mkmodel-gptoss.log" 2>&1 ||
                die "mk_gptoss_gguf failed ($LOGS/mkmodel-gptoss.log)"
            echo "mk_gptoss_gguf.py (MXFP4 experts)" >"$f.quantizer"
        fi ;;
    *) die "unknown model '$name' in MW_SPEED_MODELS (tiny, wide, qwen35, gemma4e2b, gptoss)" ;;
    esac
    FILE[$name]=$f
    QUANTIZER[$name]=$(cat "$f.quantizer" 2>/dev/null || echo "?")
done

# --- the 512-token prompt (both files share tinyllama-8m's tokenizer) ---
PROMPT_FILE=$OUT/prompt512.txt
[[ ${MODELS%% *} == qwen35 ]] && PROMPT_FILE=$OUT/prompt512-qwen35.txt # its own vocabulary
[[ ${MODELS%% *} == gemma4e2b ]] && PROMPT_FILE=$OUT/prompt512-gemma4e2b.txt # likewise
[[ ${MODELS%% *} == gptoss ]] && PROMPT_FILE=$OUT/prompt512-gptoss.txt       # likewise
SHORT="It was a"
ntok() { # ntok TEXTFILE: tokens memwall-run feeds for it (BOS included)
    "$RUN" -m "${FILE[${MODELS%% *}]}" --tokenize "$1" -q 2>/dev/null | wc -w
}
if [[ ! -s $PROMPT_FILE ]]; then
    words=$OUT/eval-words.txt
    awk '{ for (i = 1; i <= NF && n < 2000; i++) { print $i; n++ } }' \
        "$repo/datasets/corpora/eval.txt" >"$words"
    lo=1 hi=$(wc -l <"$words")
    while ((lo < hi)); do # the most words whose text has <= 512 tokens
        mid=$(((lo + hi + 1) / 2))
        head -n "$mid" "$words" | paste -sd' ' >"$OUT/try.txt"
        if (($(ntok "$OUT/try.txt") <= 512)); then lo=$mid; else hi=$((mid - 1)); fi
    done
    head -n "$lo" "$words" | paste -sd' ' | tr -d '\n' >"$PROMPT_FILE"
    # one token short at a word boundary: try a prefix of the next word
    next=$(sed -n "$((lo + 1))p" "$words")
    for ((k = 1; k <= ${#next}; k++)); do
        { cat "$PROMPT_FILE"; printf ' %s' "${next:0:k}"; } >"$OUT/try.txt"
        n=$(ntok "$OUT/try.txt")
        ((n <= 512)) || break
        cp "$OUT/try.txt" "$PROMPT_FILE"
        ((n < 512)) || break
    done
    rm -f "$OUT/try.txt" "$words"
fi
N_PROMPT=$(ntok "$PROMPT_FILE")
PROMPT=$(cat "$PROMPT_FILE")
say "prompt: $N_PROMPT tokens (BOS included) from datasets/corpora/eval.txt"
[[ ${MW_SPEED_PREPARE:-0} == 1 ]] && exit 0

# --- measurements ---
# mwrun LOG PROMPT: memwall-run, 128 tokens, REPS times (as llama-bench -r);
# sets PP TG GBS (means of the runs' tok/s, as llama-bench's avg_ts) and RSS (max)
mwrun() {
    local log=$1 p=$2 r pp tg gbs
    : >"$log.all"
    for ((r = 1; r <= REPS; r++)); do
        /usr/bin/time -f '%M' -o "$log.rss$r" "$RUN" -m "$f" -t "$t" -c 1024 -p "$p" -n 128 \
            --temp 0 --ignore-eos "${RUN_EXTRA[@]}" >/dev/null 2>"$log" || die "memwall-run failed ($log)"
        read -r pp tg < <(sed -n 's/.*prompt [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s); generated [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1 \2/p' "$log" | tail -n1)
        gbs=$(sed -n 's/.*: \([0-9.]*\) GB\/s effective.*/\1/p' "$log" | tail -n1)
        echo "$pp $tg $gbs $(tail -n1 "$log.rss$r")" >>"$log.all"
        rm -f "$log.rss$r"
    done
    read -r PP TG GBS RSS < <(awk '{ p += $1; t += $2; g += $3; if ($4 > m) m = $4 }
        END { printf "%.1f %.1f %.2f %d\n", p / NR, t / NR, g / NR, m }' "$log.all")
}
# jfield LINE KEY: a number from a llama-bench jsonl line
jfield() { sed -n "s/.*\"$2\": *\([0-9.e+-]*\).*/\1/p" <<<"$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
mib() { awk -v k="$1" 'BEGIN { if (k == "") print "-"; else printf "%.0f", k / 1024 }'; }

CSV=$OUT/results$SFX.csv
echo "model,threads,mw_pp,ll_pp,mw_tg_d512,ll_tg_d512,mw_tg_d0,ll_tg_d0,mw_rss_kib,ll_rss_kib,mw_gbs_d512,mw_gbs_d0,ll_source" >"$CSV"
for name in $MODELS; do
    f=${FILE[$name]}
    for t in "${THREADS[@]}"; do
        say "$name, $t thread(s): memwall-run"
        mwrun "$LOGS/mw-$name-t$t-p512.log" "$PROMPT"
        mw_pp=$PP mw_tg512=$TG mw_rss=$RSS mw_gbs512=$GBS
        mwrun "$LOGS/mw-$name-t$t-short.log" "$SHORT"
        mw_tg0=$TG mw_gbs0=$GBS
        ll_pp="" ll_tg512="" ll_tg0="" ll_rss=""
        if [[ -n $LBENCH ]]; then
            say "$name, $t thread(s): llama-bench -p 512 -n 0, -p 0 -n 128 -d 0,512, -r $REPS"
            lb=$LOGS/llama-bench-$name-t$t
            # pp512 and tg128 at depths 0 and 512: two runs, so that the
            # pp512 @ d512 of a single -p 512 -n 128 -d 0,512 (not in the
            # table) costs no time
            /usr/bin/time -f '%M' -o "$lb.rss" "$LBENCH" -m "$f" -p 512 -n 0 -t "$t" \
                -r "$REPS" -o jsonl >"$lb.jsonl" 2>"$lb.log" || die "llama-bench failed ($lb.log)"
            /usr/bin/time -f '%M' -o "$lb.rss2" "$LBENCH" -m "$f" -p 0 -n 128 -d 0,512 -t "$t" \
                -r "$REPS" -o jsonl >>"$lb.jsonl" 2>>"$lb.log" || die "llama-bench failed ($lb.log)"
            while IFS= read -r line; do
                np=$(jfield "$line" n_prompt) ng=$(jfield "$line" n_gen) nd=$(jfield "$line" n_depth)
                ts=$(jfield "$line" avg_ts)
                ts=$(awk -v x="$ts" 'BEGIN { printf "%.1f", x }')
                if [[ $np == 512 && $ng == 0 && $nd == 0 ]]; then ll_pp=$ts
                elif [[ $np == 0 && $ng == 128 && $nd == 512 ]]; then ll_tg512=$ts
                elif [[ $np == 0 && $ng == 128 && $nd == 0 ]]; then ll_tg0=$ts; fi
            done <"$lb.jsonl"
            ll_rss=$(cat <(tail -n1 "$lb.rss") <(tail -n1 "$lb.rss2") | sort -n | tail -n1)
            src="llama-bench"
        else
            say "$name, $t thread(s): llama-peer bench"
            lp=$LOGS/llama-peer-$name-t$t
            "$PEER" "${PEER_CPU[@]}" --threads "$t" bench "$f" "$PROMPT" 128 >"$lp-p512.txt" 2>"$lp-p512.log" ||
                die "llama-peer bench failed ($lp-p512.log)"
            "$PEER" "${PEER_CPU[@]}" --threads "$t" bench "$f" "$SHORT" 128 >"$lp-short.txt" 2>"$lp-short.log" ||
                die "llama-peer bench failed ($lp-short.log)"
            ll_pp=$(awk '$1 == "prompt_tokens" { print $6 }' "$lp-p512.txt")
            ll_tg512=$(awk '$1 == "gen_tokens" { print $6 }' "$lp-p512.txt")
            ll_tg0=$(awk '$1 == "gen_tokens" { print $6 }' "$lp-short.txt")
            ll_rss=$(awk '$1 == "maxrss_kib" { print $2 }' "$lp-p512.txt")
            src="llama-peer bench"
        fi
        echo "$name,$t,$mw_pp,$ll_pp,$mw_tg512,$ll_tg512,$mw_tg0,$ll_tg0,$mw_rss,$ll_rss,$mw_gbs512,$mw_gbs0,$src" >>"$CSV"
    done
done

# --- the table ---
TABLE=$OUT/table$SFX.txt
{
    echo "# bench/speed_bench.sh $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
    echo "# memwall $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo ?), kernels: $(sed -n 's/.*: kernels \([^,]*\),.*/\1/p' "$LOGS/mw-${MODELS%% *}-t${THREADS[0]}-p512.log" | head -n1)"
    if [[ -n $LBENCH ]]; then
        echo "# llama.cpp: llama-bench (80fb11a, $(case $ISA in avx2) echo "GGML_NATIVE=OFF, AVX2 FMA F16C BMI2, no AVX-512" ;; avx512) echo "GGML_NATIVE=OFF, AVX-512 F/VBMI/VNNI/BF16 and AVX-VNNI, no AMX" ;; *) echo GGML_NATIVE ;; esac)) -p 512 -n 0 and -p 0 -n 128 -d 0,512, -r $REPS"
    else
        echo "# llama.cpp: llama-peer ${PEER_CPU[*]} bench (node-llama-cpp 3.21.1 prebuilt, 80fb11a) with memwall's prompts (llama-bench not built or MW_SPEED_PEER=1)"
    fi
    echo "# memwall-run (mean of $REPS runs): $N_PROMPT-token prompt (pp), then 128 tokens (tg @512); '$SHORT' then 128 tokens (tg @0); --ctx 1024 ${MW_RUN_ARGS:-}"
    for name in $MODELS; do
        echo "# $name: $(basename "${FILE[$name]}") ($(stat -c %s "${FILE[$name]}") bytes), quantized by ${QUANTIZER[$name]}"
    done
    echo "# tok/s; x = memwall/llama.cpp; targets: pp x >= 0.70, tg@512 x >= 0.90 (2 threads); RSS in MiB"
    printf '%-5s %2s | %8s %8s %5s | %8s %8s %5s | %8s %8s %5s | %6s %6s | %6s\n' \
        model T "pp mw" "pp512" x "tg@512mw" "tg@512" x "tg@0 mw" "tg@0" x "RSS mw" "RSS ll" "GB/s"
    tail -n +2 "$CSV" | while IFS=, read -r name t a b c d e g r1 r2 gbs _ _; do
        xp=$(ratio "$a" "$b") xt=$(ratio "$c" "$d")
        mp=$(awk -v x="$xp" 'BEGIN { print (x != "-" && x + 0 >= 0.70) ? " " : "!" }')
        mt=$(awk -v x="$xt" 'BEGIN { print (x != "-" && x + 0 >= 0.90) ? " " : "!" }')
        printf '%-5s %2s | %8s %8s %4s%s | %8s %8s %4s%s | %8s %8s %5s | %6s %6s | %6s\n' \
            "$name" "$t" "$a" "${b:--}" "$xp" "$mp" "$c" "${d:--}" "$xt" "$mt" "$e" "${g:--}" \
            "$(ratio "$e" "$g")" "$(mib "$r1")" "$(mib "$r2")" "${gbs:--}"
    done
    echo "# '!' after a ratio: below its target. GB/s: memwall-run's 'decode reads ... GB/s effective' at depth 512"
    echo "# (weight bytes per token x decode tok/s; compare bench/stream.sh)."
} >"$TABLE"
cat "$TABLE"
