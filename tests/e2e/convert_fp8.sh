#!/usr/bin/env bash
# FP8 (E4M3) sources end to end, on tinyllama-8m's first two layers with
# every *_proj weight stored as F8_E4M3 plus its scales
# (tests/fixtures/mk_fp8_fixture.py; NumPy):
#  - convert: each scale layout (fp8 blocks [128, 128] with F32 scales,
#    ragged [96, 80] blocks with BF16 scales, one scale_inv per tensor,
#    compressed-tensors per channel with input scales, per tensor, ragged
#    [64, 96] blocks) gives the
#    same tensors, byte for byte, as converting the checkpoint NumPy
#    dequantized independently to F32 (mk_fp8_fixture.py dequant): the
#    product E4M3 x scale is exact in F32 and rounded once to the type; and,
#    for the layouts llama.cpp's converter reads (all but compressed-tensors
#    per tensor), the same tensors and keys as its conversion
#    (tests/fixtures/llamacpp_ref/fp8-*.json, bench/llamacpp_fp8_ref.sh);
#  - quant (a preset, --size, --corpus) and calib read the FP8 directory as
#    they read the dequantized one: the same tensor data, the same imatrix;
#  - inspect shows the source dtype and the scale layout;
#  - bad input: a scale grid that does not cover its weight, NaN / Inf
#    scales, a missing scale, fmt e5m2, an unknown quant_method: exit 1
#    naming the tensor or the JSON path, and no output.
#
#   convert_fp8.sh          the above
#   convert_fp8.sh families the family fixtures whose plans move FP8 rows
#                           around (tests/fixtures/mk_family_fixture.py):
#                           mixtral (per-expert w1/w2/w3 stacked into 3-D
#                           tensors) and qwen35 (row gathers of the V heads,
#                           column gathers of ssm_out) against NumPy's
#                           dequantization; skips without the tokenizer files
#   convert_fp8.sh mem      peak RSS of converting a checkpoint with 32 MiB
#                           FP8 matrices (64 MiB each in BF16) stays under
#                           MW_FP8_RSS_BOUND_KIB (28 MiB): the rows are
#                           dequantized as they stream, source pages dropped
# Skips (77) without NumPy.
source "$(dirname "${BASH_SOURCE[0]}")/hf_common.sh"
MODE=${1:-}
TINY=$(model_dir tinyllama-8m)
[ -n "$TINY" ] || skip "tinyllama-8m missing"
PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" > /dev/null 2>&1 && "$p" -c 'import numpy' 2> /dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || skip "NumPy needed for the FP8 fixtures"
scratch_on_shm fp8
MK="$FIX/mk_fp8_fixture.py"

if [ "$MODE" = mem ]; then
    [ -x /usr/bin/time ] && [ -z "${MW_EMU:-}" ] || skip "needs GNU /usr/bin/time and a native run"
    "$PY" "$MK" big "$T/big" "$TINY" > "$T/mk.log" 2>&1 ||
        { fail "mk_fp8_fixture.py big: $(tail -n 2 "$T/mk.log")"; finish; }
    bound=${MW_FP8_RSS_BOUND_KIB:-28672}
    src_kib=$(( $(stat -c %s "$T/big/model.safetensors") / 1024 ))
    /usr/bin/time -f "MAXRSS %M" -o "$T/time" "$MEMWALL" convert "$T/big" -o "$T/big.gguf" \
        --type bf16 -q 2> "$T/err" || { fail "convert big: $(tail -n 3 "$T/err")"; finish; }
    rss=$(sed -n 's/^MAXRSS //p' "$T/time")
    echo "  FP8 checkpoint of $src_kib KiB (three 16384 x 2048 FP8 matrices) -> bf16: peak RSS $rss KiB (bound $bound KiB)"
    [ -n "$rss" ] && [ "$rss" -lt "$bound" ] ||
        fail "convert big: peak RSS ${rss:-?} KiB, bound $bound KiB (FP8 rows must stream)"
    mwgguf shapes "$T/big.gguf" blk.0.ffn_gate.weight=2048x16384 blk.0.ffn_down.weight=16384x2048 \
        > "$T/shp" 2>&1 || fail "big: shapes: $(tr '\n' ' ' < "$T/shp")"
    finish
fi

if [ "$MODE" = families ]; then
    fetch_tokenizers
    for k in mixtral qwen35; do
        python3 "$FIX/mk_family_fixture.py" $k "$T/$k" > "$T/mk.log" 2>&1 &&
            "$PY" "$MK" make "$T/$k" "$T/$k-fp8" ragged >> "$T/mk.log" 2>&1 &&
            "$PY" "$MK" dequant "$T/$k-fp8" "$T/$k-ref" >> "$T/mk.log" 2>&1 ||
            { fail "fixture $k: $(tail -n 2 "$T/mk.log")"; continue; }
        run 0 convert "$T/$k-fp8" -o "$T/a.gguf" --type bf16 -q || continue
        run 0 convert "$T/$k-ref" -o "$T/b.gguf" --type bf16 -q || continue
        mwgguf tensors-cmp "$T/a.gguf" "$T/b.gguf" > "$T/cmp" 2>&1 ||
            fail "$k: not NumPy's dequantization: $(head -n 3 "$T/cmp" | tr '\n' ' ')"
    done
    finish
fi

# the layouts against their NumPy dequantization, and llama.cpp's digests
nref=0
for L in block ragged pertensor channel tensor ctblock; do
    "$PY" "$MK" make "$TINY" "$T/$L" $L --layers 2 > "$T/mk.log" 2>&1 &&
        "$PY" "$MK" dequant "$T/$L" "$T/$L-ref" >> "$T/mk.log" 2>&1 ||
        { fail "mk_fp8_fixture.py $L: $(tail -n 2 "$T/mk.log")"; continue; }
    types=bf16
    [ $L = block ] && types="f32 bf16"
    [ $L = ragged ] && types="bf16 q8_0"
    for t in $types; do
        run 0 convert "$T/$L" -o "$T/a.gguf" --type $t -q || continue
        run 0 convert "$T/$L-ref" -o "$T/b.gguf" --type $t -q || continue
        mwgguf tensors-cmp "$T/a.gguf" "$T/b.gguf" > "$T/cmp" 2>&1 ||
            fail "$L --type $t: not NumPy's dequantization: $(head -n 3 "$T/cmp" | tr '\n' ' ')"
        # llama.cpp's converter where it reads the layout (bench/llamacpp_fp8_ref.sh):
        # every tensor and every KV but the names
        ref="$FIX/llamacpp_ref/fp8-$L-$t.json"
        if [ -f "$ref" ]; then
            mwgguf digest-cmp "$ref" "$T/a.gguf" --ignore-kv 'memwall.*' --ignore-kv general.name \
                --ignore-kv general.basename --ignore-kv general.finetune \
                --ignore-kv general.size_label > "$T/cmp" 2>&1 ||
                fail "$L --type $t: not llama.cpp's conversion: $(head -n 3 "$T/cmp" | tr '\n' ' ')"
            nref=$((nref + 1))
        fi
        # the scales are read, not converted: the same tensor count as the F16 model's
        [ "$(mwgguf types "$T/a.gguf" | grep -c scale)" = 0 ] || fail "$L: a scale tensor was converted"
    done
    rm -f "$T/a.gguf" "$T/b.gguf"
done

[ $nref = 6 ] || fail "compared with $nref of llama.cpp's FP8 digests, want 6"

# inspect: the source dtype and the scale layout
run 0 inspect "$T/ragged" && {
    has "$out" "source dtype: F8_E4M3+F16" "inspect ragged"
    has "$out" "quantization: fp8 E4M3, weight_scale_inv BF16, blocks [96, 80]" "inspect ragged"
}
run 0 inspect "$T/channel" &&
    has "$out" "quantization: compressed-tensors FP8 E4M3, weight_scale F32, per channel" "inspect channel"
run 0 inspect "$T/ragged" --json && has "$out" '"quantization": {"method": "fp8"' "inspect --json"

# quant and calib read the FP8 directory as the dequantized one
head -c 2000 "$MW_DATASETS/corpora/calib.txt" > "$T/c.txt"
for args in "--preset Q4_K_M" "--preset Q4_0 --corpus $T/c.txt --method gptq"; do
    # shellcheck disable=SC2086
    run 0 quant "$T/ragged" -o "$T/qa.gguf" $args -q || continue
    # shellcheck disable=SC2086
    run 0 quant "$T/ragged-ref" -o "$T/qb.gguf" $args -q || continue
    mwgguf same-data "$T/qa.gguf" "$T/qb.gguf" > "$T/cmp" 2>&1 ||
        fail "quant $args: FP8 source differs from its dequantization: $(head -n 2 "$T/cmp")"
done
# a budget (the allocation scores candidates of the same source tensors)
run 0 quant "$T/ragged" -o "$T/qs.gguf" --size 1500000 --no-iquants -q &&
    { sz=$(stat -c %s "$T/qs.gguf"); [ "$sz" -le 1500000 ] || fail "quant --size 1500000: $sz bytes"; }
run 0 calib "$T/block" --corpus "$T/c.txt" -o "$T/ia.imatrix" -q &&
    run 0 calib "$T/block-ref" --corpus "$T/c.txt" -o "$T/ib.imatrix" -q &&
    { cmp -s "$T/ia.imatrix" "$T/ib.imatrix" || fail "calib: FP8 imatrix differs from the dequantized one's"; }

# bad input: exit 1, the tensor or JSON path named, no output
bad() { # LAYOUT BAD WANT...
    local L=$1 b=$2
    shift 2
    rm -rf "$T/bad" "$T/bad.gguf"
    "$PY" "$MK" make "$TINY" "$T/bad" "$L" "$b" --layers 1 > "$T/mk.log" 2>&1 ||
        { fail "mk_fp8_fixture.py $L $b: $(tail -n 2 "$T/mk.log")"; return; }
    run 1 convert "$T/bad" -o "$T/bad.gguf" -q || return
    for w in "$@"; do has "$err" "$w" "$L $b"; done
    [ ! -e "$T/bad.gguf" ] || fail "$L $b: an output was written"
    run 1 quant "$T/bad" -o "$T/bad.gguf" --preset Q8_0 -q
    [ ! -e "$T/bad.gguf" ] || fail "$L $b: quant wrote an output"
}
bad block shape "tensor 'model.layers.0.mlp.down_proj.weight_scale_inv'" "does not cover its weight"
bad channel nan "tensor 'model.layers.0.mlp.down_proj.weight_scale'" "is NaN"
bad ragged inf "weight_scale_inv'" "is infinite"
bad block noscale "tensor 'model.layers.0.mlp.down_proj.weight'" "without its scale tensor"
bad ctblock e5m2dtype "tensor 'model.layers.0.mlp.down_proj.weight'" "F8_E5M2 is not supported"
# the config-level refusals: config.json edits of a valid fixture
badcfg() { # SED WANT...
    local e=$1
    shift
    rm -rf "$T/bad" "$T/bad.gguf"
    cp -r "$T/block" "$T/bad" && sed -i "$e" "$T/bad/config.json"
    run 1 convert "$T/bad" -o "$T/bad.gguf" -q || return
    for w in "$@"; do has "$err" "$w" "config $e"; done
    [ ! -e "$T/bad.gguf" ] || fail "config $e: an output was written"
}
badcfg 's/"e4m3"/"e5m2"/' "quantization_config.fmt" "e5m2"
badcfg 's/"quant_method": "fp8"/"quant_method": "awq"/' "quantization_config.quant_method" "'awq' is not supported"
badcfg 's/"weight_block_size": \[/"weight_block_size": [0, /' "quantization_config.weight_block_size" "two positive integers"
finish
