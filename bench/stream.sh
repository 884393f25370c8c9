#!/usr/bin/env bash
# bench/stream.sh — the machine's memory bandwidth, STREAM-like
# (bench/stream.c: Copy and Triad over 3 arrays of 256 MiB doubles, best of
# REPS, at 1 thread and at every online CPU). The figure the README compares
# memwall-run's "decode reads ... GB/s effective" line with.
#
#   bench/stream.sh [MIB_PER_ARRAY [REPS [THREADS...]]]   (default: 256 5 1 <nproc>)
#
# Output: bench/out/stream/stream.txt (and stdout). Needs 3 x MIB_PER_ARRAY
# of free RAM. Numbers drop when other work shares the memory bus: run it on
# a quiet machine (or read it as "what was left").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$here/out/stream
mkdir -p "$OUT"
CC=${CC:-cc}
$CC -std=c11 -O2 -Wall -Wextra -Werror -pthread -o "$OUT/stream" "$here/stream.c"
"$OUT/stream" "$@" | tee "$OUT/stream.txt"
