#!/usr/bin/env bash
# bench/insn_bench.sh — aarch64 instructions retired per generated token,
# memwall-run vs llama.cpp's own arm64 build, under qemu-aarch64, plus the
# memory-bandwidth bound (weight bytes read per token, tokens/s at 60 GB/s).
#
#   bench/insn_bench.sh [ARM_BUILD] [MODEL.gguf ...]
#
# ARM_BUILD: an aarch64 cross build dir with memwall-run (default build-a64).
# Without models: Q4_K_M of datasets/tinyllama-8m, made with the x86 memwall of
# ${MW_X86_BUILD:-build}. Environment: MW_QEMU_CPUS (default "cortex-a76
# cortex-a53": dotprod / plain ARMv8.0 NEON), MW_INSN_N1/N2 (8/40 tokens),
# MW_INSN_PROFILE=1 (memwall's top symbols, to stderr).
#
# Debian 12's qemu 7.2 has no TCG plugins; bench/insn_count.c counts from
# qemu's own log (-d in_asm,exec,nochain) streamed through a FIFO. Per token =
# (count with N2 generated tokens - count with N1) / (N2 - N1): loading,
# tokenizing and the prompt cancel. Greedy, 1 thread, same prompt and file.
# The counter is first checked on a program with a known count.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
ARM_BUILD=${1:-$repo/build-a64}
shift || true
X86_BUILD=${MW_X86_BUILD:-$repo/build}
CPUS=${MW_QEMU_CPUS:-cortex-a76 cortex-a53}
N1=${MW_INSN_N1:-8}
N2=${MW_INSN_N2:-40}
PROMPT="It was a dark and stormy night, and"
OUT=$repo/bench/out/insn
mkdir -p "$OUT"
MWRUN=$ARM_BUILD/tools/memwall-run
[[ -x $MWRUN ]] || { echo "no $MWRUN (cmake --build $ARM_BUILD --target memwall-run)" >&2; exit 2; }
command -v qemu-aarch64 >/dev/null || { echo "no qemu-aarch64" >&2; exit 77; }

cc -std=c11 -O2 -Wall -Wextra -o "$OUT/insn_count" "$here/insn_count.c"

# count FUNC ARG (bench/insn_lib.sh)
# shellcheck source=bench/insn_lib.sh
source "$here/insn_lib.sh"

# 1. the method on a program with a known count: 2 + 3*ITERS + 3 instructions
for it in 1000 5000; do
    cat >"$OUT/loop.S" <<EOF
    .global _start
    .text
_start:
    mov x0, #0
    ldr x1, =$it
1:  add x0, x0, #1
    sub x1, x1, #1
    cbnz x1, 1b
    mov x0, #0
    mov x8, #93
    svc #0
EOF
    aarch64-linux-gnu-gcc -nostdlib -static -o "$OUT/loop" "$OUT/loop.S"
    looprun() { shift; qemu-aarch64 "$@" "$OUT/loop"; }
    got=$(NM='' count looprun 0)
    want=$((2 + 3 * it + 3))
    [[ $got == "$want" ]] || { echo "insn_count self-check: $got instructions, expected $want" >&2; exit 1; }
done
echo "insn_count self-check: exact on a known loop (3005 and 15005 instructions)"

PEER=$(bash "$here/insn_peer_setup.sh" | tail -n 1)

if [[ $# -eq 0 ]]; then
    [[ -x $X86_BUILD/tools/memwall ]] || { echo "no $X86_BUILD/tools/memwall (MW_X86_BUILD)" >&2; exit 2; }
    "$X86_BUILD/tools/memwall" convert "$repo/datasets/tinyllama-8m" -o "$OUT/f16.gguf" --type f16 >/dev/null
    "$X86_BUILD/tools/memwall" quant "$OUT/f16.gguf" -o "$OUT/q4_k_m.gguf" --preset Q4_K_M >/dev/null
    set -- "$OUT/q4_k_m.gguf"
fi
aarch64-linux-gnu-nm -n --defined-only "$MWRUN" >"$OUT/memwall-run.nm"

printf '%-14s %-11s %16s %16s %7s\n' file cpu memwall/token llama.cpp/token ratio
for model in "$@"; do
    for cpu in $CPUS; do
        q=(qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu "$cpu")
        mw() { local n=$1; shift; "${q[@]}" "$@" "$MWRUN" -m "$model" -p "$PROMPT" --temp 0 --ignore-eos -q -t 1 -n "$n"; }
        lc() { local n=$1; shift; "${q[@]}" "$@" "$PEER" -t 1 generate "$model" "$PROMPT" "$n"; }
        NM=$OUT/memwall-run.nm
        m1=$(count mw "$N1"); m2=$(count mw "$N2")
        [[ ${MW_INSN_PROFILE:-0} == 1 ]] && { echo "memwall-run $cpu, $N2 tokens, top symbols:"; head -n 25 "$OUT/profile.txt"; } >&2
        NM=''
        l1=$(count lc "$N1"); l2=$(count lc "$N2")
        awk -v f="$(basename "$model")" -v c="$cpu" -v m1="$m1" -v m2="$m2" -v l1="$l1" -v l2="$l2" \
            -v k=$((N2 - N1)) 'BEGIN{m=(m2-m1)/k; l=(l2-l1)/k;
            printf "%-14s %-11s %16.0f %16.0f %6.2fx\n", f, c, m, l, m/l}'
        echo "  raw: memwall $m1 ($N1 tokens) $m2 ($N2); llama.cpp $l1 $l2" >&2
    done
done
