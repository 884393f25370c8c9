#!/usr/bin/env bash
# Bad HF input -> exit 1, a message naming the file and the place, and no
# output file: truncated safetensors, lying offsets, a missing shard, an
# unknown dtype, a wrong-shaped tensor, malformed config.json, malformed
# tokenizer.json and tokenizer.model. Damage is made on copies by
# tests/fixtures/hf_corrupt.py on the fixtures of mk_hf_fixture.py.
source "$(dirname "${BASH_SOURCE[0]}")/hf_common.sh"
have_python || { skip "python3 needed for the fixtures"; }

python3 "$FIX/mk_hf_fixture.py" llama3 "$T/llama3" || exit 1
python3 "$FIX/mk_hf_fixture.py" qwen2 "$T/qwen2" || exit 1
python3 "$FIX/mk_hf_fixture.py" llama3 "$T/sharded" --shards 2 || exit 1
for d in llama3 qwen2 sharded; do
    run 0 convert "$T/$d" -o "$T/$d.gguf" -q || { echo "the good fixture $d does not convert"; exit 1; }
done

K=model.layers.0.self_attn.k_proj.weight
# case NAME BASE MODE [TENSOR] -- EXPECT...: damage a copy of BASE, convert,
# want exit 1, no output, and stderr holding every EXPECT string
case_() {
    local name=$1 base=$2 mode=$3
    shift 3
    local tensor=""
    if [ "$1" != "--" ]; then tensor=$1; shift; fi
    shift
    local d="$T/bad-$name"
    rm -rf "$d" && cp -r "$base" "$d"
    python3 "$FIX/hf_corrupt.py" "$mode" "$d" $tensor || { fail "$name: hf_corrupt.py failed"; return; }
    run 1 convert "$d" -o "$T/out-$name.gguf"
    local e
    for e in "$@"; do has "$err" "$e" "$name"; done
    [ -e "$T/out-$name.gguf" ] && fail "$name: output file created"
    ls "$T" | grep -q "out-$name.gguf." && fail "$name: temp file left: $(ls "$T" | grep "out-$name")"
    echo "ok $name: $(echo "$err" | head -n 1)"
}

case_ truncated "$T/llama3" truncate -- "model.safetensors" "tensor '" "truncated"
case_ lying-offsets "$T/llama3" lie-offsets "$K" -- "model.safetensors" "tensor '" "overlaps"
case_ past-end "$T/llama3" past-end "$K" -- "model.safetensors" "tensor '$K'" "past the end"
case_ missing-shard "$T/sharded" drop-shard -- "model.safetensors.index.json" "weight_map." \
    "model-00002-of-00002.safetensors" "does not exist"
case_ unknown-dtype "$T/llama3" unknown-dtype "$K" -- "model.safetensors" "tensor '$K'" "unknown dtype 'Q4'"
case_ wrong-shape "$T/llama3" wrong-shape "$K" -- "model.safetensors" "tensor '$K'" \
    "shape [64, 32], expected [32, 64]"
case_ config-syntax "$T/llama3" config-syntax -- "config.json: offset" "JSON syntax error"
case_ config-missing "$T/llama3" config-missing -- "config.json" "num_attention_heads" "missing"
case_ config-contra "$T/qwen2" config-contra -- "config.json" "model_type" "contradicts"
case_ tokjson-syntax "$T/qwen2" tokjson-syntax -- "tokenizer.json" "offset"
case_ tokjson-merges "$T/llama3" tokjson-merges -- "tokenizer.json" "merges[3]"

# SentencePiece tokenizer.model: tinyllama-8m with a cut tokenizer.model
SRC=$(model_dir tinyllama-8m)
if [ -n "$SRC" ]; then
    mkdir -p "$T/spm"
    for f in "$SRC"/*; do ln -s "$f" "$T/spm/$(basename "$f")"; done
    rm "$T/spm/tokenizer.model" && cp "$SRC/tokenizer.model" "$T/spm/"
    case_ spm-truncate "$T/spm" spm-truncate -- "tokenizer.model" "offset"
fi
finish
