#!/usr/bin/env bash
# bench/size_targets.sh — three targets with the plain commands
#   memwall quant F16 -o OUT --size 4449984 --corpus calib.txt
#   memwall quant F16 -o OUT --size 3622592 --corpus calib.txt
#   memwall quant F16 -o OUT --bpw 2.5      --corpus calib.txt
# on tinyllama-8m: file bytes, bpw, perplexity, KL divergence to llama.cpp's
# F16 logits and same-top-1 (first 60 KB of eval.txt, ctx 256, scored by the
# llama.cpp peer as bench/bpw_curve.sh does), quant time and peak RSS, then
# the same with the i-quants removed from the candidates (--no-iquants) and
# without the output-KL probes (--no-probes), for the ablation, and
# llama.cpp's presets of nearest size from anchors.md.
# usage: bench/size_targets.sh [BUILD_DIR] [EXTRA quant ARGS...]
# env: MW_BENCH_OUT (scratch), MW_BENCH_THREADS, MW_TARGETS ("size:4449984
#   size:3622592 bpw:2.5"), MW_ABLATE=0 to skip the ablation rows.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}; shift || true
extra=("$@")
mw=$build/tools/memwall
peer=$(bash "$src/tests/peer/setup.sh" | tail -n 1)
ds=$src/datasets
f16=$ds/reference/tinyllama-8m.llamacpp-f16.gguf
out=${MW_BENCH_OUT:-$build/size-targets}
thr=${MW_BENCH_THREADS:-$(nproc)}
targets=${MW_TARGETS:-"size:4449984 size:3622592 bpw:2.5"}
mkdir -p "$out"
head -c 60000 "$ds/corpora/eval.txt" > "$out/eval60k.txt"
[ -s "$out/f16.logits" ] || "$peer" --threads "$thr" ppl "$f16" "$out/eval60k.txt" --ctx 256 \
    --bytes 60000 --save-logits-llamacpp "$out/f16.logits" > /dev/null
nel=$("$mw" inspect "$f16" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(t["params"] for t in d["tensors"]))')
printf '| target | candidates | file bytes | bpw (data) | ppl (llama.cpp) | KLD | same top-1 | quant s | peak RSS MiB | types |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
variants=(all)
[ "${MW_ABLATE:-1}" = 1 ] && variants+=(k-quants no-probes)
for v in "${variants[@]}"; do
  for pt in $targets; do
    kind=${pt%%:*}; val=${pt#*:}
    f=$out/$kind-$val-$v.gguf
    noiq=0; [ "$v" = k-quants ] && noiq=1
    t0=$(date +%s.%N)
    noarg=(); [ $noiq = 1 ] && noarg=(--no-iquants)
    [ "$v" = no-probes ] && noarg=(--no-probes)
    if ! msg=$(/usr/bin/time -f 'RSS %M' "$mw" quant "$f16" -o "$f" "--$kind" "$val" \
        --corpus "$ds/corpora/calib.txt" -q -t "$thr" "${noarg[@]}" "${extra[@]}" 2>&1); then
      printf '| --%s %s | %s | not possible: %s |\n' "$kind" "$val" "$v" "$(grep -m1 "memwall quant:" <<< "$msg")"
      continue
    fi
    t1=$(date +%s.%N)
    rss=$(awk '/^RSS/ {printf "%.0f", $2/1024}' <<< "$msg")
    "$mw" verify --deep "$f" > /dev/null
    types=$("$mw" inspect "$f" --json | python3 -c '
import json,sys,collections
d=json.load(sys.stdin); c=collections.Counter(t["type"] for t in d["tensors"] if len(t.get("ne",[]))>1 or True)
print(" ".join(f"{k}:{n}" for k,n in sorted(c.items())))')
    data=$("$mw" inspect "$f" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(t["bytes"] for t in d["tensors"]))')
    r=$("$peer" --threads "$thr" ppl "$f" "$out/eval60k.txt" --ctx 256 --bytes 60000 --kld-base "$out/f16.logits")
    g() { awk -v k="$1" '$1 == k {print $2}' <<< "$r"; }
    printf '| --%s %s | %s | %s | %s | %s | %s | %s | %.1f | %s | %s |\n' "$kind" "$val" "$v" \
      "$(stat -c %s "$f")" "$(python3 -c "print(f'{$data*8/$nel:.3f}')")" "$(g ppl)" "$(g kld)" \
      "$(g same_top)" "$(echo "$t1 - $t0" | bc)" "$rss" "$types"
  done
done
printf '\nllama.cpp (datasets/reference/anchors.md): Q2_K-im 3622592 B 3.36 bpw KLD 0.019885; '
printf 'Q3_K_M-im 4449984 4.15 0.004175; Q4_K_M-im 5339840 5.00 0.001137\n'
printf 'targets: <= 4449984 B KLD <= 0.001137; <= 3622592 B KLD <= 0.004175; 2.5 bpw KLD <= 0.0199\n'
