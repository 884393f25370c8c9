#!/usr/bin/env bash
# Runs every libFuzzer target of a -DMW_FUZZ=ON build for a bounded time on a
# copy of its committed seed corpus. Usage: scripts/fuzz.sh BUILD_DIR [SECONDS [OTHERS]]
# The GGUF reader (what every phone app runs) gets SECONDS (default 60), every
# other target OTHERS (default 15). bench/fuzz_long.sh runs long campaigns.
# Exit 0 when no target crashed, leaked or hit UB; 1 otherwise.
set -uo pipefail
build=$1
main_secs=${2:-60}
other_secs=${3:-15}
src=$(cd "$(dirname "$0")/.." && pwd)
status=0
for bin in "$build"/tests/fuzz_*; do
  [ -x "$bin" ] || continue
  name=${bin##*/fuzz_}
  secs=$other_secs
  [ "$name" = gguf ] && secs=$main_secs
  work=$(mktemp -d)
  cp -r "$src/tests/fuzz/corpus/$name/." "$work/" 2>/dev/null || true
  log="$build/fuzz-$name.log"
  if "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 "$work" >"$log" 2>&1; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    echo "fuzz $name: ok, ${execs:-?} executions in ${secs}s"
  else
    echo "fuzz $name: FAILED (see $log)"; tail -40 "$log"; status=1
  fi
  rm -rf "$work"
done
exit $status
