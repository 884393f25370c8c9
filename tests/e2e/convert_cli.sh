#!/usr/bin/env bash
# `memwall convert` / `memwall inspect` on HF inputs: exit codes (0 ok, 1 bad
# input, 2 usage, 3 I/O), atomic output, determinism, verify of the result.
source "$(dirname "${BASH_SOURCE[0]}")/hf_common.sh"

SRC=$(model_dir tinyllama-8m)
[ -n "$SRC" ] || { skip "no tinyllama-8m in datasets/ or shared/"; }

# --- usage: exit 2 ---
run 2 convert
has "$err" "usage: memwall convert" "no args"
run 2 convert "$SRC"
has "$err" "missing -o" "no -o"
run 2 convert "$SRC" -o "$T/x.gguf" --type q4_k
has "$err" "unknown --type 'q4_k'" "bad type"
run 2 convert "$SRC" -o "$T/x.gguf" --bogus
run 2 convert "$SRC" "$SRC" -o "$T/x.gguf"
run 2 convert "$SRC" -o
run 2 convert "$SRC" -o "$T"
run 0 convert --help
has "$out" "q8_0" "--help"
run 0 help convert
has "$out" "--threads" "help --threads"
for bad in 0 513 abc -1 2x ""; do
    run 2 convert "$SRC" -o "$T/x.gguf" --threads "$bad"
    has "$err" "--threads" "--threads '$bad'"
done
run 2 convert "$SRC" -o "$T/x.gguf" -t
[ -e "$T/x.gguf" ] && fail "usage errors created an output file"

# --- bad input: exit 1, nothing written ---
run 1 convert "$T/no-such-dir" -o "$T/x.gguf"
has "$err" "no-such-dir" "missing dir"
mkdir -p "$T/empty"
run 1 convert "$T/empty" -o "$T/x.gguf"
has "$err" "config.json" "empty dir"
[ -e "$T/x.gguf" ] && fail "bad input created an output file"

# --- I/O: exit 3 ---
run 3 convert "$SRC" -o "$T/no/such/dir/x.gguf"

# --- ok: every type; verify; deterministic; quiet stderr in a pipe ---
for t in f16 bf16 f32 q8_0; do
    run 0 convert "$SRC" -o "$T/t-$t.gguf" --type "$t" || continue
    [[ $err == *$'\r'* ]] && fail "progress written to a non-TTY stderr ($t)"
    has "$err" "wrote $T/t-$t.gguf ($t" "convert $t summary"
    run 0 verify "$T/t-$t.gguf"
    run 0 inspect "$T/t-$t.gguf"
    has "$out" "memwall.source_dtype" "inspect $t"
done
run 0 convert "$SRC" -o "$T/t-f16b.gguf" -q --name tiny
[ -z "$err" ] || fail "-q printed: $err"
run 0 convert "$SRC" -o "$T/t-f16c.gguf" -q --name tiny
cmp -s "$T/t-f16b.gguf" "$T/t-f16c.gguf" || fail "two conversions differ (not deterministic)"
run 0 inspect "$T/t-f16b.gguf"
has "$out" '"tiny"' "--name"
# --threads: the same bytes for 1, 2 and 8 threads, F16/BF16/Q8_0,
# from the F16 checkpoint and (when present) the BF16 one
BF=$(model_dir tinyllama-8m-bf16)
for src in "$SRC" $BF; do
    for t in f16 bf16 q8_0; do
        for n in 1 2 8; do
            run 0 convert "$src" -o "$T/th-$t-$n.gguf" --type "$t" --threads "$n" -q
        done
        cmp -s "$T/th-$t-1.gguf" "$T/th-$t-2.gguf" || fail "$t from $src: 1 vs 2 threads differ"
        cmp -s "$T/th-$t-1.gguf" "$T/th-$t-8.gguf" || fail "$t from $src: 1 vs 8 threads differ"
    done
done
run 0 convert "$SRC" -o "$T/th-eq.gguf" -t 8 -q
cmp -s "$T/th-eq.gguf" "$T/t-f16.gguf" || fail "-t 8 output differs from the default run"
rm -f "$T"/th-*.gguf
# sizes: q8_0 < f16 = bf16 < f32
s16=$(stat -c %s "$T/t-f16.gguf"); s8=$(stat -c %s "$T/t-q8_0.gguf"); s32=$(stat -c %s "$T/t-f32.gguf")
{ [ "$s8" -lt "$s16" ] && [ "$s16" -lt "$s32" ]; } || fail "sizes q8_0 $s8 f16 $s16 f32 $s32"
# an existing output survives a failed conversion
echo keep > "$T/keep.gguf"
run 1 convert "$T/empty" -o "$T/keep.gguf"
[ "$(cat "$T/keep.gguf")" = keep ] || fail "failed conversion clobbered the existing output"
ls "$T" | grep -q '\.tmp' && fail "temp files left behind: $(ls "$T")"

# --- inspect on HF inputs ---
run 0 inspect "$SRC"
has "$out" "LlamaForCausalLM" "inspect dir"
has "$out" "blk.0.attn_q.weight" "inspect dir mapping"
has "$out" "rows permuted" "inspect dir permutation"
run 0 inspect "$SRC/model.safetensors"
has "$out" "model.layers.0.self_attn.q_proj.weight" "inspect safetensors"
has "$out" "format = pt" "inspect safetensors metadata"
if have_python; then
    for p in "$SRC" "$SRC/model.safetensors"; do
        run 0 inspect "$p" --json
        python3 -c 'import json,sys; json.load(sys.stdin)' < "$T/out" || fail "inspect --json $p: bad JSON"
    done
fi
head -c 1000 "$SRC/model.safetensors" > "$T/cut.safetensors"
run 1 inspect "$T/cut.safetensors"
has "$err" "cut.safetensors" "inspect truncated"
finish
