#!/usr/bin/env bash
# memwall-run on gpt-oss against llama.cpp itself (tests/peer: llama-peer =
# llama.cpp 80fb11ac, CPU). Skipped (77) when llama-peer cannot be built
# here, python3 or eval.txt is missing.
#
# Fixture: tests/fixtures/mk_gptoss_gguf.py (the converter's keys and tensor
# names; hidden 128, 4 layers, even layers sliding over 32 positions, 4/2
# heads of 64 with sinks, YaRN factor 32, 8 MXFP4 experts top-4 with biases,
# F16 attention, byte-level BPE vocabulary). On eval.txt with
# llama-perplexity's protocol, context 128 (four times the window), 4 chunks:
#  - perplexity within 0.3% of `llama-peer ppl`;
#  - teacher-forced on llama.cpp's float32 logits (--kl-divergence): top-1
#    agreement >= 98% and mean KL < 0.001 (the MXFP4 experts multiply Q8_0
#    activations, as ggml's vec_dot_mxfp4_q8_0);
#  - the same logits, bit for bit, in steps of 16 on 2 threads, steps of 5
#    on 3 threads and with the scalar kernels (MW_RT_KERNELS=scalar);
#  - a file without a layer's attn_sinks or an expert bias: exit 1 naming
#    the tensor; one with an E8M0 scale byte 0xFF in an expert block:
#    `memwall verify --deep` exit 1 naming the tensor and the block's offset;
#  - convert then run: mk_family_fixture.py's gptoss checkpoint (gpt-oss-20b's
#    config keys, window 128, MXFP4 experts, o200k_harmony) converted by
#    `memwall convert` (f16, experts kept MXFP4), one chunk of 256 (scored
#    positions 128..254, past the window): perplexity within 0.3%, top-1 >=
#    98%, mean KL < 0.001;
#  - greedy decoding one token per call (the single-query attention path,
#    its sinks and the sliding window past position 32): llama.cpp's 48
#    greedy tokens fed back, our greedy choice equals llama.cpp's at each.
source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
CTX=128
CHUNKS=4
BYTES=20000
MIN_TOP=0.98
MAX_KL=0.001

need_peer
have_python || skip "no python3"
[ -f "$EVAL" ] || skip "no eval.txt"

f="$T/gptoss.gguf"
python3 "$MW_SRC/tests/fixtures/mk_gptoss_gguf.py" "$f" > "$T/e" 2>&1 ||
    { fail "mk_gptoss_gguf.py: $(tail -2 "$T/e")"; finish; }
theirs=$("$PEER" ppl "$f" "$EVAL" --ctx $CTX --bytes $BYTES --chunks $CHUNKS \
             --save-logits "$T/theirs.logits" 2> "$T/e") ||
    { fail "llama-peer ppl: $(tail -2 "$T/e")"; finish; }
ours=$("$RUNBIN" -m "$f" --perplexity "$EVAL" -c $CTX --bytes $BYTES --chunks $CHUNKS \
           --batch 16 -t 2 -q --save-logits "$T/ours16" 2> "$T/e") ||
    { fail "memwall-run --perplexity: $(tail -2 "$T/e")"; finish; }
a=$(ppl_of "$ours")
b=$(ppl_of "$theirs")
echo "ppl (ctx $CTX, $CHUNKS chunks, window 32): memwall $a, llama.cpp $b ($(reldiff "$a" "$b"))"
close "$a" "$b" 0.003 || fail "perplexity $a vs llama.cpp $b: more than 0.3% apart"

"$RUNBIN" -m "$f" --perplexity "$EVAL" -c $CTX --bytes $BYTES --chunks $CHUNKS --batch 5 -t 3 \
    -q --save-logits "$T/ours5" > /dev/null 2> "$T/e" || fail "memwall-run --batch 5: $(tail -2 "$T/e")"
MW_RT_KERNELS=scalar "$RUNBIN" -m "$f" --perplexity "$EVAL" -c $CTX --bytes $BYTES \
    --chunks $CHUNKS --batch 16 -t 2 -q --save-logits "$T/ours_scalar" > /dev/null 2> "$T/e" ||
    fail "memwall-run (scalar kernels): $(tail -2 "$T/e")"
if cmp -s "$T/ours16" "$T/ours5" && cmp -s "$T/ours16" "$T/ours_scalar"; then
    echo "steps of 5 on 3 threads, scalar kernels: the same logits, bit for bit"
else
    fail "logits differ between --batch 16 -t 2, --batch 5 -t 3 and the scalar kernels"
fi

kl=$("$RUNBIN" -m "$f" --perplexity "$EVAL" -c $CTX --bytes $BYTES --chunks $CHUNKS \
         --kl-divergence "$T/theirs.logits" -t 2 -q 2> "$T/e") ||
    { fail "memwall-run --kl-divergence: $(tail -2 "$T/e")"; finish; }
top=$(awk '$1 == "same_top" { print $2 }' <<< "$kl")
kld=$(awk '$1 == "kld" { print $2 }' <<< "$kl")
scored=$(awk '$1 == "ppl" { print $8 }' <<< "$kl")
echo "teacher-forced on llama.cpp's logits: top-1 $top over $scored positions, mean KL $kld"
awk -v t="$top" -v m=$MIN_TOP 'BEGIN { exit !(t != "" && t >= m) }' ||
    fail "top-1 agreement $top < $MIN_TOP"
awk -v d="$kld" -v m=$MAX_KL 'BEGIN { exit !(d != "" && d < m) }' ||
    fail "mean KL divergence $kld from llama.cpp's logits (>= $MAX_KL)"

g=$("$PEER" generate "$f" "$PROMPT" 48 2> "$T/e") || { fail "llama-peer generate: $(tail -2 "$T/e")"; finish; }
"$RUNBIN" -m "$f" -p "$PROMPT" --teacher "$g" -q -t 2 > "$T/teach" 2> "$T/e" ||
    fail "memwall-run --teacher: $(tail -2 "$T/e")"
same=$(awk '$1 == "step" && $4 == $7 { n++ } END { print n + 0 }' "$T/teach")
steps=$(awk '$1 == "step" { n++ } END { print n + 0 }' "$T/teach")
echo "greedy: llama.cpp's $steps tokens fed back one per call, our greedy choice agrees at $same"
[ "$steps" -eq 48 ] && [ "$same" -eq 48 ] || fail "greedy decoding differs from llama.cpp's"
for t in blk.1.attn_sinks.weight blk.2.ffn_up_exps.bias; do
    python3 "$MW_SRC/tests/fixtures/mk_gptoss_gguf.py" "$T/bad.gguf" --drop "$t" > "$T/e" 2>&1 ||
        { fail "mk_gptoss_gguf.py --drop $t: $(tail -2 "$T/e")"; continue; }
    mr 1 -m "$T/bad.gguf" -p "$PROMPT" -n 1 && has "$err" "'$t'" "without $t"
done
echo "files without blk.1.attn_sinks.weight or blk.2.ffn_up_exps.bias: exit 1 naming the tensor"
# an expert block whose E8M0 scale byte is 0xFF (NaN in OCP MX): the loader
# does not read scale bytes (they sit in every 17 bytes of the experts);
# verify --deep refuses the file, naming the tensor and the block's offset
t=blk.2.ffn_gate_exps.weight
cp "$f" "$T/ff.gguf"
off=$($MW_EMU "$MEMWALL" inspect "$f" |
      awk -v t=$t '/data start/ { for (i = 1; i < NF; i++) if ($i == "start") ds = $(i + 1) }
                   $2 == t { print ds + $5 + 100 * 17 }')
printf '\377' | dd of="$T/ff.gguf" bs=1 seek="$off" conv=notrunc status=none
if run 1 verify --deep "$T/ff.gguf"; then
    has "$out$err" "tensor '$t'" "E8M0 0xFF"
    has "$out$err" "offset $off" "E8M0 0xFF"
    has "$out$err" "block 100 (elements 3200..3231): E8M0 scale byte 0xFF" "E8M0 0xFF"
    echo "an expert block with E8M0 scale 0xFF: verify --deep exit 1 naming $t and offset $off"
fi

# convert, then run: the converted HF fixture
hf="$T/gptoss-hf"
python3 "$MW_SRC/tests/fixtures/mk_family_fixture.py" gptoss "$hf" > "$T/e" 2>&1 ||
    { fail "mk_family_fixture.py gptoss: $(tail -2 "$T/e")"; finish; }
run 0 convert "$hf" -o "$T/conv.gguf" || finish
theirs=$("$PEER" ppl "$T/conv.gguf" "$EVAL" --ctx 256 --bytes $BYTES --chunks 1 \
             --save-logits "$T/conv.logits" 2> "$T/e") || { fail "llama-peer ppl (converted): $(tail -2 "$T/e")"; finish; }
kl=$("$RUNBIN" -m "$T/conv.gguf" --perplexity "$EVAL" -c 256 --bytes $BYTES --chunks 1 \
         --kl-divergence "$T/conv.logits" -t 2 -q 2> "$T/e") ||
    { fail "memwall-run --kl-divergence (converted): $(tail -2 "$T/e")"; finish; }
rm -f "$T/conv.logits"
a=$(ppl_of "$kl")
b=$(awk '$1 == "ppl_base" { print $2 }' <<< "$kl")
top=$(awk '$1 == "same_top" { print $2 }' <<< "$kl")
kld=$(awk '$1 == "kld" { print $2 }' <<< "$kl")
echo "converted gptoss fixture (ctx 256, window 128): ppl memwall $a, llama.cpp $b ($(reldiff "$a" "$b")), top-1 $top, mean KL $kld"
close "$a" "$(ppl_of "$theirs")" 0.003 || fail "converted: perplexity $a vs llama.cpp $(ppl_of "$theirs")"
awk -v t="$top" -v m=$MIN_TOP 'BEGIN { exit !(t != "" && t >= m) }' || fail "converted: top-1 $top < $MIN_TOP"
awk -v d="$kld" -v m=$MAX_KL 'BEGIN { exit !(d != "" && d < m) }' || fail "converted: mean KL $kld >= $MAX_KL"
finish
