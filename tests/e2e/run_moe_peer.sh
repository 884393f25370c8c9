#!/usr/bin/env bash
# memwall-run on mixture-of-experts models against llama.cpp itself
# (tests/peer: llama-peer = llama.cpp 80fb11ac, CPU). Skipped (77) when
# llama-peer cannot be built here or eval.txt is missing.
#
# Fixtures (tests/tools/rt_fixture.c, random weights, F16, SentencePiece
# vocabulary of 323 tokens, router U(+-5/sqrt(n_embd)) so that tokens spread
# over the experts):
#   qwen3moe  hidden 256, 3 layers, 8 experts, top-4 normalized, expert width
#             256, q/k norms (hidden 256: Q4_K_M's K-quants fit the rows)
#   qwen2moe  hidden 128, 2 layers, 8 experts, top-2 NOT normalized, expert
#             width 256, shared expert 256 wide gated by sigmoid(gate_inp_shexp . x)
#   mixtral   llama with experts: hidden 128, 2 layers, 4 experts, top-2
#             normalized, experts feed_forward_length (256) wide
#   upcycled  (when MOE_UPCYCLE is given and datasets has tinyllama-8m)
#             tinyllama-8m's FFNs upcycled into 4 experts top-2 by
#             tests/tools/moe_upcycle: trained weights, a perplexity of ~50
# each as F16, and Q8_0 / Q4_K_M from `memwall quant --preset` (falling back
# to `llama-peer quantize` with a note when memwall quant refuses the file).
# memwall-run's summary names the experts (per layer, used per token, shared)
# and the weights a token reads of all of them. On eval.txt with
# llama-perplexity's protocol (ctx 128, 3 chunks; the
# upcycled model ctx 256, 4 chunks):
#  - perplexity of `memwall-run --perplexity` within 0.3% of `llama-peer ppl`;
#  - teacher-forced on llama.cpp's float32 logits (--kl-divergence): F16
#    files mean KL < 0.001 and top-1 agreement >= 99%; quantized files mean
#    KL < 0.01 (8-bit activations round differently in llama.cpp's x86
#    kernels; a token near a routing tie then picks another expert, which
#    moves its logits more than in a dense model: llama.cpp's own zen4, x64
#    and no-repack builds differ by up to 0.15% in perplexity on these files).
#
#   run_moe_peer.sh RT_MKMODEL [MOE_UPCYCLE]
#   MW_MOE_KINDS="qwen3moe mixtral"   only these
source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
MK=${1:?usage: run_moe_peer.sh RT_MKMODEL [MOE_UPCYCLE]}
UPCYCLE=${2:-}
KINDS=${MW_MOE_KINDS:-qwen3moe qwen2moe mixtral upcycled}
MIN_TOP=0.99

need_peer
[ -f "$EVAL" ] || skip "no eval.txt"

# make KIND: $T/KIND.gguf (F16); 77 when it cannot be made here
make_f16() {
    case $1 in
    qwen3moe) "$MK" model "$T/$1.gguf" --arch qwen3moe --embd 256 --layers 3 --experts 8 \
                  --experts-used 4 --ff-exp 256 --type f16 ;;
    qwen2moe) "$MK" model "$T/$1.gguf" --arch qwen2moe --embd 128 --layers 2 --experts 8 \
                  --experts-used 2 --ff-exp 256 --ff-shexp 256 --type f16 ;;
    mixtral) "$MK" model "$T/$1.gguf" --arch llama --embd 128 --layers 2 --experts 4 \
                 --experts-used 2 --ff 256 --type f16 ;;
    upcycled)
        [ -n "$UPCYCLE" ] && [ -x "$UPCYCLE" ] && [ -f "$REF_F16" ] || return 77
        "$UPCYCLE" "$REF_F16" "$T/$1.gguf" 4 2 ;;
    *) echo "unknown kind $1" >&2; return 1 ;;
    esac
}

# check KIND LABEL FILE CTX CHUNKS BYTES F16(0|1)
check() {
    local k=$1 label=$2 f=$3 ctx=$4 chunks=$5 bytes=$6 f16=$7 theirs ours a b kl top kld
    theirs=$("$PEER" ppl "$f" "$EVAL" --ctx "$ctx" --bytes "$bytes" --chunks "$chunks" \
                 --save-logits "$T/x.logits" 2> "$T/e") ||
        { fail "$label: llama-peer ppl: $(tail -2 "$T/e")"; return; }
    ours=$($MW_EMU "$RUNBIN" -m "$f" --perplexity "$EVAL" -c "$ctx" --bytes "$bytes" \
               --chunks "$chunks" --kl-divergence "$T/x.logits" -t 2 -q 2> "$T/e") ||
        { fail "$label: memwall-run --perplexity: $(tail -2 "$T/e")"; return; }
    rm -f "$T/x.logits"
    a=$(ppl_of "$ours")
    b=$(awk '$1 == "ppl" { print $2; exit }' <<< "$theirs")
    top=$(awk '$1 == "same_top" { print $2 }' <<< "$ours")
    kld=$(awk '$1 == "kld" { print $2 }' <<< "$ours")
    echo "  $label: ppl memwall $a, llama.cpp $b ($(reldiff "$a" "$b")); on llama.cpp's logits:" \
         "mean KL $kld, top-1 agreement $top"
    close "$a" "$b" 0.003 || fail "$label: perplexity $a vs llama.cpp $b: more than 0.3% apart"
    if [ "$f16" = 1 ]; then
        awk -v d="$kld" 'BEGIN { exit !(d != "" && d < 0.001) }' ||
            fail "$label: mean KL divergence $kld from llama.cpp's logits (>= 0.001)"
        awk -v t="$top" -v m=$MIN_TOP 'BEGIN { exit !(t != "" && t >= m) }' ||
            fail "$label: top-1 agreement $top < $MIN_TOP"
    else
        awk -v d="$kld" 'BEGIN { exit !(d != "" && d < 0.01) }' ||
            fail "$label: mean KL divergence $kld from llama.cpp's logits (>= 0.01)"
    fi
}

n_run=0
for k in $KINDS; do
    echo "== $k"
    make_f16 "$k" > "$T/mk.log" 2>&1
    rc=$?
    if [ $rc -eq 77 ]; then echo "  skipped: no moe_upcycle or tinyllama-8m reference"; continue; fi
    [ $rc -eq 0 ] || { fail "$k: fixture: $(tail -2 "$T/mk.log")"; continue; }
    n_run=$((n_run + 1))
    # the summary names the experts and what a token reads of the weights
    case $k in
    qwen3moe) want="experts: 8 per layer, 4 used per token; active weights" ;;
    qwen2moe) want="experts: 8 per layer, 2 used per token, a shared expert; active weights" ;;
    *) want="experts: 4 per layer, 2 used per token; active weights" ;;
    esac
    if mr 0 -m "$T/$k.gguf" -p "$PROMPT" -n 2 --temp 0 -t 2; then
        has "$err" "$want" "$k summary"
        wb=$(sed -n 's/.*memory: weights \([0-9.]*\) MiB.*/\1/p' <<< "$err")
        has "$err" "MiB of $wb MiB per token" "$k summary: active of all weights"
    fi
    ctx=128 chunks=3 bytes=40000
    [ "$k" = upcycled ] && ctx=256 chunks=4 bytes=60000
    check "$k" "$k F16" "$T/$k.gguf" $ctx $chunks $bytes 1
    for p in Q8_0 Q4_K_M; do
        q="$T/$k-$p.gguf" how="memwall quant --preset $p"
        if ! "$MEMWALL" quant "$T/$k.gguf" -o "$q" --preset $p -q > "$T/q.log" 2>&1; then
            echo "  note: memwall quant --preset $p refused $k ($(tail -1 "$T/q.log")):" \
                 "llama-peer quantize instead"
            how="llama-peer quantize $p"
            "$PEER" quantize "$T/$k.gguf" "$q" $p > "$T/q.log" 2>&1 ||
                { fail "$k: llama-peer quantize $p: $(tail -2 "$T/q.log")"; continue; }
        fi
        check "$k" "$k $p ($how)" "$q" $ctx $chunks $bytes 0
        rm -f "$q"
    done
    rm -f "$T/$k.gguf"
done
[ $n_run -gt 0 ] || [ $fails -gt 0 ] || skip "no MoE fixture could be made"
finish
