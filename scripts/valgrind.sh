#!/usr/bin/env bash
# valgrind memcheck over every memwall command, end to end, on small inputs
#: inspect, verify (--deep, --json), convert, quant (file and HF
# directory sources, --imatrix, --dry-run), run, perplexity, calib, plan,
# and memwall-run, on success and on error paths; then the cheap Check
# suites with CK_FORK=no. A run fails on any memcheck error, on a definite
# or indirect leak, or on an exit status other than the expected one.
#
# Usage: scripts/valgrind.sh [BUILD_DIR]
#   BUILD_DIR: a non-sanitizer build (default build/ci-release, which the
#   test command builds first); configured and built here if it has no
#   memwall yet. Needs valgrind (Debian package valgrind) and python3.
# Exit 0 clean, 1 otherwise. Takes about a minute on 2 cores.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build/ci-release}
command -v valgrind > /dev/null 2>&1 || {
    echo "valgrind.sh: valgrind is not installed (apt-get install valgrind)"
    exit 1
}
if [ ! -x "$build/tools/memwall" ] || [ ! -x "$build/tests/mkgguf" ]; then
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null &&
        cmake --build "$build" -j "$(nproc)" > /dev/null || exit 1
fi
M=$build/tools/memwall
MR=$build/tools/memwall-run
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OPENBLAS_NUM_THREADS=1 # no BLAS thread pool: deterministic and quiet
VG=(valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --num-callers=30)
runs=0
fails=0

# vg WANT_RC CMD ARGS...: CMD under memcheck; its exit must be WANT_RC
vg() {
    local want=$1 rc
    shift
    runs=$((runs + 1))
    "${VG[@]}" --log-file="$T/vg.log" "$@" > "$T/out" 2> "$T/err"
    rc=$?
    if [ $rc -eq 99 ] || [ -s "$T/vg.log" ]; then
        echo "FAIL (memcheck): $*"
        head -60 "$T/vg.log"
        fails=$((fails + 1))
    elif [ $rc -ne "$want" ]; then
        echo "FAIL (exit $rc, want $want): $*"
        head -20 "$T/err"
        fails=$((fails + 1))
    fi
}

# --- inputs -------------------------------------------------------------------
D=$src/datasets
"$build/tests/mkgguf" small "$T/s.gguf" &&
    "$build/tests/mkgguf" small "$T/nan.gguf" --nan || exit 1
head -c 700 "$T/s.gguf" > "$T/cut.gguf"
python3 "$src/tests/fixtures/mk_hf_fixture.py" llama3 "$T/llama3" > /dev/null &&
    python3 "$src/tests/fixtures/mk_hf_fixture.py" qwen2 "$T/qwen2" > /dev/null || exit 1
mkdir -p "$T/empty"
head -c 6000 "$D/corpora/eval.txt" > "$T/eval.txt"
head -c 6000 "$D/corpora/calib.txt" > "$T/calib.txt"
have_rt=0
if [ -x "$build/tests/rt_mkmodel" ] && "$build/tests/rt_mkmodel" model "$T/m.gguf" > /dev/null; then
    have_rt=1
fi
cmds=$("$M" help 2>&1)
has_cmd() { [[ $cmds == *"  $1 "* ]]; }

# --- front end, inspect, verify --------------------------------------------------
vg 0 "$M" --version
vg 2 "$M" no-such-command
vg 0 "$M" inspect "$T/s.gguf"
vg 0 "$M" inspect --json "$T/s.gguf"
vg 1 "$M" inspect "$T/cut.gguf"
vg 0 "$M" verify "$T/s.gguf"
vg 0 "$M" verify --deep --json "$T/s.gguf"
vg 1 "$M" verify --deep "$T/nan.gguf"
vg 1 "$M" verify --json "$T/cut.gguf"
vg 3 "$M" verify "$T/no-such.gguf"

# --- convert -------------------------------------------------------------------------
if has_cmd convert; then
    vg 0 "$M" inspect "$T/llama3"
    vg 0 "$M" convert "$T/llama3" -o "$T/l3.gguf" --type f16 -q
    vg 0 "$M" convert "$T/llama3" -o "$T/l3q.gguf" --type q8_0 -q
    vg 0 "$M" convert "$T/qwen2" -o "$T/qw.gguf" --type bf16 -q
    vg 1 "$M" convert "$T/empty" -o "$T/x.gguf"
    vg 2 "$M" convert "$T/llama3" -o "$T/x.gguf" --type q4_k
fi

# --- quant -----------------------------------------------------------------------------
QSRC=$T/l3.gguf
[ -f "$QSRC" ] || QSRC=$D/reference/tinyllama-8m.llamacpp-f16.gguf
vg 0 "$M" quant "$QSRC" -o "$T/q4km.gguf" --preset Q4_K_M -t 2 -q
vg 0 "$M" quant "$QSRC" -o "$T/iq4.gguf" --preset IQ4_NL -t 1 -q
vg 0 "$M" quant "$QSRC" --dry-run --preset Q3_K_M
# an imatrix whose entry does not fit the tensor: exit 1 naming both
vg 1 "$M" quant "$QSRC" -o "$T/imat.gguf" --preset Q4_K_S -q \
    --imatrix "$src/tests/fuzz/corpus/imatrix/legacy.dat"
vg 1 "$M" quant "$QSRC" -o "$T/x.gguf" --preset Q4_K_M --imatrix "$T/cut.gguf"
vg 2 "$M" quant "$QSRC" -o "$T/x.gguf" --preset Q9_X
has_cmd convert && vg 0 "$M" quant "$T/qwen2" -o "$T/qwq.gguf" --preset Q5_K_M -q
vg 0 "$M" verify --deep "$T/q4km.gguf" --junit "$T/verify.xml"
vg 0 "$M" quant --help-man

# --- run, perplexity (and the phone binary) ---------------------------------------------
if [ $have_rt = 1 ]; then
    vg 0 "$M" run -m "$T/m.gguf" -p "It was" -n 8 --temp 0 -q
    vg 0 "$M" run -m "$T/m.gguf" -p "It was" -n 8 --temp 0.8 --seed 3 --kv-type q8_0 -t 2 -q
    vg 0 "$M" perplexity "$T/m.gguf" "$T/eval.txt" --ctx 32 --chunks 2 -q
    vg 0 "$M" eval "$T/m.gguf" --reference "$T/m.gguf" --text "$T/eval.txt" --ctx 32 --chunks 2 \
        --max-kld 0 --junit "$T/eval.xml" -q
    vg 1 "$M" eval "$T/m.gguf" --reference "$T/m.gguf" --text "$T/eval.txt" --ctx 32 --chunks 2 \
        --max-ppl-ratio 0.5 -q
    vg 1 "$M" run -m "$T/cut.gguf" -p hi
    [ -x "$MR" ] && vg 0 "$MR" -m "$T/m.gguf" -p "It was" -n 4 --temp 0 -q
fi

# --- calib, plan ----------------------------------------------------------------------------
if has_cmd calib; then
    vg 0 "$M" calib "$T/llama3" --corpus "$T/calib.txt" -o "$T/c.imatrix" --samples 2 \
        --seq-len 32 -t 1 -q
    : > "$T/empty.txt"
    vg 1 "$M" calib "$T/llama3" --corpus "$T/empty.txt" -o "$T/x.imatrix"
    [ -f "$T/c.imatrix" ] &&
        vg 0 "$M" quant "$T/l3.gguf" -o "$T/cq.gguf" --preset Q4_K_M --imatrix "$T/c.imatrix" -q
fi
if has_cmd plan; then
    vg 0 "$M" plan "$T/llama3"
    [ $have_rt = 1 ] && vg 0 "$M" plan "$T/m.gguf" --ram 1G --ctx 512
fi

# --- unit tests without fork (CK_FORK=no: memcheck sees the tests themselves) ----------------
for t in check_core check_verify; do
    [ -x "$build/tests/$t" ] || continue
    CK_FORK=no CK_TIMEOUT_MULTIPLIER=50 vg 0 "$build/tests/$t"
done

echo "valgrind: $runs runs, $fails failed"
[ $fails -eq 0 ]
