#!/usr/bin/env bash
# The runtime's tokenizers against llama.cpp's (tests/peer: llama-peer
# tokenize, llama.cpp 80fb11ac) on the same GGUF files, token id for token id
# (BOS as the vocabulary asks, parse_special off on both sides):
#
#   models  tinyllama-8m as llama.cpp converted it (SentencePiece BPE, byte
#           fallback); the qwen2, llama3 and gpt2 fixtures of mk_hf_fixture.py
#           converted by memwall convert (byte-level BPE, pre-tokenizers
#           "qwen2", "llama-bpe" and "gpt-2"; BPEs trained on the
#           multilingual sample)
#   texts   datasets/corpora/eval.txt; tests/fixtures/multilingual.txt
#           (English, Chinese simplified/traditional, Japanese, Korean,
#           Cyrillic, Arabic, Devanagari, Greek, Hebrew, Thai, C and Python
#           code, tabs, \r\n and long white space runs, long numbers,
#           contractions, emoji with ZWJ and skin tones, combining marks,
#           NFC/NFD, invalid UTF-8, special-token lookalikes); odd strings;
#           and the code point probe of mk_tok_probe.py (every code point
#           U+0080..U+3FFFF and U+E0000..U+E0FFF between probe letters: the
#           fixtures' probe merges make each one's pre-tokenizer class show
#           in the ids; with gpt-2's regex numbers and white space look alike)
#
# Skipped (77) when llama-peer cannot be built here; the fixtures and the
# probe need python3.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
RUNBIN="$MW_BIN/memwall-run"
EVAL="$MW_DATASETS/corpora/eval.txt"
REF_F16=$(ref tinyllama-8m.llamacpp-f16.gguf)
SAMPLE="$FIX/multilingual.txt"

need_peer

source "$(dirname "${BASH_SOURCE[0]}")/tok_common.sh"
# compare LABEL GGUF TEXT [MODEL]: ids identical, counted
total=0
compare() {
    tok_same "${4:+$4: }$1" "$3" "$3" "$2"
    [ "$TOK_N" -gt 0 ] || return 0
    echo "  $1: $TOK_N ids ($(wc -c < "$3") bytes), identical"
    total=$((total + TOK_N))
}

printf ' leading space, \xe2\x96\x81 marker, \xc3\xa9t\xc3\xa9 \xe2\x82\xac 1234567 \t tabs  \n\n \xff\xfe bad bytes <s> </s> <unk> [INST] \xf0\x9f\x99\x82 end' \
    > "$T/odd.txt"
texts=("$SAMPLE" "$T/odd.txt")
names=(multilingual odd)
[ -f "$EVAL" ] && { texts+=("$EVAL"); names+=(eval.txt); }

models=()
labels=()
[ -n "$REF_F16" ] && { models+=("$REF_F16"); labels+=("tinyllama-8m (llama.cpp F16, SPM)"); }
if have_python; then
    python3 "$FIX/mk_tok_probe.py" "$T/probe.txt" || fail "mk_tok_probe.py"
    texts+=("$T/probe.txt")
    names+=("code point probe")
    for k in qwen2 llama3 gpt2; do
        if python3 "$FIX/mk_hf_fixture.py" $k "$T/hf-$k" > /dev/null &&
            $MW_EMU "$MEMWALL" convert "$T/hf-$k" -o "$T/$k.gguf" --type f16 -q > "$T/c.log" 2>&1; then
            models+=("$T/$k.gguf")
            labels+=("fixture $k (byte-level BPE)")
        else
            fail "fixture $k: $(tail -n 2 "$T/c.log" 2> /dev/null)"
        fi
    done
else
    echo "note: python3 missing: no fixtures, no code point probe"
fi
[ ${#models[@]} -gt 0 ] || { skip "no model to tokenize with"; }

# short edge cases, one file each: empty, lone white space / \r / invalid
# bytes / truncated sequences, contractions at the edges, NUL, BOM, NBSP and
# U+0085, ideographic spaces, special-token spellings, U+2581 runs
edges=('' '\n' ' ' '  ' '\r' '\r\n' '\xff' '\xe4\xb8' "'" "'s" "'S" "'ll'" " 's" "a'RE"
    '\t\t\n \n' ' \xc2\xa0 x' '\xe3\x80\x80\xe3\x80\x80a' '\xc2\x85x' '<|endoftext|>'
    '<tool_call>' ' <tool_call> ' '<|im_start|>' '\xe2\x96\x81\xe2\x96\x81' '\xf0\x9f\x98'
    '1 22 333 4444' '\xef\xbb\xbfx' '..\n\n\n' ' ?\n' '\x00a' 'x\x00')
mkdir -p "$T/edge"
for i in "${!edges[@]}"; do printf "${edges[$i]}" > "$T/edge/$i.txt"; done

for m in "${!models[@]}"; do
    echo "== ${labels[$m]}"
    for i in "${!texts[@]}"; do
        compare "${names[$i]}" "${models[$m]}" "${texts[$i]}" "${labels[$m]}"
    done
    ne=0
    for i in "${!edges[@]}"; do
        f=$T/edge/$i.txt
        $MW_EMU "$RUNBIN" -m "${models[$m]}" --tokenize "$f" -q > "$T/ours" 2>&1
        "$PEER" tokenize "${models[$m]}" "$f" > "$T/theirs" 2>&1
        if cmp -s "$T/ours" "$T/theirs"; then
            ne=$((ne + 1))
            total=$((total + $(wc -w < "$T/theirs")))
        else
            fail "${labels[$m]}: edge case '${edges[$i]}': ours [$(cat "$T/ours")], llama.cpp [$(cat "$T/theirs")]"
        fi
    done
    echo "  edge cases: $ne of ${#edges[@]} identical"
    case ${labels[$m]} in
    fixture*)
        # the trained merges must fire on the sample: fewer than one id per
        # two bytes (byte tokens alone would give one per byte)
        $MW_EMU "$RUNBIN" -m "${models[$m]}" --tokenize "$SAMPLE" -q > "$T/ours" 2> /dev/null
        n=$(wc -w < "$T/ours")
        b=$(wc -c < "$SAMPLE")
        echo "  multilingual: $n ids for $b bytes"
        [ $((n * 2)) -lt "$b" ] || fail "${labels[$m]}: merges barely fire on the sample ($n ids, $b bytes)"
        ;;
    esac
done
echo "total: $total ids compared"
finish
