# Shared helpers of the runtime's tests/e2e/run_*.sh scripts (sourced).
# Environment from ctest (tests/CMakeLists.txt mw_shell_test): MW_BIN, MW_TMP,
# MW_EMU, MW_SHARED, MW_DATASETS, MW_SRC.
set -u
RUNBIN="$MW_BIN/memwall-run"
MEMWALL="$MW_BIN/memwall"
rm -rf "$MW_TMP" && mkdir -p "$MW_TMP" || exit 1
T=$MW_TMP
fails=0
SKIP=77
. "$(dirname "${BASH_SOURCE[0]}")/skip.sh"
EVAL="$MW_DATASETS/corpora/eval.txt"
REF_F16="$MW_DATASETS/reference/tinyllama-8m.llamacpp-f16.gguf"
PROMPT="It was a dark and stormy night, and"

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
finish() {
    if [ "$fails" -ne 0 ]; then
        echo "$fails failure(s)"
        exit 1
    fi
    echo "ok"
    exit 0
}

# mr WANT_RC ARGS...: memwall-run (under $MW_EMU) with stdout in $out,
# stderr in $err, exit status in $rc
mr() {
    local want=$1
    shift
    $MW_EMU "$RUNBIN" "$@" > "$T/out" 2> "$T/err" < /dev/null
    rc=$?
    out=$(cat "$T/out")
    err=$(cat "$T/err")
    if [ "$rc" -ne "$want" ]; then
        fail "memwall-run $*: exit $rc, want $want"
        echo "--- stdout"; echo "$out" | head -20; echo "--- stderr"; echo "$err" | head -20
        return 1
    fi
    return 0
}
has() { [[ $1 == *"$2"* ]] || fail "$3: output lacks '$2'"; }

# ppl_of OUTPUT: the perplexity figure of a "ppl X chunks ..." line
ppl_of() { awk '$1 == "ppl" { print $2; exit }' <<< "$1"; }
# close A B REL: |A-B| <= REL*|B|
close() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(a != "" && d <= r * m) }'; }
# reldiff A B: |A-B|/|B| in percent
reldiff() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.4f%%", 100 * d / (b < 0 ? -b : b) }'; }
