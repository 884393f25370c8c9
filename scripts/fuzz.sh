#!/usr/bin/env bash
# Runs every libFuzzer target of a -DMW_FUZZ=ON build for a bounded time on a
# copy of its committed seed corpus. Usage: scripts/fuzz.sh BUILD_DIR [SECONDS [OTHERS]]
# The GGUF reader (what every phone app runs) gets SECONDS (default 60), every
# other target OTHERS (default 15). bench/fuzz_long.sh runs long campaigns.
# MW_FUZZ_JOBS (default 1): targets run at once, each a single-threaded
# process with its own core (the test command passes its job count); every
# target gets its full time either way.
# Exit 0 when no target crashed, leaked or hit UB; 1 otherwise.
set -uo pipefail
build=$1
main_secs=${2:-60}
other_secs=${3:-15}
jobs=${MW_FUZZ_JOBS:-1}
src=$(cd "$(dirname "$0")/.." && pwd)
status=0
res=$(mktemp -d)
trap 'rm -rf "$res"' EXIT
fuzz_one() { # BIN NAME SECS: the result line (and the log's tail on failure) in $res/NAME
  local bin=$1 name=$2 secs=$3 work log execs
  work=$(mktemp -d)
  cp -r "$src/tests/fuzz/corpus/$name/." "$work/" 2>/dev/null || true
  log="$build/fuzz-$name.log"
  if "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 "$work" >"$log" 2>&1; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    echo "fuzz $name: ok, ${execs:-?} executions in ${secs}s" > "$res/$name"
  else
    { echo "fuzz $name: FAILED (see $log)"; tail -40 "$log"; } > "$res/$name.failed"
  fi
  rm -rf "$work"
}
names=()
for bin in "$build"/tests/fuzz_gguf "$build"/tests/fuzz_*; do # the longest first
  [ -x "$bin" ] || continue
  name=${bin##*/fuzz_}
  [[ " ${names[*]} " == *" $name "* ]] && continue
  names+=("$name")
  secs=$other_secs
  [ "$name" = gguf ] && secs=$main_secs
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  fuzz_one "$bin" "$name" "$secs" &
done
wait
for name in "${names[@]}"; do
  if [ -f "$res/$name" ]; then cat "$res/$name"
  else cat "$res/$name.failed" 2>/dev/null || echo "fuzz $name: FAILED (no result)"; status=1; fi
done
exit $status
