#!/usr/bin/env bash
# tinyllama-8m on memwall-run, natively or (cross build) under qemu-aarch64.
# Expected figures were recorded with the x86-64 release build and with
# llama.cpp (llama-peer, node-llama-cpp 3.21.1 = llama.cpp 80fb11ac); the
# runtime_peer test recomputes llama.cpp's side.
#   - the reference F16 file (llama.cpp's own conversion, in datasets/):
#     greedy tokens from the README prompt = llama.cpp's, all 32
#   - a Q8_0 copy (rt_mkmodel requant: the bytes `memwall convert --type
#     q8_0` writes): perplexity with llama-perplexity's protocol (ctx 256,
#     eval.txt[:60000]) equal to the x86 figure within 1e-6 (float summation
#     tolerance; the kernels make it bit-identical in practice) and within
#     0.3% of llama.cpp's; under qemu also with the NEON-without-dotprod and
#     scalar kernels; greedy tokens equal to the x86 run
#
#   run_tinyllama.sh RT_MKMODEL [quick]     quick: fewer tokens (ASan builds)
source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
MK=${1:?usage: run_tinyllama.sh RT_MKMODEL [quick]}
QUICK=${2:-}
[ -f "$REF_F16" ] || { skip "no $REF_F16"; }
[ -f "$EVAL" ] || { skip "no $EVAL"; }

# llama.cpp, greedy, 32 tokens: F16 reference file (llama-peer generate)
GREEDY_F16="265 667 1353 317 295 265 803 4034 278 265 667 1353 317 295 265 803 4034 278 265 667 1353 4034 278 265 667 1353 4034 278 265 667 1353 4034"
# ours on the Q8_0 copy (llama.cpp's agrees for 22 tokens, then takes 453
# where our top-2 logits differ by 0.003: a near tie, see runtime/README.md)
GREEDY_Q8="265 667 1353 317 295 265 803 4034 278 265 667 1353 317 295 265 803 4034 278 265 667 1353 4034 278 265 667 1353 4034 278 265 667 1353 4034"
# perplexity of the Q8_0 copy: ours (x86-64 release) and llama.cpp's. Ours
# moved by 2e-4 relative (was 39.552992 / 50.361284) when the tiled
# attention took its fixed 8-lane dot and its own exp: the same
# bits on every ISA, a different rounding from the old sequential sum/expf;
# then by -3e-4 / -2e-4 (was 39.561275 / 50.371233) when it took fused
# multiply-adds, Arm's vector expf and an 8-partial f32 sum of each tile's
# exps (aarch64 prompt target), again the same bits everywhere.
PPL_Q8_1=39.548910   LCPP_Q8_1=39.535947    # 1 chunk
PPL_Q8_4=50.360448   LCPP_Q8_4=50.338826    # 4 chunks

N=32
CHUNKS=4
if [ "$QUICK" = quick ]; then N=8; CHUNKS=1; fi
want_f16=$(echo "$GREEDY_F16" | cut -d' ' -f1-$N)
want_q8=$(echo "$GREEDY_Q8" | cut -d' ' -f1-$N)

if [ -z "$MW_EMU" ]; then
    # natively: the F16 reference (its kernel is slow under qemu)
    if mr 0 -m "$REF_F16" -p "$PROMPT" -n $N --temp 0 --tokens -q -t 2; then
        [ "$out" = "$want_f16" ] || fail "F16 greedy: '$out', want (llama.cpp) '$want_f16'"
        echo "F16 greedy $N tokens: equal to llama.cpp's"
    fi
fi

$MW_EMU "$MK" requant "$REF_F16" "$T/q8.gguf" q8_0 || { fail "rt_mkmodel requant"; finish; }
if mr 0 -m "$T/q8.gguf" -p "$PROMPT" -n $N --temp 0 --tokens -q; then
    [ "$out" = "$want_q8" ] || fail "Q8_0 greedy: '$out', want '$want_q8'"
    echo "Q8_0 greedy $N tokens: equal to the x86 run"
fi

# perplexity: the default kernels, 2 threads
want=$([ $CHUNKS = 1 ] && echo $PPL_Q8_1 || echo $PPL_Q8_4)
lcpp=$([ $CHUNKS = 1 ] && echo $LCPP_Q8_1 || echo $LCPP_Q8_4)
if mr 0 -m "$T/q8.gguf" --perplexity "$EVAL" --bytes 60000 --chunks $CHUNKS -t 2 -q; then
    got=$(ppl_of "$out")
    close "$got" "$want" 1e-6 || fail "Q8_0 ppl $got, x86 figure $want"
    close "$got" "$lcpp" 0.003 || fail "Q8_0 ppl $got, llama.cpp $lcpp (more than 0.3% apart)"
    echo "Q8_0 ppl ($CHUNKS chunks) $got: x86 $want, llama.cpp $lcpp ($(reldiff "$got" "$lcpp"))"
fi

# where the weights live (runtime/rt_load.c): by default the dense runs move
# into huge pages when the kernel offers them, with --map-only nothing moves;
# the logits are the same bytes either way
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
for how in default map-only; do
    flag=$([ $how = map-only ] && echo --map-only)
    mr 0 -m "$T/q8.gguf" --perplexity "$EVAL" --bytes 8000 --chunks 1 --save-logits "$T/l-$how" $flag ||
        continue
    moved=$(sed -n 's/.*file; \([0-9.]*\) MiB of it in huge pages.*/\1/p' <<< "$err")
    wmib=$(sed -n 's/.*memory: weights \([0-9.]*\) MiB.*/\1/p' <<< "$err")
    [ -n "$moved" ] && [ -n "$wmib" ] || { fail "$how: no 'in huge pages' in the memory line"; continue; }
    if [ $how = map-only ] || ! grep -qE '\[(always|madvise)\]' <<< "$thp"; then
        [ "$moved" = 0.00 ] || fail "$how: $moved MiB moved to huge pages (THP: '$thp')"
    else
        awk -v m="$moved" -v w="$wmib" 'BEGIN { exit !(m >= 2 && m <= w) }' ||
            fail "$how: $moved MiB of $wmib MiB of weights in huge pages"
    fi
    echo "weights $how: $moved of $wmib MiB in huge pages"
done
cmp -s "$T/l-default" "$T/l-map-only" || fail "logits differ between huge pages and --map-only"

# under qemu: the other kernel variants give the same figure
if [ -n "$MW_EMU" ]; then
    for v in neon scalar; do
        export MW_RT_KERNELS=$v
        mr 0 -m "$T/q8.gguf" --perplexity "$EVAL" --bytes 60000 --chunks 1 -q
        unset MW_RT_KERNELS
        [ "$rc" -eq 0 ] || continue
        got=$(ppl_of "$out")
        close "$got" "$PPL_Q8_1" 1e-6 || fail "Q8_0 ppl with $v kernels $got, x86 $PPL_Q8_1"
        echo "Q8_0 ppl (1 chunk, $v kernels) $got: x86 $PPL_Q8_1"
    done
fi
finish
