#!/usr/bin/env bash
# `memwall quant`'s i-quant presets (llama-quantize's file types 19-31:
# IQ2_XXS IQ2_XS Q2_K_S IQ3_XS IQ3_XXS IQ1_S IQ3_S IQ3_M IQ2_S IQ2_M IQ4_XS
# IQ1_M) against llama.cpp itself (llama-peer: libllama of node-llama-cpp
# 3.21.1, llama.cpp 80fb11ac; skipped with 77 when tests/peer/setup.sh cannot
# provide it):
#  - with the reference imatrix, every preset: the type memwall --dry-run
#    lists for each tensor is the type in llama_model_quantize's file; and
#    the file memwall writes, minus its memwall.* KVs, is llama.cpp's byte for
#    byte. The source is tinyllama-8m's F16 cut to the first 32 rows of each
#    tensor: names, row lengths and hyperparameters unchanged, so the rules
#    see the same model, at 1/12 of the data (llama.cpp's run time is then
#    mostly its grid set-up, a few seconds for IQ1_*, IQ2_*, IQ3_XXS)
#  - without an imatrix: llama-quantize refuses IQ1_*, IQ2_*, IQ3_XXS, IQ3_XS
#    and Q2_K_S; memwall refuses the same presets (exit 2, naming the preset,
#    asking for --imatrix or --corpus) and its --dry-run only warns, as
#    llama-quantize's does; IQ3_S, IQ3_M and IQ4_XS are written by both (byte
#    for byte); an imatrix without the entry of a tensor that needs one is
#    refused by both
#  - the rules without an imatrix against llama.cpp's own
#    llama_quant_compute_types (tests/peer/llama_quant_types.c) on tinyllama-8m
#    and on header-only shapes: Llama-2-7B, Llama-3-8B (gqa 4), a 70B, a
#    qwen2 896 wide with tied embeddings (row-length fallbacks), a 200-wide
#    toy (F16 fallback), MoE with 8 and 4 experts (the n_expert rules)
#  - MoE (tinyllama-8m upcycled to 8 experts, cut the same way, with
#    llama-imatrix's per-expert imatrix): IQ2_XS and IQ3_M files byte for byte
#  - the "70B" model type per architecture (jais2 with 68 layers, qwen2 with
#    80; that helper knows llama's only): llama_model_quantize's files of
#    small zero-weight models
source "$(dirname "${BASH_SOURCE[0]}")/quant_common.sh"
UP=${1:-} # tests/tools/moe_upcycle
IQ_PRESETS=${MW_IQ_PRESETS:-"IQ2_XXS IQ2_XS Q2_K_S IQ3_XS IQ3_XXS IQ1_S IQ3_S IQ3_M IQ2_S IQ2_M IQ4_XS IQ1_M"}
NO_IMATRIX_OK="IQ3_S IQ3_M IQ4_XS" # llama-quantize writes these without an imatrix

[ -n "$F16" ] || skip "no tinyllama-8m.llamacpp-f16.gguf"
[ -n "$IMAT" ] || skip "no tinyllama-8m.llamacpp.imatrix.gguf"
have_python || skip "no python3"
need_peer

# par CMD...: in the background, two at a time (llama.cpp's grid set-up is
# single-threaded: two runs side by side use both cores)
par() {
    while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n; done
    "$@" &
}
SLIM="$T/slim.gguf"
# MoE: tinyllama-8m upcycled to 8 experts (tests/tools/moe_upcycle, as
# quant_moe_peer does), cut the same way (per expert), with llama-imatrix's
# per-expert imatrix of it: the IQ1/IQ2 branch's and IQ3_M's n_expert == 8 rules
MOE_PRESETS="IQ2_XS IQ3_M"
MOE_REF="$MW_SRC/tests/fixtures/llamacpp_ref/mx8-calib16.imatrix.gguf"
moe_slim=()
if [ -x "$UP" ] && [ -f "$MOE_REF" ] && $MW_EMU "$UP" "$F16" "$T/mx8-full.gguf" 8 2; then
    moe_slim=(+ slim "$T/mx8-full.gguf" "$T/mx8.gguf" 32)
else
    fail "moe_upcycle ('$UP') 8 2 failed, or no $MOE_REF"
    MOE_PRESETS=""
fi
# the sources, and the header-only shapes for llama_quant_compute_types
# (Llama-2-7B, Llama-3-8B, a 70B, qwen2-0.5B-like with tied embeddings, a
# 200-wide toy, MoE with 8 and with 4 experts), and small zero-weight 70B
# candidates (jais2 68 layers, qwen2 80 layers); mwgguf's subcommands chained
# with '+': one python start-up, which costs 0.4 s on a loaded machine
SHAPES="l2-7b l3-8b l2-70b q2-05b toy200 moe8 moe4"
mwgguf slim "$F16" "$SLIM" 32 "${moe_slim[@]}" \
    + drop "$IMAT" "$T/im-noattnk.gguf" blk.0.attn_k.weight \
    + header "$T/l2-7b.gguf" llama 4096 11008 32 32 32 32000 0 0 \
    + header "$T/l3-8b.gguf" llama 4096 14336 32 32 8 128256 0 0 \
    + header "$T/l2-70b.gguf" llama 8192 28672 80 64 8 32000 0 0 \
    + header "$T/q2-05b.gguf" qwen2 896 4864 24 14 2 151936 1 0 \
    + header "$T/toy200.gguf" llama 200 600 4 4 2 1000 0 0 \
    + header "$T/moe8.gguf" llama 512 1024 16 8 8 32000 0 8 \
    + header "$T/moe4.gguf" llama 512 1024 16 8 2 32000 0 4 \
    + header "$T/jais68.gguf" jais2 256 256 68 4 1 256 0 0 16 \
    + header "$T/qwen80.gguf" qwen2 256 256 80 4 4 256 0 0 16 ||
    { fail "cannot write the sources"; finish; }
rm -f "$T/mx8-full.gguf"

# --- llama.cpp's and memwall's files, with the imatrix and without ---
lq() { # NAME SRC PRESET [--imatrix F]: llama-peer quantize, exit status in l-NAME.rc
    local name=$1 src=$2 p=$3
    shift 3
    "$PEER" --threads 1 quantize "$src" "$T/l-$name.gguf" "$p" "$@" > /dev/null 2> "$T/l-$name.err"
    echo $? > "$T/l-$name.rc"
}
mq() { # NAME SRC PRESET [args]: memwall quant, exit status in m-NAME.rc
    local name=$1 src=$2 p=$3
    shift 3
    $MW_EMU "$MEMWALL" quant "$src" -o "$T/m-$name.gguf" --preset "$p" -t 1 -q "$@" \
        > /dev/null 2> "$T/m-$name.err"
    echo $? > "$T/m-$name.rc"
}
in_list() { [[ " $2 " == *" $1 "* ]]; }
# one queue, two at a time, the longest (llama.cpp's grid set-up) first
queued=" "
for p in IQ1_M IQ1_S IQ3_XXS IQ2_M IQ2_XS IQ2_S IQ2_XXS $IQ_PRESETS; do
    if ! in_list "$p" "$IQ_PRESETS" || in_list "$p" "$queued"; then continue; fi
    queued="$queued$p "
    par lq "$p-im" "$SLIM" "$p" --imatrix "$IMAT"
done
for p in $MOE_PRESETS; do par lq "moe-$p" "$T/mx8.gguf" "$p" --imatrix "$MOE_REF"; done
for p in $IQ_PRESETS; do
    par lq "$p" "$SLIM" "$p"
    par mq "$p-im" "$SLIM" "$p" --imatrix "$IMAT"
    in_list "$p" "$NO_IMATRIX_OK" && par mq "$p" "$SLIM" "$p"
done
for p in $MOE_PRESETS; do par mq "moe-$p" "$T/mx8.gguf" "$p" --imatrix "$MOE_REF"; done
par lq Q2_K_S-drop "$SLIM" Q2_K_S --imatrix "$T/im-noattnk.gguf"
par lq jais68 "$T/jais68.gguf" Q3_K_M
par lq qwen80 "$T/qwen80.gguf" Q2_K
wait
# llama.cpp's types, and the pairs of files, in one python run
pyargs=()
pairs=""
for p in $IQ_PRESETS; do
    [ "$(cat "$T/l-$p-im.rc")" = 0 ] ||
        { fail "llama-peer quantize $p --imatrix: $(tail -n 2 "$T/l-$p-im.err")"; continue; }
    pyargs+=(+ types "$T/l-$p-im.gguf" "$T/tl-$p")
    pairs="$pairs $p-im"
done
for p in $MOE_PRESETS; do pairs="$pairs moe-$p"; done
for n in $pairs; do
    if [ ! -f "$T/l-$n.gguf" ] || [ "$(cat "$T/l-$n.rc")" != 0 ]; then
        fail "llama-peer quantize $n: $(tail -n 2 "$T/l-$n.err")"
    elif [ "$(cat "$T/m-$n.rc")" != 0 ]; then
        fail "memwall quant $n: exit $(cat "$T/m-$n.rc"): $(head -n 2 "$T/m-$n.err")"
    else
        pyargs+=(+ cmp --label "$n" "$T/m-$n.gguf" "$T/l-$n.gguf")
    fi
done
for m in jais68 qwen80; do
    if [ "$(cat "$T/l-$m.rc")" = 0 ]; then
        pyargs+=(+ types "$T/l-$m.gguf" "$T/tl-$m")
    else
        fail "llama-peer quantize $m: $(tail -n 2 "$T/l-$m.err")"
    fi
done
# IQ3_S, IQ3_M, IQ4_XS: written without an imatrix too
for p in $NO_IMATRIX_OK; do
    in_list "$p" "$IQ_PRESETS" || continue
    if [ "$(cat "$T/l-$p.rc")" != 0 ]; then
        fail "llama-peer quantize $p without an imatrix: $(tail -n 2 "$T/l-$p.err")"
    elif [ "$(cat "$T/m-$p.rc")" != 0 ]; then
        fail "memwall quant $p without an imatrix: $(head -n 2 "$T/m-$p.err")"
    else
        pyargs+=(+ cmp --label "$p" "$T/m-$p.gguf" "$T/l-$p.gguf")
    fi
done
[ ${#pyargs[@]} -gt 0 ] && { mwgguf "${pyargs[@]:1}" > "$T/cmp.out" || fail "mwgguf failed"; }

n_types=0
for p in $IQ_PRESETS; do
    [ -f "$T/tl-$p" ] || continue
    dry_types "$SLIM" "$p" --imatrix "$IMAT" > "$T/t-mw" 2> "$T/t-mw.err"
    if ! diff -q "$T/t-mw" "$T/tl-$p" > /dev/null; then
        fail "$p with the imatrix: memwall's types differ from llama-quantize's file:"
        diff "$T/t-mw" "$T/tl-$p" | head -n 6
        head -n 2 "$T/t-mw.err"
        continue
    fi
    n_types=$((n_types + 1))
done
printf '%-12s %9s %9s %9s  %s\n' file ours llama.cpp memwall.* "ours minus memwall.* KVs vs llama.cpp"
n_files=0
n_cmp_files=0
while read -r n ours theirs mw verdict rest; do
    printf '%-12s %9d %9d %9d  %s %s\n' "$n" "$ours" "$theirs" "$mw" "$verdict" "$rest"
    n_cmp_files=$((n_cmp_files + 1))
    if [ "$verdict" = identical ]; then n_files=$((n_files + 1)); else fail "$n: $verdict $rest"; fi
done < "$T/cmp.out"
echo "(-im: with the reference imatrix; moe-: 8 experts with llama-imatrix's imatrix; else without)"
echo "types with the imatrix: $n_types presets as llama-quantize's files; files: $n_files of $n_cmp_files byte-identical"

# --- without an imatrix: the same presets refused, --dry-run warns ---
n_refusals=0
for p in $IQ_PRESETS; do
    in_list "$p" "$NO_IMATRIX_OK" && continue
    lrc=$(cat "$T/l-$p.rc")
    if [ "$lrc" = 0 ] || ! grep -q "requires an imatrix" "$T/l-$p.err"; then
        fail "llama-quantize took $p without an imatrix (exit $lrc): NO_IMATRIX_OK is stale"
        continue
    fi
    run 2 quant "$SLIM" -o "$T/m-$p.gguf" --preset "$p" -q || continue
    has "$err" "preset $p needs an importance matrix" "$p without an imatrix"
    has "$err" "give --imatrix FILE or --corpus FILE" "$p without an imatrix"
    [ -e "$T/m-$p.gguf" ] && fail "$p without an imatrix: an output was written"
    # llama.cpp names the first tensor it refuses; so does memwall
    t=$(sed -n 's/.*offending tensor: *\([^ ]*\).*/\1/p' "$T/l-$p.err" | head -n 1)
    has "$err" "tensor '$t'" "$p without an imatrix (llama.cpp's offending tensor)"
    run 0 quant "$SLIM" --preset "$p" --dry-run -q || continue
    has "$err" "warning: tensor '$t': preset $p needs an importance matrix" "$p --dry-run"
    n_refusals=$((n_refusals + 1))
done
echo "without an imatrix: $n_refusals presets refused as llama-quantize refuses them"
# an imatrix without the entry of a tensor that needs one: refused by both
if grep -q "Missing importance matrix for tensor blk.0.attn_k.weight" "$T/l-Q2_K_S-drop.err"; then
    run 1 quant "$SLIM" -o "$T/m-drop.gguf" --preset Q2_K_S --imatrix "$T/im-noattnk.gguf" -q &&
        has "$err" "tensor 'blk.0.attn_k.weight': no usable imatrix entry" "an imatrix without blk.0.attn_k" &&
        echo "an imatrix without blk.0.attn_k's entry: Q2_K_S refused by both"
else
    fail "llama-quantize Q2_K_S with an imatrix without blk.0.attn_k (exit $(cat "$T/l-Q2_K_S-drop.rc")): $(tail -n 2 "$T/l-Q2_K_S-drop.err")"
fi

# --- the rules without an imatrix against llama_quant_compute_types ---
RULES_PRESETS="$IQ_PRESETS" rules_vs_llama "$F16" $SHAPES

# --- "70B" by architecture (llama_model_quantize's files of zero weights) ---
for c in "jais68 Q3_K_M" "qwen80 Q2_K"; do
    read -r m p <<< "$c"
    [ -f "$T/tl-$m" ] || continue
    dry_types "$T/$m.gguf" "$p" > "$T/t-mw" 2> "$T/t-mw.err"
    diff -q "$T/t-mw" "$T/tl-$m" > /dev/null ||
        { fail "$m $p: types differ from llama-quantize's file:"; diff "$T/t-mw" "$T/tl-$m" | head -n 6; }
    # Q3_K / Q4_K attn_v raised to Q5_K in every layer
    grep "attn_v.weight" "$T/tl-$m" | grep -vq " q5_K" && fail "$m $p: llama.cpp did not treat it as a 70B"
done
echo "70B model type of jais2 (68 layers) and qwen2 (80 layers): as llama-quantize's"
finish
