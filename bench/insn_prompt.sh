#!/usr/bin/env bash
# bench/insn_prompt.sh — aarch64 instructions retired per PROMPT token,
# memwall-run vs llama.cpp's own arm64 build (bench/insn_peer_setup.sh), under
# qemu-aarch64, 1 thread, on the same GGUF file (the prompt-side companion of
# bench/insn_bench.sh, which measures decode).
#
#   bench/insn_prompt.sh [ARM_BUILD] [MODEL.gguf ...]
#
# ARM_BUILD: an aarch64 cross build dir with memwall-run (default build-a64).
# Without models: Q4_K_M of datasets/tinyllama-8m, made with the x86 memwall of
# ${MW_X86_BUILD:-build}. Environment: MW_QEMU_CPUS (default "cortex-a76
# max,sve=off": dotprod -> the SDOT gemm / FEAT_I8MM -> the SMMLA gemm; with
# SVE on, llama.cpp would run its SVE build instead of its i8mm one),
# MW_PROMPT_P1/P2 (about 96 / 480 tokens: tinyllama-8m's context is 512),
# MW_INSN_PEER=0 (memwall only), MW_RUN_ENV (extra environment for
# memwall-run, e.g. MW_RT_KERNELS=dotprod), MW_INSN_PROFILE=1 (memwall's top
# symbols in the P2 run, to stderr).
#
# Per prompt token = (count with the P2-token prompt - count with the P1-token
# prompt) / (P2 - P1), each run generating one token: loading, the one decode
# step and the exit cancel. Both runtimes run their default batching
# (memwall-run --batch 64; llama.cpp one llama_decode of the whole prompt,
# n_ubatch 512). Counting as in insn_bench.sh (qemu's log through a FIFO,
# bench/insn_count.c).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
ARM_BUILD=${1:-$repo/build-a64}
shift || true
X86_BUILD=${MW_X86_BUILD:-$repo/build}
CPUS=${MW_QEMU_CPUS:-cortex-a76 max,sve=off}
P1=${MW_PROMPT_P1:-96}
P2=${MW_PROMPT_P2:-480}
OUT=$repo/bench/out/insn_prompt
mkdir -p "$OUT"
MWRUN=$ARM_BUILD/tools/memwall-run
[[ -x $MWRUN ]] || { echo "no $MWRUN (cmake --build $ARM_BUILD --target memwall-run)" >&2; exit 2; }
command -v qemu-aarch64 >/dev/null || { echo "no qemu-aarch64" >&2; exit 77; }

cc -std=c11 -O2 -Wall -Wextra -o "$OUT/insn_count" "$here/insn_count.c"

# count FUNC ARG (bench/insn_lib.sh)
# shellcheck source=bench/insn_lib.sh
source "$here/insn_lib.sh"

PEER=
if [[ ${MW_INSN_PEER:-1} != 0 ]]; then
    PEER=$(bash "$here/insn_peer_setup.sh" | tail -n 1) || PEER=
    [[ -n $PEER ]] || echo "insn_prompt: no llama.cpp arm64 peer, memwall only" >&2
fi

if [[ $# -eq 0 ]]; then
    [[ -x $X86_BUILD/tools/memwall ]] || { echo "no $X86_BUILD/tools/memwall (MW_X86_BUILD)" >&2; exit 2; }
    "$X86_BUILD/tools/memwall" convert "$repo/datasets/tinyllama-8m" -o "$OUT/f16.gguf" --type f16 >/dev/null
    "$X86_BUILD/tools/memwall" quant "$OUT/f16.gguf" -o "$OUT/q4_k_m.gguf" --preset Q4_K_M >/dev/null
    set -- "$OUT/q4_k_m.gguf"
fi

# A prompt of about N tokens (BOS included), counted with the file's tokenizer.
SENT="The little cat sat on the warm mat by the door and looked at the birds in the old tree. "
ntok() { printf '%s' "$2" >"$OUT/tok.txt"; qemu-aarch64 -L /usr/aarch64-linux-gnu "$MWRUN" -m "$1" --tokenize "$OUT/tok.txt" | wc -w; }
make_prompt() { # MODEL N -> prompt text on stdout; its token count in $OUT/ntok
    local t="" k=0
    while :; do
        k=$((k + 1))
        t+="$SENT"
        [[ $(ntok "$1" "$t$SENT") -le $2 ]] || break
    done
    ntok "$1" "$t" >"$OUT/ntok"
    printf '%s' "$t"
}

aarch64-linux-gnu-nm -n --defined-only "$MWRUN" >"$OUT/memwall-run.nm"

printf '%-14s %-11s %14s %14s %7s\n' file cpu memwall/ptok llama.cpp/ptok ratio
for model in "$@"; do
    pr1=$(make_prompt "$model" "$P1"); n1=$(cat "$OUT/ntok")
    pr2=$(make_prompt "$model" "$P2"); n2=$(cat "$OUT/ntok")
    echo "prompts: $n1 and $n2 tokens" >&2
    for cpu in $CPUS; do
        q=(qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu "$cpu")
        mw() { env ${MW_RUN_ENV:-} "${q[@]}" "${@:2}" "$MWRUN" -m "$model" -p "$1" --temp 0 --ignore-eos -q -t 1 -n 1; }
        lc() { "${q[@]}" "${@:2}" "$PEER" -t 1 generate "$model" "$1" 1; }
        m1=$(count mw "$pr1")
        NM=''
        [[ ${MW_INSN_PROFILE:-0} == 1 ]] && NM=$OUT/memwall-run.nm
        m2=$(count mw "$pr2")
        [[ -n $NM ]] && { echo "memwall-run $cpu, $n2-token prompt, top symbols:"; head -n 30 "$OUT/profile.txt"; } >&2
        NM=''
        l1=0 l2=0
        if [[ -n $PEER ]]; then l1=$(count lc "$pr1"); l2=$(count lc "$pr2"); fi
        awk -v f="$(basename "$model")" -v c="$cpu" -v m1="$m1" -v m2="$m2" -v l1="$l1" -v l2="$l2" \
            -v k=$((n2 - n1)) 'BEGIN{m=(m2-m1)/k; l=(l2-l1)/k;
            if (l > 0) printf "%-14s %-11s %14.0f %14.0f %6.2fx\n", f, c, m, l, m/l;
            else printf "%-14s %-11s %14.0f %14s %7s\n", f, c, m, "-", "-"}'
        echo "  raw: memwall $m1 ($n1-token prompt) $m2 ($n2); llama.cpp $l1 $l2" >&2
    done
done
