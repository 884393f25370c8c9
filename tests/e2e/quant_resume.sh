#!/usr/bin/env bash
# memwall quant --corpus --work-dir DIR [--resume] on tinyllama-8m
# (8 layers; 2 samples of 32 tokens, GPTQ: a run takes seconds):
#   - a run with a work dir writes the same bytes as one without;
#   - runs killed with SIGKILL after layer 0, 3 and 6, killed twice, killed
#     in the middle of a layer, killed and then the last journal record torn
#     (truncated by a few bytes, as power loss may leave it) resume where
#     they should and write a file byte-identical to the uninterrupted run's,
#     also with another --threads; --resume on a finished journal writes it
#     again. The kills come from the harness: tests/faults/mw_fault ($1)
#     runs memwall with --progress=json and sends SIGKILL once the event
#     that ends a given stage of a given layer is on memwall's stderr;
#   - --max-memory small enough that the hidden states live in scratch files
#     (the least bound quant names, 8 samples): killed and resumed, the same bytes;
#   - AWQ (awq+gptq): killed and resumed, the same file and the same AWQ
#     log (the tally of folds comes from the journal);
#   - refusals: a work dir of other --samples, --method, --preset or of
#     another model is exit 1 naming the reason; an existing journal without
#     --resume and --resume without --work-dir are exit 2;
#   - a full disk (a small tmpfs, where this user may mount one; else a note)
#     fails with exit 3 and the run resumes once there is room.
FAULT=${1:-}
. "$(dirname "$0")/common.sh"
[ -x "$FAULT" ] || skip "no mw_fault (tests/faults/mw_fault.c) given"
mw="$MW_EMU $MW_BIN/memwall"
f16=$MW_DATASETS/reference/tinyllama-8m.llamacpp-f16.gguf
[ -f "$f16" ] || skip "no $f16"
head -c 30000 "$MW_DATASETS/corpora/calib.txt" > "$T/c.txt"
# Q8_0: GPTQ quantizes column by column with the preset's types, and a
# Q4_K_M run was 3.5 s of CPU against Q8_0's 0.5 (two dozen runs); the
# journal, the kills, the resumes and the byte comparisons are the same code
base=(--preset Q8_0 --corpus "$T/c.txt" --samples 2 --seq-len 32)
q() { $mw quant "$f16" "${base[@]}" --method gptq "$@"; }

# the reference: no work dir
q -o "$T/ref.gguf" -t 2 -q || { echo "FAIL: reference run"; exit 1; }

same() { # FILE WHAT
  if cmp -s "$T/ref.gguf" "$1"; then echo "  $2: identical"; else fail "$2: $1 differs from the reference"; fi
}
# kill_at STAGE:LAYER MEMWALL-ARGS...: memwall under mw_fault with
# --progress=json, its stderr in $T/events; SIGKILL right after it writes
# the event that ends STAGE ("layer", "ffn_in", ...) of LAYER. Returns
# mw_fault's exit status (137: killed).
kill_at() {
  local stage=${1%%:*} layer=${1#*:}; shift
  "$FAULT" --slice-us 50 --at-line "$T/events" \
      "\"stage\":\"$stage\",\"state\":\"end\",\"layer\":$layer," --kill -- \
      $mw "$@" --progress=json > /dev/null 2> "$T/events"
}
# killed STAGE:LAYER [quant args]: a gptq run killed there
killed() {
  local at=$1; shift
  kill_at "$at" quant "$f16" "${base[@]}" --method gptq "$@" -q
  local rc=$?
  [ $rc -eq 137 ] || fail "killed at the end of $at: exit $rc, expected 137 (SIGKILL)"
}
# resumed OUT DIR WANT [args]: --resume must report WANT (a fixed string)
resumed() {
  local out=$1 dir=$2 want=$3; shift 3
  q -o "$out" --work-dir "$dir" --resume "$@" > "$out.log" 2>&1 \
      || { cat "$out.log"; fail "resume of $dir"; return; }
  grep -qF "$want" "$out.log" || { cat "$out.log"; fail "resume of $dir: no '$want'"; }
}
# resumed_at OUT DIR LOW [args]: --resume must start at layer LOW or later.
# The kill lands right after its event, not exactly at it: memwall may go
# on for up to one of mw_fault's slices (50 us; longer on a loaded machine)
# and, in the rare worst case, record another layer before it dies. The
# kill points are chosen so that what follows the event takes far longer
# than a slice (a layer's first stage, or the ffn_down stage), so the
# resume point is LOW in practice; it is reported when it is not.
resumed_at() {
  local out=$1 dir=$2 low=$3 at; shift 3
  resumed "$out" "$dir" "work dir $dir: " "$@"
  at=$(sed -n 's/.*resuming at layer \([0-9]*\) .*/\1/p; s/.*all \([0-9]*\) layers are recorded.*/\1/p' \
       "$out.log" | head -n 1)
  if [ -z "$at" ] || [ "$at" -lt "$low" ]; then
    cat "$out.log"; fail "resume of $dir: at layer '${at}', expected $low or later"
  elif [ "$at" -ne "$low" ]; then
    echo "  note: $dir resumed at layer $at (the kill landed after layer $((low - 1))'s record)"
  fi
}

# an uninterrupted run with a work dir; --resume on it when finished
q -o "$T/wd.gguf" --work-dir "$T/wd" -t 2 -q || fail "run with --work-dir"
same "$T/wd.gguf" "uninterrupted with --work-dir"
for f in journal tensors.bin; do [ -s "$T/wd/$f" ] || fail "work dir: no $f"; done
resumed "$T/wd2.gguf" "$T/wd" "all 8 layers are recorded"
same "$T/wd2.gguf" "--resume on a finished journal"
q -o "$T/x.gguf" --work-dir "$T/wd" -q > "$T/norsm.log" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q -- "--resume" "$T/norsm.log" \
    || { cat "$T/norsm.log"; fail "an existing journal without --resume: exit $rc, expected 2"; }

# SIGKILL after layer k, then --resume (another thread count)
for k in 0 3 6; do
  killed "layer:$k" -o "$T/k$k.gguf" --work-dir "$T/k$k" -t 2
  [ -e "$T/k$k.gguf" ] && fail "killed after layer $k: an output exists"
  resumed_at "$T/k$k.gguf" "$T/k$k" $((k + 1)) -t 1
  same "$T/k$k.gguf" "killed after layer $k, resumed"
done
# killed twice: after layer 1, then the resumed run after layer 4
killed layer:1 -o "$T/kk.gguf" --work-dir "$T/kk" -t 2
killed layer:4 -o "$T/kk.gguf" --work-dir "$T/kk" --resume
resumed_at "$T/kk.gguf" "$T/kk" 5
same "$T/kk.gguf" "killed twice, resumed"
# killed inside layer 4 (its tensors up to ffn_in's written, no record yet):
# right after ffn_in ends, in the ffn_down stage (the end of ffn_down is
# followed by the layer's record within milliseconds: too close to kill
# before it reliably)
killed ffn_in:4 -o "$T/mid.gguf" --work-dir "$T/mid" -t 2
resumed_at "$T/mid.gguf" "$T/mid" 4
same "$T/mid.gguf" "killed inside layer 4, resumed"
# killed after layer 5, the last record (layer 5's) torn
killed layer:5 -o "$T/torn.gguf" --work-dir "$T/torn" -t 2
truncate -s -5 "$T/torn/journal"
resumed_at "$T/torn.gguf" "$T/torn" 5
grep -q "after the last complete record dropped" "$T/torn.gguf.log" \
    || fail "torn record: no notice of the dropped bytes"
same "$T/torn.gguf" "killed after layer 5, last record torn, resumed"

# refusals (the work dir of a run killed after layer 2)
killed layer:2 -o "$T/r.gguf" --work-dir "$T/r" -t 2
refused() { # WANT-EXIT WANT-TEXT [quant args]
  local code=$1 text=$2; shift 2
  $mw quant "$@" -o "$T/r.gguf" --work-dir "$T/r" --resume -q > "$T/refused.log" 2>&1
  local rc=$?
  if [ $rc -ne "$code" ] || ! grep -qF -- "$text" "$T/refused.log"; then
    cat "$T/refused.log"; fail "expected exit $code naming '$text', got $rc"
  else
    echo "  refused (exit $rc): $(tail -n 1 "$T/refused.log")"
  fi
}
refused 1 "other calibration samples" "$f16" --preset Q8_0 --corpus "$T/c.txt" --samples 3 \
    --seq-len 32 --method gptq
refused 1 "--method gptq (this run: --method rtn)" "$f16" "${base[@]}" --method rtn
refused 1 "other per-tensor types" "$f16" --preset Q5_K_M --corpus "$T/c.txt" --samples 2 \
    --seq-len 32 --method gptq
# another model: the same file with general.name changed ("Tinyllama 8m" -> "Sinyllama 8m")
cp "$f16" "$T/other.gguf"
off=$(grep -obUa "Tinyllama 8m" "$T/other.gguf" | head -n 1 | cut -d: -f1)
if [ -n "$off" ]; then
  printf 'S' | dd of="$T/other.gguf" bs=1 seek="$off" conv=notrunc status=none
  refused 1 "belongs to another model" "$T/other.gguf" "${base[@]}" --method gptq
else
  fail "general.name not found in $f16"
fi
[ -e "$T/r.gguf" ] && fail "a refused resume wrote an output"
resumed_at "$T/r.gguf" "$T/r" 3
same "$T/r.gguf" "after the refusals, resumed"
$mw quant "$f16" "${base[@]}" -o "$T/x.gguf" --resume -q > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--resume without --work-dir: exit $rc, expected 2"
$mw quant "$f16" --preset Q4_K_M -o "$T/x.gguf" --work-dir "$T/y" -q > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--work-dir without --corpus: exit $rc, expected 2"

# --max-memory small enough that calibration keeps the hidden states in
# scratch files (in the work dir; calib_layer_hidden hands them out in
# batches): killed after layer 2 and resumed, the same bytes as uninterrupted.
# The bound is the least one quant names when refusing a smaller one (lean,
# one sample per batch at it): a fixed 7M fell below GPTQ's own buffers
# (~155 MB) and left the case unrun with a note
lean=(--preset Q8_0 --corpus "$T/c.txt" --samples 8 --seq-len 64 --method gptq)
$mw quant "$f16" "${lean[@]}" --max-memory 1M -o "$T/lean-ref.gguf" -q > "$T/lean.log" 2>&1
least=$(sed -n 's/.* needs at least \([0-9]*\) bytes.*/\1/p' "$T/lean.log" | head -n 1)
[ -n "$least" ] || { cat "$T/lean.log"; fail "--max-memory 1M: no least bound named"; least=1M; }
lean+=(--max-memory "$least")
if $mw quant "$f16" "${lean[@]}" -o "$T/lean-ref.gguf" -t 2 > "$T/lean.log" 2>&1 &&
   grep -q "lean: hidden states" "$T/lean.log"; then
  kill_at layer:2 quant "$f16" "${lean[@]}" -o "$T/lean.gguf" --work-dir "$T/lean" -t 2 -q
  rc=$?; [ $rc -eq 137 ] || fail "--max-memory kill: exit $rc, expected 137"
  # (-t 2 as killed: under a bound the threads' buffers set the samples per
  # batch, which the journal records and a resume must keep)
  $mw quant "$f16" "${lean[@]}" -o "$T/lean.gguf" --work-dir "$T/lean" --resume -t 2 -q \
      || fail "--max-memory resume"
  if cmp -s "$T/lean-ref.gguf" "$T/lean.gguf"; then echo "  --max-memory $least (lean) killed after layer 2, resumed: identical"
  else fail "--max-memory $least: the resumed file differs"; fi
else
  cat "$T/lean.log"; fail "--max-memory $least: no lean run (hidden states in scratch files)"
fi

# AWQ: the fold tally is journaled (the same log after a resume). Q8_0: AWQ's
# scale search quantizes each candidate with the preset's types, and Q4_K_M's
# made these three runs 6x the CPU (17 s each); the journal, the resume and
# the tally (8, 6 of 8 with 2 without gain, 8, 8 folds) are the same code
awqbase=(--preset Q8_0 "${base[@]:2}")
qa() { $mw quant "$f16" "${awqbase[@]}" --method awq+gptq "$@"; }
qa -o "$T/awq-ref.gguf" -t 2 > "$T/awq-ref.log" 2>&1 || fail "awq reference run"
kill_at layer:3 quant "$f16" "${awqbase[@]}" --method awq+gptq -o "$T/awq.gguf" --work-dir "$T/awq" -t 2
rc=$?; [ $rc -eq 137 ] || fail "awq kill: exit $rc, expected 137"
qa -o "$T/awq.gguf" --work-dir "$T/awq" --resume -t 2 > "$T/awq.log" 2>&1 || fail "awq resume"
if cmp -s "$T/awq-ref.gguf" "$T/awq.gguf"; then echo "  awq+gptq killed after layer 3, resumed: identical"
else fail "awq+gptq: the resumed file differs"; fi
grep "^memwall quant: awq:" "$T/awq-ref.log" > "$T/awq-ref.tally"
grep "^memwall quant: awq:" "$T/awq.log" > "$T/awq.tally"
[ -s "$T/awq-ref.tally" ] && cmp -s "$T/awq-ref.tally" "$T/awq.tally" \
    || { diff "$T/awq-ref.tally" "$T/awq.tally"; fail "awq: the resumed run's fold log differs"; }

# a full disk: the work dir on a tmpfs too small for it, then room again
mkdir -p "$T/full"
if mount -t tmpfs -o size=1200k tmpfs "$T/full" 2> /dev/null; then
  trap 'umount "$T/full" 2> /dev/null' EXIT
  q -o "$T/full.gguf" --work-dir "$T/full/wd" -t 2 -q > "$T/full.log" 2>&1; rc=$?
  if [ $rc -eq 3 ] && grep -q "No space left" "$T/full.log"; then
    echo "  full disk: exit 3 ($(tail -n 1 "$T/full.log"))"
  else
    cat "$T/full.log"; fail "full disk: exit $rc, expected 3 with 'No space left'"
  fi
  mount -o remount,size=16m "$T/full" || fail "remount"
  resumed "$T/full.gguf" "$T/full/wd" "resuming at layer"
  same "$T/full.gguf" "full disk, then room, resumed"
  umount "$T/full" && trap - EXIT
else
  echo "  note: full-disk case not run (this user cannot mount a tmpfs)"
fi
finish
