#!/usr/bin/env bash
# Gemma 4's and gpt-oss's tokenizers and chat formats against llama.cpp
# (tests/peer: llama-peer, llama.cpp 80fb11ac).
#
#   gemma4  the gemma4dense fixture (mk_family_fixture.py: Gemma 3's real
#           tokenizer.json made Gemma 4-like: <|turn> / <turn|>, the channel
#           and tool tokens; no Gemma 4 tokenizer ships in npm) converted by
#           memwall: tokenizer.ggml.model "gemma4", no pre, scores -1000,
#           LlamaHfVocab's types with the channel / tool tokens USER_DEFINED
#           (the byte identity with llama.cpp's converter is
#           hf_convert_families'); llama.cpp loads it with no pre-tokenizer
#           warning.
#   gpt-oss the gptoss fixture (GPT-4o's real o200k plus the 1,090 harmony
#           specials, gpt-oss's tokenizer_config.json and chat template)
#           converted by memwall: pre "gpt-4o".
#
# For each: memwall-run --tokenize equals llama-peer tokenize (llama-tokenize's
# flags) over eval.txt, the multilingual sample and the family's special-token
# spellings (one file), with every --no-bos / --parse-special combination.
# memwall-run tokenizes the converted file itself where the runtime runs its
# architecture, else (the runtime need not run it for that) a twin:
# mk_tok_twin.py makes a one-layer llama carrying the converted file's
# tokenizer.* keys; llama.cpp tokenizes the converted file (vocabulary
# only). The same twin with one token's logit made the
# largest (mk_tok_twin.py FAVOR_ID) checks where `memwall-run -p` stops: at
# each id of llama.cpp's end-of-generation set (llama-peer -v info: Gemma 4
# <eos>, <|tool_response>, <turn|>; gpt-oss <|endoftext|>, <|return|>,
# <|call|>), and not at Gemma 4's "</s>" nor gpt-oss's "<|end|>", which
# llama.cpp takes out of the set. `memwall-run -i` detects the chat format
# (gemma4, harmony) from the template; the turns' text is check_tok_norm's.
#
# Skipped (77) without llama-peer, python3, eval.txt or the real tokenizers.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
RUNBIN="$MW_BIN/memwall-run"
EVAL="$MW_DATASETS/corpora/eval.txt"
SAMPLE="$FIX/multilingual.txt"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

need_peer
have_python || skip "python3 missing (fixtures)"
[ -f "$EVAL" ] || skip "datasets/corpora/eval.txt missing"
fetch_tokenizers
scratch_on_shm tokchat

total=0
ALLFLAGS=("" "--no-bos" "--parse-special" "--no-bos --parse-special")

source "$HERE/tok_common.sh"
# same LABEL TEXT TWIN CONVERTED [FLAGS...]: memwall-run --tokenize on the
# twin and llama-peer tokenize on the converted file give the same ids
same() {
    local label=$1 text=$2 tw=$3 m=$4
    shift 4
    TOK_OURS_GGUF=$tw tok_same "$label" "$text" "$text" "$m" "$@"
    total=$((total + TOK_N))
}

# family NAME KIND ARCH EOG_IDS NOT_EOG_ID FORMAT SPECIALS_TEXT
family() {
    local name=$1 kind=$2 arch=$3 eog=$4 not_eog=$5 fmt=$6 spec=$7
    echo "== $name"
    python3 "$FIX/mk_family_fixture.py" "$kind" "$T/hf" > "$T/fx.log" 2>&1 || {
        fail "mk_family_fixture.py $kind: $(tail -n 2 "$T/fx.log")"
        return
    }
    if ! $MW_EMU "$MEMWALL" convert "$T/hf" -o "$T/m.gguf" -q > "$T/c.log" 2>&1; then
        fail "$name: memwall convert: $(tail -n 2 "$T/c.log")"
        return
    fi
    rm -rf "$T/hf"
    "$PEER" -v info "$T/m.gguf" > "$T/info" 2>&1 || { fail "$name: llama.cpp does not load it"; return; }
    [ "$(awk '$1=="arch"{print $2}' "$T/info")" = "$arch" ] || fail "$name: llama.cpp does not read arch $arch"
    if grep -qiE "missing pre-tokenizer|pre-tokenizer.*(unknown|not recognized)|GENERATION QUALITY" "$T/info"; then
        fail "$name: llama.cpp warns about the pre-tokenizer"
    fi
    local got
    got=$(sed -n 's/.*EOG token *= *\([0-9]*\) .*/\1/p' "$T/info" | sort -n | tr '\n' ' ')
    [ "$got" = "$eog " ] || fail "$name: llama.cpp's EOG ids [$got], expected [$eog]"
    # shellcheck disable=SC2086
    python3 "$FIX/mk_tok_twin.py" "$T/m.gguf" "$T/tw" $eog $not_eog > "$T/tw.log" 2>&1 || {
        fail "mk_tok_twin.py: $(tail -n 2 "$T/tw.log")"
        return
    }
    local n0=$total
    cat "$EVAL" "$SAMPLE" "$spec" > "$T/text.txt"
    # the converted file itself where the runtime runs its architecture
    local ours=$T/tw.gguf on="a llama twin of"
    if $MW_EMU "$RUNBIN" -m "$T/m.gguf" --tokenize "$spec" -q > /dev/null 2>&1; then
        ours=$T/m.gguf
        on="memwall-run on"
    fi
    local fl
    for fl in "${ALLFLAGS[@]}"; do
        # shellcheck disable=SC2086
        same "$name eval+sample+specials" "$T/text.txt" "$ours" "$T/m.gguf" $fl
    done
    echo "  $((total - n0)) ids identical to llama.cpp's ($on the converted file)"
    local id
    for id in $eog $not_eog; do
        $MW_EMU "$RUNBIN" -m "$T/tw-$id.gguf" -p "hi" -n 3 > "$T/gen" 2> "$T/gen.err" ||
            { fail "$name: memwall-run -p on the twin favoring $id: $(tail -n 2 "$T/gen.err")"; continue; }
        if [ "$id" = "$not_eog" ]; then
            grep -q "generated 3 tokens" "$T/gen.err" ||
                fail "$name: generation stopped at $id, which llama.cpp does not end at: $(tail -n 1 "$T/gen.err")"
        else
            grep -q "generated 0 tokens.*stopped at end of generation" "$T/gen.err" ||
                fail "$name: generation does not stop at $id (llama.cpp's EOG): $(tail -n 1 "$T/gen.err")"
        fi
    done
    echo "  stops at [$eog], not at $not_eog"
    echo hi | $MW_EMU "$RUNBIN" -m "$T/tw-${eog%% *}.gguf" -i -n 2 > /dev/null 2> "$T/chat.err"
    grep -q "chat format $fmt;" "$T/chat.err" || fail "$name: chat format: $(head -n 4 "$T/chat.err")"
    rm -f "$T"/tw*.gguf "$T/m.gguf"
}

printf '<bos><|turn>system\nbe brief<turn|>\n<|turn>user\nhi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>ok<turn|>\n<|tool_call>call:f{a:<|"|>x<|"|>}<tool_call|><|tool_response>r<tool_response|> <eos></s><pad><unk><mask><start_of_image> <0x41> <|turn><turn|>x<|channel><channel|>\n\n\n  two  spaces\r\n\t\tcode(1234567, 89)\n\n\n\n\n\nend \xe2\x96\x81\xe2\x96\x81 \xe2\x96\x81x\n' \
    > "$T/g4spec.txt"
family gemma4 gemma4dense gemma4 "1 10 106" 212 gemma4 "$T/g4spec.txt"

printf '<|startoftext|><|start|>system<|message|>You are ChatGPT.<|end|><|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|> <|call|><|constrain|>json<|endofprompt|><|endoftext|><|reserved_200013|> <|end|>x <|start|>assistant to=functions.f<|channel|>commentary json<|message|>{"a": 1}<|call|>\n\n\n  two  spaces\r\n\t\tcode(1234567, 89)\n' \
    > "$T/hspec.txt"
family gpt-oss gptoss gpt-oss "199999 200002 200012" 200007 harmony "$T/hspec.txt"

echo "total: $total ids compared"
finish
