#!/usr/bin/env bash
# memwall-run on the gated delta net archs (qwen35, qwen35moe, qwen3next)
# against llama.cpp itself (tests/peer: llama-peer = llama.cpp 80fb11ac, CPU).
# Skipped (77) when llama-peer cannot be built here or eval.txt is missing.
#
# Fixtures (tests/tools/rt_fixture.c, random weights, F16, byte-level BPE
# vocabulary): hidden 64, 8 layers (recurrent but for layers 3 and 7),
# linear key heads 2 != value heads 4 (qwen35/qwen35moe tiled, qwen3next
# grouped with one ssm_ba matrix), S 32, conv kernel 4, gated full attention
# 2 heads / 1 kv head of 32 with n_rot 8 (qwen35: IMROPE sections [2,1,1,0]),
# one MTP block (not run); qwen35moe and qwen3next: 4 experts top-2 and a
# sigmoid-gated shared expert; plus qwen35 in Q8_0. On eval.txt with
# llama-perplexity's protocol, context 512, 2 chunks: llama.cpp runs each
# chunk as one ubatch (its chunked delta net), memwall-run in steps of 16
# tokens (--batch 16: the conv and delta-net state crosses 32 steps per
# chunk) and again in steps of 5 (the same bits: cmp of the saved logits):
#  - perplexity within 0.3% of `llama-peer ppl`;
#  - teacher-forced on llama.cpp's float32 logits (--kl-divergence): F16
#    top-1 agreement >= 99% and mean KL < 0.001; Q8_0 mean KL < 0.01 (its
#    top-1 is printed: 8-bit activations round differently in llama.cpp's
#    x86 kernels and these random models' logits are nearly flat, ppl ~460
#    over 286 tokens); a wrong graph (e.g. V heads mapped grouped instead of
#    tiled) gives KL ~0.6 and top-1 ~4%;
#  - greedy decoding (one token per call: llama.cpp's autoregressive path):
#    llama.cpp's 24 greedy tokens fed back (--teacher, one token per call),
#    our greedy choice equals llama.cpp's at every step (memwall-run -n stops
#    at an end-of-generation token, llama-peer generate does not).
#
#   run_hybrid_peer.sh RT_MKMODEL
#   MW_HYBRID_KINDS="qwen35 qwen3next"   only these
source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
MK=${1:?usage: run_hybrid_peer.sh RT_MKMODEL}
KINDS=${MW_HYBRID_KINDS:-qwen35 qwen35moe qwen3next qwen35-q8_0}
CTX=512
CHUNKS=2
BYTES=60000
MIN_TOP=0.99

need_peer
[ -f "$EVAL" ] || skip "no eval.txt"

for k in $KINDS; do
    echo "== $k"
    arch=${k%-q8_0}
    type=f16
    max_kl=0.001
    [ "$arch" != "$k" ] && type=q8_0 max_kl=0.01
    f="$T/$k.gguf"
    "$MK" model "$f" --arch "$arch" --layers 8 --gpt2 --type "$type" --seed 7 > "$T/e" 2>&1 ||
        { fail "$k: rt_mkmodel: $(tail -2 "$T/e")"; continue; }
    theirs=$("$PEER" ppl "$f" "$EVAL" --ctx $CTX --bytes $BYTES --chunks $CHUNKS \
                 --save-logits "$T/$k.logits" 2> "$T/e") ||
        { fail "$k: llama-peer ppl: $(tail -2 "$T/e")"; continue; }
    ours=$("$RUNBIN" -m "$f" --perplexity "$EVAL" -c $CTX --bytes $BYTES --chunks $CHUNKS \
               --batch 16 -t 2 -q --save-logits "$T/$k.ours16" 2> "$T/e") ||
        { fail "$k: memwall-run --perplexity: $(tail -2 "$T/e")"; continue; }
    a=$(ppl_of "$ours")
    b=$(ppl_of "$theirs")
    echo "  ppl (ctx $CTX, $CHUNKS chunks, steps of 16): memwall $a, llama.cpp $b ($(reldiff "$a" "$b"))"
    close "$a" "$b" 0.003 || fail "$k: perplexity $a vs llama.cpp $b: more than 0.3% apart"
    "$RUNBIN" -m "$f" --perplexity "$EVAL" -c $CTX --bytes $BYTES --chunks $CHUNKS --batch 5 \
        -t 3 -q --save-logits "$T/$k.ours5" > /dev/null 2> "$T/e" ||
        { fail "$k: memwall-run --batch 5: $(tail -2 "$T/e")"; continue; }
    if cmp -s "$T/$k.ours16" "$T/$k.ours5"; then
        echo "  steps of 5 tokens, 3 threads: the same logits, bit for bit"
    else
        fail "$k: --batch 5 -t 3 logits differ from --batch 16 -t 2"
    fi
    kl=$("$RUNBIN" -m "$f" --perplexity "$EVAL" -c $CTX --bytes $BYTES --chunks $CHUNKS \
             --kl-divergence "$T/$k.logits" -t 2 -q 2> "$T/e") ||
        { fail "$k: memwall-run --kl-divergence: $(tail -2 "$T/e")"; continue; }
    rm -f "$T/$k.logits" "$T/$k.ours16" "$T/$k.ours5"
    top=$(awk '$1 == "same_top" { print $2 }' <<< "$kl")
    kld=$(awk '$1 == "kld" { print $2 }' <<< "$kl")
    scored=$(awk '$1 == "ppl" { print $8 }' <<< "$kl")
    echo "  teacher-forced top-1 on llama.cpp's tokens: $top of $scored positions agree; mean KL $kld"
    [ "$type" != f16 ] || awk -v t="$top" -v m=$MIN_TOP 'BEGIN { exit !(t != "" && t >= m) }' ||
        fail "$k: top-1 agreement $top < $MIN_TOP"
    awk -v d="$kld" -v m=$max_kl 'BEGIN { exit !(d != "" && d < m) }' ||
        fail "$k: mean KL divergence $kld from llama.cpp's logits (>= $max_kl)"
    g_theirs=$("$PEER" generate "$f" "$PROMPT" 24 2> "$T/e") ||
        { fail "$k: llama-peer generate: $(tail -2 "$T/e")"; continue; }
    "$RUNBIN" -m "$f" -p "$PROMPT" --teacher "$g_theirs" -q -t 2 > "$T/teach" 2> "$T/e" ||
        { fail "$k: memwall-run --teacher: $(tail -2 "$T/e")"; continue; }
    same=$(awk '$1 == "step" && $4 == $7 { n++ } END { print n + 0 }' "$T/teach")
    steps=$(awk '$1 == "step" { n++ } END { print n + 0 }' "$T/teach")
    echo "  greedy: llama.cpp's $steps tokens fed back one per call, our greedy choice agrees at $same"
    [ "$steps" -eq 24 ] && [ "$same" -eq 24 ] || fail "$k: greedy decoding differs from llama.cpp's"
    rm -f "$f"
done
finish
