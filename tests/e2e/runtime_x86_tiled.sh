#!/usr/bin/env bash
# The x86 tiled (prefill) attention against its plain twin: memwall-run's
# logits (--perplexity --save-logits) with MW_RT_KERNELS=scalar (the plain
# C path: no F16C) and with the avx2 table (the AVX2 path: eight K rows per
# score block, head_dim 32/64/128 specialised, inline f16 conversion) must
# be the same bytes. Small random models from rt_mkmodel (f16): head_dim 32
# with 2 query heads per kv head (both in registers), 64 with 1 and with 3
# (a pair and a single), 128 with 2, 48 (the generic instance), and gemma2
# (attention soft-capping: the scalar scores, a sliding window of 40: masked
# tile prefixes). One chunk of 160 tokens in steps of 80 (>= 64: the tiled
# path; tiles of 64 with 16-token row tails and partial rows).
# The same for the decoding path (llama.cpp's one_chunk: steps of 16 tokens,
# the f16 accumulator): the scalar path, the AVX2 one and, on a CPU with
# AVX-512, the zmm one (head sizes 64, 128 and multiples of 256: hd256,
# hd512 and hd768 below) give the same bytes, also where most softmax
# weights are subnormal (wide512, wide256).
# Skipped (77) off x86-64 or without AVX2.
# Usage: runtime_x86_tiled.sh RT_MKMODEL
source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
MK=$1
[ -z "${MW_EMU:-}" ] || skip "emulated run"
[ "$(uname -m)" = x86_64 ] || skip "not x86-64"
grep -qw avx2 /proc/cpuinfo && grep -qw f16c /proc/cpuinfo && grep -qw fma /proc/cpuinfo ||
    skip "no AVX2/F16C/FMA"
[ -f "$EVAL" ] || skip "no eval.txt"

tables="scalar avx2"
grep -qw avx512f /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && tables="$tables default"
n=0
# check NAME MKMODEL-ARGS...: the tables' logits equal, prompt steps of 80
# (tiled: scalar and avx2) and steps of 16 (decoding: every table)
# Under the sanitizers (MW_LIGHT=1: -O0, the scalar runs dominate) the
# prompt steps on the first six models and the decoding steps on hd64 and
# wide256 only (both x86 decoding bodies, 64 and 256 columns, and the
# subnormal weights).
check() {
    local name=$1 b k bs="80 16"
    shift
    if [ "${MW_LIGHT:-0}" = 1 ]; then
        case $name in
        hd64) ;;
        wide256) bs=16 ;;
        hd256 | hd512 | hd768 | wide512) return ;;
        *) bs=80 ;;
        esac
    fi
    "$MK" model "$T/$name.gguf" --type f16 --layers 2 "$@" > "$T/mk.log" 2>&1 ||
        { fail "rt_mkmodel $name: $(tail -2 "$T/mk.log")"; return; }
    for b in $bs; do
        for k in $tables; do
            [ $b = 80 ] && [ $k = default ] && continue
            MW_RT_KERNELS=$k mr 0 -m "$T/$name.gguf" --perplexity "$EVAL" -c 160 --batch $b --chunks 1 \
                --bytes 4000 -t 2 -q --save-logits "$T/$name.$b.$k" || return
            [ $k = scalar ] && continue
            cmp -s "$T/$name.$b.scalar" "$T/$name.$b.$k" ||
                { fail "$name: $k logits in steps of $b differ from the plain path's"; return; }
        done
    done
    n=$((n + 1))
}
check hd32 --embd 256 --heads 8 4 --ff 256
check hd64 --embd 256 --heads 4 4 --ff 256
check hd64r3 --embd 384 --heads 6 2 --ff 256
check hd128 --embd 256 --heads 2 1 --ff 256
check hd48 --embd 192 --heads 4 2 --ff 256
check gemma2 --arch gemma2 --embd 256 --heads 4 2 --ff 256 --swa 40
check hd256 --embd 512 --heads 2 1 --ff 256
check hd512 --embd 512 --heads 1 1 --ff 256
check hd768 --embd 768 --heads 1 1 --ff 256
# q/k norms x4: scores 87 and more below a head's maximum, whose softmax
# weights are subnormal f32 (the f16 accumulator's f16acc_weight)
check wide512 --arch qwen3 --embd 512 --heads 1 1 --ff 256 --qk-gain 4
check wide256 --arch qwen3 --embd 512 --heads 2 1 --ff 256 --qk-gain 4
echo "$n models: logits of tiled and decoding attention equal to the plain path's ($tables)"
finish
