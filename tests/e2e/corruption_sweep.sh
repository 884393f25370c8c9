#!/usr/bin/env bash
# Flip every byte of a small GGUF file (XOR 0xFF and XOR 0x01, one at a time)
# and require 100% detection. The exhaustive part runs in-process
# (corrupt_sweep: verify_mem on each damaged copy, plus every truncation);
# then the memwall CLI is run on a sample of damaged files (header, KV,
# tensor info, padding, each tensor's data, checksum values) and must exit 1.
#
#   corruption_sweep.sh MKGGUF CORRUPT_SWEEP   (env: MW_BIN, MW_TMP, MW_EMU)
MKGGUF=${1:?usage: corruption_sweep.sh MKGGUF CORRUPT_SWEEP}
SWEEP=${2:?usage: corruption_sweep.sh MKGGUF CORRUPT_SWEEP}
. "$(dirname "$0")/common.sh"
full="$MW_TMP/full.gguf"
bad="$MW_TMP/bad.gguf"
$MW_EMU "$MKGGUF" small "$full" || { echo "mkgguf failed"; exit 1; }
size=$(stat -c %s "$full")

$MW_EMU "$SWEEP" "$full" || { echo "FAIL: in-process sweep found undetected damage"; exit 1; }

# flip_at OFFSET MASK: write $bad = $full with one byte XOR-ed
flip_at() {
    local off=$1 mask=$2 byte
    byte=$(od -An -tu1 -j "$off" -N1 "$full" | tr -d ' ')
    cp "$full" "$bad"
    printf "$(printf '\\%03o' $((byte ^ mask)))" |
        dd of="$bad" bs=1 seek="$off" count=1 conv=notrunc status=none
}

n=0
# a spread of offsets over the whole file, both masks
for ((off = 0; off < size; off += 37)); do
    for mask in 255 1; do
        flip_at "$off" "$mask"
        out=$($MW_EMU "$MEMWALL" verify "$bad" 2>&1)
        rc=$?
        n=$((n + 1))
        if [ $rc -ne 1 ]; then
            fail "byte $off ^ $mask: exit $rc, want 1"; echo "$out"
        fi
    done
done
# the last byte (padding after the last tensor)
flip_at $((size - 1)) 1
$MW_EMU "$MEMWALL" verify --quiet "$bad" > /dev/null 2>&1
rc=$?
[ $rc -eq 1 ] || fail "last byte: exit $rc, want 1"
echo "corruption sweep (CLI sample): $((n + 1)) damaged files, $fails failures"
[ $fails -eq 0 ]
