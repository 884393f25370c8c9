#!/usr/bin/env bash
# Determinism (style.md §2.6): the same inputs and options give a
# byte-identical file whatever the thread count, across runs, and wherever
# the command is started from.
#   quant: Q4_K_M (K-quant search; Q4_K and Q6_K tensors), Q4_K_M with an
#          imatrix, IQ4_NL, each with -t 1, 2 and 8, -t 8 twice; the HF
#          directory source (full builds) with -t 1 and 8;
#   convert: f16 and q8_0 with -t 1, 2 and 8, and q8_0 once from another
#          working directory with a relative path.
# Usage (ctest): faults_determinism.sh [quick]. "quick" (sanitizer builds,
# where a K-quant run costs 10-20x more): -t 1 and 8 only, no IQ4_NL, the
# imatrix and the HF directory with Q3_K_M (its q3_K/q4_K/q5_K/q6_K mix holds
# Q4_K_M's two types; 2.4x cheaper). These stand for quant_cli's thread
# comparisons in that build too (quant_cli.sh runs none under the sanitizers).
QUICK=0
[ "${1:-}" = quick ] && QUICK=1
source "$(dirname "${BASH_SOURCE[0]}")/faults_common.sh" ""

F16=$(ref tinyllama-8m.llamacpp-f16.gguf)
IMAT=$(ref tinyllama-8m.llamacpp.imatrix.gguf)
HF=$(model_dir tinyllama-8m)
[ -n "$F16" ] || [ -n "$HF" ] || { skip "no tinyllama-8m inputs"; }
full=0
$MW_EMU "$MEMWALL" help 2> /dev/null | grep -q '^  convert' && full=1

# same NAME FILES...: all byte-identical to the first
same() {
    local name=$1 first=$2 f
    shift 2
    for f in "$@"; do
        cmp -s "$first" "$f" || fail "$name: $(basename "$f") differs from $(basename "$first")"
    done
    echo "  $name: $(($# + 1)) files identical ($(md5sum < "$first" | cut -c1-12))"
}

if [ -n "$F16" ]; then
    specs=("Q4_K_M" "Q4_K_M imatrix" "IQ4_NL")
    threads=(1 2 8 8)
    if [ $QUICK = 1 ]; then specs=("Q4_K_M" "Q3_K_M imatrix"); threads=(1 8); fi
    for spec in "${specs[@]}"; do
        set -- $spec
        p=$1
        extra=()
        tag=$p
        if [ "${2:-}" = imatrix ]; then
            [ -n "$IMAT" ] || continue
            extra=(--imatrix "$IMAT")
            tag=$p-imatrix
        fi
        files=()
        for t in "${threads[@]}"; do
            o=$T/q-$tag-t$t-${#files[@]}.gguf
            run 0 quant "$F16" -o "$o" --preset "$p" -t $t -q "${extra[@]}" && files+=("$o")
        done
        [ ${#files[@]} -eq ${#threads[@]} ] && same "quant $tag, -t ${threads[*]}" "${files[@]}"
        run 0 verify "${files[0]}"
    done
fi

if [ $full = 1 ] && [ -n "$HF" ]; then
    hp=Q4_K_M
    [ $QUICK = 1 ] && hp=Q3_K_M
    run 0 quant "$HF" -o "$T/qhf-t1.gguf" --preset $hp -t 1 -q
    run 0 quant "$HF" -o "$T/qhf-t8.gguf" --preset $hp -t 8 -q
    same "quant HF dir $hp, -t 1 8" "$T/qhf-t1.gguf" "$T/qhf-t8.gguf"

    for ty in f16 q8_0; do
        run 0 convert "$HF" -o "$T/c-$ty-1.gguf" --type $ty -t 1 -q
        run 0 convert "$HF" -o "$T/c-$ty-2.gguf" --type $ty -t 2 -q
        run 0 convert "$HF" -o "$T/c-$ty-8.gguf" --type $ty -t 8 -q
        same "convert $ty, -t 1 2 8" "$T/c-$ty-1.gguf" "$T/c-$ty-2.gguf" "$T/c-$ty-8.gguf"
    done
    # another working directory, a relative source path
    mkdir -p "$T/elsewhere"
    cp -r "$HF" "$T/elsewhere/tinyllama-8m"
    (cd "$T/elsewhere" && $MW_EMU "$MEMWALL" convert tinyllama-8m -o ../c-rel.gguf --type q8_0 -q) ||
        fail "convert from another directory failed"
    same "convert q8_0, relative path from another cwd" "$T/c-q8_0-1.gguf" "$T/c-rel.gguf"
fi

finish
