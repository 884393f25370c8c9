#!/usr/bin/env bash
# memwall quant --corpus/--method end to end on tinyllama-8m (a 30 KB slice of
# calib.txt, to stay fast): every method writes a file `memwall verify --deep`
# accepts and whose memwall.quant.method names the method; no scratch
# (spill) file is left; --max-memory too small for the method is exit 3
# before anything is written; a bad --method is a usage error (exit 2); the
# GPTQ methods quantize output.weight on the final hidden states (the log
# says so); the learned-rounding methods report the error they removed and
# record round=cd16 fallback=0 in memwall.quant.method_params. With "peer":
# llama.cpp (tests/peer llama-peer) loads the gptq and awq+gptq+round
# files and a --size (mixed precision) file, and its
# perplexity equals memwall's within 0.5 %.
#   quant_methods_cli.sh [peer [CLI_SCRATCH_DIR]]: peer takes the gptq and
#   awq+gptq+round files of the CLI run from that dir when they are there
#   (made and judged by it: CTest runs it first), else makes them itself.
# The model is tinyllama-8m cut to its first 2 layers (tests/lib/mwgguf.py
# cut-layers: every kind of tensor, layer 1 calibrated on layer 0's quantized
# output, the output matrix on the final hidden states): every check is per
# method and per tensor kind, and the 8 layers were four times the CPU of each
# method (awq+gptq+round: 32 s -> 9 s). The corpus keeps the default sample
# count (what the 30 KB slice gives).
. "$(dirname "$0")/common.sh"
rm -f "$T"/*.gguf "$T"/log-*.txt # a previous run's files are never taken for this run's
mw="$MW_EMU $MW_BIN/memwall"
f16=$MW_DATASETS/reference/tinyllama-8m.llamacpp-f16.gguf
[ -f "$f16" ] || { skip "no $f16"; }
have_python || skip "no python3 (tests/lib/mwgguf.py cut-layers)"
mwgguf cut-layers "$f16" "$T/l2.gguf" 2 || { fail "mwgguf cut-layers"; finish; }
f16=$T/l2.gguf
head -c 30000 "$MW_DATASETS/corpora/calib.txt" > "$T/calib30k.txt"
$mw quant "$f16" -o "$T/x.gguf" --preset Q4_K_M --corpus "$T/calib30k.txt" --method nope -q \
    > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "bad --method: exit $rc, expected 2"
$mw quant "$f16" -o "$T/mm.gguf" --preset Q4_K_M --corpus "$T/calib30k.txt" --max-memory 1M -q \
    > /dev/null 2>&1; rc=$?
[ $rc -eq 3 ] || fail "--max-memory 1M: exit $rc, expected 3"
[ -e "$T/mm.gguf" ] && fail "--max-memory 1M left an output"
methods="rtn gptq awq awq+gptq gptq-act round awq+gptq+round"
[ "${1:-}" = peer ] && methods="gptq awq+gptq+round"
# peer with the CLI run's scratch dir (CTest fixture quant_methods_files): its
# gptq and awq+gptq+round files, already judged there, are the ones scored
# here (the same command on the same input: re-making them was half this test)
from=${2:-}
for m in $methods; do
  if [ "${1:-}" = peer ] && [ -n "$from" ] && [ -s "$from/$m.gguf" ] && [ -s "$from/log-$m.txt" ]; then
    cp "$from/$m.gguf" "$T/$m.gguf" && echo "  $m: the file of $(basename "$from")" && continue
  fi
  $mw quant "$f16" -o "$T/$m.gguf" --preset Q4_K_M --corpus "$T/calib30k.txt" --method "$m" -t 4 \
      > "$T/log-$m.txt" 2>&1 || { cat "$T/log-$m.txt"; fail "quant --method $m"; continue; }
  case $m in
    *gptq*) grep -q "output: GPTQ.* on the final hidden states" "$T/log-$m.txt" ||
              fail "$m: output.weight was not quantized with GPTQ" ;;
    *) grep -q "output: GPTQ" "$T/log-$m.txt" && fail "$m: GPTQ on output.weight without GPTQ" ;;
  esac
  case $m in
    *round)
      grep -Eq "round: learned rounding on [1-9][0-9]* tensors: [1-9][0-9]* levels moved.*% lower" \
          "$T/log-$m.txt" || fail "$m: no learned-rounding summary"
      $mw inspect "$T/$m.gguf" 2>&1 | grep -q 'memwall.quant.method_params .*round=cd16 fallback=0' \
          || fail "$m: method_params without round=cd16 fallback=0" ;;
  esac
  $mw verify --deep "$T/$m.gguf" > "$T/verify-$m.txt" 2>&1 || { cat "$T/verify-$m.txt"; fail "verify --deep ($m)"; }
  case $m in rtn) want=rtn+imatrix ;; gptq-act) want=gptq ;; *) want=$m ;; esac
  $mw inspect "$T/$m.gguf" 2>&1 | grep -q "memwall.quant.method  *string  *\"$want\"" \
      || fail "$m: memwall.quant.method is not \"$want\""
done
ls "$T" | grep -q 'tmp\.spill' && fail "a spill file was left in $T"
if [ "${1:-}" = peer ]; then
  need_peer
  peer=$PEER
  # a mixed-precision file too (--size with the corpus's own importance;
  # --no-probes: llama.cpp scores the file whatever ranked its types, and the
  # output-KL probes were most of this run's CPU: quant_alloc_cli checks them)
  # (4449728 bytes of the 8-layer file: Q3_K_M's share, the same share here)
  $mw quant "$f16" -o "$T/alloc.gguf" --size $(( $(stat -c %s "$f16") * 4449728 / 16891328 )) --corpus "$T/calib30k.txt" --method gptq --no-probes \
      -q -t 4 || fail "quant --size --corpus"
  head -c 20000 "$MW_DATASETS/corpora/eval.txt" > "$T/ev20k.txt"
  for m in $methods alloc; do
    [ -f "$T/$m.gguf" ] || continue
    "$peer" ppl "$T/$m.gguf" "$T/ev20k.txt" --ctx 256 --chunks 8 > "$T/peer-$m.txt" 2>&1 \
        || { cat "$T/peer-$m.txt"; fail "llama.cpp did not load/score the $m file"; continue; }
    # llama.cpp's perplexity equals our runtime's within 0.5 %
    a=$($mw perplexity "$T/$m.gguf" "$T/ev20k.txt" --ctx 256 --chunks 8 -q 2>&1 |
        awk '$1 == "ppl" { print $2; exit }')
    b=$(awk '$1 == "ppl" { print $2; exit }' "$T/peer-$m.txt")
    if awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 0.005 * b) }'; then
      echo "  $m: ppl memwall $a, llama.cpp $b"
    else
      fail "$m: perplexity memwall '$a' vs llama.cpp '$b': more than 0.5% apart"
    fi
  done
fi
finish
