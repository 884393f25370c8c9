#!/usr/bin/env bash
# memwall quant --corpus/--method end to end on tinyllama-8m (a 30 KB slice of
# calib.txt, to stay fast): every method writes a file `memwall verify --deep`
# accepts and whose memwall.quant.method names the method; no scratch
# (spill) file is left; --max-memory too small for the method is exit 3
# before anything is written; a bad --method is a usage error (exit 2). With "peer": llama.cpp
# (tests/peer llama-peer) loads the gptq and awq+gptq files and scores them.
set -u
SKIP=77
T=${MW_TMP:?}; mkdir -p "$T"
mw="$MW_EMU $MW_BIN/memwall"
f16=$MW_DATASETS/reference/tinyllama-8m.llamacpp-f16.gguf
[ -f "$f16" ] || { echo "SKIP: no $f16"; exit $SKIP; }
head -c 30000 "$MW_DATASETS/corpora/calib.txt" > "$T/calib30k.txt"
bad=0
fail() { echo "FAIL: $*"; bad=1; }
$mw quant "$f16" -o "$T/x.gguf" --preset Q4_K_M --corpus "$T/calib30k.txt" --method nope -q \
    > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "bad --method: exit $rc, expected 2"
$mw quant "$f16" -o "$T/mm.gguf" --preset Q4_K_M --corpus "$T/calib30k.txt" --max-memory 1M -q \
    > /dev/null 2>&1; rc=$?
[ $rc -eq 3 ] || fail "--max-memory 1M: exit $rc, expected 3"
[ -e "$T/mm.gguf" ] && fail "--max-memory 1M left an output"
methods="rtn gptq awq awq+gptq gptq-act"
[ "${1:-}" = peer ] && methods="gptq awq+gptq"
for m in $methods; do
  $mw quant "$f16" -o "$T/$m.gguf" --preset Q4_K_M --corpus "$T/calib30k.txt" --method "$m" -q -t 4 \
      || { fail "quant --method $m"; continue; }
  $mw verify --deep "$T/$m.gguf" > "$T/verify-$m.txt" 2>&1 || { cat "$T/verify-$m.txt"; fail "verify --deep ($m)"; }
  case $m in rtn) want=rtn+imatrix ;; gptq-act) want=gptq ;; *) want=$m ;; esac
  $mw inspect "$T/$m.gguf" 2>&1 | grep -q "memwall.quant.method  *string  *\"$want\"" \
      || fail "$m: memwall.quant.method is not \"$want\""
done
ls "$T" | grep -q 'tmp\.spill' && fail "a spill file was left in $T"
if [ "${1:-}" = peer ]; then
  peer=$(bash "$MW_SRC/tests/peer/setup.sh" 2> "$T/peer-setup.log"); prc=$?
  [ $prc -eq 77 ] && { echo "SKIP: llama.cpp peer not available"; exit $SKIP; }
  [ $prc -eq 0 ] && [ -x "$peer" ] || { cat "$T/peer-setup.log"; exit 1; }
  for m in $methods; do
    "$peer" ppl "$T/$m.gguf" "$MW_DATASETS/corpora/eval.txt" --ctx 256 --bytes 4000 > "$T/peer-$m.txt" 2>&1 \
        || { cat "$T/peer-$m.txt"; fail "llama.cpp did not load/score the $m file"; }
  done
fi
[ $bad -eq 0 ] && echo PASS
exit $bad
