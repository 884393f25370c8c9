#!/usr/bin/env bash
# Calibration and every quantization method on the Qwen3 / Gemma 2-3 / Phi-3
# families (qwen3, gemma3, gemma2, phi3; phi3long for LongRoPE in the forward
# check).
# Usage: calib_family.sh CHECK_CALIB_FAMILY_BINARY
# Per family, on the fixture of tests/fixtures/mk_family_fixture.py:
#  - memwall convert (F32 for the forward check, F16 as a GGUF source);
#  - check_calib_family KIND HF_DIR F32_GGUF: calib's forward = the runtime's
#    logits (HF dir and GGUF), AWQ folds exact, fold legality, imatrix entries;
#  - memwall calib (imatrix from the corpus) then quant --imatrix;
#  - quant --corpus with rtn, awq, gptq-act and awq+gptq+round (AWQ, GPTQ,
#    learned rounding, the output matrix: every step of the other methods)
#    from the HF directory, and gptq, awq+gptq-act from the F16 GGUF; quant
#    --size / --bpw with the corpus (the allocation must list the tied
#    token_embd; --bpw reports its output-KL probes, --size runs with
#    --no-probes); every output passes `memwall verify --deep`;
#  - the AWQ log says what it folded and skipped, with the family's reasons;
#  - memwall plan prints the family's KV layout, the same from the HF dir and
#    the GGUF (gemma: sliding layers keep the window);
#  - with the llama.cpp peer (tests/peer/setup.sh): llama.cpp loads two
#    outputs per family and its perplexity equals memwall's within 1 %.
# A short slice of calib.txt, 4 samples of 48 tokens: the whole test runs in
# about a minute on 2 cores. Exit 77 when python3 or the tokenizer files are
# missing. MW_FAMILY_KINDS overrides the list of families.
check=${1:?usage: calib_family.sh CHECK_CALIB_FAMILY}
. "$(dirname "$0")/common.sh"
mw="$MW_EMU $MW_BIN/memwall"
command -v python3 > /dev/null || skip "no python3"
head -c 12000 "$MW_DATASETS/corpora/calib.txt" > "$T/corpus.txt"
head -c 6000 "$MW_DATASETS/corpora/eval.txt" > "$T/eval.txt"
C=(--corpus "$T/corpus.txt" --samples 4 --seq-len 48 -t 2)
CB=(--corpus "$T/corpus.txt" --samples 1 --seq-len 64 -t 2) # the probed --bpw run (below)
peer=
if [ -z "${MW_FAMILY_NO_PEER:-}" ]; then
  peer=$(bash "$MW_SRC/tests/peer/setup.sh" 2> "$T/peer-setup.log") || peer=
  [ -x "$peer" ] || { echo "note: no llama.cpp peer: its load/perplexity checks are left out"; peer=; }
fi

# ppl_pair FILE LABEL: memwall's and llama.cpp's perplexity of FILE agree
ppl_pair() {
  local f=$1 l=$2 a b
  a=$($mw perplexity "$f" "$T/eval.txt" --ctx 64 --chunks 2 -t 2 -q 2>&1 |
      awk '$1 == "ppl" { print $2; exit }')
  [ -n "$peer" ] || { echo "  $l: ppl memwall $a"; return; }
  "$peer" ppl "$f" "$T/eval.txt" --ctx 64 --chunks 2 > "$T/peer.txt" 2>&1 \
      || { tail -5 "$T/peer.txt"; fail "$l: llama.cpp did not load/score it"; return; }
  b=$(awk '$1 == "ppl" { print $2; exit }' "$T/peer.txt")
  # 1 %: the fixtures' random weights give near-uniform logits (ppl 5e4..3e6),
  # where the quantized kernels' rounding moves ppl more than on a trained
  # model (F16: 0.06 %; the runtime's own 0.3 % check is run_peer's)
  if awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 0.01 * b) }'; then
    echo "  $l: ppl memwall $a, llama.cpp $b"
  else
    fail "$l: perplexity memwall '$a' vs llama.cpp '$b': more than 1% apart"
  fi
}

# out_ok FILE LABEL: verify --deep accepts it; prints size and bpw
out_ok() {
  local f=$1 l=$2
  $mw verify --deep "$f" > "$T/verify.txt" 2>&1 || { cat "$T/verify.txt"; fail "$l: verify --deep"; return 1; }
  return 0
}

fetch_tokenizers
methods="rtn awq gptq-act awq+gptq+round"
for k in ${MW_FAMILY_KINDS:-qwen3 gemma3 gemma2 phi3 phi3long}; do
  d=$T/hf-$k
  rm -rf "$d"
  python3 "$MW_SRC/tests/fixtures/mk_family_fixture.py" "$k" "$d" > "$T/mk.log" 2>&1; rc=$?
  [ $rc -eq 77 ] && skip "$k: tokenizer files missing (tests/fixtures/fetch_tokenizers.sh)"
  [ $rc -eq 0 ] || { cat "$T/mk.log"; fail "$k: fixture"; continue; }
  $mw convert "$d" -o "$T/$k-f32.gguf" --type f32 -q || { fail "$k: convert f32"; continue; }
  "$check" "$k" "$d" "$T/$k-f32.gguf" > "$T/check-$k.txt" 2>&1 \
      || { cat "$T/check-$k.txt"; fail "$k: check_calib_family"; }
  rm -f "$T/$k-f32.gguf"
  [ "$k" = phi3long ] && { rm -rf "$d"; continue; } # the forward check is its point
  $mw convert "$d" -o "$T/$k-f16.gguf" -q || { fail "$k: convert f16"; continue; }
  echo "== $k"
  # plan: the same KV layout and bytes from the HF dir and the GGUF; gemma's
  # sliding layers keep their window only
  $mw plan "$d" --ctx 4096 > "$T/plan-hf.txt" 2>&1 || { cat "$T/plan-hf.txt"; fail "$k: plan (HF)"; }
  $mw plan "$T/$k-f16.gguf" --ctx 4096 > "$T/plan-gguf.txt" 2>&1 || fail "$k: plan (GGUF)"
  pl() { grep -E '^  layout|^runtime at|^ +4096 ' "$1"; }
  [ "$(pl "$T/plan-hf.txt")" = "$(pl "$T/plan-gguf.txt")" ] || fail "$k: plan differs between HF dir and GGUF"
  grep -q "^  layout ($k)" "$T/plan-hf.txt" || fail "$k: plan prints no KV layout"
  case $k in
    gemma*) grep -q 'sliding layer.* (window 16) keep' "$T/plan-hf.txt" || fail "$k: plan: no sliding layers" ;;
  esac
  grep '^  layout' "$T/plan-hf.txt"; grep '^runtime at' "$T/plan-hf.txt" | sed 's/^/  /'
  # imatrix from the corpus, then quant with it
  $mw calib "$d" "${C[@]}" -o "$T/$k.imatrix" > "$T/calib.log" 2>&1 \
      || { cat "$T/calib.log"; fail "$k: memwall calib"; }
  if $mw quant "$d" -o "$T/$k-im.gguf" --preset Q4_K_M --imatrix "$T/$k.imatrix" -q 2> "$T/im.log"; then
    out_ok "$T/$k-im.gguf" "$k imatrix" && echo "  imatrix: $(stat -c %s "$T/$k-im.gguf") bytes"
  else
    fail "$k: quant --imatrix"
  fi
  for src in hf gguf; do
    s=$d; [ $src = gguf ] && s=$T/$k-f16.gguf
    ms=$methods
    [ $src = gguf ] && ms="gptq awq+gptq-act" # with the HF runs: every step of every method
    for m in $ms; do
      o=$T/$k-$src-$m.gguf
      if ! $mw quant "$s" -o "$o" --preset Q4_K_M "${C[@]}" --method "$m" > "$T/q.log" 2>&1; then
        cat "$T/q.log"; fail "$k ($src): quant --method $m"; continue
      fi
      out_ok "$o" "$k ($src) $m" || continue
      line=$(grep 'memwall quant: wrote' "$T/q.log" | sed 's/.*gguf (//; s/ in [0-9.]*s$//')
      echo "  $src $m: $line"
      case $m in
        awq*)
          grep -q 'awq: attn_norm -> q/k/v: folded in' "$T/q.log" || fail "$k: no AWQ fold report"
          for want in 'awq: v -> attn_output:' 'awq: ffn_norm -> gate/up:' 'awq: up -> ffn_down:'; do
            grep -q "$want" "$T/q.log" || fail "$k ($m): the AWQ log lacks '$want'"
          done
          case $k in
            gemma*) grep -q 'post_attention_norm and post_ffw_norm are skipped' "$T/q.log" \
                        || fail "$k: AWQ does not say it skips the sandwich norms"
                    grep -q "(1 + w) norms are folded in their GGUF form" "$T/q.log" \
                        || fail "$k: AWQ does not say how it folds the (1 + w) norms" ;;
          esac
          case $k in
            qwen3|gemma3) grep -q 'per-head q/k RMSNorm' "$T/q.log" || fail "$k: AWQ q/k norm note" ;;
            phi3) grep -q 'fused attn_qkv' "$T/q.log" || fail "$k: AWQ fused qkv note" ;;
          esac
          [ $src = hf ] && [ $m = awq ] && grep 'memwall quant: awq:' "$T/q.log" | sed 's/^memwall quant: /    /' ;;
      esac
    done
  done
  ls "$T" | grep -q 'tmp\.spill' && fail "$k: a spill file was left in $T"
  # budgets: --bpw from the GGUF (GPTQ), then --size from the HF dir (AWQ+GPTQ)
  # at what that file took plus 64 KiB (the fixtures' rows of 64/128 leave
  # the allocation Q8_0 and F16 only); the allocation must weigh the tied /
  # large embedding (token_embd listed). The output-KL probes (one forward
  # pass per tensor through the family's 150k-262k vocabulary: 80 % of this
  # test's time when both runs probed) run in the --bpw run, which must report
  # them; the --size run allocates from the same losses unprobed (the same
  # family forward from the HF dir is check_calib_family's). The --bpw run
  # calibrates on one sample of 64 tokens: a probe's cost is its positions
  # times the 150k-262k vocabulary (gemma3: 43 probes, 16.5 s of CPU at 64
  # positions, ~40 s at the 4 x 48 of the other runs), and what is checked
  # is that the probes run and weigh the allocation, not their figures
  $mw quant "$T/$k-f16.gguf" -o "$T/$k-bpw.gguf" --bpw 9 --no-iquants "${CB[@]}" --method gptq > "$T/bpw.log" 2>&1 \
      || { cat "$T/bpw.log"; fail "$k: quant --bpw 9 from the GGUF"; }
  [ -f "$T/$k-bpw.gguf" ] && out_ok "$T/$k-bpw.gguf" "$k --bpw" &&
      echo "  --bpw 9: $(grep 'memwall quant: wrote' "$T/bpw.log" | sed 's/.*gguf (//; s/ in [0-9.]*s$//')"
  grep -q '^  token_embd.weight ' "$T/bpw.log" || fail "$k: the --bpw allocation does not list token_embd.weight"
  grep -q 'losses scaled to the output KL divergence of [1-9][0-9]* probes' "$T/bpw.log" ||
      fail "$k: the --bpw allocation reports no output-KL probes"
  base=$(stat -c %s "$T/$k-bpw.gguf" 2>/dev/null || echo 0)
  if [ "$base" -gt 0 ]; then
    base=$((base + 65536))
    $mw quant "$d" -o "$T/$k-size.gguf" --size "$base" "${C[@]}" --method awq+gptq --no-probes > "$T/size.log" 2>&1 \
        || { cat "$T/size.log"; fail "$k: quant --size $base"; }
    if [ -f "$T/$k-size.gguf" ]; then
      out_ok "$T/$k-size.gguf" "$k --size"
      got=$(stat -c %s "$T/$k-size.gguf")
      [ "$got" -le "$base" ] || fail "$k: --size $base wrote $got bytes"
      grep -q '^  token_embd.weight ' "$T/size.log" || fail "$k: the --size allocation does not list token_embd.weight"
      grep -q 'probe' "$T/size.log" && fail "$k: --size --no-probes still probed"
      echo "  --size $base: $(grep 'memwall quant: wrote' "$T/size.log" | sed 's/.*gguf (//; s/ in [0-9.]*s$//')"
    fi
  fi
  # llama.cpp loads what we wrote and scores it as we do
  ppl_pair "$T/$k-hf-awq+gptq+round.gguf" "$k awq+gptq+round (HF)"
  [ -f "$T/$k-size.gguf" ] && ppl_pair "$T/$k-size.gguf" "$k --size"
  rm -rf "$d" "$T/$k"-*.gguf
done
finish
