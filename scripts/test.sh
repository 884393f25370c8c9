#!/usr/bin/env bash
# The test command: checks the module graph, builds memwall four ways and runs every test.
#   0. scripts/lint_modules.sh: no back edge, no cross-module *_int.h, no ../
#      include, no printing or exit() in library code
#   1. release build with -Werror, all tests (unit, end-to-end, llama.cpp interop),
#      then every command under valgrind memcheck (beside the ASan build)
#   2. ASan+UBSan build with -Werror, all tests but the llama.cpp peer ones
#   3. aarch64 cross build (core/gguf/quant/verify + memwall), its tests under qemu-aarch64
#   4. clang libFuzzer build, each fuzz target for a bounded time (the GGUF reader
#      MW_FUZZ_SECONDS, default 45; the others MW_FUZZ_OTHER_SECONDS, default 10),
#      MW_JOBS targets at a time (each single-threaded, on its own core)
# Environment: MW_JOBS (default: nproc), MW_SKIP_DEPS=1 to skip the package check.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${MW_SKIP_DEPS:-0}" = 1 ] || bash scripts/deps.sh
jobs=${MW_JOBS:-$(nproc)}
fuzz_secs=${MW_FUZZ_SECONDS:-45}
fuzz_other=${MW_FUZZ_OTHER_SECONDS:-10}
results=()
fail=0

t_start=$(date +%s)
step() { # name, command...: runs it, records ok/FAILED with its wall time
  local name=$1; shift
  local t0 t
  t0=$(date +%s)
  echo "=== $name"
  if "$@"; then t="ok    "; else t="FAILED"; fail=1; fi
  t0=$(( $(date +%s) - t0 ))
  results+=("$(printf '%s %5ds  %s' "$t" "$t0" "$name")")
  echo "=== $name: $t in ${t0}s"
}

build() { # dir, cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -DMW_WERROR=ON "$@" >/dev/null && cmake --build "$dir" -j "$jobs" >/dev/null
}

failures=$(mktemp)
trap 'rm -f "$failures"' EXIT
run_ctest() { # dir, ctest args... (names of failed tests and their last lines kept for the summary)
  local dir=$1; shift
  local log rc=0
  log=$(mktemp)
  (cd "$dir" && ctest -j "$jobs" --output-on-failure "$@") 2>&1 | tee "$log" || rc=1
  if [ $rc -ne 0 ] && [ -f "$dir/Testing/Temporary/LastTestsFailed.log" ]; then
    { echo "--- $dir: failed tests"
      cat "$dir/Testing/Temporary/LastTestsFailed.log"
      grep -E 'FAIL|Failed|fail|ERROR|error:|Timeout|\*\*\*' "$log" | tail -n 25
    } >> "$failures"
  fi
  rm -f "$log"
  return $rc
}

step "module lint (docs/architecture.md)" bash scripts/lint_modules.sh
step "release build" build build/ci-release -DCMAKE_BUILD_TYPE=Release
step "release tests" run_ctest build/ci-release
# valgrind runs one process at a time (one core): beside the ASan build; its
# step records the wait for it after the build, its log is printed then
vg_log=$(mktemp)
bash scripts/valgrind.sh build/ci-release > "$vg_log" 2>&1 &
vg_pid=$!
step "asan+ubsan build" build build/ci-asan -DCMAKE_BUILD_TYPE=Debug -DMW_SANITIZE=ON
vg_wait() {
  local rc=0
  wait "$vg_pid" || rc=$?
  cat "$vg_log"; rm -f "$vg_log"
  return $rc
}
step "valgrind (memcheck, every command; beside the asan build)" vg_wait
# (a function, not `env ... run_ctest`: env cannot run a shell function)
asan_tests() (
  export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
  run_ctest build/ci-asan -LE peer
)
step "asan+ubsan tests" asan_tests
step "aarch64 cross build" build build/ci-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DMW_MINIMAL=ON -DCMAKE_BUILD_TYPE=Release
step "aarch64 tests (qemu)" run_ctest build/ci-aarch64 -LE peer
step "fuzz build (clang)" build build/ci-fuzz -DCMAKE_C_COMPILER=clang -DMW_FUZZ=ON -DMW_SANITIZE=ON \
  -DCMAKE_BUILD_TYPE=Debug
step "fuzzing (gguf ${fuzz_secs}s, others ${fuzz_other}s)" env MW_FUZZ_JOBS="$jobs" \
  bash scripts/fuzz.sh build/ci-fuzz "$fuzz_secs" "$fuzz_other"

echo "=== summary (wall time per step)"
printf '%s\n' "${results[@]}"
passed=$(printf '%s\n' "${results[@]}" | grep -c '^ok' || true)
failed=$(printf '%s\n' "${results[@]}" | grep -c '^FAILED' || true)
echo "total: $(( $(date +%s) - t_start ))s on $(nproc) cores"
echo "steps: $passed passed, $failed failed"
# last, so that a log cut to its tail still says which tests failed and why
[ -s "$failures" ] && { echo "=== failures"; cat "$failures"; }
exit $fail
