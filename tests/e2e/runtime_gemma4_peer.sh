#!/usr/bin/env bash
# memwall-run on Gemma 4 (gemma4) against llama.cpp itself (tests/peer:
# llama-peer = llama.cpp 80fb11ac, CPU), and what stays on flash. Skipped (77)
# when llama-peer cannot be built here or no fixture can be made (python3 or
# the real tokenizer files of tests/fixtures/fetch_tokenizers.sh missing).
#
# For each of tests/fixtures/mk_family_fixture.py's gemma4e2b (E2B's layout:
# per-layer embeddings, 2 of 5 layers reading an earlier layer's KV, the
# double-wide MLP in them, head size 32 sliding / 64 full with proportional
# RoPE), gemma4moe (26B-A4B's: 8 experts beside the dense MLP, no v_proj in
# the full layer, 2 / 1 kv heads) and gemma4dense (31B's), converted by
# `memwall convert` (F16), on eval.txt with llama-perplexity's protocol at
# context 128 (> the fixtures' sliding window of 16: sliding layers mask and
# their KV rings wrap):
#  - perplexity of `memwall-run --perplexity` within 0.3% of `llama-peer ppl`;
#  - teacher-forced top-1 on llama.cpp's float32 logits (--save-logits, then
#    memwall-run --kl-divergence): argmax agreement >= 99%, mean KL < 1e-4.
#  - 40 greedy tokens after a 10-token prompt (decode steps past the window)
#    equal to `llama-peer generate`'s.
# Then on gemma4e2b, "the table stays on flash":
#  - after a prompt and 6 greedy tokens, the pages of per_layer_token_embd in
#    the page cache (mincore, the file dropped from the cache first) are
#    exactly those holding the rows of the tokens fed (the prompt and the
#    first 5 tokens generated) — left out: 3072 pages
#    at each end of the table, which the kernel's read-ahead of the tensors
#    next to it brings in (8 MiB read_ahead_kb here; the runtime gives the
#    table MADV_RANDOM, but read-ahead works on the file);
#  - the KV cache holds only the layers that own one (memwall-run's memory
#    line; a shared layer's rows would double the full layers');
#  - the bandwidth line counts one row of the table per token: every tensor
#    but the table and the shared layers' unused K/V, plus one row.
source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
KINDS=${MW_G4_KINDS:-gemma4e2b gemma4moe gemma4dense}
CTX=128
CHUNKS=3
BYTES=40000

need_peer
[ -f "$EVAL" ] || skip "no eval.txt"
have_python || skip "python3 needed for the fixtures"
fetch_tokenizers

n_run=0
for k in $KINDS; do
    echo "== $k"
    python3 "$FIX/mk_family_fixture.py" "$k" "$T/$k-hf" > "$T/$k-fx.log" 2>&1
    rc=$?
    if [ $rc -eq 77 ]; then echo "  skipped: no fixture (tokenizer files missing)"; continue; fi
    [ $rc -eq 0 ] || { fail "$k: mk_family_fixture.py exit $rc: $(tail -2 "$T/$k-fx.log")"; continue; }
    f=$T/$k.gguf
    "$MEMWALL" convert "$T/$k-hf" -o "$f" -q > "$T/$k-conv.log" 2>&1 ||
        { fail "$k: memwall convert: $(tail -2 "$T/$k-conv.log")"; continue; }
    rm -rf "$T/$k-hf"
    n_run=$((n_run + 1))
    "$PEER" ppl "$f" "$EVAL" --ctx $CTX --bytes $BYTES --chunks $CHUNKS \
        --save-logits "$T/$k.logits" > /dev/null 2> "$T/e" ||
        { fail "$k: llama-peer ppl: $(tail -2 "$T/e")"; continue; }
    kl=$("$RUNBIN" -m "$f" --perplexity "$EVAL" -c $CTX --bytes $BYTES --chunks $CHUNKS \
             --kl-divergence "$T/$k.logits" -t 2 -q 2> "$T/e") ||
        { fail "$k: memwall-run --kl-divergence: $(tail -2 "$T/e")"; continue; }
    rm -f "$T/$k.logits"
    a=$(ppl_of "$kl")
    b=$(awk '$1 == "ppl_base" { print $2 }' <<< "$kl")
    top=$(awk '$1 == "same_top" { print $2 }' <<< "$kl")
    kld=$(awk '$1 == "kld" { print $2 }' <<< "$kl")
    scored=$(awk '$1 == "ppl" { print $8 }' <<< "$kl")
    echo "  ppl (ctx $CTX, $CHUNKS chunks): memwall $a, llama.cpp $b ($(reldiff "$a" "$b"))"
    echo "  teacher-forced top-1: $top of $scored positions agree; mean KL $kld"
    close "$a" "$b" 0.003 || fail "$k: perplexity $a vs llama.cpp $b: more than 0.3% apart"
    awk -v t="$top" 'BEGIN { exit !(t != "" && t >= 0.99) }' || fail "$k: top-1 agreement $top < 0.99"
    awk -v d="$kld" 'BEGIN { exit !(d != "" && d < 1e-4) }' ||
        fail "$k: mean KL divergence $kld from llama.cpp's logits (>= 1e-4)"
    # the decode path (one token per step, past the window): llama.cpp's
    # greedy tokens
    prompt="It was a dark and stormy night, and"
    theirs=$("$PEER" generate "$f" "$prompt" 40 2> "$T/e" | tail -n 1)
    ours=$("$RUNBIN" -m "$f" -p "$prompt" -n 40 --temp 0 --tokens -c 128 -t 2 -q 2> "$T/e")
    [ -n "$ours" ] && [ "$ours" = "$theirs" ] ||
        fail "$k: greedy tokens differ from llama.cpp's: ours '${ours:0:60}', llama.cpp '${theirs:0:60}'"
    echo "  40 greedy tokens: $([ "$ours" = "$theirs" ] && echo "llama.cpp's")"
    [ "$k" = gemma4e2b ] || { rm -f "$f"; continue; }

    # --- the per-layer table stays on flash ---
    tab=per_layer_token_embd.weight
    printf '%s' "$prompt" > "$T/prompt.txt"
    ids=$("$RUNBIN" -m "$f" --tokenize "$T/prompt.txt" 2> "$T/e") ||
        { fail "$k: --tokenize: $(tail -2 "$T/e")"; continue; }
    mwgguf evict "$f" || { fail "$k: mwgguf evict"; continue; }
    cold=$(mwgguf resident "$f" $tab "" 0)
    if [ "$(awk '{ print $4 }' <<< "$cold")" != 0 ]; then
        echo "  NOTE: $f stays in the page cache after POSIX_FADV_DONTNEED ($cold): residency not measured"
    else
        gen=$("$RUNBIN" -m "$f" -p "$prompt" -n 6 --temp 0 --tokens -c 64 -t 2 2> "$T/run.log") ||
            { fail "$k: memwall-run -p: $(tail -2 "$T/run.log")"; continue; }
        fed="$ids ${gen% *}" # the last token generated is never fed back
        res=$(mwgguf resident "$f" $tab "$fed" 3072)
        echo "  tokens fed: $fed; $tab pages: $res"
        read -r _ pages _ resident _ rows _ outside <<< "$res"
        [ "$pages" -ge 1024 ] || fail "$k: only $pages inner pages of $tab to look at"
        [ "$rows" -gt 0 ] || fail "$k: no token seen has its row inside the inner pages"
        [ "$outside" = 0 ] || fail "$k: $outside resident pages of $tab hold no row of a token seen"
        [ "$resident" = "$rows" ] || fail "$k: $resident of the $rows pages of the rows seen are resident"
        # KV: layers 0, 1 slide (rings of min(64, 16 - 1 + 64) rows), layer 2 is
        # full (64), layers 3 and 4 read layers 1 and 2: 192 rows of 64 f16
        # (the widest layer's kv_dim), K and V: 49,152 bytes = 0.05 MiB
        grep -q "KV cache 0.05 MiB (f16, 64 positions)" "$T/run.log" ||
            fail "$k: KV cache of the shared layers: $(grep -o 'KV cache [^,]*' "$T/run.log")"
        read -r all want <<< "$(mwgguf active-bytes "$f" 0)"
        got=$(grep -o 'per token ([0-9]* bytes)' "$T/run.log" | tr -dc 0-9)
        echo "  decode reads $got bytes per token (tensors: $all bytes, $want read per token)"
        [ "$got" = "$want" ] || fail "$k: bandwidth line says $got bytes per token, expected $want"
    fi
    rm -f "$f"
done
[ $n_run -gt 0 ] || [ $fails -gt 0 ] || skip "no gemma4 fixture could be made"
finish
