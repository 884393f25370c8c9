#!/usr/bin/env bash
# memwall calib --max-memory (issue 7) on tinyllama-8m:
#  - a bound that forces fewer samples per batch gives a byte-identical
#    imatrix (the statistics do not depend on the batch) and a lower peak RSS;
#  - a bound below one sample per batch fails with exit 3 and a message with
#    the bytes needed, the bound and what to change, BEFORE the large
#    allocations: the peak RSS of the failed run stays below what it would
#    have needed;
#  - a malformed size is a usage error.
# Peak RSS is ru_maxrss of the command (/usr/bin/time -f %M when present,
# else the "peak RSS" memwall calib prints itself). The RSS comparisons run
# in release builds only ("quick": sanitizer builds, smaller run, sizes and
# bytes only).
. "$(dirname "$0")/calib_common.sh"
[ -d "$TINY" ] || { echo "SKIP: no $TINY"; exit $SKIP; }
quick=${1:-}
if [ "$quick" = quick ]; then sz=(--samples 6 --seq-len 64); bound=6M; small=2M
else sz=(--samples 32 --seq-len 256); bound=24M; small=12M; fi

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
run 2 calib "$TINY" --corpus "$CALIB" -o "$T/x.imatrix" --max-memory 0

# unbounded reference, then a bound that forces smaller batches
rss_run "$TINY" --corpus "$CALIB" -o "$T/full.imatrix" "${sz[@]}"
[ "$rc" -eq 0 ] || fail "unbounded run: exit $rc: $err"
rss_full=${rss:-0}
rss_run "$TINY" --corpus "$CALIB" -o "$T/bound.imatrix" "${sz[@]}" --max-memory $bound
[ "$rc" -eq 0 ] || fail "--max-memory $bound: exit $rc: $err"
rss_bound=${rss:-0}
has "$err" "--max-memory" "adapted run says so"
has "$err" "per batch)" "adapted run names the batch"
cmp -s "$T/full.imatrix" "$T/bound.imatrix" ||
    fail "--max-memory $bound changed the imatrix (smaller batches must give the same bytes)"
echo "  peak RSS: unbounded ${rss_full} KiB, --max-memory $bound ${rss_bound} KiB"
echo "  $(grep -o 'need about.*' <<< "$err")"
if [ "$quick" != quick ]; then
    [ "$rss_bound" -gt 0 ] && [ "$rss_bound" -lt "$rss_full" ] ||
        fail "--max-memory $bound did not lower the peak RSS ($rss_bound vs $rss_full KiB)"
fi

# too small: exit 3, the message, nothing written, no large allocation made
rss_run "$TINY" --corpus "$CALIB" -o "$T/small.imatrix" "${sz[@]}" --max-memory $small
[ "$rc" -eq 3 ] || fail "--max-memory $small: exit $rc, want 3: $err"
has "$err" "memwall calib: $TINY: calibration needs at least " "too small"
has "$err" "above --max-memory $(numfmt --from=iec $small) bytes" "too small: the bound"
has "$err" "use fewer --samples or a shorter --seq-len, or raise --max-memory [E_NOMEM]" "remedy"
[ -e "$T/small.imatrix" ] && fail "output written although the bound failed"
ls "$T" | grep -q '\.tmp\.' && fail "temp file left behind"
echo "  too small: peak RSS ${rss:-?} KiB; $(grep -o 'needs at least [0-9]* bytes' <<< "$err")"
if [ "$quick" != quick ]; then
    # every sample of the corpus at the full context: ~90 MiB of hidden states
    rss_run "$TINY" --corpus "$CALIB" -o "$T/small.imatrix" --samples all --seq-len 511 \
        --max-memory 8M
    [ "$rc" -eq 3 ] || fail "--samples all --max-memory 8M: exit $rc, want 3: $err"
    need=$(sed -n 's/.*needs at least \([0-9]*\) bytes.*/\1/p' <<< "$err")
    echo "  --samples all --seq-len 511 --max-memory 8M: needs ${need:-?} bytes, peak RSS ${rss:-?} KiB"
    [ -n "$need" ] && [ -n "$rss" ] && [ $((rss * 1024)) -lt "$need" ] ||
        fail "the failed run's peak RSS (${rss:-?} KiB) is not below what it needed (${need:-?} bytes)"
fi
finish
