#!/usr/bin/env bash
# memwall quant --bpw / --size / --fit-ram (mixed precision to a budget) on
# tinyllama-8m with llama.cpp's imatrix: real files are written, `memwall
# verify` accepts them, the predicted file size is exact, --size is never
# exceeded and hit within 1%, --bpw is hit within 1%, --fit-ram's budget is
# the plan formula's (KV cache per ctx and type subtracted), the budget is
# recorded in memwall.quant.budget, bad budgets are usage errors (exit 2).
# The --method gptq path runs on a 30 KB slice of calib.txt, 4 samples of 256
# (the probes run on the samples' first 2048 positions: 8 samples were twice
# their cost, 54 s of CPU for the probed run instead of 32).
# With "small" (the sanitizer build): one --size run and the usage errors,
# without the runs that measure the i-quant candidates; its two runs that
# measure every candidate of every tensor (--size, --bpw 3) take tinyllama-8m
# and its imatrix cut to layer 0 (tests/lib/mwgguf.py cut-layers: every
# kind of tensor, a third of the weights; 2 minutes of CPU each at -O0 with
# all 8 layers).
set -u
small=${1:-}
source "$(dirname "$0")/common.sh"
scratch_on_shm quant-alloc
f16=$MW_DATASETS/reference/tinyllama-8m.llamacpp-f16.gguf
im=$MW_DATASETS/reference/tinyllama-8m.llamacpp.imatrix.gguf
[ -f "$f16" ] && [ -f "$im" ] || { skip "no tinyllama-8m reference files"; }
have_python || { skip "no python3"; }

data_bytes() { # FILE -> tensor data bytes and parameter count
    "$MEMWALL" inspect "$1" --json | python3 -c 'import json,sys
d=json.load(sys.stdin); print(sum(t["bytes"] for t in d["tensors"]), sum(t["params"] for t in d["tensors"]))'
}
kv_value() { # FILE KEY
    "$MEMWALL" inspect "$1" --json | python3 -c 'import json,sys
d=json.load(sys.stdin); m=d["metadata"]
v=[x for x in m if x.get("key")==sys.argv[1]] if isinstance(m,list) else [{"value":m.get(sys.argv[1])}]
print(v[0]["value"] if v else "")' "$2"
}
size_ok() { # FILE TARGET LABEL: <= target, >= 99% of it, verify OK, predicted exact
    local s
    s=$(stat -c %s "$1")
    [ "$s" -le "$2" ] || fail "$3: $s bytes > target $2"
    [ "$s" -ge $(($2 - $2 / 100)) ] || fail "$3: $s bytes < 99% of $2"
    "$MEMWALL" verify "$1" > /dev/null || fail "$3: verify failed"
    if [ "${4:-}" = bound ]; then
        [ "$(sed -nE 's/.*file size ([0-9]+) bytes, predicted ([0-9]+).*/\2/p' <<< "$err")" -ge "$s" ] ||
            fail "$3: file above the predicted bound"
    else
        has "$err" "predicted $s (exact)" "$3"
    fi
}
# (the budget mechanics below run with --no-iquants: the i-quant searches cost
# the ASan build minutes; the i-quant candidates are checked further down)

# --size: llama.cpp's Q4_K_M and Q3_K_M file sizes, and a suffix
targets="5339584 4449728"
src=$f16 srcim=$im # the input of the runs that measure every tensor
if [ "$small" = small ]; then
    mwgguf cut-layers "$f16" "$T/l1.gguf" 1 + cut-layers "$im" "$T/l1.imatrix" 1 ||
        fail "mwgguf cut-layers"
    src=$T/l1.gguf srcim=$T/l1.imatrix
    targets=$(( $(stat -c %s "$src") * 4449728 / 16891328 )) # Q3_K_M's share of the F16 file
fi
for target in $targets; do
    run 0 quant "$src" -o "$T/s$target.gguf" --size "$target" --imatrix "$srcim" --no-iquants -t 2 &&
        size_ok "$T/s$target.gguf" "$target" "--size $target"
done
has "$err" "output.weight" "--size table"
b=$(kv_value "$T/s$target.gguf" memwall.quant.budget)
[ "$b" = "size=$target" ] || fail "memwall.quant.budget is '$b'"
if [ "$small" != small ]; then
# (a --size with a binary suffix: check_core's size table parses them, and
# --fit-ram 115M below, the same option type, takes one end to end to the byte;
# a run of its own measured every candidate once more)

# --bpw: tensor data bits per weight within 1% below the target; monotone files;
# -q prints nothing
prev=0
for bpw in 3 4.5 6; do
    run 0 quant "$f16" -o "$T/b$bpw.gguf" --bpw "$bpw" --imatrix "$im" --no-iquants -t 2 -q || continue
    [ -z "$err" ] || fail "-q printed: $err"
    "$MEMWALL" verify "$T/b$bpw.gguf" > /dev/null || fail "--bpw $bpw: verify failed"
    read -r db np <<< "$(data_bytes "$T/b$bpw.gguf")"
    python3 -c "import sys; b=$db*8/$np; sys.exit(0 if $bpw*0.99 <= b <= $bpw else 1)" ||
        fail "--bpw $bpw: got $(python3 -c "print($db*8/$np)") bpw"
    [ "$db" -gt "$prev" ] || fail "--bpw $bpw: data $db not above the previous $prev"
    prev=$db
done

# the user's own overrides keep their tensors; the rest fits around them
run 0 quant "$f16" -o "$T/ov.gguf" --size 4449728 --imatrix "$im" --no-iquants --type-override 'output\.weight=q8_0' -t 2 &&
    { size_ok "$T/ov.gguf" 4449728 "--size with --type-override"
      t=$("$MEMWALL" inspect "$T/ov.gguf" --json | python3 -c 'import json,sys
print([t["type"] for t in json.load(sys.stdin)["tensors"] if t["name"]=="output.weight"][0])')
      [ "$t" = q8_0 ] || fail "--type-override output.weight=q8_0 gave $t"; }

# --fit-ram: the plan formula (KV = 2 * 8 layers * ctx * 128 * bytes/elem)
for kv in f16 q8_0; do
    run 0 quant "$f16" -o "$T/r-$kv.gguf" --fit-ram 115M --ctx 1024 --kv "$kv" --imatrix "$im" --no-iquants -t 2 ||
        continue
    line=$(grep -- "--fit-ram" <<< "$err" | head -n 1)
    read -r app kvb ov w <<< "$(sed -E 's/.*app share ([0-9]+) - KV cache ([0-9]+) .* overhead ([0-9]+) = ([0-9]+) bytes.*/\1 \2 \3 \4/' <<< "$line")"
    want_kv=$((2 * 8 * 1024 * 128 * 2)); [ "$kv" = q8_0 ] && want_kv=$((2 * 8 * 1024 * 128 / 32 * 34))
    [ "$kvb" = "$want_kv" ] || fail "--fit-ram --kv $kv: KV $kvb, want $want_kv"
    [ "$app" = $((115 * 1048576 * 65 / 100)) ] || fail "--fit-ram: app share $app"
    [ "$w" = $((app - kvb - ov)) ] || fail "--fit-ram: budget $w != $app - $kvb - $ov"
    size_ok "$T/r-$kv.gguf" "$w" "--fit-ram --kv $kv"
    has "$(kv_value "$T/r-$kv.gguf" memwall.quant.budget)" "fit-ram=120586240,ctx=1024,kv=$kv" "budget key"
done
[ "$(stat -c %s "$T/r-q8_0.gguf")" -gt "$(stat -c %s "$T/r-f16.gguf")" ] ||
    fail "--kv q8_0 did not leave more for the weights than f16"
fi

# bad budgets: exit 2 with a clear message
# (IQ1_S everywhere with an imatrix: about 1.7 MB; the refusal names the
# smallest file, and that size is then accepted)
# (the sanitizer build skips the runs that measure every i-quant candidate
# of every tensor: 15 minutes there; check_quant_iq covers those quantizers)
# (these i-quant runs, and the calibration-driven ones at the end, take
# tinyllama-8m and its imatrix cut to 2 layers (tests/lib/mwgguf.py
# cut-layers: every kind of tensor, 43% of the weights): measuring every
# i-quant candidate of every tensor was 20 s of CPU per run on all 8 layers)
if [ "$small" != small ]; then
mwgguf cut-layers "$f16" "$T/l2.gguf" 2 + cut-layers "$im" "$T/l2.imatrix" 2 || fail "mwgguf cut-layers"
run 2 quant "$T/l2.gguf" -o "$T/x.gguf" --size 100K --imatrix "$T/l2.imatrix" &&
    has "$err" "below the smallest file" "--size 100K"
smallest=$(sed -n 's/.*below the smallest file this model can have: \([0-9]*\) .*/\1/p' <<< "$err" | head -n 1)
[ -n "$smallest" ] || fail "the refusal does not name the smallest size"
run 0 quant "$T/l2.gguf" -o "$T/min.gguf" --size "$smallest" --imatrix "$T/l2.imatrix" &&
    size_ok "$T/min.gguf" "$smallest" "--size at the named minimum"
run 0 verify --deep "$T/min.gguf"
# below the k-quants' floor (Q2_K everywhere, refused for --bpw 2.5
# --no-iquants below) the allocation takes i-quants, for --size and for --bpw
run 0 inspect "$T/min.gguf"
[[ $out == *" iq2_"* || $out == *" iq1_"* ]] || fail "--size at the named minimum chose no i-quant"
rm -f "$T/min.gguf"
run 0 quant "$T/l2.gguf" -o "$T/i.gguf" --bpw 2.5 --imatrix "$T/l2.imatrix"
# the last line names the mix, not a preset; general.file_type is its most
# common quantized type's (docs/formats.md §8.1): an i-quant here
line=$(grep "wrote $T/i.gguf" <<< "$err")
[[ $line == *"(mix for bpw=2.5: "*"; file type IQ"*"; imatrix, $(stat -c %s "$T/i.gguf") bytes, 2.50 bpw;"* ]] ||
    fail "--bpw 2.5 line: '$line'"
case $(kv_value "$T/i.gguf" general.file_type) in
19 | 20 | 23 | 24 | 26 | 28 | 31) ;; # IQ2_XXS IQ2_XS IQ3_XXS IQ1_S IQ3_S IQ2_S IQ1_M
*) fail "--bpw 2.5: general.file_type $(kv_value "$T/i.gguf" general.file_type), not an i-quant's" ;;
esac
run 0 inspect "$T/i.gguf"
[[ $out == *" iq2_"* || $out == *" iq1_"* ]] || fail "--bpw 2.5 chose no i-quant"
run 0 verify --deep "$T/i.gguf"
rm -f "$T/i.gguf"
fi
run 2 quant "$f16" -o "$T/x.gguf" --bpw 1 && has "$err" "below the smallest" "--bpw 1"
run 2 quant "$f16" -o "$T/x.gguf" --preset Q4_K_M --no-iquants && has "$err" "goes with --bpw" "--no-iquants alone"
# --no-iquants: the k-quants only (Q2_K everywhere is then the floor)
run 2 quant "$f16" -o "$T/x.gguf" --bpw 2.5 --imatrix "$im" --no-iquants && has "$err" "below the smallest" "--bpw 2.5 --no-iquants"
# (the --bpw 3 file above is this command's: the output does not depend on -t)
[ -f "$T/b3.gguf" ] && cp "$T/b3.gguf" "$T/k.gguf" ||
    run 0 quant "$src" -o "$T/k.gguf" --bpw 3 --imatrix "$srcim" --no-iquants -q
run 0 inspect "$T/k.gguf"
[[ $out != *" iq1_"* && $out != *" iq2_"* && $out != *" iq3_"* ]] || fail "--no-iquants chose an i-quant"
rm -f "$T/k.gguf"
run 2 quant "$f16" -o "$T/x.gguf" --size -5M && has "$err" "is not a size" "--size -5M"
run 2 quant "$f16" -o "$T/x.gguf" --size 5Q && has "$err" "is not a size" "--size 5Q"
run 2 quant "$f16" -o "$T/x.gguf" --bpw abc && has "$err" "bits per weight" "--bpw abc"
run 2 quant "$f16" -o "$T/x.gguf" --bpw -3 && has "$err" "bits per weight" "--bpw -3"
run 2 quant "$f16" -o "$T/x.gguf" --fit-ram 16G && has "$err" "needs --ctx" "--fit-ram without --ctx"
run 2 quant "$f16" -o "$T/x.gguf" --fit-ram 10M --ctx 512 && has "$err" "nothing is left" "--fit-ram 10M"
run 2 quant "$f16" -o "$T/x.gguf" --bpw 4 --size 4M && has "$err" "at a time" "two budgets"
run 2 quant "$f16" -o "$T/x.gguf" --bpw 4 --no-probes && has "$err" "goes with --corpus" "--no-probes without --corpus"
[ ! -e "$T/x.gguf" ] || fail "a failed run left an output"

# tensor names from the file are printed escaped (plan and notices)
# blk.0<ESC>attn_q.weight: still a quantizable 2-D weight
mwgguf rename "$f16" "$T/esc.gguf" blk.0.attn_q.weight $'blk.0\x1battn_q.weight'
run 0 quant "$T/esc.gguf" --dry-run --preset Q4_K_M --imatrix "$im" &&
    { has "$out" 'blk.0\x1battn_q.weight' "escaped name in the plan"
      has "$err" 'blk.0\x1battn_q.weight' "escaped name in the notice"
      ! grep -q $'\x1b' "$T/out" "$T/err" || fail "a raw ESC byte reached the terminal"; }

# the calibration-driven path quantizes with the allocated types, on
# the 2-layer cut above (layer 1 calibrated on layer 0's quantized output;
# --size 4449728's share of the F16 file, 1959593 bytes): the probes
# are one forward pass per tensor, 16 here instead of 58, and the checks are
# the same per tensor (a Q3_K probe with its KLD for each layer tensor, types
# the probes moved: blk.0.attn_k q2_K -> q3_K among others)
[ "$small" = small ] && finish
head -c 30000 "$MW_DATASETS/corpora/calib.txt" > "$T/calib30k.txt"
cs=$(( $(stat -c %s "$T/l2.gguf") * 4449728 / 16891328 ))
run 0 quant "$T/l2.gguf" -o "$T/g.gguf" --size "$cs" --imatrix "$T/l2.imatrix" --corpus "$T/calib30k.txt" \
    --no-iquants --method gptq --samples 4 --seq-len 256 -t 2 && size_ok "$T/g.gguf" "$cs" "gptq --size" bound
# the losses are scaled by one output-KL probe per tensor: the
# table gives each probe, the summary how well the unscaled losses ranked them
has "$err" "losses scaled to the output KL divergence of 16 probes" "probe summary"
has "$err" "probe KLD" "probe columns"
[ "$(grep -cE '^  blk\.[0-9]+\.[a-z_]+\.weight .* q3_K +[0-9.]+e-[0-9]+ ' <<< "$err")" = 14 ] ||
    fail "expected a Q3_K probe with its KLD for each of the 14 layer tensors"
run 0 quant "$T/l2.gguf" -o "$T/gn.gguf" --size "$cs" --imatrix "$T/l2.imatrix" --corpus "$T/calib30k.txt" \
    --no-iquants --method gptq --samples 4 --seq-len 256 -t 2 --no-probes &&
    size_ok "$T/gn.gguf" "$cs" "--no-probes" bound
[[ $err == *probe* ]] && fail "--no-probes still probed"
# the same types with and without the probes would be the same tensor table
t_g=$("$MEMWALL" inspect "$T/g.gguf" | awk '$2 ~ /^blk\./ { print $2, $3 }')
t_gn=$("$MEMWALL" inspect "$T/gn.gguf" | awk '$2 ~ /^blk\./ { print $2, $3 }')
[ -n "$t_g" ] && [ "$t_g" != "$t_gn" ] || fail "the probes changed no type"
# no --imatrix: the allocation weighs columns by the corpus's own statistics
run 0 quant "$T/l2.gguf" -o "$T/c.gguf" --size "$cs" --no-iquants --no-probes --corpus "$T/calib30k.txt" \
    --method rtn --samples 8 --seq-len 256 -t 2 && size_ok "$T/c.gguf" "$cs" "corpus-importance --size" bound &&
    has "$err" "importance for the allocation from" "corpus importance notice"
run 0 verify "$T/c.gguf"
finish
