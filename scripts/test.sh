#!/usr/bin/env bash
# The test command: checks the module graph, builds memwall four ways and runs every test.
#   0. scripts/lint_modules.sh: no back edge, no cross-module *_int.h, no ../
#      include, no printing or exit() in library code (beside the release build)
#   1. release build with -Werror, all tests (unit, end-to-end, llama.cpp interop),
#      then every command under valgrind memcheck (beside the ASan build)
#   2. ASan+UBSan build with -Werror, all tests but the llama.cpp peer ones
#   3. aarch64 cross build (core/gguf/quant/verify + memwall), its tests under qemu-aarch64
#   4. clang libFuzzer build, each fuzz target for a bounded time (the GGUF reader
#      MW_FUZZ_SECONDS, default 45; the others MW_FUZZ_OTHER_SECONDS, default 10),
#      MW_JOBS targets at a time (each single-threaded, on its own core)
# Two lanes after the release build: the release tests in one; the ASan build
# (valgrind beside it), the ASan tests, the aarch64 build and tests and the fuzz
# build and fuzzing in the other, so that neither ctest run ends on a tail with a core idle
# (each lane runs MW_JOBS jobs; the other lane's log is printed when it ends).
# Fuzzing ends the second lane (with MW_LANES=1 it runs last): each target
# runs for a fixed time, so sharing the cores costs executions, not time.
# The summary gives each step's own wall time (steps of the two lanes overlap)
# and the total wall time of the whole command.
# Environment: MW_JOBS (default: nproc), MW_SKIP_DEPS=1 to skip the package check,
# MW_LANES=1 to run every step one after the other.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${MW_SKIP_DEPS:-0}" = 1 ] || bash scripts/deps.sh
jobs=${MW_JOBS:-$(nproc)}
fuzz_secs=${MW_FUZZ_SECONDS:-45}
fuzz_other=${MW_FUZZ_OTHER_SECONDS:-10}
lanes=${MW_LANES:-2}

t_start=$(date +%s)
tmp=$(mktemp -d) # results/N: step N's summary line; failures.*: failed tests per ctest run; logs
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/results"
step() { # N, name, command...: runs it, records ok/FAILED with its wall time as step N
  local n=$1 name=$2; shift 2
  local t0 t
  t0=$(date +%s)
  echo "=== $name"
  if "$@"; then t="ok    "; else t="FAILED"; fi
  t0=$(( $(date +%s) - t0 ))
  printf '%s %5ds  %s\n' "$t" "$t0" "$name" > "$tmp/results/$(printf %02d "$n")"
  echo "=== $name: $t in ${t0}s"
}

build() { # dir, cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -DMW_WERROR=ON "$@" >/dev/null && cmake --build "$dir" -j "$jobs" >/dev/null
}

run_ctest() { # dir, ctest args... (names of failed tests and their last lines kept for the summary)
  local dir=$1; shift
  local log rc=0
  log=$(mktemp)
  (cd "$dir" && ctest -j "$jobs" --output-on-failure "$@") 2>&1 | tee "$log" || rc=1
  if [ $rc -ne 0 ] && [ -f "$dir/Testing/Temporary/LastTestsFailed.log" ]; then
    { echo "--- $dir: failed tests"
      cat "$dir/Testing/Temporary/LastTestsFailed.log"
      grep -E 'FAIL|Failed|fail|ERROR|error:|Timeout|\*\*\*' "$log" | tail -n 25
    } > "$tmp/failures.${dir//\//_}"
  fi
  rm -f "$log"
  return $rc
}

# the module lint is one short single-threaded script: beside the release build
step 1 "module lint (docs/architecture.md; beside the release build)" \
  bash scripts/lint_modules.sh > "$tmp/lint.log" 2>&1 &
lint_pid=$!
step 2 "release build" build build/ci-release -DCMAKE_BUILD_TYPE=Release
wait "$lint_pid"
cat "$tmp/lint.log"

# the second lane: ASan, aarch64 and the fuzz build
other_lane() {
  # valgrind runs one process at a time (one core): beside the ASan build; its
  # step records the wait for it after the build, its log is printed then
  bash scripts/valgrind.sh build/ci-release > "$tmp/valgrind.log" 2>&1 &
  local vg_pid=$!
  step 4 "asan+ubsan build" build build/ci-asan -DCMAKE_BUILD_TYPE=Debug -DMW_SANITIZE=ON
  vg_wait() {
    local rc=0
    wait "$vg_pid" || rc=$?
    cat "$tmp/valgrind.log"
    return $rc
  }
  step 5 "valgrind (memcheck, every command; beside the asan build)" vg_wait
  # (a function, not `env ... run_ctest`: env cannot run a shell function)
  asan_tests() (
    export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
    run_ctest build/ci-asan -LE peer
  )
  step 6 "asan+ubsan tests" asan_tests
  step 7 "aarch64 cross build" build build/ci-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DMW_MINIMAL=ON -DCMAKE_BUILD_TYPE=Release
  step 8 "aarch64 tests (qemu)" run_ctest build/ci-aarch64 -LE peer
  step 9 "fuzz build (clang)" build build/ci-fuzz -DCMAKE_C_COMPILER=clang -DMW_FUZZ=ON -DMW_SANITIZE=ON \
    -DCMAKE_BUILD_TYPE=Debug
  # with two lanes fuzzing ends this one: it finishes before the release tests
  # do, where after them it added its own time to the total
  [ "$lanes" = 1 ] || fuzz_step
}
fuzz_step() {
  step 10 "fuzzing (gguf ${fuzz_secs}s, others ${fuzz_other}s)" env MW_FUZZ_JOBS="$jobs" \
    bash scripts/fuzz.sh build/ci-fuzz "$fuzz_secs" "$fuzz_other"
}
if [ "$lanes" = 1 ]; then
  step 3 "release tests" run_ctest build/ci-release
  other_lane
else
  echo "=== the asan, valgrind, aarch64 and fuzz build steps run beside the release tests (log below, after them)"
  other_lane > "$tmp/lane.log" 2>&1 &
  lane_pid=$!
  step 3 "release tests (beside the next five steps)" run_ctest build/ci-release
  wait "$lane_pid" || true
  cat "$tmp/lane.log"
fi
[ "$lanes" = 1 ] && fuzz_step

echo "=== summary (wall time per step)"
cat "$tmp/results/"*
passed=$(cat "$tmp/results/"* | grep -c '^ok' || true)
failed=$(cat "$tmp/results/"* | grep -c '^FAILED' || true)
echo "total: $(( $(date +%s) - t_start ))s wall on $(nproc) cores"
echo "steps: $passed passed, $failed failed"
# last, so that a log cut to its tail still says which tests failed and why
if compgen -G "$tmp/failures.*" > /dev/null; then
  echo "=== failures"
  cat "$tmp/failures."*
fi
[ "$failed" -eq 0 ] && [ "$(ls "$tmp/results" | wc -l)" -eq 10 ]
