#!/usr/bin/env bash
# memwall-run on the model Qwen3 / Gemma 2-3 / Phi-3 families against llama.cpp itself
# (tests/peer: llama-peer = llama.cpp 80fb11ac, CPU). Skipped (77) when
# llama-peer cannot be built here or no fixture can be made (python3 or the
# real tokenizer files of tests/fixtures/fetch_tokenizers.sh missing).
#
# For each KIND of tests/fixtures/mk_family_fixture.py (qwen3, gemma3, the
# text model of gemma3mm, gemma2, phi3, phi3long, phi4mini (partial rotary
# 0.75, LongRoPE, tied, the o200k tokenizer), and the mixtures of experts
# qwen3moe, mixtral, qwen2moe, and the gated delta net archs qwen35, qwen35moe,
# qwen3next): the fixture checkpoint
# (the family's real config.json layout and tokenizer, small random BF16
# weights) converted by `memwall convert` (F16), then on eval.txt with
# llama-perplexity's protocol, context 128 (> the fixtures' sliding window
# of 16, so Gemma's sliding layers mask and their KV rings wrap):
#  - perplexity of `memwall-run --perplexity` (our tokenizer too) within
#    0.3% of `llama-peer ppl` on the same file;
#  - teacher-forced top-1: llama.cpp's float32 logits of every scored
#    position (--save-logits), then `memwall-run --kl-divergence` on the
#    same tokens: the argmax agrees on >= 99% of the positions (same_top).
#    Random tiny weights must not make that a coin toss: the fixture's
#    scales (linear U(+-1.5/sqrt(in)), embeddings U(+-0.5), Gemma's
#    U(+-0.2) times sqrt(hidden)) give logits spread over several units,
#    and the script also prints the mean KL divergence (a tie-free measure,
#    expected ~1e-6 where the graphs agree; a wrong graph gives > 0.1);
#    qwen35moe and qwen3next: their fixtures' router and a few lm_head rows
#    have 8x the other matrices' scale (mk_family_fixture.py), since with
#    near-uniform routers over 8 experts and 151,936 output rows of one scale
#    a last-bit difference flips top-k choices and argmaxes (97.9% and 98.9%
#    before); run_hybrid_peer.sh's fixtures agree on >= 99.4%;
#  - phi3long (LongRoPE, original context 4096) once more at context 4352:
#    llama.cpp pads the context to 256 and takes the long factors above
#    4096, as memwall-run does; perplexity within 0.3%.
#
#   run_families_peer.sh
#   MW_FAMILY_KINDS="qwen3 gemma2"  only these kinds
#   MW_FAMILY_GGUF_DIR=DIR          use DIR/KIND.gguf instead of converting
#                                   (debugging the runtime without the converter)
source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
KINDS=${MW_FAMILY_KINDS:-qwen3 gemma3 gemma3mm gemma2 phi3 phi3long phi4mini qwen3moe mixtral qwen2moe qwen35 qwen35moe qwen3next}
CTX=128
CHUNKS=3
BYTES=40000
MIN_TOP=0.99
have_python() { command -v python3 > /dev/null 2>&1 && python3 -c 'import json, struct, hashlib' 2> /dev/null; }

need_peer
[ -f "$EVAL" ] || skip "no eval.txt"
have_python || [ -n "${MW_FAMILY_GGUF_DIR:-}" ] || skip "python3 needed for the fixtures"
[ -n "${MW_FAMILY_GGUF_DIR:-}" ] || fetch_tokenizers

# family_gguf KIND: the converted fixture's path on stdout; 77 when it cannot be made
family_gguf() {
    local k=$1
    if [ -n "${MW_FAMILY_GGUF_DIR:-}" ]; then
        [ -f "$MW_FAMILY_GGUF_DIR/$k.gguf" ] || return 77
        echo "$MW_FAMILY_GGUF_DIR/$k.gguf"
        return 0
    fi
    python3 "$MW_SRC/tests/fixtures/mk_family_fixture.py" "$k" "$T/$k-hf" > "$T/$k-fx.log" 2>&1
    local rc=$?
    [ $rc -eq 77 ] && return 77
    [ $rc -eq 0 ] || { echo "mk_family_fixture.py $k: exit $rc: $(tail -2 "$T/$k-fx.log")" >&2; return 1; }
    "$MEMWALL" convert "$T/$k-hf" -o "$T/$k.gguf" -q > "$T/$k-conv.log" 2>&1 ||
        { echo "memwall convert $k: $(tail -2 "$T/$k-conv.log")" >&2; rm -rf "$T/$k-hf"; return 1; }
    rm -rf "$T/$k-hf"
    echo "$T/$k.gguf"
}

n_run=0
for k in $KINDS; do
    echo "== $k"
    f=$(family_gguf "$k" 2> "$T/e")
    rc=$?
    if [ $rc -eq 77 ]; then echo "  skipped: no fixture (tokenizer files missing)"; continue; fi
    [ $rc -eq 0 ] || { fail "$k: $(cat "$T/e")"; continue; }
    n_run=$((n_run + 1))
    theirs=$("$PEER" ppl "$f" "$EVAL" --ctx $CTX --bytes $BYTES --chunks $CHUNKS \
                 --save-logits "$T/$k.logits" 2> "$T/e") ||
        { fail "$k: llama-peer ppl: $(tail -2 "$T/e")"; continue; }
    # one memwall-run pass gives both: --kl-divergence prints the perplexity
    # of its own logits ("ppl" line) beside the agreement with llama.cpp's
    # (a plain --perplexity run before it was the same forward once more)
    kl=$("$RUNBIN" -m "$f" --perplexity "$EVAL" -c $CTX --bytes $BYTES --chunks $CHUNKS \
             --kl-divergence "$T/$k.logits" -t 2 -q 2> "$T/e") ||
        { fail "$k: memwall-run --kl-divergence: $(tail -2 "$T/e")"; continue; }
    rm -f "$T/$k.logits"
    a=$(ppl_of "$kl")
    b=$(ppl_of "$theirs")
    echo "  ppl (ctx $CTX, $CHUNKS chunks): memwall $a, llama.cpp $b ($(reldiff "$a" "$b"))"
    close "$a" "$b" 0.003 || fail "$k: perplexity $a vs llama.cpp $b: more than 0.3% apart"
    top=$(awk '$1 == "same_top" { print $2 }' <<< "$kl")
    kld=$(awk '$1 == "kld" { print $2 }' <<< "$kl")
    scored=$(awk '$1 == "ppl" { print $8 }' <<< "$kl")
    echo "  teacher-forced top-1 on llama.cpp's tokens: $top of $scored positions agree; mean KL $kld"
    awk -v t="$top" -v m=$MIN_TOP 'BEGIN { exit !(t != "" && t >= m) }' ||
        fail "$k: top-1 agreement $top < $MIN_TOP"
    awk -v d="$kld" 'BEGIN { exit !(d != "" && d < 0.01) }' ||
        fail "$k: mean KL divergence $kld from llama.cpp's logits (>= 0.01)"
    if [ "$k" = phi3long ]; then
        theirs=$("$PEER" ppl "$f" "$EVAL" --ctx 4352 --chunks 1 2> "$T/e") ||
            { fail "$k: llama-peer ppl --ctx 4352: $(tail -2 "$T/e")"; continue; }
        ours=$("$RUNBIN" -m "$f" --perplexity "$EVAL" -c 4352 --chunks 1 -t 2 -q 2> "$T/e") ||
            { fail "$k: memwall-run --perplexity -c 4352: $(tail -2 "$T/e")"; continue; }
        a=$(ppl_of "$ours")
        b=$(ppl_of "$theirs")
        echo "  LongRoPE long factors (ctx 4352 > 4096): memwall $a, llama.cpp $b ($(reldiff "$a" "$b"))"
        close "$a" "$b" 0.003 || fail "$k: long-context perplexity $a vs llama.cpp $b"
    fi
done
[ $n_run -gt 0 ] || [ $fails -gt 0 ] || skip "no family fixture could be made"
finish
