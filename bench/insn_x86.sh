#!/usr/bin/env bash
# bench/insn_x86.sh — x86-64 instructions per decoded token, memwall-run
# against llama.cpp built for the same ISA, counted by valgrind (callgrind's
# Ir): deterministic, so it works where perf has no hardware counters (VMs)
# and on a machine other jobs share, where tokens/s say little.
#
#   bench/insn_x86.sh [MODEL.gguf ...]
#
# Models (default): bench/out/speed's tinyllama-8m and 2048-wide Q4_K_M files
# and its 512-token prompt, made by `MW_SPEED_PREPARE=1 bench/speed_bench.sh`.
# ISA (MW_INSN_ISA, default avx2): memwall-run with MW_RT_KERNELS=avx2 and
# llama.cpp as `llama-peer --cpu haswell`, node-llama-cpp's build of 80fb11a
# for SSE4.2 AVX F16C FMA AVX2 BMI2 (GGML_NATIVE off, no AVX-512, no VNNI);
# MW_INSN_ISA=native: both programs' own choice (valgrind's CPUID hides
# AVX-512, so that is AVX2 too, or AVX-VNNI where the CPU has it).
# Per token = (count with N2 generated tokens - count with N1) / (N2 - N1):
# loading, llama.cpp's weight repacking and the prompt cancel. Greedy,
# 1 thread (counts with more threads would add the threads' spinning), same
# file and prompt for both. Depths (MW_INSN_DEPTHS, default "0 512"): 0 is
# an 11-token prompt, 512 the 512-token prompt; MW_INSN_N1/N2 (default 4/12).
# Depth "prompt" counts per PROMPT token instead: (count with the 512-token
# prompt - count with the 11-token one) / (512 - 11), each run generating one
# token (memwall-run's default --batch 64, llama.cpp one llama_decode of the
# prompt; loading and the one decoded token cancel):
# MW_INSN_DEPTHS=prompt bench/insn_x86.sh.
# MW_INSN_PROMPT: the long prompt's file (default bench/out/speed/prompt512.txt;
# speed_bench.sh writes prompt512-qwen35.txt, prompt512-gemma4e2b.txt for
# the models with their own vocabularies).
# valgrind counts each iteration of a rep-prefixed string instruction
# (memset, memcpy) as one instruction; both programs use them little per
# token. MW_INSN_PROFILE=1 prints each program's top functions per token.
#
# Environment: MW_BUILD (memwall build dir with tools/memwall-run, default
# <repo>/build/speed). Output: the table on stdout, callgrind files under
# bench/out/insn-x86/. Exit 77 when valgrind or llama-peer is missing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
OUT=$repo/bench/out/insn-x86
mkdir -p "$OUT"
BUILD=${MW_BUILD:-$repo/build/speed}
ISA=${MW_INSN_ISA:-avx2}
N1=${MW_INSN_N1:-4}
N2=${MW_INSN_N2:-12}
DEPTHS=${MW_INSN_DEPTHS:-0 512}
RUN=$BUILD/tools/memwall-run
say() { printf 'insn-x86: %s\n' "$*" >&2; }
[[ -x $RUN ]] || { say "no $RUN (MW_BUILD)"; exit 2; }
command -v valgrind >/dev/null || { say "SKIP: no valgrind"; exit 77; }
PEER=$(bash "$repo/tests/peer/setup.sh" 2>/dev/null | tail -n1) || { say "SKIP: no llama-peer"; exit 77; }
case $ISA in
avx2) MWENV=(MW_RT_KERNELS=avx2) LCPU=(--cpu haswell) ;;
native) MWENV=() LCPU=(--cpu auto) ;;
*) say "MW_INSN_ISA: avx2 or native"; exit 2 ;;
esac
SPEED=$repo/bench/out/speed
if [[ $# -eq 0 ]]; then
    set -- "$SPEED/tinyllama-8m.Q4_K_M.gguf" "$SPEED/llama-2048x8-v4096.Q4_K_M.gguf"
fi
for m in "$@"; do [[ -s $m ]] || { say "no $m (MW_SPEED_PREPARE=1 bench/speed_bench.sh makes it)"; exit 2; }; done
SHORT="It was a dark and stormy night, and"
LONG_FILE=${MW_INSN_PROMPT:-$SPEED/prompt512.txt} # a model with its own vocabulary: its own 512-token text

# ir NAME CMD...: callgrind's total instruction count of CMD (environment: IRENV)
IRENV=()
ir() {
    local name=$1
    shift
    env "${IRENV[@]}" valgrind --tool=callgrind --callgrind-out-file="$OUT/$name.cg" "$@" \
        >/dev/null 2>"$OUT/$name.log" ||
        { say "failed: $* ($OUT/$name.log)"; exit 1; }
    sed -n 's/^\(summary\|totals\): *\([0-9]*\).*/\2/p' "$OUT/$name.cg" | head -n1
}
# selfcost FILE: "instructions<TAB>function" per function (callgrind_annotate)
selfcost() {
    callgrind_annotate --threshold=100 "$1" 2>/dev/null | grep -E '^ *[0-9,]+ +\(' | grep -v '=>' |
        sed -E 's/,//g; s/^ *([0-9]+) +\([^)]*\) +/\1\t/'
}
# profile A B: per-token instructions by function, top 8
profile() {
    selfcost "$OUT/$1.cg" >"$OUT/.a"
    selfcost "$OUT/$2.cg" >"$OUT/.b"
    awk -F'\t' -v k=$((N2 - N1)) 'NR == FNR { a[$2] = $1; next }
        { d = ($1 - a[$2]) / k; if (d > 1000) printf "  %12.0f %s\n", d, $2 }' "$OUT/.a" "$OUT/.b" |
        sort -rn | sed -n '2,9p'
}

printf '%-34s %5s %14s %14s %6s\n' file depth memwall/token llama.cpp/token ratio
for model in "$@"; do
    b=$(basename "$model" .gguf)
    for depth in $DEPTHS; do
        case $depth in
        0) P=$SHORT ;;
        512) [[ -s $LONG_FILE ]] || { say "no $LONG_FILE"; exit 2; }
             P=$(cat "$LONG_FILE") ;;
        prompt) ;;
        *) say "depth $depth: 0, 512 or prompt"; exit 2 ;;
        esac
        declare -A C=()
        if [[ $depth == prompt ]]; then
            [[ -s $LONG_FILE ]] || { say "no $LONG_FILE"; exit 2; }
            P=$(cat "$LONG_FILE")
            printf '%s' "$SHORT" >"$OUT/short.txt"
            k1=$("$RUN" -m "$model" --tokenize "$OUT/short.txt" | wc -w)
            k2=$("$RUN" -m "$model" --tokenize "$LONG_FILE" | wc -w)
            for w in short long; do
                [[ $w == short ]] && Q=$SHORT || Q=$P
                IRENV=("${MWENV[@]}")
                C[mw$w]=$(ir "mw-$b-prompt-$w" "$RUN" -m "$model" -p "$Q" -n 1 --temp 0 --ignore-eos -t 1 -c 1024 -q)
                IRENV=()
                C[lc$w]=$(ir "lc-$b-prompt-$w" "$PEER" "${LCPU[@]}" --threads 1 bench "$model" "$Q" 1)
            done
            awk -v f="$b" -v m1="${C[mwshort]}" -v m2="${C[mwlong]}" -v l1="${C[lcshort]}" -v l2="${C[lclong]}" \
                -v k=$((k2 - k1)) 'BEGIN { m = (m2 - m1) / k; l = (l2 - l1) / k;
                printf "%-34s %6s %14.0f %14.0f %5.2fx\n", f, "prompt", m, l, m / l }'
            echo "  raw: memwall $k1 tokens ${C[mwshort]}, $k2 tokens ${C[mwlong]}; llama.cpp ${C[lcshort]} ${C[lclong]}" >&2
            if [[ ${MW_INSN_PROFILE:-0} == 1 ]]; then
                N1=0 N2=$((k2 - k1))
                { echo "memwall-run ($b, per prompt token):"; profile "mw-$b-prompt-short" "mw-$b-prompt-long"
                  echo "llama.cpp:"; profile "lc-$b-prompt-short" "lc-$b-prompt-long"; } >&2
                N1=${MW_INSN_N1:-4} N2=${MW_INSN_N2:-12}
            fi
            continue
        fi
        for n in $N1 $N2; do
            IRENV=("${MWENV[@]}")
            C[mw$n]=$(ir "mw-$b-d$depth-n$n" "$RUN" -m "$model" -p "$P" -n "$n" --temp 0 --ignore-eos \
                -t 1 -c 1024 -q)
            IRENV=()
            C[lc$n]=$(ir "lc-$b-d$depth-n$n" "$PEER" "${LCPU[@]}" --threads 1 bench "$model" "$P" "$n")
        done
        awk -v f="$b" -v d="$depth" -v m1="${C[mw$N1]}" -v m2="${C[mw$N2]}" -v l1="${C[lc$N1]}" \
            -v l2="${C[lc$N2]}" \
            -v k=$((N2 - N1)) 'BEGIN { m = (m2 - m1) / k; l = (l2 - l1) / k;
            printf "%-34s %5s %14.0f %14.0f %5.2fx\n", f, d, m, l, m / l }'
        if [[ ${MW_INSN_PROFILE:-0} == 1 ]]; then
            { echo "memwall-run ($b, depth $depth):"; profile "mw-$b-d$depth-n$N1" "mw-$b-d$depth-n$N2"
              echo "llama.cpp:"; profile "lc-$b-d$depth-n$N1" "lc-$b-d$depth-n$N2"; } >&2
        fi
    done
done
