#!/usr/bin/env bash
# The memwall binary on a 4.25 GiB sparse GGUF made by memwall's own writer
# (tests/check_huge.c --make: a Q8_0 tensor of 4 294 975 488 elements and
# 4 563 411 456 bytes, an F32 tensor at a data offset above 4 GiB, every
# checksum filled in): `verify` (text and --json) passes and reports the
# 64-bit sizes exactly, `inspect` prints the offsets and element counts
# unclipped. The file lives in the build tree, never on tmpfs (reading the
# holes of a tmpfs file through a mapping allocates memory for them).
# Usage (ctest): faults_huge.sh CHECK_HUGE
MAKE_HUGE=$1
. "$(dirname "$0")/common.sh"
H=$MW_TMP/huge.gguf
trap 'rm -f "$H"' EXIT

$MW_EMU "$MAKE_HUGE" --make "$H"
r=$?
if [ $r -eq 77 ]; then
    echo "SKIP: no sparse files (or tmpfs) under $MW_TMP"
    exit 77
fi
[ $r -eq 0 ] || { echo "FAIL: check_huge --make exit $r"; exit 1; }
size=$(stat -c %s "$H")
echo "sparse file: $size bytes, $(($(stat -c %b "$H") * 512)) on disk"

out=$($MW_EMU "$MEMWALL" verify --json "$H" 2>&1)
rc=$?
[ $rc -eq 0 ] || fail "verify --json: exit $rc: $out"
has "$out" "\"file_size\": $size" "verify --json file size"
has "$out" "\"data_bytes\": $((128 + 4563411456 + 256))" "verify --json data bytes"
has "$out" '"checksums": "ok"' "verify --json checksums"

out=$($MW_EMU "$MEMWALL" inspect "$H" 2>&1)
rc=$?
[ $rc -eq 0 ] || fail "inspect: exit $rc: $out"
has "$out" "4294975488" "inspect: element count above 2^32"
has "$out" "4563411456" "inspect: byte size above 2^32"
has "$out" "b.huge" "inspect"
has "$out" "c.tail" "inspect"

[ "$fails" -eq 0 ] || { echo "--- last output"; echo "$out" | head -40; }
finish
