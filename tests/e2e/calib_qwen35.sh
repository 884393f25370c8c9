#!/usr/bin/env bash
# Calibration and the quantization methods on Qwen3.5's gated delta net:
# qwen35 (dense), qwen35moe (experts + sigmoid-gated shared expert) and
# qwen3next (ssm_ba, V heads not reordered), on the fixtures of
# tests/fixtures/mk_family_fixture.py (8 layers: 6 delta-net, 2 gated
# attention; linear key heads 2, value heads 6).
# Usage: calib_qwen35.sh CHECK_CALIB_FAMILY_BINARY
# Per family:
#  - memwall convert (F32);
#  - check_calib_family KIND HF_DIR F32_GGUF: calib's forward = the runtime's
#    logits (HF dir and GGUF), AWQ folds exact (through the delta net and per
#    expert), imatrix entries per layer kind, the recurrence the same bits for
#    any threads / batch / callbacks;
#  - memwall calib: an imatrix with an entry for every quantized matrix
#    (attn_qkv, attn_gate, ssm_beta, ssm_alpha or ssm_ba, ssm_out, the gated
#    attention's q/k/v/o, the FFN or the experts), which agrees with
#    llama.cpp's (tests/fixtures/llamacpp_ref/<kind>-calib32*.imatrix.gguf,
#    bench/llamacpp_imatrix_qwen35.sh);
#  - quant --corpus --method awq+gptq+round (AWQ, GPTQ and learned rounding on
#    every matrix; qwen35: the same bytes with -t 1 and -t 2) and --size with
#    the corpus: verify --deep, the AWQ log names the delta net's folds and the
#    ones it skips;
#  - with the llama.cpp peer: llama.cpp loads both files, and its perplexity
#    of the awq+gptq+round file equals memwall's within 5 % (see ppl_pair).
# 2 samples of 32 tokens from a slice of calib.txt. Exit 77 when python3 or
# the tokenizer files are missing. MW_FAMILY_KINDS overrides the families.
check=${1:?usage: calib_qwen35.sh CHECK_CALIB_FAMILY}
. "$(dirname "$0")/common.sh"
mw="$MW_EMU $MW_BIN/memwall"
command -v python3 > /dev/null || skip "no python3"
head -c 6000 "$MW_DATASETS/corpora/calib.txt" > "$T/corpus.txt"
head -c 4000 "$MW_DATASETS/corpora/eval.txt" > "$T/eval.txt"
C=(--corpus "$T/corpus.txt" --samples 2 --seq-len 32 -t 2)
peer=
if [ -z "${MW_FAMILY_NO_PEER:-}" ]; then
  peer=$(bash "$MW_SRC/tests/peer/setup.sh" 2> "$T/peer-setup.log" | tail -n 1) || peer=
  [ -x "$peer" ] || { echo "note: no llama.cpp peer: its load/perplexity checks are left out"; peer=; }
fi

# ppl_pair FILE LABEL: llama.cpp loads FILE and its perplexity is memwall's
# within 5 %: on these random 64-wide fixtures (ppl 2e5..3e6) the two
# engines' quantized kernels already differ by 1.0 % on qwen35's plain
# Q4_K_M file and 2.0 % on qwen3next's plain Q4_0 file, no method involved
# (F32: 0.008 %); the runtime's own agreement is run_families_peer's
ppl_pair() {
  local f=$1 l=$2 a b
  a=$($mw perplexity "$f" "$T/eval.txt" --ctx 64 --chunks 2 -t 2 -q 2>&1 |
      awk '$1 == "ppl" { print $2; exit }')
  [ -n "$a" ] || { fail "$l: memwall perplexity"; return; }
  [ -n "$peer" ] || { echo "  $l: ppl memwall $a"; return; }
  "$peer" ppl "$f" "$T/eval.txt" --ctx 64 --chunks 2 > "$T/peer.txt" 2>&1 \
      || { tail -5 "$T/peer.txt"; fail "$l: llama.cpp did not load/score it"; return; }
  b=$(awk '$1 == "ppl" { print $2; exit }' "$T/peer.txt")
  if awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 0.05 * b) }'; then
    echo "  $l: ppl memwall $a, llama.cpp $b"
  else
    fail "$l: perplexity memwall '$a' vs llama.cpp '$b': more than 5% apart"
  fi
}

fetch_tokenizers
for k in ${MW_FAMILY_KINDS:-qwen35 qwen35moe qwen3next}; do
  echo "== $k"
  d=$T/hf-$k
  rm -rf "$d"
  python3 "$MW_SRC/tests/fixtures/mk_family_fixture.py" "$k" "$d" > "$T/mk.log" 2>&1; rc=$?
  [ $rc -eq 77 ] && skip "$k: tokenizer files missing (tests/fixtures/fetch_tokenizers.sh)"
  [ $rc -eq 0 ] || { cat "$T/mk.log"; fail "$k: fixture"; continue; }
  $mw convert "$d" -o "$T/$k-f32.gguf" --type f32 -q || { fail "$k: convert f32"; continue; }
  "$check" "$k" "$d" "$T/$k-f32.gguf" > "$T/check-$k.txt" 2>&1 \
      || { cat "$T/check-$k.txt"; fail "$k: check_calib_family"; }
  grep 'logits differ' "$T/check-$k.txt" | sed 's/^/  /'
  # the imatrix: an entry for every quantized matrix of both layer kinds
  $mw calib "$d" "${C[@]}" -o "$T/$k.imatrix" > "$T/calib.log" 2>&1 \
      || { cat "$T/calib.log"; fail "$k: memwall calib"; continue; }
  mwgguf types "$T/$k.imatrix" > "$T/im-dump.txt" 2>&1 || fail "$k: imatrix unreadable"
  for want in blk.0.attn_qkv.weight.in_sum2 blk.0.attn_gate.weight.in_sum2 \
              blk.0.ssm_out.weight.in_sum2 blk.3.attn_q.weight.in_sum2 \
              blk.3.attn_output.weight.in_sum2 blk.7.attn_k.weight.in_sum2; do
    grep -q "$want" "$T/im-dump.txt" || fail "$k: the imatrix has no $want"
  done
  case $k in
    qwen3next) grep -q 'blk.0.ssm_ba.weight.in_sum2' "$T/im-dump.txt" || fail "$k: no ssm_ba entry" ;;
    *) grep -q 'blk.0.ssm_alpha.weight.in_sum2' "$T/im-dump.txt" || fail "$k: no ssm_alpha entry"
       grep -q 'blk.0.ssm_beta.weight.in_sum2' "$T/im-dump.txt" || fail "$k: no ssm_beta entry" ;;
  esac
  case $k in
    qwen35) grep -q 'blk.0.ffn_down.weight.in_sum2' "$T/im-dump.txt" || fail "$k: no ffn_down entry" ;;
    *) grep -q 'blk.0.ffn_down_exps.weight.in_sum2' "$T/im-dump.txt" || fail "$k: no expert entry"
       grep -q 'blk.0.ffn_up_shexp.weight.in_sum2' "$T/im-dump.txt" || fail "$k: no shared-expert entry" ;;
  esac
  # llama.cpp's own imatrix of the fixture (bench/llamacpp_imatrix_qwen35.sh:
  # llama-imatrix -c 32 over the same corpus slice): the same entries, the same
  # counts per expert (the same routing), and the importance within llama.cpp's
  # F16 KV cache and flash attention's rounding (which the delta-net layers
  # before the first attention layer do not see: 1e-5 there); against the
  # same graph with an F32 cache and no flash attention, within F32 rounding
  # (max of 16,384 values: the MoE fixtures' routers, scaled for routing
  # margins, pass hidden-state differences on to the experts' inputs; seen
  # 6.0e-3 / 3.1e-4 on qwen35moe, 5.5e-3 / 1.5e-4 on qwen3next)
  ref=$MW_SRC/tests/fixtures/llamacpp_ref/$k-calib32
  if [ -f "$ref.imatrix.gguf" ] && [ -f "$ref-kvf32.imatrix.gguf" ]; then
    $mw calib "$d" --corpus "$T/corpus.txt" --samples 2 --seq-len 32 --llamacpp-chunks -t 2 \
        -o "$T/$k-lc.imatrix" -q || fail "$k: memwall calib --llamacpp-chunks"
    cmp_sub=imatrix-cmp; [ "$k" = qwen35 ] || cmp_sub=imatrix-cmp-experts
    r=$(mwgguf $cmp_sub "$T/$k-lc.imatrix" "$ref.imatrix.gguf" --max-rel 8e-3 --mean-rel 2e-4) ||
        fail "$k: vs llama-imatrix: $r"
    echo "  vs llama-imatrix (F16 KV cache): ${r#ok }"
    r=$(mwgguf $cmp_sub "$T/$k-lc.imatrix" "$ref-kvf32.imatrix.gguf" --max-rel 5e-4 --mean-rel 1e-5) ||
        fail "$k: vs llama.cpp's imatrix with an F32 KV cache: $r"
    echo "  vs llama.cpp, F32 KV cache: ${r#ok }"
  else
    fail "$k: no llama.cpp imatrix kept ($ref*.imatrix.gguf: bench/llamacpp_imatrix_qwen35.sh)"
  fi
  # every method step on every matrix: AWQ, GPTQ, learned rounding. Q4_0:
  # the fixtures' 64-wide rows leave Q4_K_M's k-quants to q5_0, which GPTQ
  # does not take; q4_0 / q8_0 it does, on every matrix of both layer kinds
  o=$T/$k-agr.gguf
  if $mw quant "$d" -o "$o" --preset Q4_0 "${C[@]}" --method awq+gptq+round > "$T/q.log" 2>&1; then
    $mw verify --deep "$o" > "$T/verify.txt" 2>&1 || { cat "$T/verify.txt"; fail "$k awq+gptq+round: verify --deep"; }
    echo "  awq+gptq+round: $(grep 'memwall quant: wrote' "$T/q.log" | sed 's/.*gguf (//; s/ in [0-9.]*s$//')"
    for want in 'awq: attn_norm -> q/k/v, attn_qkv/attn_gate/ssm_beta/ssm_alpha: folded in' \
                'awq: v -> attn_output, ssm_norm -> ssm_out:' 'awq: gated delta net: attn_norm feeds' \
                'awq: skipped in the delta net: attn_qkv -> conv' 'round: learned rounding on'; do
      grep -q "$want" "$T/q.log" || fail "$k: the quant log lacks '$want'"
    done
    grep 'memwall quant: awq:' "$T/q.log" | head -4 | sed 's/^memwall quant: /    /'
    grep 'memwall quant: round:' "$T/q.log" | head -1 | sed 's/^memwall quant: /    /'
    # dense: GPTQ then learned rounding on each of the 62 layer matrices (6 delta-net
    # layers x attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_out, gate, up, down;
    # 2 attention layers x q, k, v, o, gate, up, down); the MoE fixtures' experts
    # with fewer routed rows than a quarter of their width are rounded instead
    [ "$k" = qwen35 ] && { grep -q 'round: learned rounding on 62 tensors' "$T/q.log" ||
        fail "$k: learned rounding did not reach all 62 layer matrices"; }
    # the same bytes with one thread (the recurrence, GPTQ and rounding alike)
    if [ "$k" = qwen35 ]; then
      $mw quant "$d" -o "$T/$k-t1.gguf" --preset Q4_0 --corpus "$T/corpus.txt" --samples 2 \
          --seq-len 32 -t 1 --method awq+gptq+round -q 2> /dev/null || fail "$k: quant -t 1"
      cmp -s "$o" "$T/$k-t1.gguf" || fail "$k: awq+gptq+round with -t 1 and -t 2 differ"
    fi
  else
    cat "$T/q.log"; fail "$k: quant --method awq+gptq+round"
  fi
  # --size with the corpus: the allocation over the delta net's tensors too
  if [ -f "$o" ]; then
    # a quarter above the Q4_0 file: the fixtures' 64-wide rows leave few
    # types, and the tied 152k-row token_embd sets the smallest file
    base=$(( $(stat -c %s "$o") * 5 / 4 ))
    if $mw quant "$d" -o "$T/$k-size.gguf" --size "$base" "${C[@]}" --method gptq --no-probes \
        > "$T/size.log" 2>&1; then
      $mw verify --deep "$T/$k-size.gguf" > "$T/verify.txt" 2>&1 || { cat "$T/verify.txt"; fail "$k --size: verify --deep"; }
      got=$(stat -c %s "$T/$k-size.gguf")
      [ "$got" -le "$base" ] || fail "$k: --size $base wrote $got bytes"
      echo "  --size $base: $(grep 'memwall quant: wrote' "$T/size.log" | sed 's/.*gguf (//; s/ in [0-9.]*s$//')"
    else
      cat "$T/size.log"; fail "$k: quant --size $base --corpus"
    fi
  fi
  [ -f "$o" ] && ppl_pair "$o" "$k awq+gptq+round"
  if [ -f "$T/$k-size.gguf" ] && [ -n "$peer" ]; then
    "$peer" info "$T/$k-size.gguf" > "$T/peer.txt" 2>&1 \
        || { tail -5 "$T/peer.txt"; fail "$k --size: llama.cpp did not load it"; }
  fi
  rm -rf "$d" "$T/$k"-*.gguf
done
finish
