#!/usr/bin/env bash
# The qwen35 and gpt-4o (o200k) pre-tokenizers: memwall-run --tokenize
# against llama.cpp's tokenizer (tests/peer: llama-peer tokenize, llama.cpp
# 80fb11ac), id for id, and the o200k one also against Hugging Face's
# (tests/lib/hf_tokenize.js: @lenml/tokenizers, a port of HF tokenizers).
#
#   qwen35    the real Qwen3 tokenizer.json made Qwen3.5-style
#             (tests/fixtures/mk_tok_variant.py: Qwen3.5's Split regex,
#             Qwen2's with \p{M}; the NFC normalizer dropped so that NFD text
#             reaches both pre-tokenizers with its combining marks; Qwen3.5's
#             chat template) in the qwen3 fixture: memwall convert writes
#             pre "qwen35", llama.cpp loads it without a pre-tokenizer
#             warning, memwall-run -i detects the chatml-think format
#             (chatml-nothink with --no-think), llama.cpp's end-of-generation
#             ids are those check_tok_real asserts for memwall's; texts:
#             the multilingual sample plus Vietnamese / Devanagari / Thai /
#             Tamil, digits and code, then all of it again in NFD
#             (mk_tok_variant.py marks), and special-token spellings, with
#             every --no-bos / --parse-special combination; a probe of every
#             code point (mk_tok_probe.py); Hugging Face's ids (node) on
#             the marks text too.
#   phi4mini  the Phi-4-mini fixture (mk_family_fixture.py phi4mini: GPT-4o's
#             o200k tokenizer.json, Split "Removed" with invert true, plus
#             Phi-4-mini's added tokens): pre "gpt-4o", no llama.cpp warning;
#             eval.txt, the multilingual sample, the marks text and the
#             special spellings (one file) with every --no-bos /
#             --parse-special combination; the code point probe with the
#             defaults.
#             Hugging Face's ids (added tokens matched, none added: memwall's
#             --no-bos --parse-special) must equal memwall's on eval.txt, the
#             special spellings and the lines of the multilingual sample
#             without combining marks (CJK, Cyrillic, Arabic, Greek, Hebrew,
#             emoji, digit runs, code); the same tokenizer with its Split as
#             behavior "Isolated" gives the same ids on both sides, and as
#             "MergedWithNext" is refused (exit 1, naming it). Where a text has
#             combining marks
#             llama.cpp's gpt-4o regex (no \p{M}; every non-ASCII letter both
#             upper and lower case) splits otherwise than Hugging Face's, and
#             memwall follows llama.cpp: the number of differing ids on the
#             multilingual sample is printed, not asserted.
#
# Skipped (77) without llama-peer, python3, node or the real tokenizers.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
RUNBIN="$MW_BIN/memwall-run"
EVAL="$MW_DATASETS/corpora/eval.txt"
SAMPLE="$FIX/multilingual.txt"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

need_peer
have_python || skip "python3 missing (fixtures)"
[ -f "$EVAL" ] || skip "datasets/corpora/eval.txt missing"
fetch_tokenizers
scratch_on_shm tokpre

total=0
source "$HERE/tok_common.sh"
same() {
    tok_same "$@"
    total=$((total + TOK_N))
}

python3 "$FIX/mk_tok_variant.py" marks "$SAMPLE" "$T/marks.txt" || fail "mk_tok_variant.py marks"
python3 "$FIX/mk_tok_variant.py" nomarks "$SAMPLE" "$T/nomarks.txt" || fail "mk_tok_variant.py nomarks"
python3 "$FIX/mk_tok_probe.py" "$T/probe.txt" || fail "mk_tok_probe.py"
printf ' <|endoftext|><|im_start|>user\n<think>x</think><|im_end|> <|user|>hi<|end|><|assistant|> <|endofprompt|><|tag|>\n\n\n  two  spaces\r\n\t\tcode(1234567, 89)  x /* y */\n' \
    > "$T/special.txt"

# load_ok NAME GGUF PRE: the file's pre-tokenizer is PRE and llama.cpp loads
# it without a pre-tokenizer warning
load_ok() {
    local got
    got=$(mwgguf kv "$2" tokenizer.ggml.pre)
    [ "$got" = "$3" ] || fail "$1: tokenizer.ggml.pre '$got', want '$3'"
    "$PEER" -v info "$2" > "$T/info" 2>&1 || { fail "$1: llama.cpp does not load it"; return 1; }
    if grep -qiE "missing pre-tokenizer|pre-tokenizer.*(unknown|not recognized)|GENERATION QUALITY" "$T/info"; then
        fail "$1: llama.cpp warns about the pre-tokenizer"
    fi
}
# eog_is NAME IDS: llama.cpp's end-of-generation ids (of the last load_ok)
# are IDS, the set tests/check_tok_real.c asserts for memwall's tokenizer
eog_is() {
    local got
    got=$(sed -n 's/.*EOG token *= *\([0-9]*\) .*/\1/p' "$T/info" | sort -n | tr '\n' ' ')
    [ "$got" = "$2 " ] || fail "$1: llama.cpp's EOG ids [$got], memwall's (check_tok_real) [$2]"
}
ALLFLAGS=("" "--no-bos" "--parse-special" "--no-bos --parse-special")

echo "== qwen35"
python3 "$FIX/mk_family_fixture.py" qwen3 "$T/hf-q35" > "$T/fx.log" 2>&1 || fail "mk_family_fixture.py qwen3: $(tail -n 2 "$T/fx.log")"
python3 "$FIX/mk_tok_variant.py" json "$T/hf-q35/tokenizer.json" "$T/tj.json" --pre qwen35 \
    --no-normalizer --template "$T/hf-q35/tokenizer_config.json" "$FIX/qwen35_chat_template.jinja" &&
    mv "$T/tj.json" "$T/hf-q35/tokenizer.json" || fail "mk_tok_variant.py json"
if $MW_EMU "$MEMWALL" convert "$T/hf-q35" -o "$T/q35.gguf" -q > "$T/c.log" 2>&1; then
    load_ok qwen35 "$T/q35.gguf" qwen35
    eog_is qwen35 "128247 151643 151645 151662 151663 151664"
    $MW_EMU "$RUNBIN" -m "$T/q35.gguf" -i < /dev/null > /dev/null 2> "$T/chat.err"
    grep -q "chat format chatml-think" "$T/chat.err" || fail "qwen35: chat format: $(head -n 3 "$T/chat.err")"
    $MW_EMU "$RUNBIN" -m "$T/q35.gguf" -i --no-think < /dev/null > /dev/null 2> "$T/chat.err"
    grep -q "chat format chatml-nothink" "$T/chat.err" || fail "qwen35 --no-think: chat format: $(head -n 3 "$T/chat.err")"
    n0=$total
    same "qwen35 probe" "$T/probe.txt" "$T/probe.txt" "$T/q35.gguf"
    cat "$T/marks.txt" "$T/special.txt" > "$T/q35.txt"
    for fl in "${ALLFLAGS[@]}"; do
        # shellcheck disable=SC2086
        same "qwen35 marks+special" "$T/q35.txt" "$T/q35.txt" "$T/q35.gguf" $fl
    done
    echo "  $((total - n0)) ids identical to llama.cpp's"
    # Hugging Face's ids on the marks text, its invalid bytes (which node
    # reads as U+FFFD) and "</s>" (a normal token in Qwen's tokenizer.json,
    # control by llama.cpp's rules) left out
    if command -v node > /dev/null 2>&1 && [ -f "$MW_TOK_DIR/gpt4o/tokenizer.global.js" ]; then
        sed 's#</s>##g' "$T/marks.txt" | iconv -f UTF-8 -t UTF-8 -c > "$T/q35hf.txt"
        node "$PYLIB/hf_tokenize.js" "$MW_TOK_DIR/gpt4o/tokenizer.global.js" "$T/hf-q35" \
            "$T/q35hf.txt" 2> "$T/hf.err" | tr -s ' \n' '\n' | sed '/^$/d' > "$T/hf.l"
        $MW_EMU "$RUNBIN" -m "$T/q35.gguf" --tokenize "$T/q35hf.txt" -q --no-bos --parse-special |
            tr -s ' \n' '\n' | sed '/^$/d' > "$T/ours.l"
        if [ -s "$T/hf.l" ] && cmp -s "$T/ours.l" "$T/hf.l"; then
            echo "  $(wc -l < "$T/hf.l") ids identical to Hugging Face's (marks text)"
            total=$((total + $(wc -l < "$T/hf.l")))
        else
            fail "qwen35 marks text: differs from Hugging Face's ($(wc -l < "$T/ours.l") ids vs $(wc -l < "$T/hf.l")) $(tail -n 2 "$T/hf.err")"
        fi
    fi
    rm -rf "$T/q35.gguf" "$T/hf-q35"
else
    fail "qwen35: memwall convert: $(tail -n 2 "$T/c.log")"
fi

echo "== phi4mini (o200k)"
python3 "$FIX/mk_family_fixture.py" phi4mini "$T/hf-p4" > "$T/fx.log" 2>&1 || fail "mk_family_fixture.py phi4mini: $(tail -n 2 "$T/fx.log")"
if $MW_EMU "$MEMWALL" convert "$T/hf-p4" -o "$T/p4.gguf" -q > "$T/c.log" 2>&1; then
    load_ok phi4mini "$T/p4.gguf" gpt-4o
    eog_is phi4mini "199999 200020"
    n0=$total
    # one file (each call loads the 200k vocabulary): eval.txt, the sample
    # (with code), the marks text, the special spellings
    cat "$EVAL" "$SAMPLE" "$T/marks.txt" "$T/special.txt" > "$T/p4.txt"
    for fl in "${ALLFLAGS[@]}"; do
        # shellcheck disable=SC2086
        same "phi4mini eval+sample+marks+special" "$T/p4.txt" "$T/p4.txt" "$T/p4.gguf" $fl
    done
    same "phi4mini probe" "$T/probe.txt" "$T/probe.txt" "$T/p4.gguf"
    echo "  $((total - n0)) ids identical to llama.cpp's"
    if command -v node > /dev/null 2>&1 && [ -f "$MW_TOK_DIR/gpt4o/tokenizer.global.js" ]; then
        hf_texts=("$EVAL" "$T/special.txt" "$T/nomarks.txt" "$SAMPLE")
        if node "$PYLIB/hf_tokenize.js" "$MW_TOK_DIR/gpt4o/tokenizer.global.js" "$T/hf-p4" \
            "${hf_texts[@]}" > "$T/hf.ids" 2> "$T/hf.err"; then
            nh=0
            for i in "${!hf_texts[@]}"; do
                t=${hf_texts[$i]}
                sed -n "$((i + 1))p" "$T/hf.ids" | tr -s ' \n' '\n' | sed '/^$/d' > "$T/hf.l"
                $MW_EMU "$RUNBIN" -m "$T/p4.gguf" --tokenize "$t" -q --no-bos --parse-special |
                    tr -s ' \n' '\n' | sed '/^$/d' > "$T/ours.l"
                if [ "$t" = "$SAMPLE" ]; then
                    d=$(diff "$T/ours.l" "$T/hf.l" | grep -c '^[<>]')
                    echo "  multilingual sample with marks: $d ids differ from Hugging Face's (llama.cpp's gpt-4o regex)"
                elif cmp -s "$T/ours.l" "$T/hf.l"; then
                    nh=$((nh + $(wc -l < "$T/hf.l")))
                else
                    at=$(cmp "$T/ours.l" "$T/hf.l" 2> /dev/null | awk '{ print $NF }')
                    fail "phi4mini $(basename "$t"): differs from Hugging Face's from id #${at:-1}: ours $(tail -n +"${at:-1}" "$T/ours.l" | head -n 8 | tr '\n' ' ') hf $(tail -n +"${at:-1}" "$T/hf.l" | head -n 8 | tr '\n' ' ')"
                fi
            done
            echo "  $nh ids identical to Hugging Face's"
            total=$((total + nh))
            # the same Split as behavior "Isolated" (invert false): the same
            # pieces for Hugging Face and for memwall (pre gpt-4o too)
            mkdir -p "$T/hf-iso"
            cp "$T/hf-p4/config.json" "$T/hf-p4/tokenizer_config.json" "$T/hf-iso/"
            ln -s "$T/hf-p4/model.safetensors" "$T/hf-iso/model.safetensors"
            python3 "$FIX/mk_tok_variant.py" split "$T/hf-p4/tokenizer.json" "$T/hf-iso/tokenizer.json" Isolated false
            if $MW_EMU "$MEMWALL" convert "$T/hf-iso" -o "$T/iso.gguf" -q > "$T/c.log" 2>&1; then
                [ "$(mwgguf kv "$T/iso.gguf" tokenizer.ggml.pre)" = gpt-4o ] || fail "Isolated form: not pre gpt-4o"
                node "$PYLIB/hf_tokenize.js" "$MW_TOK_DIR/gpt4o/tokenizer.global.js" "$T/hf-iso" \
                    "${hf_texts[@]:0:3}" > "$T/hf-iso.ids" 2> "$T/hf.err" || fail "hf_tokenize.js (Isolated): $(tail -n 2 "$T/hf.err")"
                head -n 3 "$T/hf.ids" | cmp -s - "$T/hf-iso.ids" || fail "Hugging Face: Isolated and inverted Removed give other ids"
                for i in 0 1 2; do
                    $MW_EMU "$RUNBIN" -m "$T/iso.gguf" --tokenize "${hf_texts[$i]}" -q --no-bos --parse-special |
                        tr -s ' \n' '\n' | sed '/^$/d' > "$T/ours.l"
                    sed -n "$((i + 1))p" "$T/hf-iso.ids" | tr -s ' \n' '\n' | sed '/^$/d' | cmp -s - "$T/ours.l" ||
                        fail "Isolated form: $(basename "${hf_texts[$i]}") differs from Hugging Face's"
                done
                echo "  Split Isolated = Removed with invert: the same ids (Hugging Face and memwall)"
            else
                fail "Isolated form: memwall convert: $(tail -n 2 "$T/c.log")"
            fi
            # a form llama.cpp has no pre-tokenizer for: refused, naming it
            python3 "$FIX/mk_tok_variant.py" split "$T/hf-p4/tokenizer.json" "$T/hf-iso/tokenizer.json" MergedWithNext false
            $MW_EMU "$MEMWALL" convert "$T/hf-iso" -o "$T/mwn.gguf" -q > "$T/c.log" 2>&1
            rc=$?
            [ $rc -eq 1 ] && grep -q 'MergedWithNext' "$T/c.log" && [ ! -e "$T/mwn.gguf" ] ||
                fail "Split MergedWithNext: exit $rc, want 1 naming it and no output: $(tail -n 2 "$T/c.log")"
            rm -rf "$T/hf-iso" "$T/iso.gguf"
        else
            fail "hf_tokenize.js: $(tail -n 2 "$T/hf.err")"
        fi
    else
        [ "$fails" -eq 0 ] || finish
        skip "node or the @lenml/tokenizers bundle missing (Hugging Face reference)"
    fi
    rm -rf "$T/hf-p4" "$T/p4.gguf"
else
    fail "phi4mini: memwall convert: $(tail -n 2 "$T/c.log")"
fi
echo "total: $total ids compared"
finish
