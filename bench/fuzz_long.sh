#!/usr/bin/env bash
# Long fuzzing campaigns: every libFuzzer target of a clang
# -DMW_FUZZ=ON -DMW_SANITIZE=ON build (ASan + UBSan), for a long time, on a
# corpus that persists between campaigns. The test command runs the same
# targets for a bounded time (scripts/fuzz.sh); this is for nights and
# releases.
#
# Usage: bench/fuzz_long.sh [BUILD_DIR] [SECONDS_PER_TARGET] [TARGET...]
#   BUILD_DIR           default build/ci-fuzz (configured and built here when
#                       it has no fuzz_* binaries yet; needs clang and
#                       libclang-rt-14-dev)
#   SECONDS_PER_TARGET  default 3600
#   TARGET              names (gguf verify safetensors spm tokjson config
#                       imatrix ...); default: every fuzz_* binary
# Environment: MW_FUZZ_JOBS targets at a time (default: nproc),
#   MW_FUZZ_OUT (default bench/out/fuzz).
#
# Per target, under $MW_FUZZ_OUT/<name>/:
#   corpus/     the persistent corpus (seeded from tests/fuzz/corpus/<name>/;
#               grows with every campaign)
#   artifacts/  crash-*, leak-*, timeout-*, oom-* inputs
#   last.log    libFuzzer's output of the last campaign
# and one line per target appended to $MW_FUZZ_OUT/totals.tsv:
#   date, target, seconds, executions, exec/s, corpus files, new artifacts
# When a target finds something: fix it, copy the input into
# tests/fuzz/corpus/<name>/ (the replay test then keeps it fixed), and say
# so in README.md's fuzzing table.
# Exit status: 0 when no target produced an artifact, 1 otherwise.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build/ci-fuzz}
secs=${2:-3600}
shift 2 2> /dev/null || shift $#
jobs=${MW_FUZZ_JOBS:-$(nproc)}
out=${MW_FUZZ_OUT:-$src/bench/out/fuzz}

if ! ls "$build"/tests/fuzz_* > /dev/null 2>&1; then
    cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER=clang -DMW_FUZZ=ON -DMW_SANITIZE=ON \
        -DCMAKE_BUILD_TYPE=Debug > /dev/null &&
        cmake --build "$build" -j "$(nproc)" > /dev/null || exit 1
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for bin in "$build"/tests/fuzz_*; do
        [ -x "$bin" ] && targets+=("${bin##*/fuzz_}")
    done
fi
mkdir -p "$out"
[ -f "$out/totals.tsv" ] ||
    printf 'date\ttarget\tseconds\texecutions\texec_per_s\tcorpus_files\tnew_artifacts\n' \
        > "$out/totals.tsv"

campaign() { # NAME
    local name=$1 bin=$build/tests/fuzz_$1 dir=$out/$1
    mkdir -p "$dir/corpus" "$dir/artifacts"
    cp -rn "$src/tests/fuzz/corpus/$name/." "$dir/corpus/" 2> /dev/null || true
    local before after
    before=$(ls "$dir/artifacts" | wc -l)
    # -rss_limit_mb: a parser must not need more than this for inputs of
    # -max_len bytes; -timeout: nor hang on one
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix="$dir/artifacts/" "$dir/corpus" \
        > "$dir/last.log" 2>&1
    after=$(ls "$dir/artifacts" | wc -l)
    local execs rate files
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/last.log" | grep -o '[0-9]*$')
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$dir/last.log" | grep -o '[0-9]*$')
    files=$(ls "$dir/corpus" | wc -l)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$name" "$secs" \
        "${execs:-?}" "${rate:-?}" "$files" $((after - before)) >> "$out/totals.tsv"
    if [ "$after" -gt "$before" ]; then
        echo "fuzz $name: FOUND $((after - before)) artifact(s) in $dir/artifacts (log: $dir/last.log)"
        return 1
    fi
    echo "fuzz $name: ok, ${execs:-?} executions (${rate:-?}/s), corpus $files files"
}

status=0
running=0
for t in "${targets[@]}"; do
    [ -x "$build/tests/fuzz_$t" ] || { echo "fuzz $t: no binary $build/tests/fuzz_$t"; status=1; continue; }
    campaign "$t" &
    running=$((running + 1))
    if [ $running -ge "$jobs" ]; then
        wait -n || status=1
        running=$((running - 1))
    fi
done
while [ $running -gt 0 ]; do
    wait -n || status=1
    running=$((running - 1))
done
echo "totals: $out/totals.tsv"
exit $status
