#!/usr/bin/env bash
# memwall report and quant --report/--card on tinyllama-8m: usage errors;
# memwall.quant.command recorded without the options that do not change the
# bytes (-o, -t, -q, --progress: files stay byte-identical); the page is
# self-contained (no script, nothing fetched) and has a cell per tensor with
# the type the file holds, the type mix, bytes by kind, the memory plan; a
# --size budget against the file; a --corpus file's method per tensor and
# GPTQ fallbacks; a file without memwall.* keys (llama.cpp's F16) still gets
# map, sizes and plan; --reference/--text: perplexity, KLD, top-1 and the
# size-vs-KLD plot; the model card's front matter, table and command.
. "$(dirname "$0")/common.sh"
have_python || skip "python3 missing"
HF=$(model_dir tinyllama-8m)
F16=$(ref tinyllama-8m.llamacpp-f16.gguf)
CAL="$MW_DATASETS/corpora/calib.txt"
EVAL="$MW_DATASETS/corpora/eval.txt"
[ -n "$HF" ] && [ -n "$F16" ] && [ -f "$CAL" ] && [ -f "$EVAL" ] ||
    skip "tinyllama-8m, its llama.cpp F16 or the corpora missing"
scratch_on_shm report

# usage
run 2 report && has "$err" "missing FILE" "no file"
run 2 report "$F16" && has "$err" "nothing to write" "no output"
run 2 report "$F16" -o "$T/x.html" --reference "$F16" && has "$err" "go together" "ref alone"
run 3 report "$T/none.gguf" -o "$T/x.html"
[ -e "$T/x.html" ] && fail "a failed report left $T/x.html"
run 2 quant "$HF" --dry-run --preset Q4_K_M --report "$T/x.html" && has "$err" "--report" "dry"

# quant --report --card; the command line recorded (SRC for the source); the
# same bytes without the options that do not make them, and from a copy
run 0 quant "$HF" -o "$T/q4.gguf" --preset Q4_K_M -t 1 -q --report "$T/q4.html" --card "$T/q4.md"
got=$(mwgguf kv "$T/q4.gguf" memwall.quant.command)
[ "$got" = "memwall quant SRC --preset Q4_K_M" ] || fail "memwall.quant.command '$got'"
CP="$T/copy/$(basename "$HF")" # general.name comes from the directory's name
mkdir -p "$CP" && cp "$HF"/* "$CP/"
run 0 quant "$CP" --progress=none -o "$T/q4-b.gguf" -t 2 --preset Q4_K_M
cmp -s "$T/q4.gguf" "$T/q4-b.gguf" || fail "-t/-o/-q/--progress/--report or SRC's place changed the bytes"
run 0 quant "$F16" -o "$T/o.gguf" --preset Q4_K_M --type-override 'attn_v=q8_0' -q
got=$(mwgguf kv "$T/o.gguf" memwall.quant.command)
[ "$got" = "memwall quant SRC --preset Q4_K_M --type-override attn_v=q8_0" ] ||
    fail "memwall.quant.command '$got'"
run 0 report "$T/o.gguf" --card "$T/o.md"
grep -qxF 'memwall quant SRC --preset Q4_K_M --type-override attn_v=q8_0 -o o.gguf' "$T/o.md" &&
    grep -q '^SRC: the unquantized model' "$T/o.md" || fail "card of report: the recorded command"

# the page: self-contained, one cell per matrix with its type
H="$T/q4.html"
[ -s "$H" ] || fail "no $H"
grep -qiE '<script|<link|<img|@import|url\(|src=|href=' "$H" && fail "page refers to something outside it"
grep -q '<meta name="viewport" content="width=device-width' "$H" || fail "no viewport meta"
n=0
while read -r name type; do
    [ "$type" = f32 ] && continue
    n=$((n + 1))
    grep -q "data-tensor=\"$name\" data-type=\"${type^^}\"" "$H" || fail "no $name ${type^^} cell"
done < <(mwgguf types "$T/q4.gguf")
[ "$n" -eq 58 ] || fail "$n matrices in q4.gguf, want 58"
[ "$(grep -c 'class="cell"' "$H")" -eq 58 ] || fail "$(grep -c 'class="cell"' "$H") map cells, want 58"
# llama.cpp's Q4_K_M rules on 8 layers: attn_v/ffn_down Q6_K in layers 0, 3, 6, 7
for c in 'blk.0.attn_v.weight" data-type="Q6_K' 'blk.1.attn_v.weight" data-type="Q4_K' \
    'blk.7.ffn_down.weight" data-type="Q6_K' 'output.weight" data-type="Q6_K' \
    'token_embd.weight" data-type="Q4_K'; do
    grep -q "data-tensor=\"$c\"" "$H" || fail "cell $c"
done
grep -q '<tr data-type="Q4_K">.*<td class="n">49</td><td class="n">3612672</td>' "$H" ||
    fail "type mix row Q4_K (49 tensors, 3612672 bytes)"
grep -q '<tr data-kind="ffn_down.weight">.*<td class="n">8</td><td class="n">1087488</td>' "$H" ||
    fail "bytes by kind: ffn_down"
grep -q 'id="kvtable"' "$H" && grep -q '<tr data-ctx="4096">.*16.00 MiB' "$H" ||
    fail "plan: KV f16 at 4096 (2 * 8 * 4096 * 4 * 32 * 2 bytes = 16 MiB)"
[ "$(grep -o 'data-fit="f16"' "$H" | wc -l)" -eq 30 ] || fail "a 5 MB model fits every tier and context"
grep -q 'id="nocalib"' "$H" || fail "no --corpus: the calibration section says so"

# the card
C="$T/q4.md"
[ "$(head -n 1 "$C")" = "---" ] || fail "card: no front matter"
for l in 'base_model: tinyllama-8m' '- gguf' 'quantized_by: memwall' \
    '| Q4_K | 4.5 | 49 | 3612672 | 68.9% |' '| bits per weight | 4.997 |' \
    "memwall quant $HF --preset Q4_K_M -o q4.gguf"; do
    grep -qxF -- "$l" "$C" || fail "card lacks the line '$l'"
done
# a license from the source's README front matter
printf -- '---\nlicense: apache-2.0\n---\n# x\n' > "$CP/README.md"
run 0 quant "$CP" -o "$T/lic.gguf" --preset Q8_0 -q --card "$T/lic.md"
grep -qx 'license: apache-2.0' "$T/lic.md" || fail "card: license from the source's README"

# a --size budget with a corpus: the file against it; the probes' KLD per
# tensor recorded (memwall.quant.probe_kld, reserved by the allocation)
run 0 quant "$F16" -o "$T/b.gguf" --size 4449984 --no-iquants --corpus "$CAL" --method gptq \
    --samples 2 --seq-len 32 -t 2 -q --report "$T/b.html"
sz=$(stat -c %s "$T/b.gguf")
[ "$sz" -le 4449984 ] || fail "--size 4449984 gave $sz bytes"
grep -q "id=\"budget\">Budget asked: --size 4449984: a file of at most 4449984 bytes. The file: $sz bytes" \
    "$T/b.html" || fail "budget paragraph (file $sz bytes)"
np=$(mwgguf kv "$T/b.gguf" memwall.quant.probe_kld | tr ',' '\n' | grep -c '[0-9]')
[ "$np" -eq 75 ] || fail "memwall.quant.probe_kld: $np values, want one per tensor (75)"
[ "$(grep -c '<tr data-tensor=' "$T/b.html")" -eq 58 ] || fail "probes table: want the 58 matrices"

# --corpus: the method per tensor; Q2_K has no GPTQ grid, its tensors fall back
run 0 quant "$F16" -o "$T/g.gguf" --preset Q2_K --corpus "$CAL" --method gptq --samples 4 \
    --seq-len 64 -t 2 -q
run 0 report "$T/g.gguf" -o "$T/g.html"
G="$T/g.html"
nq2=$(mwgguf types "$T/g.gguf" | grep -c '^blk\..* q2_K$')
grep -q "id=\"fallbacks\" data-count=\"$nq2\"" "$G" || fail "fallbacks: want the $nq2 Q2_K layer tensors"
[ "$(grep -c 'class="fallback"' "$G")" -eq "$nq2" ] || fail "map: $nq2 fallback marks"
grep -q '<dd data-param="samples">4</dd>' "$G" && grep -q '<dd data-param="seq_len">64</dd>' "$G" ||
    fail "calibration: samples 4, seq_len 64"
grep -q "<dd id=\"corpus\">$CAL</dd>" "$G" || fail "calibration: the corpus"
grep -q '<tr><td>gptq</td><td class="n">' "$G" || fail "method table: gptq"

# llama.cpp's F16 (no memwall.* keys) and quality against it, four files:
# q4.gguf without its memwall.* keys is llama-quantize's Q4_K_M (same tensor data)
head -c 30000 "$EVAL" > "$T/eval.txt"
mwgguf strip "$T/q4.gguf" "$T/lc-q4.gguf"
run 0 report "$T/q4.gguf" "$T/g.gguf" "$F16" "$T/lc-q4.gguf" -o "$T/m.html" --card "$T/m.md" --reference "$F16" \
    --text "$T/eval.txt" --chunks 2 -t 2
run 0 report "$F16" -o "$T/f16.html"
grep -q 'not memwall (no memwall.\* keys)' "$T/f16.html" || fail "F16: made by another tool"
grep -q 'data-tensor="blk.3.ffn_up.weight" data-type="F16"' "$T/f16.html" || fail "F16: map"
grep -q 'id="fits"' "$T/f16.html" || fail "F16: plan"
M="$T/m.html"
for f in q4.gguf g.gguf "$(basename "$F16")" lc-q4.gguf; do
    grep -q "<tr data-file=\"$f\">" "$M" || fail "quality row $f"
done
kq4=$(sed -n 's/.*<tr data-file="q4.gguf">.*data-kld="\([0-9.]*\)".*/\1/p' "$M")
kg=$(sed -n 's/.*<tr data-file="g.gguf">.*data-kld="\([0-9.]*\)".*/\1/p' "$M")
awk -v a="$kq4" -v b="$kg" 'BEGIN { exit !(a > 0 && a < 0.01 && b > a) }' ||
    fail "KLD Q4_K_M $kq4 (want (0, 0.01)) below Q2_K+gptq's $kg"
grep -q "data-file=\"$(basename "$F16")\">.*data-kld=\"0.000000\">.*100.00%" "$M" ||
    fail "the reference against itself: KLD 0, top-1 100%"
[ "$(grep -c 'class="pt memwall"' "$M")" -eq 2 ] || fail "plot: two memwall points"
[ "$(grep -c 'class="pt other"' "$M")" -eq 1 ] || fail "plot: one llama.cpp point (the F16's KLD 0 is not)"
klc=$(sed -n 's/.*<tr data-file="lc-q4.gguf"><td>lc-q4.gguf<\/td><td>other<\/td>.*data-kld="\([0-9.]*\)".*/\1/p' "$M")
[ "$klc" = "$kq4" ] || fail "the same tensors without memwall keys: KLD $klc, want $kq4"
grep -q '| perplexity | reference | ratio | KL divergence | top-1 agreement |' "$T/m.md" ||
    fail "card: quality table"
finish
