#!/usr/bin/env bash
# verify throughput and memory against xxhsum on the same file.
#
#   bench/verify_bench.sh [SIZE_MB]        (default 1100: a bit over 1 GiB)
#
# Builds memwall and mkgguf (Release, MW_MINIMAL) in build-bench/ unless
# MW_BUILD names a build dir that has them, generates (or reuses)
# bench/out/verify_bench_<SIZE_MB>M.gguf with `mkgguf big`, warms the page
# cache, then times `memwall verify` and `xxhsum -H3` (XXH3-64, the hash
# verify checks) on it, best of 3 each, and measures peak RSS of verify.
# Target: verify >= 0.8x xxhsum's throughput, RSS independent of file size.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
size_mb=${1:-1100}
build=${MW_BUILD:-$root/build-bench}
out_dir=$root/bench/out
file=$out_dir/verify_bench_${size_mb}M.gguf
runs=3

if [ ! -x "$build/tools/memwall" ] || [ ! -x "$build/tests/mkgguf" ]; then
    echo "building in $build ..."
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMW_MINIMAL=ON > /dev/null
    cmake --build "$build" -j"$(nproc)" --target memwall mkgguf > /dev/null
fi
memwall=$build/tools/memwall
mkgguf=$build/tests/mkgguf
command -v xxhsum > /dev/null || { echo "xxhsum not found (apt-get install xxhash)"; exit 1; }

mkdir -p "$out_dir"
if [ ! -s "$file" ] || ! "$memwall" verify --quiet "$file"; then
    echo "generating $file ..."
    "$mkgguf" big "$file" "$size_mb"
fi
bytes=$(stat -c %s "$file")

cat "$file" > /dev/null # warm the page cache
cat "$file" > /dev/null

now() { date +%s.%N; }
# best_of CMD...: prints the best wall time of $runs runs, in seconds
best_of() {
    local best="" t0 t1 t
    for ((i = 0; i < runs; i++)); do
        t0=$(now)
        "$@" > /dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
        t1=$(now)
        t=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" -eq 1 ]; then best=$t; fi
    done
    echo "$best"
}
# peak_rss_kb CMD...: maximum resident set size of CMD in KiB
peak_rss_kb() {
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -v "$@" 2>&1 > /dev/null | awk -F': ' '/Maximum resident set size/ {print $2}'
    else
        python3 -c 'import resource,subprocess,sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=False)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
    fi
}

t_verify=$(best_of "$memwall" verify "$file")
t_xxh=$(best_of xxhsum -H3 "$file")
rss_verify=$(peak_rss_kb "$memwall" verify "$file")
rss_xxh=$(peak_rss_kb xxhsum -H3 "$file")

mbps() { echo "scale=1; $bytes / $1 / 1000000" | bc -l; }
v=$(mbps "$t_verify")
x=$(mbps "$t_xxh")
ratio=$(echo "scale=3; $t_xxh / $t_verify" | bc -l)
printf 'file:            %s (%s bytes)\n' "$file" "$bytes"
printf 'memwall verify:  %8.3f s  %8s MB/s  peak RSS %s KiB\n' "$t_verify" "$v" "$rss_verify"
printf 'xxhsum -H3:      %8.3f s  %8s MB/s  peak RSS %s KiB\n' "$t_xxh" "$x" "$rss_xxh"
printf 'ratio (verify/xxhsum throughput): %s  (target >= 0.8)\n' "$ratio"
