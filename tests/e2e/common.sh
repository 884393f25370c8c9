# Helpers shared by every tests/e2e/<area>_common.sh (sourced, then the
# area's own helpers). Environment from ctest (tests/CMakeLists.txt
# mw_shell_test): MW_BIN, MW_TMP, MW_EMU, MW_SHARED, MW_DATASETS, MW_SRC.
set -u
MEMWALL="$MW_BIN/memwall"
FIX="$MW_SRC/tests/fixtures"
rm -rf "$MW_TMP" && mkdir -p "$MW_TMP" || exit 1
T=$MW_TMP
fails=0
SKIP=77
. "$(dirname "${BASH_SOURCE[0]}")/skip.sh"

# scratch_on_shm NAME: move $T to a fresh /dev/shm dir when there is one (the
# gguf writer fsyncs every output, ~0.5 s per file on some build disks);
# removed on exit, MW_TMP keeps a pointer. Callers skip it on request.
scratch_on_shm() {
    [ -d /dev/shm ] && [ -w /dev/shm ] || return 0
    local d
    d=$(mktemp -d "/dev/shm/memwall-$1.XXXXXX") || return 0
    T=$d
    echo "$T" > "$MW_TMP/scratch-dir"
    trap 'rm -rf "$T"' EXIT
}

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
finish() {
    if [ "$fails" -ne 0 ]; then
        echo "$fails failure(s)"
        exit 1
    fi
    echo "ok"
    exit 0
}
have_python() {
    command -v python3 > /dev/null 2>&1 && python3 -c 'import json, struct, zipfile' 2> /dev/null
}
# The Python helpers of the tests (tests/lib): mwgguf SUBCOMMAND ARGS... is
# the GGUF toolkit (python3 tests/lib/mwgguf.py help lists its subcommands)
PYLIB="$MW_SRC/tests/lib"
mwgguf() { python3 "$PYLIB/mwgguf.py" "$@"; }

# run_bin NAME BIN WANT_RC ARGS...: BIN (under $MW_EMU) with stdout in $out,
# stderr in $err, exit status in $rc; a status other than WANT_RC is a
# failure (the command named NAME), shown with the head of both outputs
run_bin() {
    local name=$1 bin=$2 want=$3
    shift 3
    $MW_EMU "$bin" "$@" > "$T/out" 2> "$T/err"
    rc=$?
    out=$(cat "$T/out")
    err=$(cat "$T/err")
    if [ "$rc" -ne "$want" ]; then
        fail "$name $*: exit $rc, want $want"
        echo "--- stdout"; echo "$out" | head -20; echo "--- stderr"; echo "$err" | head -20
        return 1
    fi
    return 0
}
# run WANT_RC ARGS...: memwall (run_bin)
run() { run_bin memwall "$MEMWALL" "$@"; }
has() { [[ $1 == *"$2"* ]] || fail "$3: output lacks '$2'"; }

# model_dir NAME: datasets/NAME if it holds a checkpoint, else shared/models/NAME; "" if neither
model_dir() {
    if [ -f "$MW_DATASETS/$1/config.json" ]; then echo "$MW_DATASETS/$1"
    elif [ -f "$MW_SHARED/models/$1/config.json" ]; then echo "$MW_SHARED/models/$1"
    else echo ""; fi
}
# ref FILE: datasets/reference/FILE, else shared/models/reference/FILE, else ""
ref() {
    if [ -f "$MW_DATASETS/reference/$1" ]; then echo "$MW_DATASETS/reference/$1"
    elif [ -f "$MW_SHARED/models/reference/$1" ]; then echo "$MW_SHARED/models/reference/$1"
    else echo ""; fi
}

# find_peer: path of llama-peer in $PEER, or "" when tests/peer/setup.sh says unavailable (77)
find_peer() {
    PEER=$(bash "$MW_SRC/tests/peer/setup.sh" 2> "$T/peer-setup.log")
    local prc=$?
    if [ $prc -eq 77 ]; then
        echo "llama-peer unavailable: $(tail -n 1 "$T/peer-setup.log")"
        PEER=""
        return 0
    fi
    if [ $prc -ne 0 ]; then
        fail "tests/peer/setup.sh failed ($prc)"
        cat "$T/peer-setup.log"
        PEER=""
    fi
    PEER=$(echo "$PEER" | tail -n 1)
}
# need_peer: find_peer, and without a peer the test ends there: a skip (77)
# when the peer is unavailable here, a failure when its setup failed
need_peer() {
    find_peer
    [ -n "$PEER" ] || { [ "$fails" -eq 0 ] && skip "llama.cpp peer unavailable"; finish; }
}
