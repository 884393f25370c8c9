#!/usr/bin/env bash
# Qwen2-style and Llama-3-style checkpoints (tests/fixtures/mk_hf_fixture.py:
# q/k/v biases, tied embeddings, byte-level BPE tokenizer.json, vocab_size 1194
# (not a multiple of 256);
# rope_theta 500000, llama3 rope_scaling, merges as pairs) convert, load in
# llama.cpp (llama-peer info), and llama.cpp's tokenization of the sample
# text through our GGUF equals the fixture's own tokenization.
#
#   convert_fixtures.sh [peer]   without "peer": the memwall side only
source "$(dirname "${BASH_SOURCE[0]}")/hf_common.sh"
WITH_PEER=${1:-}
have_python || { skip "python3 needed for the fixtures"; }

for k in qwen2 llama3 odd; do
    python3 "$FIX/mk_hf_fixture.py" "$k" "$T/$k" || exit 1
done
python3 "$FIX/mk_hf_fixture.py" llama3 "$T/llama3-sharded" --shards 3 || exit 1

# memwall side (no llama.cpp needed)
for k in qwen2 llama3 odd llama3-sharded; do
    for t in f16 q8_0; do
        run 0 convert "$T/$k" -o "$T/$k-$t.gguf" --type $t -q || continue
        run 0 verify "$T/$k-$t.gguf"
    done
done
mwgguf tensors-cmp "$T/llama3-f16.gguf" "$T/llama3-sharded-f16.gguf" > "$T/cmp" ||
    fail "sharded llama3 differs from single-file: $(cat "$T/cmp")"
run 0 inspect "$T/qwen2-f16.gguf"
has "$out" "qwen2" "qwen2 arch"
has "$out" "blk.0.attn_q.bias" "qwen2 biases"
grep -qE '[[:space:]]output\.weight[[:space:]]' "$T/out" && fail "tied qwen2 has an output.weight"
run 0 inspect "$T/llama3-f16.gguf"
has "$out" "rope_freqs.weight" "llama3 rope_freqs"
has "$out" "llama-bpe" "llama3 pre-tokenizer"
run 0 inspect "$T/odd-q8_0.gguf"
has "$out" "f16" "odd rows fall back to f16"
has "$out" "llama.rope.scaling.type" "linear rope scaling"
[[ $out == *rope_freqs* ]] && fail "linear rope scaling wrote rope_freqs"

[ "$WITH_PEER" = peer ] || finish
need_peer

expect() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
for k in qwen2 llama3 odd; do
    for t in f16 q8_0; do
        g="$T/$k-$t.gguf"
        if ! "$PEER" info "$g" > "$T/info" 2> "$T/info.err"; then
            fail "llama.cpp cannot load $k-$t: $(tail -n 3 "$T/info.err")"
            continue
        fi
        arch=$(awk '$1=="arch"{print $2}' "$T/info")
        nv=$(awk '$1=="n_vocab"{print $2}' "$T/info")
        want_arch=llama; [ $k = qwen2 ] && want_arch=qwen2
        [ "$arch" = "$want_arch" ] || fail "$k-$t: arch '$arch', want $want_arch"
        [ "$nv" = "$(expect "$T/$k/expected_tokens.json" vocab_size)" ] || fail "$k-$t: n_vocab $nv"
    done
    # tokenization of the sample text (no BOS) equals the fixture's definition
    python3 -c "import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))['text'])" \
        "$T/$k/expected_tokens.json" > "$T/$k.txt"
    "$PEER" tokenize "$T/$k-f16.gguf" "$T/$k.txt" --no-bos > "$T/$k.tok" 2> "$T/$k.tok.err" ||
        { fail "$k: llama-peer tokenize failed: $(tail -n 2 "$T/$k.tok.err")"; continue; }
    python3 "$PYLIB/tokens_cmp.py" "$T/$k/expected_tokens.json" "$T/$k.tok" || fail "$k: tokenization differs"
    # and the model runs
    "$PEER" generate "$T/$k-q8_0.gguf" "Hello world" 4 > "$T/gen" 2> "$T/gen.err" ||
        fail "$k: llama.cpp generate failed: $(tail -n 2 "$T/gen.err")"
done
finish
