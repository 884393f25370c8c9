#!/usr/bin/env bash
# Truncate a small GGUF file at every length 0..size-1 and run
# `memwall verify` on each prefix: the exit status must be exactly 1 every
# time (never 0, never a crash), and the output must say "truncat..." and
# give a byte offset. The untruncated file must verify (exit 0). The prefixes
# are written by one `mkgguf cuts` call (what `head -c LEN` would write), so
# only memwall is started per length.
#
# STRIDE (the sanitizer build: 5, odd, so not only aligned lengths): every
# STRIDE-th length only. There each start of memwall is ~0.15 s of CPU (160 s
# for the whole sweep), and every length is checked in-process under the
# sanitizers by corrupt_sweep (verify_corruption_sweep: each prefix in a
# buffer of exactly its length); the release build runs the CLI on every length.
#
#   truncation_sweep.sh MKGGUF [STRIDE]   (env: MW_BIN, MW_TMP, MW_EMU as set by ctest)
MKGGUF=${1:?usage: truncation_sweep.sh MKGGUF [STRIDE]}
STRIDE=${2:-1}
. "$(dirname "$0")/common.sh"
full="$MW_TMP/full.gguf"
cuts="$MW_TMP/cuts"
$MW_EMU "$MKGGUF" small "$full" || { echo "mkgguf failed"; exit 1; }
size=$(stat -c %s "$full")

out=$($MW_EMU "$MEMWALL" verify "$full" 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
    echo "FAIL: the intact file exits $rc"; echo "$out"; exit 1
fi

mkdir -p "$cuts" && $MW_EMU "$MKGGUF" cuts "$full" "$cuts" || { echo "mkgguf cuts failed"; exit 1; }
[ "$(stat -c %s "$cuts/cut-$((size - 1)).gguf")" -eq $((size - 1)) ] || { echo "bad cuts"; exit 1; }
# check_len LEN: prints one FAIL line per problem with the prefix of LEN bytes
check_len() {
    local len=$1 out rc
    out=$($MW_EMU "$MEMWALL" verify "$cuts/cut-$len.gguf" 2>&1)
    rc=$?
    if [ $rc -ge 128 ]; then
        printf 'FAIL: length %s: crashed (exit %s)\n%s\n' "$len" "$rc" "$out"
    elif [ $rc -ne 1 ]; then
        printf 'FAIL: length %s: exit %s, want 1\n%s\n' "$len" "$rc" "$out"
    elif [[ ${out,,} != *truncat* ]]; then
        printf 'FAIL: length %s: output does not mention truncation\n%s\n' "$len" "$out"
    elif [[ $out != *"offset "[0-9]* ]]; then
        printf 'FAIL: length %s: output names no offset\n%s\n' "$len" "$out"
    fi
}
# The runs wait mostly on process start-up (and qemu's), so run a few
# interleaved slices of the lengths at once.
par=4
for ((p = 0; p < par; p++)); do
    (for ((len = p * STRIDE; len < size; len += par * STRIDE)); do check_len "$len"; done) > "$MW_TMP/log-$p" &
done
wait
cat "$MW_TMP"/log-*
fails=$(cat "$MW_TMP"/log-* | grep -c '^FAIL' || true)
echo "truncation sweep: $(( (size + STRIDE - 1) / STRIDE )) of $size lengths (every ${STRIDE}), $fails failures"
[ $fails -eq 0 ]
