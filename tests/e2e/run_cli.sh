#!/usr/bin/env bash
# memwall-run end to end, on tiny generated models (tests/tools/rt_fixture.c):
#  - exit codes: usage 2, missing file 3, bad model 1
#  - every model of the hostile catalogue (wrong head counts, missing
#    tensors, wrong dims, unsupported types, huge context, bad tokenizer
#    keys ...) and every file of the gguf fuzz corpus is rejected with exit 1
#    and a message naming the key or tensor (ASan-clean in the ASan build)
#  - a valid model: generation, memory accounting, --verify (ok, and a
#    flipped byte caught naming the tensor), q8_0 KV, thread-count
#    determinism, seeded sampling, chat with a sliding window, perplexity
#    and KL divergence output, and `memwall run` / `memwall perplexity`
#    printing exactly what memwall-run prints
#
#   run_cli.sh RT_MKMODEL
source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
MK=${1:?usage: run_cli.sh RT_MKMODEL}
$MW_EMU "$MK" model "$T/m.gguf" || { fail "rt_mkmodel model"; finish; }
$MW_EMU "$MK" model "$T/q.gguf" --arch qwen2 --type q8_0 --tied --gpt2 || fail "rt_mkmodel qwen2"
mkdir -p "$T/hostile" && $MW_EMU "$MK" hostile "$T/hostile" || { fail "rt_mkmodel hostile"; finish; }

# --- usage and I/O ---
mr 2
has "$err" "missing -m MODEL.gguf" "no arguments"
mr 2 -m "$T/m.gguf"
has "$err" "nothing to do" "no action"
mr 2 -m "$T/m.gguf" -p hi --bogus
has "$err" "unknown option '--bogus'" "bad option"
mr 2 -m "$T/m.gguf" -p hi --kv-type q4
has "$err" "bad value 'q4' for --kv-type" "bad kv type"
mr 2 -m "$T/m.gguf" -p hi --ctx 0
mr 2 -m "$T/m.gguf" -p hi --threads 100000
mr 2 -m "$T/m.gguf" -p hi --temp -1
mr 2 -m "$T/m.gguf" --perplexity "$EVAL" -p hi
mr 2 -m "$T/m.gguf" -p hi --save-logits "$T/x"
mr 2 -m "$T/m.gguf" -p hi --ctx 2097152
mr 0 --help
has "$out" "usage: memwall-run" "--help"
mr 3 -m "$T/does-not-exist.gguf" -p hi
has "$err" "does-not-exist.gguf" "missing file named"
mr 3 -m "$T/m.gguf" --perplexity "$T/no-such-text.txt"

# --- hostile models: exit 1, the key or tensor named ---
n_hostile=0
while IFS=$'\t' read -r name code where; do
    n_hostile=$((n_hostile + 1))
    mr "$code" -m "$T/hostile/$name.gguf" -p "hi" -n 2 || { echo "  (defect $name)"; continue; }
    has "$err" "$where" "defect $name"
    [[ $err == *"ERROR: AddressSanitizer"* || $err == *"runtime error"* ]] && fail "defect $name: sanitizer report"
done < "$T/hostile/expect.tsv"
[ $n_hostile -ge 30 ] || fail "only $n_hostile hostile models"
echo "hostile models: $n_hostile rejected with their key/tensor named"

# --- the gguf reader's fuzz corpus: every file rejected cleanly ---
n_corpus=0
for f in "$MW_SRC"/tests/fuzz/corpus/gguf/* "$MW_SRC"/tests/fuzz/corpus/runtime/*; do
    [ -f "$f" ] || continue
    case "$f" in */valid-*) continue ;; esac
    n_corpus=$((n_corpus + 1))
    $MW_EMU "$RUNBIN" -m "$f" -p hi -n 2 --ctx 16 > "$T/out" 2> "$T/err" < /dev/null
    rc=$?
    [ $rc -eq 1 ] || { fail "corpus $(basename "$f"): exit $rc, want 1"; head -5 "$T/err"; }
    grep -q 'AddressSanitizer\|runtime error' "$T/err" && fail "corpus $(basename "$f"): sanitizer report"
    [ -s "$T/err" ] || fail "corpus $(basename "$f"): no message"
done
echo "fuzz corpus files: $n_corpus rejected"

# --- a valid model ---
if mr 0 -m "$T/m.gguf" -p "It was" -n 8 --temp 0; then
    [[ $out == "It was"* ]] || fail "generation does not start with the prompt: '$out'"
    has "$err" "memory: weights" "memory accounting"
    has "$err" "KV cache" "memory accounting"
    has "$err" "scratch" "memory accounting"
    has "$err" "tok/s" "timings"
    # the memory-wall line: every tensor's bytes (memwall inspect's table) are
    # what one decoded token reads in a dense model
    want=$($MW_EMU "$MEMWALL" inspect "$T/m.gguf" | awk '/^tensors:/ { t = 1; next }
        t && $1 ~ /^[0-9]+$/ { s += $NF } END { printf "%d", s }')
    has "$err" "decode reads " "bandwidth line"
    has "$err" "of weights per token ($want bytes): " "bandwidth bytes = tensor bytes ($want)"
    has "$err" " GB/s effective" "bandwidth line GB/s"
fi
mr 0 -m "$T/m.gguf" -p "It was" -n 4 --temp 0 -q
[[ $err == *"decode reads"* ]] && fail "-q prints the bandwidth line"
# MoE: the 3-D expert tensors count n_expert_used / n_expert of their bytes
if $MW_EMU "$MK" model "$T/moe.gguf" --arch qwen3moe; then
    want=$($MW_EMU "$MEMWALL" inspect "$T/moe.gguf" | awk '/^tensors:/ { t = 1; next }
        t && $1 ~ /^[0-9]+$/ { if ($2 ~ /_exps\.weight$/) e += $NF; else s += $NF }
        END { printf "%d", s + e / 2 }')
    mr 0 -m "$T/moe.gguf" -p "It was" -n 4 --temp 0 &&
        has "$err" "of weights per token ($want bytes, 2 of 4 experts): " "MoE bandwidth bytes ($want)"
else
    fail "rt_mkmodel qwen3moe"
fi
mr 0 -m "$T/m.gguf" -p "It was" -n 16 --temp 0 --tokens -q -t 1 && a=$out
mr 0 -m "$T/m.gguf" -p "It was" -n 16 --temp 0 --tokens -q -t 3 --batch 3 && b=$out
[ "$a" = "$b" ] || fail "greedy tokens depend on threads/batch: '$a' vs '$b'"
[ "$(wc -w <<< "$a")" -eq 16 ] || fail "expected 16 ids, got '$a'"
mr 0 -m "$T/m.gguf" -p "It was" -n 16 --temp 0.9 --seed 7 --tokens -q && a=$out
mr 0 -m "$T/m.gguf" -p "It was" -n 16 --temp 0.9 --seed 7 --tokens -q -t 2 && b=$out
[ "$a" = "$b" ] || fail "seeded sampling is not reproducible: '$a' vs '$b'"
mr 0 -m "$T/m.gguf" -p "It was" -n 8 --kv-type q8_0 --temp 0 --tokens
has "$err" "q8_0" "q8_0 KV accounting"
# generation past the context slides the window instead of failing
mr 0 -m "$T/m.gguf" -p "It was" -n 60 --ctx 24 --temp 0 --tokens -q
[ "$(wc -w <<< "$out")" -eq 60 ] || fail "generation past --ctx: $(wc -w <<< "$out") ids"
# the Qwen3 / Gemma 2-3 / Phi-3 families (tiny rt_fixture models; against llama.cpp: run_families_peer.sh)
for a in qwen3 gemma2 gemma3 phi3; do
    $MW_EMU "$MK" model "$T/$a.gguf" --arch $a --swa 8 --orig-ctx 16 || { fail "rt_mkmodel $a"; continue; }
    mr 0 -m "$T/$a.gguf" -p "It was" -n 40 --ctx 64 --temp 0 --tokens -q -t 2 &&
        { [ "$(wc -w <<< "$out")" -eq 40 ] || fail "$a: $(wc -w <<< "$out") ids"; }
    [ $a = gemma2 ] && mr 0 -m "$T/$a.gguf" -p "It was" -n 4 --ctx 64 --temp 0 &&
        has "$err" "sliding window 8 in 1 of 2 layers" "gemma2 summary"
done
# a sliding-window model cannot shift its cache: a clean refusal when the context is full
if mr 1 -m "$T/gemma2.gguf" -p "It was" -n 60 --ctx 24 --temp 0 --tokens -q; then
    has "$err" "sliding layers of gemma2" "gemma2 context full"
fi
# tokenizer diagnostics
mr 0 -m "$T/m.gguf" --tokenize "$EVAL" -q
[ "$(wc -w <<< "$out")" -gt 1000 ] || fail "--tokenize gave $(wc -w <<< "$out") ids"
mr 0 -m "$T/q.gguf" -p "the end" -n 4 --temp 0 -q
mr 0 -m "$T/m.gguf" -p "It was" -q --teacher "5 6 7"
[ "$(grep -c '^step ' <<< "$out")" -eq 3 ] || fail "--teacher: '$out'"

# --verify
if mr 0 -m "$T/m.gguf" -p hi -n 1 --verify; then
    has "$err" "verified the header and" "--verify"
fi
cp "$T/m.gguf" "$T/flip.gguf"
size=$(wc -c < "$T/flip.gguf")
printf '\x5a' | dd of="$T/flip.gguf" bs=1 seek=$((size - 100)) conv=notrunc status=none
if mr 1 -m "$T/flip.gguf" -p hi -n 1 --verify; then
    has "$err" "checksum" "--verify on a flipped byte"
    has "$err" "tensor '" "--verify names the tensor"
fi
mr 0 -m "$T/flip.gguf" -p hi -n 1 -q   # without --verify it loads (the values are finite)
# --mlock: works, or fails cleanly when RLIMIT_MEMLOCK is too small
$MW_EMU "$RUNBIN" -m "$T/m.gguf" -p hi -n 1 --mlock -q > "$T/out" 2> "$T/err" < /dev/null
rc=$?
[ $rc -eq 0 ] || { [ $rc -eq 3 ] && grep -q mlock "$T/err"; } || fail "--mlock: exit $rc: $(cat "$T/err")"

# chat: no template in the fixture (plain turns); a small context slides
printf 'hello there\nthe cat sat on the mat\nand then\nwhat next\nmore text here please\n' \
    > "$T/chat.in"
$MW_EMU "$RUNBIN" -m "$T/m.gguf" -i --ctx 40 -n 6 --temp 0 --system "be brief" \
    < "$T/chat.in" > "$T/out" 2> "$T/err"
rc=$?
[ $rc -eq 0 ] || fail "chat: exit $rc: $(tail -3 "$T/err")"
grep -q "context full: dropped the oldest" "$T/err" || fail "chat: the window never slid: $(cat "$T/err")"

# perplexity: memwall-run --perplexity == memwall perplexity, KL divergence to itself 0
if mr 0 -m "$T/m.gguf" --perplexity "$EVAL" --ctx 32 --chunks 3 --bytes 20000 \
    --save-logits "$T/base.logits" -q; then
    has "$out" "chunks 3" "perplexity record"
    p1=$(ppl_of "$out")
    $MW_EMU "$MEMWALL" perplexity "$T/m.gguf" "$EVAL" --ctx 32 --chunks 3 --bytes 20000 -q \
        > "$T/out2" 2> "$T/err2" || fail "memwall perplexity: $(cat "$T/err2")"
    [ "$(ppl_of "$(cat "$T/out2")")" = "$p1" ] || fail "memwall perplexity differs from memwall-run"
    if mr 0 -m "$T/m.gguf" --perplexity "$EVAL" --ctx 32 --kl-divergence "$T/base.logits" -q; then
        has "$out" "kld 0.000000" "KL divergence to itself"
        has "$out" "same_top 1.000000" "KL divergence to itself"
    fi
    mr 1 -m "$T/m.gguf" --perplexity "$EVAL" --ctx 16 --kl-divergence "$T/base.logits" -q
    has "$err" "made with context 32" "KLD base of another context"
    mr 1 -m "$T/m.gguf" --perplexity "$EVAL" --ctx 32 --kl-divergence "$T/m.gguf" -q
    has "$err" "not a logits file" "KLD base that is not one"
fi
mr 1 -m "$T/m.gguf" --perplexity "$T/chat.in" --ctx 128 -q
has "$err" "needs at least 256" "too short a text"
# memwall run == memwall-run
mr 0 -m "$T/m.gguf" -p "It was" -n 8 --temp 0 --tokens -q && a=$out
$MW_EMU "$MEMWALL" run -m "$T/m.gguf" -p "It was" -n 8 --temp 0 --tokens -q > "$T/out2" 2>&1 ||
    fail "memwall run failed: $(cat "$T/out2")"
[ "$(cat "$T/out2")" = "$a" ] || fail "memwall run differs from memwall-run"
$MW_EMU "$MEMWALL" help 2>&1 | grep -q "perplexity" || fail "memwall help lacks perplexity"
finish
