#!/usr/bin/env bash
# `memwall quant` on mixture-of-experts files, against llama.cpp's
# own quantizer (llama-peer quantize: libllama of node-llama-cpp 3.21.1).
# Fixtures: tinyllama-8m's dense F16 weights upcycled into a Mixtral-layout
# MoE (tests/tools/moe_upcycle: stacked ffn_{gate,up,down}_exps, an F32
# router ffn_gate_inp; experts = the dense FFN with 15% / 30% multiplicative
# noise), with 8 experts top-2 (llama.cpp's n_expert == 8 rules: attn_v and
# attn_k Q8_0, attn_output Q5_K) and with 4 experts top-2 (the ordinary rules
# with 3-D ffn_*_exps tensors, layer taken from the name).
#  - every preset: our file minus its memwall.* KVs is byte-for-byte
#    llama_model_quantize's file for the same source
#  - --bpw / --size on the MoE: the stacked expert tensors get one type each,
#    the size lands on the target exactly, memwall verify --deep passes,
#    llama.cpp loads the file and its perplexity is finite and near F16's
#  - the same file at -t 1 and -t 2
#  - calibration: the per-expert importance matrix against llama-imatrix's own
#    (tests/fixtures/llamacpp_ref/mx8-calib16.imatrix.gguf), llama-quantize
#    accepts it (byte-identical Q4_K_M); quant --corpus runs GPTQ per expert
#    (counts in method_params, -t 1 = -t 2, KLD below plain rounding's),
#    falls back to rounding with too few rows, fits --size; qwen2moe's
#    shared expert from a Hugging Face checkpoint
#   quant_moe.sh MOE_UPCYCLE [all|presets|methods]
# presets (CTest quant_moe_peer): the presets, the plan, calibration and the
# budgets (--size alone and with a corpus); methods (CTest
# quant_moe_methods_peer, beside it): quant --corpus and the qwen2moe shared
# expert; all (the default): both
source "$(dirname "${BASH_SOURCE[0]}")/quant_common.sh"
UP=${1:-}
part=${2:-all}
[ -n "$F16" ] || skip "no tinyllama-8m.llamacpp-f16.gguf"
[ -x "$UP" ] || { fail "moe_upcycle binary '$UP' missing"; finish; }
have_python || skip "no python3"
need_peer

# the methods part reads mx4 only; moe_upcycle's determinism is checked by
# the presets part
if [ "$part" != methods ]; then
    $MW_EMU "$UP" "$F16" "$T/mx8.gguf" 8 2 || { fail "moe_upcycle 8 2"; finish; }
fi
$MW_EMU "$UP" "$F16" "$T/mx4.gguf" 4 2 0.3 || { fail "moe_upcycle 4 2"; finish; }
if [ "$part" != methods ]; then
    # same arguments, same bytes
    $MW_EMU "$UP" "$F16" "$T/mx4b.gguf" 4 2 0.3 && cmp -s "$T/mx4.gguf" "$T/mx4b.gguf" ||
        fail "moe_upcycle is not deterministic"
    rm -f "$T/mx4b.gguf"
fi
CAL="$MW_DATASETS/corpora/calib.txt"
[ -f "$CAL" ] || CAL="$MW_SHARED/corpora/calib.txt"
EVAL="$MW_DATASETS/corpora/eval.txt"
[ -f "$EVAL" ] || EVAL="$MW_SHARED/corpora/eval.txt"
head -c 6000 "$EVAL" > "$T/eval6k.txt"

if [ "$part" != methods ]; then # up to quant --corpus below
# --- presets: byte identity with llama_model_quantize ---
# 8 experts: the presets whose rules differ (every one: MW_MOE_PRESETS=all);
# 4 experts: the K-quant mixes
MOE8=${MW_MOE_PRESETS:-"Q8_0 Q4_K_M Q3_K_S Q2_K IQ4_NL"}
[ "$MOE8" = all ] && MOE8="$PRESETS $EXTRA_PRESETS"
MOE4="Q4_K_M Q2_K"
[ -n "${MW_LIGHT:-}" ] && MOE8="Q8_0 Q4_K_M Q3_K_M Q2_K"
n_ok=0
n_all=0
for m in mx8 mx4; do
    list=$MOE8
    [ $m = mx4 ] && list=$MOE4
    for p in $list; do
        n_all=$((n_all + 1))
        run 0 quant "$T/$m.gguf" -o "$T/a.gguf" --preset "$p" -t 2 -q || continue
        "$PEER" --threads 2 quantize "$T/$m.gguf" "$T/b.gguf" "$p" > /dev/null 2> "$T/lq.err" ||
            { fail "llama-peer quantize $m $p: $(tail -n 2 "$T/lq.err")"; continue; }
        c=$(mwgguf cmp "$T/a.gguf" "$T/b.gguf") || { fail "$m $p: $c"; continue; }
        n_ok=$((n_ok + 1))
        # the plan section below reads this file (the same command): kept, not made again
        [ "$m $p" = "mx8 Q4_K_M" ] && cp "$T/a.gguf" "$T/q4.gguf"
    done
done
echo "presets: $n_ok of $n_all files byte-identical to llama_model_quantize's"
# the n_expert == 8 rules did apply (attn_v at Q8_0 under Q4_K_M)
run 0 quant "$T/mx8.gguf" --preset Q4_K_M --dry-run -q && cp "$T/out" "$T/dry"
awk '$2 == "blk.0.attn_v.weight" && $5 == "q8_0" { f = 1 } END { exit !f }' "$T/dry" ||
    fail "Q4_K_M on 8 experts: attn_v is not q8_0: $(grep attn_v "$T/dry" | head -n 1)"
awk '$2 == "blk.0.ffn_down_exps.weight" && $3 == "768x256x8" && $5 == "q6_K" { f = 1 } END { exit !f }' "$T/dry" ||
    fail "Q4_K_M: blk.0.ffn_down_exps is not 768x256x8 -> q6_K: $(grep ffn_down_exps "$T/dry" | head -n 1)"
awk '$2 == "blk.0.ffn_gate_inp.weight" && $5 == "f32" { f = 1 } END { exit !f }' "$T/dry" ||
    fail "the router ffn_gate_inp is quantized: $(grep ffn_gate_inp "$T/dry" | head -n 1)"

# --- plan: total and active bytes per token, against a real Q4_K_M file ---
[ -f "$T/q4.gguf" ] || run 0 quant "$T/mx8.gguf" -o "$T/q4.gguf" --preset Q4_K_M -t 2 -q || finish
run 0 plan "$T/mx8.gguf" || finish
cp "$T/out" "$T/plan"
has "$(cat "$T/plan")" "mixture of experts: 8 experts, 2 routed per token, expert ffn 768" plan
# expected: every tensor's bytes, 2 of 8 slabs of each *_exps tensor, one row of token_embd
want=$(mwgguf active-bytes "$T/q4.gguf" 2)
read -r w_tot w_act <<< "$want"
awk -v t="$w_tot" '$1 == "Q4_K_M" && $5 == t { f = 1 } END { exit !f }' "$T/plan" ||
    fail "plan: Q4_K_M weights are not $w_tot bytes: $(grep -m1 '^ *Q4_K_M' "$T/plan")"
sed -n '/^decode/,/^$/p' "$T/plan" > "$T/decode"
awk -v a="$w_act" '$1 == "Q4_K_M" && $4 == a { f = 1 } END { exit !f }' "$T/decode" ||
    fail "plan: Q4_K_M active bytes per token are not $w_act: $(grep Q4_K_M "$T/decode")"
echo "plan: Q4_K_M $w_tot bytes, $w_act read per token ($(awk '$1 == "Q4_K_M" { print $6, $7, $8, $9, $10 }' "$T/decode") tok/s at 50/60/70 GB/s)"

# --- calibration of a MoE (the router on the samples, per-expert statistics) ---
REF="$MW_SRC/tests/fixtures/llamacpp_ref/mx8-calib16.imatrix.gguf"
# the importance matrix against llama-imatrix's own (bench/llamacpp_imatrix_ref.sh: the
# same fixture, 16 chunks of 256, F16 weights with f16/f32 compute): a few rows route
# differently in its precision, so the bounds are those of routing flips, not of a bug
run 0 calib "$T/mx8.gguf" --corpus "$CAL" -o "$T/m16.imatrix" --samples 16 --seq-len 256 \
    --llamacpp-chunks -t 2 -q || finish
r=$(mwgguf imatrix-cmp-experts "$T/m16.imatrix" "$REF" \
    --max-rel 1.0 --mean-rel 1e-3 --counts-rel 1e-2) || fail "llama-imatrix reference: $r"
echo "imatrix vs llama-imatrix (8 experts, 16 x 256): $r"
# one thread and fewer samples per batch (--max-memory) in one run: the same
# statistics, bit for bit, as -t 2 with all 16 in a batch (either difference
# fails it; a run for each was one more 16 x 256 calibration)
run 0 calib "$T/mx8.gguf" --corpus "$CAL" -o "$T/m16b.imatrix" --samples 16 --seq-len 256 \
    --llamacpp-chunks -t 1 --max-memory 40M && has "$err" "4 samples per batch" "--max-memory" &&
    cmp -s "$T/m16.imatrix" "$T/m16b.imatrix" ||
    fail "calib on a MoE: -t 1 with 4 samples per batch differs from -t 2 with 16"
# llama.cpp's quantizer takes it, and our Q4_K_M with it is its file
run 0 quant "$T/mx8.gguf" -o "$T/a.gguf" --preset Q4_K_M --imatrix "$T/m16.imatrix" -t 2 -q &&
"$PEER" --threads 2 quantize "$T/mx8.gguf" "$T/b.gguf" Q4_K_M --imatrix "$T/m16.imatrix" \
    > /dev/null 2> "$T/lq.err" || fail "llama-peer quantize --imatrix (MoE): $(tail -n 2 "$T/lq.err")"
c=$(mwgguf cmp "$T/a.gguf" "$T/b.gguf") || fail "Q4_K_M with a MoE imatrix: $c"

fi # presets

if [ "$part" != presets ]; then # up to the budget below
# quant --corpus (awq+gptq): GPTQ per expert on its routed rows; the same bytes at
# -t 1 and -t 2; a lower KL divergence than plain rounding (scored by llama.cpp)
"$PEER" ppl "$T/mx4.gguf" "$T/eval6k.txt" --ctx 256 --save-logits "$T/base4.bin" > /dev/null ||
    fail "llama-peer ppl mx4"
kld() { "$PEER" ppl "$1" "$T/eval6k.txt" --ctx 256 --kld-base "$T/base4.bin" |
        awk '$1=="kld"{print $2}'; }
# xpaths FILE: "gptq rtn unrouted" from its method_params (expert matrices per path)
xpaths() {
    run 0 inspect "$1" --json
    [[ $out =~ experts=gptq:([0-9]+),rtn:([0-9]+),unrouted:([0-9]+) ]] &&
        echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}"
}
run 0 quant "$T/mx4.gguf" -o "$T/r4.gguf" --preset Q4_K_M -t 2 -q || finish
run 0 quant "$T/mx4.gguf" -o "$T/c1.gguf" --preset Q4_K_M --corpus "$CAL" --samples 4 \
    --seq-len 128 -t 2 -q || finish
# -t 1 = -t 2: the same awq+gptq run (AWQ's search, GPTQ per expert on its
# routed rows) under Q8_0, whose AWQ candidates quantize ~6x faster: 5.9 s
# of CPU a run here where a Q4_K_M twin of c1 cost ~33 (c1 is the KLD's)
run 0 quant "$T/mx4.gguf" -o "$T/d1.gguf" --preset Q8_0 --corpus "$CAL" --samples 4 \
    --seq-len 128 -t 1 -q || finish
run 0 quant "$T/mx4.gguf" -o "$T/d2.gguf" --preset Q8_0 --corpus "$CAL" --samples 4 \
    --seq-len 128 -t 2 -q || finish
cmp -s "$T/d1.gguf" "$T/d2.gguf" || fail "quant --corpus on a MoE: -t 1 and -t 2 differ"
read -r g _ _ <<< "$(xpaths "$T/d1.gguf")"
[ "${g:-0}" -ge 72 ] || fail "the -t 1 / -t 2 pair (Q8_0): only ${g:-0} expert matrices by GPTQ"
rm -f "$T/d1.gguf" "$T/d2.gguf"
read -r g r u <<< "$(xpaths "$T/c1.gguf")"
# 8 layers x 4 experts x 3 matrices; 4 x 129 rows: most experts reach n_in / 4 rows
[ "$((g + r + u))" = 96 ] && [ "$g" -ge 72 ] ||
    fail "method_params: expert paths gptq:$g rtn:$r unrouted:$u (expected 96, mostly gptq)"
echo "4 x 129 rows of calibration: expert matrices by GPTQ $g, by rounding $r, unrouted $u"
run 0 verify --deep "$T/c1.gguf" > /dev/null || true
k_r=$(kld "$T/r4.gguf")
k_c=$(kld "$T/c1.gguf")
echo "Q4_K_M on 4 experts, KLD to F16 (6 KB of eval.txt): rtn $k_r, awq+gptq (4 x 128 of calib.txt) $k_c"
awk -v r="$k_r" -v c="$k_c" 'BEGIN { exit !(c > 0 && c < r) }' ||
    fail "awq+gptq KLD $k_c is not below plain rounding's $k_r"
# too few rows for GPTQ: importance-weighted rounding; no row at all: plain rounding
run 0 quant "$T/mx4.gguf" -o "$T/c3.gguf" --preset Q4_K_M --corpus "$CAL" --samples 1 \
    --seq-len 16 --method gptq -t 2 -q || finish
read -r g r u <<< "$(xpaths "$T/c3.gguf")"
[ "$g" = 0 ] && [ "$((r + u))" = 96 ] && [ "$r" -gt 0 ] ||
    fail "17 rows: expected every expert by rounding, got gptq:$g rtn:$r unrouted:$u"
echo "17 rows of calibration: expert matrices by rounding $r, unrouted $u"
# (a budget with a corpus: with the budget below, in the presets part)
# a shared expert (qwen2moe, Hugging Face checkpoint): calibrated and quantized
if python3 "$MW_SRC/tests/fixtures/mk_family_fixture.py" qwen2moe "$T/q2m" > "$T/mk.log" 2>&1; then
    run 0 calib "$T/q2m" --corpus "$CAL" -o "$T/q2m.imatrix" --samples 4 --seq-len 64 -t 2 -q
    run 0 convert "$T/q2m" -o "$T/q2m.gguf" --type f16 -q &&
    "$PEER" --threads 2 quantize "$T/q2m.gguf" "$T/q2m-q.gguf" Q4_K_M --imatrix "$T/q2m.imatrix" \
        > /dev/null 2> "$T/lq.err" || fail "llama-peer quantize --imatrix (qwen2moe): $(tail -n 2 "$T/lq.err")"
    mwgguf imatrix-cmp "$T/q2m.imatrix" "$T/q2m.imatrix" > "$T/cmp.out"
    grep -q "entries 24," "$T/cmp.out" || fail "qwen2moe imatrix entries: $(cat "$T/cmp.out")"
    run 0 quant "$T/q2m" -o "$T/q2m-c.gguf" --preset Q4_K_M --corpus "$CAL" --samples 4 \
        --seq-len 64 -t 2 -q && run 0 verify --deep "$T/q2m-c.gguf" > /dev/null
else
    fail "qwen2moe fixture: $(tail -n 2 "$T/mk.log")"
fi

fi # methods

[ "$part" = methods ] && finish
# --- a budget on the MoE ---
F16_BYTES=$(stat -c %s "$T/mx8.gguf")
SIZE=$((F16_BYTES / 4))
run 0 quant "$T/mx8.gguf" -o "$T/s1.gguf" --size "$SIZE" --no-iquants -t 1 -q || finish
run 0 quant "$T/mx8.gguf" -o "$T/s2.gguf" --size "$SIZE" --no-iquants -t 2 -q || finish
cmp -s "$T/s1.gguf" "$T/s2.gguf" || fail "--size: -t 1 and -t 2 differ"
got=$(stat -c %s "$T/s1.gguf")
[ "$got" -le "$SIZE" ] || fail "--size $SIZE: file is $got bytes"
[ "$got" -ge $((SIZE * 97 / 100)) ] || fail "--size $SIZE: file is only $got bytes"
run 0 verify --deep "$T/s1.gguf" > /dev/null || true
p16=$("$PEER" ppl "$T/mx8.gguf" "$T/eval6k.txt" --ctx 256 | awk '$1=="ppl"{print $2}')
pq=$("$PEER" ppl "$T/s1.gguf" "$T/eval6k.txt" --ctx 256 | awk '$1=="ppl"{print $2}')
echo "--size $SIZE (4 bpw of the F16 file): $got bytes; llama.cpp perplexity F16 $p16, ours $pq (6 KB of eval.txt)"
awk -v a="$p16" -v b="$pq" 'BEGIN { exit !(a > 1 && b > 1 && b < a * 1.10) }' ||
    fail "perplexity of the --size file $pq is not within 10% of F16's $p16"
# a budget with a corpus: the allocation weighs each expert by its routed rows
# (4 x 128 as quant --corpus above: the allocation and its probes see 516 rows;
# 4 x 256 took twice as long for the same checks. --method rtn: the size is the
# allocation's, whatever the method; GPTQ per expert is c1/c2's above, and
# awq+gptq here was half of this run's 77 s of CPU)
[ -f "$T/r4.gguf" ] || run 0 quant "$T/mx4.gguf" -o "$T/r4.gguf" --preset Q4_K_M -t 2 -q || finish
SIZE4=$(( $(stat -c %s "$T/r4.gguf") * 85 / 100 ))
run 0 quant "$T/mx4.gguf" -o "$T/c4.gguf" --size "$SIZE4" --no-iquants --corpus "$CAL" --samples 4 \
    --seq-len 128 --method rtn -t 2 -q || finish
got=$(stat -c %s "$T/c4.gguf")
[ "$got" -le "$SIZE4" ] && [ "$got" -ge $((SIZE4 * 97 / 100)) ] ||
    fail "--size $SIZE4 --corpus on a MoE: $got bytes"
finish
