#!/usr/bin/env bash
# memwall-run --tokenize against llama.cpp's tokenizer (tests/peer:
# llama-peer tokenize, llama.cpp 80fb11ac), id for id, on the real Qwen3,
# Gemma 3 (also inside Gemma3ForConditionalGeneration) and Gemma 2
# tokenizers in GGUF files written by memwall convert:
#
#   models  the family fixtures of tests/fixtures/mk_family_fixture.py
#           (qwen3: byte-level BPE, pre "qwen2", NFC normalizer; gemma3:
#           tokenizer.json only, SentencePiece-style BPE -> "gpt2" with pre
#           "granite-embed-multi-311m" as llama.cpp writes it; gemma3mm:
#           the same tokenizer in a Gemma3ForConditionalGeneration (vocab
#           262208 from text_config's defaults); gemma2:
#           tokenizer.model -> SentencePiece "llama", no dummy prefix).
#   texts   datasets/corpora/eval.txt, tests/fixtures/multilingual.txt, a
#           file of special-token spellings and odd white space, and one of
#           odd bytes;
#   flags   none, --no-bos, --parse-special, --no-bos --parse-special (the
#           same flags on both sides, as llama-tokenize's) on the special-token
#           spellings; the other texts with the defaults.
#
# Qwen3's tokenizer.json asks for NFC, which memwall applies on its own files
# (memwall.tokenizer.normalizer) and llama.cpp does not (it has no
# normalizer): for Qwen3, llama.cpp is given the NFC form of each text
# (python3 unicodedata) and memwall both the text as it is and its NFC form;
# all three must give the same ids.
#
# Skipped (77) without llama-peer or python3.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
RUNBIN="$MW_BIN/memwall-run"
EVAL="$MW_DATASETS/corpora/eval.txt"
SAMPLE="$FIX/multilingual.txt"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

need_peer
have_python || skip "python3 missing (fixtures, NFC texts)"
[ -f "$FIX/mk_family_fixture.py" ] || skip "tests/fixtures/mk_family_fixture.py missing"
fetch_tokenizers
scratch_on_shm tokfam

total=0
source "$HERE/tok_common.sh"
# same LABEL OURS_TEXT THEIR_TEXT GGUF FLAGS...: tok_same, counted
same() {
    tok_same "$@"
    total=$((total + TOK_N))
    fam_total=$((fam_total + TOK_N))
}

printf ' </s> <|im_end|> hi<|endoftext|> <think>x</think> <|fim_pad|><|repo_name|>\n<start_of_turn>user\n  hello  <end_of_turn>\n<start_of_turn>model\n<bos><eos><pad> <unused0> [multimodal] <mask> <unk> <s> <0x41> \xe2\x96\x81\xe2\x96\x81x \t\tcode\n    indented\n\n\n\n  two  spaces   three\r\n<|im_start|>system\n<|user|><|end|>' \
    > "$T/special.txt"
printf ' leading space, \xe2\x96\x81 marker, \xc3\xa9t\xc3\xa9 \xe2\x82\xac 1234567 \t tabs  \n\n \xff\xfe bad bytes \xf0\x9f\x99\x82 e\xcc\x81 end' \
    > "$T/odd.txt"
texts=("$SAMPLE" "$T/special.txt" "$T/odd.txt")
names=(multilingual special odd)
[ -f "$EVAL" ] && { texts+=("$EVAL"); names+=(eval.txt); }

# nfc IN OUT: the NFC form of IN (invalid bytes kept)
nfc() { python3 "$PYLIB/nfc.py" "$1" "$2"; }

for fam in qwen3 gemma3 gemma3mm gemma2; do
    fam_total=0
    echo "== $fam"
    if ! python3 "$FIX/mk_family_fixture.py" $fam "$T/hf-$fam" > "$T/fx.log" 2>&1; then
        fail "$fam: mk_family_fixture.py: $(tail -n 2 "$T/fx.log")"
        continue
    fi
    if ! $MW_EMU "$MEMWALL" convert "$T/hf-$fam" -o "$T/$fam.gguf" -q > "$T/c.log" 2>&1; then
        fail "$fam: memwall convert: $(tail -n 2 "$T/c.log")"
        continue
    fi
    rm -rf "$T/hf-$fam"
    "$PEER" -v info "$T/$fam.gguf" > "$T/info" 2>&1 || { fail "$fam: llama.cpp does not load it"; continue; }
    if grep -qiE "missing pre-tokenizer|pre-tokenizer.*(unknown|not recognized)|GENERATION QUALITY" "$T/info"; then
        fail "$fam: llama.cpp warns about the pre-tokenizer"
    fi
    for i in "${!texts[@]}"; do
        flags=("")
        # every flag combination on the special-token spellings; the other texts
        # with llama-tokenize's defaults (each call loads the whole vocabulary twice)
        [ "${names[$i]}" = special ] && flags+=("--no-bos" "--parse-special" "--no-bos --parse-special")
        for fl in "${flags[@]}"; do
            # shellcheck disable=SC2086
            if [ $fam = qwen3 ]; then
                nfc "${texts[$i]}" "$T/nfc.txt"
                # llama.cpp once, on the NFC form (tok_same, memwall on it too),
                # and memwall on the text as it is giving those ids again: the
                # three the same (llama.cpp's run for the as-is text repeated
                # the NFC one, a vocabulary load each)
                same "$fam ${names[$i]} (NFC / NFC)" "$T/nfc.txt" "$T/nfc.txt" "$T/$fam.gguf" $fl
                if $MW_EMU "$RUNBIN" -m "$T/$fam.gguf" --tokenize "$T/nfc.txt" -q $fl > "$T/ours-nfc" 2> /dev/null &&
                   $MW_EMU "$RUNBIN" -m "$T/$fam.gguf" --tokenize "${texts[$i]}" -q $fl > "$T/ours-raw" 2> "$T/raw.err" &&
                   cmp -s "$T/ours-raw" "$T/ours-nfc"; then
                    n=$(wc -w < "$T/ours-raw")
                    total=$((total + n)); fam_total=$((fam_total + n))
                else
                    fail "$fam ${names[$i]} [$fl]: memwall's ids of the text as it is differ from those of its NFC form: $(tail -n 2 "$T/raw.err")"
                fi
            else
                same "$fam ${names[$i]}" "${texts[$i]}" "${texts[$i]}" "$T/$fam.gguf" $fl
            fi
        done
    done
    echo "  $fam_total ids identical to llama.cpp's"
    rm -f "$T/$fam.gguf"
done
echo "total: $total ids compared"
finish
