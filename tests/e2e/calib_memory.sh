#!/usr/bin/env bash
# memwall calib --max-memory on tinyllama-8m:
#  - a bound that forces fewer samples per batch gives a byte-identical
#    imatrix (the statistics do not depend on the batch) and a lower peak RSS;
#  - a tighter bound moves the hidden states to a scratch file in $TMPDIR
#    (removed; same bytes; lower peak RSS still); a missing $TMPDIR is exit 3;
#  - a bound below that fails with exit 3 and a message with the bytes
#    needed, the bound and what to change, BEFORE the large allocations;
#  - a malformed size is a usage error;
#  - quant --corpus awq+gptq at its least bound runs lean with the same bytes
#    (release builds);
#  - without --max-memory the bound is the memory available minus the margin
#    of core/mw_mem.h (MW_MEMAVAILABLE stands in for the machine's figure),
#    said in the log; --max-memory none or 0 lifts it; a bad MW_MEMAVAILABLE
#    is exit 2; a default too small is exit 3 naming the bytes, the flag and
#    where the bound came from; under a default that forces the scratch file
#    the peak RSS of 8 and 20 samples x 511 is the same within 15% (the
#    unbounded 20 is not) and the imatrix the unbounded run's; quant --corpus
#    at a default equal to its least bound writes the unbounded bytes.
# Peak RSS is ru_maxrss of the command (/usr/bin/time -f %M when present,
# else the "peak RSS" memwall calib prints itself). The RSS comparisons run
# in release builds only ("quick": sanitizer builds, smaller run, sizes and
# bytes only).
. "$(dirname "$0")/calib_common.sh"
[ -d "$TINY" ] || { skip "no $TINY"; }
quick=${1:-}
if [ "$quick" = quick ]; then sz=(--samples 6 --seq-len 64); bound=8M; npos=65
else sz=(--samples 16 --seq-len 256); bound=24M; npos=257; fi

# peak RSS in KiB of memwall calib ARGS..., exit status in $rc, stderr in $err
rss_run() {
    if [ -x /usr/bin/time ] && [ -z "$MW_EMU" ]; then
        /usr/bin/time -f "MAXRSS %M" -o "$T/time" "$MEMWALL" calib "$@" > "$T/out" 2> "$T/err"
        rc=$?
        rss=$(sed -n 's/^MAXRSS //p' "$T/time")
    else
        $MW_EMU "$MEMWALL" calib "$@" > "$T/out" 2> "$T/err"
        rc=$?
        rss=$(sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' "$T/err" | awk '{printf "%d", $1 * 1024}')
    fi
    err=$(cat "$T/err")
}

# usage
run 2 calib "$TINY" --corpus "$CALIB" -o "$T/x.imatrix" --max-memory 12Q &&
    has "$err" "--max-memory: expected a size" "bad size"
run 2 calib "$TINY" --corpus "$CALIB" -o "$T/x.imatrix" --max-memory nothing &&
    has "$err" "--max-memory: expected a size such as 512M or 2G, or none" "bad size"
# the default bound: from the machine (MemAvailable or a cgroup limit), said
# in the log; 0 and none: no bound; MW_MEMAVAILABLE must be a size
tiny=(--samples 2 --seq-len 16)
run 0 calib "$TINY" --corpus "$CALIB" -o "$T/x.imatrix" "${tiny[@]}" &&
    [[ $err =~ "memwall calib: memory bound "[0-9.]+" MiB: "[0-9.]+" MiB available ("(MemAvailable in|memory\.)|"memwall calib: no memory bound" ]] ||
    fail "the default bound is not in the log: $err"
for none in 0 none; do
    MW_MEMAVAILABLE=1K run 0 calib "$TINY" --corpus "$CALIB" -o "$T/x.imatrix" "${tiny[@]}" \
        --max-memory $none && [[ $err != *"memory bound"* && $err != *"--max-memory"* ]] ||
        fail "--max-memory $none still bounds the run: $err"
done
MW_MEMAVAILABLE=lots run 2 calib "$TINY" --corpus "$CALIB" -o "$T/x.imatrix" "${tiny[@]}" &&
    has "$err" "MW_MEMAVAILABLE='lots': expected a size such as 400M or 8G [E_USAGE]" "bad env"
MW_MEMAVAILABLE=65M run 3 calib "$TINY" --corpus "$CALIB" -o "$T/def.imatrix" "${tiny[@]}" &&
    has "$err" "memwall calib: memory bound 1.0 MiB: 65.0 MiB available (MW_MEMAVAILABLE) minus a margin of 64.0 MiB" "env bound" &&
    has "$err" "above --max-memory 1048576 bytes: use fewer --samples or a shorter --seq-len, or raise --max-memory" "env: too small" &&
    has "$err" "that bound is the default: 65.0 MiB available (MW_MEMAVAILABLE) minus a margin of 64.0 MiB; raise it with --max-memory SIZE" "env: where from"
[ -e "$T/def.imatrix" ] && fail "output written although the default bound failed"

# unbounded reference, then a bound that forces smaller batches
rss_run "$TINY" --corpus "$CALIB" -o "$T/full.imatrix" "${sz[@]}" --max-memory none
[ "$rc" -eq 0 ] || fail "unbounded run: exit $rc: $err"
rss_full=${rss:-0}
rss_run "$TINY" --corpus "$CALIB" -o "$T/bound.imatrix" "${sz[@]}" --max-memory $bound
[ "$rc" -eq 0 ] || fail "--max-memory $bound: exit $rc: $err"
rss_bound=${rss:-0}
has "$err" "--max-memory" "adapted run says so"
has "$err" "samples per batch)" "adapted run names the batch"
cmp -s "$T/full.imatrix" "$T/bound.imatrix" ||
    fail "--max-memory $bound changed the imatrix (smaller batches must give the same bytes)"
echo "  peak RSS: unbounded ${rss_full} KiB, --max-memory $bound ${rss_bound} KiB"
echo "  $(grep -o 'need about.*' <<< "$err")"
if [ "$quick" != quick ]; then
    [ "$rss_bound" -gt 0 ] && [ "$rss_bound" -lt "$rss_full" ] ||
        fail "--max-memory $bound did not lower the peak RSS ($rss_bound vs $rss_full KiB)"
fi

# the least plan: hidden states in a scratch file, one sample per batch. A
# bound of 1 KiB reports its size; exactly that runs (same bytes), one byte
# less fails with exit 3 and the message, before the large allocations.
rss_run "$TINY" --corpus "$CALIB" -o "$T/small.imatrix" "${sz[@]}" --max-memory 1K
[ "$rc" -eq 3 ] || fail "--max-memory 1K: exit $rc, want 3: $err"
has "$err" "memwall calib: $TINY: calibration needs at least " "too small"
has "$err" "above --max-memory 1024 bytes" "too small: the bound"
has "$err" "use fewer --samples or a shorter --seq-len, or raise --max-memory [E_NOMEM]" "remedy"
[ -e "$T/small.imatrix" ] && fail "output written although the bound failed"
ls "$T" | grep -q '\.tmp\.' && fail "temp file left behind"
least=$(sed -n 's/.*needs at least \([0-9]*\) bytes.*/\1/p' <<< "$err")
rss_fail=${rss:-0}
echo "  --max-memory 1K: exit 3, needs ${least:-?} bytes, peak RSS ${rss_fail} KiB"
if [ -n "$least" ]; then
    tmpd=$T/tmpdir
    mkdir -p "$tmpd"
    TMPDIR=$tmpd rss_run "$TINY" --corpus "$CALIB" -o "$T/disk.imatrix" "${sz[@]}" --max-memory "$least"
    [ "$rc" -eq 0 ] || fail "--max-memory $least (the least plan): exit $rc: $err"
    has "$err" "1 sample per batch, hidden states in a scratch file" "scratch-file run says so"
    cmp -s "$T/full.imatrix" "$T/disk.imatrix" ||
        fail "hidden states in a scratch file changed the imatrix"
    [ -z "$(ls -A "$tmpd")" ] || fail "scratch file left in \$TMPDIR: $(ls -A "$tmpd")"
    echo "  --max-memory $least: scratch file, peak RSS ${rss:-?} KiB"
    [ "$quick" = quick ] || [ "${rss:-0}" -lt "$rss_bound" ] ||
        fail "the scratch-file run's peak RSS (${rss:-?} KiB) is not below the batched one ($rss_bound KiB)"
    # more threads need more attention scratch (n_pos^2 floats each) but
    # never other batches: -t 3 fails at the least bound naming --threads, and
    # with room for two more score tables gives the same bytes
    rss_run "$TINY" --corpus "$CALIB" -o "$T/t3.imatrix" "${sz[@]}" --max-memory "$least" -t 3
    [ "$rc" -eq 3 ] || fail "-t 3 at the least bound: exit $rc, want 3: $err"
    has "$err" "use fewer --threads" "-t 3 at the least bound"
    rss_run "$TINY" --corpus "$CALIB" -o "$T/t3.imatrix" "${sz[@]}" -t 3 \
        --max-memory $((least + 2 * npos * npos * 4))
    [ "$rc" -eq 0 ] || fail "-t 3 with room for its scores: exit $rc: $err"
    cmp -s "$T/full.imatrix" "$T/t3.imatrix" || fail "-t 3 under the bound changed the imatrix"
    rss_run "$TINY" --corpus "$CALIB" -o "$T/small.imatrix" "${sz[@]}" --max-memory $((least - 1))
    [ "$rc" -eq 3 ] || fail "--max-memory $((least - 1)): exit $rc, want 3: $err"
    has "$err" "needs at least $least bytes" "one byte short"
    # a scratch directory that does not exist: exit 3 naming it (the
    # tokenizer's temp file, made first, already fails; tests/check_calib.c
    # max_memory_scratch_file covers the hidden states' file itself)
    TMPDIR=$T/no/such/dir rss_run "$TINY" --corpus "$CALIB" -o "$T/small.imatrix" "${sz[@]}" \
        --max-memory "$least"
    [ "$rc" -eq 3 ] || fail "TMPDIR missing: exit $rc, want 3: $err"
    has "$err" "$T/no/such/dir/memwall-calib-" "TMPDIR missing: the path"
    [ -e "$T/small.imatrix" ] && fail "output written although the scratch file failed"
fi
# quant --corpus (awq+gptq) under --max-memory: at the least
# bound it names, the lean mode (hidden states, attention outputs and the
# layer's weights in scratch files; one weight and one Hessian in memory)
# writes the same bytes as the unbounded run; a byte less is exit 3 before
# the calibration starts; the scratch files never outlive the run.
if [ "$quick" != quick ]; then # (sanitizer builds: check_calib lean_equals_memory covers the lean mode)
qsz=(--samples 3 --seq-len 48)
# Q8_0: AWQ's scale search quantizes every candidate with the preset's types;
# Q4_K_M made each of the three runs that calibrate ~7.5x the CPU (18.3 s,
# not 2.4). The bound is the method's buffers, the same for every preset (quant
# names 129,390,796 bytes for both here); plan's figure is checked against
# Q4_K_M's refusal (qp) as before
qrun() { # quant ARGS..., exit status in $rc, stderr in $err
    TMPDIR=$T/qtmp $MW_EMU "$MEMWALL" quant "$TINY" -t "${qt:-1}" --preset "${qp:-Q8_0}" --corpus "$CALIB" \
        --method awq+gptq "${qsz[@]}" "$@" > "$T/out" 2> "$T/err"
    rc=$?
    err=$(cat "$T/err")
}
mkdir -p "$T/qtmp"
qt=2 qrun -o "$T/q-full.gguf" -q --max-memory none # (the bounded runs: 1 thread; the bytes do not depend on it)
[ "$rc" -eq 0 ] || fail "quant --corpus: exit $rc: $err"
qrun -o "$T/q-x.gguf" --max-memory 1K
[ "$rc" -eq 3 ] || fail "quant --max-memory 1K: exit $rc, want 3: $err"
has "$err" "--max-memory 1024 bytes is too small: awq+gptq needs at least" "quant: too small"
has "$err" "use fewer --samples or a shorter --seq-len, or raise --max-memory [E_NOMEM]" \
    "quant: the remedy"
qleast=$(sed -n 's/.*needs at least \([0-9]*\) bytes.*/\1/p' <<< "$err")
[ -n "$qleast" ] || fail "quant: no least bytes in: $err"
qrun -o "$T/q-lean.gguf" --max-memory $qleast
[ "$rc" -eq 0 ] || fail "quant --max-memory $qleast (the least plan): exit $rc: $err"
has "$err" "1 samples per batch; lean: hidden states, attention outputs and the layer's weights in scratch files" \
    "quant: the lean run says so"
cmp -s "$T/q-full.gguf" "$T/q-lean.gguf" || fail "quant: the lean mode changed the output"
[ -z "$(ls -A "$T/qtmp")" ] || fail "scratch file left in \$TMPDIR: $(ls -A "$T/qtmp")"
qrun -o "$T/q-x.gguf" --max-memory $((qleast - 1))
[ "$rc" -eq 3 ] || fail "quant one byte short of the least plan: exit $rc, want 3: $err"
has "$err" "needs at least $qleast bytes" "quant: one byte short"
[ -e "$T/q-x.gguf" ] && fail "quant: output written although the bound failed"
echo "  quant awq+gptq: least --max-memory $qleast bytes, lean"
# the default bound: MW_MEMAVAILABLE = the least bound + the 64 MiB margin
# runs lean with the same bytes; a byte less is exit 3 saying where it came from
MW_MEMAVAILABLE=$((qleast + 67108864)) qrun -o "$T/q-def.gguf"
[ "$rc" -eq 0 ] || fail "quant at the default bound $qleast: exit $rc: $err"
has "$err" "memwall quant: memory bound " "quant: the default bound in the log"
has "$err" "--max-memory $qleast bytes: the method's buffers" "quant: the default is the least bound"
cmp -s "$T/q-full.gguf" "$T/q-def.gguf" || fail "quant: the default bound changed the output"
MW_MEMAVAILABLE=$((qleast + 67108863)) qrun -o "$T/q-x.gguf" -q
[ "$rc" -eq 3 ] || fail "quant one byte short of the least default: exit $rc, want 3: $err"
has "$err" "needs at least $qleast bytes" "quant default: one byte short"
has "$err" "that bound is the default: " "quant default: where from"
has "$err" "(MW_MEMAVAILABLE) minus a margin of 64.0 MiB; raise it with --max-memory SIZE" "quant default: the flag"
[ -e "$T/q-x.gguf" ] && fail "quant: output written although the default bound failed"
[ -z "$(ls -A "$T/qtmp")" ] || fail "scratch file left in \$TMPDIR: $(ls -A "$T/qtmp")"
echo "  quant awq+gptq: MW_MEMAVAILABLE $((qleast + 67108864)): lean at the default bound, same bytes"
# plan: what quant --corpus needs at its defaults (128 x 512, every CPU), the
# least as quant itself computes it, and whether the machine's bound holds it
run 0 plan "$TINY" && has "$out" "quant --corpus (awq+gptq+round, 128 samples x 512 positions" "plan: the need"
pleast=$(sed -n 's/^quant --corpus .*, at least \([0-9.]*\) MiB lean.*/\1/p' <<< "$out")
qp=Q4_K_M qt=$(nproc) qrun -o "$T/q-x.gguf" --method awq+gptq+round --samples 128 --seq-len 512 --max-memory 1K
[ "$rc" -eq 3 ] || fail "quant 128 x 512 --max-memory 1K: exit $rc, want 3: $err"
pbytes=$(sed -n 's/.*needs at least \([0-9]*\) bytes.*/\1/p' <<< "$err")
[ -n "$pbytes" ] && [ "$(awk -v b="$pbytes" 'BEGIN { printf "%.1f", b / 1048576 }')" = "$pleast" ] ||
    fail "plan's least ${pleast:-?} MiB is not what quant needs: ${pbytes:-?} bytes"
MW_MEMAVAILABLE=$((pbytes + 67108864)) run 0 plan "$TINY" &&
    has "$err" "memwall plan: this machine: bound $pleast MiB (" "plan: the bound" &&
    has "$err" "MW_MEMAVAILABLE, minus the margin): enough, with fewer samples per batch or lean" "plan: lean"
MW_MEMAVAILABLE=$((pbytes + 67108863)) run 0 plan "$TINY" && has "$err" "NOT enough" "plan: short"
MW_MEMAVAILABLE=$((pbytes + 67108863)) qp=Q4_K_M qt=$(nproc) qrun -o "$T/q-x.gguf" --method awq+gptq+round \
    --samples 128 --seq-len 512
[ "$rc" -eq 3 ] || fail "quant where plan says NOT enough: exit $rc, want 3: $err"
MW_MEMAVAILABLE=1T run 0 plan "$TINY" && has "$err" "enough, in memory" "plan: in memory"
echo "  plan: quant --corpus at 128 x 512 needs at least $pbytes bytes, as quant says"
# peak RSS flat in the samples under a default bound: 80M - 64 MiB = 16 MiB
# leaves one sample per batch and the hidden states in a scratch file (8 and
# 20 samples: unbounded, 20 x 511 peaks at ~2.8x the bounded runs; 8 and 40
# were the same checks at 1.7x the calibration; 4 samples fit unbounded)
tmpd=$T/tmpdir2
mkdir -p "$tmpd"
for n in 8 20; do
    MW_MEMAVAILABLE=80M TMPDIR=$tmpd rss_run "$TINY" --corpus "$CALIB" -o "$T/d$n.imatrix" \
        --samples $n --seq-len 511 -t 2
    [ "$rc" -eq 0 ] || fail "default bound, $n samples: exit $rc: $err"
    has "$err" "(memory bound 16.0 MiB: 1 sample per batch, hidden states in a scratch file" \
        "default bound, $n samples: lean"
    eval "rss_d$n=\${rss:-0}"
done
rss_run "$TINY" --corpus "$CALIB" -o "$T/n20.imatrix" --samples 20 --seq-len 511 -t 2 --max-memory none
[ "$rc" -eq 0 ] || fail "unbounded, 20 samples: exit $rc: $err"
cmp -s "$T/d20.imatrix" "$T/n20.imatrix" || fail "the default bound changed the imatrix"
[ -z "$(ls -A "$tmpd")" ] || fail "scratch file left in \$TMPDIR: $(ls -A "$tmpd")"
echo "  peak RSS at MW_MEMAVAILABLE=80M: 8 x 511 ${rss_d8} KiB, 20 x 511 ${rss_d20} KiB; unbounded 20 x 511 ${rss} KiB"
[ "$rss_d8" -gt 0 ] && [ $((rss_d20 * 100)) -le $((rss_d8 * 115)) ] ||
    fail "default bound: 20 samples peak at ${rss_d20} KiB, over 115% of 8 samples' ${rss_d8} KiB"
[ $((rss * 100)) -gt $((rss_d8 * 115)) ] ||
    fail "unbounded 20 samples (${rss} KiB) within 115% of the bounded 8 (${rss_d8} KiB): the check has no teeth"
fi
if [ "$quick" != quick ]; then
    # every sample of the corpus at the full context (~100 MiB unbounded): the
    # failure comes before the hidden states are allocated
    rss_run "$TINY" --corpus "$CALIB" -o "$T/small.imatrix" --samples all --seq-len 511 \
        --max-memory 1M
    [ "$rc" -eq 3 ] || fail "--samples all --max-memory 1M: exit $rc, want 3: $err"
    echo "  --samples all --seq-len 511 --max-memory 1M: $(grep -o 'needs at least [0-9]* bytes' <<< "$err"), peak RSS ${rss:-?} KiB"
    [ "${rss:-0}" -gt 0 ] && [ "${rss:-0}" -lt "$rss_full" ] ||
        fail "the failed run's peak RSS (${rss:-?} KiB) is not below the 16-sample run's ($rss_full KiB)"
fi
finish
