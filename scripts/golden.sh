#!/usr/bin/env bash
# Refactoring guard: run the main commands on the bundled model with fixed
# options and print the SHA-256 of every output. Two builds that should behave
# the same (before and after a refactor) must print the same list.
# Usage: scripts/golden.sh BUILD_DIR OUT_DIR (outputs are named relative to
# OUT_DIR, so two runs in different directories compare; timings are dropped)
set -euo pipefail
bin=$(cd "$1/tools" && pwd)
out=$2
src=$(cd "$(dirname "$0")/.." && pwd)
m=$src/datasets/tinyllama-8m
c=$src/datasets/corpora/calib.txt
mkdir -p "$out"
cd "$out" # outputs named relative: paths recorded in files and messages match
out=.
mw=$bin/memwall
q() { "$mw" quant "$m" -q -t 2 "$@"; }
$mw convert "$m" -o "$out/f16.gguf" -q >/dev/null
$mw calib "$m" --corpus "$c" --samples 16 --seq-len 128 -o "$out/calib.imatrix" -t 2 >/dev/null 2>&1
$mw calib "$m" --corpus "$c" --samples 16 --seq-len 128 -o "$out/calib.dat" -t 2 >/dev/null 2>&1 || true
q -o "$out/q4km.gguf" --preset Q4_K_M
q -o "$out/q4km-im.gguf" --preset Q4_K_M --imatrix "$out/calib.imatrix"
q -o "$out/q3km-im.gguf" --preset Q3_K_M --imatrix "$src/datasets/reference/tinyllama-8m.llamacpp.imatrix.gguf"
q -o "$out/bpw45.gguf" --bpw 4.5 --imatrix "$out/calib.imatrix"
q -o "$out/size.gguf" --size 4449728 --imatrix "$out/calib.imatrix"
q -o "$out/fit.gguf" --fit-ram 110m --ctx 256
q -o "$out/override.gguf" --preset Q4_0 --type-override 'ffn_down=Q8_0' --pure
for meth in rtn gptq awq awq+gptq gptq-act; do
  q -o "$out/m-$meth.gguf" --preset Q4_K_M --corpus "$c" --samples 4 --seq-len 128 --method "$meth"
done
q -o "$out/size-corpus.gguf" --size 4449728 --corpus "$c" --samples 4 --seq-len 128
q -o "$out/dry.txt" --preset Q3_K_S --dry-run > "$out/dry.txt"
q -o "$out/q4km-f16src.gguf" --preset Q4_K_M >/dev/null
$mw quant "$out/f16.gguf" -q -o "$out/q5ks-from-gguf.gguf" --preset Q5_K_S
$mw plan "$m" --ctx 512 > "$out/plan.txt"
$mw plan "$m" --ctx 512 --json > "$out/plan.json" 2>/dev/null || true
$mw inspect "$out/q4km.gguf" > "$out/inspect.txt"
$mw inspect --json "$out/q4km.gguf" > "$out/inspect.json" 2>/dev/null || true
$mw verify --deep "$out/q4km.gguf" > "$out/verify.txt"
$bin/memwall-run -m "$out/q4km-im.gguf" -p "It was a dark and stormy night, and" -n 32 --temp 0 -t 2 > "$out/run.txt" 2>/dev/null
$bin/memwall-run -m "$out/q4km.gguf" --perplexity "$src/datasets/corpora/eval.txt" -c 128 --chunks 4 -t 2 2>/dev/null | grep -v '^seconds' > "$out/ppl.txt" || true
sha256sum $(ls | sort)
