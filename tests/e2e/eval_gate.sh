#!/usr/bin/env bash
# The CI quality gate and what `memwall quant` says it wrote, on real files:
# tinyllama-8m converted to F16, quantized with --preset Q4_K_M and with
# --bpw 3 --no-iquants (a mix of Q2_K, Q3_K and IQ4_XS: the k-quant
# candidates only, a few seconds).
#  - quant's last line names a budget's file as a mix (type counts, the
#    budget asked, the file type) and general.file_type is llama.cpp's guess
#    over the quantized tensors (the type most of them have, ties to the
#    first in llama-model-loader's name order); a preset's file keeps the
#    preset's type and line;
#  - `memwall eval` both ways: the Q4_K_M file within --max-kld/--min-top1/
#    --max-ppl-ratio (exit 0), the 3 bpw mix past --max-kld (exit 1 with a
#    one-line reason on stderr), its figures equal to `memwall perplexity
#    --kl-divergence`'s on the same logits, the reference given as a saved
#    logits file, usage errors (exit 2);
#  - JUnit XML from eval and verify (well-formed, the counts of tests and
#    failures, the failure's message), a damaged file's verify report.
set -u
source "$(dirname "$0")/common.sh"
scratch_on_shm eval-gate
model=$(model_dir tinyllama-8m)
text=$MW_DATASETS/corpora/eval.txt
[ -n "$model" ] && [ -f "$text" ] || skip "no tinyllama-8m or eval.txt"
have_python || skip "no python3"

xml_ok() { # FILE: well-formed XML
    python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$1" ||
        fail "$1: not well-formed XML"
}
kv_value() { # FILE KEY
    "$MEMWALL" inspect "$1" --json | python3 -c 'import json,sys
m=json.load(sys.stdin)["metadata"]
print(*[x["value"] for x in m if x["key"]==sys.argv[1]])' "$2"
}
# llama-model-loader's guess over the quantized (non-F32) tensors: the type
# most tensors have, ties to the first in its order (layer, then name)
guessed_type() { # FILE -> type name, upper case
    "$MEMWALL" inspect "$1" --json | python3 -c 'import json,re,sys
ts=json.load(sys.stdin)["tensors"]
def key(t):
    m=re.match(r"blk\.(\d+)\.", t["name"]); return (int(m.group(1)) if m else -1, t["name"])
n={}; best=None
for t in sorted(ts, key=key):
    if t["type"]=="f32": continue
    n[t["type"]]=n.get(t["type"],0)+1
    if best is None or n[t["type"]]>n[best]: best=t["type"]
print(best.upper())'
}

run 0 convert "$model" -o "$T/f16.gguf" -q
run 0 quant "$T/f16.gguf" -o "$T/q4.gguf" --preset Q4_K_M
has "$err" "wrote $T/q4.gguf (Q4_K_M, rtn, " "preset line"
[ "$(kv_value "$T/q4.gguf" general.file_type)" = 15 ] || fail "Q4_K_M: general.file_type is not 15"

# a budget's mix
run 0 quant "$T/f16.gguf" -o "$T/mix.gguf" --bpw 3 --no-iquants
line=$(grep "wrote $T/mix.gguf" <<< "$err")
[[ $line =~ \(mix\ for\ bpw=3:\ ([0-9]+\ [A-Z0-9_]+,\ )+[0-9]+\ [A-Z0-9_]+\;\ file\ type\ ([A-Z0-9_]+)\;\ rtn,\ ([0-9]+)\ bytes,\ 3\.00\ bpw\; ]] ||
    fail "mix line: '$line'"
ftname=${BASH_REMATCH[2]} bytes=${BASH_REMATCH[3]}
[ "$bytes" = "$(stat -c %s "$T/mix.gguf")" ] || fail "mix line: $bytes bytes, the file has $(stat -c %s "$T/mix.gguf")"
[[ $line == *" Q4_K_M"* ]] && fail "a mix named as Q4_K_M: '$line'"
want=$(guessed_type "$T/mix.gguf")
[ "$ftname" = "$want" ] || fail "mix line: file type $ftname, the loader's guess is $want"
# the type counts add up to the file's tensors
total=$(grep -oE '[0-9]+ [A-Z][A-Z0-9_]*[,;]' <<< "${line%%; file type*};" | awk '{s+=$1} END {print s}')
[ "$total" = "$("$MEMWALL" inspect "$T/mix.gguf" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tensors"]))')" ] ||
    fail "mix line: type counts add up to $total"
declare -A ftype=([Q2_K]=10 [Q3_K]=12 [Q4_K]=15 [Q5_K]=17 [Q6_K]=18 [Q8_0]=7 [IQ4_XS]=30 [IQ4_NL]=25 [F16]=1)
[ "$(kv_value "$T/mix.gguf" general.file_type)" = "${ftype[$want]:-?}" ] ||
    fail "mix: general.file_type $(kv_value "$T/mix.gguf" general.file_type), want ${ftype[$want]:-?} ($want)"
[ "$(kv_value "$T/mix.gguf" memwall.quant.budget)" = "bpw=3" ] || fail "mix: memwall.quant.budget"

# the gate: passes for Q4_K_M, fails for the 3 bpw mix
gate=(--reference "$T/f16.gguf" --text "$text" --bytes 6000)
run 0 eval "$T/q4.gguf" "${gate[@]}" --max-kld 0.01 --min-top1 0.9 --max-ppl-ratio 1.05 --junit "$T/q4.xml"
has "$out" "$T/q4.gguf: OK: kld 0.00" "Q4_K_M within the gate"
[ -z "$err" ] || fail "a passing gate printed on stderr: $err"
xml_ok "$T/q4.xml"
has "$(cat "$T/q4.xml")" 'tests="3" failures="0" errors="0"' "q4 JUnit counts"
has "$(cat "$T/q4.xml")" '<property name="kld" value="0.00' "q4 JUnit kld property"
kld_q4=$(sed -n 's/^kld //p' <<< "$out")
run 1 eval "$T/mix.gguf" "${gate[@]}" --max-kld 0.01 --min-top1 0.5 --junit "$T/mix.xml"
[ "$(wc -l <<< "$err")" = 1 ] || fail "the reason is not one line: $err"
[[ $err =~ ^memwall\ eval:\ .*mix\.gguf:\ kld\ 0\.[0-9]+\ \>\ --max-kld\ 0\.01$ ]] || fail "reason: '$err'"
has "$out" "mix.gguf: FAILED: kld " "verdict line"
kld_mix=$(sed -n 's/^kld //p' <<< "$out")
top1_mix=$(sed -n 's/^top1 //p' <<< "$out")
python3 -c 'import sys; a,b=map(float,sys.argv[1:]); sys.exit(not (0 < a < 0.01 < b))' "$kld_q4" "$kld_mix" ||
    fail "kld Q4_K_M $kld_q4, mix $kld_mix: not 0 < Q4_K_M < 0.01 < mix"
xml_ok "$T/mix.xml"
has "$(cat "$T/mix.xml")" 'tests="2" failures="1" errors="0"' "mix JUnit counts"
has "$(cat "$T/mix.xml")" '<failure type="threshold" message="kld ' "mix JUnit failure"
run 1 eval "$T/mix.gguf" "${gate[@]}" --min-top1 0.999 -q
has "$err" "top1 $top1_mix < --min-top1 0.999" "--min-top1 reason"
[ "$(wc -l <<< "$out")" = 1 ] || fail "-q printed more than the verdict"

# the same figures as memwall perplexity on saved logits; the logits as REF
run 0 perplexity "$T/f16.gguf" "$text" --bytes 6000 --save-logits "$T/ref.logits" -q
run 0 perplexity "$T/mix.gguf" "$text" --kl-divergence "$T/ref.logits" -q
has "$out" "kld $kld_mix" "perplexity --kl-divergence's kld"
run 1 eval "$T/mix.gguf" --reference "$T/ref.logits" --max-kld 0.01
has "$out" "kld $kld_mix" "eval against saved logits"

# usage
run 2 eval "$T/mix.gguf" --text "$text" && has "$err" "missing --reference" "no reference"
run 2 eval "$T/mix.gguf" --reference "$T/f16.gguf" && has "$err" "missing --text" "no text"
run 2 eval "$T/mix.gguf" "${gate[@]}" --min-top1 2 && has "$err" "--min-top1" "top1 out of range"
run 3 eval "$T/mix.gguf" "${gate[@]}" --junit "$T/no/such/dir/r.xml"

# verify --junit: an intact file, then one with a damaged tensor
run 0 verify "$T/q4.gguf" --junit "$T/v-ok.xml"
xml_ok "$T/v-ok.xml"
has "$(cat "$T/v-ok.xml")" 'tests="1" failures="0" errors="0"' "verify JUnit ok"
cp "$T/q4.gguf" "$T/bad.gguf"
printf '\x55' | dd of="$T/bad.gguf" bs=1 seek=$(($(stat -c %s "$T/bad.gguf") - 100)) conv=notrunc status=none
run 1 verify "$T/bad.gguf" --junit "$T/v-bad.xml"
xml_ok "$T/v-bad.xml"
has "$(cat "$T/v-bad.xml")" 'tests="1" failures="1" errors="0"' "verify JUnit failure"
has "$(cat "$T/v-bad.xml")" '<failure type="E_CHECKSUM"' "verify JUnit failure type"
run 3 verify "$T/missing.gguf" --junit "$T/v-io.xml"
has "$(cat "$T/v-io.xml")" 'errors="1"' "verify JUnit error"
finish
