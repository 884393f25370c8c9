# Shared helpers of the tests/e2e/calib_*.sh scripts (sourced).
# Environment from ctest (mw_shell_test): MW_BIN, MW_TMP, MW_EMU, MW_SHARED,
# MW_DATASETS, MW_SRC.
set -u
MEMWALL="$MW_BIN/memwall"
FIX="$MW_SRC/tests/fixtures"
CMP="$MW_SRC/tests/tools/imatrix_compare.py"
TINY="$MW_DATASETS/tinyllama-8m"
TINY_GGUF="$MW_DATASETS/reference/tinyllama-8m.llamacpp-f16.gguf"
LC_IMATRIX="$MW_DATASETS/reference/tinyllama-8m.llamacpp.imatrix.gguf"
CALIB="$MW_DATASETS/corpora/calib.txt"
rm -rf "$MW_TMP" && mkdir -p "$MW_TMP" || exit 1
T=$MW_TMP
fails=0
SKIP=77

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
finish() {
    if [ "$fails" -ne 0 ]; then
        echo "$fails failure(s)"
        exit 1
    fi
    echo "ok"
    exit 0
}
have_python() { command -v python3 > /dev/null 2>&1 && python3 -c 'import zipfile, struct' 2> /dev/null; }

# run WANT_RC ARGS...: memwall with stdout in $out, stderr in $err, exit in $rc
run() {
    local want=$1
    shift
    $MW_EMU "$MEMWALL" "$@" > "$T/out" 2> "$T/err"
    rc=$?
    out=$(cat "$T/out")
    err=$(cat "$T/err")
    if [ "$rc" -ne "$want" ]; then
        fail "memwall $*: exit $rc, want $want"
        echo "--- stdout"; echo "$out" | head -20; echo "--- stderr"; echo "$err" | head -20
        return 1
    fi
    return 0
}
has() { [[ $1 == *"$2"* ]] || fail "$3: output lacks '$2'"; }
